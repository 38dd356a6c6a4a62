"""Instructions per forward call (or train step) of one ``models.py`` workload, eager or sot, counted by callgrind.

Wall-clock ratios on this shared 2-CPU machine move by several percent with the load; instruction counts do
not. Run under valgrind (the script says how when run without it)::

    valgrind --tool=callgrind --toggle-collect=functools_reduce --callgrind-out-file=/tmp/cg.%p \\
        .venv/bin/python benchmarks/instructions.py tensor_if/- sot --calls 200
    callgrind_annotate /tmp/cg.<pid> | head

Only the timed calls are counted: they run inside one ``functools.reduce`` (a C function, toggled on by
``--toggle-collect``), after ``--warmup`` untimed calls (the default settles sot's cost model as
``models.py``'s warm-up does: 1 + 12 forward calls and 3 train steps, then more forward calls). Divide the
total (``callgrind_annotate``'s ``PROGRAM TOTALS``, or ``--summary`` below) by ``--calls``.

Under valgrind the cost model's timings mean nothing, so a graph it decides on may go either way: set
``SOT_MIN_GRAPH_SIZE`` (or pick a workload whose graphs are all below ``min_graph_size``, such as tensor_if)
to fix the way, and say which in a result.
"""
from __future__ import annotations

import argparse
import functools
import os
import sys

os.environ.setdefault("GLOG_minloglevel", "2")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import models  # noqa: E402  (benchmarks/models.py: the workloads)


def _instrument_on() -> None:
    """Ask callgrind to instrument from now on (it polls for the command while this process waits)."""
    import subprocess
    import time

    proc = subprocess.Popen(["callgrind_control", "--instr=on", str(os.getpid())],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while proc.poll() is None:
        time.sleep(0.01)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", help="a models.py workload, e.g. tensor_if/- or data_dependent_branch/tiny")
    parser.add_argument("variant", choices=["eager", "sot"])
    parser.add_argument("--calls", type=int, default=200, help="counted forward calls (default 200)")
    parser.add_argument("--train-step", action="store_true",
                        help="count train steps (forward, loss, backward, Adam step, clear_grad) instead of forward "
                             "calls")
    parser.add_argument("--warmup", type=int, default=100, help="untimed forward calls after the train steps")
    parser.add_argument("--instrument-here", action="store_true",
                        help="with valgrind's --instr-atstart=no: turn instrumentation on just before the counted "
                             "calls (callgrind_control -i on), so the imports and warm-up run several times faster")
    args = parser.parse_args()

    work = models.WORKLOADS[args.workload]
    model = work.build()
    model.train()
    inputs = work.inputs()
    fn = models.make_variant(args.variant, model)
    step = models.make_train_step(fn, model, inputs, work.loss)
    for _ in range(1 + models.SETTLE_CALLS):
        fn(*inputs)
    for _ in range(3):
        step()
    for _ in range(args.warmup):
        fn(*inputs)
    if args.instrument_here:
        _instrument_on()
    counted = step if args.train_step else functools.partial(fn, *inputs)
    functools.reduce(lambda acc, _: counted(), range(args.calls), None)
    if args.variant == "sot":
        print("sot.stats():", models.sot.stats(), file=sys.stderr)


if __name__ == "__main__":
    main()

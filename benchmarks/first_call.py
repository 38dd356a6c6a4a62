"""First forward call of a model: sot against Paddle's AST ``to_static``, in CPU time, and where sot's goes.

    python benchmarks/first_call.py --models vgg11/tiny,resnet18/tiny --rounds 5
    python benchmarks/first_call.py --models vgg11/tiny --rounds 3 --phases      # sot's phases too
    python benchmarks/first_call.py --models vgg11/tiny --trees /tmp/base,.      # two sot checkouts and AST

Each (model, variant) runs in a fresh process, as ``models.py``'s memory child does: the variant's machinery
is warmed up on a throwaway layer, the model is built, and the first forward call is timed in thread CPU and
process CPU. The variants run interleaved round after round, so that the load of the machine hits them alike;
the table holds medians over rounds. AST does part of its first call in another thread (its program runs in
Paddle's multi-thread mode), so process CPU is the fair comparison; wall time is left out (a loaded machine).

``--phases``: the sot children also time their phases (thread CPU, nested phases are included in the
enclosing ones): translation, and inside it meta inference, the guard and the program for the SIR; then
Paddle building the program from the SIR, its parameters among it, and the first run (its forward/backward
program split and passes, then the interpreter build and run). cProfile cannot be used on a translation: sot
steps aside while a profiler is installed.
"""
from __future__ import annotations

import argparse
import collections
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Callable

os.environ.setdefault("GLOG_minloglevel", "2")

HERE = os.path.dirname(os.path.abspath(__file__))


# -- the child ------------------------------------------------------------------------------------------------
def _phases() -> list[tuple[Any, str, str]]:
    """(owner, function name, label) of each timed phase, in the order printed (nesting by indentation)."""
    from paddle.jit.dy2static import parameter_recorder, pir_partial_program, program_translator

    from sot.opcode_translator import callback, transform
    from sot.opcode_translator.executor import function_graph

    return [
        (callback, "translate_frame", "translation"),
        (function_graph, "infer_meta", "  meta inference"),
        (function_graph.FunctionGraph, "build_guard", "  guard"),
        (transform, "compile_graph", "  program for the SIR"),
        (program_translator.ConcreteProgram, "pir_from_func_spec", "Paddle: program built from the SIR"),
        (parameter_recorder.ParametersRecorder, "get", "  static values of layer tensors (also in meta inference)"),
        (pir_partial_program.PartialProgramLayer, "sot_call", "first run"),
        (pir_partial_program.PartialProgramLayer, "_create_program", "  forward/backward programs"),
    ]


def _phase_timers() -> collections.Counter:
    """Wrap sot's and Paddle's phase functions with thread-CPU timers (wrappers sot never translates)."""
    from sot.opcode_translator.skip_files import skip_code

    spent: collections.Counter = collections.Counter()

    def timed(owner: Any, name: str, label: str) -> None:
        original = getattr(owner, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.thread_time()
            try:
                return original(*args, **kwargs)
            finally:
                spent[label] += time.thread_time() - start

        skip_code(wrapper.__code__)
        setattr(owner, name, wrapper)

    for owner, name, label in _phases():
        timed(owner, name, label)
    return spent


def child_main(workload: str, variant: str, phases: bool) -> None:
    sys.path.insert(0, HERE)
    import models

    wl = models.WORKLOADS[workload]
    models.warm_up_machinery(variant)
    spent = _phase_timers() if phases and variant == "sot" else collections.Counter()
    gc.collect()
    model = wl.build()
    model.train()
    inputs = wl.inputs()
    fn = models.make_variant(variant, model)
    gc.collect()
    thread, process = time.thread_time(), time.process_time()
    fn(*inputs)
    result = {"thread": time.thread_time() - thread, "process": time.process_time() - process}
    result.update((label, spent[label]) for _, _, label in (_phases() if spent else []))
    print("FIRST-CALL " + json.dumps(result), flush=True)


# -- the parent -----------------------------------------------------------------------------------------------
def run_child(tree: str, workload: str, variant: str, phases: bool) -> dict[str, float]:
    """One fresh process on the sot checkout ``tree`` (its ``benchmarks/models.py`` and ``sot``)."""
    script = os.path.join(tree, "benchmarks", "first_call.py")
    cmd = [sys.executable, script, "--child", workload, variant] + (["--phases"] if phases else [])
    env = {**os.environ, "PYTHONPATH": tree}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("FIRST-CALL "):
            return json.loads(line[len("FIRST-CALL "):])
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    raise RuntimeError(f"{workload} {variant} ({tree}): {tail}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="vgg11/tiny,vgg11/large,resnet18/tiny,squeezenet/tiny",
                        help="comma-separated models.py workloads")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--trees", default=os.path.dirname(HERE),
                        help="comma-separated sot checkouts to compare (AST runs from the first)")
    parser.add_argument("--phases", action="store_true", help="time sot's phases too")
    parser.add_argument("--child", nargs=2, metavar=("WORKLOAD", "VARIANT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child_main(*args.child, phases=args.phases)
        return 0

    trees = [os.path.abspath(tree) for tree in args.trees.split(",")]
    runs: list[tuple[str, Callable[[str], dict[str, float]]]] = [
        (f"sot {tree}" if len(trees) > 1 else "sot", lambda w, t=tree: run_child(t, w, "sot", args.phases))
        for tree in trees]
    runs.append(("AST", lambda w: run_child(trees[0], w, "ast", False)))
    for workload in args.models.split(","):
        samples: dict[str, list[dict[str, float]]] = collections.defaultdict(list)
        for _ in range(args.rounds):
            for label, run in runs:
                samples[label].append(run(workload))
        print(f"\n{workload}: first forward call, median of {args.rounds} fresh processes (ms)")
        for label, results in samples.items():
            medians = {key: statistics.median(r.get(key, 0.0) for r in results) * 1000
                       for key in dict.fromkeys(key for result in results for key in result)}
            print(f"  {label}: thread CPU {medians.pop('thread'):.1f}, process CPU {medians.pop('process'):.1f}")
            for phase, value in medians.items():  # (phase labels are indented by nesting)
                print(f"      {phase} {value:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

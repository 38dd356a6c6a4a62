"""Stress run of the concurrent scenarios of test_threads.py, on demand (not collected by pytest).

    python -m tests.reliability.stress_threads                          # same_function_cold, min_graph_size=10
    python -m tests.reliability.stress_threads --scenario different_functions --min-graph-size 0 -n 200

Runs one scenario again and again in this process, each time after ``sot.reset()`` (so "cold" scenarios
translate concurrently every time), with ``faulthandler`` on: a crash prints every thread's Python stack.
Bug found with it (issue 9, fixed): same_function_cold with min_graph_size=10 segfaulted inside Paddle's
eager ``x * n`` (``sot_shadow_run`` -> ``_PyEval_EvalFrameDefault`` -> libpaddle, tensor ``__mul__``) about
once in a hundred or a few hundred iterations. The hook was innocent: Paddle initialises a thread's
(thread-local) dygraph tracer, on the thread's first Paddle call, from a module global that the thread
building a static program had set to None for the time of the build (``_dygraph_guard(None)``); the new thread
then ran in static mode with no tracer, and its first eager op dereferenced it. Each iteration starts new
threads, which is why it showed here and not with long-lived threads. See sot/symbolic/tracer_inheritance.py
(new threads inherit the tracer of the process as it was outside sot's builds).
Also found with it (issue 9, fixed): training_one_layer, a scope of the program runner handed to a run of one
thread while another thread's backward was freeing it (see sot/symbolic/kept_scope.py).
"""
from __future__ import annotations

import argparse
import faulthandler
import os
import sys
import time
import traceback
import warnings

os.environ.setdefault("GLOG_minloglevel", "2")
warnings.simplefilter("ignore")

import sot  # noqa: E402

from . import test_threads  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.reliability.stress_threads", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", default="same_function_cold",
                        choices=["same_function_warm", "same_function_cold", "same_function_cold_repeated",
                                 "different_functions", "training_one_layer"])
    parser.add_argument("--min-graph-size", type=int, default=10)
    parser.add_argument("-n", "--iterations", type=int, default=400)
    args = parser.parse_args(argv)
    faulthandler.enable(all_threads=True)  # (after Paddle's import: chains to its own handler)
    scenario = getattr(test_threads, f"scenario_{args.scenario}")
    failures = 0
    started = time.time()
    for iteration in range(1, args.iterations + 1):
        sot.reset()
        try:
            scenario(args.min_graph_size)
        except Exception:  # noqa: BLE001 - counted and printed, the run goes on
            failures += 1
            print(f"iteration {iteration} failed:", flush=True)
            traceback.print_exc()
        if iteration % 50 == 0:
            print(f"... {iteration} iterations, {failures} failures, {time.time() - started:.0f}s", flush=True)
    print(f"{args.iterations} iterations of {args.scenario} (min_graph_size={args.min_graph_size}): "
          f"{failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

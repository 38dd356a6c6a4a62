"""The long fuzzing run, on demand.

    python -m tests.fuzz.run --count 5000            # seeds 0..4999
    python -m tests.fuzz.run --start 10000 --count 500  # the extended generator (sets, yield, with...)
    python -m tests.fuzz.run --start 80000 --count 500  # plus generator managers, breaks in with/except/finally
    python -m tests.fuzz.run --start 100000 --count 500  # plus tensor loop exits, in-place methods, Bag...
    python -m tests.fuzz.run --start 120000 --count 500  # plus dicts of tensors, GCACHE, Obj2, raise from...
    python -m tests.fuzz.run --start 140000 --count 500  # plus argsort/topk/unbind/masks, GATE, match, **kwargs...
    python -m tests.fuzz.run --start 200000 --count 500  # plus 2-D/3-D tensors whose sizes change (shapes.py)
    python -m tests.fuzz.run --seed 123              # one program, printed with its outcome
    python -m tests.fuzz.run --seed 123 --show       # just print the program
    python -m tests.fuzz.run --count 500 --way eager --min-graph-size 0  # every graph its eager replay

Each failure prints the seed, the run that differed, the difference and the program source. Fallbacks caused by
internal errors of the translator (results still correct) are counted and listed at the end.
"""
from __future__ import annotations

import argparse
import collections
import os
import sys
import time

os.environ.setdefault("GLOG_minloglevel", "2")

import warnings  # noqa: E402

warnings.filterwarnings("ignore", message="No ccache found")

from .generator import generate  # noqa: E402
from .harness import check_program, watch_internal_errors  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz.run", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--start", type=int, default=0, help="first seed")
    parser.add_argument("--count", type=int, default=1000, help="number of programs")
    parser.add_argument("--seed", type=int, help="run (or --show) this one seed")
    parser.add_argument("--show", action="store_true", help="print the program of --seed and exit")
    parser.add_argument("--min-graph-size", type=int, help="override the per-seed min_graph_size (0 or 10)")
    parser.add_argument("--way", choices=("compiled", "eager"),
                        help="run every compiled graph as its static program or as its eager replay")
    parser.add_argument("--max-failures", type=int, default=50, help="stop after this many failures")
    parser.add_argument("--quiet", action="store_true", help="print only the seeds of failures")
    args = parser.parse_args(argv)

    seeds = [args.seed] if args.seed is not None else range(args.start, args.start + args.count)
    if args.show:
        program = generate(args.seed if args.seed is not None else args.start)
        print(program.source + program.describe_inputs())
        return 0
    failures = []
    started = time.time()
    with watch_internal_errors() as internal:
        for done, seed in enumerate(seeds, 1):
            program = generate(seed)
            if args.min_graph_size is not None:
                program.min_graph_size = args.min_graph_size
            failure = check_program(program, way=args.way)
            if failure is not None:
                failures.append(failure)
                print(f"FAIL seed {seed}" if args.quiet else f"FAIL {failure}", flush=True)
                if len(failures) >= args.max_failures:
                    print(f"stopping after {len(failures)} failures")
                    break
            if done % 100 == 0:
                print(f"... {done} programs, {len(failures)} failures, {time.time() - started:.0f}s",
                      file=sys.stderr, flush=True)
    print(f"{done} programs in {time.time() - started:.1f}s: {len(failures)} failures"
          + (f" (seeds {[f.program.seed for f in failures]})" if failures else ""))
    if internal.messages:
        counts = collections.Counter(m.split(" (at ")[0][:200] for m in internal.messages)
        print(f"{len(internal.messages)} fallbacks on internal errors of the translator:")
        for message, count in counts.most_common():
            print(f"  {count:5d} x {message}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

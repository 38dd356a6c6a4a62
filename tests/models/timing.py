"""Forward timings of the zoo, eager vs sot (steady state): ``python -m tests.models.timing [names...]``.

Information only (not a test): the median of ``--calls`` forward calls after ``--warmup`` calls, in train
mode with gradients recorded, plus what sot did (``sot.stats()``) for each model.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings

os.environ.setdefault("GLOG_minloglevel", "2")
warnings.filterwarnings("ignore")

if __package__ in (None, ""):  # run as a script: make ``models.zoo`` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from models.zoo import ZOO  # type: ignore[no-redef]
else:
    from .zoo import ZOO

import paddle  # noqa: E402

import sot  # noqa: E402


def median_time(fn, inputs: tuple, warmup: int, calls: int) -> float:
    for _ in range(warmup):
        fn(*inputs)
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        fn(*inputs)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("names", nargs="*", default=list(ZOO))
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args(argv)
    print(f"{'model':24s} {'eager ms':>9s} {'sot ms':>9s} {'ratio':>6s} {'first call s':>12s}  sot.stats()")
    for name in args.names:
        spec = ZOO[name]
        model = spec.build()
        model.train()
        inputs = spec.inputs()
        eager = median_time(model, inputs, args.warmup, args.calls)
        sot.reset()
        fast = sot.symbolic_translate(model)
        start = time.perf_counter()
        fast(*inputs)
        first = time.perf_counter() - start
        translated = median_time(fast, inputs, args.warmup, args.calls)
        s = sot.stats()
        print(f"{name:24s} {eager * 1e3:9.2f} {translated * 1e3:9.2f} {translated / eager:6.2f} {first:12.2f}  "
              f"graphs={s.compiled_graphs} breaks={s.graph_breaks} fallbacks={s.fallbacks} "
              f"translations={s.translate_count}", flush=True)


if __name__ == "__main__":
    main()

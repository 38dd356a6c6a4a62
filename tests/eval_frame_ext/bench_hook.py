"""Micro-benchmark of the eval-frame hook's per-call cost (not a test).

    .venv-3.X/bin/python tests/eval_frame_ext/bench_hook.py [--calls N] [--repeat R]

Times a call of ``inc(x): return x + 1`` (and of a closure ``clo(x)`` with one
free variable) in a loop, and prints the per-call time of each variant and what
it adds over the plain call (no callback installed):

  skip          a callback is installed, the code is marked SKIP
  hit, C guard  identity translation served from the cache, guard ``slice``
                (a C callable: the hook + cache + shadow frame, no Python guard)
  hit, Py guard the same with a Python guard ``def guard(*_): return True``
  closure hit   ``clo(x)`` (one free variable), C guard: on 3.10 the closure
                tuple is rebuilt from the frame for the guard

The minimum over R repetitions of N calls each is used.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from hook_loader import efx  # noqa: E402


def inc(x):
    return x + 1


def make_clo(k):
    def clo(x):
        return x + k

    return clo


clo = make_clo(1)


def py_guard(*_):
    return True


def loop_inc(n):
    for _ in range(n):
        inc(1)


def loop_clo(n):
    for _ in range(n):
        clo(1)


def per_call_ns(loop, calls, repeat):
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        loop(calls)
        best = min(best, time.perf_counter() - t0)
    return best / calls * 1e9


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()

    def callback_for(table):
        def callback(code, *rest):
            return table.get(code, efx.SKIP)

        return callback

    variants = [
        ("plain call", loop_inc, None),
        ("skip", loop_inc, {}),
        ("hit, C guard", loop_inc, {inc.__code__: (slice, inc.__code__)}),
        ("hit, Py guard", loop_inc, {inc.__code__: (py_guard, inc.__code__)}),
        ("closure plain", loop_clo, None),
        ("closure hit, C guard", loop_clo, {clo.__code__: (slice, clo.__code__)}),
    ]
    results = {}
    for name, loop, table in variants:
        efx.reset_cache()
        if table is None:
            results[name] = per_call_ns(loop, args.calls, args.repeat)
            continue
        hits0 = efx.hit_count()
        with efx.callback_installed(callback_for(table)):
            loop(10)  # warm up: the miss, then hits
            results[name] = per_call_ns(loop, args.calls, args.repeat)
        hits = efx.hit_count() - hits0
        expected = (10 + args.calls * args.repeat) if table else 0
        assert hits >= expected - 1, (name, hits, expected)

    print("Python %s, %d calls x %d repeats (best)" % (sys.version.split()[0], args.calls, args.repeat))
    for name, _, _ in variants:
        base = results["closure plain" if name.startswith("closure") else "plain call"]
        extra = results[name] - base
        print("  %-22s %7.1f ns/call   %+7.1f ns" % (name, results[name], extra))


if __name__ == "__main__":
    main()

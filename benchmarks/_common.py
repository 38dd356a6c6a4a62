"""Shared helpers for the benchmark scripts in this folder.

The benchmarks are plain scripts (``python benchmarks/<name>.py``); this module sits next to them and is
imported as ``_common`` (the script's folder is ``sys.path[0]``).

Method used by every script (see README.md):

* every variant is warmed up (first calls compile) and its output checked before anything is timed;
* variants are timed *interleaved*: several rounds, each round runs every variant for ``calls`` calls,
  round-robin, with the starting variant rotated each round, so that slow drifts of the machine (other
  processes, frequency, thermal) hit all variants alike;
* the per-call time of a variant is the median over rounds; comparisons with a baseline are made within
  a round (ratio and difference per round, then the median over rounds), which cancels most of the
  round-to-round noise;
* absolute times depend on the machine: quote ratios, and always with the machine description.
"""
from __future__ import annotations

import contextlib

import argparse
import cProfile
import ctypes
import dataclasses
import datetime
import gc
import io
import itertools
import os
import platform
import pstats
import statistics
import subprocess
import sys
import time
from typing import Any, Callable, Iterable, Sequence

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The checkout this script is in, not an installed (editable) ``sot`` elsewhere: a script's own folder is
# ``sys.path[0]``, so without this a benchmark run from a git worktree imported the main checkout's package.
# After the PYTHONPATH entries, which still choose (first_call.py's ``--trees`` runs its children so).
if REPO not in sys.path:
    sys.path.insert(1 + len([p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]), REPO)


# -- variants and timing ----------------------------------------------------------------------------------
@dataclasses.dataclass
class Variant:
    """One thing to time: ``fn(*args)`` is one call. ``baseline`` names the variant it is compared to."""

    key: str
    label: str
    fn: Callable[..., Any]
    args: tuple = ()
    baseline: str | None = None


def time_calls(fn: Callable[..., Any], args: tuple, calls: int, disable_gc: bool = True,
               cpu_out: list[float] | None = None) -> float:
    """Seconds per call of ``fn(*args)``, averaged over ``calls`` back-to-back calls (loop included).
    With ``cpu_out``, the process CPU time per call (all threads, ``time.process_time``) is appended to it."""
    loop = itertools.repeat(None, calls)
    gc_was_enabled = gc.isenabled()
    if disable_gc:
        gc.disable()
    try:
        cpu_start = time.process_time() if cpu_out is not None else 0.0
        start = time.perf_counter()
        for _ in loop:
            fn(*args)
        elapsed = time.perf_counter() - start
        if cpu_out is not None:
            cpu_out.append((time.process_time() - cpu_start) / calls)
    finally:
        if gc_was_enabled:
            gc.enable()
    return elapsed / calls


#: Idle time before each timed batch (see `interleave`).
SETTLE_S = 0.01


def interleave(variants: Sequence[Variant], rounds: int, calls: int,
               after_batch: Callable[[Variant, int], None] | None = None,
               progress: bool = False, cpu_samples: dict[str, list[float]] | None = None,
               settle_s: float = SETTLE_S) -> dict[str, list[float]]:
    """Per-call seconds of each variant, one sample per round; rounds are round-robin over the variants,
    the starting variant rotated every two rounds and every other round run in reverse order.
    ``after_batch(variant, calls)`` runs after each timed batch, outside the timing (for consistency
    checks). A ``cpu_samples`` dict receives the per-call process CPU time of the same batches (less
    sensitive than wall time to other processes' load).

    Each batch starts after ``settle_s`` of idle time: a static program's run leaves work behind in Paddle's
    threads (its executor's workers, the collector freeing dead tensors in batches), which otherwise lands
    in the next variant's batch. Rotation alone keeps the cyclic order, so a variant always followed the
    same one: measured on small_ops_200 and data_dependent_branch/large (2026-12-02, 2 cores), sot's forward
    was 1.06x eager right after Paddle's SOT and 0.96x right after eager, and 0.98x either way with 10 ms of
    idle. Reversing every other round makes each variant follow another neighbour in half the rounds: in a
    quiet full run with the cyclic order (2026-12-03), sot's train step of small_ops_200 still read 1.15x
    eager in wall time (1.12x process CPU), where callgrind counts it at 1.001x eager's instructions (sot
    runs the original code natively there)."""
    samples: dict[str, list[float]] = {v.key: [] for v in variants}
    if cpu_samples is not None:
        for v in variants:
            cpu_samples.setdefault(v.key, [])
    n = len(variants)
    for r in range(rounds):
        order = [variants[(r // 2 + i) % n] for i in range(n)]
        if r % 2:
            order.reverse()
        for variant in order:
            if settle_s > 0:
                time.sleep(settle_s)
            cpu_out = cpu_samples[variant.key] if cpu_samples is not None else None
            samples[variant.key].append(time_calls(variant.fn, variant.args, calls, cpu_out=cpu_out))
            if after_batch is not None:
                after_batch(variant, calls)
        gc.collect()
        if progress:
            print(f"  round {r + 1}/{rounds} done", file=sys.stderr, flush=True)
    return samples


def quantile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile, ``q`` in [0, 1]."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("quantile of no values")
    pos = (len(ordered) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


@dataclasses.dataclass
class Summary:
    key: str
    label: str
    median_us: float
    p25_us: float
    p75_us: float
    baseline: str | None
    ratio: float | None     # median over rounds of variant / baseline (same round)
    added_us: float | None  # median over rounds of variant - baseline (same round)


def summarize(variants: Sequence[Variant], samples: dict[str, list[float]]) -> list[Summary]:
    """Median per-call time of each variant and its paired comparison with its baseline."""
    out = []
    for v in variants:
        s = samples[v.key]
        ratio = added = None
        if v.baseline is not None:
            b = samples[v.baseline]
            ratio = statistics.median(x / y for x, y in zip(s, b))
            added = statistics.median(x - y for x, y in zip(s, b)) * 1e6
        out.append(Summary(v.key, v.label, statistics.median(s) * 1e6, quantile(s, 0.25) * 1e6,
                           quantile(s, 0.75) * 1e6, v.baseline, ratio, added))
    return out


# -- output -----------------------------------------------------------------------------------------------
def format_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], right: Sequence[bool] | None = None) -> str:
    """A Markdown table (readable as plain text too)."""
    rows = [[str(c) for c in row] for row in rows]
    right = list(right) if right is not None else [False] * len(headers)
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells, widths, right)) + " |"

    sep = "|" + "|".join(("-" * (w + 1) + ":") if r else ("-" * (w + 2)) for w, r in zip(widths, right)) + "|"
    return "\n".join([line(headers), sep, *(line(r) for r in rows)])


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for text in f:
                if text.startswith("model name"):
                    return text.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git_revision() -> str:
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                             text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return f"{rev}{' + uncommitted changes' if dirty else ''}" if rev else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def machine_description() -> str:
    """Date, machine and software versions, for the header of every result."""
    virt = ""
    try:
        with open("/proc/cpuinfo") as f:
            if " hypervisor" in f.read():
                virt = ", virtual machine"
    except OSError:
        pass
    lines = [
        f"date: {datetime.datetime.now().astimezone().strftime('%Y-%m-%d %H:%M %Z')}",
        f"machine: {_cpu_model()}, {os.cpu_count()} logical CPUs{virt}, {platform.system()} {platform.release()}",
        f"python: {platform.python_implementation()} {platform.python_version()}",
    ]
    try:
        import paddle

        device = "GPU" if paddle.device.is_compiled_with_cuda() else "CPU"
        lines.append(f"paddle: {paddle.__version__} ({device} build, device {paddle.device.get_device()})")
    except Exception:  # noqa: BLE001 - description only
        pass
    lines.append(f"sot: git {_git_revision()}")
    return "\n".join(lines)


# -- checks -----------------------------------------------------------------------------------------------
def assert_same_tensor(out: Any, ref: Any, what: str) -> None:
    """Raise unless ``out`` equals ``ref`` exactly (same shape, dtype and values)."""
    import numpy as np

    o, r = out.numpy(), ref.numpy()
    if o.shape != r.shape or o.dtype != r.dtype or not np.array_equal(o, r):
        raise AssertionError(f"{what}: output differs from eager: {o!r} != {r!r}")


_pythonapi_ready = False


def interpreter_eval_frame_is_default() -> bool:
    """True when no PEP 523 frame-evaluation hook is installed in this interpreter (CPython >= 3.9)."""
    global _pythonapi_ready
    api = ctypes.pythonapi
    if not _pythonapi_ready:
        api.PyInterpreterState_Get.restype = ctypes.c_void_p
        api._PyInterpreterState_GetEvalFrameFunc.restype = ctypes.c_void_p
        api._PyInterpreterState_GetEvalFrameFunc.argtypes = [ctypes.c_void_p]
        _pythonapi_ready = True
    current = api._PyInterpreterState_GetEvalFrameFunc(api.PyInterpreterState_Get())
    return current == ctypes.cast(api._PyEval_EvalFrameDefault, ctypes.c_void_p).value


# -- profiling --------------------------------------------------------------------------------------------
def cprofile_top(fn: Callable[..., Any], args: tuple, calls: int, top: int = 15, sort: str = "tottime") -> str:
    """cProfile ``calls`` calls of ``fn(*args)``; the ``top`` entries by ``sort``. Only Python functions
    and C functions called from Python appear; time spent in C extension internals (a PEP 523 hook, say)
    is attributed to whatever Python-visible call is around it."""
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        fn(*args)
    profiler.disable()
    buf = io.StringIO()
    pstats.Stats(profiler, stream=buf).sort_stats(sort).print_stats(top)
    return buf.getvalue()


# -- command line -----------------------------------------------------------------------------------------
def add_timing_args(parser: argparse.ArgumentParser, rounds: int, calls: int, quick_rounds: int,
                    quick_calls: int) -> None:
    """``--rounds``, ``--calls`` and ``--quick`` (smaller defaults, for a smoke run)."""
    parser.add_argument("--rounds", type=int, default=None,
                        help=f"timed rounds over all variants (default {rounds}; {quick_rounds} with --quick)")
    parser.add_argument("--calls", type=int, default=None,
                        help=f"calls per variant per round (default {calls}; {quick_calls} with --quick)")
    parser.add_argument("--quick", action="store_true", help="smoke run: few rounds and calls")
    parser.set_defaults(_timing_defaults=(rounds, calls, quick_rounds, quick_calls))


def resolve_timing_args(args: argparse.Namespace) -> tuple[int, int]:
    rounds, calls, quick_rounds, quick_calls = args._timing_defaults
    r = args.rounds if args.rounds is not None else (quick_rounds if args.quick else rounds)
    c = args.calls if args.calls is not None else (quick_calls if args.quick else calls)
    if r < 1 or c < 1:
        raise SystemExit("--rounds and --calls must be positive")
    return r, c


# -- paired comparisons between any two variants ------------------------------------------------------------
def paired_ratio(samples: Sequence[float], baseline: Sequence[float]) -> float:
    """Median over rounds of ``samples[r] / baseline[r]`` (both from the same round)."""
    return statistics.median(x / y for x, y in zip(samples, baseline))


def paired_ratio_to_best(samples: Sequence[float], *baselines: Sequence[float]) -> float:
    """Median over rounds of ``samples[r] / min(b[r] for b in baselines)``: the ratio to the better baseline
    of each round."""
    return statistics.median(x / min(b) for x, *b in zip(samples, *baselines))


def paired_difference_us(samples: Sequence[float], baseline: Sequence[float]) -> float:
    """Median over rounds of ``samples[r] - baseline[r]``, in microseconds."""
    return statistics.median(x - y for x, y in zip(samples, baseline)) * 1e6


def load_average() -> str:
    """The 1/5/15-minute load averages and the CPU count: other processes on the machine skew timings."""
    try:
        one, five, fifteen = os.getloadavg()
        return f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} on {os.cpu_count()} logical CPUs"
    except OSError:
        return "load average unknown"


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


# -- memory: the resident-set high-water mark of this process ---------------------------------------------
def proc_status_kb(field: str) -> int | None:
    """A ``kB`` field of ``/proc/self/status`` (``VmRSS``, ``VmHWM``, ...), or None where there is none."""
    try:
        with open("/proc/self/status") as f:
            for text in f:
                if text.startswith(field + ":"):
                    return int(text.split(":", 1)[1].split()[0])
    except (OSError, ValueError):
        pass
    return None


def reset_peak_rss() -> bool:
    """Reset this process's ``VmHWM`` to its current RSS (Linux >= 4.0: ``echo 5 > /proc/self/clear_refs``).
    False when that is not possible; ``VmHWM`` then still holds the peak since the process started."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]


def malloc_bytes() -> tuple[int, int] | None:
    """(bytes in use, bytes free but kept) of the C heap, all arenas (glibc's ``mallinfo2``, glibc >= 2.33;
    None elsewhere). C++ objects (Paddle's programs and interpreters) and, on CPU, Paddle's tensors live
    there; Python's small objects do not (they live in the interpreter's own arenas)."""
    try:
        libc = ctypes.CDLL(None)
        mallinfo2 = libc.mallinfo2
    except (OSError, AttributeError):
        return None
    mallinfo2.restype = _MallInfo2
    info = mallinfo2()
    return info.uordblks + info.hblkhd, info.fordblks


def memory_parts() -> dict[str, float]:
    """What this process's memory is made of now, in MB (fields missing where they cannot be read):
    ``rss``, ``file`` (file-backed pages: the code of the libraries that ran), ``anon``, ``tensors`` (Paddle's
    host tensors allocated, and their high-water mark ``tensor_peak`` since `reset_tensor_peak`), ``malloc``
    (C heap in use, tensors included) and ``malloc_free`` (freed but kept by the allocator)."""
    parts: dict[str, float] = {}
    for name, field in (("rss", "VmRSS"), ("file", "RssFile"), ("anon", "RssAnon")):
        value = proc_status_kb(field)
        if value is not None:
            parts[name] = value / 1024
    try:
        import paddle

        core = paddle.base.core
        parts["tensors"] = core.host_memory_stat_current_value("Allocated", 0) / 2**20
        parts["tensor_peak"] = core.host_memory_stat_peak_value("Allocated", 0) / 2**20
    except Exception:  # (another Paddle version)
        pass
    heap = malloc_bytes()
    if heap is not None:
        parts["malloc"], parts["malloc_free"] = heap[0] / 2**20, heap[1] / 2**20
    return parts


def reset_tensor_peak() -> None:
    """Start Paddle's host tensor high-water mark afresh (see `memory_parts`)."""
    with contextlib.suppress(Exception):
        import paddle

        paddle.base.core.host_memory_stat_reset_peak_value("Allocated", 0)


def interpreter_cache_mb() -> float | None:
    """The C heap Paddle's global interpreter cache holds (every static program's interpreters, kept for the
    life of the process), measured by emptying it: call it last (later static runs rebuild theirs)."""
    before = malloc_bytes()
    try:
        import paddle

        paddle.base.core.clear_executor_cache()
    except Exception:  # (another Paddle version)
        return None
    gc.collect()
    after = malloc_bytes()
    return None if before is None or after is None else (before[0] - after[0]) / 2**20


def peak_rss_kb() -> int | None:
    """Peak resident set size: ``VmHWM``, else ``ru_maxrss`` of ``getrusage`` (kB on Linux)."""
    value = proc_status_kb("VmHWM")
    if value is None:
        import resource

        value = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return value


# -- translators: hooks and Paddle SOT's own counters ------------------------------------------------------
def paddle_sot_translate_count() -> int | None:
    """Frames Paddle's SOT translated since import (an internal of Paddle; None if it moved)."""
    try:
        from paddle.jit.sot.opcode_translator.executor.executor_cache import OpcodeExecutorCache

        return OpcodeExecutorCache().translate_count
    except Exception:  # noqa: BLE001
        return None


def paddle_sot_compiled_graphs() -> int | None:
    """Sub-graphs Paddle's SOT has compiled (entries of its SIR compile cache; internal, None if it moved)."""
    try:
        from paddle.jit.sot.symbolic.compile_cache import CompileSIRCache

        return len(CompileSIRCache().cache)
    except Exception:  # noqa: BLE001
        return None


def hooks_left_installed() -> list[str]:
    """What is still installed after a translated call returned: a PEP 523 evaluator, sot's callback,
    Paddle's eval-frame callback. Empty when everything is back to normal."""
    problems = []
    if not interpreter_eval_frame_is_default():
        problems.append("a PEP 523 frame evaluator is still installed")
    try:
        from sot.eval_frame_ext import get_callback

        if get_callback() is not None:
            problems.append("sot's callback is still set")
    except ImportError:
        pass
    try:
        import paddle

        previous = paddle.framework.core.set_eval_frame(None)
        if previous is not None:
            paddle.framework.core.set_eval_frame(previous)
            problems.append("Paddle's eval-frame callback is still set")
    except Exception:  # noqa: BLE001
        pass
    return problems


@contextlib.contextmanager
def python_chain_guards():  # noqa: ANN201
    """Guards built inside run as the Python ``and`` chain they are compiled from (no C guard program): the
    state before the program, for an interleaved comparison."""
    from sot.opcode_translator.executor import guard as guard_module

    original = guard_module._fast_check

    def chain(builder, params, exprs):  # noqa: ANN001, ANN202
        namespace = dict(builder.namespace)
        exec(compile(guard_module._guard_source(", ".join(params), exprs), "<python chain guard>", "exec"),
             namespace)
        return namespace["__sot_guard"], None, list(exprs)

    guard_module._fast_check = chain
    try:
        yield
    finally:
        guard_module._fast_check = original

"""Interpreter state: ``sys.settrace`` debuggers and ``sys.setprofile`` profilers see the user's lines and calls
of translated functions (and are not themselves translated), results stay correct; recursion limits behave as
they do eagerly."""
from __future__ import annotations

import os
import sys
from typing import Any, Callable

import numpy as np
import paddle
import pytest

import sot

THIS_FILE = __file__


def helper(v):
    return v * 3


def traced(x, n):
    y = x + 1
    z = helper(y)
    if n > 0:
        z = z - n
    return z.sum()


WATCHED = ("traced", "helper")


def _with_tracer(fn: Callable[..., Any], *args: Any) -> tuple[Any, list[tuple[str, str, int]], Any]:
    events: list[tuple[str, str, int]] = []

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        if frame.f_code.co_filename == THIS_FILE and frame.f_code.co_name in WATCHED:
            events.append((event, frame.f_code.co_name, frame.f_lineno))
        return tracer

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        result = fn(*args)
    finally:
        sys.settrace(previous)
    return result, events, tracer


def _with_profiler(fn: Callable[..., Any], *args: Any) -> tuple[Any, list[tuple[str, str]], Any]:
    events: list[tuple[str, str]] = []

    def profiler(frame: Any, event: str, arg: Any) -> None:
        if event in ("call", "return") and frame.f_code.co_filename == THIS_FILE \
                and frame.f_code.co_name in WATCHED:
            events.append((event, frame.f_code.co_name))

    previous = sys.getprofile()
    sys.setprofile(profiler)
    try:
        result = fn(*args)
    finally:
        sys.setprofile(previous)
    return result, events, profiler


@pytest.mark.parametrize("warm", [False, True], ids=["first_call", "cache_hit"])
@pytest.mark.parametrize("min_graph_size", [0, 10])
def test_settrace_sees_the_user_lines_and_results_stay_correct(warm: bool, min_graph_size: int) -> None:
    x = paddle.ones([4])
    expected, eager_events, _ = _with_tracer(traced, x, 2)
    with sot.config.patch(min_graph_size=min_graph_size):
        translated = sot.symbolic_translate(traced)
        if warm:
            translated(x, 2)
        result, events, _ = _with_tracer(translated, x, 2)
    assert np.allclose(result.numpy(), expected.numpy())
    assert events == eager_events, f"a debugger sees\n{events}\ninstead of\n{eager_events}"


def test_settrace_callback_is_not_translated() -> None:
    from sot.eval_frame_ext import cache_entries

    x = paddle.ones([4])
    translated = sot.symbolic_translate(traced)
    with sot.config.patch(min_graph_size=0):
        _, _, tracer = _with_tracer(translated, x, 2)
    assert cache_entries(tracer.__code__) == [], "the trace function itself was translated"


@pytest.mark.parametrize("warm", [False, True], ids=["first_call", "cache_hit"])
def test_setprofile_sees_the_user_calls_and_results_stay_correct(warm: bool) -> None:
    x = paddle.ones([4])
    expected, eager_events, _ = _with_profiler(traced, x, 2)
    with sot.config.patch(min_graph_size=0):
        translated = sot.symbolic_translate(traced)
        if warm:
            translated(x, 2)
        result, events, _ = _with_profiler(translated, x, 2)
    assert np.allclose(result.numpy(), expected.numpy())
    assert events == eager_events, f"a profiler sees {events} instead of {eager_events}"


def test_setprofile_callback_is_not_translated() -> None:
    from sot.eval_frame_ext import cache_entries

    translated = sot.symbolic_translate(traced)
    with sot.config.patch(min_graph_size=0):
        _, _, profiler = _with_profiler(translated, paddle.ones([4]), 2)
    assert cache_entries(profiler.__code__) == [], "the profile function itself was translated"


def test_tracer_installed_by_the_user_inside_a_translated_function_sees_only_user_frames() -> None:
    """A function that sets and removes a tracer itself (as a debugger's ``set_trace`` would): the tracer sees
    the user's calls, never the translator's own frames, and results are the eager ones."""
    namespace: dict[str, Any] = {}
    # a helper with a code object never seen before, so that the call under the tracer is translated
    exec(compile("def fresh_helper(v):\n    return v * 3\n", "<fresh helper>", "exec"), namespace)
    fresh_helper = namespace["fresh_helper"]

    def body(x):
        seen = []

        def tracer(frame: Any, event: str, arg: Any) -> Any:
            if event == "call":
                seen.append((frame.f_code.co_name, frame.f_code.co_filename))
            return None

        sys.settrace(tracer)
        y = fresh_helper(x)
        sys.settrace(None)
        return y, seen

    expected, expected_seen = body(paddle.ones([2]))
    got, seen = sot.symbolic_translate(body)(paddle.ones([2]))
    assert np.allclose(got.numpy(), expected.numpy())
    sot_dir = os.path.dirname(sot.__file__)
    internal = sorted({name for name, filename in seen if filename.startswith(sot_dir)})
    assert not internal, f"the user's tracer saw {len(seen)} calls, of sot's own functions {internal[:10]}"
    assert seen == expected_seen


# -- recursion --------------------------------------------------------------------------------------------
def recursive(n, x):
    if n == 0:
        return x
    return recursive(n - 1, x + 1)


def _max_depth(fn: Callable[..., Any], x: Any) -> int:
    """The deepest ``n`` for which ``fn(n, x)`` works (the next tried raises RecursionError)."""
    ok, n = 0, 16
    while True:
        try:
            fn(n, x)
        except RecursionError:
            break
        ok, n = n, int(n * 1.2) + 1
    lo, hi = ok, n
    while hi - lo > 1:
        mid = (lo + hi) // 2
        try:
            fn(mid, x)
            lo = mid
        except RecursionError:
            hi = mid
    return lo


class _no_warning_check:
    """Recursion past the inlining depth fills the cache of the function: its cache-limit warning is expected."""
    def __enter__(self) -> None:
        import warnings

        self._catch = warnings.catch_warnings()
        self._catch.__enter__()
        warnings.simplefilter("ignore")

    def __exit__(self, *exc: Any) -> None:
        self._catch.__exit__(*exc)


@pytest.mark.parametrize("min_graph_size", [0, 10])
def test_recursion_limit_is_hit_at_a_similar_depth(min_graph_size: int) -> None:
    x = paddle.ones([2])
    eager = _max_depth(recursive, x)
    with sot.config.patch(min_graph_size=min_graph_size), _no_warning_check():
        translated = sot.symbolic_translate(recursive)
        depth = _max_depth(translated, x)
    assert eager / 2 <= depth <= eager * 1.1, f"translated recursion stops at {depth}, eager at {eager}"


@pytest.mark.parametrize("min_graph_size", [0, 10])
def test_deep_recursion_within_the_limit_works(min_graph_size: int) -> None:
    x = paddle.ones([2])
    depth = sys.getrecursionlimit() // 3
    with sot.config.patch(min_graph_size=min_graph_size), _no_warning_check():
        translated = sot.symbolic_translate(recursive)
        for n in (3, depth, 5, depth):  # shallow (inlined) and deep, translated and cached
            assert np.allclose(translated(n, x).numpy(), recursive(n, x).numpy())


def test_shallow_recursion_is_translated_into_one_graph() -> None:
    x = paddle.ones([2])
    with sot.config.patch(min_graph_size=0):
        explained = sot.explain(recursive, 4, x)
    assert np.allclose(explained.result.numpy(), recursive(4, x).numpy())


def _call_at_depth(k: int, fn: Callable[..., Any], x: Any) -> Any:
    if k == 0:
        return fn(x)
    return _call_at_depth(k - 1, fn, x)


def small(x):
    y = x * 2
    return y + 1


def _deepest_call(fn: Callable[..., Any], x: Any) -> int:
    lo, hi = 0, sys.getrecursionlimit()
    while hi - lo > 1:
        mid = (lo + hi) // 2
        try:
            _call_at_depth(mid, fn, x)
            lo = mid
        except RecursionError:
            hi = mid
    return lo


@pytest.mark.parametrize("min_graph_size", [0, 10])
def test_translated_call_near_the_recursion_limit_behaves_like_eager(min_graph_size: int) -> None:
    """Called with the stack almost full, a translated function works wherever eager has 5% of the limit to
    spare, and otherwise raises RecursionError (never another error): the translator's own recursion falls
    back instead of failing."""
    x = paddle.ones([2])
    eager_max = _deepest_call(small, x)
    with sot.config.patch(min_graph_size=min_graph_size):
        translated = sot.symbolic_translate(small)
        for k in range(eager_max - 30, eager_max + 2):
            sot.reset()
            try:
                out = _call_at_depth(k, translated, x)
            except RecursionError:
                assert k > eager_max - sys.getrecursionlimit() // 20, f"RecursionError at depth {k}, eager " \
                                                                     f"works up to {eager_max}"
                continue
            assert np.allclose(out.numpy(), small(x).numpy())

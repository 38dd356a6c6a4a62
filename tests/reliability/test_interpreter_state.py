"""Interpreter state: ``sys.settrace`` debuggers and ``sys.setprofile`` profilers see the user's lines and calls
of translated functions (and are not themselves translated), coverage.py measures them as it does eager code,
results stay correct; recursion limits behave as they do eagerly."""
from __future__ import annotations

import contextlib
import gc
import os
import sys
import warnings
from typing import Any, Callable, Iterator

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


HOOKS = {  # how a debugger (line events) and a profiler (calls only) watch the interpreter
    "settrace": (sys.gettrace, sys.settrace, ("call", "line", "return")),
    "setprofile": (sys.getprofile, sys.setprofile, ("call", "return")),
}


def _watched(hook: str, fn: Callable[..., Any], *args: Any) -> tuple[Any, list[tuple[str, str, int]], Any]:
    """``fn(*args)`` under a ``sys.settrace`` or ``sys.setprofile`` function: (result, the events it saw in
    this file's watched functions, the function itself)."""
    get, install, kinds = HOOKS[hook]
    events: list[tuple[str, str, int]] = []

    def watcher(frame: Any, event: str, arg: Any) -> Any:
        if event in kinds and frame.f_code.co_filename == THIS_FILE and frame.f_code.co_name in WATCHED:
            events.append((event, frame.f_code.co_name, frame.f_lineno))
        return watcher

    previous = get()
    install(watcher)
    try:
        result = fn(*args)
    finally:
        install(previous)
    return result, events, watcher


@pytest.mark.parametrize("hook", list(HOOKS))
@pytest.mark.parametrize("warm", [False, True], ids=["first_call", "cache_hit"])
@pytest.mark.parametrize("min_graph_size", [0, 10])
def test_a_debugger_or_profiler_sees_the_user_code_and_results_stay_correct(hook: str, warm: bool,
                                                                           min_graph_size: int) -> None:
    x = paddle.ones([4])
    expected, eager_events, _ = _watched(hook, traced, x, 2)
    assert ("call", "helper") in [event[:2] for event in eager_events], "the watcher is broken (test is broken)"
    with sot.config.patch(min_graph_size=min_graph_size):
        translated = sot.symbolic_translate(traced)
        if warm:
            translated(x, 2)
        result, events, _ = _watched(hook, translated, x, 2)
    assert np.allclose(result.numpy(), expected.numpy())
    assert events == eager_events, f"the {hook} function sees\n{events}\ninstead of\n{eager_events}"


@pytest.mark.parametrize("hook", list(HOOKS))
def test_the_trace_or_profile_function_is_not_translated(hook: str) -> None:
    from sot.eval_frame_ext import cache_entries

    translated = sot.symbolic_translate(traced)
    with sot.config.patch(min_graph_size=0):
        _, _, watcher = _watched(hook, translated, paddle.ones([4]), 2)
    assert cache_entries(watcher.__code__) == [], f"the {hook} function itself was translated"


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


_calls_seen: list[tuple[str, str]] = []


def _recording_tracer(frame: Any, event: str, arg: Any) -> Any:
    if event == "call":
        _calls_seen.append((frame.f_code.co_name, frame.f_code.co_filename))
    return None


def _installs_a_tracer_after_tensor_work(x):
    y = x * 2 + 1  # a graph worth compiling before the tracer is installed
    sys.settrace(_recording_tracer)
    z = helper(y)
    sys.settrace(None)
    return z - 1


@pytest.mark.parametrize("min_graph_size", [0, 10])
def test_a_frame_that_installs_a_tracer_runs_as_written(min_graph_size: int) -> None:
    """No resume function or translated code of the frame shows up in the user's tracer: it sees the same
    calls as eagerly."""
    x = paddle.ones([3])
    _calls_seen.clear()
    expected = _installs_a_tracer_after_tensor_work(x)
    expected_calls = list(_calls_seen)
    assert expected_calls == [("helper", THIS_FILE)]
    with sot.config.patch(min_graph_size=min_graph_size):
        translated = sot.symbolic_translate(_installs_a_tracer_after_tensor_work)
        for _ in range(2):  # the first call, then the cached entry
            _calls_seen.clear()
            assert np.allclose(translated(x).numpy(), expected.numpy())
            assert _calls_seen == expected_calls


def _stops_at_a_breakpoint(x, scale):
    y = x * scale
    breakpoint()
    return y + 1


def test_breakpoint_stops_in_the_users_own_frame(monkeypatch: pytest.MonkeyPatch) -> None:
    """``breakpoint()`` inside a translated function stops in the real frame of the user's code, with the
    user's locals, as it does eagerly (not in translated code or in a resume function)."""
    stops: list[tuple[Any, dict[str, Any]]] = []

    def hook(*args: Any, **kwargs: Any) -> None:
        frame = sys._getframe(1)
        stops.append((frame.f_code, dict(frame.f_locals)))

    monkeypatch.setattr(sys, "breakpointhook", hook)
    x = paddle.ones([3])
    with sot.config.patch(min_graph_size=0):
        translated = sot.symbolic_translate(_stops_at_a_breakpoint)
        for _ in range(2):
            assert np.allclose(translated(x, 2.0).numpy(), 3.0)
    assert [code for code, _ in stops] == [_stops_at_a_breakpoint.__code__] * 2
    assert all(sorted(local_vars) == ["scale", "x", "y"] for _, local_vars in stops)


def test_cprofile_counts_the_calls_of_translated_functions() -> None:
    import cProfile
    import pstats

    x = paddle.ones([4])
    with sot.config.patch(min_graph_size=0):
        translated = sot.symbolic_translate(traced)
        translated(x, 2)  # translated and cached before the profiler starts
        profiler = cProfile.Profile()
        result = profiler.runcall(translated, x, 2)
    assert np.allclose(result.numpy(), traced(x, 2).numpy())
    calls = {func[2]: stat[1] for func, stat in pstats.Stats(profiler).stats.items() if func[0] == THIS_FILE}
    assert calls.get("traced") == 1 and calls.get("helper") == 1, calls


_COVERED_MODULE = """\
import paddle
from sot import psdb


def helper(v):
    return v * 3


def model(x, n):
    y = x + 1
    z = helper(y)
    psdb.breakgraph()
    if n > 0:
        z = z - n
    else:
        z = z + n
    for i in range(2):
        z = z + i
    return z.sum()
"""
_NEVER_RUN_LINE = 16  # the ``else`` branch
COVERAGE_MODES = {  # when the function is first translated, and where it runs while coverage measures
    "translated_before": "translated and cached before the measurement starts",
    "translated_during": "first called (translated) while coverage measures",
    "in_a_new_thread": "called from a thread started while coverage measures (``threading.settrace``)",
}


def _measured(core: str, mode: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch, translate: bool) -> \
        tuple[set[int], set[int], set[tuple[int, int]]]:
    """(executed lines, missing lines, arcs) of the module above, run under coverage.py (branch coverage) with
    the given core."""
    import importlib.util
    import threading

    coverage = pytest.importorskip("coverage")
    monkeypatch.setenv("COVERAGE_CORE", core)
    path = tmp_path / f"covered_{core}_{mode}_{translate}.py"
    path.write_text(_COVERED_MODULE)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    measure = coverage.Coverage(data_file=None, include=[str(path)], branch=True)
    x = paddle.ones([4])
    results: list[Any] = []
    with sot.config.patch(min_graph_size=0):
        model = sot.symbolic_translate(module.model) if translate else module.model
        if mode == "translated_before":
            model(x, 2)
        measure.start()
        try:
            if mode == "in_a_new_thread":
                worker = threading.Thread(target=lambda: results.extend(model(x, 2) for _ in range(2)))
                worker.start()
                worker.join()
            else:
                results.extend(model(x, 2) for _ in range(2))
        finally:
            measure.stop()
        assert len(results) == 2 and all(np.allclose(r.numpy(), 20.0) for r in results)
        if translate:  # translation goes on once the measurement is over
            before = sot.stats()
            assert np.allclose(model(x, 2).numpy(), 20.0)
            after = sot.stats()
            assert after.translate_count + after.cache_hits > before.translate_count + before.cache_hits
    _, statements, _, missing, _ = measure.analysis2(str(path))
    arcs = set(measure.get_data().arcs(str(path)) or ())
    return set(statements) - set(missing), set(missing), arcs


@pytest.mark.parametrize("mode", list(COVERAGE_MODES))
@pytest.mark.parametrize("core", ["ctrace", "pytrace", "sysmon"])
def test_coverage_measures_the_lines_and_branches_of_translated_functions(
        core: str, mode: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """coverage.py, as ``coverage run`` would use it (each of its cores), reports the same lines and branches
    for a translated function with a graph break as for the eager one."""
    if core == "sysmon" and sys.version_info < (3, 12):
        pytest.skip("coverage's sys.monitoring core needs 3.12")
    translated = _measured(core, mode, tmp_path, monkeypatch, translate=True)
    eager = _measured(core, mode, tmp_path, monkeypatch, translate=False)
    assert _NEVER_RUN_LINE in eager[1], "the eager measurement is wrong (test is broken)"
    assert translated == eager


_SCRIPT = """\
import paddle


def model(x, n):
    y = x + 1
    print("break")
    if n > 0:
        y = y * n
    else:
        y = y - n
    return y.sum()


for _ in range(3):
    model(paddle.ones([4]), 2)
"""


def _coverage_run(tmp_path: Any, name: str, *command: str) -> tuple[list[int], list[list[int]]]:
    """(missing lines, missing branches) of script.py run by ``coverage run --branch <command>``."""
    import json
    import subprocess

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, GLOG_minloglevel="2", PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""),
               COVERAGE_FILE=str(tmp_path / f".coverage.{name}"))
    env.pop("COVERAGE_CORE", None)
    coverage = [sys.executable, "-m", "coverage"]
    subprocess.run([*coverage, "run", "--branch", *command], cwd=tmp_path, env=env, check=True,
                   capture_output=True, timeout=300)
    report = tmp_path / f"{name}.json"
    subprocess.run([*coverage, "json", "-o", str(report), "--include=script.py"], cwd=tmp_path, env=env,
                   check=True, capture_output=True, timeout=60)
    measured = json.loads(report.read_text())["files"]["script.py"]
    return measured["missing_lines"], measured["missing_branches"]


def test_coverage_run_of_the_sot_command_line_measures_the_script(tmp_path: Any) -> None:
    """``coverage run -m sot run script.py`` reports the script's lines and branches as ``coverage run
    script.py`` does."""
    pytest.importorskip("coverage")
    (tmp_path / "script.py").write_text(_SCRIPT)
    eager = _coverage_run(tmp_path, "eager", "script.py")
    assert eager[0] == [10], "the eager measurement is wrong (test is broken)"
    assert _coverage_run(tmp_path, "sot", "-m", "sot", "run", "script.py") == eager


# -- recursion --------------------------------------------------------------------------------------------
def recursive(n, x):
    if n == 0:
        return x
    return recursive(n - 1, x + 1)


def _deepest(works_at: Callable[[int], Any]) -> int:
    """The largest ``n`` for which ``works_at(n)`` does not raise RecursionError (growing from 16, then
    bisecting: a deep translated call is slow, so few are tried)."""
    ok, n = 0, 16
    while True:
        try:
            works_at(n)
        except RecursionError:
            break
        ok, n = n, int(n * 1.2) + 1
    lo, hi = ok, n
    while hi - lo > 1:
        mid = (lo + hi) // 2
        try:
            works_at(mid)
            lo = mid
        except RecursionError:
            hi = mid
    return lo


def _max_depth(fn: Callable[..., Any], x: Any) -> int:
    """The deepest recursion ``fn(n, x)`` reaches."""
    return _deepest(lambda n: fn(n, x))


@contextlib.contextmanager
def _no_warning_check() -> Iterator[None]:
    """Recursion past the inlining depth fills the cache of the function: its cache-limit warning is expected."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


@pytest.mark.parametrize("min_graph_size", [0, 10])
def test_recursion_limit_is_hit_at_a_similar_depth(min_graph_size: int) -> None:
    x = paddle.ones([2])
    eager = _max_depth(recursive, x)
    with sot.config.patch(min_graph_size=min_graph_size), _no_warning_check():
        translated = sot.symbolic_translate(recursive)
        depth = _max_depth(translated, x)
    # (deeper than eager is no fault: recursion levels inlined into one translated frame take no frame of
    # their own; on 3.13, after other tests filled the cache, it reached 1.12x eager's depth)
    assert eager / 2 <= depth <= eager * 1.5, f"translated recursion stops at {depth}, eager at {eager}"


@pytest.mark.parametrize("min_graph_size", [0, 10])
def test_the_build_lock_is_free_after_recursion_hits_the_limit(min_graph_size: int) -> None:
    """A RecursionError raised by the build lock's own bookkeeping (3.12: the hook spends C recursion too)
    kept the lock held by this thread: the next translation in another thread waited forever."""
    import threading

    from sot.symbolic.compile import BUILD_LOCK

    x = paddle.ones([2])
    with sot.config.patch(min_graph_size=min_graph_size), _no_warning_check():
        _max_depth(sot.symbolic_translate(recursive), x)
    acquired: list[bool] = []

    def other_thread() -> None:
        acquired.append(BUILD_LOCK._lock.acquire(timeout=10))
        if acquired[0]:
            BUILD_LOCK._lock.release()

    t = threading.Thread(target=other_thread)
    t.start()
    t.join()
    assert acquired == [True], "the build lock is still held after the RecursionError"
    assert gc.isenabled(), "automatic garbage collection stayed off after the RecursionError"


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
    """The deepest stack ``fn(x)`` can be called at."""
    return _deepest(lambda k: _call_at_depth(k, fn, x))


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


def _limit_inside(x):
    y = x * 2
    return y + 1, sys.getrecursionlimit()


def test_user_code_runs_against_the_users_recursion_limit() -> None:
    """sot raises the limit only while it translates or builds a program, and restores it exactly."""
    limit = sys.getrecursionlimit()
    x = paddle.ones([2])
    with sot.config.patch(min_graph_size=0):
        translated = sot.symbolic_translate(small)
        for _ in range(2):
            assert np.allclose(translated(x).numpy(), small(x).numpy())
            assert sys.getrecursionlimit() == limit
        sot.reset()
        seen = [sot.symbolic_translate(_limit_inside)(x)[1] for _ in range(2)]  # translated, then cached
    assert seen == [limit, limit]
    assert sys.getrecursionlimit() == limit

"""Shared fixtures: quiet Paddle, a clean translation cache for every test, and parity helpers."""
from __future__ import annotations

import faulthandler
import gc
import inspect
import os
import sys
import traceback

os.environ.setdefault("GLOG_minloglevel", "2")

import warnings  # noqa: E402
from typing import Any, Callable, Sequence  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

warnings.filterwarnings("ignore", message="No ccache found")

import paddle  # noqa: E402

import sot  # noqa: E402


# In a pytest-xdist run (`make test` runs two workers), tests run in worker processes that report to the
# controller: the controller lists failures (a crashed worker's test included, which xdist names itself).
_XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
_CURRENT_TEST_FILE = None if _XDIST_WORKER else os.environ.get("SOT_CURRENT_TEST_FILE")

if _CURRENT_TEST_FILE:
    def pytest_runtest_logstart(nodeid: str, location: Any) -> None:
        """Note the test that starts (scripts/pytest_crash_report.sh prints it if the process dies by a signal:
        ``pytest -q`` names no test, and faulthandler prints only Python frames)."""
        with open(_CURRENT_TEST_FILE, "w") as out:
            out.write(nodeid)


_FAILED_TESTS_FILE = None if _XDIST_WORKER else os.environ.get("SOT_FAILED_TESTS_FILE")

if _FAILED_TESTS_FILE:
    def pytest_runtest_logreport(report: Any) -> None:
        """Note each failing test with the Python version (`make test` lists them all at its very end, where a
        CI log cut in the middle still shows them)."""
        if report.failed:
            with open(_FAILED_TESTS_FILE, "a") as out:
                out.write(f"{sys.version_info[0]}.{sys.version_info[1]}: {report.nodeid} ({report.when})\n")


# A test that hangs (a deadlock) ends the run after this many seconds, with the Python stacks of every
# thread, instead of holding CI until its own time limit kills it with nothing printed (the slowest test takes
# about 20 s here).
HANG_LIMIT_S = float(os.environ.get("SOT_TEST_HANG_LIMIT", "600"))
_hang_report_fd = -1  # (the real stderr: fd 2 is captured inside tests)


def pytest_configure(config: Any) -> None:
    global _hang_report_fd
    _hang_report_fd = os.dup(sys.stderr.fileno())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: Any, nextitem: Any) -> Any:
    faulthandler.dump_traceback_later(HANG_LIMIT_S, exit=True, file=_hang_report_fd)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


def pytest_runtest_teardown(item: Any, nextitem: Any) -> None:
    """After the last test of each module, Paddle's executor cache lets go of the interpreters of the module's
    programs. Paddle keeps every interpreter it built (with its worker and collector threads: one per forward
    interpreter, two more per trained program) until ``clear_executor_cache``, also once the program is
    gone; over the whole suite a process reached 5000-7000 threads, and several suites run at once on one
    machine exhausted its thread ids (``pid_max`` 32768) and hung. (Not done by ``sot.reset()``: a backward
    still pending would rebuild its interpreter later, without sot's build flags. A hook rather than a
    module-scoped fixture: with the fixture, test_hook's refcount test counted one more reference to its code
    objects.)"""
    if nextitem is None or nextitem.module is not item.module:
        gc.collect()
        paddle.base.core.clear_executor_cache()


@pytest.fixture(autouse=True)
def fresh_sot() -> Any:
    """Every test starts with an empty cache, zeroed stats and default config."""
    sot.reset()
    with sot.config.patch(strict_mode=False, log_level=0, min_graph_size=10, cache_limit=8):
        yield
    sot.reset()


@pytest.fixture(params=["reader", "getters"])
def tensor_meta_reader(request: Any) -> Any:
    """Runs a test with the C++ reader of tensor meta installed (skipped when it cannot be) and with the
    guards reading the Python getters (sot/eval_frame_ext/tensor_meta.py); installed again afterwards."""
    from sot.eval_frame_ext import tensor_meta

    if request.param == "reader":
        if not tensor_meta.install():
            pytest.skip(f"the C++ tensor-meta reader is not installed: {tensor_meta.status()}")
    else:
        tensor_meta.uninstall()
    yield request.param
    tensor_meta.install()


def to_numpy_tree(value: Any) -> Any:
    if isinstance(value, paddle.Tensor):
        return ("tensor", value.dtype, tuple(value.shape), value.numpy())
    if isinstance(value, (list, tuple)):
        return (type(value), [to_numpy_tree(v) for v in value])
    if isinstance(value, dict):
        return (dict, {k: to_numpy_tree(v) for k, v in value.items()})
    return value


def assert_same(actual: Any, expected: Any, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """Structural equality with float tolerance on tensors; container types must match exactly."""
    if isinstance(expected, paddle.Tensor):
        assert isinstance(actual, paddle.Tensor), f"expected a Tensor, got {type(actual).__name__}"
        assert actual.dtype == expected.dtype and list(actual.shape) == list(expected.shape)
        np.testing.assert_allclose(actual.numpy(), expected.numpy(), rtol=rtol, atol=atol)
        assert actual.stop_gradient == expected.stop_gradient
    elif isinstance(expected, (list, tuple)):
        assert type(actual) is type(expected), f"{type(actual).__name__} != {type(expected).__name__}"
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_same(a, e, rtol, atol)
    elif isinstance(expected, dict):
        assert type(actual) is type(expected) and actual.keys() == expected.keys()
        for key in expected:
            assert_same(actual[key], expected[key], rtol, atol)
    else:
        assert type(actual) is type(expected) and actual == expected, f"{actual!r} != {expected!r}"


def check_parity(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run ``fn`` eagerly and translated (twice, to exercise the cache) and compare the results."""
    expected = fn(*args, **kwargs)
    translated = sot.symbolic_translate(fn)
    first = translated(*args, **kwargs)
    assert_same(first, expected)
    second = translated(*args, **kwargs)
    assert_same(second, expected)
    return first


COUNTERS = ("translate_count", "graph_breaks", "fallbacks", "compiled_graphs")


def counts() -> dict[str, int]:
    """The `sot.stats()` counters that say how a call was translated (cache hits left out)."""
    stats = sot.stats()
    return {name: getattr(stats, name) for name in COUNTERS}


def assert_counts(**expected: int) -> None:
    actual = counts()
    assert actual == {name: expected[name] for name in COUNTERS}, f"{actual} != expected {expected}"


def line_of(fn: Callable[..., Any], marker: str) -> int:
    """The absolute line number of the first line of ``fn``'s source containing ``marker``."""
    lines, first = inspect.getsourcelines(fn)
    for index, text in enumerate(lines):
        if marker in text:
            return first + index
    raise AssertionError(f"{marker!r} not in the source of {fn.__name__}")


def raised(fn: Callable[..., Any], *args: Any) -> BaseException:
    """The exception ``fn(*args)`` raises (an AssertionError when it returns)."""
    try:
        fn(*args)
    except Exception as exc:  # noqa: BLE001
        return exc
    raise AssertionError(f"{getattr(fn, '__name__', fn)} did not raise")


def check_same_exception(fn: Callable[..., Any], make_args: Callable[[], tuple], line_text: str,
                         warm_args: Callable[[], tuple] | None = None, min_graph_size: int = 0,
                         also_through: Sequence[tuple[Callable[..., Any], str]] = ()) -> BaseException:
    """Eager and translated raise the same type and message, and the translated traceback goes through the
    user's line ``line_text`` of ``fn`` (function name, file and line number), and through each line of the
    user functions ``fn`` calls named by ``also_through`` (``(function, line text)``), and through no frame
    of sot's own code."""
    expected = raised(fn, *make_args())
    with sot.config.patch(min_graph_size=min_graph_size):
        translated = sot.symbolic_translate(fn)
        if warm_args is not None:
            translated(*warm_args())  # translate (and compile) first: the failing call is then a cache hit
        for attempt in range(2):  # the first failing call and the cached one
            actual = raised(translated, *make_args())
            assert type(actual) is type(expected), f"{type(actual).__name__}: {actual} != " \
                                                   f"{type(expected).__name__}: {expected}"
            assert str(actual) == str(expected)
            frames = traceback_frames(actual, with_file=True)
            ours = [frame for frame in frames if frame[0].startswith(SOT_PACKAGE_DIR)]
            assert not ours, f"attempt {attempt + 1}: frames of sot's own code in the traceback: {ours}"
            for function, text in [(fn, line_text), *also_through]:
                line = line_of(function, text)
                assert (function.__code__.co_filename, function.__name__, line) in frames, \
                    f"attempt {attempt + 1}: no frame {function.__name__} at line {line} in the traceback:\n" + \
                    "".join(traceback.format_tb(actual.__traceback__))
    return actual


SOT_PACKAGE_DIR = os.path.dirname(sot.__file__) + os.sep


def traceback_frames(exc: BaseException, with_file: bool = False) -> list[tuple]:
    """``(function name, line)`` (``with_file``: ``(file, function name, line)``) of each traceback entry."""
    return [(fs.filename, fs.name, fs.lineno) if with_file else (fs.name, fs.lineno)
            for fs in traceback.extract_tb(exc.__traceback__)]


@pytest.fixture
def parity() -> Callable[..., Any]:
    return check_parity


@pytest.fixture
def compile_all() -> Any:
    """Compile every graph, however small (``min_graph_size=0``)."""
    with sot.config.patch(min_graph_size=0):
        yield


@pytest.fixture(params=["compiled", "eager"])
def every_graph_runs(request: Any) -> Any:
    """Runs a test twice: every graph compiled (``min_graph_size=0``) and run as its static program, then as
    the eager replay of its statements (`sot.symbolic.compile.forced_way`); yields the way."""
    from sot.symbolic.compile import forced_way

    with sot.config.patch(min_graph_size=0), forced_way(request.param):
        yield request.param


def _known_bugs() -> set[str]:
    """Node ids of known_bugs.txt for this Python; a line ending in ``@3.X`` applies to that version only."""
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    bugs = set()
    for line in open(os.path.join(os.path.dirname(__file__), "known_bugs.txt")):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        node, _, version = line.partition(" @")
        if not version or version == here:
            bugs.add(node.strip())
    return bugs


_KNOWN_BUGS = _known_bugs()


def pytest_collection_modifyitems(config: Any, items: list) -> None:
    """Mark the tests listed in known_bugs.txt: expected to fail until their bug is fixed."""
    for item in items:
        if item.nodeid in _KNOWN_BUGS:
            # Listed from runs on 3.11: strict there; on other versions a listed test may already pass.
            strict = sys.version_info[:2] == (3, 11)
            item.add_marker(pytest.mark.xfail(strict=strict, reason="known bug, see tests/known_bugs.txt"))

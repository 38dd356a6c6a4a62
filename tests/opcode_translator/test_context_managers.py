"""User context managers in translated frames (executor/variables/context.py, function.py, resume.py).

Each test compares with eager Paddle: the result, what the manager recorded (the order of ``__enter__``,
the body and ``__exit__``, and the exception ``__exit__`` saw), the exception that leaves the frame, and the
`sot.stats()` counters (breaks, fallbacks, and no new translation when the same inputs come again).
"""
from __future__ import annotations

import contextlib

import paddle
import pytest

import sot

from _conformance import T, check


class Recorder:
    """Records what happens to it; ``suppress`` makes ``__exit__`` swallow the exception."""

    def __init__(self, suppress: bool = False) -> None:
        self.events: list = []
        self.suppress = suppress

    def __enter__(self) -> "Recorder":
        self.events.append("enter")
        return self

    def __exit__(self, kind, value, traceback) -> bool:
        self.events.append(("exit", kind.__name__ if kind else None, str(value) if value else None))
        return self.suppress


# -- a graph break inside the block ---------------------------------------------------------------------------
def test_break_inside_a_user_with_block_inlines_the_exit_after_the_break(compile_all):
    """The resume function receives the real bound ``__exit__`` and inlines it: one break, not two."""

    def fn(x, rec):
        with rec as r:
            r.events.append("body")
            y = x * 2
            print("inside")
            r.events.append("after the break")
            y = y + 1
        return y

    check(fn, lambda: (T(3), Recorder()), breaks=1)


def test_tensor_dependent_branch_inside_a_user_with_block(compile_all):
    def fn(x, rec):
        with rec:
            y = x * 2
            rec.events.append("body")
            if y.sum() > 0:
                y = y + 1
            else:
                y = y - 1
        return y

    check(fn, lambda: (T(3, seed=1), Recorder()), lambda: (-T(3, seed=1).abs() - 1, Recorder()), breaks=None)


def test_container_method_loaded_before_a_break_inside_a_user_with_block(compile_all):
    """``rec.events.append`` is loaded before ``float()`` breaks: the resume function receives the real bound
    method of the list, simulated as the list's method (not an opaque callable guarded by identity, which
    missed the cache at every call)."""

    def fn(x, rec):
        with rec:
            y = x * 2
            rec.events.append(("branch", float(y.sum())))
        return y

    check(fn, lambda: (T(3), Recorder()), breaks=1)


def test_exception_after_a_break_inside_a_user_with_block_reaches_exit(compile_all):
    """The exception raised after the break goes through the real ``__exit__`` (which sees it) and leaves
    the frame, or is suppressed when ``__exit__`` returns True, as in eager code."""

    def fn(x, rec, fail):
        with rec:
            y = x * 2
            print("inside")
            if fail:
                raise ValueError("boom")
            y = y + 1
        return y

    check(fn, lambda: (T(3), Recorder(), False), lambda: (T(3), Recorder(), True),
          lambda: (T(3), Recorder(suppress=True), True), breaks=None, fallbacks=None, stable=False)


def test_exit_method_passed_as_a_value_is_inlined(compile_all):
    """A real bound method of a Python function reached as a value is called by inlining ``__func__``: its
    effects are replayed and no break is needed; another instance of the class reuses the translation."""

    def fn(x, method):
        y = x * 3
        method(None, None, None)
        return y + 1

    def make():
        rec = Recorder()
        return T(3), rec.__exit__

    check(fn, make, breaks=0)


def test_bound_methods_of_two_functions_are_told_apart(compile_all):
    """The guard on a received bound method checks its ``__func__``: another method of the same class is a
    different translation, never the cached one."""

    class Twice:
        def double(self, t):
            return t * 2

        def triple(self, t):
            return t * 3

    def fn(x, method):
        return method(x) + 1

    fast = __import__("sot").symbolic_translate(fn)
    obj = Twice()
    for method in (obj.double, obj.triple, Twice().double):
        expected = fn(paddle.ones([2]), method)
        assert fast(paddle.ones([2]), method).numpy().tolist() == expected.numpy().tolist()


# -- @contextlib.contextmanager ------------------------------------------------------------------------------------
@contextlib.contextmanager
def managed(log, mode="plain"):
    """A generator context manager whose ``mode`` picks how it treats an exception thrown into it."""
    log.append("enter")
    if mode == "fail_enter":
        raise KeyError("enter failed")
    if mode == "no_yield":
        return
    try:
        yield len(log)
    except ValueError as error:
        log.append(("caught", str(error)))
        if mode == "reraise":
            raise
        if mode == "replace":
            raise TypeError("replaced") from error
        if mode == "yield_again":
            yield 5
    finally:
        log.append("finally")
    log.append("exit")
    if mode == "twice":
        yield 7


def with_managed(x, log, mode, fail):
    with managed(log, mode) as k:
        log.append(("body", k))
        y = x * k
        if fail:
            raise ValueError("in body")
    log.append("after")
    return y


MODES = ["plain", "reraise", "replace", "yield_again", "twice", "fail_enter", "no_yield"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fail", [False, True], ids=["no_exception", "exception_in_body"])
def test_generator_context_manager_like_eager(compile_all, mode, fail):
    """Enter, body, exit in eager order; an exception of the body is thrown into the generator at its
    ``yield``: suppressed when the generator ends, re-raised, replaced, or contextlib's RuntimeError (didn't
    yield, didn't stop). A with block translated without an exception escaping it needs no break or
    fallback; an exception leaving the frame makes it run eagerly (where it is raised for real)."""
    escapes = mode in ("fail_enter", "no_yield", "twice") or (fail and mode in ("reraise", "replace", "yield_again"))
    check(with_managed, lambda: (T(3), [], mode, fail), breaks=0, fallbacks=1 if escapes else 0)


def test_exception_context_and_cause_from_a_generator_context_manager(compile_all):
    fast = sot.symbolic_translate(with_managed)
    for mode in ("replace", "yield_again"):
        for run in (with_managed, fast, fast):
            with pytest.raises((TypeError, RuntimeError)) as info:
                run(T(3), [], mode, True)
            assert isinstance(info.value.__context__, ValueError)
            assert isinstance(info.value.__cause__, ValueError) == (mode == "replace")


def nested_managers(x, log):
    with managed(log) as a:
        with managed(log) as b:
            y = x * (a + b)
    return y


def manager_made_in_the_frame_over_a_closure(x, log):
    @contextlib.contextmanager
    def scaled(factor):
        log.append(("enter", factor))
        yield factor * 2
        log.append("exit")

    with scaled(3) as k:
        y = x * k
    return y, len(log)


def generator_manager_after_a_break(x, log):
    y = x * 2
    print("break")
    with managed(log) as k:
        y = y * k
    return y


@pytest.mark.parametrize("fn, breaks", [(nested_managers, 0), (manager_made_in_the_frame_over_a_closure, 0),
                                        (generator_manager_after_a_break, 1)],
                         ids=["nested", "made_in_the_frame", "after_a_break"])
def test_generator_context_managers_in_frames(compile_all, fn, breaks):
    check(fn, lambda: (T(3), []), breaks=breaks)


# -- a graph break inside the block of a generator context manager --------------------------------------------------
def break_inside_a_generator_manager(x, log):
    with managed(log) as k:
        log.append("body")
        y = x * k
        print("break")
        y = y + 1
    return y


def tensor_branch_inside_nested_generator_managers(x, log):
    y = x + 1
    with managed(log) as k:
        with managed(log, mode="reraise") as j:
            y = y * (k + j)
            if y.sum() > 0:
                y = y + 1
    return y


def exception_after_a_break_inside_a_generator_manager(x, log, fail):
    try:
        with managed(log) as k:
            y = x * k
            print("break")
            if fail:
                raise ValueError("boom")
    except ValueError:
        log.append("handled")
        y = x
    return y


def break_inside_a_manager_made_in_the_frame(x, log):
    @contextlib.contextmanager
    def scaled(factor):
        log.append(("enter", factor))
        yield factor * 2
        log.append("exit")

    with scaled(3) as k:
        y = x * k
        print("break")
    return y


@pytest.mark.parametrize("fn, makers", [
    (break_inside_a_generator_manager, [lambda: (T(3), [])]),
    (tensor_branch_inside_nested_generator_managers, [lambda: (T(3, seed=1).abs(), []), lambda: (-T(3).abs(), [])]),
    (exception_after_a_break_inside_a_generator_manager, [lambda: (T(3), [], False), lambda: (T(3), [], True)]),
    (break_inside_a_manager_made_in_the_frame, [lambda: (T(3), [])]),
], ids=["print", "nested_tensor_branch", "exception", "made_in_the_frame"])
def test_break_inside_the_block_of_a_generator_manager(compile_all, fn, makers):
    """The simulated generator cannot be handed to the resume function: the frame is translated again with
    the block's entry (``BEFORE_WITH``; 3.10's ``SETUP_WITH`` without its block) run natively (the real manager
    entered once, its ``__exit__`` run once by real code, in eager order), never a fallback of the whole frame,
    on every version. An exception raised in the block after the break reaches the real ``__exit__``
    natively, from the raising instruction."""
    stats = check(fn, *makers, breaks=None, fallbacks=None, stable=False)
    assert stats.fallbacks == 0, stats
    assert stats.graph_breaks >= 3, stats  # at the block's entry, inside the block, at the native __exit__
    check(fn, *makers, breaks=None, fallbacks=None)  # (translated already: the second round hits the cache)

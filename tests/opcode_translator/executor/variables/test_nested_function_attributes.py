"""Attributes of functions made in the frame (executor/variables/function.py, `NestedFunctionVariable`):
``__name__``, ``__qualname__``, ``__doc__``, ``__module__``, ``__annotations__``, ``__dict__`` and attributes
assigned in the frame (``functools.wraps``), read during simulation and carried by the real function the
generated code makes when the function leaves the frame."""
from __future__ import annotations

import functools

import numpy as np
import paddle

import sot
from conftest import assert_same


def _t() -> paddle.Tensor:
    return paddle.to_tensor(np.arange(3, dtype="float32"))


def _check(fn, *args, calls: int = 2, breaks: int = 0) -> None:
    fast = sot.symbolic_translate(fn)
    for _ in range(calls):
        assert_same(fast(*args), fn(*args))
    stats = sot.stats()
    assert stats.fallbacks == 0 and stats.graph_breaks == breaks and stats.translate_count == 1, stats


def test_names_doc_and_module_of_a_nested_function_and_a_lambda(compile_all):
    def fn(x):
        def inner(t):
            """Doubles."""
            return t * 2

        square = lambda t: t * t  # noqa: E731
        return (inner(x), inner.__name__, inner.__qualname__, inner.__doc__, inner.__module__,
                square.__name__, square.__doc__, inner.__defaults__)

    _check(fn, _t())


def test_attributes_assigned_in_the_frame_are_read_back(compile_all):
    def fn(x):
        def inner(t):
            return t * 2

        inner.__name__ = "renamed"
        inner.scale = 3.0
        inner.__dict__["shift"] = 1.0
        return inner(x) * inner.scale + inner.shift, inner.__name__, sorted(inner.__dict__)

    _check(fn, _t())


def test_a_missing_attribute_raises_attribute_error_like_eager(compile_all):
    def fn(x):
        def inner(t):
            return t * 2

        try:
            return inner.missing
        except AttributeError as exc:
            return inner(x), str(exc)

    _check(fn, _t())


def _twice(f):
    @functools.wraps(f)
    def wrapper(t):
        return f(f(t))

    return wrapper


def test_a_decorator_using_functools_wraps_in_the_frame(compile_all):
    def fn(x):
        @_twice
        def inc(t):
            """Adds one."""
            return t + 1

        return inc(x), inc.__name__, inc.__qualname__, inc.__doc__, inc.__wrapped__(x)

    _check(fn, _t())


def test_a_wrapped_function_leaving_the_frame_carries_its_attributes(compile_all):
    def fn(x):
        @_twice
        def inc(t: paddle.Tensor) -> paddle.Tensor:
            """Adds one."""
            return t + 1

        inc.calls = 0
        return x * 2, inc

    fast = sot.symbolic_translate(fn)
    for _ in range(2):
        (actual_x, actual), (expected_x, expected) = fast(_t()), fn(_t())
        assert_same(actual_x, expected_x)
        for name in ("__name__", "__qualname__", "__doc__", "__module__", "__annotations__"):
            assert getattr(actual, name) == getattr(expected, name), name
        assert actual.__dict__.keys() == expected.__dict__.keys() and actual.calls == 0
        assert actual.__wrapped__.__qualname__ == expected.__wrapped__.__qualname__
        assert_same(actual(_t()), expected(_t()))
    assert sot.stats().fallbacks == 0 and sot.stats().graph_breaks == 0


def _tagged(t):
    return t - 1


_tagged.tag = "global"


def test_functools_wraps_of_a_real_function_copies_its_dict(compile_all):
    def fn(x):
        wrapped = _twice(_tagged)
        return wrapped(x), wrapped.tag, wrapped.__name__, wrapped.__wrapped__ is _tagged

    _check(fn, _t())

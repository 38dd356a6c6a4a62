"""Loads and stores of locals (handlers/load_store.py): a read or ``del`` of an unbound local raises eager's
UnboundLocalError inside the simulation, so a handler of the frame catches it and the frame stays translated
instead of falling back."""
from __future__ import annotations

import pytest

import sot


def _read_after_del(x):
    v = x + 1
    del v
    try:
        y = v * 2  # noqa: F821
    except UnboundLocalError as error:
        y = x - 1
        message = str(error)
    return y, message


def _read_maybe_unbound(x, flag):
    if flag:
        w = x * 3
    try:
        return w + 1, ""
    except NameError as error:  # (UnboundLocalError is a NameError)
        return x - 2, str(error), repr(error), error.args


def _del_unbound(x):
    v = x * 2
    del v
    try:
        del v  # noqa: F821
    except UnboundLocalError as error:
        return x + 5, str(error)
    return x, ""


def _uncaught(x):
    y = x + 1
    del y
    return y * 2  # noqa: F821


@pytest.mark.parametrize("fn, make", [
    (_read_after_del, lambda T: (T(2, 3),)),
    (_read_maybe_unbound, lambda T: (T(2, 3), False)),
    (_read_maybe_unbound, lambda T: (T(2, 3), True)),
    (_del_unbound, lambda T: (T(2, 3),)),
])
def test_an_unbound_local_raises_to_the_frames_handler(compile_all, fn, make):
    """The UnboundLocalError (its message as CPython's of the running version: `pyversion.unbound_local_message`)
    reaches the frame's own ``except``: no fallback, no break."""
    from _conformance import T, check

    check(fn, lambda: make(T), calls=2, breaks=0, fallbacks=0)


def test_an_uncaught_unbound_local_raises_as_eagerly(compile_all):
    from _conformance import T, check

    check(_uncaught, lambda: (T(2, 3),), calls=2, breaks=None, fallbacks=None)
    with pytest.raises(UnboundLocalError):
        sot.symbolic_translate(_uncaught)(T(2, 3))

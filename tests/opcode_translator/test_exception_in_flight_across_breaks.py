"""A graph break inside a handler of an exception the simulation raised in the translated frame (transform.py,
`_translate_raise_in_flight`; 3.11+).

The generated code runs the frame up to the instruction that raised and the rest natively from there, so the
exception is raised for real: its traceback, the handler (``except``/``finally``), and what follows are
eager's. Each test compares the result or the exception, the effects, and the innermost traceback entry in
this file with eager code, over two calls (the second hits the cache).
"""
from __future__ import annotations

import sys
import traceback
from typing import Any, Callable

import paddle
import pytest

import sot


class Plain:
    def __init__(self, a):
        self.a = a


def breaks(t):
    eval("1")  # a graph break
    return t + 1


def delete_in_try_break_in_finally(x, log):
    try:
        del Plain(1).extra
    finally:
        log.append("finally")
        x = breaks(x)
    return x


def caught_and_used_after_a_break(x, log):
    try:
        y = x * 2
        del Plain(1).extra
    except AttributeError as error:
        log.append(("caught", str(error)))
        y = breaks(x)
        log.append(type(error).__name__)
    return y


def wrapped_after_a_break(x, log):
    try:
        {}["k"]
    except KeyError as error:
        log.append("handler")
        x = breaks(x)
        raise ValueError("wrapped") from error
    return x


def raises_deep(v):
    if v > 0:
        raise IndexError("deep")
    return v


def raised_by_a_callee_break_in_finally(x, log):
    try:
        raises_deep(len(log) + 1)
    finally:
        log.append("finally")
        x = breaks(x)
    return x


def keyword_call_raises(x, log):
    try:
        raises_deep(v=1)
    except IndexError:
        log.append("caught")
        x = breaks(x * 3)
    return x


def not_matched_then_break_in_finally(x, log):
    """Fuzz seed 6166: the exception passes a non-matching ``except`` (re-raised there) before the ``finally``
    that breaks: it is run natively from its first raise, not from the re-raise."""
    try:
        raise ValueError(f"bad {len(log)}")
    except KeyError:
        log.append("not reached")
    finally:
        log.append(x.sum().item())
    return x


def _outcome(fn: Callable[..., Any]) -> tuple:
    log: list = []
    try:
        result = fn(paddle.ones([2]), log).numpy().tolist()
        innermost = None
    except Exception as exc:  # noqa: BLE001 - the exception is the behaviour compared
        result = (type(exc).__name__, str(exc), type(exc.__cause__).__name__)
        entries = [e for e in traceback.extract_tb(exc.__traceback__) if e.filename == __file__]
        innermost = (entries[-1].name, entries[-1].lineno) if entries else None
    return result, log, innermost


CASES = [delete_in_try_break_in_finally, caught_and_used_after_a_break, wrapped_after_a_break,
         raised_by_a_callee_break_in_finally, keyword_call_raises, not_matched_then_break_in_finally]


@pytest.mark.parametrize("fn", CASES, ids=[fn.__name__ for fn in CASES])
def test_break_in_a_handler_of_an_exception_raised_in_the_frame(compile_all, fn):
    expected = _outcome(fn)
    fast = sot.symbolic_translate(fn)
    assert _outcome(fast) == expected
    translations = sot.stats().translate_count
    assert _outcome(fast) == expected
    assert sot.stats().translate_count == translations  # the second call hits the cache
    # The frame itself never falls back (a raising callee translated on its own may), 3.10 included.
    raised_by_a_callee = fn in (raised_by_a_callee_break_in_finally, keyword_call_raises)
    assert sot.stats().fallbacks <= (1 if raised_by_a_callee else 0)


def bare_raise_after_a_break(x, log):
    try:
        {}["missing"]
    except KeyError:
        log.append(sys.exc_info()[0].__name__)
        x = breaks(x)
        log.append(sys.exc_info()[0].__name__)
        raise


def test_the_handled_exception_is_the_real_one_after_a_break(compile_all):
    """``sys.exc_info()`` and a bare ``raise`` in the handler, after the break, see the exception being
    handled (it was never raised natively when the simulation routed it to the handler)."""
    expected = _outcome(bare_raise_after_a_break)
    fast = sot.symbolic_translate(bare_raise_after_a_break)
    for _ in range(2):
        assert _outcome(fast) == expected

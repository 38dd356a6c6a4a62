"""Entries with a relaxed guard (eval_frame.c): an entry returned as ``(guard, code, frames, hook_free,
relaxed)`` runs its full guard on every ``RELAXED_GUARD_PERIOD``-th hit only, and ``relaxed`` (a cheaper
part of the guard; True: nothing) on the hits between. sot uses it for entries whose code is right for any
inputs (native.py): the guard there only decides whether the translation still fits.

Runs on every supported Python (see test_hook.py for how: ``--noconftest`` off 3.11).
"""

import pytest
from hook_loader import efx
from test_hook import clean_hook  # noqa: F401 (an autouse fixture: no hook, no callback left after)

PERIOD = efx.RELAXED_GUARD_PERIOD
callback_installed = efx.callback_installed


class Check:
    """A guard (or relaxed guard) that counts its calls and returns ``self.result``."""

    def __init__(self, result=True):
        self.result = result
        self.calls = 0

    def __call__(self, *args):
        self.calls += 1
        return self.result


def f(x):
    return x + 1


class Callback:
    def __init__(self, entry):
        self.entry = entry
        self.misses = 0

    def __call__(self, code, globals_, builtins, closure, args):
        if code is not f.__code__:
            return None
        self.misses += 1
        return self.entry


def test_the_full_guard_runs_once_per_period_and_the_relaxed_one_between():
    guard, relaxed = Check(), Check()
    callback = Callback((guard, f.__code__, 0, False, relaxed))
    with callback_installed(callback):
        assert f(1) == 2  # the miss adds the entry (no guard call)
        for i in range(2 * (PERIOD + 1)):
            assert f(i) == i + 1
    assert callback.misses == 1
    assert (guard.calls, relaxed.calls) == (2, 2 * PERIOD)


def test_true_checks_nothing_between_full_guards():
    guard = Check()
    callback = Callback((guard, f.__code__, 0, False, True))
    with callback_installed(callback):
        for i in range(1 + PERIOD + 2):  # the miss, then full, PERIOD times nothing, full
            f(i)
    assert guard.calls == 2 and callback.misses == 1


def test_a_failing_relaxed_check_is_a_miss_at_once():
    guard, relaxed = Check(), Check()
    callback = Callback((guard, f.__code__, 0, False, relaxed))
    with callback_installed(callback):
        f(0)
        f(0)  # the full guard: the relaxed one runs from the next hit on
        relaxed.result = False
        f(0)
        assert callback.misses == 2 and (guard.calls, relaxed.calls) == (1, 1)


def test_a_failing_full_guard_is_seen_at_the_end_of_the_period():
    guard, relaxed = Check(), Check()
    callback = Callback((guard, f.__code__, 0, False, relaxed))
    with callback_installed(callback):
        f(0)
        f(0)
        guard.result = False
        for _ in range(PERIOD):
            f(0)
        assert callback.misses == 1
        f(0)
        assert callback.misses == 2 and relaxed.calls == PERIOD


def test_none_keeps_the_full_guard_on_every_call():
    guard = Check()
    callback = Callback((guard, f.__code__, 0, False, None))
    with callback_installed(callback):
        for i in range(5):
            f(i)
    assert guard.calls == 4


def test_replace_entry_code_relaxes_and_tightens_the_guard():
    guard, relaxed = Check(), Check()
    callback = Callback((guard, f.__code__))
    with callback_installed(callback):
        f(0)
        assert efx.replace_entry_code(f.__code__, guard, f.__code__, False, relaxed)
        for _ in range(PERIOD + 1):
            f(0)
        assert (guard.calls, relaxed.calls) == (1, PERIOD)  # (the first hit after the switch: a full guard)
        assert efx.replace_entry_code(f.__code__, guard, f.__code__, False, None)
        for _ in range(3):
            f(0)
        assert (guard.calls, relaxed.calls) == (4, PERIOD)
    assert callback.misses == 1


def test_a_relaxed_guard_must_be_callable():
    callback = Callback((Check(), f.__code__, 0, False, 42))
    with callback_installed(callback):
        with pytest.raises(TypeError, match="relaxed guard"):
            f(0)
    guard = Check()
    with callback_installed(Callback((guard, f.__code__))):
        f(0)
        with pytest.raises(TypeError, match="relaxed guard"):
            efx.replace_entry_code(f.__code__, guard, f.__code__, False, "no")

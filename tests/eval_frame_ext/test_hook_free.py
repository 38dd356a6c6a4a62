"""Hook-free cache entries: the thread's callback is suspended while their code runs (eval_frame.c).

An entry returned as ``(guard, code, frames, True)`` (or switched with ``replace_entry_code(..., True)``)
says that nothing its code calls needs the hook: while it runs, ``callback_active()`` is false, the frames it
calls never reach the callback, and, with no other thread holding a callback, the interpreter's own frame
evaluation function is back. ``get_callback()`` still returns the callback, ``call_with_callback`` re-installs
it for one call, a ``set_callback`` meanwhile ends the suspension, and it comes back on every exit path.

Runs on every supported Python (see test_hook.py for how: ``--noconftest`` off 3.11).
"""

import sys
import threading

import pytest
from hook_loader import efx
from test_hook import always, clean_hook  # noqa: F401 (an autouse fixture: no hook, no callback left after)

callback_installed = efx.callback_installed


class Recorder:
    """A callback returning ``table[code]`` (None: run as written), recording the codes it saw."""

    def __init__(self, table):
        self.table = dict(table)
        self.codes = []

    def __call__(self, code, globals_, builtins, closure, args):
        self.codes.append(code)
        return self.table.get(code)

    def saw(self, fn):
        return self.codes.count(fn.__code__)


def hook_free(fn):
    return {fn.__code__: (always, fn.__code__, 0, True)}


def hooked(fn):
    return {fn.__code__: (always, fn.__code__, 0, False)}


STATES = []


def probe():
    """Where the calls below stand: (callback active, get_callback(), sot's eval function installed)."""
    STATES.append((efx.callback_active(), efx.get_callback(), efx._ext._hook_installed()))


def leaf(x):
    probe()
    return x + 1


def outer(x):
    probe()
    return leaf(x) * 2


def via_trampoline(x):
    probe()
    y = efx.call_with_callback(leaf, x)
    probe()
    return y * 2


def test_a_hook_free_entry_runs_with_the_callback_suspended():
    rec = Recorder({**hook_free(outer), **hooked(leaf)})
    with callback_installed(rec):
        for call in range(3):
            STATES.clear()
            assert outer(call) == (call + 1) * 2
            # Inside (from the first call, which adds the entry, on): the callback is suspended, the
            # interpreter's own eval function is back, and the frames called never reach the callback.
            assert STATES == [(False, rec, False)] * 2
            assert efx.callback_active() and efx._ext._hook_installed() and efx.get_callback() is rec
    assert rec.saw(outer) == 1 and rec.saw(leaf) == 0 and rec.saw(probe) == 0


def test_an_entry_not_marked_hook_free_keeps_the_hook():
    rec = Recorder({**hooked(outer), **hooked(leaf)})
    with callback_installed(rec):
        STATES.clear()
        outer(1)
        assert STATES == [(True, rec, True)] * 2
    assert rec.saw(leaf) == 1 and rec.saw(probe) == 2  # (no entry for probe: each call asks)


def test_replace_entry_code_switches_hook_freedom_both_ways():
    rec = Recorder(hooked(outer))
    with callback_installed(rec):
        outer(1)
        for free, expected in ((True, False), (False, True)):
            assert efx.replace_entry_code(outer.__code__, always, outer.__code__, free)
            STATES.clear()
            outer(1)
            assert STATES[0][0] is expected
    assert efx.replace_entry_code(outer.__code__, always, outer.__code__) is True  # (3 arguments: not free)
    with pytest.raises(TypeError):
        efx.replace_entry_code(outer.__code__)


def test_call_with_callback_reinstalls_the_callback_for_one_call():
    rec = Recorder({**hook_free(via_trampoline), **hooked(leaf)})
    with callback_installed(rec):
        STATES.clear()
        assert via_trampoline(3) == 8
        assert STATES == [(False, rec, False), (True, rec, True), (False, rec, False)]
    assert rec.saw(leaf) == 1, "the frame called through call_with_callback reached the callback"


def test_call_with_callback_is_a_plain_call_otherwise():
    assert efx.call_with_callback(divmod, 7, 2) == (3, 1)
    assert efx.call_with_callback(lambda **kw: kw) == {}
    with pytest.raises(TypeError):
        efx.call_with_callback()
    rec = Recorder(hooked(leaf))
    with callback_installed(rec):
        STATES.clear()
        assert efx.call_with_callback(leaf, 1) == 2
        assert STATES == [(True, rec, True)] and efx.callback_active()


def test_nested_hook_free_entries_through_call_with_callback():
    rec = Recorder({**hook_free(via_trampoline), **hook_free(leaf)})
    with callback_installed(rec):
        for _ in range(2):
            STATES.clear()
            via_trampoline(1)
            # leaf is hook-free itself: the callback, back for the call, is suspended again inside it
            assert [state[0] for state in STATES] == [False, False, False]
            assert efx.callback_active()
    assert rec.saw(leaf) == 1


def raises_inside(x):
    probe()
    raise ValueError(f"bad {x}")


def raises_through_trampoline(x):
    return efx.call_with_callback(raises_inside, x)


@pytest.mark.parametrize("fn", [raises_inside, raises_through_trampoline])
def test_the_callback_is_back_after_an_exception(fn):
    rec = Recorder({**hook_free(fn), **hook_free(raises_inside)})
    with callback_installed(rec):
        for call in range(3):
            with pytest.raises(ValueError, match=f"bad {call}") as info:
                fn(call)
            assert info.traceback[-1].name == "raises_inside"
            assert efx.callback_active() and efx._ext._hook_installed() and efx.get_callback() is rec


def recurses(n):
    return recurses(n + 1)


def test_a_recursion_error_in_a_hook_free_frame_restores_the_callback():
    rec = Recorder(hook_free(recurses))
    with callback_installed(rec):
        with pytest.raises(RecursionError):
            recurses(0)
        assert efx.callback_active() and efx._ext._hook_installed()
        with pytest.raises(RecursionError):
            recurses(0)
        assert efx.callback_active()


def sets_callback(new):
    efx.set_callback(new)
    probe()


def installs_another_callback(other):
    with callback_installed(other):
        probe()
    probe()


def test_set_callback_inside_a_suspended_frame_ends_the_suspension():
    rec = Recorder(hook_free(sets_callback))
    other = Recorder(hooked(leaf))
    with callback_installed(rec):
        sets_callback(rec)  # (the first call adds the entry)
        STATES.clear()
        sets_callback(None)
        assert STATES == [(False, None, False)]
        assert efx.get_callback() is None, "the frame's own choice stays after it"
    with callback_installed(rec):
        STATES.clear()
        sets_callback(other)
        assert STATES == [(True, other, True)] and efx.get_callback() is other


def test_callback_installed_inside_a_suspended_frame_restores_the_logical_callback():
    rec = Recorder(hook_free(installs_another_callback))
    other = Recorder({})
    with callback_installed(rec):
        for _ in range(2):
            STATES.clear()
            installs_another_callback(other)
            # callback_installed(None... other) saw `rec` as the previous callback, and put it back (active)
            assert STATES == [(True, other, True), (True, rec, True)]
            assert efx.get_callback() is rec and efx.callback_active()


def resets_cache(x):
    efx.reset_cache()
    probe()
    return x


def test_reset_cache_inside_a_suspended_frame():
    rec = Recorder(hook_free(resets_cache))
    with callback_installed(rec):
        for call in range(3):
            STATES.clear()
            assert resets_cache(call) == call
            assert STATES == [(False, rec, False)] and efx.callback_active()
    assert rec.saw(resets_cache) == 3, "every call misses: the previous one emptied the cache"


def settraces(x):
    seen = []

    def tracer(frame, event, arg):
        seen.append(frame.f_code.co_name)

    sys.settrace(tracer)
    try:
        leaf(x)
    finally:
        sys.settrace(None)
    return seen


def test_settrace_inside_a_suspended_frame():
    rec = Recorder({**hook_free(settraces), **hooked(leaf)})
    with callback_installed(rec):
        for _ in range(2):
            assert "leaf" in settraces(1)
        assert efx.callback_active()
    assert rec.saw(leaf) == 0


def test_another_threads_callback_keeps_working_while_one_is_suspended():
    """Thread A's frame is suspended while thread B translates its own frames; the count of threads with a
    callback stays right (the fixture checks that the hook is gone once both callbacks are)."""
    started, finished = threading.Event(), threading.Event()
    seen_in_a = []

    def waits_in_thread_a():
        started.set()
        seen_in_a.append(efx.callback_active())
        assert finished.wait(10)
        seen_in_a.append((efx.callback_active(), efx._ext._hook_installed()))

    rec_a = Recorder(hook_free(waits_in_thread_a))
    rec_b = Recorder(hooked(leaf))
    errors = []

    def thread_b():
        try:
            assert started.wait(10)
            with callback_installed(rec_b):
                assert efx._ext._hook_installed()
                STATES.clear()
                for x in range(3):
                    assert leaf(x) == x + 1
                assert [state[0] for state in STATES] == [True] * 3
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)
        finally:
            finished.set()

    b = threading.Thread(target=thread_b)
    b.start()
    with callback_installed(rec_a):
        waits_in_thread_a()
        assert efx.callback_active() and efx._ext._hook_installed()
    b.join(10)
    assert not errors, errors
    assert rec_b.saw(leaf) == 1
    # A, suspended: its frames stay out of the callback even while B's callback installs the hook
    assert seen_in_a == [False, (False, False)]


class Bound(efx.CallWithCallback):
    def __init__(self, callback, target):
        self._sot_bind(callback, target)


def calls_through_a_bound_object(obj):
    probe()
    obj()
    probe()


def test_a_call_with_its_own_callback_inside_a_suspended_frame():
    """A `CallWithCallback` called while the frame's callback is suspended (a translated layer called from
    a hook-free entry) sets its own for the call, and the suspension goes on after it."""
    rec = Recorder(hook_free(calls_through_a_bound_object))
    other = Recorder({})
    obj = Bound(other, probe)
    with callback_installed(rec):
        for _ in range(3):
            STATES.clear()
            calls_through_a_bound_object(obj)
            assert STATES == [(False, rec, False), (True, other, True), (False, rec, False)]
            assert efx.callback_active() and efx.get_callback() is rec


def shadow_original(x):
    raise AssertionError("the entry's own code runs instead")


def shadow_returns(x):
    return x


def shadow_raises(x):
    raise ValueError(x)


@pytest.mark.parametrize("replacement", [shadow_returns, shadow_raises])
def test_a_hook_free_shadow_entry_keeps_reference_counts(replacement):
    """A hook-free entry with its own code (run in a shadow frame) suspends and resumes the callback on every
    call: the callback's and the argument's reference counts stay as they were, also when the code raises."""
    rec = Recorder({shadow_original.__code__: (always, replacement.__code__, 0, True)})
    arg = object()

    def call():
        try:
            assert shadow_original(arg) is arg
        except ValueError:
            pass

    with callback_installed(rec):
        call()
        before = (sys.getrefcount(rec), sys.getrefcount(arg))
        for _ in range(1000):
            call()
        assert (sys.getrefcount(rec), sys.getrefcount(arg)) == before
        assert efx.callback_active() and efx._ext._hook_installed()
    assert rec.saw(shadow_original) == 1

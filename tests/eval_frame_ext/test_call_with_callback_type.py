"""`CallWithCallback` (eval_frame.c): a C base class whose instances call a target with a callback set for
the call, the previous callback back afterwards on every exit path (sot's TranslatedLayer).

Runs on every supported Python (see test_hook.py for how: ``--noconftest`` off 3.11).
"""

import contextlib
import gc
import sys
import weakref

import pytest
from hook_loader import efx
from test_hook import clean_hook  # noqa: F401 (an autouse fixture: no hook, no callback left after)


def no_translation(code, globals_, builtins, closure, args):
    return None


class Bound(efx.CallWithCallback):
    def __init__(self, callback, target):
        self._sot_bind(callback, target)


def test_the_callback_is_set_for_the_call_only():
    seen = []

    def target(*args, **kwargs):
        seen.append((efx.get_callback(), args, kwargs))
        return "result"

    outer = lambda *a: None  # noqa: E731
    efx.set_callback(outer)
    assert Bound(no_translation, target)(1, 2, key=3) == "result"
    assert seen == [(no_translation, (1, 2), {"key": 3})]
    assert efx.get_callback() is outer
    efx.set_callback(None)
    Bound(None, target)()
    assert seen[-1][0] is None


def test_the_previous_callback_is_back_after_an_exception():
    def target():
        assert efx.get_callback() is no_translation
        raise KeyError("from the target")

    with pytest.raises(KeyError, match="from the target"):
        Bound(no_translation, target)()
    assert efx.get_callback() is None


def test_an_unbound_instance_and_bad_bindings_raise_type_errors():
    with pytest.raises(TypeError, match="not bound"):
        efx.CallWithCallback()()
    with pytest.raises(TypeError):
        Bound(no_translation, 42)
    with pytest.raises(TypeError):
        Bound(42, print)


def test_a_cycle_through_the_target_is_collected():
    class Holder:
        pass

    holder = Holder()
    obj = Bound(no_translation, lambda: holder)
    holder.obj = obj  # obj -> target closure -> holder -> obj
    ref = weakref.ref(holder)
    del holder, obj
    gc.collect()
    assert ref() is None


# The usual call (no callback before it) takes a short way in eval_frame.c (cwc_call); every way out of it,
# also when the target changed the thread's callback or the binding, must end as `finally:
# set_callback(previous)` does.


def test_a_callback_the_target_sets_is_undone_after_the_call():
    other = lambda *a: None  # noqa: E731

    def sets(new):
        def target():
            efx.set_callback(new)
            return efx.get_callback()

        return target

    for new in (other, None, no_translation):
        obj = Bound(no_translation, sets(new))
        before = sys.getrefcount(no_translation)
        for _ in range(100):
            assert obj() is new
            assert efx.get_callback() is None and not efx.callback_active()
        assert sys.getrefcount(no_translation) == before


def test_a_callback_the_target_sets_is_undone_after_an_exception():
    def target():
        efx.set_callback(lambda *a: None)
        raise KeyError("after setting")

    with pytest.raises(KeyError, match="after setting"):
        Bound(no_translation, target)()
    assert efx.get_callback() is None


def test_nested_calls_restore_each_callback():
    other = lambda *a: None  # noqa: E731
    seen = []
    inner = Bound(other, lambda: seen.append(efx.get_callback()))

    def target():
        seen.append(efx.get_callback())
        inner()
        seen.append(efx.get_callback())

    Bound(no_translation, target)()
    assert seen == [no_translation, other, no_translation]
    assert efx.get_callback() is None


def test_rebinding_during_the_call_keeps_the_callback_alive_until_the_call_ends():
    class Callback:
        def __call__(self, *args):
            return None

    callback = Callback()
    ref = weakref.ref(callback)
    seen = []

    def target():
        obj._sot_bind(None, target)  # the object's own reference to the callback goes
        gc.collect()
        seen.append(efx.get_callback() is ref())
        return "done"

    obj = Bound(callback, target)
    del callback
    assert obj() == "done" and seen == [True]
    assert efx.get_callback() is None
    gc.collect()
    assert ref() is None, "the thread's reference was not released after the call"


@pytest.mark.parametrize("raises", [False, True])
def test_the_callbacks_reference_count_is_stable_over_many_calls(raises):
    def target():
        if raises:
            raise ValueError

    obj = Bound(no_translation, target)
    for _ in range(3):
        with pytest.raises(ValueError) if raises else contextlib.nullcontext():
            obj()
    before = sys.getrefcount(no_translation)
    for _ in range(1000):
        with pytest.raises(ValueError) if raises else contextlib.nullcontext():
            obj()
    assert sys.getrefcount(no_translation) == before


def test_a_call_under_another_callback_restores_it():
    outer = lambda *a: None  # noqa: E731
    with efx.callback_installed(outer):
        for _ in range(2):
            assert Bound(no_translation, efx.get_callback)() is no_translation
            assert efx.get_callback() is outer and efx.callback_active()

"""`CallWithCallback` (eval_frame.c): a C base class whose instances call a target with a callback set for
the call, the previous callback back afterwards on every exit path (sot's TranslatedLayer).

Runs on every supported Python (see test_hook.py for how: ``--noconftest`` off 3.11).
"""

import gc
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

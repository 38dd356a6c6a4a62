"""Class attributes assigned in the frame (executor/variables/attribute.py): ``Cls.n = v``, ``Cls.n += 1``,
``setattr(Cls, ...)`` and ``type(obj).n = v`` are side effects replayed after the graph; reads later in the
frame, through the class, a subclass or an instance, see the new value the way Python's lookup would."""
from __future__ import annotations

import json

import numpy as np
import paddle

import sot
from conftest import assert_same


class Base:
    count = 0
    label = "base"


class Sub(Base):
    label = "sub"


class Item(Base):
    def __init__(self, own: bool = False) -> None:
        if own:
            self.count = 100


def _reset() -> None:
    Base.count, Base.label, Sub.label = 0, "base", "sub"
    for cls in (Base, Sub, Item):
        for name in ("tag", "extra", "__repr__", *(("count",) if cls is not Base else ())):
            if name in vars(cls):
                delattr(cls, name)


def _t() -> paddle.Tensor:
    return paddle.to_tensor(np.arange(3, dtype="float32"))


def _state() -> tuple:
    return tuple(sorted((cls.__name__, k, v) for cls in (Base, Sub, Item) for k, v in vars(cls).items()
                        if k in ("count", "label", "tag", "extra")))


def _check(fn, make, calls: int = 2, reset: bool = True):
    fast = sot.symbolic_translate(fn)
    for _ in range(calls):
        if reset:
            _reset()
        expected, expected_state = fn(*make()), _state()
        if reset:
            _reset()
        actual, actual_state = fast(*make()), _state()
        assert_same(actual, expected)
        assert actual_state == expected_state
    _reset()
    return sot.stats()


def test_increment_through_the_class_and_type_of_an_instance(compile_all):
    def fn(x, item):
        Base.count += 1
        type(item).count += 1  # Item.count: a new attribute of the subclass
        return x * Base.count, item.count, Sub.count, Item.count

    stats = _check(fn, lambda: (_t(), Item()))
    assert stats.graph_breaks == 0 and stats.fallbacks == 0 and stats.translate_count == 1


def test_setattr_builtin_and_reads_through_subclasses_and_instances(compile_all):
    def fn(x, item, own):
        setattr(Base, "label", "changed")
        Base.tag = 3.0
        return x * item.tag, item.label, Sub.label, own.count, Sub.tag, hasattr(Sub, "extra")

    stats = _check(fn, lambda: (_t(), Item(), Item(own=True)))
    assert stats.graph_breaks == 0 and stats.fallbacks == 0


def test_an_attribute_store_on_a_subclass_does_not_change_the_base(compile_all):
    def fn(x):
        Sub.count = 5
        return x * Sub.count, Base.count

    stats = _check(fn, lambda: (_t(),))
    assert stats.graph_breaks == 0 and stats.fallbacks == 0


def test_a_counter_kept_on_the_class_across_calls(compile_all):
    def fn(x):
        Base.count += 1
        return x * Base.count

    _reset()
    fast = sot.symbolic_translate(fn)
    results = [fast(_t()).numpy() for _ in range(3)]
    assert Base.count == 3
    for index, result in enumerate(results):
        np.testing.assert_allclose(result, np.arange(3) * (index + 1))
    _reset()


def test_a_graph_break_after_the_store_keeps_it(compile_all):
    def fn(x):
        Base.count = 7
        text = json.dumps([1])  # a library call: breaks the graph
        return x * Base.count, text, Item().count

    _check(fn, lambda: (_t(),))


def test_a_special_method_assigned_on_the_class_runs_natively_and_stays_correct(compile_all):
    def fn(x, item):
        Item.__repr__ = lambda self: "item"
        return x + 1, repr(item)

    _check(fn, lambda: (_t(), Item()))

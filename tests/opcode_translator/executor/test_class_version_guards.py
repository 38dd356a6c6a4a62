"""Class lookups guarded by the class's version tag (guard.class_lookup_checks, type_version in C).

What the simulation finds on a user class (a dunder it inlines, a method, ``__init__``, a class attribute) must
be found again for a cached translation to be used: changing the class after translation retranslates. A class
that keeps changing is guarded member by member instead, and one without a version tag too.
"""
from __future__ import annotations

import re
import sys
from typing import Any

import numpy as np
import paddle
import pytest

import sot
from conftest import assert_same
from sot.eval_frame_ext import GUARD_OPCODES, GuardProgram, cache_entries, type_version
from sot.opcode_translator.executor import guard as guard_module

X = paddle.to_tensor(np.array([1.0, -2.0, 3.5], dtype="float32"))


def _guard_text(fn: Any) -> str:
    return "\n".join(str(guard.guard) for guard, _ in cache_entries(fn.__code__))


def _has_version_check(fn: Any, class_name: str) -> bool:
    return re.search(rf"type_version\([\w.<>]*\b{class_name}\) == \d+", _guard_text(fn)) is not None


def _agree(fn: Any, *args: Any) -> bool:
    """The newest entry's fast check (the C program) and its reference chain give the same answer."""
    guard = cache_entries(fn.__code__)[0][0].guard
    params = (fn.__globals__, fn.__closure__, *args)
    fast, reference = bool(guard.check(*params)), bool(guard.reference(*params))
    assert fast == reference, guard.source
    return fast


# -- type_version (C) -------------------------------------------------------------------------------------
def test_type_version_changes_with_the_class_and_its_bases_and_never_comes_back():
    class Base:
        x = 1

    class Derived(Base):
        pass

    first = type_version(Derived)
    assert first != 0 and type_version(Derived) == first  # assigned once, then stable
    seen = {first}
    for change in (lambda: setattr(Derived, "y", 2), lambda: setattr(Base, "x", 3),
                   lambda: delattr(Derived, "y"), lambda: setattr(Base, "x", 3)):  # (even the same value)
        change()
        version = type_version(Derived)
        assert version != 0 and version not in seen
        seen.add(version)
    assert type_version(int) == type_version(int) != 0
    with pytest.raises(TypeError):
        type_version(Derived())  # type: ignore[arg-type]


def test_the_program_checks_a_type_version_as_the_python_check_does():
    class Plain:
        pass

    op = GUARD_OPCODES["TEST_TYPE_VERSION"]
    program = GuardProgram(1, (type_version(Plain),), 0, [(op, 0, 0, 1, 0)], [])
    assert program(Plain) is True
    Plain.attribute = 1
    assert program(Plain) is False
    with pytest.raises(TypeError):
        program(Plain())
    for bad in (0, -1, 1 << 40, "1", 1.0):  # a nonzero int tag, as a constant
        with pytest.raises(ValueError):
            GuardProgram(1, (bad,), 0, [(op, 0, 0, 1, 0)], [])


# -- lookups through instances and classes ------------------------------------------------------------------
class Vec:
    def __init__(self, value):
        self.value = value

    def __add__(self, other):
        return Vec(self.value + other)

    def __getitem__(self, index):
        return self.value * index

    def __call__(self, t):
        return t - self.value

    def scale(self, t):
        return t * 2

    factor = 3


def _restore_vec(monkeypatch: Any) -> None:
    for name in ("__add__", "__getitem__", "__call__", "scale", "factor"):
        monkeypatch.setattr(Vec, name, Vec.__dict__[name])


@pytest.mark.parametrize("change", ["__add__", "__getitem__", "__call__", "scale", "factor", "base"])
def test_a_class_changed_after_translation_retranslates(monkeypatch, compile_all, change):
    _restore_vec(monkeypatch)

    def fn(v, t):
        return (v + 1).value, v[t], v(t), v.scale(t) + Vec.factor

    translated = sot.symbolic_translate(fn)
    v = Vec(X)
    assert_same(translated(v, X), fn(v, X))
    assert_same(translated(v, X), fn(v, X))
    assert sot.stats().translate_count == 1 and sot.stats().cache_hits == 1
    if change == "base":  # a lookup through a subclass changes with its base
        class Sub(Vec):
            pass

        v = Sub(X)
        assert_same(translated(v, X), fn(v, X))
        monkeypatch.setattr(Vec, "scale", lambda self, t: t * 5)
    elif change == "factor":
        monkeypatch.setattr(Vec, "factor", 7)
    else:
        monkeypatch.setattr(Vec, change, {
            "__add__": lambda self, other: Vec(self.value - other),
            "__getitem__": lambda self, index: self.value + index,
            "__call__": lambda self, t: t + self.value,
            "scale": lambda self, t: t * 4,
        }[change])
    before = sot.stats().translate_count
    assert_same(translated(v, X), fn(v, X))
    assert sot.stats().translate_count == before + 1  # a miss: the translation is made again
    assert_same(translated(v, X), fn(v, X))
    assert sot.stats().fallbacks == 0


def test_the_version_check_runs_in_the_program_and_an_unchanged_class_hits(compile_all):
    class Point:
        def __init__(self, x):
            self.x = x

        def norm(self):
            return self.x * self.x

    def fn(p):
        return p.norm() + 1

    translated = sot.symbolic_translate(fn)
    for _ in range(3):
        assert_same(translated(Point(X)), fn(Point(X)))
    assert sot.stats().translate_count == 1 and sot.stats().cache_hits == 2
    assert _has_version_check(fn, "Point")
    (guard, _), = cache_entries(fn.__code__)
    program = guard.guard.program
    assert program is not None and not any("type_version" in term for term in guard.guard.python_terms)
    assert _agree(fn, Point(X))
    Point.other = 1  # any change of the class misses (not only of what was read)
    assert not _agree(fn, Point(X))


def test_a_class_used_by_identity_and_a_metaclass_are_guarded_by_version(compile_all):
    class Meta(type):
        def describe(cls):
            return 2

    class Config(metaclass=Meta):
        scale = 3

        @classmethod
        def make(cls, t):
            return t * cls.scale

    def fn(t):
        return Config.make(t)

    translated = sot.symbolic_translate(fn)
    assert_same(translated(X), fn(X))
    assert _has_version_check(fn, "Config") and _has_version_check(fn, "Meta")
    Config.make = classmethod(lambda cls, t: t - cls.scale)
    assert_same(translated(X), fn(X))
    assert sot.stats().translate_count == 2


# -- classes that keep changing -----------------------------------------------------------------------------
def test_a_class_the_frame_assigns_on_every_call_keeps_hitting(compile_all):
    class Last:
        seen = None

        def double(self, t):
            return t * 2

    def fn(obj, t, tag):
        Last.seen = tag  # changes the class's version at every call: guarded member by member at once
        return obj.double(t)

    translated = sot.symbolic_translate(fn)
    obj = Last()
    for _ in range(5):
        assert_same(translated(obj, X, "a"), fn(obj, X, "a"))
        assert Last.seen == "a"
    assert sot.stats().translate_count == 1 and sot.stats().cache_hits == 4
    assert "class_members_match" in _guard_text(fn)
    Last.double = lambda self, t: t * 3  # the member checks still see a method replaced
    assert_same(translated(obj, X, "a"), fn(obj, X, "a"))
    assert sot.stats().translate_count == 2


def test_a_class_changed_between_calls_is_guarded_member_by_member_after_a_few_versions(compile_all):
    class Model:
        step = 0  # set by the caller before every call: plain data that keeps changing

        def run(self, t):
            return t + 1

    def fn(m, t):
        return m.run(t)

    translated = sot.symbolic_translate(fn)
    m = Model()
    for step in range(12):
        Model.step = step
        assert_same(translated(m, X), fn(m, X))
    stats = sot.stats()
    limit = guard_module.CLASS_VERSION_CHANGES_LIMIT
    assert stats.translate_count <= limit + 1 and stats.cache_hits >= 12 - limit - 1 and stats.fallbacks == 0
    assert "class_members_match" in _guard_text(fn)
    Model.run = lambda self, t: t - 1  # a change of what was looked up still misses
    assert_same(translated(m, X), fn(m, X))


def test_a_counter_read_through_type_of_self_is_counted_as_eagerly(compile_all):
    class Counter:
        calls = 0

        def step(self, t):
            type(self).calls += 1  # read through an object with no path: no value guard of its own
            return t * type(self).calls

    def fn(c, t):
        return c.step(t)

    translated = sot.symbolic_translate(fn)
    c = Counter()
    for n in range(1, 13):
        assert_same(translated(c, X), X * n)
        assert Counter.calls == n
    assert sot.stats().fallbacks == 0


def test_a_counter_read_by_its_path_is_relaxed_as_before(compile_all):
    class Tally:
        calls = 0

    def fn(t):
        Tally.calls += 1
        return t * 2

    translated = sot.symbolic_translate(fn)
    for n in range(1, 9):
        assert_same(translated(X), X * 2)
        assert Tally.calls == n
    assert sot.stats().cache_hits >= 4  # the count is guarded by its path and becomes symbolic, as an attribute


def test_a_class_without_a_version_tag_is_guarded_member_by_member(monkeypatch, compile_all):
    """(What 3.13+ do to a type modified about a thousand times; see the real case below.)"""
    class Op:
        def __neg__(self):
            return 5

    monkeypatch.setattr(guard_module, "type_version", lambda cls: 0 if cls is Op else type_version(cls))

    def fn(o, t):
        return t * -o

    translated = sot.symbolic_translate(fn)
    o = Op()
    assert_same(translated(o, X), fn(o, X))
    assert_same(translated(o, X), fn(o, X))
    assert sot.stats().cache_hits == 1
    text = _guard_text(fn)
    assert "class_members_match" in text and "type_version" not in text
    Op.__neg__ = lambda self: 7
    assert_same(translated(o, X), fn(o, X))
    assert sot.stats().translate_count == 2


@pytest.mark.skipif(sys.version_info < (3, 13), reason="3.13+ stop giving tags to a type modified often")
def test_a_class_modified_a_thousand_times_has_no_tag_and_never_passes_wrongly(compile_all):
    class Worn:
        def __pos__(self):
            return 2

    for i in range(1500):  # (a tag is used up when one is given: a lookup between the changes)
        Worn.counter = i
        type_version(Worn)
    if type_version(Worn) != 0:
        pytest.skip("this CPython still gives the type a tag")

    def fn(w, t):
        return t * +w

    translated = sot.symbolic_translate(fn)
    w = Worn()
    assert_same(translated(w, X), fn(w, X))
    assert_same(translated(w, X), fn(w, X))
    assert sot.stats().cache_hits == 1
    Worn.__pos__ = lambda self: 3
    assert_same(translated(w, X), fn(w, X))


def test_member_checks_see_every_kind_of_change():
    class Base:
        def method(self):
            return 1

    class Derived(Base):
        data = 1

    spec = guard_module._members_spec(Derived, frozenset({"data"}))
    match = guard_module.class_members_match
    assert match(Derived, spec)
    Derived.data = 2  # excluded
    assert match(Derived, spec)
    Derived.other = 1  # a new name
    assert not match(Derived, spec)
    del Derived.other
    assert match(Derived, spec)
    Base.method = lambda self: 2  # a base's member
    assert not match(Derived, spec)
    spec = guard_module._members_spec(Derived, frozenset())

    class Mixin:
        pass

    Derived.__bases__ = (Mixin, Base)  # another MRO
    assert not match(Derived, spec)


# -- layers ---------------------------------------------------------------------------------------------------
def test_a_layer_class_changed_after_translation_retranslates_and_recompiles(compile_all):
    class Block(paddle.nn.Layer):
        def forward(self, x):
            return x * 2

        def helper(self, x):
            return x + 1

        def __add__(self, x):  # (run by the compiled program's trace: its cached program must not serve)
            return x - 1

    def fn(block, t):
        return block(t) + block.helper(t) + (block + t)

    translated = sot.symbolic_translate(fn)
    block = Block()
    assert_same(translated(block, X), fn(block, X))
    assert_same(translated(block, X), fn(block, X))
    assert sot.stats().cache_hits >= 1
    assert _has_version_check(fn, "Block")
    for name, method in (("forward", lambda self, x: x * 3), ("helper", lambda self, x: x + 4),
                         ("__add__", lambda self, x: x - 5)):
        setattr(Block, name, method)
        assert_same(translated(block, X), fn(block, X))
    assert sot.stats().fallbacks == 0


def test_the_program_key_holds_the_version_of_user_classes():
    from sot.symbolic.sir import class_version

    class Holder:
        pass

    holder = Holder()
    before = class_version(holder)
    assert before == type_version(Holder) != 0
    Holder.x = 1
    assert class_version(holder) not in (None, before)
    assert class_version(3) is None and class_version(X) is None  # built-in types never change

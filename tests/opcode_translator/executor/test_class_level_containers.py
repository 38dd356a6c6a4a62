"""Containers kept on a class (a registry, a cache) and reached through ``type(obj)``, ``super()`` or a
namedtuple instance are the real ones: their changes are written back after the graph and their identity is
kept, as eagerly. A real container that the simulation reaches without any path it could write it back
through makes the frame run eagerly rather than lose the change. (Found by user-style programs: a
``type(self)`` registry lost its appends, ``dataclasses.replace`` fell back on an internal guard error.)"""
from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import paddle

import sot
from conftest import assert_same


class Registry:
    items: list = []
    table: dict = {}


class Registered(Registry):
    pass


def _reset_registry() -> None:
    Registry.items.clear()
    Registry.table.clear()


def _through_type(x: paddle.Tensor, obj: Any) -> tuple:
    seen = type(obj).items
    seen.append(x.shape[0])
    type(obj).table["count"] = len(seen)
    return x * 2, seen, type(obj).table


class Child(Registry):
    def run(self, x: paddle.Tensor) -> tuple:
        super().items.append(x.shape[0])
        return x + 1, super().items


class Step(NamedTuple):
    x: Any
    n: int = 1
    seen = []  # a class attribute of the tuple's class, not a field


def _through_namedtuple(step: Step) -> paddle.Tensor:
    step.seen.append(step.n)
    return step.x * 2


def _through_namedtuple_made_in_frame(x: paddle.Tensor) -> paddle.Tensor:
    Step(x, 5).seen.append(5)
    return x * 2


def _outcomes(fn: Any, make_args: Any, reset: Any, state: Any, calls: int = 2) -> tuple:
    reset()
    expected = [fn(*make_args()) for _ in range(calls)]
    expected_state = state()
    reset()
    translated = sot.symbolic_translate(fn)
    with sot.config.patch(min_graph_size=0):
        actual = [translated(*make_args()) for _ in range(calls)]
    return actual, expected, state(), expected_state


def test_a_registry_reached_through_type_is_the_real_one() -> None:
    actual, expected, state, expected_state = _outcomes(
        _through_type, lambda: (paddle.ones([3]), Registered()), _reset_registry,
        lambda: (list(Registry.items), dict(Registry.table)))
    assert state == expected_state == ([3, 3], {"count": 2})
    assert_same(actual, expected)
    assert actual[-1][1] is Registry.items and actual[-1][2] is Registry.table  # identity, not a copy
    stats = sot.stats()
    assert stats.fallbacks == 0 and stats.graph_breaks == 0


def test_a_registry_reached_through_super_is_the_real_one() -> None:
    child = Child()
    actual, expected, state, expected_state = _outcomes(
        child.run, lambda: (paddle.ones([2]),), _reset_registry, lambda: list(Registry.items))
    assert state == expected_state == [2, 2]
    assert_same(actual, expected)
    assert actual[-1][1] is Registry.items
    stats = sot.stats()
    assert stats.fallbacks == 0 and stats.graph_breaks == 0 and stats.translate_count == 1


def test_a_class_attribute_of_a_namedtuple_argument_is_the_real_one() -> None:
    actual, expected, state, expected_state = _outcomes(
        _through_namedtuple, lambda: (Step(paddle.ones([2]), 3),), Step.seen.clear, lambda: list(Step.seen))
    assert state == expected_state == [3, 3]
    assert_same(actual, expected)
    stats = sot.stats()
    assert stats.fallbacks == 0 and stats.translate_count == 1


def test_a_real_container_reached_without_a_path_runs_the_frame_eagerly() -> None:
    """The tuple is made in the frame: its class's list has no path the change could be written back by."""
    actual, expected, state, expected_state = _outcomes(
        _through_namedtuple_made_in_frame, lambda: (paddle.ones([2]),), Step.seen.clear, lambda: list(Step.seen))
    assert state == expected_state == [5, 5]
    assert_same(actual, expected)
    assert sot.stats().fallbacks == 1


@dataclasses.dataclass
class Config:
    scale: float = 2.0
    extra: dict = dataclasses.field(default_factory=dict)


def _replaced(x: paddle.Tensor, config: Config) -> paddle.Tensor:
    bigger = dataclasses.replace(config, scale=config.scale + 1)
    return x * bigger.scale


def test_dataclasses_replace_is_translated_and_guarded() -> None:
    """``replace`` reads the fields dict through ``type(obj)`` and then through ``obj``: one object, two
    paths (the guard crashed on the first, which had none)."""
    translated = sot.symbolic_translate(_replaced)
    x = paddle.ones([2])
    with sot.config.patch(min_graph_size=0):
        for _ in range(2):
            assert_same(translated(x, Config()), _replaced(x, Config()))
        assert_same(translated(x, Config(scale=5.0)), _replaced(x, Config(scale=5.0)))
    stats = sot.stats()
    assert stats.fallbacks == 0 and stats.graph_breaks == 0
    assert stats.translate_count == 2 and stats.cache_hits == 1  # another scale is another translation

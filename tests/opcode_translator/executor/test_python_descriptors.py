"""Descriptors with a Python ``__get__`` (a user's lazy or computed class attribute, ``functools.cached_property``)
are simulated: ``__get__`` inlined, a cached value stored as the real one stores it. Before, the frame fell
back to eager. ``super().method`` reaching a base's method under ``@symbolic_translate`` is inlined too."""
from __future__ import annotations

import functools
from typing import Any

import numpy as np
import paddle
import paddle.nn as nn

import sot
from tests.conftest import assert_counts, assert_same


def _tensor(*shape: int, seed: int = 0) -> paddle.Tensor:
    return paddle.to_tensor(np.random.default_rng(seed).standard_normal(shape).astype("float32"))


class Doubled:
    """A non-data descriptor: twice the instance's ``base``; off the class, itself."""

    reads: list[str] = []

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: type) -> Any:
        if obj is None:
            return self
        Doubled.reads.append(self.name)
        return obj.base * 2


class Positive:
    """A data descriptor validating what is stored (kept in the instance's ``__dict__`` under another name)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = "_" + name

    def __get__(self, obj: Any, owner: type) -> Any:
        return self if obj is None else getattr(obj, self.slot)

    def __set__(self, obj: Any, value: Any) -> None:
        if value <= 0:
            raise ValueError("must be positive")
        setattr(obj, self.slot, value)


class Config:
    twice = Doubled()
    scale = Positive()

    def __init__(self, base: float, scale: float) -> None:
        self.base = base
        self.scale = scale


def test_a_python_descriptor_read_is_inlined_with_its_side_effects(compile_all: Any) -> None:
    config = Config(1.5, 3.0)

    def step(x):
        return x * config.twice + config.scale

    x = _tensor(4)
    Doubled.reads.clear()
    expected = step(x)
    translated = sot.symbolic_translate(step)
    for _ in range(2):
        assert_same(translated(x), expected)
    assert Doubled.reads == ["twice"] * 3
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


def test_a_descriptor_read_off_the_class_gets_none_for_the_instance(compile_all: Any) -> None:
    def step(x):
        return x + 1, type(Config.twice).__name__, Config.scale is Config.__dict__["scale"]

    x = _tensor(2)
    translated = sot.symbolic_translate(step)
    assert_same(translated(x), step(x))
    assert sot.stats().fallbacks == 0


def test_an_instance_attribute_shadowing_a_non_data_descriptor_misses_the_guard(compile_all: Any) -> None:
    config = Config(2.0, 1.0)

    def step(x):
        return x * config.twice

    x = _tensor(3)
    translated = sot.symbolic_translate(step)
    assert_same(translated(x), step(x))
    config.__dict__["twice"] = 10.0  # (the instance's own attribute wins over a non-data descriptor)
    assert_same(translated(x), step(x))
    assert sot.stats().translate_count == 2


class Model:
    def __init__(self, k: float) -> None:
        self.k = k
        self.computed = 0

    @functools.cached_property
    def table(self) -> paddle.Tensor:
        self.computed += 1
        return paddle.arange(4, dtype="float32") * self.k


def test_a_cached_property_first_read_in_translated_code_is_cached_as_eager_caches_it(compile_all: Any) -> None:
    def step(model, x):
        return x + model.table + model.table.sum()

    x = _tensor(4)
    translated = sot.symbolic_translate(step)
    eager_models, models = [Model(1.0), Model(2.0)], [Model(1.0), Model(2.0)]
    for _ in range(2):
        for eager_model, model in zip(eager_models, models):
            assert_same(translated(model, x), step(eager_model, x))
    for eager_model, model in zip(eager_models, models):
        assert model.computed == eager_model.computed == 1
        assert "table" in model.__dict__
        assert_same(model.table, eager_model.table)
    assert sot.stats().fallbacks == 0 and sot.stats().graph_breaks == 0


def test_a_cached_property_read_off_the_class_is_the_descriptor(compile_all: Any) -> None:
    def step(x):
        return x * 2, Model.table

    x = _tensor(2)
    result = sot.symbolic_translate(step)(x)
    assert result[1] is Model.__dict__["table"]


class Base(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    @sot.symbolic_translate
    def forward(self, x):
        return self.lin(x) * 2


class Child(Base):
    def forward(self, x):
        return super().forward(x) + 1


def test_super_reaching_a_translated_method_is_inlined(compile_all: Any) -> None:
    paddle.seed(4)
    model = Child()

    def step(x):
        return model(x).sum()

    x = _tensor(2, 4)
    expected = step(x)  # (eager: the translated base forward runs as its own translation)
    sot.reset()
    translated = sot.symbolic_translate(step)
    for _ in range(2):
        assert_same(translated(x), expected)
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)

"""A layer attribute that Paddle's ``Layer.__getattr__`` does not find is an AttributeError of the
simulation, guarded to stay missing: ``hasattr(self, "cache")``, ``getattr(self, "scale", 2.0)`` and
``try: self.x except AttributeError`` in a forward are one graph (each was a graph break: simulating Paddle's
``__getattr__`` reads the layer's ``__dict__``), and a wrapper layer whose own ``__getattr__`` asks
``super().__getattr__(name)`` first and then delegates to the layer it wraps (LoRA/PEFT adapters) is
simulated too (it fell back)."""
from __future__ import annotations

import copy
from typing import Any

import numpy as np
import paddle
import paddle.nn as nn

import sot
from conftest import assert_counts, assert_same


def _input() -> paddle.Tensor:
    return paddle.to_tensor(np.random.default_rng(0).standard_normal((2, 4)).astype("float32"))


class Optional(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: paddle.Tensor) -> tuple:
        y = self.fc(x)
        if hasattr(self, "shift"):
            y = y + self.shift
        scale = getattr(self, "scale", 2.0)
        try:
            self.missing
        except AttributeError as exc:
            message = str(exc)
        return y * scale, message


def test_missing_layer_attributes_are_simulated_and_guarded_to_stay_missing() -> None:
    paddle.seed(0)
    layer = Optional()
    eager = copy.deepcopy(layer)
    translated = sot.symbolic_translate(layer)
    x = _input()
    with sot.config.patch(min_graph_size=0):
        for _ in range(2):
            assert_same(translated(x), eager(x))
        assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)
        for target in (layer, eager):  # an attribute appears: the translation made without it misses
            target.shift = 1.0
            target.register_buffer("scale", paddle.to_tensor(3.0))
        assert_same(translated(x), eager(x))
        assert_counts(translate_count=2, graph_breaks=0, fallbacks=0, compiled_graphs=2)


class LoRA(nn.Layer):
    """Wraps a linear layer; attributes it does not have (``weight``, ``bias``) are the wrapped layer's."""

    def __init__(self, base: nn.Linear, rank: int = 2) -> None:
        super().__init__()
        self.base = base
        self.down = nn.Linear(base.weight.shape[0], rank, bias_attr=False)
        self.up = nn.Linear(rank, base.weight.shape[1], bias_attr=False)
        self.scaling = 0.5

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self.base, name)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return self.base(x) + self.up(self.down(x)) * self.scaling


class Adapted(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.proj = LoRA(nn.Linear(4, 4))

    def forward(self, x: paddle.Tensor) -> tuple:
        return self.proj(x) + self.proj.bias, self.proj.weight.shape, self.proj.scaling


def test_a_wrapper_layer_delegating_missing_attributes_through_its_own_getattr() -> None:
    paddle.seed(0)
    layer = Adapted()
    eager = copy.deepcopy(layer)
    translated = sot.symbolic_translate(layer)
    x = _input()
    with sot.config.patch(min_graph_size=0):
        for _ in range(2):
            out, expected = translated(x), eager(x)
            assert_same(out, expected)
            out[0].sum().backward()
            expected[0].sum().backward()
            for (name, p), q in zip(layer.named_parameters(), eager.parameters()):
                np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
            layer.clear_gradients()
            eager.clear_gradients()
    stats = sot.stats()
    assert stats.graph_breaks == 0 and stats.fallbacks == 0 and stats.compiled_graphs == 1


class Strict(nn.Layer):
    def __getattr__(self, name: str) -> Any:
        return super().__getattr__(name)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return x * self.absent


def test_an_attribute_no_lookup_finds_raises_eagers_error() -> None:
    translated = sot.symbolic_translate(Strict())
    for _ in range(2):
        try:
            translated(_input())
        except AttributeError as exc:
            assert str(exc) == "'Strict' object has no attribute 'absent'"
        else:
            raise AssertionError("no AttributeError")

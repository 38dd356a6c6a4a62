"""Layers whose calls run the user's code in less obvious places, and container layers changed in the frame
(all found by a helper's hunt; each gave a wrong answer or crashed):

- a subclass of a built-in layer overriding a helper its forward calls (``_prepare_qkv`` of a
  ``MultiHeadAttention``) or a ``weight`` property: the built-in forward is simulated (as one ``layer``
  statement the override ran only while the program was built: side effects lost, globals baked in, and an
  eager op on static values crashed Paddle);
- a ``forward`` set on a layer instance is guarded as the value it is (another function, or none, later);
- ``LayerList.append``/``insert``/``extend``, ``Sequential.append``/``add_sublayer`` in the frame, then
  iterating, indexing or calling the container: the members the frame holds, not the real table's.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import paddle
import paddle.nn as nn
import pytest

import sot
from tests.conftest import assert_same


def _tensor(*shape: int, seed: int = 0) -> paddle.Tensor:
    return paddle.to_tensor(np.random.default_rng(seed).standard_normal(shape).astype("float32"))


def _pair(make: Callable[[], Any], seed: int = 7) -> tuple[Any, Any]:
    paddle.seed(seed)
    first = make()
    paddle.seed(seed)
    return first, make()


LOG: list[int] = []
CONFIG = {"scale": 1.0}


class ScaledQueries(nn.MultiHeadAttention):
    def __init__(self) -> None:
        super().__init__(8, 2)

    def _prepare_qkv(self, query, key, value, cache=None):
        LOG.append(query.shape[1])
        q, k, v = super()._prepare_qkv(query, key, value, cache)
        return q * CONFIG["scale"], k, v


@pytest.mark.parametrize("min_graph_size", [0, 10])
def test_a_builtin_subclass_overriding_a_helper_of_its_forward_runs_it_at_every_call(min_graph_size: int) -> None:
    eager_layer, layer = _pair(ScaledQueries)
    eager_layer.eval()
    layer.eval()
    translated = sot.symbolic_translate(layer)
    LOG.clear()
    with sot.config.patch(min_graph_size=min_graph_size):
        for scale in (1.0, 1.0, 5.0):
            CONFIG["scale"] = scale
            x = _tensor(2, 3, 8)
            assert_same(translated(x, x, x), eager_layer(x, x, x), rtol=1e-4, atol=1e-5)
    CONFIG["scale"] = 1.0
    assert LOG == [3] * 6  # (one per call, eager's and the translation's)
    assert sot.stats().fallbacks == 0


class CountedWeight(nn.Linear):
    reads = 0

    @property
    def weight(self):
        type(self).reads += 1
        return self._parameters["weight"]

    @weight.setter
    def weight(self, value):
        self._parameters["weight"] = value


@pytest.mark.parametrize("min_graph_size", [0, 10])
def test_a_weight_property_of_a_builtin_subclass_is_read_through_the_property(min_graph_size: int) -> None:
    eager_layer, layer = _pair(lambda: CountedWeight(4, 4))
    translated = sot.symbolic_translate(layer)
    x = _tensor(1, 4)
    with sot.config.patch(min_graph_size=min_graph_size):
        for _ in range(3):
            before = CountedWeight.reads
            expected = eager_layer(x)
            eager_reads = CountedWeight.reads - before
            assert_same(translated(x), expected)
            assert CountedWeight.reads - before - eager_reads == eager_reads == 1


def test_a_class_attribute_named_like_a_parameter_comes_first_as_in_eager(compile_all: Any) -> None:
    class NoBias(nn.Layer):
        bias = 0.5  # (``self.bias`` finds this before ``Layer.__getattr__`` looks in the tables)

        def __init__(self) -> None:
            super().__init__()
            self.bias = paddle.create_parameter([2], "float32")  # (filed in ``_parameters``)

        def forward(self, x):
            return x + self.bias

    layer = NoBias()
    x = _tensor(2)
    assert_same(sot.symbolic_translate(layer)(x), layer(x))


def _times(k: float) -> Callable[[paddle.Tensor], paddle.Tensor]:
    def forward(x):
        return x * k
    return forward


@pytest.mark.parametrize("kind", [nn.Linear, "user"])
def test_a_forward_set_on_the_instance_is_guarded(kind: Any, compile_all: Any) -> None:
    class Plain(nn.Layer):
        def forward(self, x):
            return x + 1

    make = (lambda: nn.Linear(4, 4)) if kind is nn.Linear else Plain
    patched, other = _pair(make)

    def step(layer, x):
        return layer(x) * 2

    translated = sot.symbolic_translate(step)
    x = _tensor(1, 4)
    patched.forward = _times(3.0)
    assert_same(translated(patched, x), step(patched, x))
    assert_same(translated(other, x), step(other, x))  # (its class's forward)
    patched.forward = lambda x: x - 5
    assert_same(translated(patched, x), step(patched, x))
    del patched.forward
    assert_same(translated(patched, x), step(patched, x))


def _grown() -> nn.Layer:
    extra = [nn.Linear(4, 4) for _ in range(3)]

    class Grown(nn.Layer):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = nn.LayerList([nn.Linear(4, 4)])
            self.seq = nn.Sequential(nn.Linear(4, 4))

        def forward(self, x, mode):
            if mode == "append":
                self.blocks.append(extra[0])
                return sum(block(x) for block in self.blocks) + self.blocks[-1](x) + len(self.blocks)
            if mode == "insert":
                self.blocks.insert(0, extra[1])
                return self.blocks[0](x) * 2 + list(self.blocks)[-1](x) + len(self.blocks)
            if mode == "extend":
                self.blocks.extend([extra[1], extra[2]])
                return self.blocks[-2](x) + len(self.blocks)
            if mode == "sequential":
                self.seq.append(extra[2])
                return self.seq(x) + len(self.seq)
            self.seq.add_sublayer("added", extra[0])
            return self.seq(x)

    return Grown()


@pytest.mark.parametrize("mode", ["append", "insert", "extend", "sequential", "add_sublayer"])
def test_a_container_grown_in_the_frame_is_read_with_its_new_members(mode: str, compile_all: Any) -> None:
    eager_model, model = _pair(_grown)
    translated = sot.symbolic_translate(model)
    x = _tensor(2, 4)
    for _ in range(2):
        assert_same(translated(x, mode), eager_model(x, mode))
    assert len(model.blocks) == len(eager_model.blocks) and len(model.seq) == len(eager_model.seq)
    assert sot.stats().fallbacks == 0


def test_parameters_read_after_a_container_grew_in_the_frame_are_eagers(compile_all: Any) -> None:
    paddle.seed(3)
    extra = nn.Linear(4, 4)

    class Lazy(nn.Layer):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = nn.LayerList([nn.Linear(4, 4)])

        def forward(self, x):
            self.blocks.append(extra)
            return x.sum() * len(self.parameters())

    eager_model, model = _pair(Lazy)
    x = _tensor(2, 4)
    assert_same(sot.symbolic_translate(model)(x), eager_model(x))


class Stepper:
    def __init__(self) -> None:
        self.k = 2.0

    def step(self, x):
        return x * self.k


def test_a_method_patched_on_a_plain_instance_misses_the_entry(compile_all: Any) -> None:
    stepper = Stepper()

    def run(obj, x):
        return obj.step(x) + 1

    translated = sot.symbolic_translate(run)
    x = _tensor(3)
    assert_same(translated(stepper, x), run(stepper, x))
    stepper.step = lambda x: x - 10
    assert_same(translated(stepper, x), run(stepper, x))
    del stepper.step
    assert_same(translated(stepper, x), run(stepper, x))

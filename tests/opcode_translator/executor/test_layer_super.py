"""``super()`` in layer subclasses: ``super().forward(x)`` in a subclass of a built-in layer is one ``layer``
statement running the built-in forward on that very layer; ``super()`` reaching a method of another module is
guarded like any value of the frame (its globals, a reassigned method)."""
from __future__ import annotations

from typing import Any

import numpy as np
import paddle
import paddle.nn as nn

import sot


def _tensor(*shape: int, seed: int = 0, stop_gradient: bool = True) -> paddle.Tensor:
    value = paddle.to_tensor(np.random.default_rng(seed).standard_normal(shape).astype("float32"))
    value.stop_gradient = stop_gradient
    return value


def _seeded(make: Any, seed: int = 3) -> Any:
    paddle.seed(seed)
    return make()


def _close(actual: Any, expected: Any) -> None:
    if isinstance(expected, (tuple, list)):
        assert type(actual) is type(expected) and len(actual) == len(expected)
        for a, e in zip(actual, expected):
            _close(a, e)
        return
    assert actual.shape == expected.shape and actual.stop_gradient == expected.stop_gradient
    np.testing.assert_allclose(actual.numpy(), expected.numpy(), rtol=1e-5, atol=1e-6)


def _call(layer: nn.Layer, *args: Any) -> Any:
    return layer(*args)


class DoubledLinear(nn.Linear):
    def forward(self, x):
        return super().forward(x) * 2


class ShiftedConv(nn.Conv2D):
    def __init__(self) -> None:
        super().__init__(2, 3, 3, padding=1)
        self.shift = 0.5

    def forward(self, x):
        return super().forward(x + self.shift).mean(axis=[2, 3])


class LastStepLSTM(nn.LSTM):
    def forward(self, x):
        out, (h, c) = super().forward(x)
        return out[:, -1], h


def test_super_forward_of_a_builtin_layer_is_one_statement_with_eager_gradients(compile_all):
    eager, translated = _seeded(lambda: DoubledLinear(3, 4)), _seeded(lambda: DoubledLinear(3, 4))
    fast = sot.symbolic_translate(_call)
    for step in range(3):
        x_e, x_t = _tensor(2, 3, seed=step, stop_gradient=False), _tensor(2, 3, seed=step, stop_gradient=False)
        expected, actual = _call(eager, x_e), fast(translated, x_t)
        _close(actual, expected)
        expected.sum().backward()
        actual.sum().backward()
        np.testing.assert_allclose(x_t.grad.numpy(), x_e.grad.numpy(), rtol=1e-5)
    for (name, p_e), (_, p_t) in zip(eager.named_parameters(), translated.named_parameters()):
        np.testing.assert_allclose(p_t.grad.numpy(), p_e.grad.numpy(), rtol=1e-5, err_msg=name)
    stats = sot.stats()
    assert stats.graph_breaks == 0 and stats.fallbacks == 0 and stats.translate_count == 1, stats


def test_super_forward_with_arguments_and_tuple_outputs(compile_all):
    for make, shape in ((ShiftedConv, (2, 2, 5, 5)), (lambda: LastStepLSTM(3, 4), (2, 5, 3))):
        eager, translated = _seeded(make), _seeded(make)
        fast = sot.symbolic_translate(_call)
        for _ in range(2):
            x = _tensor(*shape)
            _close(fast(translated, x), _call(eager, x))
    stats = sot.stats()
    assert stats.graph_breaks == 0 and stats.fallbacks == 0, stats


def test_two_instances_of_the_subclass_keep_their_own_weights(compile_all):
    """The statement calls one layer: another instance of the class (other weights) must not reuse it."""
    first, second = _seeded(lambda: DoubledLinear(3, 3), 1), _seeded(lambda: DoubledLinear(3, 3), 2)
    fast = sot.symbolic_translate(_call)
    x = _tensor(2, 3)
    for layer in (first, second, first, second):
        _close(fast(layer, x), _call(layer, x))


def test_super_forward_skips_the_layers_hooks_as_eager_does(compile_all):
    layer = _seeded(lambda: DoubledLinear(3, 3))
    layer.register_forward_post_hook(lambda _, inputs, output: output + 1)
    x = _tensor(2, 3)
    _close(sot.symbolic_translate(_call)(layer, x), _call(layer, x))
    assert sot.stats().fallbacks == 0


def _module_with_base(scale: float) -> dict:
    """A base layer defined in another module (its own globals), as a library of user layers would be."""
    namespace: dict = {"__name__": "other_user_module", "nn": nn, "SCALE": scale}
    exec("class Base(nn.Layer):\n"
         "    def forward(self, x):\n"
         "        return x * SCALE\n", namespace)
    return namespace


def test_super_method_from_another_module_reads_its_globals_fresh(compile_all):
    module = _module_with_base(2.0)

    class Derived(module["Base"]):
        def forward(self, x):
            return super().forward(x) + 1

    layer = Derived()
    fast = sot.symbolic_translate(_call)
    x = _tensor(3)
    for scale in (2.0, 3.0, 2.0):
        module["SCALE"] = scale
        _close(fast(layer, x), _call(layer, x))
    stats = sot.stats()
    assert stats.fallbacks == 0 and stats.graph_breaks == 0, stats


def test_reassigned_base_method_is_seen(compile_all):
    class Base(nn.Layer):
        def forward(self, x):
            return x * 2

    class Derived(Base):
        def forward(self, x):
            return super().forward(x) - 1

    layer = Derived()
    fast = sot.symbolic_translate(_call)
    x = _tensor(3)
    _close(fast(layer, x), _call(layer, x))
    Base.forward = lambda self, x: x * 5
    _close(fast(layer, x), _call(layer, x))


class LoggedStores(nn.Layer):
    """A layer overriding ``__setattr__`` to log what is stored, then storing through ``Layer.__setattr__``."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.log: list[str] = []

    def __setattr__(self, name, value):
        if name != "log" and hasattr(self, "log"):
            self.log.append(name)
        super().__setattr__(name, value)

    def forward(self, x):
        self.rows = x.shape[0]
        self.cache = self.lin(x)  # (a tensor: filed as a buffer by Layer.__setattr__)
        return self.cache * 2


def test_super_setattr_of_a_layer_is_the_plain_layer_store(compile_all: Any) -> None:
    eager_layer, layer = _seeded(LoggedStores), _seeded(LoggedStores)
    translated = sot.symbolic_translate(layer)
    for rows in (2, 2, 4):
        x = _tensor(rows, 3)
        _close(translated(x), eager_layer(x))
    assert layer.log == eager_layer.log == ["rows", "cache"] * 3
    assert layer.rows == eager_layer.rows == 4
    assert "cache" in layer._buffers and "cache" in eager_layer._buffers
    assert sot.stats().fallbacks == 0 and sot.stats().graph_breaks == 0

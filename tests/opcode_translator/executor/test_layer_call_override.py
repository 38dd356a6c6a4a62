"""Layers whose class overrides ``__call__``: calling such a layer from translated code runs the override
(simulated: its side effects replayed, its ``super().__call__`` the hooks and ``forward``), not the layer's
``forward`` directly; ``layer.__call__(x)`` and ``nn.Layer.__call__(layer, x)`` spelled out are the call too."""
from __future__ import annotations

from typing import Any

import numpy as np
import paddle
import paddle.nn as nn
import pytest

import sot
from tests.conftest import assert_counts, assert_same, check_same_exception


def _tensor(*shape: int, seed: int = 0) -> paddle.Tensor:
    return paddle.to_tensor(np.random.default_rng(seed).standard_normal(shape).astype("float32"))


class Counted(nn.Layer):
    """Counts its calls and doubles what ``Layer.__call__`` gives."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.calls = 0

    def __call__(self, x):
        self.calls += 1
        return super().__call__(x) * 2

    def forward(self, x):
        return self.lin(x)


class ShiftedLinear(nn.Linear):
    """A built-in layer class whose subclass wraps the call (not ``forward``)."""

    def __init__(self) -> None:
        super().__init__(4, 4)
        self.seen: list[tuple[int, ...]] = []

    def __call__(self, x):
        self.seen.append(tuple(x.shape))
        return super().__call__(x + 1) - 100


def _make(cls: type) -> Any:
    paddle.seed(5)
    return cls()


@pytest.mark.parametrize("way", ["compiled", "eager"])
def test_a_user_layers_call_override_runs_with_its_side_effects(way: str) -> None:
    from sot.symbolic.compile import forced_way

    eager_layer, layer = _make(Counted), _make(Counted)

    def step(model, x):
        return model(x) + 1

    x = _tensor(2, 4)
    translated = sot.symbolic_translate(step)
    with sot.config.patch(min_graph_size=0), forced_way(way):
        for _ in range(3):
            assert_same(translated(layer, x), step(eager_layer, x))
    assert layer.calls == eager_layer.calls == 3
    assert sot.stats().graph_breaks == 0 and sot.stats().fallbacks == 0


def test_a_builtin_layer_subclass_overriding_call_is_one_statement_inside_the_override(compile_all: Any) -> None:
    eager_layer, layer = _make(ShiftedLinear), _make(ShiftedLinear)

    def step(model, x):
        return model(x).sum()

    x = _tensor(3, 4)
    translated = sot.symbolic_translate(step)
    for _ in range(2):
        assert_same(translated(layer, x), step(eager_layer, x))
    assert layer.seen == eager_layer.seen == [(3, 4), (3, 4)]
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


def test_gradients_through_a_call_override_match_eager(compile_all: Any) -> None:
    eager_layer, layer = _make(ShiftedLinear), _make(ShiftedLinear)

    def step(model, x):
        return (model(x) ** 2).mean()

    x = _tensor(3, 4)
    step(eager_layer, x).backward()
    sot.symbolic_translate(step)(layer, x).backward()
    assert_same(layer.weight.grad, eager_layer.weight.grad)
    assert_same(layer.bias.grad, eager_layer.bias.grad)


def test_the_call_override_of_a_sublayer_runs_inside_a_translated_layer(compile_all: Any) -> None:
    class Outer(nn.Layer):
        def __init__(self) -> None:
            super().__init__()
            self.inner = Counted()

        def forward(self, x):
            return self.inner(x) - self.inner(x * 2)

    paddle.seed(1)
    eager_model = Outer()
    paddle.seed(1)
    model = Outer()
    x = _tensor(2, 4)
    translated = sot.symbolic_translate(model)
    for _ in range(2):
        assert_same(translated(x), eager_model(x))
    assert model.inner.calls == eager_model.inner.calls == 4
    assert sot.stats().graph_breaks == 0


class Doubled(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def __call__(self, x):
        return super().__call__(x) * 2

    def forward(self, x):
        return self.lin(x)


def test_hooks_run_once_under_super_call_of_an_override(compile_all: Any) -> None:
    eager_layer, layer = _make(Doubled), _make(Doubled)
    for each in (eager_layer, layer):
        each.register_forward_post_hook(lambda lay, inputs, output: output + 10)

    def step(model, x):
        return model(x)

    x = _tensor(2, 4)
    translated = sot.symbolic_translate(step)
    for _ in range(2):
        assert_same(translated(layer, x), step(eager_layer, x))
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


def test_explicit_dunder_call_spellings_are_the_layer_call(compile_all: Any) -> None:
    paddle.seed(2)
    lin = nn.Linear(4, 4)
    lin.register_forward_post_hook(lambda lay, inputs, output: output * 3)

    def step(x):
        return lin.__call__(x) + nn.Layer.__call__(lin, x * 2)

    x = _tensor(2, 4)
    expected = step(x)
    translated = sot.symbolic_translate(step)
    for _ in range(2):
        assert_same(translated(x), expected)
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


def test_replacing_the_override_after_translation_misses_the_guard(compile_all: Any) -> None:
    class Patched(nn.Layer):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def __call__(self, x):
            return super().__call__(x) + 1

        def forward(self, x):
            return self.lin(x)

    layer = _make(Patched)

    def step(model, x):
        return model(x)

    x = _tensor(2, 4)
    translated = sot.symbolic_translate(step)
    assert_same(translated(layer, x), step(layer, x))
    Patched.__call__ = lambda self, x: nn.Layer.__call__(self, x) - 1
    assert_same(translated(layer, x), step(layer, x))
    assert sot.stats().translate_count == 2


def test_an_error_in_the_override_is_the_users(compile_all: Any) -> None:
    class Checked(nn.Layer):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def __call__(self, x):
            if x.shape[-1] != 4:
                raise ValueError("expected 4 features")
            return super().__call__(x)

        def forward(self, x):
            return self.lin(x)

    layer = _make(Checked)

    def step(x):
        return layer(x) * 2

    error = check_same_exception(step, lambda: (_tensor(2, 3),), "return layer(x) * 2",
                                 warm_args=lambda: (_tensor(2, 4),),
                                 also_through=[(Checked.__call__, "raise ValueError")])
    assert "expected 4 features" in str(error)


class LoggedLeakyReLU(nn.LeakyReLU):
    def __init__(self) -> None:
        super().__init__(0.1)
        self.log: list[str] = []

    def __call__(self, x):
        self.log.append("call")
        return super().__call__(x)


def test_a_subclass_attribute_paddles_code_reads_stays_guarded_and_its_own_does_not(compile_all: Any) -> None:
    layer = LoggedLeakyReLU()

    def step(model, x):
        return model(x) * 2

    x = _tensor(3, 4)
    translated = sot.symbolic_translate(step)
    for _ in range(3):  # (its growing ``log`` is no configuration of LeakyReLU's forward)
        assert_same(translated(layer, x), step(layer, x))
    assert sot.stats().translate_count == 1
    layer._negative_slope = 0.5  # (read by LeakyReLU.forward: baked into the program)
    assert_same(translated(layer, x), step(layer, x))
    assert sot.stats().translate_count == 2

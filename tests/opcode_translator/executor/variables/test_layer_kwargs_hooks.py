"""Forward hooks registered ``with_kwargs=True`` are simulated like the others (they fell back whole)."""
from __future__ import annotations

import numpy as np
import paddle
import paddle.nn as nn
import pytest

import sot


class Scaled(nn.Linear):
    def forward(self, x: paddle.Tensor, scale: float = 1.0, shift: paddle.Tensor | None = None) -> paddle.Tensor:
        out = super().forward(x) * scale
        return out if shift is None else out + shift


def _hooked(pre_result: str) -> nn.Layer:
    paddle.seed(0)
    layer = Scaled(4, 4)

    def pre(layer: nn.Layer, args: tuple, kwargs: dict) -> object:
        if pre_result == "none":
            return None
        if pre_result == "bad":
            return args
        return (args[0] + 1.0,), {**kwargs, "scale": kwargs["scale"] * 2, "shift": args[0]}

    def post(layer: nn.Layer, args: tuple, kwargs: dict, output: paddle.Tensor) -> paddle.Tensor:
        return output * kwargs["scale"] + args[0]

    layer.register_forward_pre_hook(pre, with_kwargs=True)
    layer.register_forward_pre_hook(lambda layer, args: (args[0] * 0.5,))
    layer.register_forward_post_hook(post, with_kwargs=True)
    layer.register_forward_post_hook(lambda layer, args, output: output - 1.0, prepend=True)
    return layer


@pytest.mark.parametrize("pre_result", ["replaced", "none"])
def test_hooks_taking_keyword_arguments_are_one_graph(pre_result: str, compile_all: None) -> None:
    layer, eager = _hooked(pre_result), _hooked(pre_result)

    def call(layer: nn.Layer, x: paddle.Tensor) -> paddle.Tensor:
        return layer(x, scale=3.0)

    x = paddle.randn([2, 4])
    for _ in range(2):
        np.testing.assert_allclose(sot.symbolic_translate(call)(layer, x).numpy(), call(eager, x).numpy(),
                                   rtol=1e-6)
    stats = sot.stats()
    assert (stats.translate_count, stats.graph_breaks, stats.fallbacks) == (1, 0, 0), stats


def test_a_pre_hook_returning_other_than_args_and_kwargs_raises_as_eager() -> None:
    layer = _hooked("bad")
    x = paddle.randn([2, 4])
    with pytest.raises(RuntimeError, match="forward pre-hook must return None or a tuple"):
        layer(x, scale=3.0)
    with pytest.raises(RuntimeError, match="forward pre-hook must return None or a tuple"):
        sot.symbolic_translate(lambda x: layer(x, scale=3.0))(x)

"""In-place ops on the outputs of built-in layers (`inplace._NEW_TENSOR_LAYERS`): simulated where the layer
computes a new tensor, the frame run eagerly where the output may be a view of the input."""
from __future__ import annotations

import copy

import numpy as np
import paddle
import paddle.nn as nn
import paddle.nn.functional as F
import pytest

import sot


class ChangedOutputs(nn.Layer):
    """``h = self.fc(x); h.add_(x)``: user code adding a residual, scaling or activating in place."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.conv = nn.Conv2D(2, 2, 3, padding=1)
        self.bn = nn.BatchNorm2D(2)
        self.norm = nn.LayerNorm(8)

    def forward(self, x: paddle.Tensor, image: paddle.Tensor) -> tuple[paddle.Tensor, paddle.Tensor]:
        h = self.fc(x)
        h.add_(x)
        F.relu_(h)
        n = self.norm(h)
        n.scale_(2.0)
        y = self.bn(self.conv(image))
        y.add_(image)
        y = F.relu_(y)
        return n, y


def test_in_place_ops_on_layer_outputs_are_one_graph(compile_all: None) -> None:
    """They made the whole frame run eagerly (a layer's output might have been a view of its input)."""
    paddle.seed(0)
    model = ChangedOutputs()
    eager = copy.deepcopy(model)
    fast = sot.symbolic_translate(model)
    x, image = paddle.randn([4, 8]), paddle.randn([2, 2, 4, 4])
    for _ in range(2):
        outs, e_outs = fast(x, image), eager(x, image)
        for out, e_out in zip(outs, e_outs):
            np.testing.assert_allclose(out.numpy(), e_out.numpy(), rtol=1e-5, atol=1e-6)
        sum(o.sum() for o in outs).backward()
        sum(o.sum() for o in e_outs).backward()
    for (name, p), (_, ep) in zip(model.named_parameters(), eager.named_parameters()):
        if ep.grad is None:  # (BatchNorm's running statistics)
            assert p.grad is None, name
            continue
        np.testing.assert_allclose(p.grad.numpy(), ep.grad.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
    for name, buffer in eager.bn.named_buffers():
        np.testing.assert_allclose(getattr(model.bn, name).numpy(), buffer.numpy(), rtol=1e-6, err_msg=name)
    stats = sot.stats()
    assert (stats.translate_count, stats.graph_breaks, stats.fallbacks, stats.compiled_graphs) == (1, 0, 0, 1), stats


@pytest.mark.parametrize("layer", [nn.Flatten(), nn.Identity(), nn.Dropout(0.0)], ids=type)
def test_an_in_place_op_on_a_layer_output_that_may_be_its_input_changes_the_input(layer: nn.Layer) -> None:
    """A view of the input (or the input itself): the change reaches the caller's tensor, as in eager."""

    def change(x: paddle.Tensor) -> paddle.Tensor:
        y = layer(x * 1.0)
        y.add_(paddle.ones_like(y))
        return y

    x = paddle.randn([2, 3, 2])
    np.testing.assert_allclose(sot.symbolic_translate(change)(x).numpy(), change(x).numpy(), rtol=1e-6)

    def change_input(x: paddle.Tensor) -> None:
        layer(x).add_(paddle.ones_like(layer(x)))

    x, e_x = paddle.randn([2, 3, 2]), None
    e_x = x.clone()
    sot.symbolic_translate(change_input)(x)
    change_input(e_x)
    np.testing.assert_allclose(x.numpy(), e_x.numpy(), rtol=1e-6)

"""Gradient accumulation across compiled programs: building a program's train program, Paddle resets the
gradient type of the parameters it holds, which dropped their accumulated gradients. With ``backward()`` at
every step and ``step()`` every k steps, a new program meanwhile (a last batch of another size, an eval pass
then training again, any retranslation) silently lost the earlier steps' gradients (a wrong update)."""
from __future__ import annotations

import copy

import numpy as np
import paddle
import paddle.nn as nn

import sot


class _Net(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 6)
        self.bn = nn.BatchNorm1D(6)
        self.head = nn.Linear(6, 2)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return self.head(paddle.tanh(self.bn(self.fc(x))))


def _grads(model: nn.Layer) -> list:
    return [None if p.grad is None else p.grad.numpy() for p in model.parameters()]


def test_gradients_accumulated_before_a_new_program_is_built_are_kept() -> None:
    paddle.seed(3)
    model = _Net()
    eager = copy.deepcopy(model)
    fast = sot.symbolic_translate(model)
    rng = np.random.default_rng(0)
    with sot.config.patch(min_graph_size=0):
        for batch, training in [(4, True), (4, True), (3, True), (4, False), (4, True), (5, True)]:
            x = paddle.to_tensor(rng.standard_normal((batch, 6)).astype("float32"))
            for layer in (model, eager):
                layer.train() if training else layer.eval()
            out, e_out = fast(x), eager(x)
            np.testing.assert_allclose(out.numpy(), e_out.numpy(), rtol=1e-5, atol=1e-6)
            if training:
                (out * out).mean().backward()
                (e_out * e_out).mean().backward()
            for grad, e_grad in zip(_grads(model), _grads(eager), strict=True):
                assert (grad is None) == (e_grad is None)
                if grad is not None:
                    np.testing.assert_allclose(grad, e_grad, rtol=1e-5, atol=1e-6)
    assert sot.stats().compiled_graphs >= 3  # (new programs came in between the accumulated steps)

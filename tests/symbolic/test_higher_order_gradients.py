"""Higher-order gradients through a compiled program (``paddle.grad(..., create_graph=True)`` then
``backward()``), as a gradient penalty (WGAN-GP) or a physics-informed loss (derivatives of a network's output
with respect to its input) computes them. Paddle's program op has no double backward: eager computes these, a
compiled program's backward raises ("Tensor holds no memory"). Known open bug (tests/known_bugs.txt)."""
from __future__ import annotations

import copy

import numpy as np
import paddle
import paddle.nn as nn

import sot


class Critic(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(4, 8), nn.Linear(8, 8), nn.Linear(8, 1)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return self.fc3(paddle.tanh(self.fc2(paddle.tanh(self.fc1(x)))))


def _mlp() -> nn.Layer:
    paddle.seed(5)
    return Critic()


def _penalised_loss(model, x: paddle.Tensor) -> paddle.Tensor:
    x = x.detach()
    x.stop_gradient = False
    out = model(x)
    (slope,) = paddle.grad(out, x, grad_outputs=paddle.ones_like(out), create_graph=True)
    return ((slope.norm(2, axis=1) - 1) ** 2).mean() + out.mean()


def test_a_gradient_of_a_gradient_through_a_translated_model(compile_all):
    model = _mlp()
    eager = copy.deepcopy(model)
    fast = sot.symbolic_translate(model)
    x = paddle.to_tensor(np.random.default_rng(0).standard_normal((3, 4)).astype("float32"))
    _penalised_loss(fast, x).backward()
    _penalised_loss(eager, x).backward()
    for p, e in zip(model.parameters(), eager.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), e.grad.numpy(), rtol=1e-5, atol=1e-6)


class Field(nn.Layer):
    """u(x, t), with the derivatives a physics-informed loss takes of it."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(2, 16), nn.Linear(16, 1)

    def forward(self, points: paddle.Tensor) -> paddle.Tensor:
        return self.fc2(paddle.tanh(self.fc1(points)))


def _residual_loss(model, points: paddle.Tensor) -> paddle.Tensor:
    points = points.detach()
    points.stop_gradient = False
    u = model(points)
    (du,) = paddle.grad(u.sum(), points, create_graph=True)
    (du_x2,) = paddle.grad(du[:, 0].sum(), points, create_graph=True)
    return ((du[:, 1] - 0.1 * du_x2[:, 0]) ** 2).mean() + (u ** 2).mean()


def test_a_physics_informed_loss_through_a_translated_model(compile_all):
    paddle.seed(6)
    model = Field()
    eager = copy.deepcopy(model)
    fast = sot.symbolic_translate(model)
    points = paddle.to_tensor(np.random.default_rng(1).uniform(-1, 1, (5, 2)).astype("float32"))
    for _ in range(2):
        _residual_loss(fast, points).backward()
        _residual_loss(eager, points).backward()
        for p, e in zip(model.parameters(), eager.parameters()):
            np.testing.assert_allclose(p.grad.numpy(), e.grad.numpy(), rtol=1e-5, atol=1e-6)
    stats = sot.stats()
    assert stats.fallbacks == 0 and stats.graph_breaks == 0, stats


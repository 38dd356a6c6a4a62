"""A program's results eager computes without gradient carry no grad node: made to require grad later
(``inter.stop_gradient = False``, a WGAN-GP interpolate), such a tensor is a leaf, as eagerly, not an edge into
the program (``paddle.grad`` through it crashed in Paddle: "rank of slot 0 from registered hook should be
smaller than rank size of grad_tensors")."""
from __future__ import annotations

import paddle
import paddle.nn as nn

import sot
from conftest import assert_same


def _interpolate(generator: nn.Layer, critic: nn.Layer, real: paddle.Tensor, z: paddle.Tensor) -> tuple:
    fake = generator(z)
    inter = 0.5 * real + 0.5 * fake.detach()
    inter.stop_gradient = False
    grad = paddle.grad(critic(inter).sum(), inter, create_graph=True)[0]
    return grad, fake, inter.is_leaf


def test_a_result_without_gradient_made_to_require_it_is_a_leaf(compile_all) -> None:
    paddle.seed(3)
    generator = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 8))
    critic = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
    real, z = paddle.randn([6, 8]), paddle.randn([6, 4])
    expected = _interpolate(generator, critic, real, z)
    assert_same(sot.symbolic_translate(_interpolate)(generator, critic, real, z), expected)
    assert sot.stats().compiled_graphs >= 1 and sot.stats().fallbacks == 0


def _argmax_and_loss(x: paddle.Tensor, w: paddle.Tensor) -> tuple:
    logits = x @ w
    return logits.argmax(-1), logits.tanh().sum()


def test_a_result_without_gradient_shares_memory_and_version_with_what_the_program_made(compile_all) -> None:
    paddle.seed(1)
    w = paddle.create_parameter([3, 4], "float32")
    labels, loss = sot.symbolic_translate(_argmax_and_loss)(paddle.randn([2, 3]), w)
    assert labels.stop_gradient and labels.is_leaf and not loss.stop_gradient
    version = labels.inplace_version
    labels.add_(paddle.ones_like(labels))
    assert labels.inplace_version == version + 1
    loss.backward()
    assert w.grad is not None

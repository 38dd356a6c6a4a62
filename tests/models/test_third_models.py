"""A third batch of models written like popular repositories write them (`zoo_third`), each checked for eager
parity and whole-graph capture, and the bugs they found, reduced."""
from __future__ import annotations

import copy
from typing import Any

import numpy as np
import paddle
import paddle.nn as nn
import paddle.nn.functional as F
import pytest

import sot

from .harness import assert_close, assert_grads_equal, assert_state_equal, check_whole_model, stats_line
from .zoo import randn
from .zoo_third import THIRD, RotaryAttention


@pytest.mark.parametrize("name", [
    pytest.param(name, marks=[pytest.mark.slow] if spec.slow else []) for name, spec in THIRD.items()
])
def test_third_model(name: str) -> None:
    check_whole_model(THIRD[name])


# -- a GAN training step: two optimizers, detach, alternating updates in one user function ----------------------


class Generator(nn.Layer):
    def __init__(self, latent: int = 4, features: int = 8) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(latent, 16), nn.LeakyReLU(0.2), nn.Linear(16, features), nn.Tanh())

    def forward(self, z: paddle.Tensor) -> paddle.Tensor:
        return self.net(z)


class Discriminator(nn.Layer):
    def __init__(self, features: int = 8) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(features, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return self.net(x)


def gan_step(generator: nn.Layer, discriminator: nn.Layer, opt_g: Any, opt_d: Any, real: paddle.Tensor,
             z: paddle.Tensor) -> tuple:
    fake = generator(z)
    d_real = discriminator(real)
    d_fake = discriminator(fake.detach())
    loss_d = (F.binary_cross_entropy_with_logits(d_real, paddle.ones_like(d_real))
              + F.binary_cross_entropy_with_logits(d_fake, paddle.zeros_like(d_fake)))
    opt_d.clear_grad()
    loss_d.backward()
    opt_d.step()
    g_logits = discriminator(fake)
    loss_g = F.binary_cross_entropy_with_logits(g_logits, paddle.ones_like(g_logits))
    opt_g.clear_grad()
    loss_g.backward()
    opt_g.step()
    return loss_d, loss_g


def _gan() -> tuple:
    paddle.seed(5)
    generator, discriminator = Generator(), Discriminator()
    opt_g = paddle.optimizer.Adam(learning_rate=1e-2, parameters=generator.parameters())
    opt_d = paddle.optimizer.Adam(learning_rate=1e-2, parameters=discriminator.parameters())
    return generator, discriminator, opt_g, opt_d


def _check_gan_steps(step_function: Any, steps: int) -> None:
    """``steps`` calls of a two-model training step, translated and eager (same seed before each: the step
    may draw random numbers): equal losses, then equal parameters, state and gradients of both models."""
    model, e_model = _gan(), _gan()
    step = sot.symbolic_translate(step_function)
    losses, e_losses = [], []
    for index in range(steps):
        real, z = randn(6, 8, seed=index), randn(6, 4, seed=10 + index)
        paddle.seed(20 + index)
        losses.append([float(v) for v in step(*model, real, z)])
        paddle.seed(20 + index)
        e_losses.append([float(v) for v in step_function(*e_model, real, z)])
    np.testing.assert_allclose(losses, e_losses, rtol=1e-5, atol=1e-6)
    for layer, e_layer in zip(model[:2], e_model[:2]):
        assert_state_equal(layer, e_layer, rtol=1e-5, atol=1e-6)
        assert_grads_equal(layer, e_layer, rtol=1e-5, atol=1e-6)
    assert sot.stats().fallbacks == 0, stats_line(sot.stats())


def test_a_gan_step_with_two_optimizers_and_detach_matches_eager() -> None:
    """The discriminator learns from a detached fake, the generator through the discriminator; each step
    mutates both models' parameters (the optimizers' updates) between the two halves of the function."""
    _check_gan_steps(gan_step, 4)


def wgan_gp_step(generator: nn.Layer, critic: nn.Layer, opt_g: Any, opt_c: Any, real: paddle.Tensor,
                 z: paddle.Tensor) -> tuple:
    """A WGAN-GP step in one function: the gradient penalty's ``paddle.grad(create_graph=True)`` on an
    interpolate made to require grad, the critic on ``fake.detach()``, then the generator through the critic."""
    fake = generator(z)
    alpha = paddle.rand([real.shape[0], 1])
    inter = alpha * real + (1 - alpha) * fake.detach()
    inter.stop_gradient = False
    grad = paddle.grad(critic(inter).sum(), inter, create_graph=True)[0]
    penalty = ((grad.norm(2, axis=1) - 1) ** 2).mean()
    loss_c = critic(fake.detach()).mean() - critic(real).mean() + 10 * penalty
    opt_c.clear_grad()
    loss_c.backward()
    opt_c.step()
    loss_g = -critic(fake).mean()
    opt_g.clear_grad()
    loss_g.backward()
    opt_g.step()
    return loss_c, loss_g


def test_a_wgan_gp_step_in_one_function_matches_eager() -> None:
    _check_gan_steps(wgan_gp_step, 3)


def test_rotary_attention_with_a_growing_cache_accumulating_gradients_over_lengths() -> None:
    """Gradients accumulated over steps of growing and shrinking lengths (no ``clear_grad`` between): each new
    length is a new program (the first ones) or a symbolic one, the cos/sin tables are rebuilt in forward when
    a longer sequence comes, the attention map and a call count are stored on the layer. (The accumulated
    gradients were lost whenever a new program was built: `compile.parameter_gradients_kept`.)"""
    paddle.seed(4)
    model = RotaryAttention()
    eager = copy.deepcopy(model)
    fast = sot.symbolic_translate(model)
    for step, length in enumerate((3, 3, 6, 6, 5, 8)):
        x = randn(2, length, 16, seed=step)
        out, e_out = fast(x), eager(x)
        assert_close(out, e_out, f"output at step {step}")
        assert_close(model.last_attn, eager.last_attn, f"stored attention at step {step}")
        assert (model.calls, model.rotary.max_seq_len_cached) == (eager.calls, eager.rotary.max_seq_len_cached)
        assert_close(model.rotary.cos_cached, eager.rotary.cos_cached, "rebuilt cache")
        (out * out).mean().backward()
        (e_out * e_out).mean().backward()
        assert_grads_equal(model, eager)
    stats = sot.stats()
    assert (stats.graph_breaks, stats.fallbacks) == (0, 0), stats_line(stats)

"""A frame called under ``paddle.no_grad()`` that turns grad on (``with paddle.enable_grad():``,
``with paddle.set_grad_enabled(True):``, or the statement ``paddle.set_grad_enabled(True)``): the ops after
the switch track gradients in eager, so the program holding them must run with grad on (`CompiledProgram`),
whatever mode its caller is in; also for the program of a resumed function entered after a graph break at
which the replayed ``paddle.set_grad_enabled(False)`` had turned grad off."""
from __future__ import annotations

from typing import Callable

import numpy as np
import paddle
import pytest

import sot


def statement(x: paddle.Tensor) -> paddle.Tensor:
    paddle.set_grad_enabled(True)
    return x * 3


def enable_grad_block(x: paddle.Tensor) -> paddle.Tensor:
    with paddle.enable_grad():
        return x * 3


def set_grad_enabled_block(x: paddle.Tensor) -> paddle.Tensor:
    with paddle.set_grad_enabled(True):
        return x * 3


def leaf() -> paddle.Tensor:
    x = paddle.ones([2])
    x.stop_gradient = False
    return x


@pytest.mark.parametrize("min_graph_size", [0, 10])
@pytest.mark.parametrize("f", [statement, enable_grad_block, set_grad_enabled_block])
def test_ops_after_grad_is_turned_on_under_no_grad_track_gradients(f: Callable, min_graph_size: int) -> None:
    translated = sot.symbolic_translate(f)
    with sot.config.patch(min_graph_size=min_graph_size):
        for _ in range(2):
            x, e_x = leaf(), leaf()
            with paddle.no_grad():
                out = translated(x)
                mode = paddle.is_grad_enabled()
            with paddle.no_grad():
                e_out = f(e_x)
                e_mode = paddle.is_grad_enabled()
            paddle.set_grad_enabled(True)
            assert (out.stop_gradient, mode) == (e_out.stop_gradient, e_mode)
            out.sum().backward()
            e_out.sum().backward()
            np.testing.assert_allclose(x.grad.numpy(), e_x.grad.numpy())


def test_grad_turned_back_on_after_a_graph_break(compile_all: None) -> None:
    def f(x: paddle.Tensor) -> tuple:
        paddle.set_grad_enabled(False)
        y = x * 2
        scale = float(y.sum())  # (a graph break: the rest resumes with grad off)
        paddle.set_grad_enabled(True)
        return y * scale, x * 3

    translated = sot.symbolic_translate(f)
    for _ in range(2):
        x, e_x = leaf(), leaf()
        out, e_out = translated(x), f(e_x)
        assert paddle.is_grad_enabled()
        assert [t.stop_gradient for t in out] == [t.stop_gradient for t in e_out] == [True, False]
        out[1].sum().backward()
        e_out[1].sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), e_x.grad.numpy())


@pytest.mark.parametrize("min_graph_size", [0, 10])
def test_a_training_step_turning_grad_on_around_a_break_under_the_callers_no_grad(min_graph_size: int) -> None:
    """The graph before the break inside the block is small: run as the eager replay of its statements
    (`replay.compile_replay`, `EagerProgram`), which must turn grad on for them as the compiled program does
    (it ran them in the caller's no-grad mode: no gradient, the parameters never moved)."""

    def make() -> tuple:
        paddle.seed(0)
        lin = paddle.nn.Linear(4, 3)
        return lin, paddle.optimizer.SGD(0.5, parameters=lin.parameters())

    def step(lin, opt, x):
        with paddle.enable_grad():
            loss = (lin(x) ** 2).mean()
            loss.backward()  # (a graph break inside the block)
            opt.step()
            opt.clear_grad()
        return loss

    x = paddle.ones([2, 4])
    (lin, opt), (e_lin, e_opt) = make(), make()
    translated = sot.symbolic_translate(step)
    with sot.config.patch(min_graph_size=min_graph_size):
        for _ in range(4):
            with paddle.no_grad():
                loss = translated(lin, opt, x)
                e_loss = step(e_lin, e_opt, x)
            assert loss.stop_gradient == e_loss.stop_gradient
            np.testing.assert_allclose(loss.numpy(), e_loss.numpy(), rtol=1e-6)
    np.testing.assert_allclose(lin.weight.numpy(), e_lin.weight.numpy(), rtol=1e-6)
    assert sot.stats().fallbacks == 0

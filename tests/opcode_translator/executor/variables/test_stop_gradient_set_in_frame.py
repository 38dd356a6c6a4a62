"""``tensor.stop_gradient = ...`` in a translated frame, where eager's answer depends on more than the flag.

``parameter.stop_gradient = False`` for a parameter a built-in layer reads inside its own statement (not as a
graph input): the flag, set before the program runs, must neither reach a call of the layer made before it
(eager's first call kept the weight out of its gradient path) nor be missed by the metas of a call made after
it (eager's output then requires gradients). A tensor computed in the frame marked as stopping gradients keeps
its gradient node (no leaf), which setting the flag back reconnects."""
from __future__ import annotations

import numpy as np
import paddle
import paddle.nn as nn

import sot


def frozen_linear() -> nn.Linear:
    paddle.seed(1)
    layer = nn.Linear(3, 3)
    layer.weight.stop_gradient = True
    layer.bias.stop_gradient = True
    return layer


def test_a_parameter_made_to_require_grad_after_its_layer_ran_keeps_that_call_out_of_its_gradient(
        compile_all: None) -> None:
    def f(layer: nn.Linear, x: paddle.Tensor) -> paddle.Tensor:
        before = layer(x)
        layer.weight.stop_gradient = False
        return before + layer(x)

    translated = sot.symbolic_translate(f)
    for _ in range(2):
        layer, e_layer = frozen_linear(), frozen_linear()
        out, e_out = translated(layer, paddle.ones([2, 3])), f(e_layer, paddle.ones([2, 3]))
        np.testing.assert_allclose(out.numpy(), e_out.numpy(), rtol=1e-5)
        out.sum().backward()
        e_out.sum().backward()
        np.testing.assert_allclose(layer.weight.grad.numpy(), e_layer.weight.grad.numpy(), rtol=1e-5)


def test_a_layer_called_after_its_parameter_was_made_to_require_grad_gives_an_output_requiring_them(
        compile_all: None) -> None:
    def f(layer: nn.Linear, x: paddle.Tensor) -> tuple:
        layer.weight.stop_gradient = False
        out = layer(x)
        return out, out.stop_gradient

    translated = sot.symbolic_translate(f)
    for _ in range(2):
        layer, e_layer = frozen_linear(), frozen_linear()
        (out, flag), (e_out, e_flag) = translated(layer, paddle.ones([2, 3])), f(e_layer, paddle.ones([2, 3]))
        assert (flag, out.stop_gradient) == (e_flag, e_out.stop_gradient) == (False, False)
        (out * 2).sum().backward()
        (e_out * 2).sum().backward()
        np.testing.assert_allclose(layer.weight.grad.numpy(), e_layer.weight.grad.numpy(), rtol=1e-5)
    assert sot.stats().graph_breaks == 0


def leaf() -> paddle.Tensor:
    x = paddle.ones([2])
    x.stop_gradient = False
    return x


def test_a_computed_tensor_whose_flag_is_set_back_reaches_its_inputs_again(compile_all: None) -> None:
    def f(x: paddle.Tensor) -> tuple:
        y = x * 2
        y.stop_gradient = True
        stopped, is_leaf = y * 5, y.is_leaf
        y.stop_gradient = False
        return (y * 3 + stopped).sum(), is_leaf, stopped.stop_gradient

    translated = sot.symbolic_translate(f)
    for _ in range(2):
        x, e_x = leaf(), leaf()
        (out, is_leaf, stopped), (e_out, e_is_leaf, e_stopped) = translated(x), f(e_x)
        assert (is_leaf, stopped) == (e_is_leaf, e_stopped) == (False, True)
        np.testing.assert_allclose(out.numpy(), e_out.numpy())
        out.backward()
        e_out.backward()
        np.testing.assert_allclose(x.grad.numpy(), e_x.grad.numpy())
    assert sot.stats().graph_breaks == 0

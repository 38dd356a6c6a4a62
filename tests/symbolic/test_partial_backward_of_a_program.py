"""A backward pass through some outputs of a compiled program must leave the rest of its graph usable, as eager
frees only the grad nodes the pass runs: ``loss_d`` reads ``h.detach()``, so its ``backward()`` never runs
``h``'s node, and a later backward from ``h`` works eagerly (a GAN step: the discriminator on a detached fake,
then the generator through the discriminator). Known bug: the program is one grad node, consumed whole by the
first pass; the second raises "The TensorWrappers of Dy2StGradNode do not exist"."""
from __future__ import annotations

import paddle

import sot
from conftest import assert_same


def _two_passes(x: paddle.Tensor, w1: paddle.Tensor, w2: paddle.Tensor) -> paddle.Tensor:
    h = x @ w1
    (h.detach() @ w2).sum().backward()
    return (h @ w2).sum()


def test_a_backward_through_a_detached_output_leaves_the_other_outputs_graph_usable() -> None:
    results = []
    for function in (_two_passes, sot.symbolic_translate(_two_passes)):
        paddle.seed(1)
        w1 = paddle.create_parameter([2, 2], "float32")
        w2 = paddle.create_parameter([2, 1], "float32")
        with sot.config.patch(min_graph_size=0):
            loss = function(paddle.ones([3, 2]), w1, w2)
        loss.backward()
        results.append([loss, w1.grad, w2.grad])
    assert_same(results[1], results[0])

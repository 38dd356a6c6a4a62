"""``recompute(function, ...)``: eager's backward runs ``function`` again, repeating what it changes outside
(a batch norm's running statistics, a list of the caller's). A translation computing it once must not hide
that: such a call runs natively (`recompute._call_recomputed`)."""
from __future__ import annotations

import numpy as np
import paddle
import paddle.nn as nn
import pytest
from paddle.distributed.fleet.utils import recompute

import sot

calls: list[int] = []


def counted_block(x: paddle.Tensor) -> paddle.Tensor:
    calls.append(1)
    return paddle.tanh(x) * 2


def leaf() -> paddle.Tensor:
    x = paddle.ones([2])
    x.stop_gradient = False
    return x


@pytest.mark.parametrize("reentrant", [True, False])
def test_a_recomputed_function_appending_to_a_list_appends_again_in_backward(compile_all: None,
                                                                             reentrant: bool) -> None:
    def f(x: paddle.Tensor) -> paddle.Tensor:
        return recompute(counted_block, x, use_reentrant=reentrant)

    translated = sot.symbolic_translate(f)
    counts = []
    for fn in (translated, f, translated):
        calls.clear()
        x = leaf()
        out = fn(x)
        out.sum().backward()
        counts.append((len(calls), x.grad.numpy().tolist()))
    assert counts[0] == counts[1] == counts[2]


def test_a_recomputed_batch_norm_updates_its_statistics_in_backward_as_eager(compile_all: None) -> None:
    def f(model: nn.Layer, x: paddle.Tensor) -> paddle.Tensor:
        return recompute(model, x)

    def model_and_input() -> tuple:
        paddle.seed(3)
        model = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1D(3))
        x = paddle.to_tensor(np.arange(12, dtype="float32").reshape(4, 3))
        x.stop_gradient = False
        return model, x

    translated = sot.symbolic_translate(f)
    for _ in range(2):
        (model, x), (e_model, e_x) = model_and_input(), model_and_input()
        translated(model, x).sum().backward()
        f(e_model, e_x).sum().backward()
        np.testing.assert_allclose(model[1]._mean.numpy(), e_model[1]._mean.numpy(), rtol=1e-6)
        np.testing.assert_allclose(x.grad.numpy(), e_x.grad.numpy(), rtol=1e-5, atol=1e-6)

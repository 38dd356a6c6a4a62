"""``Tensor.view`` (executor/variables/callable.py `TensorMethodVariable`): a dygraph-only method, which raises
while a program is built in static mode. With a shape it is recorded as ``reshape``, which gives the same values
and is a view of its input in eager mode too; with a dtype (a reinterpretation of the bits) it runs eagerly."""
from __future__ import annotations

import numpy as np
import paddle
import pytest

import sot
from conftest import assert_same


def _tensor(*shape: int, seed: int = 0) -> paddle.Tensor:
    return paddle.to_tensor(np.random.default_rng(seed).standard_normal(shape).astype("float32"))


def heads(x):
    batch, tokens, channels = x.shape
    return x.view([batch, tokens, 2, channels // 2]).transpose([0, 2, 1, 3]) * 2


def heads_by_keyword(x):
    return x.view(shape_or_dtype=(x.shape[0], -1)) + 1


def change_through_the_view(x):
    y = x * 1
    flat = y.view([-1])
    flat.add_(paddle.ones_like(flat))  # changes ``y`` too, in eager mode
    return y, flat


@pytest.mark.parametrize("fn", [heads, heads_by_keyword])
def test_view_with_a_shape_matches_eager_in_one_graph(fn, compile_all):
    x = _tensor(2, 3, 4)
    x.stop_gradient = False
    fast = sot.symbolic_translate(fn)
    for _ in range(2):
        assert_same(fast(x), fn(x))
    stats = sot.stats()
    assert stats.translate_count == 1 and stats.graph_breaks == 0 and stats.fallbacks == 0, stats


def test_an_in_place_change_through_the_view_reaches_its_base(compile_all):
    """The recorded ``reshape`` is found to be a view like eager's ``view``: the frame runs eagerly (views are
    not simulated), never with the base left unchanged."""
    fast = sot.symbolic_translate(change_through_the_view)
    assert_same(fast(_tensor(2, 3)), change_through_the_view(_tensor(2, 3)))


def test_gradient_through_a_view(compile_all):
    def run(function):
        x = _tensor(2, 3, 4)
        x.stop_gradient = False
        (function(x) ** 2).sum().backward()
        return x.grad

    np.testing.assert_allclose(run(sot.symbolic_translate(heads)).numpy(), run(heads).numpy(), rtol=1e-6)


def test_view_of_a_dtype_is_left_to_eager(compile_all):
    def bits(x):
        return x.view(paddle.int32) + 1

    fast = sot.symbolic_translate(bits)
    assert_same(fast(_tensor(3)), bits(_tensor(3)))

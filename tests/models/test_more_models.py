"""Models not in the other zoos (`zoo_more`): paddle.nn layers with their less common options and user-code
styles, each checked for eager parity and whole-graph capture; and the bugs they found, reduced."""
from __future__ import annotations

import copy

import paddle
import paddle.nn as nn
import pytest

import sot

from .harness import assert_close, assert_grads_equal, check_whole_model, stats_line
from .zoo import randn
from .zoo_more import MORE


@pytest.mark.parametrize("name", [
    pytest.param(name, marks=[pytest.mark.slow] if spec.slow else []) for name, spec in MORE.items()
])
def test_more_model(name: str) -> None:
    check_whole_model(MORE[name])


def _decode(attention: nn.MultiHeadAttention, cache: nn.MultiHeadAttention.Cache,
            token: paddle.Tensor) -> paddle.Tensor:
    outputs = []
    for _ in range(3):
        token, cache = attention(token, token, token, None, cache)
        outputs.append(token.flatten(1))
    return paddle.concat(outputs + [cache[0].flatten(1), cache[1].flatten(1)], axis=1)


def test_a_named_tuple_reaches_a_layer_as_itself() -> None:
    """`MultiHeadAttention` tells a ``Cache`` from a ``StaticCache`` with ``isinstance``: handed a plain tuple
    by the program, it took neither branch, never grew the cache and attended to the new token alone (a wrong
    answer at every decoding step after the first)."""
    paddle.seed(3)
    attention = nn.MultiHeadAttention(8, 2)
    eager = copy.deepcopy(attention)
    empty = paddle.zeros([2, 2, 0, 4])
    token = randn(2, 1, 8, seed=1)
    out = sot.symbolic_translate(_decode)(attention, nn.MultiHeadAttention.Cache(empty, empty), token)
    e_out = _decode(eager, nn.MultiHeadAttention.Cache(empty, empty), token)
    assert_close(out, e_out, "decoded tokens and final cache")
    out.sum().backward()
    e_out.sum().backward()
    assert_grads_equal(attention, eager)
    stats = sot.stats()
    assert (stats.compiled_graphs, stats.graph_breaks, stats.fallbacks) == (1, 0, 0), stats_line(stats)

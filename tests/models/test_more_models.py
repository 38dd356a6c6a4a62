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


class TinyLM(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(12, 8)
        self.out = nn.Linear(8, 12)

    def forward(self, ids: paddle.Tensor) -> paddle.Tensor:
        return self.out(self.embed(ids).mean(axis=1))


def generate(model: nn.Layer, ids: paddle.Tensor, eos: int, max_length: int = 6) -> paddle.Tensor:
    """A Python ``while`` stopped by a length and by a tensor condition (every sequence has ended)."""
    finished = paddle.zeros([ids.shape[0]], dtype="bool")
    while ids.shape[1] < max_length and not finished.all():
        next_ids = model(ids).argmax(-1)
        next_ids = paddle.where(finished, paddle.full_like(next_ids, eos), next_ids)
        finished = finished | (next_ids == eos)
        ids = paddle.concat([ids, next_ids.unsqueeze(1)], axis=1)
    return ids


def test_a_generation_loop_with_a_tensor_stopping_condition_matches_eager() -> None:
    """The condition depends on data (a break per step is expected), the tokens and lengths are eager's."""
    paddle.seed(0)
    model = TinyLM()
    model.eval()
    ids = paddle.to_tensor([[1, 2], [4, 5]])
    first_tokens = model(ids).argmax(-1).numpy().tolist()
    for eos in sorted(set(first_tokens)) + [11]:  # stopping at once, after some steps, never
        out, e_out = sot.symbolic_translate(generate)(model, ids, eos), generate(model, ids, eos)
        assert out.numpy().tolist() == e_out.numpy().tolist()
    assert sot.stats().fallbacks == 0, stats_line(sot.stats())

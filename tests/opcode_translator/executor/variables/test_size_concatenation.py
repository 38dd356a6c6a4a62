"""``paddle.Size`` (a tensor's ``shape``) concatenated with a list, a tuple or another Size, on either side, or
repeated, is a Size of the items as they are: simulated on the items, so a symbolic batch dimension of a
computed tensor stays symbolic. BERT's ``x.shape[:-1] + [heads, head_size]`` broke the graph at every layer
once the batch size changed (the concatenation was folded, which reads every dimension's value)."""
from __future__ import annotations

import paddle

import sot
from conftest import assert_same

linear = paddle.nn.Linear(8, 8)


def _split_heads(x: paddle.Tensor) -> tuple:
    y = linear(x)
    heads = y.reshape(y.shape[:-1] + [2, 4])
    merged = heads.reshape(heads.shape[:-2] + (8,))
    front = y.reshape((1,) + y.shape)
    both = y.shape[:1] + y.shape[1:]
    return heads.transpose([0, 2, 1, 3]), merged, front, y.reshape(both), y.shape[1:] * 2, [1] + y.shape[1:]


def test_a_shape_concatenated_with_a_list_keeps_a_symbolic_batch_in_one_graph() -> None:
    translated = sot.symbolic_translate(_split_heads)
    with sot.config.patch(min_graph_size=0):
        for batch in (2, 3, 4):
            x = paddle.randn([batch, 3, 8])
            actual, expected = translated(x), _split_heads(x)
            assert_same(actual, expected)
            assert [type(value) for value in actual[-2:]] == [type(value) for value in expected[-2:]]
    stats = sot.stats()
    assert (stats.graph_breaks, stats.fallbacks) == (0, 0), stats
    assert stats.translate_count == 2  # the second batch size makes the dimension symbolic

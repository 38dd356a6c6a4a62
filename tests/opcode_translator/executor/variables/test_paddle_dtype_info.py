"""``paddle.finfo`` / ``paddle.iinfo`` are folded: their results are constants whose numbers are read during
simulation, so the attention-mask idiom ``x.masked_fill(~mask, paddle.finfo(x.dtype).min)`` is one graph
(it broke the graph at ``finfo`` and then made the frame fall back on the C property ``min``), guarded by the
tensor's dtype."""
from __future__ import annotations

import numpy as np
import paddle
import paddle.nn.functional as F

import sot
from conftest import assert_counts, assert_same


def _masked_softmax(x: paddle.Tensor, mask: paddle.Tensor) -> tuple:
    lowest = paddle.finfo(x.dtype).min
    scores = x.masked_fill(~mask, lowest)
    return F.softmax(scores, axis=-1), lowest, paddle.iinfo(paddle.int64).max, paddle.finfo("float32").bits


def _inputs(dtype: str) -> tuple:
    x = paddle.to_tensor(np.random.default_rng(0).standard_normal((2, 4)).astype(dtype))
    return x, x > 0


def test_finfo_of_a_tensor_dtype_is_folded_into_one_graph_guarded_by_the_dtype() -> None:
    translated = sot.symbolic_translate(_masked_softmax)
    with sot.config.patch(min_graph_size=0):
        for _ in range(2):
            assert_same(translated(*_inputs("float32")), _masked_softmax(*_inputs("float32")))
        assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)
        result = translated(*_inputs("float64"))  # another dtype: another lowest value
        assert_same(result, _masked_softmax(*_inputs("float64")))
        assert result[1] == float(np.finfo(np.float64).min)
        assert_counts(translate_count=2, graph_breaks=0, fallbacks=0, compiled_graphs=2)


class Masked(paddle.nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.info = paddle.finfo(paddle.float32)  # kept on the layer

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return x.clip(min=-self.info.max, max=self.info.max) * self.info.eps


def test_a_finfo_kept_on_a_layer_is_read_as_a_constant() -> None:
    layer = Masked()
    translated = sot.symbolic_translate(layer)
    x = _inputs("float32")[0]
    with sot.config.patch(min_graph_size=0):
        for _ in range(2):
            assert_same(translated(x), layer(x))
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)

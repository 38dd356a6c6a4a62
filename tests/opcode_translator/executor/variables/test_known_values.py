"""`known_values`: ``paddle.shape(x)[i].item()`` is the simulated dimension, not a graph break."""
from __future__ import annotations

import numpy as np
import paddle

import sot


def _full_like_rows(x: paddle.Tensor) -> tuple[paddle.Tensor, paddle.Tensor]:
    shape = paddle.shape(x)
    rows, columns = shape[0].item(), shape[-1].item()
    return paddle.full([rows, 2], 1.0) * columns + x.sum(), shape


def test_an_item_of_a_shape_tensor_is_the_dimension(compile_all: None) -> None:
    """After the first batch size, one graph serves every other (the dimension becomes symbolic), with eager's
    values."""
    for batch in (2, 3, 4, 5):
        x = paddle.randn([batch, 3])
        out, shape = sot.symbolic_translate(_full_like_rows)(x)
        e_out, e_shape = _full_like_rows(x)
        np.testing.assert_array_equal(out.numpy(), e_out.numpy())
        np.testing.assert_array_equal(shape.numpy(), e_shape.numpy())
    stats = sot.stats()
    assert (stats.graph_breaks, stats.fallbacks, stats.translate_count, stats.compiled_graphs) == (0, 0, 2, 2), stats


def _changed_shape_tensor(x: paddle.Tensor) -> paddle.Tensor:
    shape = paddle.shape(x)
    shape[0] = 7
    return shape[0].item() + x.sum()


def test_a_shape_tensor_changed_in_place_forgets_its_dimensions() -> None:
    x = paddle.randn([2, 3])
    np.testing.assert_allclose(sot.symbolic_translate(_changed_shape_tensor)(x).numpy(),
                               _changed_shape_tensor(x).numpy(), rtol=1e-6)
    assert sot.stats().graph_breaks == 1


def test_an_incremental_cache_is_made_in_the_graph() -> None:
    """``MultiHeadAttention.gen_cache`` reads the batch size as ``paddle.shape(key)[0].item()``."""
    paddle.seed(0)
    attention = paddle.nn.MultiHeadAttention(8, 2)

    def first_step(x: paddle.Tensor) -> paddle.Tensor:
        cache = attention.gen_cache(x, type=paddle.nn.MultiHeadAttention.Cache)
        out, cache = attention(x, x, x, None, cache)
        return out + cache.k.sum()

    x = paddle.randn([2, 1, 8])
    np.testing.assert_allclose(sot.symbolic_translate(first_step)(x).numpy(), first_step(x).numpy(), rtol=1e-5,
                               atol=1e-6)
    stats = sot.stats()
    assert (stats.graph_breaks, stats.fallbacks) == (0, 0), stats


def _per_element_mean(x: paddle.Tensor, weights: paddle.Tensor) -> tuple[paddle.Tensor, paddle.Tensor]:
    hidden = paddle.tanh(x) * weights
    count = int(hidden.numel())
    rows = int(paddle.numel(x)) // x.shape[-1]
    return hidden.sum() / count, hidden.reshape([rows, -1]) + count % 7


def test_int_of_numel_is_the_element_count(compile_all: None) -> None:
    """``int(x.numel())`` (a 0-D tensor in Paddle) is the product of the dimensions: a Python int for a static
    shape, a symbolic int over a dynamic one; it left the graph at every call."""
    weights = paddle.randn([4])
    for batch in (2, 3, 5, 3):
        x = paddle.randn([batch, 4])
        for got, want in zip(sot.symbolic_translate(_per_element_mean)(x, weights), _per_element_mean(x, weights)):
            assert got.shape == want.shape
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    stats = sot.stats()
    assert (stats.graph_breaks, stats.fallbacks, stats.translate_count) == (0, 0, 2), stats


def _numel_changed_in_place(x: paddle.Tensor) -> paddle.Tensor:
    count = x.numel()
    count.add_(paddle.to_tensor(1, dtype="int64"))
    return x * int(count)


def test_a_numel_tensor_changed_in_place_forgets_its_count(compile_all: None) -> None:
    x = paddle.randn([2, 3])
    np.testing.assert_allclose(sot.symbolic_translate(_numel_changed_in_place)(x).numpy(),
                               _numel_changed_in_place(x).numpy(), rtol=1e-6)
    assert sot.stats().graph_breaks == 1

"""Pure numpy functions of Python numbers (callable.NumpyFunctionVariable): ``np.sqrt(d_k)`` scaling attention
scores, ``int(np.prod(x.shape[1:]))`` flattening, ``np.float32(0.5)``: folded into a constant of the graph
(the arguments guarded), where they broke the graph before. Of a tensor, of an array or making an array they
run natively, as before."""
from __future__ import annotations

import numpy as np
import paddle
import pytest

import sot

from conftest import assert_same, counts


def attention_scores(q, k, d_k):
    return paddle.matmul(q, k, transpose_y=True) / np.sqrt(d_k)


def flatten_rest(x):
    return x.reshape([-1, int(np.prod(x.shape[1:]))]) * np.float32(0.5)


def scalar_mix(x, d):
    return [x * np.maximum(d, 1.5), x + np.int64(3), np.float64(2.5) * x, x - np.prod([d, 2]), x ** np.float32(2),
            x * np.clip(d, 0, 2) + np.pi]


def _picture(values):
    return [(v.dtype, v.shape, v.numpy().tolist()) for v in values]


def test_attention_scaled_by_a_numpy_square_root_is_one_graph(compile_all):
    q = paddle.rand([2, 3, 4])
    fast = sot.symbolic_translate(attention_scores)
    for _ in range(2):
        assert_same(fast(q, q, 4), attention_scores(q, q, 4))
    assert counts() == {"translate_count": 1, "graph_breaks": 0, "fallbacks": 0, "compiled_graphs": 1}
    # the argument of the folded call is guarded: another d_k is another entry with its own constant
    assert_same(fast(q, q, 16), attention_scores(q, q, 16))
    assert counts()["translate_count"] == 2 and counts()["graph_breaks"] == 0


def test_a_product_of_the_shape_flattens_in_the_graph(compile_all):
    fast = sot.symbolic_translate(flatten_rest)
    x = paddle.rand([2, 3, 4])
    assert_same(fast(x), flatten_rest(x))
    assert counts() == {"translate_count": 1, "graph_breaks": 0, "fallbacks": 0, "compiled_graphs": 1}
    y = paddle.rand([2, 5, 4])  # another product: guarded
    assert_same(fast(y), flatten_rest(y))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32"])
def test_numpy_numbers_as_tensor_operands_keep_the_eager_dtype(compile_all, dtype):
    x = paddle.to_tensor([1, 2, 3]).astype(dtype)
    fast = sot.symbolic_translate(scalar_mix)
    assert _picture(fast(x, 4)) == _picture(scalar_mix(x, 4))
    assert counts()["graph_breaks"] == 0 and counts()["fallbacks"] == 0


def of_a_tensor_or_an_array(x, arr):
    y = x * 2
    return y * float(np.sum(arr)), np.sqrt(arr), np.sum(y.numpy())


def test_numpy_functions_of_arrays_or_tensors_run_natively(compile_all):
    x, arr = paddle.to_tensor([1.0, 4.0]), np.array([1.0, 9.0])
    fast = sot.symbolic_translate(of_a_tensor_or_an_array)
    actual, expected = fast(x, arr), of_a_tensor_or_an_array(x, arr)
    assert_same(actual[0], expected[0])
    assert np.array_equal(actual[1], expected[1]) and actual[2] == expected[2]
    assert counts()["graph_breaks"] >= 1 and counts()["fallbacks"] == 0


def writes_with_out(x, buffer):
    np.add(1.0, 2.0, out=buffer)
    return x + 1


def test_a_ufunc_writing_out_runs_natively(compile_all):
    buffer = np.zeros(())
    fast = sot.symbolic_translate(writes_with_out)
    assert_same(fast(paddle.ones([2]), buffer), paddle.ones([2]) + 1)
    assert buffer == 3.0


def raises(x):
    return x * np.prod([[1, 2], [3]])


def test_a_numpy_error_is_the_eager_one(compile_all):
    with pytest.raises(ValueError) as eager:
        raises(paddle.ones([2]))
    with pytest.raises(ValueError) as translated:
        sot.symbolic_translate(raises)(paddle.ones([2]))
    assert str(translated.value) == str(eager.value)

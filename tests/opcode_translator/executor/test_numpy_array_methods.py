"""Pure methods of numpy arrays (``arr.sum()``, ``arr.max()``...) are folded on the array's contents, which the
entry then guards; an input array whose contents change between calls (``y.numpy()`` of a new tensor each
step) is learned as varying, and its methods then run natively (a graph break) instead of a translation per
new content."""
from __future__ import annotations

from typing import Any

import numpy as np
import paddle

import sot


def _picture(value: Any) -> Any:
    if isinstance(value, paddle.Tensor):
        return ("tensor", tuple(value.shape), value.dtype, value.numpy().tolist())
    if isinstance(value, (list, tuple)):
        return [_picture(v) for v in value]
    if isinstance(value, np.ndarray):
        return ("array", value.dtype, value.tolist())
    return (type(value), value)


def test_reductions_of_an_argument_array_are_folded(compile_all):
    def fn(x, arr):
        return x * float(arr.sum()) + arr.max(), arr.mean(), arr.argmax(), arr.any(), arr.std(axis=None), \
            arr.item(0), arr.sum(axis=0)

    fast = sot.symbolic_translate(fn)
    x, arr = paddle.to_tensor([1.0, 2.0]), np.array([[1.0, 4.0], [2.0, 3.0]], "float32")
    for _ in range(2):
        assert _picture(fast(x, arr)) == _picture(fn(x, arr))
    stats = sot.stats()
    assert stats.fallbacks == 0 and stats.translate_count <= 2, stats  # (sum(axis=0) is an array: one break)


def test_new_contents_give_the_eager_result(compile_all):
    def fn(x, arr):
        return x * float(arr.sum())

    fast = sot.symbolic_translate(fn)
    x = paddle.to_tensor([1.0, 2.0])
    for value in (1.0, 2.0, 1.0):
        arr = np.full([2], value, "float32")
        assert _picture(fast(x, arr)) == _picture(fn(x, arr))


def test_array_from_numpy_after_a_break(compile_all):
    def fn(x):
        y = x * 2
        arr = y.numpy()
        return y + float(arr.sum()), arr.max()

    fast = sot.symbolic_translate(fn)
    x = paddle.to_tensor([1.0, 2.0])
    for _ in range(2):
        assert _picture(fast(x)) == _picture(fn(x))
    stats = sot.stats()
    assert stats.graph_breaks == 1 and stats.fallbacks == 0, stats


def test_varying_contents_stop_retranslating(compile_all):
    """Each call a new array: after one miss for new contents, the methods run natively and the entry then
    serves every later content."""

    def fn(x):
        y = x * 2
        arr = y.numpy()
        return y + 1, arr.sum()  # (a natively computed float used as a constant would be guarded by value)

    fast = sot.symbolic_translate(fn)
    for step in range(6):
        x = paddle.to_tensor([float(step), 1.0])
        assert _picture(fast(x)) == _picture(fn(x))
    stats = sot.stats()
    assert stats.fallbacks == 0 and stats.translate_count <= 4, stats


def test_array_results_run_natively(compile_all):
    """``arr.sum(axis=0)`` of a 2-D array is a new array per eager call: not a shared constant."""

    def fn(x, arr):
        a = arr.sum(axis=0)
        a += 1  # changes the new array only
        return x * 2, a, arr

    fast = sot.symbolic_translate(fn)
    for _ in range(3):
        x, arr = paddle.to_tensor([1.0]), np.ones([2, 2], "float32")
        assert _picture(fast(x, arr)) == _picture(fn(x, np.ones([2, 2], "float32")))

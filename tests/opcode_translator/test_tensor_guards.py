"""Tensor meta guards on real translations: hits and misses (sot.stats()) for tensor subclasses, for the two
IRs of Paddle (FLAGS_enable_pir_api) and for dynamic dimensions next to exact shapes, each with and without
the C++ reader of tensor meta (sot/eval_frame_ext/tensor_meta.py)."""
from __future__ import annotations

import paddle
import pytest

import sot

from conftest import assert_same


pytestmark = pytest.mark.usefixtures("tensor_meta_reader")


def affine(x):
    return x * 2 + 1


class Plain(paddle.Tensor):
    """A subclass that keeps paddle.Tensor's getters."""


class Reshaped(paddle.Tensor):
    """A subclass whose shape and dtype are not its C++ tensor's."""

    @property
    def shape(self):
        return [3, 2]

    @property
    def dtype(self):
        return paddle.float64


def _counts():
    stats = sot.stats()
    return stats.translate_count, stats.cache_hits


def test_subclass_gets_its_own_entry_and_leaves_the_tensor_entry_alone():
    fast = sot.symbolic_translate(affine)
    x = paddle.ones([2, 3])
    plain, reshaped = Plain(paddle.ones([2, 3])), Reshaped(paddle.ones([2, 3]))
    assert_same(fast(x), affine(x))
    assert_same(fast(x), affine(x))
    assert _counts() == (1, 1)
    for value in (plain, reshaped):  # (each a miss: its type differs)
        assert_same(fast(value), affine(value))
    assert _counts()[0] == 3
    before = _counts()
    for _ in range(2):
        for value in (reshaped, plain, x):
            assert_same(fast(value), affine(value))
    assert _counts() == (before[0], before[1] + 6)  # every call a hit, in any order


def test_subclass_guard_reads_what_the_subclass_says():
    """A subclass lying about its shape: its entry is made and checked for the shape it reports."""
    def reads_meta(x):
        return x + 1, x.shape[0], str(x.dtype)

    fast = sot.symbolic_translate(reads_meta)
    value = Reshaped(paddle.ones([2, 3]))
    for _ in range(3):
        out, rows, dtype = fast(value)
        assert rows == 3 and dtype == str(paddle.float64)
    assert _counts() == (1, 2)


def test_a_switch_of_ir_misses_once_and_each_ir_then_hits():
    fast = sot.symbolic_translate(affine)
    x = paddle.ones([2, 3])
    assert_same(fast(x), affine(x))
    assert_same(fast(x), affine(x))
    assert _counts() == (1, 1)
    paddle.set_flags({"FLAGS_enable_pir_api": False})
    try:
        for _ in range(3):  # (one translation; the guard holds after it, though x.dtype is new every read)
            assert_same(fast(x), affine(x))
        assert _counts() == (2, 3)
    finally:
        paddle.set_flags({"FLAGS_enable_pir_api": True})
    assert_same(fast(x), affine(x))
    assert _counts() == (2, 4)


def test_dtype_returned_from_an_entry_is_the_current_irs():
    """A function returning ``x.dtype``: the value must be the object the current IR's getter makes."""
    def dtype_of(x):
        return x + 1, x.dtype

    fast = sot.symbolic_translate(dtype_of)
    x = paddle.ones([2])
    assert fast(x)[1] == x.dtype and type(fast(x)[1]) is type(x.dtype)
    paddle.set_flags({"FLAGS_enable_pir_api": False})
    try:
        got = fast(x)[1]
        assert type(got) is type(x.dtype) and got == x.dtype
    finally:
        paddle.set_flags({"FLAGS_enable_pir_api": True})
    got = fast(x)[1]
    assert type(got) is type(x.dtype) and got == x.dtype


def test_dynamic_dims_next_to_exact_shapes():
    """After a dimension varies, the entry made for it takes any size but 0 and 1; sizes 0 and 1 (and other
    ranks or other static dims) still get exact entries, and every result is eager's."""
    fast = sot.symbolic_translate(affine)
    sizes = [4, 6, 5, 7, 1, 1, 0, 0, 9, 2, 1, 4]
    for n in sizes:
        x = paddle.arange(n * 3, dtype="float32").reshape([n, 3])
        assert_same(fast(x), affine(x))
    translations, hits = _counts()
    # 4 and 6: exact then dynamic; 1 and 0: exact entries of their own; every other call a hit
    assert translations == 4, _counts()
    assert hits == len(sizes) - 4
    y = paddle.ones([5, 4])  # (a static dim of the pattern differs: no hit)
    assert_same(fast(y), affine(y))
    assert _counts() == (5, hits)


def test_pattern_does_not_take_a_smaller_rank():
    fast = sot.symbolic_translate(affine)
    for shape in ([4, 3], [6, 3], [8, 3], [8], [8, 3, 1]):
        x = paddle.ones(shape)
        assert_same(fast(x), affine(x))
    assert _counts() == (4, 1)

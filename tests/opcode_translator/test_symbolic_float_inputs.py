"""Float inputs seen with a second value (dynamic_shape.is_dynamic_float, symbolic_int.SymbolicFloatVariable):
an operand of ``+ - * /`` with a float32/float64 tensor becomes a program input; any other use bakes the value
and guards it. Results are compared with eager bit for bit (signs of zeros too)."""
from __future__ import annotations

import numpy as np
import paddle
import pytest

import sot

from conftest import counts


def _same_bits(actual, expected) -> None:
    if isinstance(expected, (list, tuple)):
        assert type(actual) is type(expected) and len(actual) == len(expected)
        for a, e in zip(actual, expected):
            _same_bits(a, e)
        return
    if isinstance(expected, paddle.Tensor):
        assert actual.dtype == expected.dtype and actual.shape == expected.shape
        a, e = actual.numpy(), expected.numpy()
        assert np.array_equal(a, e, equal_nan=True) and np.array_equal(np.signbit(a), np.signbit(e))
        return
    assert type(actual) is type(expected) and actual == expected


def operands(x, s):
    return x * s, s * x, x + s, s + x, x - s, s - x, x / s, s / x


VALUES = (0.5, 0.3, 1 / 3, -2.5, 1e-8, 7e12, 0.1)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_float_operand_seen_with_a_second_value_is_a_program_input(compile_all, dtype):
    x = paddle.to_tensor(np.concatenate([np.random.default_rng(0).standard_normal(64), [-0.0, 0.0]]).astype(dtype))
    fast = sot.symbolic_translate(operands)
    for s in VALUES:
        _same_bits(fast(x, s), operands(x, s))
    # the first value baked, then one translation for every other value
    assert counts()["translate_count"] == 2, counts()
    # a zero stays a constant of its own entry (its sign reaches products), guarded by value
    for s in (0.0, -0.0, 0.0):
        _same_bits(fast(x, s), operands(x, s))
    assert counts()["translate_count"] == 4, counts()


def pinned_uses(x, s):
    y = paddle.scale(x, s)  # an op attribute: baked
    if s > 0.4:  # a Python comparison: baked
        y = y + 1
    return y * s


def test_other_uses_of_a_dynamic_float_bake_its_value(compile_all):
    x = paddle.to_tensor([1.0, -2.0, 0.25])
    fast = sot.symbolic_translate(pinned_uses)
    for s in (0.5, 0.3, 0.5, 0.3, 0.7):
        _same_bits(fast(x, s), pinned_uses(x, s))
    # one translation per distinct value (0.5, 0.3, 0.7), the repeated ones hit
    assert counts()["translate_count"] == 3, counts()


def other_dtypes(x, n, s):
    return x * s, n * s, s * 2.0


def test_a_dynamic_float_with_integer_tensors_and_floats(compile_all):
    # an int tensor times a float is promoted by eager: the value is baked there; float arithmetic stays Python
    x = paddle.to_tensor([1, -2, 3], dtype="int32")
    n = paddle.to_tensor([1.5, 2.0]).astype("float16")
    fast = sot.symbolic_translate(other_dtypes)
    for s in (0.5, 0.3, 0.3):
        _same_bits(fast(x, n, s), other_dtypes(x, n, s))
    assert counts()["translate_count"] == 2 and counts()["fallbacks"] == 0, counts()


def reflected_quotient(x, n):
    return n / x


@pytest.mark.parametrize("values", [(0.5, 0.3, 1 / 3, 0.1), (2, 3, 7, 11)])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_a_symbolic_number_divided_by_a_tensor_is_eager_bit_for_bit(compile_all, dtype, values):
    # Eager fills the number to the tensor's shape: Paddle's CPU divide of equal shapes can round otherwise
    # than a 0-D operand broadcast (an ulp off for some float32 elements on AVX-512 machines).
    x = paddle.to_tensor(np.random.default_rng(1).uniform(1, 9, 4099).astype(dtype))
    fast = sot.symbolic_translate(reflected_quotient)
    for n in values:
        _same_bits(fast(x, n), reflected_quotient(x, n))
    # a float with an integer tensor is baked (one translation per value), anything else is an input
    baked = dtype == "int64" and isinstance(values[0], float)
    assert counts()["translate_count"] == (len(values) if baked else 2), counts()

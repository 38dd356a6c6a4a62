"""A tensor operator with a Python number computes as eager does: ``x ** c`` of a floating tensor is eager's
``pow`` (symbolic_int.eager_constant_operand; the replayed operator was another kernel: ``x ** 3`` an ulp off in
float32), and ``x + c``, ``x - c``, ``c - x``, ``x * c`` of a float64 tensor keep ``c`` a double
(sir.eager_static_forms; the program's ``scale`` rounded it to float32: ``x + math.pi`` was 1e-7 off,
``x * 1e-300`` was 0.0). Compared bit for bit."""
from __future__ import annotations

import math

import numpy as np
import paddle
import pytest

import sot

from conftest import counts

CONSTANTS = (math.pi, 0.1, 1.1, 1e-300, 123456789.123, 1e8 + 1, 3, 0.5, -2.7, 1e-12, 2, 2.0, -1)
# Not with a float32 tensor: a number float32 rounds to zero (``-0.0 - 1e-300`` is -0.0 in eager, 0.0 compiled).
UNDERFLOWING = (1e-300,)


def arithmetic(x):
    out = []
    for c in CONSTANTS:
        if x.dtype == paddle.float32 and c in UNDERFLOWING:
            c = 1.0
        out += [x + c, c + x, x - c, c - x, x * c, c * x, x / c, c / x, x ** c]
    return out


def _same_bits(actual, expected) -> None:
    for index, (a, e) in enumerate(zip(actual, expected, strict=True)):
        assert a.dtype == e.dtype, index
        a, e = a.numpy(), e.numpy()
        what = f"constant {CONSTANTS[index // 9]}, form {index % 9}"
        assert np.array_equal(a, e, equal_nan=True) and np.array_equal(np.signbit(a), np.signbit(e)), what


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_operators_with_python_numbers_are_eager_bit_for_bit(compile_all, dtype):
    values = np.concatenate([np.random.default_rng(0).uniform(-3, 3, 500), [-0.0, 0.0, 1.0]])
    x = paddle.to_tensor(values.astype(dtype))
    fast = sot.symbolic_translate(arithmetic)
    _same_bits(fast(x), arithmetic(x))
    assert counts() == {"translate_count": 1, "graph_breaks": 0, "fallbacks": 0, "compiled_graphs": 1}


def polynomial(x):
    return (x * 0.1 + math.pi - x ** 1.7 + 0.3 * x ** 3 - (1e-12 - x)).sum()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_gradients_through_these_forms_are_eager_bit_for_bit(compile_all, dtype):
    x = paddle.to_tensor(np.random.default_rng(1).uniform(0.5, 3, 50).astype(dtype), stop_gradient=False)
    expected = polynomial(x)
    expected.backward()
    expected_grad = x.grad.numpy().copy()
    x.clear_gradient()
    actual = sot.symbolic_translate(polynomial)(x)
    actual.backward()
    assert np.array_equal(actual.numpy(), expected.numpy())
    assert np.array_equal(x.grad.numpy(), expected_grad)


def scaled(x, c):
    return x * c + c


def test_the_number_is_guarded(compile_all):
    x = paddle.to_tensor([1.0, 2.0], dtype="float64")
    fast = sot.symbolic_translate(scaled)
    for c in (0.1, 0.1, 0.2):
        assert np.array_equal(fast(x, c).numpy(), scaled(x, c).numpy())

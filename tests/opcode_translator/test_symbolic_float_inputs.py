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


# --- Python float arithmetic between symbolic floats (symbolic_int.symbolic_float_arithmetic) ---


def _same_float(actual, expected) -> None:
    """The same Python float, bit for bit (a tensor or a -0.0 for 0.0 is a failure)."""
    assert type(actual) is float, type(actual)
    assert np.float64(actual).tobytes() == np.float64(expected).tobytes(), (actual, expected)


def float_arithmetic(x, a, b):
    y = x + 1.0
    return y, a + b, a - b, a * b, a / b, b / a


# Pairs whose results need every bit of a double: rounding, sign of zero (a + -a is +0.0, an underflowing
# product is -0.0), subnormals, overflow to inf.
FLOAT_PAIRS = ((0.1, 0.2), (1 / 3, 3.0), (-2.5, 2.5), (1e-200, -1e-200), (1e-300, 1e-10), (1e308, 10.0),
               (7e12, 0.3), (-0.7, 1e-17), (2.0 ** 53, 1.0), (5e-324, 0.5))


def test_arithmetic_between_dynamic_floats_is_kept_in_the_graph_bit_for_bit(compile_all):
    x = paddle.to_tensor([1.0, 2.0])
    fast = sot.symbolic_translate(float_arithmetic)
    for a, b in FLOAT_PAIRS:
        got, want = fast(x, a, b), float_arithmetic(x, a, b)
        _same_bits(got[0], want[0])
        for g, w in zip(got[1:], want[1:]):
            _same_float(g, w)
    # the first pair baked, then one translation for all the others
    assert counts()["translate_count"] == 2 and counts()["fallbacks"] == 0, counts()


def accumulate(xs):
    total = 0.0
    z = xs[0] - 1.0
    for x in xs:
        y = x * 2.0
        total += float(y.sum())  # a break: total and the new float flow into the resume function
        z = y - 1.0
    return total, z


def test_a_float_accumulated_across_breaks_is_not_translated_per_step(compile_all):
    rng = np.random.default_rng(1)
    xs = [paddle.to_tensor(rng.standard_normal(3)) for _ in range(24)]
    fast = sot.symbolic_translate(accumulate)
    got, want = fast(xs[:6]), accumulate(xs[:6])
    _same_float(got[0], want[0])
    few = counts()
    assert few["fallbacks"] == 0 and few["graph_breaks"] > 0, few
    sot.reset()
    fast = sot.symbolic_translate(accumulate)
    got, want = fast(xs), accumulate(xs)
    _same_float(got[0], want[0])
    _same_bits(got[1], want[1])
    assert counts() == few, (counts(), few)


def _compare(s, x):
    return 1.0 if s > 0.6 else 2.0


def _truth(s, x):
    return 3.0 if s else 4.0


def _formatted(s, x):
    return f"{s:.17g}|{s}|" + str(s)


def _as_int(s, x):
    return int(s * 10.0 + 0.5)


def _attribute(s, x):
    return paddle.scale(x, s)


def _with_constants(s, x):
    return s + 1, s * 2.0, 0.5 - s, -s


def _rounded(s, x):
    return round(s, 2)


def _sqrt(s, x):
    import math

    return math.sqrt(s)


def _tensor_operand(s, x):
    return x * s, x / s, s / x, s - x, x + s


def use_a_sum(x, a, b, use):
    return (x + 1.0,) + _as_tuple(use(a + b, x))


def _as_tuple(value):
    return value if isinstance(value, tuple) else (value,)


# Values whose sums differ: the third call is wrong if a use did not pin (guard) the sum.
SUM_PAIRS = ((0.5, 0.25), (0.3, 0.2), (0.7, 0.1), (0.3, 0.2), (0.5, 0.25))


@pytest.mark.parametrize("use", [_compare, _truth, _formatted, _as_int, _attribute, _with_constants, _rounded,
                                 _sqrt], ids=lambda use: use.__name__)
def test_a_use_that_needs_the_value_of_a_float_sum_bakes_it(compile_all, use):
    x = paddle.to_tensor([1.0, -2.0, 0.25])
    fast = sot.symbolic_translate(use_a_sum)
    for a, b in SUM_PAIRS:
        got, want = fast(x, a, b, use), use_a_sum(x, a, b, use)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            if isinstance(w, float):
                _same_float(g, w)
            else:
                _same_bits(g, w)
    # one translation per distinct pair, the repeated ones hit
    assert counts()["translate_count"] == 3 and counts()["fallbacks"] == 0, counts()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_float_sum_as_a_tensor_operand_stays_a_program_input(compile_all, dtype):
    x = paddle.to_tensor(np.array([1.0, -2.0, 0.25, 3.3, -0.0], dtype=dtype))
    fast = sot.symbolic_translate(use_a_sum)
    for a, b in SUM_PAIRS:
        _same_bits(list(fast(x, a, b, _tensor_operand)), list(use_a_sum(x, a, b, _tensor_operand)))
    assert counts()["translate_count"] == 2 and counts()["fallbacks"] == 0, counts()


@pytest.mark.parametrize("a, b", [(1.5, 3), (2, 3.0), (1.0, float("inf")), (1.0, 0.0), (1.0, -0.0), (0.0, 1.0)])
def test_an_entry_with_float_arithmetic_is_left_for_other_operands(compile_all, a, b):
    # after the entry for two non-zero finite floats: an int (int / int arithmetic), an infinity, a zero
    # (a divisor zero raises ZeroDivisionError in Python where the program would give inf) miss it
    x = paddle.to_tensor([1.0])
    fast = sot.symbolic_translate(float_arithmetic)
    fast(x, 1.0, 2.0), fast(x, 1.5, 3.0)
    assert counts()["translate_count"] == 2, counts()
    try:
        want = float_arithmetic(x, a, b)[1:]
    except ZeroDivisionError:
        with pytest.raises(ZeroDivisionError):
            fast(x, a, b)
        return
    got = fast(x, a, b)[1:]
    for g, w in zip(got, want):
        _same_float(g, w)
    assert counts()["translate_count"] == 3, counts()

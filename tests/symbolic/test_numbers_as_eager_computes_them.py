"""Python numbers meeting integer and half-precision tensors, and symbolic exponents, computed as eager
computes them (found by a helper's hunt; each was a wrong answer or aborted the process):

- an integer tensor times/plus a number a float32 cannot hold (a hash ``ids * 2654435761 + 100000007``,
  ``full_like(ids, 2654435761)``): the program's ``scale`` and ``full_like`` attributes are float32;
  eager's kernel casts its double to the integer type (`sir._integer_scale`);
- a bfloat16 tensor divided by a number: a CPU program has no bfloat16 ``divide`` kernel (Paddle's runner
  aborted the process); eager divides in float32 by the number filled in bfloat16;
- a symbolic int with a half tensor, a symbolic exponent (``x ** p`` with ``p`` varying), a symbolic int out
  of an integer dtype's range: pinned to their value (eager's kernels, not the program's casts).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import paddle
import pytest

import sot


def _check(fn: Callable[..., Any], calls: list[tuple], min_graph_size: int, fallbacks: bool = False) -> None:
    sot.reset()
    translated = sot.symbolic_translate(fn)
    with sot.config.patch(min_graph_size=min_graph_size):
        for args in calls:
            expected, actual = fn(*args), translated(*args)
            assert actual.dtype == expected.dtype and actual.shape == expected.shape
            np.testing.assert_array_equal(actual.astype("float64").numpy(), expected.astype("float64").numpy())
    assert fallbacks or sot.stats().fallbacks == 0


def _hash(ids):
    h = ids * 2654435761 + 100000007
    for _ in range(5):
        h = (h % 1000000007) * 3 + 1
    return h


MIN_GRAPH_SIZES = pytest.mark.parametrize("min_graph_size", [0, 10])


@MIN_GRAPH_SIZES
def test_integer_tensors_with_numbers_a_float32_rounds(min_graph_size: int) -> None:
    ids = paddle.to_tensor([1, 2, 3], dtype="int64")
    _check(_hash, [(ids,), (ids,)], min_graph_size)
    _check(lambda x: x + 16777217, [(paddle.to_tensor([1], "int32"),)] * 2, min_graph_size)
    _check(lambda x: paddle.full_like(x, 2654435761) - x * (2 ** 40 + 1), [(ids,)] * 2, min_graph_size)


@MIN_GRAPH_SIZES
def test_half_tensors_divided_by_a_number_and_with_a_varying_int(min_graph_size: int) -> None:
    for dtype in ("bfloat16", "float16"):
        x = paddle.to_tensor(np.random.default_rng(1).standard_normal(64).astype("float32") * 10).astype(dtype)
        # (float16: Paddle's static meta of the division fails, the frame falls back; a half ``+`` of two
        # tensors has no CPU kernel either: eager raises for ``a + b``)
        for divisor in (3, 0.1, -2.5):
            _check(lambda t: t / divisor, [(x,), (x,)], min_graph_size, fallbacks=dtype == "float16")
        _check(lambda t, n: t + n, [(x, 5), (x, 7), (x, 9)], min_graph_size)


@MIN_GRAPH_SIZES
def test_a_varying_exponent_is_eagers_pow(min_graph_size: int) -> None:
    signed = paddle.to_tensor([-2.0, 2.0, 0.5], dtype="float64")
    _check(lambda x, p: x ** p, [(signed, p) for p in (0.5, 1e-300, 0.1)], min_graph_size)
    values = paddle.to_tensor(np.random.default_rng(0).standard_normal(1000).astype("float32"))
    _check(lambda x, p: x ** p, [(values, p) for p in (2, 3, 4)], min_graph_size)


@MIN_GRAPH_SIZES
def test_a_varying_int_beyond_an_integer_dtypes_range(min_graph_size: int) -> None:
    x = paddle.to_tensor([1, 3], dtype="int32")
    _check(lambda t, n: n / t, [(x, n) for n in (5, 7, 3000000001, 9)], min_graph_size)

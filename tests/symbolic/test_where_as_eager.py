"""``paddle.where`` in a compiled program gives eager's dtype, values and zero signs, and raises where eager
raises (`sir._where_as_eager`).

Paddle's static ``where`` broadcasts by adding zeros: a -0.0 selected from a broadcast operand came out 0.0,
and a Python number operand (a 0-d tensor) was promoted by the additions, so an int32 tensor with ``2``
computed where eager rejects the int32/int64 mix. Every test compiles its graph (``min_graph_size=0``) and
compares dtype, shape and bits with eager's, or the type of the error."""
from __future__ import annotations

import itertools
from typing import Any, Callable

import numpy as np
import paddle
import pytest

import sot

VALUES = np.array([[1.5, -0.0, 2.0], [0.0, -3.0, 4.0]])
CONDITION = np.array([[True, False, True], [False, True, False]])
TENSOR_DTYPES = ["int32", "int64", "float32", "float64", "bool"]
SCALARS = [2, 2.5, True, -0.0, 0]


def operand(kind: Any) -> Any:
    if kind in TENSOR_DTYPES:
        return paddle.to_tensor(VALUES > 0 if kind == "bool" else VALUES.astype(kind))
    return kind


def outcome(fn: Callable[..., Any], *args: Any) -> Any:
    """What eager-parity compares: dtype, shape and bytes of the result (zero signs included), or the error
    type."""
    try:
        result = fn(*args)
    except Exception as exc:  # noqa: BLE001  (its type is compared)
        return type(exc)
    return str(result.dtype), tuple(result.shape), result.numpy().tobytes()


def assert_parity(f: Callable[..., Any], *args: Any) -> None:
    translated = sot.symbolic_translate(f)
    expected = outcome(f, *args)
    assert outcome(translated, *args) == expected
    assert outcome(translated, *args) == expected  # (a cache hit, or a second translation)


def where_xy(c: paddle.Tensor, x: Any, y: Any) -> paddle.Tensor:
    return paddle.where(c, x, y)


@pytest.mark.parametrize("x, y", list(itertools.product(TENSOR_DTYPES + SCALARS, repeat=2)))
def test_dtype_promotion_and_errors_are_eagers(compile_all: None, x: Any, y: Any) -> None:
    assert_parity(where_xy, paddle.to_tensor(CONDITION), operand(x), operand(y))


@pytest.mark.parametrize("x, y", [(2, 3), (2.5, -1.0), (True, False), (-0.0, 0.0), (0.0, -0.0)])
def test_two_number_operands(compile_all: None, x: Any, y: Any) -> None:
    """Both numbers 0-d tensors, broadcast to the condition."""
    assert_parity(where_xy, paddle.to_tensor(CONDITION), x, y)


NEGATIVE_ZEROS = {
    "row": lambda: paddle.to_tensor([-0.0, -0.0, -0.0]),
    "column": lambda: paddle.to_tensor([[-0.0], [-0.0]]),
    "scalar tensor": lambda: paddle.to_tensor(-0.0),
    "float64 row": lambda: paddle.to_tensor([-0.0, 1.0, -0.0], dtype="float64"),
}


@pytest.mark.parametrize("other", [-0.0, 0.0, 1.0, "column"])
@pytest.mark.parametrize("zeros", list(NEGATIVE_ZEROS))
def test_a_negative_zero_broadcast_against_a_bigger_condition_keeps_its_sign(compile_all: None, zeros: str,
                                                                            other: Any) -> None:
    def f(c: paddle.Tensor, x: paddle.Tensor, y: Any) -> tuple:
        return paddle.where(c, x, y) + 0 * 0, paddle.where(c, y, x)

    y = NEGATIVE_ZEROS[other]() if isinstance(other, str) else other

    def both(c: paddle.Tensor, x: paddle.Tensor) -> Any:
        return [outcome(lambda *a: f(*a)[i], c, x, y) for i in range(2)]

    condition, x = paddle.to_tensor(CONDITION), NEGATIVE_ZEROS[zeros]()
    expected = both(condition, x)
    translated = sot.symbolic_translate(f)
    assert [outcome(lambda *a: translated(*a)[i], condition, x, y) for i in range(2)] == expected


def test_a_negative_zero_in_a_bigger_operand_keeps_its_sign_with_gradients(compile_all: None) -> None:
    def f(c: paddle.Tensor, x: paddle.Tensor, y: paddle.Tensor) -> paddle.Tensor:
        return paddle.where(c, x * 1, y * 1)

    translated = sot.symbolic_translate(f)
    results = []
    for fn in (f, translated):
        x, y = paddle.to_tensor([[-0.0], [-0.0]]), paddle.to_tensor([-0.0, 2.0, -0.0])
        x.stop_gradient = y.stop_gradient = False
        out = fn(paddle.to_tensor(CONDITION), x, y)
        (out * paddle.arange(6, dtype="float32").reshape([2, 3])).sum().backward()
        results.append([t.numpy().tobytes() for t in (out, x.grad, y.grad)])
    assert results[0] == results[1]


@pytest.mark.parametrize("call", [
    lambda c, x, y: c.where(x, y),
    lambda c, x, y: paddle.where(c, input=x, other=y),
    lambda c, x, y: paddle.where(c, x=x, y=y),
    lambda c, x, y: paddle.where(c.astype("int32"), x, y),  # eager: ValueError, the condition is not bool
    lambda c, x, y: paddle.where(c, x, y[:, :2]),  # eager: the shapes do not broadcast
    lambda c, x, y: paddle.where(c, x, None),  # eager: ValueError
    lambda c, x, y: paddle.where(c),  # nonzero
    lambda c, x, y: paddle.where(c, x, np.float64(2.0)),  # a NumPy scalar: a float64 0-d tensor
    lambda c, x, y: paddle.where(c, np.float32(-0.0), y),
    lambda c, x, y: paddle.where(c, x, np.ones([2, 3], dtype="float32")),
    lambda c, x, y: paddle.where(c[0, 0], x, -0.0),  # a 0-d condition
], ids=["method", "aliases", "keywords", "int condition", "shape mismatch", "only x", "nonzero", "numpy scalar",
        "numpy negative zero", "numpy array", "0-d condition"])
def test_other_forms_and_errors_are_eagers(compile_all: None, call: Callable[..., Any]) -> None:
    def f(c: paddle.Tensor, x: paddle.Tensor, y: paddle.Tensor) -> Any:
        out = call(c, x, y)
        return out[0] if isinstance(out, tuple) else out

    assert_parity(f, paddle.to_tensor(CONDITION), paddle.to_tensor([-0.0, 1.0, -0.0]),
                  paddle.to_tensor([[-0.0, 5.0, 6.0]] * 2))


def test_where_stays_in_the_graph(compile_all: None) -> None:
    def f(c: paddle.Tensor, x: paddle.Tensor) -> paddle.Tensor:
        return paddle.where(c, x, 2.0) * 3

    sot.reset()
    assert_parity(f, paddle.to_tensor(CONDITION), paddle.to_tensor([[-0.0], [1.0]]))
    stats = sot.stats()
    assert (stats.graph_breaks, stats.fallbacks, stats.compiled_graphs) == (0, 0, 1), stats


def test_a_negative_zero_broadcast_along_a_dynamic_dimension_keeps_its_sign(compile_all: None) -> None:
    """Batch sizes that vary make the dimension dynamic: the broadcast shape is known at run time only."""
    def f(c: paddle.Tensor, x: paddle.Tensor, y: paddle.Tensor) -> paddle.Tensor:
        return paddle.where(c, x, y)

    sot.reset()
    translated = sot.symbolic_translate(f)
    for rows in (2, 3, 4, 5, 6):
        condition = paddle.to_tensor(np.arange(rows * 3).reshape(rows, 3) % 2 == 0)
        x, y = paddle.to_tensor([-0.0, 1.0, -0.0]), paddle.to_tensor([[-0.0]] * rows)
        x.stop_gradient = y.stop_gradient = False
        results = []
        for fn in (f, translated):
            out = fn(condition, x, y)
            x_grad, y_grad = paddle.grad(out.sum(), [x, y])
            results.append([t.numpy().tobytes() for t in (out, x_grad, y_grad)] + [out.shape])
            x, y = x.detach(), y.detach()
            x.stop_gradient = y.stop_gradient = False
        assert results[0] == results[1], rows
    assert sot.stats().translate_count < 5  # (a translation with a dynamic dimension served several sizes)

"""Floor division of tensors in a compiled program gives eager's dtype and shape.

Found by sweeping the binary operators over dtype pairs (tensors, 0-d tensors, Python numbers) against eager:
``+ - * / % ** >`` agree, floor division does not. Eager promotes ``t // s`` and ``paddle.floor_divide(t, s)``
with a 0-d tensor ``s`` of another dtype like any two tensors (an int32 position id ``//`` an int64 0-d stride
is int64; float32 ``//`` a float64 0-d tensor is float64), and ``paddle.floor_divide`` turns a Python number
into a tensor of the default dtype (int32 ``//`` 2 is int64, float16 ``//`` 0.5 float32); the compiled program
kept the dtype of the bigger operand (now cast to eager's first: `symbolic_int.eager_floor_division`). A Python number ``//`` a 0-d float16 tensor is [1] in eager and [1, 1]
in the program. Every test compiles its graph (``compile_all``) and compares dtype, shape and values."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import paddle
import pytest

import sot


def outcome(fn: Callable[..., Any], *args: Any) -> Any:
    result = fn(*args)
    return str(result.dtype), tuple(result.shape), result.numpy().astype("float64").tolist()


def assert_parity(fn: Callable[..., Any], *args: Any) -> None:
    expected = outcome(fn, *args)
    assert outcome(sot.symbolic_translate(fn), *args) == expected


def floor_divide_operator(a: Any, b: Any) -> paddle.Tensor:
    return a // b


def floor_divide_function(a: Any, b: Any) -> paddle.Tensor:
    return paddle.floor_divide(a, b)


def true_divide_operator(a: Any, b: Any) -> paddle.Tensor:
    return a / b


def tensor(values: list, dtype: str) -> paddle.Tensor:
    return paddle.to_tensor(np.array(values).astype(dtype))


def test_int32_positions_floor_divided_by_an_int64_scalar_tensor_are_int64_as_in_eager(compile_all: None) -> None:
    positions, stride = tensor([3, 4, 5], "int32"), paddle.to_tensor(2, dtype="int64")
    assert_parity(floor_divide_operator, positions, stride)


@pytest.mark.parametrize("dtype, scalar_dtype", [("float32", "float64"), ("float16", "float32"),
                                                 ("float64", "float32"), ("int64", "int32")])
@pytest.mark.parametrize("function", [floor_divide_operator, floor_divide_function])
def test_a_tensor_floor_divided_by_a_scalar_tensor_of_another_dtype(compile_all: None, function: Any, dtype: str,
                                                                   scalar_dtype: str) -> None:
    values = tensor([1.5, 2.5, 3.5] if dtype.startswith("float") else [3, 4, 5], dtype)
    scalar = paddle.to_tensor(np.array(2).astype(scalar_dtype))
    assert_parity(function, values, scalar)
    assert_parity(function, scalar, values)


@pytest.mark.parametrize("dtype, number", [("int32", 2), ("float16", 0.5)])
def test_paddle_floor_divide_by_a_python_number(compile_all: None, dtype: str, number: Any) -> None:
    assert_parity(floor_divide_function, tensor([3, 4, 5], dtype), number)


@pytest.mark.parametrize("number", [2, 0.5])
def test_a_python_number_floor_divided_by_a_float16_scalar_tensor(compile_all: None, number: Any) -> None:
    assert_parity(floor_divide_operator, number, paddle.to_tensor(2.0, dtype="float16"))


@pytest.mark.parametrize("dtype, scalar_dtype", [("float32", "float64"), ("int32", "int64")])
def test_true_division_by_a_scalar_tensor_of_another_dtype_already_matches(compile_all: None, dtype: str,
                                                                         scalar_dtype: str) -> None:
    values = tensor([1.5, 2.5, 3.5] if dtype.startswith("float") else [3, 4, 5], dtype)
    assert_parity(true_divide_operator, values, paddle.to_tensor(np.array(2).astype(scalar_dtype)))


def power(x: Any, exponent: Any) -> paddle.Tensor:
    return x ** exponent


@pytest.mark.parametrize("exponent", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_a_scalar_tensor_to_the_power_of_a_bool_has_eagers_shape(compile_all: None, dtype: str,
                                                                 exponent: bool) -> None:
    """Eager gives ``paddle.to_tensor(2.0) ** True`` the shape [1] (the bool made a [1] tensor); the program
    gave []. A bool to the power of a 0-D tensor, a number exponent and a [2] tensor keep eager's shapes."""
    assert_parity(power, paddle.to_tensor(np.array(2).astype(dtype)), exponent)
    assert_parity(power, exponent, paddle.to_tensor(np.array(2).astype(dtype)))
    assert_parity(power, paddle.to_tensor(np.array(2).astype(dtype)), 2)
    assert_parity(power, tensor([2, 3], dtype), exponent)


def power_in_place(x: paddle.Tensor, exponent: Any) -> paddle.Tensor:
    made = x * 1
    made **= exponent
    return made


@pytest.mark.parametrize("way", ["compiled", "eager"])
def test_a_scalar_tensor_raised_in_place_to_a_bool_has_eagers_shape(way: str) -> None:
    """``made **= True`` on a 0-D tensor of the frame is ``made ** True`` (a tensor has no ``__ipow__``):
    eager's [1], the statement and its replay gave [] (found by test_replay_operators, both ways)."""
    from sot.symbolic.compile import forced_way

    with sot.config.patch(min_graph_size=0), forced_way(way):
        for dtype in ("float32", "int64", "bool"):
            assert_parity(power_in_place, paddle.to_tensor(np.array(1).astype(dtype)), True)


def test_a_promoted_floor_division_is_translated_once_for_its_dtypes(compile_all: None) -> None:
    translated = sot.symbolic_translate(floor_divide_operator)
    stride = paddle.to_tensor(2, dtype="int64")
    for values in ([3, 4, 5], [7, 8, 9], [1, 2, 3]):
        result = translated(tensor(values, "int32"), stride)
        assert result.dtype == paddle.int64
        assert result.numpy().tolist() == [v // 2 for v in values]
    assert (sot.stats().translate_count, sot.stats().fallbacks) == (1, 0)


def _halved_sum(x: paddle.Tensor) -> paddle.Tensor:
    return x.sum() // 2


def _uses_halved_sum(x: paddle.Tensor) -> paddle.Tensor:
    return _halved_sum(x) * 3 + x.mean()


@pytest.mark.parametrize("function, operand", [(_uses_halved_sum, tensor([1.0, 2.0, 3.0, 4.0], "float32")),
                                               (floor_divide_operator, None), (power, None)])
def test_an_eager_replay_of_the_graph_gives_eagers_shape(compile_all: None, function: Any, operand: Any) -> None:
    """The statements of a graph run eagerly (the cost model's choice, a program Paddle fails to build: a
    number ``//`` a 0-D float16 tensor) give eager's [1]: the 0-D operand is made [1] before the operator,
    whose eager form fills the number as [1] too (unsqueezing the 0-D result gave [1, 1] there)."""
    from sot.symbolic.sir import run_sir

    args = (operand,) if operand is not None else (paddle.to_tensor(5.0), 2) if function is floor_divide_operator \
        else (paddle.to_tensor(3.0), True)
    explained = sot.explain(function, *args)
    sir = explained.graphs[0].sir
    replayed = run_sir(sir, [a for a in args if isinstance(a, paddle.Tensor)])[0]
    expected = function(*args)
    assert tuple(replayed.shape) == tuple(expected.shape) == (1,)
    np.testing.assert_allclose(replayed.numpy(), expected.numpy())

"""Python numbers reach a float64 result in a compiled program as doubles, as in eager (`sir.eager_static_forms`).

Paddle's static ops take some numbers as float32 attributes or fill them through float32 values, where eager
computes with the double: ``full_like(x, 0.1)`` of a float64 ``x`` gave 0.10000000149011612 in a program,
``nan_to_num`` of a float64 infinity gave inf instead of the largest float64. Every test compiles its graph
(``min_graph_size=0``) and compares dtype, shape and bits with eager's, also of the gradient where there is one."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import paddle
import pytest

import sot
from conftest import assert_counts

V = 0.1  # (not a float32)
VALUES = np.array([[0.3, -0.0, 0.9], [np.nan, np.inf, -np.inf]])

CASES: dict[str, Callable[[paddle.Tensor], paddle.Tensor]] = {
    "full_like": lambda x: paddle.full_like(x, V) + x,
    "full_like_of_a_float32_into_float64": lambda x: paddle.full_like(x.astype("float32"), V, dtype="float64"),
    "full_like_of_a_large_int": lambda x: paddle.full_like(x, 2**53 - 1),
    "fill_": lambda x: (x.detach() * 1).fill_(V) + x,
    "scale": lambda x: paddle.scale(x, V),
    "scale_with_bias": lambda x: paddle.scale(x, 2.0, V),
    "scale_with_bias_first": lambda x: paddle.scale(x, V, 0.7, bias_after_scale=False),
    "scale_method": lambda x: x.scale(V),
    "clip": lambda x: x.clip(V, 0.7),
    "clip_function": lambda x: paddle.clip(x, min=-V),
    "to_tensor": lambda x: x + paddle.to_tensor(V, dtype="float64"),
    "to_tensor_of_a_list": lambda x: x + paddle.to_tensor([V, 0.3, 1 / 3], dtype="float64"),
    "nan_to_num": lambda x: paddle.nan_to_num(x),
    "nan_to_num_with_values": lambda x: paddle.nan_to_num(x, nan=V, posinf=1e300, neginf=-V),
}
FINITE = {"full_like_of_a_float32_into_float64", "scale", "scale_with_bias", "scale_with_bias_first", "scale_method",
          "clip", "clip_function", "to_tensor", "to_tensor_of_a_list", "fill_", "full_like", "full_like_of_a_large_int"}


def outcome(fn: Callable[..., Any], x: paddle.Tensor) -> Any:
    result = fn(x)
    grad = None
    if not result.stop_gradient:
        (grad,) = paddle.grad(result.sum(), x, allow_unused=True)
    return (str(result.dtype), tuple(result.shape), result.numpy().tobytes(),
            None if grad is None else grad.numpy().tobytes())


def _input(name: str) -> paddle.Tensor:
    values = VALUES[:1] if name in FINITE else VALUES
    x = paddle.to_tensor(values, dtype="float64")
    x.stop_gradient = False
    return x


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_float64_result_keeps_the_double(name: str, compile_all: Any) -> None:
    f = CASES[name]

    def g(x):
        return f(x)

    translated = sot.symbolic_translate(g)
    expected = outcome(g, _input(name))
    assert outcome(translated, _input(name)) == expected
    assert outcome(translated, _input(name)) == expected
    assert_counts(translate_count=1, cache_hits=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


@pytest.mark.parametrize("name", ["full_like", "scale_with_bias", "clip", "nan_to_num"])
def test_float32_programs_are_built_as_before(name: str, compile_all: Any) -> None:
    """Only a float64 result is lowered: a float32 one computes with float32 numbers in eager too."""
    f = CASES[name]

    def g(x):
        return f(x)

    x = paddle.to_tensor(VALUES[:1] if name in FINITE else VALUES, dtype="float32")
    assert outcome(sot.symbolic_translate(g), x) == outcome(g, x)


def filled_to_the_input_shape(x):
    return paddle.full_like(x, V) * x.shape[0]


def test_full_like_of_a_dynamic_dimension(compile_all: Any) -> None:
    translated = sot.symbolic_translate(filled_to_the_input_shape)
    for n in (2, 3, 5):
        x = paddle.to_tensor(np.linspace(0, 1, n), dtype="float64")
        assert translated(x).numpy().tobytes() == filled_to_the_input_shape(x).numpy().tobytes()
    assert sot.stats().translate_count <= 2


LIBRARY_CASES: dict[str, Callable[[paddle.Tensor], paddle.Tensor]] = {
    "quantile": lambda x: paddle.quantile(x, V),
    "index_fill": lambda x: paddle.index_fill(x, paddle.to_tensor([0]), 0, V),
    "deg2rad": lambda x: paddle.deg2rad(x),
}


@pytest.mark.parametrize("name", sorted(LIBRARY_CASES))
def test_numbers_inside_library_functions_keep_the_double(name: str, compile_all: Any) -> None:
    """A Paddle function recorded as one statement runs its own Python on static values, where numbers became
    float32 (`sir.eager_static_forms`): ``quantile`` of a float64 tensor was 0.3600000008940697 where eager
    gives 0.36 (its ``q`` made a tensor by static ``to_tensor``)."""
    f = LIBRARY_CASES[name]

    def g(x):
        return f(x)

    x = paddle.to_tensor(VALUES[0, [0, 2]], dtype="float64")
    assert outcome(sot.symbolic_translate(g), x) == outcome(g, x)

"""Python values computed from tensor metas (``x.dim()``, ``x.is_floating_point()``, ``x.size``) and Paddle
predicates (``paddle.is_tensor``, ``paddle.is_grad_enabled``): answered during translation, with the eager
value and type, no graph break or fallback, and a new translation when the meta the answer depends on
changes (see executor/variables/tensor_values.py)."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import paddle
import pytest

import sot
from conftest import assert_same


def _tensor(shape: tuple[int, ...], dtype: str = "float32", stop_gradient: bool = True) -> paddle.Tensor:
    data = np.arange(int(np.prod(shape)), dtype="float64").reshape(shape) % 5 - 2
    value = paddle.to_tensor(data.astype(dtype))
    value.stop_gradient = stop_gradient
    return value


def _run(fn: Callable[..., Any], *inputs: Callable[[], tuple]) -> Any:
    """Eager vs translated, twice per input set; returns the stats."""
    fast = sot.symbolic_translate(fn)
    for make in inputs:
        for _ in range(2):
            assert_same(fast(*make()), fn(*make()))
    return sot.stats()


def _no_break_or_fallback(stats: Any) -> None:
    assert stats.graph_breaks == 0 and stats.fallbacks == 0, stats


# -- tensor methods answered from the dtype and rank ---------------------------------------------------------
def methods(x):
    return x * 2, x.dim(), x.ndimension(), x.is_floating_point(), x.is_complex(), x.is_integer(), x.element_size()


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int32", "int64", "bool", "uint8",
                                   "complex64"])
def test_meta_methods_match_eager_for_each_dtype(dtype, compile_all):
    def fn(x):
        return x.dim(), x.ndimension(), x.is_floating_point(), x.is_complex(), x.is_integer(), x.element_size(), \
            paddle.is_floating_point(x), paddle.is_complex(x), paddle.is_integer(x), x.itemsize, x.requires_grad

    _no_break_or_fallback(_run(fn, lambda: (_tensor((2, 3), dtype),)))


def test_meta_methods_of_a_computed_tensor(compile_all):
    def fn(x):
        y = (x * 2).astype("int64").unsqueeze(0)
        z = x * 2
        return y + y.dim(), y.is_floating_point(), y.element_size(), y.itemsize, z.requires_grad, y.requires_grad

    _no_break_or_fallback(_run(fn, lambda: (_tensor((2, 3)),), lambda: (_tensor((2, 3), stop_gradient=False),)))


def test_dtype_change_flips_is_floating_point(compile_all):
    def fn(x):
        if x.is_floating_point():
            return x * 0.5
        return x + 1

    stats = _run(fn, lambda: (_tensor((3,)),), lambda: (_tensor((3,), "int64"),), lambda: (_tensor((3,)),))
    _no_break_or_fallback(stats)
    assert stats.translate_count == 2, stats


def test_rank_change_retranslates_dim(compile_all):
    def fn(x):
        return x * x.dim()

    stats = _run(fn, lambda: (_tensor((2, 3)),), lambda: (_tensor((6,)),))
    _no_break_or_fallback(stats)
    assert stats.translate_count == 2, stats


def test_dim_under_a_dynamic_dimension_does_not_pin_it(compile_all):
    """The rank is known while a dimension is symbolic: reading it must not specialise on the sizes."""

    def fn(x):
        return x * x.dim()

    stats = _run(fn, *(lambda n=n: (_tensor((n, 3)),) for n in (2, 3, 4, 5)))
    _no_break_or_fallback(stats)
    assert stats.translate_count <= 2, stats


def test_meta_method_with_an_argument_raises_the_eager_error(compile_all):
    def fn(x):
        try:
            return x.dim(1)
        except TypeError as exc:
            return type(exc).__name__

    _run(fn, lambda: (_tensor((2,)),))


# -- Paddle predicates ----------------------------------------------------------------------------------------
def test_is_tensor_of_each_kind(compile_all):
    def fn(x, n, items):
        y = x + 1
        return y, paddle.is_tensor(x), paddle.is_tensor(y), paddle.is_tensor(n), paddle.is_tensor(items), \
            paddle.is_tensor(items[0]), paddle.is_tensor(None)

    _no_break_or_fallback(_run(fn, lambda: (_tensor((2,)), 3, [_tensor((2,)), 1.0])))


def test_is_tensor_guard_follows_the_argument_type(compile_all):
    def fn(x, v):
        if paddle.is_tensor(v):
            return x + v
        return x * v

    stats = _run(fn, lambda: (_tensor((2,)), _tensor((2,))), lambda: (_tensor((2,)), 3.0),
                 lambda: (_tensor((2,)), _tensor((2,))))
    _no_break_or_fallback(stats)
    assert stats.translate_count == 2, stats


def test_is_grad_enabled_follows_simulated_no_grad_blocks(compile_all):
    def fn(x):
        outside = paddle.is_grad_enabled()
        with paddle.no_grad():
            inside = paddle.is_grad_enabled()
            y = x * 2
        return y, outside, inside, paddle.is_grad_enabled()

    _no_break_or_fallback(_run(fn, lambda: (_tensor((2,), stop_gradient=False),)))


def test_is_grad_enabled_change_between_calls_retranslates(compile_all):
    def fn(x):
        return x * 2, paddle.is_grad_enabled()

    fast = sot.symbolic_translate(fn)
    x = _tensor((2,), stop_gradient=False)
    for enabled in (True, False, True):
        with paddle.set_grad_enabled(enabled):
            assert_same(fast(x), fn(x))
    _no_break_or_fallback(sot.stats())


def test_dtype_predicate_of_a_non_tensor_raises_the_eager_error(compile_all):
    def fn(x, v):
        try:
            return paddle.is_floating_point(v)
        except TypeError as exc:
            return x * 2, str(exc)

    _run(fn, lambda: (_tensor((2,)), 1.5))


# -- x.size -------------------------------------------------------------------------------------------------
def _size_picture(value: Any) -> Any:
    return type(value), int(value), type(value.as_shape), list(value.as_shape)


def test_size_has_the_eager_type_and_shape(compile_all):
    def fn(x):
        s = x.size
        return x * 2, s, s * 2, s + 1, int(s), x.size(), x.size(1), x.size(-1), x.size(None), s.as_shape, \
            x.reshape([s])

    _no_break_or_fallback(_run(fn, lambda: (_tensor((3, 4)),)))
    fast = sot.symbolic_translate(fn)
    actual, expected = fast(_tensor((3, 4)))[1], fn(_tensor((3, 4)))[1]
    assert _size_picture(actual) == _size_picture(expected)


def test_each_size_read_is_a_new_object(compile_all):
    """``as_shape`` is a mutable list: two reads (and two calls) must not share one object."""

    def fn(x):
        a, b = x.size, x.size
        a.as_shape.append(9)
        return x + 1, a.as_shape, b.as_shape, a, a(), a(2)

    _run(fn, lambda: (_tensor((2, 3)),))


def test_size_follows_the_shape(compile_all):
    def fn(x):
        return x * x.size, x.size

    with sot.config.patch(dynamic_shape=False):
        stats = _run(fn, lambda: (_tensor((2, 3)),), lambda: (_tensor((4, 3)),))
    _no_break_or_fallback(stats)
    assert stats.translate_count == 2, stats


# -- ops returning named tuples ----------------------------------------------------------------------------
def test_topk_result_is_the_eager_named_tuple(compile_all):
    def fn(x):
        result = paddle.topk(x, 2)
        values, indices = result
        return result, result.values * 2, result.indices, values + 1, indices, result[0], result._fields, \
            x.topk(1, axis=0)

    stats = _run(fn, lambda: (_tensor((3, 4)),))
    _no_break_or_fallback(stats)
    fast = sot.symbolic_translate(fn)
    assert type(fast(_tensor((3, 4)))[0]) is type(fn(_tensor((3, 4)))[0])


def test_named_tuple_result_passed_to_another_api(compile_all):
    def fn(x):
        ints = x.astype("int64")
        return paddle.concat(paddle.topk(x, 2)[:1] + (x,), axis=1), paddle.concat(paddle.topk(ints, 2), axis=1)

    _no_break_or_fallback(_run(fn, lambda: (_tensor((3, 4)),)))


def test_named_tuple_result_gradients(compile_all):
    def fn(x):
        top = paddle.topk(x * 3, 2)
        return top.values.sum()

    x_eager, x_fast = _tensor((3, 4), stop_gradient=False), _tensor((3, 4), stop_gradient=False)
    fn(x_eager).backward()
    sot.symbolic_translate(fn)(x_fast).backward()
    np.testing.assert_allclose(x_fast.grad.numpy(), x_eager.grad.numpy())
    _no_break_or_fallback(sot.stats())


# -- x.grad -------------------------------------------------------------------------------------------------
def _grad_picture(value: Any) -> Any:
    """Values and presence of gradients (their stop_gradient differs after a compiled backward: known bug
    test_grad_of_a_leaf_after_backward_inside_the_function)."""
    if isinstance(value, paddle.Tensor):
        return ("tensor", value.dtype, tuple(value.shape), value.numpy().tolist())
    if isinstance(value, (tuple, list)):
        return [_grad_picture(v) for v in value]
    return value


def test_grad_read_after_a_backward_break_has_the_eager_values(compile_all):
    def fn(x, w):
        before = x.grad
        y = (x * w).sum()
        y.backward()
        return before, x.grad * 2, w.grad, x.grad is None

    def leaves():
        x, w = _tensor((2, 3), stop_gradient=False), _tensor((2, 3))
        return x, w

    fast = sot.symbolic_translate(fn)
    for _ in range(2):
        assert _grad_picture(fast(*leaves())) == _grad_picture(fn(*leaves()))
    assert sot.stats().fallbacks == 0, sot.stats()


def test_grad_presence_is_guarded(compile_all):
    """``x.grad`` None at one call and a tensor at the next (accumulated across calls)."""

    def fn(x):
        g = x.grad
        if g is None:
            return x * 2
        return x + g

    fast = sot.symbolic_translate(fn)
    x_eager, x_fast = _tensor((3,), stop_gradient=False), _tensor((3,), stop_gradient=False)
    for _ in range(3):
        expected, actual = fn(x_eager), fast(x_fast)
        np.testing.assert_allclose(actual.numpy(), expected.numpy())
        expected.sum().backward()
        actual.sum().backward()
    assert sot.stats().fallbacks == 0, sot.stats()


def test_grad_of_a_computed_tensor_runs_natively(compile_all):
    def fn(x):
        y = x * 2
        return y, y.grad

    _run(fn, lambda: (_tensor((3,), stop_gradient=False),))


def test_is_autocast_enabled_follows_simulated_amp_blocks(compile_all):
    def fn(x):
        outside = paddle.is_autocast_enabled()
        with paddle.amp.auto_cast(dtype="bfloat16"):
            inside = paddle.is_autocast_enabled()
            with paddle.amp.auto_cast(enable=False):
                off = paddle.is_autocast_enabled()
        return x * 2, outside, inside, off

    _no_break_or_fallback(_run(fn, lambda: (_tensor((2,)),)))
    with paddle.amp.auto_cast(dtype="bfloat16"):  # the state a call starts in is guarded
        assert_same(sot.symbolic_translate(fn)(_tensor((2,))), fn(_tensor((2,))))


def test_size_kept_across_a_break(compile_all):
    def fn(x):
        s = x.size
        print("break")
        return x * s, s + 1, s, s()

    stats = _run(fn, lambda: (_tensor((2, 3)),))
    assert stats.fallbacks == 0, stats


def test_device_and_build_queries_are_answered_and_guarded(compile_all):
    def fn(x):
        return x * 2, paddle.device.get_device(), paddle.get_device(), paddle.is_compiled_with_xpu(), \
            paddle.device.is_compiled_with_rocm(), paddle.is_compiled_with_cinn(), paddle.distributed.get_rank(), \
            paddle.distributed.get_world_size(), paddle.amp.is_float16_supported(), paddle.amp.is_bfloat16_supported()

    _no_break_or_fallback(_run(fn, lambda: (_tensor((2,)),)))
    assert "get_device" in str(sot.explain(fn, _tensor((2,))))  # re-asked at every call

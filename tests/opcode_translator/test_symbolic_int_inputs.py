"""Python int inputs that vary become symbolic ints (issue 5): one recompile, then every value hits.

Also the shape of the generated guard function (one short-circuiting expression)."""
from __future__ import annotations

import numpy as np
import paddle
import pytest

import sot
from conftest import assert_same
from sot.eval_frame_ext import cache_entries


def _t(*shape, dtype="float32", seed=0):
    return paddle.to_tensor(np.random.RandomState(seed).randn(*shape).astype(dtype))


def _guards(fn) -> list[str]:
    """The readable guards of each cache entry of ``fn``, most recently hit first."""
    return [str(guard.guard) for guard, _ in cache_entries(fn.__code__)]


def _run(fn, calls):
    fast = sot.symbolic_translate(fn)
    for args in calls:
        assert_same(fast(*args), fn(*args))
    return sot.stats()


def scale(x, n):
    return x * n + 1


def test_int_input_with_a_second_value_becomes_symbolic(compile_all):
    x = _t(3, 4)
    stats = _run(scale, [(x, 3), (x, 5), (x, 7), (x, 9), (x, 3)])
    # 3 specialised; 5 makes n symbolic (a program input); 7, 9 hit that entry; 3 hits its own entry
    assert stats.translate_count == 2 and stats.cache_hits == 3, stats
    assert stats.fallbacks == 0 and stats.graph_breaks == 0
    symbolic = [g for g in _guards(scale) if "n not in (0, 1)" in g]
    assert len(symbolic) == 1 and "n == " not in symbolic[0], _guards(scale)


@pytest.mark.parametrize("fn", [
    lambda x, n: x[:, :n] * 2,
    lambda x, n: x[:, -n:] - x[:, :n],
    lambda x, n: x.reshape([n, -1]) + 1,
    lambda x, n: paddle.full([n * 2 + 1], 1.5) + x.sum(),
    lambda x, n: (x * n).reshape([-1, n]).sum(axis=0),
], ids=["slice", "negative_slice", "reshape", "shape_arithmetic", "operand_and_shape"])
def test_int_input_in_shapes_and_slices_stays_symbolic(fn, compile_all):
    x = _t(4, 12)
    stats = _run(fn, [(x, 2), (x, 3), (x, 4), (x, 6)])
    assert stats.translate_count == 2 and stats.cache_hits == 2, stats
    assert stats.fallbacks == 0 and stats.graph_breaks == 0, stats


def test_branch_on_a_symbolic_int_is_guarded_by_the_condition(compile_all):
    def f(x, n):
        if n > 3:
            return x * 2
        return x - 1

    x = _t(2, 3)
    stats = _run(f, [(x, 5), (x, 7), (x, 9)])
    assert stats.translate_count == 2 and stats.cache_hits == 1, stats
    guard = _guards(f)[0]
    assert "(n > 3)" in guard and "n == " not in guard, guard
    stats = _run(f, [(x, 2), (x, 8), (x, -4)])  # 2 fails the condition: a translation for "not (n > 3)"
    assert stats.translate_count == 3, stats
    assert any("not (n > 3)" in g for g in _guards(f))


def test_truth_of_a_symbolic_int_expression_is_guarded(compile_all):
    def f(x, n):
        if n - 3:
            return x + n
        return x

    x = _t(2, 3)
    stats = _run(f, [(x, 2), (x, 4), (x, 5), (x, 3), (x, 6)])
    assert stats.translate_count == 3, stats  # 2; symbolic with n - 3 true; symbolic with n - 3 false


def test_range_over_a_symbolic_int_specialises_the_value(compile_all):
    def f(x, n):
        for i in range(n):
            x = x + i
        return x

    x = _t(2, 3)
    stats = _run(f, [(x, 2), (x, 3), (x, 4), (x, 3), (x, 4)])
    assert stats.translate_count == 3 and stats.cache_hits == 2, stats
    assert any("n == 4" in g for g in _guards(f)), _guards(f)


def test_zero_and_one_stay_specialised(compile_all):
    x = _t(3, 4)
    stats = _run(scale, [(x, 3), (x, 5), (x, 1), (x, 0), (x, 7), (x, 1)])
    assert stats.translate_count == 4 and stats.cache_hits == 2, stats


def test_dynamic_shape_off_specialises_every_int(compile_all):
    x = _t(3, 4)
    with sot.config.patch(dynamic_shape=False):
        stats = _run(scale, [(x, 3), (x, 5), (x, 7), (x, 5)])
    assert stats.translate_count == 3 and stats.cache_hits == 1, stats


def test_other_types_miss_the_symbolic_entry(compile_all):
    xi = paddle.to_tensor([[1, 2], [3, 4]], dtype="int64")
    stats = _run(scale, [(xi, 3), (xi, 5), (xi, True), (xi, 2.0), (xi, 6)])
    assert stats.translate_count == 4 and stats.cache_hits == 1, stats


@pytest.mark.parametrize("dtype", ["int32", "float32", "float64"])
@pytest.mark.parametrize("op", ["*", "+", "-", "//", "%", "/", ">"])
def test_tensor_operator_with_a_symbolic_int_keeps_the_eager_dtype(dtype, op, compile_all):
    fn = eval(f"lambda x, n: (x {op} n, n {op} x)")
    x = paddle.to_tensor([[7, 9, 2], [5, 3, 8]], dtype=dtype)
    stats = _run(fn, [(x, 2), (x, 3), (x, 4)])
    assert stats.translate_count == 2 and stats.fallbacks == 0, stats


def test_bool_tensor_with_an_int_operand_pins_it(compile_all):
    x = paddle.to_tensor([True, False])
    stats = _run(lambda x, n: x * n, [(x, 2), (x, 3), (x, 4)])
    assert stats.fallbacks == 0, stats


def test_api_that_needs_a_python_int_gets_the_pinned_value(compile_all):
    def f(x, n):
        return paddle.split(x, n, axis=1)[0] * 1.0

    x = _t(2, 12)
    stats = _run(f, [(x, 2), (x, 3), (x, 4), (x, 3)])
    assert stats.fallbacks == 0 and stats.graph_breaks == 0, stats
    assert stats.translate_count == 3 and stats.cache_hits == 1, stats


def test_symbolic_int_returned_and_derived_are_exact_ints(compile_all):
    def f(x, n):
        return x + 1, n, n * 2 - 1

    x = _t(2, 2)
    stats = _run(f, [(x, 2), (x, 3), (x, 40)])
    assert stats.translate_count == 2, stats


def test_symbolic_int_from_a_container_and_a_user_layer(compile_all):
    class Scale(paddle.nn.Layer):
        def forward(self, x, n):
            return x * n

    layer = Scale()

    def f(x, cfg):
        return layer(x, cfg["h"]).reshape([cfg["h"], -1])

    x = _t(4, 6)
    stats = _run(f, [(x, {"h": 2}), (x, {"h": 3}), (x, {"h": 6})])
    assert stats.translate_count == 2 and stats.cache_hits == 1, stats


def test_gradients_flow_with_a_symbolic_int(compile_all):
    def f(x, n):
        return (x[:, :n] * n).sum()

    fast = sot.symbolic_translate(f)
    for n in (2, 3, 5):
        x = _t(3, 6)
        x.stop_gradient = False
        fast(x, n).backward()
        expected = _t(3, 6)
        expected.stop_gradient = False
        f(expected, n).backward()
        np.testing.assert_allclose(x.grad.numpy(), expected.grad.numpy())
    assert sot.stats().translate_count == 2


def test_symbolic_int_used_as_a_list_index_is_pinned(compile_all):
    def f(x, n):
        parts = [x, x * 2, x * 3, x * 4, x * 5, x * 6]
        return parts[n] + parts[:n][-1]

    x = _t(2, 2)
    stats = _run(f, [(x, 2), (x, 3), (x, 5), (x, 3)])
    assert stats.fallbacks == 0 and stats.translate_count == 3 and stats.cache_hits == 1, stats


OPTIONS: dict = {}


def test_a_falsy_object_on_a_guarded_path_does_not_fail_the_guard(compile_all):
    """The guard is one ``and`` chain: binding a path to an empty dict must not end it."""
    def f(x):
        return x * OPTIONS.get("scale", 2)

    x = _t(2, 2)
    stats = _run(f, [(x,), (x,), (x,)])
    assert stats.translate_count == 1 and stats.cache_hits == 2, stats


def test_guard_function_is_one_short_circuiting_expression(compile_all):
    def f(x, y):
        return x + y

    sot.symbolic_translate(f)(_t(2), _t(2))
    (guard, _), = cache_entries(f.__code__)
    source = guard.guard.source
    assert source.count("return") == 1 and " and " in source, source
    assert guard(f.__globals__, None, _t(2), _t(2))
    assert not guard(f.__globals__, None, _t(2), _t(3))
    assert not guard(f.__globals__, None, _t(2), _t(2, dtype="float64"))


def test_tensor_meta_check_in_c_matches_the_python_checks():
    from sot.eval_frame_ext import tensor_matches

    x = _t(5, 8)
    cls, dtype = type(x), x.dtype
    assert tensor_matches(x, cls, [5, 8], dtype, True)
    assert not tensor_matches(x, cls, [5, 9], dtype, True)
    assert not tensor_matches(x, cls, [5, 8, 1], dtype, True)
    assert not tensor_matches(x, cls, [5, 8], paddle.float64, True)
    assert not tensor_matches(x, cls, [5, 8], dtype, False)
    assert not tensor_matches(x.numpy(), cls, [5, 8], dtype, True)
    # a tuple is a pattern: -1 is a dynamic dimension, of any size but 0 and 1
    assert tensor_matches(x, cls, (-1, 8), dtype, True)
    assert not tensor_matches(_t(1, 8), cls, (-1, 8), dtype, True)
    assert not tensor_matches(x, cls, (-1, 9), dtype, True)
    assert tensor_matches(paddle.to_tensor(1.5), cls, [], dtype, True)


def test_tensor_meta_check_sees_a_patched_tensor_property():
    from sot.eval_frame_ext import tensor_matches

    x = _t(2, 3)
    cls, dtype = type(x), x.dtype
    assert tensor_matches(x, cls, [2, 3], dtype, True)
    original = cls.__dict__["stop_gradient"]
    try:
        cls.stop_gradient = property(lambda self: "patched")  # the getters are looked up again
        assert not tensor_matches(x, cls, [2, 3], dtype, True)
        assert tensor_matches(x, cls, [2, 3], dtype, "patched")
    finally:
        cls.stop_gradient = original
    assert tensor_matches(x, cls, [2, 3], dtype, True)


@pytest.mark.parametrize("min_graph_size", [0, 10], ids=["compiled", "replayed_eagerly"])
def test_floor_division_of_a_symbolic_int_reads_back_as_an_int(min_graph_size):
    """Eager Paddle gives ``0-D tensor // int`` the shape [1]; the symbolic int must stay 0-D."""
    class Holder:
        pass

    def f(x, n, obj):
        obj.a = n // 3
        return x + 1, n // 3 - 1, -n // 2

    with sot.config.patch(min_graph_size=min_graph_size):
        fast = sot.symbolic_translate(f)
        for n in (-2, 6, 7, -9):
            got, want = Holder(), Holder()
            assert_same(fast(_t(2), n, got), f(_t(2), n, want))
            assert type(got.a) is int and got.a == want.a
    assert sot.stats().translate_count == 2


def test_symbolic_slice_in_an_eagerly_replayed_graph():
    """Below min_graph_size the graph is replayed by generated Python: a slice bound is a symbol there too."""
    def f(x, n):
        y = x[:, :n] * 2
        print("slice", n)  # a graph break: the small graph before it is replayed eagerly
        return y + x[:, n:].sum()

    x = _t(3, 8)
    stats = _run(f, [(x, 2), (x, 3), (x, 5), (x, -2)])
    assert stats.fallbacks == 0, stats


def test_an_int_beyond_int64_misses_the_symbolic_entry(compile_all):
    x = _t(2, 2)
    stats = _run(scale, [(x, 3), (x, 5), (x, 2 ** 70), (x, 7)])
    assert stats.translate_count == 3 and stats.cache_hits == 1, stats


@pytest.mark.parametrize("fn", [
    lambda x, skip: paddle.nn.functional.interpolate(x, size=skip.shape[2:], mode="bilinear"),
    lambda x, skip: paddle.zeros(skip.shape[1:]) + x.mean(),
    lambda x, skip: x[:, :, :1, :1].expand(skip.shape) * 2,
], ids=["interpolate_size", "zeros", "expand"])
def test_a_shape_with_symbolic_dimensions_passed_to_an_api(fn, compile_all):
    """``skip.shape[2:]`` once the spatial dimensions are symbolic is a `paddle.Size` of symbolic ints: it
    reaches the program as a list (a Size holds ints only), not as an internal error and a fallback."""
    calls = [(_t(2, 3, n, n, seed=n), _t(2, 3, 2 * n, 2 * n, seed=n + 1)) for n in (2, 3, 4, 5)]
    stats = _run(fn, calls)
    assert stats.fallbacks == 0 and stats.graph_breaks == 0, stats
    assert stats.translate_count == 2 and stats.cache_hits == 2, stats


def truncated_quotients(x, n):
    rows = int(x.shape[0] / 2)
    negative = int((n - 10) / 3)
    return x[:rows] * 2, negative, int(n / 2.5), x * (n / 4)


def test_int_of_a_true_division_by_a_number_stays_symbolic(compile_all):
    """``int(n / c)`` of a symbolic int and a non-zero number is computed in float64 and truncated toward zero
    as Python does (a negative quotient too): one translation for every value, branches on it guarded by
    the expression."""
    calls = [(_t(b, 3, seed=b), n) for b, n in ((2, 3), (3, 5), (5, 7), (7, 2), (4, 13), (6, 101))]
    stats = _run(truncated_quotients, calls)
    assert (stats.graph_breaks, stats.fallbacks) == (0, 0), stats
    assert stats.translate_count == 2, stats  # the first values specialised, then symbolic


def branch_on_a_quotient(x):
    rows = int(x.shape[0] / 2)
    if rows > 2:
        return x[:rows] * 2
    return x[:rows] - 1


def test_a_branch_on_a_truncated_quotient_is_guarded_by_the_expression(compile_all):
    stats = _run(branch_on_a_quotient, [(_t(b, 3, seed=b),) for b in (2, 3, 6, 7, 4, 5, 9, 8, 3)])
    assert (stats.graph_breaks, stats.fallbacks, stats.translate_count) == (0, 0, 3), stats

"""In-place tensor operations and tensor identity (issue 3), see executor/variables/inplace.py.

Each test runs a function eagerly and translated on fresh, equal inputs and compares the results, the caller's
tensors after the call, and (where inputs need a gradient) the gradients reaching the leaves behind them. The
exact `sot.stats()` counters show how the frame ran: recorded in the graph (no break, no fallback), broken where
the model cannot be exact, or run eagerly (a fallback) where even a break would be wrong (views).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import paddle
import paddle.nn.functional as F
import pytest

import sot

from conftest import assert_same


@pytest.fixture(autouse=True)
def _compile_all(compile_all: Any) -> None:
    """Every graph compiles (a graph replayed eagerly would hide what the compiled program does)."""


def _data(*shape: int, seed: int = 0, dtype: str = "float32") -> np.ndarray:
    rng = np.random.default_rng(seed + 7 * len(shape) + sum(shape))
    if dtype.startswith("int"):
        return rng.integers(-9, 10, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _tensor(*shape: int, seed: int = 0, dtype: str = "float32") -> paddle.Tensor:
    return paddle.to_tensor(_data(*shape, seed=seed, dtype=dtype))


def counts() -> tuple[int, int, int]:
    stats = sot.stats()
    return stats.graph_breaks, stats.fallbacks, stats.translate_count


def _observe(value: Any) -> Any:
    """Arguments as comparable structures: a user object by its attributes."""
    if isinstance(value, (list, tuple)):
        return [_observe(item) for item in value]
    if hasattr(value, "__dict__") and not isinstance(value, paddle.Tensor):
        return {key: _observe(item) for key, item in vars(value).items()}
    return value


def check(fn: Callable[..., Any], make: Callable[[], tuple], calls: int = 2) -> Any:
    """``fn`` eager vs translated on fresh arguments from ``make()``: results and arguments after the call equal,
    and the second call hits the cache (translates nothing)."""
    fast = sot.symbolic_translate(fn)
    for call in range(calls):
        eager_args, fast_args = make(), make()
        expected = fn(*eager_args)
        before = sot.stats().translate_count
        actual = fast(*fast_args)
        assert_same(actual, expected)
        assert_same(_observe(fast_args), _observe(eager_args))
        if call:
            assert sot.stats().translate_count == before, f"call {call + 1} translated again: {sot.stats()}"
    return fast


def check_gradients(fn: Callable[..., Any], *shapes: tuple[int, ...], calls: int = 2) -> None:
    """Each argument is a non-leaf ``leaf * 2`` of a leaf requiring grad. After the call, the loss sums the
    result and the arguments (the caller's tensors as the call left them): the leaves' gradients must equal
    eager's, as must the arguments' values and ``stop_gradient``."""
    fast = sot.symbolic_translate(fn)

    def run(function: Callable[..., Any]) -> tuple[Any, list, list]:
        leaves = [paddle.to_tensor(_data(*shape, seed=i), stop_gradient=False) for i, shape in enumerate(shapes)]
        args = [leaf * 2 for leaf in leaves]
        result = function(*args)
        loss = sum((arg * arg).sum() for arg in args) + (result * result).sum()
        loss.backward()
        return result, args, [leaf.grad for leaf in leaves]

    for _ in range(calls):
        expected = run(fn)
        actual = run(fast)
        assert_same(actual[0], expected[0])
        assert_same(actual[1], expected[1])
        _assert_gradients_same(actual[2], expected[2])


def _assert_gradients_same(actual: list, expected: list, flags: bool = True) -> None:
    """Gradient values, and their ``stop_gradient`` unless not ``flags`` (the parameters of a built-in layer:
    test_conformance_paddle.py::test_parameter_gradients_of_a_built_in_layer_keep_eager_flags)."""
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert (a is None) == (e is None)
        if e is not None:
            np.testing.assert_allclose(a.numpy(), e.numpy(), rtol=1e-5, atol=1e-6)
            assert not flags or a.stop_gradient == e.stop_gradient


# Python values assigned into items: Paddle's static set_value with the value as an attribute let the gradient
# of the overwritten items through (fuzz seed 65); each form must give the overwritten items no gradient.
def _float_at_an_index(x):
    y = x * 3
    y[0] = 1.5
    return y * y


def _int_into_a_slice(x):
    y = x * 3
    y[1:3] = 2
    return y * y


def _negative_zero_into_a_column(x):
    y = x * 3
    y[:, 1] = -0.0
    return y * y


def _array_into_rows(x):
    y = x * 3
    y[0:2] = np.full([2, 4], 3.0, dtype="float64")
    return y * y


SCALAR_ITEM_ASSIGNMENTS = [_float_at_an_index, _int_into_a_slice, _negative_zero_into_a_column, _array_into_rows]


@pytest.mark.parametrize("fn", SCALAR_ITEM_ASSIGNMENTS, ids=lambda fn: fn.__name__.strip("_"))
def test_python_values_assigned_into_items_stop_their_gradient(fn: Callable[..., Any]) -> None:
    check_gradients(fn, (3, 4))
    breaks = 1 if fn is _array_into_rows else 0  # (an array value: the item assignment runs natively)
    assert counts()[:2] == (breaks, 0)


# A 0-D integer tensor index: Paddle's static setitem writes item i as the slice [i, i + 1), empty for i == -1
# (``y[paddle.to_tensor(-1)] = v`` was a no-op in a program); so is ``y.__setitem__(i, v)`` called by name.
def _last_row_by_a_tensor(x, i):
    y = x * 3
    y[i] = 1.5
    return y * y


def _last_column_by_a_tensor(x, i):
    y = x * 3
    y[:, i] = x[:, 0]
    return y * y


def _after_an_ellipsis_and_none(x, i):
    y = x * 3
    y[None, ..., i] = 2.0
    return y * y


def _both_dimensions_by_tensors(x, i):
    y = x * 3
    y[i, i] = 2.0
    return y * y


def _set_item_called_by_name(x, i):
    y = x * 3
    y.__setitem__(i, x[0])
    return y * y


@pytest.mark.parametrize("fn", [_last_row_by_a_tensor, _last_column_by_a_tensor, _after_an_ellipsis_and_none,
                                _both_dimensions_by_tensors, _set_item_called_by_name],
                         ids=lambda fn: fn.__name__.strip("_"))
@pytest.mark.parametrize("index", [-1, -2, 1])
def test_a_zero_dimensional_tensor_index_counts_from_the_end(fn: Callable[..., Any], index: int) -> None:
    fast = sot.symbolic_translate(fn)
    for rows in (3, 4, 6):  # (the last two: a dynamic first dimension)
        results = []
        for function in (fn, fast):
            leaf = paddle.to_tensor(_data(rows, 4), stop_gradient=False)
            result = function(leaf, paddle.to_tensor(index))
            result.sum().backward()
            results.append((result, leaf.grad))
        assert_same(results[1][0], results[0][0])
        _assert_gradients_same([results[1][1]], [results[0][1]])
    assert counts()[:2] == (0, 0)


def test_a_zero_dimensional_tensor_index_into_an_input_changes_its_last_row():
    def fn(x, i, v):
        x[i] = v
        return x

    check(lambda x, i, v: fn(x, i, v), lambda: (_tensor(3, 2), paddle.to_tensor(-1), _tensor(2, seed=1)))
    assert counts()[:2] == (0, 0)


# Paddle's static setitem with an advanced index (3.3.1): a repeated index gives every value item written
# there the gradient (eager: the first only), a value broadcast into a boolean mask gets a gradient where eager
# gives zero, and a value of fewer dimensions after a leading slice is broadcast along the wrong dimension.
def _repeated_rows(x, v):
    y = x * 1
    y[paddle.to_tensor([0, 0, 1])] = v
    return y


def _repeated_rows_incremented(x, v):
    y = x * v.sum()
    y[paddle.to_tensor([0, 0, 1])] += 1.0
    return y


def _repeated_pairs_of_a_scalar(x, v):
    y = x * 1
    y[paddle.to_tensor([0, 0, 1]), paddle.to_tensor([1, 1, 2])] = v.sum()
    return y


def _a_list_index_repeated(x, v):
    y = x * 1
    y[[2, 2, 0]] = v
    return y


def _one_value_into_a_mask(x, v):
    y = x * 1
    y[x > 0] = v[:1, 0]
    return y


def _a_row_into_masked_columns(x, v):
    y = x * 1
    y[:, paddle.to_tensor([True, False, True, True])] = v[0, :3].detach()
    return y


@pytest.mark.parametrize("fn", [_repeated_rows, _repeated_rows_incremented, _repeated_pairs_of_a_scalar,
                                _a_list_index_repeated, _one_value_into_a_mask, _a_row_into_masked_columns],
                         ids=lambda fn: fn.__name__.strip("_"))
def test_an_advanced_index_assignment_paddle_gets_wrong_runs_natively(fn: Callable[..., Any]) -> None:
    weights = paddle.arange(12, dtype="float32").reshape([3, 4]) + 1  # (each item its own gradient)
    fast = sot.symbolic_translate(fn)
    for call in range(2):
        results = []
        for function in (fn, fast):
            x = paddle.to_tensor(_data(3, 4, seed=call), stop_gradient=False)
            v = paddle.to_tensor(_data(3, 4, seed=call + 5), stop_gradient=False)
            result = function(x, v)
            (result * weights).sum().backward()
            results.append((result, x.grad, v.grad))
        assert_same(results[1][0], results[0][0])
        _assert_gradients_same(list(results[1][1:]), list(results[0][1:]))
    assert counts()[0] >= 1


_ROW = np.array([1.0, 2.0, 3.0], dtype="float32")


def _an_array_into_masked_columns(x):
    y = x * 1
    y[:, paddle.to_tensor([True, False, True, True])] = _ROW
    return y


def _a_list_into_a_row(x):
    y = x * 1
    y[0] = [1.0, 2.0, 3.0, 4.0]  # (eager raises: a list is no value it assigns)
    return y


@pytest.mark.parametrize("fn", [_an_array_into_masked_columns, _a_list_into_a_row],
                         ids=lambda fn: fn.__name__.strip("_"))
def test_python_values_paddle_assigns_unlike_eager_run_natively(fn: Callable[..., Any]) -> None:
    fast = sot.symbolic_translate(fn)
    for call in range(2):
        outcomes = []
        for function in (fn, fast):
            try:
                outcomes.append(function(_tensor(3, 4, seed=call)))
            except ValueError as error:
                outcomes.append(type(error))
        if isinstance(outcomes[0], paddle.Tensor):
            assert_same(outcomes[1], outcomes[0])
        else:
            assert outcomes[1] is outcomes[0]
    assert counts()[0] >= 1


def test_a_masked_value_assigned_into_its_mask_stays_in_the_graph():
    def fn(x, w):
        out = x * 1
        mask = x[:, 0] > 0
        out[mask] = paddle.masked_select(x, mask.unsqueeze(1).expand_as(x)).reshape([-1, 4]) * w
        return out

    check_gradients(fn, (5, 4), (4,))
    assert counts()[:2] == (0, 0)


# -- recorded in the graph -----------------------------------------------------------------------------------
def test_inplace_methods_on_a_local_tensor_are_recorded():
    def fn(x):
        y = x * 1
        y.add_(paddle.ones_like(y))
        y.scale_(2.0)
        y.clip_(-1.0, 1.0)
        return y

    check(fn, lambda: (_tensor(3, 4),))
    assert counts() == (0, 0, 1)


def test_inplace_method_returns_the_tensor_itself():
    def fn(x):
        y = x * 1
        z = y.add_(x)
        return z is y, z, y

    check(fn, lambda: (_tensor(3, 4),))
    assert counts() == (0, 0, 1)


def test_every_alias_sees_the_change():
    """The tensor is held by a list, a dict and another local: all of them read the new value."""

    def fn(x):
        y = x + 1
        box = [y]
        table = {"y": y}
        alias = y
        y.multiply_(x)
        return box[0] + 0, table["y"] * 1, alias - 0, box

    check(fn, lambda: (_tensor(3, 4),))
    assert counts() == (0, 0, 1)


def test_inplace_on_an_argument_changes_the_callers_tensor():
    def fn(x, y):
        x.add_(y)
        y.multiply_(paddle.full_like(y, 2.0))
        return x + y

    check(fn, lambda: (_tensor(3, 4), _tensor(3, 4, seed=1)))
    assert counts() == (0, 0, 1)


def test_an_argument_changed_in_place_and_returned_is_the_callers_object():
    def fn(x):
        x.scale_(3.0)
        return x

    fast = sot.symbolic_translate(fn)
    x = _tensor(3, 4)
    expected = _data(3, 4) * 3.0
    assert fast(x) is x
    np.testing.assert_allclose(x.numpy(), expected, rtol=1e-6)
    assert counts() == (0, 0, 1)


def test_inplace_on_a_tensor_in_an_input_list_and_in_an_attribute():
    class Box:
        def __init__(self, t):
            self.t = t

    def fn(items, box):
        items[0].add_(box.t)
        box.t.sub_(items[1])
        return items[0] * 2

    check(fn, lambda: ([_tensor(2, 3), _tensor(2, 3, seed=1)], Box(_tensor(2, 3, seed=2))))
    assert counts() == (0, 0, 1)


def test_a_tensor_reached_by_two_paths_is_one_tensor():
    """``x`` and ``items[0]`` are the same tensor: a change through one is read through the other."""

    def fn(x, items):
        x.add_(paddle.ones_like(x))
        return items[0] * 1

    def make():
        x = _tensor(2, 3)
        return x, [x]

    check(fn, make)
    assert counts() == (0, 0, 1)


def test_the_same_tensor_passed_twice_is_translated_apart_from_two_tensors():
    """A translation that changes one of two distinct tensors must not serve a call passing one tensor twice
    (nor a view of the other): the second would read a stale value."""

    def fn(x, y):
        x.add_(paddle.ones_like(x))
        return y * 1

    fast = sot.symbolic_translate(fn)
    for make in (lambda: (_tensor(2, 3), _tensor(2, 3, seed=1)),
                 lambda: (lambda t: (t, t))(_tensor(2, 3)),
                 lambda: (lambda t: (t, t.reshape([2, 3])))(_tensor(2, 3))):
        eager_args, fast_args = make(), make()
        assert_same(fast(*fast_args), fn(*eager_args))
        assert_same(list(fast_args), list(eager_args))
    assert sot.stats().fallbacks == 0


def test_setitem_is_recorded():
    def fn(x):
        y = x.clone()
        y[0] = 1.0
        y[:, 1] = y[:, 2] * 2
        y[y > 0.5] = 0.0
        y[1:] = y[1:] + 1  # (3.12+: STORE_SLICE)
        return y

    check(fn, lambda: (_tensor(3, 4),))
    assert counts() == (0, 0, 1)


def test_setitem_on_an_argument():
    def fn(x, v):
        x[1:, 0] = v
        return x.sum()

    check(fn, lambda: (_tensor(3, 4), _tensor(2)))
    assert counts() == (0, 0, 1)


def test_assign_with_output_zero_and_fill():
    def fn(x, out):
        paddle.assign(x * 2, output=out)
        y = x + 1
        y.zero_()
        z = x + 1
        z.fill_(3.0)
        return out + y + z

    check(fn, lambda: (_tensor(3, 4), paddle.zeros([3, 4])))
    assert counts() == (0, 0, 1)


def _fill_and_zero_what_requires_grad(x):
    y = x * 2
    y.fill_(0.5)
    z = x * 3
    z.zero_()
    return y * x + z


def test_fill_and_zero_of_tensors_requiring_grad_stay_in_the_graph():
    """The filled tensor still requires grad, with a zero gradient to what it was computed from (eager's
    node for the in-place fill): one graph, the gradients eager's."""
    check_gradients(_fill_and_zero_what_requires_grad, (2, 3))
    assert counts() == (0, 0, 1)


def test_inplace_functional_api():
    def fn(x):
        y = x - 0.5
        F.relu_(y)
        paddle.tanh_(y)
        return y

    check(fn, lambda: (_tensor(3, 4),))
    assert counts() == (0, 0, 1)


def test_inplace_under_no_grad_on_tensors_without_gradients():
    def fn(x):
        with paddle.no_grad():
            x.add_(paddle.ones_like(x))
        return x * 2

    check(fn, lambda: (_tensor(3, 4),))
    assert counts() == (0, 0, 1)


# -- gradients ------------------------------------------------------------------------------------------------
def test_gradient_flows_through_an_inplace_change_of_an_argument():
    def fn(x, y):
        x.multiply_(y)
        x.add_(y)
        return x * 3

    check_gradients(fn, (3, 4), (3, 4))
    assert counts() == (0, 0, 1)


def test_gradient_through_setitem_of_an_argument():
    def fn(x, y):
        x[0] = y[1] * 2
        return x.sum(axis=0)

    check_gradients(fn, (3, 4), (3, 4))
    assert counts() == (0, 0, 1)


def test_backward_refuses_when_an_op_read_the_argument_before_its_change():
    """``x * x`` saves ``x`` for its gradient; changing ``x`` in place afterwards makes eager's backward refuse,
    and the translated one must refuse too (not compute with the new data), with eager's RuntimeError: the
    frame runs natively (the change of a tensor an op of the graph saved, see fuzz seed 2428)."""

    def fn(x, y):
        z = x * x
        x.add_(y)
        return z + x

    fast = sot.symbolic_translate(fn)
    for function in (fn, fast, fast):
        leaf = paddle.to_tensor(_data(3), stop_gradient=False)
        x, y = leaf * 2, paddle.to_tensor(_data(3, seed=1))
        result = function(x, y)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            result.sum().backward()
    assert counts() == (0, 1, 1)


def test_gradient_when_the_changed_argument_is_read_only_by_the_change():
    def fn(x, y):
        z = x + y  # (add does not save its inputs)
        x.multiply_(y)
        return z * x

    check_gradients(fn, (3, 4), (3, 4))
    assert counts() == (0, 0, 1)


def test_an_argument_without_gradient_gains_one_from_the_change():
    def fn(x, w):
        x.add_(w)
        return x * 2

    def run(function):
        x = paddle.to_tensor(_data(3))
        w = paddle.to_tensor(_data(3, seed=1), stop_gradient=False)
        result = function(x, w)
        (result.sum() + x.sum()).backward()
        return result, x, w.grad

    expected = run(fn)
    fast = sot.symbolic_translate(fn)
    for _ in range(2):
        actual = run(fast)
        assert_same(list(actual[:2]), list(expected[:2]))
        _assert_gradients_same([actual[2]], [expected[2]])
        assert actual[1].is_leaf is False
    assert counts() == (0, 0, 1)


# -- what runs natively ---------------------------------------------------------------------------------------
def test_inplace_on_a_leaf_requiring_grad_raises_the_eager_error():
    def fn(x):
        y = x * 2
        x.add_(y)
        return x

    fast = sot.symbolic_translate(fn)
    after = []
    for function in (fn, fast, fast):
        x = paddle.to_tensor(_data(3), stop_gradient=False)
        with pytest.raises(ValueError, match="Leaf"):
            function(x)
        after.append(x.numpy())  # (eager changes the data before its autograd check raises)
    np.testing.assert_array_equal(after[1], after[0])
    np.testing.assert_array_equal(after[2], after[0])
    assert sot.stats().fallbacks == 0 and sot.stats().graph_breaks == 1


def test_inplace_on_a_parameter_under_no_grad_runs_natively():
    """A leaf requiring grad changed under no_grad (a parameter update): its later uses must reach its
    gradient, so the op runs natively at a graph break."""

    def fn(p, x):
        with paddle.no_grad():
            p.scale_(0.5)
        return (p * x).sum()

    check_parameter_change(fn)
    assert sot.stats().fallbacks == 0


def check_parameter_change(fn: Callable[..., Any]) -> None:
    """``fn(p, x)`` changes ``p``, a leaf requiring grad, and returns a loss: the loss, ``p`` and its gradient
    after ``backward()`` equal eager's, twice."""

    def run(function):
        p = paddle.to_tensor(_data(3), stop_gradient=False)
        loss = function(p, paddle.to_tensor(_data(3, seed=1)))
        loss.backward()
        return loss, p, p.grad

    expected = run(fn)
    fast = sot.symbolic_translate(fn)
    for _ in range(2):
        actual = run(fast)
        assert_same(list(actual[:2]), list(expected[:2]))
        _assert_gradients_same([actual[2]], [expected[2]])


def test_inplace_that_changes_the_shape_breaks_the_graph():
    def fn(x):
        y = x * 1
        y.add_(paddle.ones([2, 3, 4]))  # eager raises: the broadcast result does not fit y
        return y

    fast = sot.symbolic_translate(fn)
    for function in (fn, fast):
        with pytest.raises(ValueError):
            function(_tensor(3, 4))
    assert sot.stats().fallbacks == 0


def test_inplace_on_a_view_of_an_argument_runs_eagerly():
    """``x[0]`` is a view of ``x`` in eager mode: changing it changes the caller's ``x``."""

    def fn(x):
        row = x[0]
        row.add_(paddle.ones_like(row))
        return x * 1

    check(fn, lambda: (_tensor(3, 4),))
    assert sot.stats().fallbacks == 1 and sot.stats().graph_breaks == 0


def test_setitem_on_a_reshaped_view_changes_its_base_in_the_graph():
    """(test_inplace_reshaped_views.py has more)"""
    def fn(x):
        y = x.reshape([4, 3])
        y[0] = 5.0
        return x + 0

    check(fn, lambda: (_tensor(3, 4),))
    assert counts() == (0, 0, 1)


def test_setitem_on_a_sliced_view_runs_eagerly():
    def fn(x):
        y = x[1:]
        y[0] = 5.0
        return x + 0

    check(fn, lambda: (_tensor(3, 4),))
    assert sot.stats().fallbacks == 1


def test_a_view_used_after_its_base_changed_runs_eagerly():
    def fn(x):
        y = x + 1
        row = y[0]
        y.add_(paddle.ones_like(y))
        return row * 2

    check(fn, lambda: (_tensor(3, 4),))
    assert sot.stats().fallbacks == 1


def test_a_view_unused_after_its_base_changed_stays_in_the_graph():
    def fn(x):
        y = x + 1
        doubled = y[0] * 2  # the view ``y[0]`` is dead before the change
        y.add_(paddle.ones_like(y))
        return doubled, y

    check(fn, lambda: (_tensor(3, 4),))
    assert counts() == (0, 0, 1)


def test_a_layer_handed_an_argument_changed_in_place_stays_in_the_graph():
    """The layer reads the changed argument as its input (the new value), not from outside the program."""
    layer = paddle.nn.Linear(4, 2)

    def fn(x):
        x.scale_(2.0)
        return layer(x)

    check(fn, lambda: (_tensor(3, 4),))
    assert counts() == (0, 0, 1)


def test_a_layer_called_after_its_own_state_changed_in_place_runs_its_forward_simulated():
    """A built-in layer's statement reads its parameters and buffers inside the program, where one changed in
    place before still holds its old value (written back after the program): its forward is simulated instead,
    reading the changed tensor's variable."""
    norm = paddle.nn.BatchNorm1D(4)
    norm.eval()
    other = paddle.nn.BatchNorm1D(4)

    def fn(x):
        other._mean.add_(paddle.ones([4]))  # another layer's statistics: no reason to break
        y = norm(x) * 2
        norm._mean.add_(paddle.ones([4]))
        return norm(y)

    def make():
        return (_tensor(3, 4),)

    expected_means = []
    for _ in range(2):
        expected = fn(*make())
        expected_means.append(norm._mean.numpy().copy())
    norm._mean.set_value(paddle.zeros([4]))
    other._mean.set_value(paddle.zeros([4]))
    fast = sot.symbolic_translate(fn)
    for call in range(2):
        actual = fast(*make())
        np.testing.assert_allclose(norm._mean.numpy(), expected_means[call])
    assert_same(actual, expected)
    assert sot.stats().fallbacks == 0 and sot.stats().graph_breaks == 0


def test_inplace_random_fill_runs_natively_with_the_same_draws():
    """``normal_``/``uniform_`` have no out-of-place form taking the same arguments (``paddle.normal(mean, std,
    shape)`` would compute something else): the graph breaks and eager's op draws the same numbers."""

    def fn(x):
        y = x * 1
        y.uniform_(-1.0, 1.0)
        z = x + 1
        z.normal_()
        return y, z

    fast = sot.symbolic_translate(fn)
    for _ in range(2):
        paddle.seed(7)
        expected = fn(_tensor(3, 4))
        paddle.seed(7)
        assert_same(fast(_tensor(3, 4)), expected)
    assert sot.stats().fallbacks == 0 and sot.stats().graph_breaks == 2


def test_same_signature_rejects_a_counterpart_with_other_parameters():
    from sot.opcode_translator.executor.variables.inplace import same_signature

    assert same_signature(paddle.Tensor.add_, paddle.Tensor.add)
    assert same_signature(F.relu_, F.relu)
    assert not same_signature(paddle.tensor.random.normal_, paddle.tensor.random.normal)
    assert not same_signature(paddle.tensor.random.uniform_, paddle.tensor.random.uniform)


def test_an_argument_sharing_memory_with_the_changed_one_runs_eagerly():
    """``y`` is a view of ``x`` (passed from the first call on): changing ``x`` changes ``y`` eagerly."""

    def fn(x, y):
        x.add_(paddle.ones_like(x))
        return y * 1

    def make():
        x = _tensor(2, 3)
        return x, x[0]

    check(fn, make)
    assert sot.stats().fallbacks == 1


def test_a_view_read_after_the_change_from_a_global_runs_eagerly():
    def fn(x):
        x.add_(paddle.ones_like(x))
        return VIEWS[0] * 1

    fast = sot.symbolic_translate(fn)
    for function in (fn, fast, fast):
        x = _tensor(2, 3)
        VIEWS[:] = [x[1]]
        np.testing.assert_allclose(function(x).numpy(), _data(2, 3)[1] + 1, rtol=1e-6)
    assert sot.stats().fallbacks == 1


VIEWS: list = []


class _RunningMean(paddle.nn.Layer):
    """A buffer updated in place in ``forward`` (batch-norm-like statistics), after a layer call."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = paddle.nn.Linear(4, 4)
        self.register_buffer("running", paddle.zeros([4]))

    def forward(self, x):
        h = self.fc(x)
        self.running.scale_(0.9).add_(h.mean(0).detach() * 0.1)
        return h - self.running


def check_buffer_update(make_layer: Callable[[], paddle.nn.Layer], buffer: str) -> None:
    """Two equal layers updating ``buffer`` in forward, eager and translated, over three steps: outputs, the
    buffer and ``fc``'s gradient equal; one translation, no break, no fallback."""
    paddle.seed(3)
    eager = make_layer()
    translated = make_layer()
    translated.set_state_dict(eager.state_dict())
    fast = sot.symbolic_translate(translated)
    for step in range(3):
        x = _tensor(3, 4, seed=step)
        expected, actual = eager(x), fast(x)
        assert_same(actual, expected)
        assert_same(getattr(translated, buffer), getattr(eager, buffer))
        expected.sum().backward()
        actual.sum().backward()
        _assert_gradients_same([translated.fc.weight.grad], [eager.fc.weight.grad], flags=False)
    assert counts() == (0, 0, 1)


def test_a_layer_buffer_updated_in_place_in_forward():
    check_buffer_update(_RunningMean, "running")


def test_out_argument_and_positional_output():
    def fn(x, out, other):
        paddle.tanh(x, out=out)
        result = paddle.assign(x * 3, other)  # (``output`` passed by position)
        return result is other, out * 1, other + 0

    check(fn, lambda: (_tensor(3, 4), paddle.zeros([3, 4]), paddle.ones([3, 4])))
    assert counts() == (0, 0, 1)


def test_a_view_live_across_a_graph_break_then_changed_in_place():
    """Fixed (kept as a regression test); was: ``row = x[0]`` is computed by the graph before the break, so the
    resume function received the program's output, a separate tensor; eagerly it is a view of ``x``, and
    ``row.add_`` changes ``x``. Views among a program's results are now made again from their base natively."""

    def fn(x):
        row = x[0]
        print("break")
        row.add_(paddle.ones_like(row))
        return x * 1

    fast = sot.symbolic_translate(fn)
    for function in (fn, fast):
        x = paddle.zeros([2, 3])
        function(x)
        np.testing.assert_array_equal(x.numpy()[0], [1.0, 1.0, 1.0])


def test_a_returned_view_changed_in_place_by_the_caller():
    """Fixed (kept as a regression test); was: eagerly ``fn(x)`` returns a view of ``x``, so the caller's
    ``row.add_`` changes ``x``; the compiled program returned a separate tensor."""

    def fn(x):
        return x[0]

    fast = sot.symbolic_translate(fn)
    for function in (fn, fast):
        x = paddle.zeros([2, 3])
        function(x).add_(paddle.ones([3]))
        np.testing.assert_array_equal(x.numpy()[0], [1.0, 1.0, 1.0])


def test_views_among_a_compiled_programs_results_stay_views():
    """``x[0]`` (of the input) and ``y[1]`` (of another result) are made again natively after the program, so a
    caller changing them in place changes their bases, as eagerly; gradients flow through them as eagerly."""

    def fn(x):
        y = x * 2
        return x[0], y, y[1], y.reshape([6]) * 1

    fast = sot.symbolic_translate(fn)
    for _ in range(2):
        outcomes = []
        for function in (fn, fast):
            leaf = paddle.to_tensor(_data(2, 3), stop_gradient=False)
            x = leaf * 1
            row, y, y_row, flat = function(x)
            row.add_(paddle.ones([3]))
            y_row.scale_(3.0)
            (x.sum() + y.sum() + flat.sum() + (row * y_row).sum()).backward()
            outcomes.append((x.numpy(), y.numpy(), flat.numpy(), leaf.grad.numpy()))
        for actual, expected in zip(outcomes[1], outcomes[0]):
            np.testing.assert_allclose(actual, expected, rtol=1e-6)
    assert counts() == (0, 0, 1)


def test_a_returned_view_of_an_argument_changed_in_place():
    """Fixed (kept as a regression test); was: ``x`` is changed in place, then ``x[0]`` returned: eagerly a view
    of ``x``; the program returned a separate tensor. A view of a written-back tensor is now made natively from
    the caller's tensor after the write-back (before it, it would hang from the old gradient node)."""

    def fn(x):
        x.add_(paddle.ones_like(x))
        return x[0]

    fast = sot.symbolic_translate(fn)
    for function in (fn, fast, fast):
        x = paddle.zeros([2, 3])
        function(x).zero_()
        np.testing.assert_array_equal(x.numpy(), [[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    assert counts() == (0, 0, 1)


def _views_of_a_changed_argument(x):
    x.scale_(2.0)
    x.add_(paddle.ones_like(x))
    return {"row": x[0], "more": [x.reshape([6]), (x.T, x[:, 1:])]}, x * 1


def test_views_of_a_changed_argument_are_views_with_eager_gradients():
    """Slices, ``reshape`` and ``T`` of an argument changed in place, nested in containers: each is a view of the
    caller's tensor (changing it changes the argument), and gradients through the views and the argument equal
    eager's, on a non-leaf argument and on one that needs no gradient."""
    fast = sot.symbolic_translate(_views_of_a_changed_argument)

    def run(function: Callable[..., Any], needs_grad: bool) -> tuple[Any, ...]:
        leaf = paddle.to_tensor(_data(2, 3), stop_gradient=not needs_grad)
        x = leaf * 1
        views, copy = function(x)
        aliased = [views["row"], *views["more"][:1], *views["more"][1]]
        shared = [view._is_shared_buffer_with(x) for view in aliased]
        views["row"].scale_(3.0)  # (changes x, and the other views, eagerly)
        values = [x.numpy(), copy.numpy(), *(view.numpy() for view in aliased)]
        grads = None
        if needs_grad:
            loss = (x * x).sum() + sum((view * view).sum() for view in aliased[1:]) + copy.sum()
            loss.backward()
            grads = leaf.grad.numpy()
        return shared, values, [view.stop_gradient for view in aliased], grads

    for needs_grad in (True, False, True):
        expected, actual = run(_views_of_a_changed_argument, needs_grad), run(fast, needs_grad)
        assert actual[0] == expected[0] == [True] * 4
        for a, e in zip(actual[1], expected[1]):
            np.testing.assert_allclose(a, e, rtol=1e-6)
        assert actual[2] == expected[2]
        if needs_grad:
            np.testing.assert_allclose(actual[3], expected[3], rtol=1e-6)
    assert counts() == (0, 0, 2)  # (one translation per gradient requirement of the argument)


class _Holder:
    pass


def test_views_of_a_changed_argument_across_a_break():
    """A view of a changed argument stored on an object and one live across a graph break are views of the
    caller's tensor, in the compiled program's code and in the eager replay of a small graph alike."""

    def fn(x, holder):
        x.add_(paddle.ones_like(x))
        row = x[0]
        holder.row = x[1]
        print("break")
        row.zero_()
        return x * 1

    for min_graph_size in (0, 10):
        sot.reset()
        with sot.config.patch(min_graph_size=min_graph_size):
            fast = sot.symbolic_translate(fn)
            for function in (fn, fast, fast):
                x, holder = paddle.zeros([2, 3]), _Holder()
                result = function(x, holder)
                holder.row.fill_(5.0)
                np.testing.assert_array_equal(x.numpy(), [[0.0, 0.0, 0.0], [5.0, 5.0, 5.0]])
                np.testing.assert_array_equal(result.numpy(), [[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
        # (the resume function runs eagerly: ``row``, changed in place, shares memory with ``x``)
        assert counts()[:2] == (1, 1)


# -- Tensor.set_value: a copy of another tensor's data, outside autograd --------------------------------------
def test_set_value_of_a_tensor_requiring_grad_into_a_tensor_without():
    """The changed tensor keeps ``stop_gradient=True`` and gives the value no gradient path (eager copies data)."""

    def fn(x, buffer):
        y = x * 2
        buffer.set_value(y + 1)
        return buffer * y, buffer.stop_gradient

    def make():
        x = paddle.to_tensor(_data(3), stop_gradient=False)
        return x, _tensor(3, seed=1)

    fast = check(fn, make)
    x, buffer = make()
    fast(x, buffer)[0].sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * (x.numpy() * 2 + 1), rtol=1e-6)  # d(buffer * 2x)/dx
    assert counts() == (0, 0, 1)


class _SetValueEMA(paddle.nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.fc = paddle.nn.Linear(4, 4)
        self.register_buffer("ema", paddle.zeros([4]))

    def forward(self, x):
        y = self.fc(x)
        with paddle.no_grad():
            self.ema.set_value(self.ema * 0.9 + y.mean(0) * 0.1)
        return y - self.ema


def test_set_value_of_a_layer_buffer_in_forward_is_recorded():
    check_buffer_update(_SetValueEMA, "ema")


@pytest.mark.parametrize("value", [
    lambda p: np.ones([3], "float32"),          # an array: runs natively
    lambda p: p * 0.5,                           # into a leaf requiring grad (a parameter): runs natively
], ids=["numpy_value", "into_a_parameter"])
def test_set_value_that_is_not_recorded_runs_natively(value):
    def fn(p, x):
        with paddle.no_grad():
            p.set_value(value(p))
        return (p * x).sum()

    check_parameter_change(fn)
    assert sot.stats().fallbacks == 0 and sot.stats().graph_breaks >= 1


def test_set_value_of_another_shape_raises_the_eager_error():
    def fn(x):
        buffer = paddle.zeros([3])
        buffer.set_value(x * 2)
        return buffer

    fast = sot.symbolic_translate(fn)
    for function in (fn, fast):
        with pytest.raises(AssertionError, match="Shape not match"):
            function(_tensor(4))


def test_a_changed_tensor_sharing_memory_with_a_layers_weight_breaks_before_the_layer():
    """``x`` may be the layer's weight under another name (``weight.detach()`` shares its memory): the change
    must reach the layer's call, in the first translation and when a later call passes such a tensor."""
    layer = paddle.nn.Linear(3, 3, bias_attr=False)
    inputs = _tensor(2, 3, seed=1)

    def fn(x):
        with paddle.no_grad():
            x.add_(paddle.ones_like(x))
        return layer(inputs)

    fast = sot.symbolic_translate(fn)
    for arguments in ([_tensor(3, 3)], [layer.weight.detach()], [_tensor(3, 3, seed=2), layer.weight.detach()]):
        for x in arguments:
            before = layer.weight.numpy().copy()
            expected = paddle.matmul(inputs, paddle.to_tensor(before + (1 if x._is_shared_buffer_with(layer.weight)
                                                                        else 0)))
            np.testing.assert_allclose(fast(x).numpy(), expected.numpy(), rtol=1e-6)
    assert sot.stats().fallbacks == 0


def test_a_layer_called_after_an_argument_changed_in_place_misses_when_the_argument_becomes_its_state():
    """After ``x`` changed in place, a built-in layer's program is valid only while ``x`` shares no memory with
    the layer's parameters and buffers (checked at every call against those the guard holds by identity,
    without walking the layer): passing the layer's own buffer, or a view of it, must not hit the entry."""
    from sot.eval_frame_ext import cache_entries

    layer = paddle.nn.Linear(4, 4)
    layer.register_buffer("table", _tensor(4, 4, seed=3))

    def fn(x):
        x.scale_(1.0)  # (an in-place change that keeps the values: eager and sot stay comparable)
        return layer(x)

    fast = sot.symbolic_translate(fn)
    assert_same(fast(_tensor(4, 4)), fn(_tensor(4, 4)))
    (guard, _), = cache_entries(fn.__code__)
    assert "apart_from_parameters_of_Linear(x)" in str(guard.guard)
    assert_same(fast(_tensor(4, 4, seed=1)), fn(_tensor(4, 4, seed=1)))
    assert guard.guard.check(fn.__globals__, fn.__closure__, _tensor(4, 4, seed=2))  # a tensor of its own: a hit
    for own in (layer.table, layer.table[:], layer.table.reshape([4, 4])):
        assert not guard.guard.check(fn.__globals__, fn.__closure__, own)
        assert not guard.guard.reference(fn.__globals__, fn.__closure__, own)
        assert_same(fast(own), fn(own))

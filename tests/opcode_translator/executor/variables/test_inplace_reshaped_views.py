"""An in-place change of a reshaping view (``y = x.reshape([2, 8]); y[:, 1:3] = 0``) changes its base in eager
mode: they share memory and the inplace version counter. The graph makes the change, and the base takes the
view's new value reshaped back: a base without gradient in the graph too (the view stays its view), a base
requiring grad its data only (eager's keeps its gradient node). Values, gradients, the caller's tensors and their
inplace versions equal eager's, without a fallback."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import paddle

import sot


def _x(requires_grad: bool = False) -> paddle.Tensor:
    x = paddle.arange(16, dtype="float32") / 3.0
    x.stop_gradient = not requires_grad
    return x


def _value(requires_grad: bool = False, shape: tuple[int, ...] = (8,)) -> paddle.Tensor:
    v = paddle.full(shape, 7.0)
    v.stop_gradient = not requires_grad
    return v


def _compare(fn: Callable[..., Any], make: Callable[[], list[paddle.Tensor]], calls: int = 2) -> list[Any]:
    """``fn`` eagerly and translated, each on fresh arguments: results, the arguments after the call (values,
    inplace versions, flags) and, when something requires grad, the gradients of a loss over the results and
    the arguments as the call left them, equal. Returns the translated results of the last call."""
    fast = sot.symbolic_translate(fn)
    for _ in range(calls):
        runs = []
        for function in (fn, fast):
            args = make()
            versions = [arg.inplace_version for arg in args]
            out = function(*args)
            outs = list(out) if isinstance(out, tuple) else [out]
            runs.append((args, outs, [arg.inplace_version - v for arg, v in zip(args, versions)]))
        (want_args, want_outs, want_bumps), (args, outs, bumps) = runs
        for got, want in zip([*outs, *args], [*want_outs, *want_args]):
            np.testing.assert_array_equal(got.numpy(), want.numpy())
            assert got.stop_gradient == want.stop_gradient
        assert bumps == want_bumps
        differentiable = [t for t in [*want_outs, *want_args] if not t.stop_gradient]
        if differentiable:
            for tensors in ((outs, args), (want_outs, want_args)):
                loss = sum((t * t).sum() for t in [*tensors[0], *tensors[1]] if not t.stop_gradient)
                loss.backward()
            for got, want in zip(args, want_args):
                assert (got.grad is None) == (want.grad is None)
                if want.grad is not None:
                    np.testing.assert_allclose(got.grad.numpy(), want.grad.numpy(), rtol=1e-6)
    return outs


def _no_fallback() -> None:
    stats = sot.stats()
    assert (stats.graph_breaks, stats.fallbacks) == (0, 0), stats


def _slice_zeroed(x: paddle.Tensor) -> paddle.Tensor:
    y = x.reshape([2, 8])
    y[:, 1:3] = 0
    return y * 2


def _row_set(x: paddle.Tensor, v: paddle.Tensor) -> paddle.Tensor:
    y = x.reshape([2, 8])
    y[0] = v
    return y * 2


def _tensor_into_a_slice(x: paddle.Tensor, v: paddle.Tensor) -> paddle.Tensor:
    y = x.reshape([2, 8])
    y[:, 1:3] = v
    return y * 2


def test_a_constant_into_a_slice_of_a_reshaped_argument_changes_the_argument() -> None:
    with sot.config.patch(min_graph_size=0):
        _compare(_slice_zeroed, lambda: [_x()])
    _no_fallback()
    assert sot.stats().translate_count == 1


def test_a_tensor_into_a_row_and_into_a_slice_of_a_reshaped_argument() -> None:
    with sot.config.patch(min_graph_size=0):
        _compare(_row_set, lambda: [_x(), _value()])
        _compare(_tensor_into_a_slice, lambda: [_x(), _value(shape=(2, 2))])
    _no_fallback()


def test_gradients_through_a_reshaped_argument_requiring_grad_changed_through_the_view() -> None:
    """Eager's base keeps its gradient node (its data changes): the loss over it after the call sends the
    gradient of its new data to that node, the view's gradient goes to the value and the kept items."""
    with sot.config.patch(min_graph_size=0):
        _compare(_slice_zeroed, lambda: [_x(True)])
        _compare(_row_set, lambda: [_x(True), _value(True)])
        _compare(_tensor_into_a_slice, lambda: [_x(True), _value(True, (2, 2))])
    _no_fallback()


def test_a_non_leaf_argument_changed_through_a_reshaped_view() -> None:
    leaf = _x(True)

    def make() -> list[paddle.Tensor]:
        return [leaf * 2, _value(True)]

    with sot.config.patch(min_graph_size=0):
        _compare(_row_set, make)
    _no_fallback()


def test_two_changes_through_one_view_and_a_chain_of_reshaping_views() -> None:
    def twice(x: paddle.Tensor, v: paddle.Tensor) -> tuple[paddle.Tensor, paddle.Tensor]:
        y = x.reshape([4, 4]).unsqueeze(0)
        y[0, 1] = v
        y[0, :, 3] = -1.0
        return y.sum(), x * 3

    with sot.config.patch(min_graph_size=0):
        _compare(twice, lambda: [_x(), _value(shape=(4,))])
    _no_fallback()


def test_a_returned_view_still_aliases_its_base_and_shares_its_version() -> None:
    def view_changed(x: paddle.Tensor) -> paddle.Tensor:
        y = x.reshape([2, 8])
        y[1, 2:4] = 5.0
        return y

    x, eager_x = _x(), _x()
    with sot.config.patch(min_graph_size=0):
        y = sot.symbolic_translate(view_changed)(x)
    eager_y = view_changed(eager_x)
    assert y._is_shared_buffer_with(x)
    assert y.inplace_version == eager_y.inplace_version == x.inplace_version
    y.add_(paddle.ones([2, 8]))
    eager_y.add_(paddle.ones([2, 8]))
    np.testing.assert_array_equal(x.numpy(), eager_x.numpy())
    _no_fallback()


def test_a_base_made_in_the_frame_reads_the_change() -> None:
    def made_here(v: paddle.Tensor) -> paddle.Tensor:
        x = paddle.zeros([16])
        y = x.flatten().reshape([2, 8])
        y[0] = v
        return x + 1

    with sot.config.patch(min_graph_size=0):
        _compare(made_here, lambda: [_value()])
    _no_fallback()


def test_what_the_graph_cannot_make_still_equals_eager() -> None:
    """A view of a sliced view, a base requiring grad read after the change (its new data with its old
    gradient node), an older view of the base read after the change: eager's answers all the same."""
    def sliced(x: paddle.Tensor) -> paddle.Tensor:
        y = x[2:].reshape([2, 7])
        y[0] = 1.0
        return x * 3

    def base_read_after(x: paddle.Tensor) -> paddle.Tensor:
        y = x.reshape([2, 8])
        y[0] = 1.0
        return x * x

    def older_view_read_after(x: paddle.Tensor) -> paddle.Tensor:
        z = x.reshape([4, 4])
        y = x.reshape([2, 8])
        y[0] = 1.0
        return z * 2

    with sot.config.patch(min_graph_size=0):
        _compare(sliced, lambda: [_x()])
        _compare(base_read_after, lambda: [_x(True)])
        _compare(older_view_read_after, lambda: [_x()])

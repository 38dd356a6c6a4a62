"""A backward that reads a tensor changed in place since the forward is refused as eager autograd refuses it:
the same exception type (RuntimeError, not Paddle's OSError for errors of Python hooks), message and location,
with and without graph breaks; and tensors changed in place inside a translated frame keep eager's inplace
versions (the numbers such a refusal reports)."""
from __future__ import annotations

import contextlib
import io
from typing import Any, Callable

import numpy as np
import paddle
import pytest

import sot
from sot.symbolic import version_check


def scaled_product(w, y):
    return (w * y) * 2.0  # multiply's backward reads y


def scaled_product_across_a_break(w, y):
    z = (w * y) * 2.0
    print("p")
    return z + 1.0


def exp_of_a_sum(w, y):
    return paddle.exp(w + y)  # exp's backward reads its output


def exp_of_a_sum_across_a_break(w, y):
    print("p")
    return paddle.exp(w + y)


def _inputs() -> tuple[paddle.Tensor, paddle.Tensor]:
    w = paddle.to_tensor([1.0, -2.0, 0.5], stop_gradient=False)
    return w, paddle.to_tensor([0.5, 1.0, -1.5])


def _backward(fn: Callable[..., Any], change: Callable[[paddle.Tensor, paddle.Tensor], None] | None) -> Any:
    """``fn(w, y)``, then ``change(y, out)`` (an in-place change), then ``backward()``: the gradient of ``w``, or
    the type and message of what ``backward()`` raised."""
    w, y = _inputs()
    with contextlib.redirect_stdout(io.StringIO()):
        out = fn(w, y)
    if change is not None:
        change(y, out)
    try:
        out.sum().backward()
    except Exception as exc:  # noqa: BLE001
        return type(exc).__name__, str(exc)
    return np.round(w.grad.numpy(), 5).tolist()


def _change_the_input(y: paddle.Tensor, out: paddle.Tensor) -> None:
    y.add_(paddle.ones([3]))


def _change_the_output_twice(y: paddle.Tensor, out: paddle.Tensor) -> None:
    out.add_(paddle.ones([3]))
    out.scale_(2.0)


@pytest.mark.parametrize("fn, change", [(scaled_product, _change_the_input),
                                        (scaled_product_across_a_break, _change_the_input),
                                        (exp_of_a_sum, _change_the_output_twice),
                                        (exp_of_a_sum_across_a_break, _change_the_output_twice)])
def test_a_backward_reading_a_tensor_changed_in_place_is_refused_as_eager(fn, change) -> None:
    """A saved input or output changed in place by the caller, with and without a break: eager's RuntimeError,
    message (versions included) and location; then an unchanged call computes eager's gradient (the refused
    pass left nothing behind)."""
    expected = _backward(fn, change)
    assert expected[0] == "RuntimeError" and "modified by an inplace operation" in expected[1]
    with sot.config.patch(min_graph_size=0):
        translated = sot.symbolic_translate(fn)
        for call in range(2):
            assert _backward(translated, change) == expected, call
        assert _backward(translated, None) == _backward(fn, None)
    assert sot.stats().fallbacks == 0


@pytest.mark.parametrize("fn", [scaled_product, scaled_product_across_a_break, exp_of_a_sum,
                                exp_of_a_sum_across_a_break])
def test_without_an_in_place_change_the_gradient_is_eagers(fn) -> None:
    expected = _backward(fn, None)
    with sot.config.patch(min_graph_size=0):
        translated = sot.symbolic_translate(fn)
        for call in range(3):
            assert _backward(translated, None) == expected, call


def changed_in_place_in_the_frame(x, y):
    z = x * 2.0
    z.add_(y)
    z.scale_(0.5)
    y.add_(x)
    y[0] = 3.0
    y.add_(x)
    u = z * x  # multiply keeps z as it is after two changes
    return z, u


@pytest.mark.parametrize("min_graph_size", [0, 100])  # compiled, replayed eagerly
def test_tensors_changed_in_place_in_a_frame_keep_eagers_inplace_versions(min_graph_size) -> None:
    """Each eager in-place op raises the tensor's inplace version by one: the caller's tensor written back after
    three changes, and a tensor made in the frame changed twice, have eager's versions; an op that kept the
    changed tensor in the frame does not refuse its backward, and a later change is reported with eager's
    numbers."""
    def run(fn: Callable[..., Any], change_after: bool) -> tuple:
        x = paddle.to_tensor([1.0, 2.0, 3.0], stop_gradient=False)
        y = paddle.to_tensor([0.5, -1.0, 2.0])
        z, u = fn(x, y)
        versions = (z._inplace_version(), y._inplace_version(), x._inplace_version())
        if change_after:
            z.add_(paddle.ones([3]))
        try:
            u.sum().backward()
        except RuntimeError as exc:
            return versions, str(exc)
        return versions, x.grad.numpy().tolist()

    expected = [run(changed_in_place_in_the_frame, change_after) for change_after in (False, True)]
    assert expected[0][0] == (2, 3, 0) and "version is 3 but the expected version is 2" in expected[1][1]
    with sot.config.patch(min_graph_size=min_graph_size):
        translated = sot.symbolic_translate(changed_in_place_in_the_frame)
        for change_after in (False, True, False, True):
            assert run(translated, change_after) == expected[change_after], change_after


def _check_reporting(verdict: Any) -> Callable[[Any], Any]:
    def check(grad: Any) -> Any:
        assert isinstance(grad, paddle.Tensor)
        return verdict

    return check


def _backward_through(hook: Any) -> Any:
    w = paddle.to_tensor([1.0, 2.0], stop_gradient=False)
    out = w * 3.0
    out.register_hook(hook)
    try:
        out.sum().backward()
    except Exception as exc:  # noqa: BLE001
        return type(exc).__name__, str(exc)
    return w.grad.numpy().tolist()


@pytest.mark.skipif(version_check.PermissionDeniedHook is None, reason="the C++ extension is not built")
def test_the_native_hook_raises_paddles_own_error_type() -> None:
    """A check that passes leaves the gradient alone; one that reports a refusal makes ``backward()`` raise
    Paddle's PermissionDenied error (a RuntimeError) with its message and location; a check that fails itself
    is an error of a Python hook (Paddle's OSError). Backward works normally afterwards."""
    hook = version_check.PermissionDeniedHook
    assert _backward_through(hook(_check_reporting(None))) == [3.0, 3.0]
    assert _backward_through(hook(_check_reporting(("Tensor '' was changed", "/x/y.h", 12)))) == \
        ("RuntimeError", "(PermissionDenied) Tensor '' was changed (at /x/y.h:12)\n")
    kind, message = _backward_through(hook(_check_reporting("not a tuple")))
    assert kind == "OSError" and "returns None or (summary, file, line)" in message
    assert _backward_through(hook(_check_reporting(None))) == [3.0, 3.0]


def test_without_the_extension_the_refusal_keeps_eagers_message() -> None:
    """The Python hook (no C++ extension) refuses with the same message, inside Paddle's OSError."""
    refusal = ("Tensor '' was changed", "/x/y.h", 12)
    kind, message = _backward_through(version_check._raising_in_python(_check_reporting(refusal)))
    assert kind == "OSError" and "(PermissionDenied) Tensor '' was changed (at /x/y.h:12)" in message


def change_the_input_then_multiply(w, y):
    y.add_(w.detach())
    y.scale_(2.0)
    return w * y  # multiply keeps y as the frame left it: the caller's tensor, eagerly


def change_the_input_then_add(w, y):
    y.add_(w.detach())
    return w + y  # add keeps nothing


@pytest.mark.parametrize("replayed", [False, True])  # the compiled program, or the eager replay of its ops
@pytest.mark.parametrize("fn", [change_the_input_then_multiply, change_the_input_then_add])
def test_an_input_changed_in_place_in_the_frame_and_kept_by_an_op_is_watched(fn, replayed) -> None:
    """The frame changes ``y`` in place, then an op keeps it: eagerly the caller's ``y`` itself, so changing it
    again after the call makes ``backward()`` refuse. Translated, the op keeps the program's own result (the
    caller's tensor gets a copy of it): the caller's tensor is watched instead, with the version the write-back
    leaves it at. An op that keeps nothing is not watched (eager computes the gradient)."""
    expected = [_backward(fn, change) for change in (None, _change_the_input)]
    assert (expected[1][0] == "RuntimeError") == (fn is change_the_input_then_multiply)
    sot.reset()
    with sot.config.patch(min_graph_size=0):
        translated = sot.symbolic_translate(fn)
        assert _backward(translated, None) == expected[0]
        if replayed:
            from sot.symbolic import compile as compile_module
            [program] = compile_module._compiled.values()
            program._choice = "eager"
        for change in (None, _change_the_input, _change_the_input, None):
            assert _backward(translated, change) == expected[change is not None], change


def _normalized(x: paddle.Tensor, model: paddle.nn.Layer) -> paddle.Tensor:
    return model(x) * 2.0


def _statistics_changed(fn: Callable[..., Any], model: paddle.nn.Layer, grad_input: bool, calls: int,
                        change: bool) -> Any:
    """``calls`` calls of ``fn`` on a batch norm, its running mean then changed in place or not, one backward
    through all; the input's and the scale's gradients, or eager's refusal (type, message)."""
    x = paddle.to_tensor(np.random.default_rng(0).standard_normal([4, 3]).astype("float32"))
    x.stop_gradient = not grad_input
    outs = [fn(x, model) for _ in range(calls)]
    if change:
        with paddle.no_grad():
            model._mean.add_(paddle.ones([3]))
    try:
        paddle.add_n([out.sum() for out in outs]).backward()
    except RuntimeError as exc:
        return type(exc).__name__, str(exc).split(" (at ")[0]
    return [None if t.grad is None else np.round(t.grad.numpy(), 4).tolist() for t in (x, model.weight)]


@pytest.mark.parametrize("grad_input", [False, True], ids=["program backward", "recomputed"])
@pytest.mark.parametrize("training", [False, True], ids=["eval", "train"])
def test_the_statistics_of_a_batch_norm_changed_in_place_are_refused_as_eager(compile_all, training, grad_input):
    """Eager's batch norm keeps its running statistics (the program's backward reads them through the outputs
    ``batch_norm_`` writes into them, not as parameters): changed in place before the backward, eager refuses,
    and so does the compiled call (its backward read the new statistics in eval mode). The forward's own update of
    the statistics (training) bumps no version: two calls before one backward are no refusal."""
    for calls, change in ((1, True), (2, False)):
        paddle.seed(2)
        model = paddle.nn.BatchNorm1D(3)
        model.train() if training else model.eval()
        eager = _statistics_changed(_normalized, model, grad_input, calls, change)
        assert (eager[0] == "RuntimeError") == change, eager
        paddle.seed(2)
        model = paddle.nn.BatchNorm1D(3)
        model.train() if training else model.eval()
        actual = _statistics_changed(sot.symbolic_translate(_normalized), model, grad_input, calls, change)
        assert actual == eager, (calls, change)


# -- what each output's backward reads: only the tensors kept by the nodes its gradient reaches ----------------
def two_outputs_one_keeping_y(w, y):
    return w * y, w - y  # multiply keeps y (and w); subtract keeps no buffer


def an_output_kept_by_an_op_of_another_output(w, y):
    d = w - paddle.tanh(y)
    return d, paddle.maximum(y, d)  # maximum keeps d; d's own backward never reaches maximum


def an_output_kept_by_its_own_op_and_another(w, y):
    e = paddle.exp(w + y)  # exp keeps e for e's own backward
    return e, e * y


def _change_the_first_output(y: paddle.Tensor, outputs: tuple) -> None:
    outputs[0].add_(paddle.ones([3]))


def _backward_of(fn: Callable[..., Any], change: Callable[..., None], taken: int) -> Any:
    """``fn(w, y)`` (two outputs), ``change(y, outputs)`` under no_grad, then the backward of output
    ``taken`` alone: the gradient of ``w``, or the type of what ``backward()`` raised."""
    w, y = _inputs()
    outputs = fn(w, y)
    with paddle.no_grad():
        change(y, outputs)
    try:
        outputs[taken].sum().backward()
    except Exception as exc:  # noqa: BLE001
        return type(exc).__name__
    return np.round(w.grad.numpy(), 5).tolist()


@pytest.mark.parametrize("taken", [0, 1])
@pytest.mark.parametrize("fn, change", [(two_outputs_one_keeping_y, _change_the_input),
                                        (an_output_kept_by_an_op_of_another_output, _change_the_first_output),
                                        (an_output_kept_by_its_own_op_and_another, _change_the_first_output),
                                        (an_output_kept_by_its_own_op_and_another, _change_the_input)])
def test_only_the_backward_of_an_output_reaching_the_op_keeping_a_changed_tensor_is_refused(fn, change,
                                                                                          taken) -> None:
    """Eager refuses the backward of an output only when its gradient reaches a node keeping the changed
    tensor's data: the product's backward, not the difference's (which keeps no buffer); the maximum's, not
    the backward of its operand alone; an exp's own output changed, for both of its readers; the input kept by the
    product only, for the product's (a recomputed backward: the exp's recomputes from a copy). All but the
    third have a refused and a computed side, so neither an over- nor an under-refusal passes."""
    expected = _backward_of(fn, change, taken)
    with sot.config.patch(min_graph_size=0):
        translated = sot.symbolic_translate(fn)
        for call in range(2):
            assert _backward_of(translated, change, taken) == expected, call
    assert sot.stats().fallbacks == 0


def test_the_cases_above_are_refused_and_computed_by_eager() -> None:
    """(The parity test above covers both outcomes: eager refuses one output's backward and computes the
    other's.)"""
    assert _backward_of(two_outputs_one_keeping_y, _change_the_input, 0) == "RuntimeError"
    assert isinstance(_backward_of(two_outputs_one_keeping_y, _change_the_input, 1), list)
    assert _backward_of(an_output_kept_by_an_op_of_another_output, _change_the_first_output, 1) == "RuntimeError"
    assert isinstance(_backward_of(an_output_kept_by_an_op_of_another_output, _change_the_first_output, 0), list)
    assert _backward_of(an_output_kept_by_its_own_op_and_another, _change_the_input, 1) == "RuntimeError"
    assert isinstance(_backward_of(an_output_kept_by_its_own_op_and_another, _change_the_input, 0), list)


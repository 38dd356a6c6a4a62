"""Values and gradients of a frame that changes one of its input tensors in place (``y.subtract_(...)``,
``y[0] = ...``, ``paddle.assign(..., output=y)``...) with a differentiable operand, with or without a graph
break after the change, against eager: the outputs, the input after the call (values, flags, inplace version),
the gradients a ``backward()`` gives, and those of a gradient taken with ``create_graph=True``; and the
`sot.stats()` break counts. The changed input is a constant (a leaf without gradient), a leaf requiring grad or
a trainable parameter (eager refuses the change: the same error), or an activation (an eager op's output);
the differentiable operand a plain leaf or a parameter.

Fuzz seed 81530 was found as such a frame (``y -= w.sum()`` before a break); its cause was elsewhere (see
test_outputs_of_interleaved_groups_get_their_own_gradients in tests/symbolic/test_higher_order_gradients.py):
the outputs here, ``(y.mean(), w.sum(), y * x)``, are of interleaved groups too. The changed tensor is written
back after the graph by `sot.opcode_translator.runtime.write_back_tensor` (tests/opcode_translator/test_runtime.py).
"""
from __future__ import annotations

import contextlib
import io
import re
from typing import Any, Callable

import numpy as np
import paddle
import pytest

import sot


def _rebind(y, w):
    y -= w.sum()  # (Paddle's Tensor has no ``__isub__``: a new tensor, the input is left as it is)
    return y


def _subtract(y, w):
    return y.subtract_(w.sum())


def _add(y, w):
    return y.add_(w * 2.0)


def _multiply(y, w):
    return y.multiply_(w)


def _scale(y, w):
    return y.scale_(2.0)  # (no differentiable operand: a constant stays one)


def _set_item(y, w):
    y[0] = w.sum()
    return y


def _assign(y, w):
    paddle.assign(y - w, output=y)
    return y


def _tanh(y, w):
    return paddle.tanh_(y)


CHANGES: dict[str, Callable[..., Any]] = {fn.__name__[1:]: fn for fn in (
    _rebind, _subtract, _add, _multiply, _scale, _set_item, _assign, _tanh)}


def _frame(change: Callable[..., Any], graph_break: bool) -> Callable[..., Any]:
    if graph_break:
        def changes_an_input_then_breaks(x, y, w):
            y = change(y, w)
            print("break")
            return y.mean(), w.sum(), y * x

        return changes_an_input_then_breaks

    def changes_an_input(x, y, w):
        y = change(y, w)
        return y.mean(), w.sum(), y * x

    return changes_an_input


def _parameter(values: list[float], trainable: bool) -> paddle.Tensor:
    parameter = paddle.create_parameter([len(values)], "float32")
    parameter.set_value(paddle.to_tensor(values))
    parameter.stop_gradient = not trainable
    return parameter


def _inputs(y_kind: str, w_kind: str) -> tuple[paddle.Tensor, paddle.Tensor, paddle.Tensor, paddle.Tensor]:
    """``x`` (a constant), ``y`` (changed by the frame), ``w`` (its differentiable operand), and the leaf ``y``
    is computed from (``y`` itself unless ``y_kind`` is "activation")."""
    x = paddle.to_tensor([1.0, 2.0, 3.0])
    values = [-1.5, -1.0, -2.0]
    if y_kind == "parameter":
        source = _parameter(values, trainable=True)
    else:
        source = paddle.to_tensor(values, stop_gradient=y_kind == "constant")
    y = source * 1.0 if y_kind == "activation" else source
    w = _parameter([-1.5, 0.5, 0.5], trainable=True) if w_kind == "parameter" else \
        paddle.to_tensor([-1.5, 0.5, 0.5], stop_gradient=False)
    return x, y, w, source


_TENSOR_NAME = re.compile(r"generated_tensor_\d+|create_parameter_\d+\.w_\d+")


def _error(exc: Exception) -> tuple[str, str]:
    """An exception without what differs between two runs (generated tensor names, the C++ location)."""
    return type(exc).__name__, _TENSOR_NAME.sub("T", str(exc)).split(" (at ")[0]


def _numpy(tensor: paddle.Tensor | None) -> Any:
    return None if tensor is None else tensor.numpy()


def _pictures(fn: Callable[..., Any], y_kind: str, w_kind: str, order: str) -> list:
    """What a user sees of a call and of the gradients after it: ``backward()`` of a loss weighing each output
    differently, or the gradient of ``w`` with ``create_graph=True`` and a backward through it. (Of a constant
    ``y``, its own ``grad`` is not compared: test_a_constant_changed_in_place_gets_the_gradient_of_its_old_value
    does.)"""
    x, y, w, source = _inputs(y_kind, w_kind)
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            outputs = fn(x, y, w)
        except Exception as exc:  # noqa: BLE001 - eager refuses to change a leaf requiring grad in place
            return [_error(exc)]
    pictures: list = [(o.numpy(), o.stop_gradient) for o in outputs]
    pictures.append((y.numpy(), y.stop_gradient, y.is_leaf, y._inplace_version()))
    loss = outputs[0] + outputs[1] * 5.0 + outputs[2].sum() * 30.0
    try:
        if order == "backward":
            loss.backward()
        else:
            (slope,) = paddle.grad(loss, w, create_graph=True)
            pictures.append(slope.numpy())
            (slope * slope).sum().backward()
    except Exception as exc:  # noqa: BLE001 - an op without a double gradient refuses as eager's does
        pictures.append(_error(exc))
    pictures.append(_numpy(w.grad))
    if source is not y:
        pictures.append(_numpy(source.grad))
    return pictures


def _assert_same_pictures(actual: list, expected: list, where: str) -> None:
    assert len(actual) == len(expected), f"{where}: {actual} != {expected}"
    for index, (a, e) in enumerate(zip(actual, expected)):
        if isinstance(e, tuple):
            assert isinstance(a, tuple) and len(a) == len(e), f"{where} [{index}]: {a} != {e}"
            for part_a, part_e in zip(a, e):
                _assert_same_value(part_a, part_e, f"{where} [{index}]")
        else:
            _assert_same_value(a, e, f"{where} [{index}]")


def _assert_same_value(actual: Any, expected: Any, where: str) -> None:
    if isinstance(expected, np.ndarray):
        assert isinstance(actual, np.ndarray), f"{where}: {actual!r} != {expected!r}"
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5, err_msg=where)
    else:
        assert actual == expected, f"{where}: {actual!r} != {expected!r}"


def _check(change: str, y_kind: str, w_kind: str, graph_break: bool, order: str) -> None:
    """Eager's pictures at two calls of the translated frame, no fallback, no second translation, and the
    breaks: the one before ``print``, plus, for an in-place change of a leaf requiring grad (which sot runs
    natively: eager refuses it, or, ``assign`` with ``output``, allows it), one at the call of the change in
    the frame and one at the change in the change's own frame."""
    fn = _frame(CHANGES[change], graph_break)
    expected = _pictures(fn, y_kind, w_kind, order)
    translated = sot.symbolic_translate(fn)
    translations = None
    for call in (1, 2):
        _assert_same_pictures(_pictures(translated, y_kind, w_kind, order), expected, f"call {call}")
        assert translations in (None, sot.stats().translate_count), f"translated again: {sot.stats()}"
        translations = sot.stats().translate_count
    refused = len(expected) == 1  # (eager raised at the change: the frame ends there)
    native_change = y_kind in ("leaf", "parameter") and change != "rebind"
    breaks = (2 if native_change else 0) + (1 if graph_break and not refused else 0)
    stats = sot.stats()
    assert (stats.graph_breaks, stats.fallbacks) == (breaks, 0), stats


@pytest.mark.parametrize("graph_break", [True, False], ids=["break", "no break"])
@pytest.mark.parametrize("w_kind", ["leaf", "parameter"])
@pytest.mark.parametrize("y_kind", ["constant", "leaf", "parameter", "activation"])
@pytest.mark.parametrize("change", list(CHANGES))
def test_an_input_changed_in_place_then_a_backward(compile_all, change, y_kind, w_kind, graph_break):
    _check(change, y_kind, w_kind, graph_break, "backward")


# The changes whose eager gradients of gradients sot gives. Not here: ``multiply_`` of an activation (eager's
# double gradient of ``multiply_`` drops the path to the tensor's old value: the activation's leaf gets no
# gradient, where ``y = y * w`` gives one; sot gives the latter); a parameter ``w``
# (test_higher_order_gradients.py::test_a_hessian_vector_product_with_respect_to_parameters); ``assign`` with
# ``output`` (eager's ``assign_out_`` has no double gradient and refuses; sot's write-back has one). (``scale_``
# and ``tanh_`` of a constant: ``w`` only ``w.sum()`` reaches, whose gradient does not depend on ``w``: eager
# leaves ``w.grad`` None, which sot gave zeros before `higher_order._GradientDependence`.)
@pytest.mark.parametrize("graph_break", [True, False], ids=["break", "no break"])
@pytest.mark.parametrize("y_kind", ["constant", "activation"])
@pytest.mark.parametrize("change", ["rebind", "subtract", "add", "set_item", "scale", "tanh"])
def test_an_input_changed_in_place_then_a_gradient_of_a_gradient(compile_all, change, y_kind, graph_break):
    """After a break, the next graph reads the written-back tensor: the write-back must have a gradient of
    its gradient (it failed: ``assign_out__grad doesn't have any grad op``). ``y[0] = ...`` raises
    eager's error (``set_value_with_tensor_grad`` has no gradient)."""
    _check(change, y_kind, "leaf", graph_break, "create_graph")


def _reads_after_the_call(y, w):
    y.subtract_(w.sum())
    return w.sum()


def test_a_tensor_written_back_is_differentiated_twice_after_the_call(compile_all):
    """The caller reads the changed tensor after the call and differentiates twice through it."""

    def pictures(fn):
        source = paddle.to_tensor([-1.5, -1.0, -2.0], stop_gradient=False)
        y = source * 1.0
        w = paddle.to_tensor([-1.5, 0.5, 0.5], stop_gradient=False)
        fn(y, w)
        (slope,) = paddle.grad((y * y).sum(), w, create_graph=True)
        (slope * slope).sum().backward()
        return [y.numpy(), slope.numpy(), w.grad.numpy(), source.grad.numpy()]

    expected = pictures(_reads_after_the_call)
    for actual in (pictures(sot.symbolic_translate(_reads_after_the_call)) for _ in range(2)):
        for a, e in zip(actual, expected):
            np.testing.assert_allclose(a, e, rtol=1e-6)


def test_a_constant_changed_in_place_gets_the_gradient_of_its_old_value(compile_all):
    """Eagerly, an in-place op with a differentiable operand on a leaf without gradient makes the leaf require
    grad from then on, and the op's gradient for the leaf's old value accumulates into the leaf's ``grad`` (after
    ``y.multiply_(w)`` and a backward, ``y.grad`` is the gradient of the new ``y`` times ``w``). The program
    takes that old value as an input requiring grad, fed the leaf made to require grad
    (`sot.symbolic.made_differentiable`); it stayed None when the program took it as a constant."""

    def gradient_of_the_constant(fn):
        x, y, w, _ = _inputs("constant", "leaf")
        with contextlib.redirect_stdout(io.StringIO()):
            outputs = fn(x, y, w)
        (outputs[0] + outputs[1] * 5.0 + outputs[2].sum() * 30.0).backward()
        return _numpy(y.grad)

    for change in ("subtract", "multiply", "set_item"):
        for graph_break in (True, False):
            fn = _frame(CHANGES[change], graph_break)
            expected = gradient_of_the_constant(fn)
            assert expected is not None
            actual = gradient_of_the_constant(sot.symbolic_translate(fn))
            assert actual is not None, (change, graph_break)
            np.testing.assert_allclose(actual, expected, rtol=1e-5, err_msg=f"{change}, break: {graph_break}")


def _frozen_parameter() -> paddle.Tensor:
    parameter = _parameter([1.0, 2.0, 3.0], trainable=True)
    parameter.stop_gradient = True
    return parameter


def _stopped_by_hand(w: paddle.Tensor) -> paddle.Tensor:
    tensor = w * 2.0  # (no leaf: made to stop gradients by hand, it keeps its gradient node)
    tensor.stop_gradient = True
    return tensor


# The tensors without gradient a frame gets and changes in place with a differentiable operand: eager makes each
# require grad at the op, the gradient of its value before the op going to a leaf's ``grad`` (a constant, a
# frozen parameter) or on through the gradient node of a tensor made to stop gradients by hand.
CONSTANTS: dict[str, Callable[[paddle.Tensor], paddle.Tensor]] = {
    "constant": lambda w: paddle.to_tensor([1.0, 2.0, 3.0]),
    "frozen parameter": lambda w: _frozen_parameter(),
    "stopped by hand": _stopped_by_hand,
}


def _read_before(y, w):
    z = y + w  # (a read of the constant before the change: no gradient for ``y`` from it)
    y.add_(w * w * 3.0)
    return z.sum() + (y * y).sum()


def _changed_twice(y, w):
    y.add_(w * w * 3.0)
    y.subtract_(w)  # (``y`` requires grad by now: an ordinary in-place change)
    return (y * y).sum()


def _changed_before(y, w):
    y.scale_(2.0)  # (no differentiable operand: ``y`` stays a constant, changed)
    y.add_(w * w * 3.0)  # (the gradient of ``y`` before this op, not before the scale, goes to ``y``)
    return (y * y).sum()


FRAMES: dict[str, tuple[Callable[..., Any], int]] = {  # the frame, and its graph breaks
    "read before": (_read_before, 0),
    "changed twice": (_changed_twice, 0),
    # (the value before the op is computed in the frame: the op runs natively, at a break)
    "changed before": (_changed_before, 1),
}


@pytest.mark.parametrize("order", ["backward", "create_graph"])
@pytest.mark.parametrize("frame", list(FRAMES))
@pytest.mark.parametrize("kind", list(CONSTANTS))
def test_a_tensor_without_gradient_made_to_require_it_by_an_in_place_change(compile_all, kind, frame, order):
    """The result, the tensor's flags and inplace version after the call, its ``grad`` and the operand's, after
    ``backward()`` or after a gradient taken with ``create_graph=True`` and a backward through it, as eager's;
    at two calls, with the breaks listed (none but where the value before the op is computed in the frame)."""
    fn, breaks = FRAMES[frame]

    def pictures(run: Callable[..., Any]) -> list:
        w = paddle.to_tensor([-1.5, 0.5, 0.5], stop_gradient=False)
        y = CONSTANTS[kind](w)
        out = run(y, w)
        found: list = [out.numpy(), y.stop_gradient, y.is_leaf, y._inplace_version()]
        if order == "backward":
            out.backward()
        else:
            (slope,) = paddle.grad(out, w, create_graph=True)
            found += [slope.numpy(), _numpy(y.grad)]
            (slope * slope).sum().backward()
        return found + [_numpy(y.grad), _numpy(w.grad)]

    expected = pictures(fn)
    translated = sot.symbolic_translate(fn)
    for call in (1, 2):
        _assert_same_pictures(pictures(translated), expected, f"call {call}")
    stats = sot.stats()
    assert (stats.translate_count, stats.graph_breaks, stats.fallbacks) == (1 + breaks, breaks, 0), stats


def _gathers_after_the_change(y, w, index):
    y.add_(w * 2.0)
    return paddle.gather(y, index).sum()


def test_a_failing_call_leaves_the_constant_as_it_was_for_the_native_rerun(compile_all):
    """The program makes the constant require grad for the call; when its kernel fails (an index out of range),
    the frame reruns natively from the start: the constant must be one again there, or eager's in-place op would
    refuse it as a leaf requiring grad instead of raising the user's error."""

    def outcome(fn, position):
        y = paddle.to_tensor([1.0, 2.0, 3.0])
        w = paddle.to_tensor([-1.5, 0.5, 0.5], stop_gradient=False)
        try:
            out = fn(y, w, paddle.to_tensor([position]))
            out.backward()
            result: Any = out.numpy()
        except Exception as exc:  # noqa: BLE001 - the user's error, as eager raises it
            result = _error(exc)
        return [result, y.numpy(), y.stop_gradient, y.is_leaf, y._inplace_version(), _numpy(y.grad), _numpy(w.grad)]

    translated = sot.symbolic_translate(_gathers_after_the_change)
    for position in (1, 7, 2, 9):
        _assert_same_pictures(outcome(translated, position), outcome(_gathers_after_the_change, position),
                              f"index {position}")
    assert (sot.stats().translate_count, sot.stats().fallbacks) == (1, 0), sot.stats()


def _read_by_a_layer_then_changed(norm, x, w):
    y = norm(x)
    norm._mean.add_(w)  # (the program holds the statistics the layer read: a constant there)
    return y.sum() + (norm._mean * norm._mean).sum()


def _changed_then_read_by_a_layer(norm, x, w):
    norm._mean.add_(w)
    y = norm(x)
    return y.sum() + (norm._mean * norm._mean).sum()


@pytest.mark.parametrize("fn, breaks", [(_read_by_a_layer_then_changed, True), (_changed_then_read_by_a_layer, False)],
                         ids=["read then changed", "changed then read"])
def test_a_layer_statistic_changed_in_place_with_a_differentiable_operand(compile_all, fn, breaks):
    """A batch norm's running mean (a constant the layer holds) changed in place with a differentiable operand:
    the change runs natively (the program reading the mean before the change holds it: it must stay a constant
    there). Read before the change, the mean is kept by eager's batch norm, whose backward then refuses (as the
    program's does); read after it (no break: the layer's forward is simulated), the mean's gradient (and
    ``w``'s) is eager's. (A new layer at each call: each call translates again. At the second, the layer path
    holding another layer of its class, the layer's forward is simulated: read before the change, the mean is
    then saved by the simulated ``batch_norm``, whose program's backward would not refuse the change, so that
    frame runs natively.)"""

    layers = []  # (kept alive: the second call sees another live layer of the class where the first was)

    def outcome(run):
        paddle.seed(1)
        norm = paddle.nn.BatchNorm1D(3)
        norm.eval()
        layers.append(norm)
        w = paddle.to_tensor([-1.5, 0.5, 0.5], stop_gradient=False)
        out = run(norm, paddle.ones([2, 3]), w)
        try:
            out.backward()
        except RuntimeError as exc:
            return [_error(exc)]
        return [out.numpy(), norm._mean.stop_gradient, _numpy(norm._mean.grad), _numpy(w.grad)]

    expected = outcome(fn)
    for _ in range(2):
        _assert_same_pictures(outcome(sot.symbolic_translate(fn)), expected, fn.__name__)
    assert sot.stats().fallbacks == (1 if breaks else 0) and (sot.stats().graph_breaks > 0) == breaks, sot.stats()


class _Holder:
    """Keeps what a frame stores on it (a tensor made in the frame escaping through an attribute)."""

    kept: Any = None


def _made_in_the_frame(x, w):
    made = paddle.to_tensor([1.0, 2.0, 3.0])
    made.add_(w * w * 3.0)
    return made, (made * x).sum()


def _made_like_an_input_read_before(x, w):
    made = paddle.full_like(x, 2.0)  # (a constant computed from an input's shape)
    z = made + w  # (read before the change: no gradient for the constant from it)
    made.multiply_(w)
    return made, (made * made).sum() + z.sum()


def _made_from_an_input_then_set(x, w):
    made = x * 2.0  # (computed from an input without gradient: a leaf)
    made[1] = w[0] * 4.0
    return made, (made * made).sum()


def _made_and_kept_on_an_object(x, w):
    made = paddle.zeros([3])
    made.subtract_(w.sum())
    _Holder.kept = made
    return (made * x).sum()


MADE_IN_THE_FRAME: dict[str, Callable[..., Any]] = {
    "to_tensor": _made_in_the_frame,
    "full_like, read before": _made_like_an_input_read_before,
    "computed, set item": _made_from_an_input_then_set,
    "kept on an object": _made_and_kept_on_an_object,
}


@pytest.mark.parametrize("order", ["backward", "create_graph"])
@pytest.mark.parametrize("frame", list(MADE_IN_THE_FRAME))
def test_a_constant_made_in_the_frame_made_to_require_grad_by_an_in_place_change(compile_all, frame, order):
    """A tensor made in the frame without gradient, changed in place by an op with a differentiable operand:
    eager makes it require grad at the op, and the gradient of its value before the op accumulates into its own
    ``grad``, which the caller sees when the tensor leaves the frame (returned, kept on an object). Its values,
    flags, inplace version and ``grad``, and the operand's gradient, as eager's, after ``backward()`` or after a
    gradient taken with ``create_graph=True`` and a backward through it; at two calls, without falling back.
    (The tensor had no ``grad``: the program took its value before the op as a constant of its own.)"""
    fn = MADE_IN_THE_FRAME[frame]

    def pictures(run: Callable[..., Any]) -> list:
        _Holder.kept = None
        x = paddle.to_tensor([1.0, -2.0, 0.5])
        w = paddle.to_tensor([-1.5, 0.5, 0.5], stop_gradient=False)
        result = run(x, w)
        made, out = (_Holder.kept, result) if _Holder.kept is not None else result
        found: list = [out.numpy(), made.numpy(), made.stop_gradient, made.is_leaf, made._inplace_version()]
        try:
            if order == "backward":
                out.backward()
            else:
                (slope,) = paddle.grad(out, w, create_graph=True)
                found += [slope.numpy(), _numpy(made.grad)]
                (slope * slope).sum().backward()
        except RuntimeError as exc:  # (``set_value_with_tensor_grad`` has no double gradient: raised as eager)
            return found + [_error(exc)]
        return found + [_numpy(made.grad), _numpy(w.grad)]

    expected = pictures(fn)
    assert expected[-2] is not None or isinstance(expected[-1], tuple)
    translated = sot.symbolic_translate(fn)
    for call in (1, 2):
        actual = pictures(translated)
        if call > 1:
            # (the inplace version at the first call only: the next call's output starts from the version the
            # change left, test_an_output_changed_in_place_after_the_call_leaves_the_next_output_at_version_zero)
            actual[4] = expected[4]
        _assert_same_pictures(actual, expected, f"call {call}")
    assert sot.stats().fallbacks == 0, sot.stats()


def _made_then_printed(x):
    made = x * 2.0
    print("a break")
    return made


def test_an_output_changed_in_place_after_the_call_leaves_the_next_output_at_version_zero(compile_all, capsys):
    """A program's outputs share the inplace-version counter of the program runner's scope variable they come
    from (Paddle 3.3's ``run_program`` shares the variable's data, counter included, and the next run allocates
    new memory, not a new counter): each output gets a counter of its own (`tensor_meta.fresh_inplace_versions`),
    or a change in place of one call's output (here at the graph break, and by the caller) shows in the version
    of the next call's output, which eager starts at 0 (after the change: 1)."""

    def versions(fn):
        found = []
        for _ in range(3):
            made = fn(paddle.ones([3]))
            found.append(made._inplace_version())
            made.add_(paddle.ones([3]))
        return found

    assert versions(sot.symbolic_translate(_made_then_printed)) == versions(_made_then_printed) == [0, 0, 0]

"""Gradients through a compiled program with the autograd flags eager's have.

Eager gradients are made by eager grad nodes, which give them autograd metadata with ``stop_gradient=False``;
a leaf's ``grad`` (or a retained one) keeps the metadata of the first gradient stored into it. The gradients a
compiled program's backward hands over are tensors without metadata: stored, they read ``stop_gradient=True``,
and no later write to the flag sticks (every ``x.grad`` is a new wrapper that makes metadata of its own). What
receives a gradient decides how it gets eager's flags, at what cost:

* a leaf that is not a parameter (made anew at each call, typically): fed through an eager view of itself
  (`fed`), whose eager grad node makes the program's gradient a tensor with metadata;
* a parameter, held by the program itself (of the built-in layers it calls) or given as an input: it lives
  across calls, so it gets, once, a gradient hook (`keep_eager_flags`) that gives the gradient its flag where
  it is accumulated into ``grad``. No cost per call;
* a non-leaf input of a call run with the program's own backward (an output of another compiled program: an
  activation a resume function gets after a graph break, or one translated layer's output given to another):
  what sees its gradient is a retain hook (``retain_grads()``) or a user's hook on the node that made it,
  which run in the order they were registered. The first call reading the input gives its slot the flag hook,
  which runs before whatever is registered after: a hook or a retain registered before it (already there at
  the call) would see the gradient first, and the input is then fed through a view, as a leaf is.

With the C++ extension (``_gradient_flags``, sot/eval_frame_ext/gradient_flags.cpp; installed by `install`
when built against this Paddle and its readings check out) the hook is a C++ function that Paddle calls
itself (no Python in the backward pass), and `fed` reads the flags, the retain note and the hooks of each
input from the C++ tensor: a non-leaf is viewed only when something observes its gradient before the flag
hook. Without it, the
hook is a Python function (Paddle calls it through its Python hook machinery: about 1-2 us per parameter per
backward pass) and every non-leaf input is viewed (Paddle keeps no note of ``retain_grads()`` Python can
read): an eager op and a backward node per input and call.

Measured with callgrind (benchmarks/README.md, ``gradient_flags.py``): per parameter per backward pass about
1,500 instructions with the extension (most of it Paddle's own cost of applying any gradient hook) against
5,800 for the Python hook; per activation crossing a graph break about 1,700 against 36,000 for the view.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Iterable

import paddle
from paddle.base.framework import EagerParamBase

from . import kept_scope
from .version_check import PermissionDeniedHook

try:
    from ..eval_frame_ext import _gradient_flags as _ext
except ImportError:  # (the optional extension is not built: see setup.py)
    _ext = None

# Set on a parameter given the Python hook: ``id(parameter)``, so that a deep copy (which copies the attributes
# of a parameter, not its hooks) is not taken for hooked. (The C++ path reads the node's hooks instead.)
_HOOKED = "_sot_eager_gradient_flag"

_reshape = paddle._C_ops.reshape

# The hooks sot registers on a program's outputs that do not look at the flag of the gradient (the version
# check of saved tensors, the hook that keeps a run's scope for its backward): a non-leaf hooked only by these
# needs no view. (Exact types.)
INTERNAL_HOOK_TYPES: tuple[type, ...] = \
    ((PermissionDeniedHook,) if PermissionDeniedHook is not None else ()) + (kept_scope._CallScope,
                                                                            kept_scope._OutputNote)

_installed = False
_reason = "not tried"


def _with_eager_flag(grad: paddle.Tensor) -> paddle.Tensor:
    """The Python gradient hook of `keep_eager_flags`: the gradient about to be accumulated, flagged as eager's
    are.

    The hook gets a wrapper of the gradient; setting the flag makes its metadata, which the returned tensor
    carries into the accumulation (an eager gradient already reads False: unchanged). None (a hook may be
    called for a gradient that did not flow) stays None: Paddle keeps what it had."""
    if grad is not None:
        grad.stop_gradient = False
    return grad


def _python_keep_eager_flags(parameters: Iterable[paddle.Tensor]) -> None:
    for parameter in parameters:
        if getattr(parameter, _HOOKED, None) != id(parameter):
            parameter._register_grad_hook(_with_eager_flag)
            setattr(parameter, _HOOKED, id(parameter))


def _python_fed(inputs: list, grad_inputs: list[int], non_leaves: bool) -> list:
    if not grad_inputs:
        return inputs
    result = list(inputs)
    for index in grad_inputs:
        tensor = result[index]
        if tensor.stop_gradient:
            continue
        if not tensor.is_leaf:
            if non_leaves:
                result[index] = _reshape(tensor, tensor.shape)
        elif not isinstance(tensor, EagerParamBase):
            result[index] = _reshape(tensor, tensor.shape)
        elif getattr(tensor, _HOOKED, None) != id(tensor):
            _python_keep_eager_flags((tensor,))
    return result


def _native_keep_eager_flags(parameters: Iterable[paddle.Tensor]) -> None:
    for parameter in parameters:
        _ext.keep_eager_flags(parameter)


def _native_fed(inputs: list, grad_inputs: list[int], non_leaves: bool) -> list:
    return _ext.fed(inputs, grad_inputs, non_leaves, _reshape)


_keep_eager_flags: Callable[[Iterable[paddle.Tensor]], None] = _python_keep_eager_flags
_fed: Callable[[list, list[int], bool], list] = _python_fed


def keep_eager_flags(parameters: Iterable[paddle.Tensor]) -> None:
    """Give each of ``parameters`` (once) the hook that flags the gradients accumulated into its ``grad`` as
    eager's are. (Hooks run in the order they were registered: a hook the user registered before the first
    compiled call still sees the program's gradient without the flag. Of what such a hook returns, the C++ hook
    flags only a gradient without metadata, as eager would have made it: a detached tensor stays detached; the
    Python hook cannot tell them apart, Python's getter makes the metadata it reads, and flags both.)"""
    _keep_eager_flags(parameters)


def fed(inputs: list, grad_inputs: list[int], non_leaves: bool) -> list:
    """The tensors the program is run on: each of ``inputs[grad_inputs]`` requiring grad that is a leaf and not
    a parameter replaced by an eager view of itself, and, if ``non_leaves``, each non-leaf whose gradient is
    observed before the flag hook would run (see the module docstring; all of them without the C++ extension);
    the parameters among them given `keep_eager_flags`' hook, the other non-leaves (with the extension) the
    flag hook on their slot, once. ``inputs`` itself or a new list.

    Through the view, the program's gradient reaches the input's own node (or its accumulation) by way of the
    view's eager gradient node, which makes it a tensor with metadata (a view of it, no copy). The view shares
    the input's memory and inplace version, so the saved-tensor checks (``_watch_saved_tensors``) see the
    input's changes. ``reshape`` to its own shape: a view for any strides and size (empty too), and its gradient
    has a gradient in turn (``paddle.grad(..., create_graph=True)``), where ``view_dtype``'s has none. Fed at
    every call: the first gradient accumulated after ``clear_grad`` decides the flag again.

    ``non_leaves`` is for a call run with the program's own backward. A call run with a recomputing backward
    (`higher_order.run_with_recomputed_backward`) gives its non-leaf inputs gradients made by eager nodes
    already."""
    return _fed(inputs, grad_inputs, non_leaves)


class CalibrationError(Exception):
    """A reading of the C++ extension differs from the known state of a sample tensor."""


def _check(holds: bool) -> None:
    if not holds:
        raise CalibrationError("a sample tensor reads differently through sot's _gradient_flags")


def _calibrate() -> None:
    """Checks the extension's readings on sample tensors whose state is known (raises `CalibrationError`, or
    the extension's error, when one reads otherwise)."""
    ext = _ext
    ext.calibrate(paddle.Tensor, EagerParamBase, INTERNAL_HOOK_TYPES)
    with paddle.set_grad_enabled(True), paddle.utils.unique_name.guard():
        x = paddle.ones([2, 4])
        x.stop_gradient = False
        constant = paddle.ones([2, 4])
        constant.stop_gradient = True
        _check((ext.stop_gradient_code(x), ext.stop_gradient_code(constant)) == (0, 1))
        # A non-leaf: nothing at its slot, then retained (Paddle's retain hook: one C++ hook).
        retained = x * 2
        _check(ext.slot_hooks(retained) == (False, [], 0, 0) and not ext.gradient_observed(retained))
        retained.retain_grads()
        _check(ext.slot_hooks(retained) == (True, [], 0, 1) and ext.gradient_observed(retained))
        # A Python hook is found by identity, at its own rank only (two outputs of one slot).
        first, second = paddle.split(x * 3, 2, axis=1)

        def probe(grad: Any) -> Any:
            return grad

        first._register_grad_hook(probe)
        found = ext.slot_hooks(first)
        _check(found[0] is False and len(found[1]) == 1 and found[1][0] is probe and found[2:] == (0, 0))
        _check(ext.gradient_observed(first) and not ext.gradient_observed(second))
        if INTERNAL_HOOK_TYPES:
            watched = x * 4
            watched._register_grad_hook(PermissionDeniedHook(lambda grad: None))
            _check(not ext.gradient_observed(watched))
        # fed: a leaf viewed, an unobserved non-leaf hooked once, an observed one viewed, a constant left.
        plain = x * 5
        inputs = [x, plain, retained, constant]
        once = ext.fed(inputs, [0, 1, 2, 3], True, _reshape)
        twice = ext.fed(inputs, [0, 1, 2, 3], True, _reshape)
        for result in (once, twice):
            _check(result is not inputs and result[0] is not x and result[2] is not retained)
            _check(result[1] is plain and result[3] is constant)
            _check(not result[0].is_leaf and not result[2].is_leaf)
        _check(ext.slot_hooks(plain) == (False, [], 1, 0) and not ext.gradient_observed(plain))
        for unchanged, non_leaves in (([plain, retained], False), ([plain], True)):
            _check(ext.fed(unchanged, [0, len(unchanged) - 1], non_leaves, _reshape) is unchanged)
        # A parameter gets the hook on its accumulation node once; it flags nothing eager made.
        parameter = paddle.create_parameter([2, 4], "float32")
        hook_id = ext.keep_eager_flags(parameter)
        _check(isinstance(hook_id, int) and hook_id >= 0 and ext.keep_eager_flags(parameter) == -1)
        _check(ext.slot_hooks(parameter)[2] == 1)
        _check(ext.keep_eager_flags(plain) is None)
        (parameter * 2.0).sum().backward()
        _check(parameter.grad is not None and ext.stop_gradient_code(parameter.grad) == 0)


def install() -> bool:
    """Use the C++ extension when it is safe: built, against this very Paddle (``PADDLE_COMMIT``), and its
    readings of sample tensors right (`_calibrate`). Otherwise (or with ``SOT_GRADIENT_FLAGS_EXT=0`` in the
    environment) the Python hook and views. Whether it is used."""
    global _installed, _reason, _fed, _keep_eager_flags
    if _installed:
        return True
    if os.environ.get("SOT_GRADIENT_FLAGS_EXT", "1") == "0":
        _reason = "disabled by SOT_GRADIENT_FLAGS_EXT=0"
        return False
    if _ext is None:
        _reason = "not built"
        return False
    if _ext.PADDLE_COMMIT != paddle.version.commit:
        _reason = f"built against Paddle commit {_ext.PADDLE_COMMIT}, running {paddle.version.commit}"
        return False
    if not paddle.in_dynamic_mode():
        _reason = "Paddle is in static mode"
        return False
    try:
        _calibrate()
    except Exception as exc:  # a layout or a reading that differs: the Python way
        _ext.uncalibrate()
        _reason = f"calibration failed ({type(exc).__name__}: {exc})"
        return False
    _fed, _keep_eager_flags = _native_fed, _native_keep_eager_flags
    _installed, _reason = True, "installed"
    return True


def uninstall() -> None:
    """The Python hook and views again (for tests and for comparing both ways). Hooks already registered stay."""
    global _installed, _reason, _fed, _keep_eager_flags
    _fed, _keep_eager_flags = _python_fed, _python_keep_eager_flags
    _installed, _reason = False, "uninstalled"


def installed() -> bool:
    return _installed


def status() -> str:
    """Why the extension is or is not used."""
    return _reason


install()

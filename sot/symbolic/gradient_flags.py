"""Gradients through a compiled program with the autograd flags eager's have.

Eager gradients are made by eager grad nodes, which give them autograd metadata with ``stop_gradient=False``;
a leaf's ``grad`` (or a retained one) keeps the metadata of the first gradient stored into it. The gradients a
compiled program's backward hands over are tensors without metadata: stored, they read ``stop_gradient=True``,
and no later write to the flag sticks (every ``x.grad`` is a new wrapper that makes metadata of its own). What
receives a gradient decides how it gets eager's flags, at what cost:

* a leaf that is not a parameter (made anew at each call, typically): fed through an eager view of itself
  (`fed`), whose eager grad node makes the program's gradient a tensor with metadata;
* a non-leaf input of a call run with the program's own backward (an output of another compiled program: an
  activation a resume function gets after a graph break, or one translated layer's output given to another):
  fed through a view too, so that its retained gradient (``retain_grads()``) and the gradient its hooks see are
  eager's. Paddle keeps no readable note that ``retain_grads()`` was called, and a hook registered on the
  tensor at the call would run after the retaining one, too late: the view is the only way, paid at each
  such call (one eager op and one backward node per input: a few microseconds);
* a parameter, held by the program itself (of the built-in layers it calls) or given as an input: it lives
  across calls, so it gets, once, a gradient hook (`keep_eager_flags`) that gives the gradient its flag where
  it is accumulated into ``grad``. No cost per call; per backward pass, one Python hook call per parameter
  that gets a gradient (about 1-2 us each). A view per parameter would cost more, at every call, and add a
  backward node each.
"""
from __future__ import annotations

from typing import Iterable

import paddle
from paddle.base.framework import EagerParamBase

# Set on a parameter given the hook: ``id(parameter)``, so that a deep copy (which copies the attributes of a
# parameter, not its hooks) is not taken for hooked.
_HOOKED = "_sot_eager_gradient_flag"

_reshape = paddle._C_ops.reshape


def _with_eager_flag(grad: paddle.Tensor) -> paddle.Tensor:
    """The gradient hook of `keep_eager_flags`: the gradient about to be accumulated, flagged as eager's are.

    The hook gets a wrapper of the gradient; setting the flag makes its metadata, which the returned tensor
    carries into the accumulation (an eager gradient already reads False: unchanged). None (a hook may be
    called for a gradient that did not flow) stays None: Paddle keeps what it had."""
    if grad is not None:
        grad.stop_gradient = False
    return grad


def keep_eager_flags(parameters: Iterable[paddle.Tensor]) -> None:
    """Give each of ``parameters`` (once) the hook that flags the gradients accumulated into its ``grad`` as
    eager's are. (Hooks run in the order they were registered: a hook the user registered before the first
    compiled call still sees the program's gradient without the flag, and a detached tensor it returns instead
    is flagged anyway, where eager's stored gradient would read True. Telling a gradient without metadata from
    one with ``stop_gradient=True`` takes C++: Python's getter makes the metadata it reads.)"""
    for parameter in parameters:
        if getattr(parameter, _HOOKED, None) != id(parameter):
            parameter._register_grad_hook(_with_eager_flag)
            setattr(parameter, _HOOKED, id(parameter))


def fed(inputs: list, grad_inputs: list[int], non_leaves: bool) -> list:
    """The tensors the program is run on: each of ``inputs[grad_inputs]`` requiring grad that is a leaf and not
    a parameter (or, if ``non_leaves``, not a leaf) replaced by an eager view of itself; the parameters among
    them given `keep_eager_flags`' hook.

    Through the view, the program's gradient reaches the input's own node (or its accumulation) by way of the
    view's eager gradient node, which makes it a tensor with metadata (a view of it, no copy). The view shares
    the input's memory and inplace version, so the saved-tensor checks (``_watch_saved_tensors``) see the
    input's changes. ``reshape`` to its own shape: a view for any strides and size (empty too), and its gradient
    has a gradient in turn (``paddle.grad(..., create_graph=True)``), where ``view_dtype``'s has none. Fed at
    every call: the first gradient accumulated after ``clear_grad`` decides the flag again.

    ``non_leaves`` is for a call run with the program's own backward. A call run with a recomputing backward
    (`higher_order.run_with_recomputed_backward`) gives its non-leaf inputs gradients made by eager nodes
    already."""
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
            keep_eager_flags((tensor,))
    return result

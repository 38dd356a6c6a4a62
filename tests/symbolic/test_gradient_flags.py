"""`sot.symbolic.gradient_flags`: what each kind of input is fed as, and the parameters' hook (given once)."""
from __future__ import annotations

import copy

import numpy as np
import paddle

from sot.symbolic import gradient_flags


def _parameter() -> paddle.Tensor:
    parameter = paddle.create_parameter([2, 3], "float32")
    parameter.set_value(paddle.ones([2, 3]))
    return parameter


def _leaf(stop_gradient: bool = False) -> paddle.Tensor:
    leaf = paddle.ones([2, 3])
    leaf.stop_gradient = stop_gradient
    return leaf


def _next_hook_id(parameter: paddle.Tensor) -> int:
    """The id the next gradient hook of the parameter's accumulation node gets (a counter of every hook it was
    given), taken by registering and removing a probe."""
    probe = parameter._register_grad_hook(lambda grad: grad)
    parameter._remove_grad_hook(probe)
    return probe + 1


def _hooks_added(parameter: paddle.Tensor, action) -> int:  # noqa: ANN001
    """How many gradient hooks ``action()`` registers on ``parameter``."""
    before = _next_hook_id(parameter)
    action()
    return _next_hook_id(parameter) - before - 1


def test_what_each_input_is_fed_as() -> None:
    """A leaf requiring grad that is not a parameter: a view (same values, new object); a non-leaf: a view only
    for a call run with the program's own backward (``non_leaves``); a parameter and a tensor that stops
    gradients: as they are, the parameter given the hook (once); only ``grad_inputs`` are looked at."""
    leaf, parameter, constant, other = _leaf(), _parameter(), _leaf(stop_gradient=True), _leaf()
    non_leaf = leaf * 2
    inputs = [leaf, non_leaf, parameter, constant, other]
    added = []
    for non_leaves in (True, False):
        fed: list = []
        added.append(_hooks_added(parameter, lambda: fed.extend(gradient_flags.fed(inputs, [0, 1, 2, 3],
                                                                                   non_leaves))))
        assert fed[0] is not leaf and not fed[0].is_leaf
        np.testing.assert_array_equal(fed[0].numpy(), leaf.numpy())
        assert (fed[1] is not non_leaf) is non_leaves
        np.testing.assert_array_equal(fed[1].numpy(), non_leaf.numpy())
        assert all(a is b for a, b in zip(fed[2:], inputs[2:]))
    assert added == [1, 0]
    assert gradient_flags.fed(inputs, [], True) is inputs


def test_a_parameter_gets_the_hook_once() -> None:
    """Building programs (or feeding a parameter) again registers nothing more: one hook per parameter."""
    parameter = _parameter()

    def again() -> None:
        for _ in range(3):
            gradient_flags.keep_eager_flags([parameter])
            gradient_flags.fed([parameter], [0], True)

    assert _hooks_added(parameter, again) == 1
    assert _hooks_added(parameter, again) == 0


def test_a_deep_copy_of_a_hooked_parameter_gets_its_own_hook() -> None:
    """A deep copy carries the parameter's attributes (the note that it is hooked) but not its hooks."""
    parameter = _parameter()
    gradient_flags.keep_eager_flags([parameter])
    clone = copy.deepcopy(parameter)
    assert _hooks_added(clone, lambda: gradient_flags.keep_eager_flags([clone])) == 1


def test_eager_gradients_and_later_hooks_keep_their_flags_and_values() -> None:
    """On an eager gradient the hook changes nothing (values accumulated over two passes, flag False); a hook
    registered after it still decides what is stored, as eager's (a detached gradient: True)."""
    parameter, detached = _parameter(), _parameter()
    gradient_flags.keep_eager_flags([parameter, detached])
    detached._register_grad_hook(lambda grad: grad.detach())
    for _ in range(2):
        (parameter * 3.0).sum().backward()
        (detached * 3.0).sum().backward()
    assert (parameter.grad.stop_gradient, detached.grad.stop_gradient) == (False, True)
    for tensor in (parameter, detached):
        np.testing.assert_array_equal(tensor.grad.numpy(), np.full([2, 3], 6.0, np.float32))


def test_the_hook_passes_a_missing_gradient_on() -> None:
    """A hook may be called with None for a gradient that did not flow: the hook gives None back (Paddle then
    keeps what it had) instead of failing inside the backward pass."""
    assert gradient_flags._with_eager_flag(None) is None

"""`sot.symbolic.gradient_flags`: what each kind of input is fed as, and the parameters' hook (given once), with
the C++ extension (``native``, when it is built and installed) and the Python way (``python``, its fallback)."""
from __future__ import annotations

import copy

import numpy as np
import paddle
import paddle.nn as nn
import pytest

import sot
from sot.symbolic import gradient_flags

NATIVE = gradient_flags.installed()


@pytest.fixture(params=["native", "python"])
def way(request) -> str:  # noqa: ANN001
    """Each test runs both ways (the native one when the extension is used); the state is put back after."""
    if request.param == "native" and not NATIVE:
        pytest.skip(f"C++ extension not used: {gradient_flags.status()}")
    if request.param == "python":
        gradient_flags.uninstall()
    try:
        yield request.param
    finally:
        if NATIVE:
            gradient_flags.install()


def _parameter() -> paddle.Tensor:
    parameter = paddle.create_parameter([2, 3], "float32")
    parameter.set_value(paddle.ones([2, 3]))
    return parameter


def _leaf(stop_gradient: bool = False) -> paddle.Tensor:
    leaf = paddle.ones([2, 3])
    leaf.stop_gradient = stop_gradient
    return leaf


def _next_hook_id(tensor: paddle.Tensor) -> int:
    """The id the next gradient hook of the tensor's grad node gets (a counter of every hook it was given),
    taken by registering and removing a probe."""
    probe = tensor._register_grad_hook(lambda grad: grad)
    tensor._remove_grad_hook(probe)
    return probe + 1


def _hooks_added(tensor: paddle.Tensor, action) -> int:  # noqa: ANN001
    """How many gradient hooks ``action()`` registers on ``tensor``'s grad node."""
    before = _next_hook_id(tensor)
    action()
    return _next_hook_id(tensor) - before - 1


def test_what_each_input_is_fed_as(way: str) -> None:
    """A leaf requiring grad that is not a parameter: a view (same values, new object); a non-leaf, only for a
    call run with the program's own backward (``non_leaves``): a view when its gradient is retained, and the
    Python way for any; else (native) the flag hook on its slot, once; a parameter and a tensor that stops
    gradients: as they are, the parameter given the hook (once); only ``grad_inputs`` are looked at."""
    leaf, parameter, constant, other = _leaf(), _parameter(), _leaf(stop_gradient=True), _leaf()
    non_leaf, retained = leaf * 2, leaf * 3
    retained.retain_grads()
    inputs = [leaf, non_leaf, parameter, constant, other, retained]
    added, added_to_non_leaf = [], []
    for non_leaves in (True, False, True):
        fed: list = []

        def feed() -> None:
            fed.extend(gradient_flags.fed(inputs, [0, 1, 2, 3, 5], non_leaves))  # noqa: B023

        added_to_non_leaf.append(_hooks_added(non_leaf, lambda: added.append(_hooks_added(parameter, feed))))
        assert fed[0] is not leaf and not fed[0].is_leaf
        np.testing.assert_array_equal(fed[0].numpy(), leaf.numpy())
        assert (fed[1] is not non_leaf) is (non_leaves and way == "python")
        assert (fed[5] is not retained) is non_leaves
        for index in (1, 5):
            np.testing.assert_array_equal(fed[index].numpy(), inputs[index].numpy())
        assert all(a is b for a, b in zip(fed[2:5], inputs[2:5]))
    assert added == [1, 0, 0]
    assert added_to_non_leaf == ([1, 0, 0] if way == "native" else [0, 0, 0])
    assert gradient_flags.fed(inputs, [], True) is inputs


def test_a_parameter_gets_the_hook_once(way: str) -> None:
    """Building programs (or feeding a parameter) again registers nothing more: one hook per parameter."""
    parameter = _parameter()

    def again() -> None:
        for _ in range(3):
            gradient_flags.keep_eager_flags([parameter])
            gradient_flags.fed([parameter], [0], True)

    assert _hooks_added(parameter, again) == 1
    assert _hooks_added(parameter, again) == 0


def test_a_deep_copy_of_a_hooked_parameter_gets_its_own_hook(way: str) -> None:
    """A deep copy carries the parameter's attributes (the Python way's note that it is hooked) but not its
    hooks."""
    parameter = _parameter()
    gradient_flags.keep_eager_flags([parameter])
    clone = copy.deepcopy(parameter)
    assert _hooks_added(clone, lambda: gradient_flags.keep_eager_flags([clone])) == 1


def test_eager_gradients_and_later_hooks_keep_their_flags_and_values(way: str) -> None:
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
    """A Python hook may be called with None for a gradient that did not flow: the hook gives None back (Paddle
    then keeps what it had) instead of failing inside the backward pass."""
    assert gradient_flags._with_eager_flag(None) is None


def _chained(translate) -> list:  # noqa: ANN001
    """Two layers, the second reading the first's output (retained), two steps: the gradients' flags and
    values."""
    paddle.seed(3)
    encoder, decoder = nn.Linear(3, 4), nn.Linear(4, 2)
    encode, decode = translate(encoder), translate(decoder)
    pictures = []
    for step in range(2):
        h = encode(paddle.full([2, 3], float(step + 1)))
        h.retain_grads()
        decode(h).sum().backward()
        pictures += [(t.stop_gradient, t.numpy()) for t in (h.grad, encoder.weight.grad, decoder.bias.grad)]
    return pictures


def test_both_ways_give_eager_flags_through_chained_compiled_layers(way: str) -> None:
    """End to end, each way: parameters held by the programs and a retained activation between them get
    eager's flags and values."""
    with sot.config.patch(min_graph_size=0):
        got = _chained(sot.symbolic_translate)
    for (flag, value), (want_flag, want_value) in zip(got, _chained(lambda layer: layer), strict=True):
        assert flag == want_flag
        np.testing.assert_allclose(value, want_value, rtol=1e-6)


def _activations_across_a_break(layer: nn.Layer, x: paddle.Tensor) -> paddle.Tensor:
    first, second = paddle.split(paddle.tanh(layer(x)), 2, axis=1)
    sot.psdb.breakgraph()
    return (first * second).mean()


def test_activations_across_a_break_are_not_viewed_when_nothing_observes_them(monkeypatch) -> None:  # noqa: ANN001
    """With the extension, the activations a resume function gets are fed as they are at every step after the
    first: the hooks sot itself puts on the first graph's outputs at every call (its version check, the hook keeping the run's scope for the
    backward) are no observers. The parameters' gradients are eager's, flags and values."""
    if not NATIVE:
        pytest.skip(f"C++ extension not used: {gradient_flags.status()}")
    viewed = []
    native_fed = gradient_flags._fed

    def recording_fed(inputs: list, grad_inputs: list[int], non_leaves: bool) -> list:
        fed = native_fed(inputs, grad_inputs, non_leaves)
        viewed.append(sum(fed[i] is not inputs[i] for i in grad_inputs if not inputs[i].is_leaf))
        return fed

    monkeypatch.setattr(gradient_flags, "_fed", recording_fed)

    def run(function) -> list:  # noqa: ANN001
        paddle.seed(5)
        layer = nn.Linear(4, 6)
        pictures = []
        for step in range(4):
            function(layer, paddle.full([3, 4], float(step))).backward()
            pictures += [(p.grad.stop_gradient, p.grad.numpy().copy()) for p in (layer.weight, layer.bias)]
        return pictures

    with sot.config.patch(min_graph_size=0):
        got = run(sot.symbolic_translate(_activations_across_a_break))
    for (flag, value), (want_flag, want_value) in zip(got, run(_activations_across_a_break), strict=True):
        assert flag == want_flag
        np.testing.assert_allclose(value, want_value, rtol=1e-6)
    # (at the first step a one-time hook on the first graph's outputs builds its backward: viewed then)
    assert len(viewed) == 8 and not any(viewed[2:]), viewed

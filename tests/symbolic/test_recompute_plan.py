"""The recomputing backward of a call uses the values the forward saw (`sot.symbolic.recompute_plan`): an input
eager's backward does not keep, changed in place after the call, gives eager's gradients (of the values at the
call); one eager keeps makes the backward refuse, as eager's does; a held parameter eager keeps too. Every value
and error is compared with eager's."""
from __future__ import annotations

import copy
import gc
from typing import Any, Callable

import numpy as np
import paddle
import paddle.nn as nn
import pytest

import sot
from sot.symbolic import recompute_plan
from sot.symbolic.compile import _compiled
from sot.symbolic.recompute_plan import RecomputePlan


def _leaf(seed: int = 0, shape: tuple = (3, 4)) -> paddle.Tensor:
    x = paddle.to_tensor(np.random.default_rng(seed).standard_normal(shape).astype("float32"))
    x.stop_gradient = False
    return x


def _outcome(action: Callable[[], list]) -> Any:
    """The arrays ``action`` returns, or what it raised (type, message before Paddle's location)."""
    try:
        return [None if a is None else np.round(a, 4).tolist() for a in action()]
    except Exception as exc:  # noqa: BLE001
        return type(exc).__name__, str(exc).split(" (at ")[0]


def shifted(x, offset):
    return paddle.tanh(x + offset) * 2.0  # tanh keeps its output: neither x nor offset is kept


def kept_factor(x, factor):
    return paddle.tanh(x) * factor  # multiply keeps factor (and tanh(x))


def picked(x, index):
    return x[index] * 3.0  # the gradient scatters to the places index names: index is kept


CASES = {
    "x of tanh(x + offset)": (shifted, lambda: paddle.full([4], 0.5), "x"),
    "offset of tanh(x + offset)": (shifted, lambda: paddle.full([4], 0.5), "other"),
    "factor of tanh(x) * factor": (kept_factor, lambda: paddle.full([4], 2.0), "other"),
    "index of x[index]": (picked, lambda: paddle.to_tensor([0, 2]), "other"),
}


def _changed_before_the_backward(function: Callable, other: Callable, which: str, create_graph: bool) -> list:
    x = _leaf()
    second = other()
    out = function(x, second)
    with paddle.no_grad():
        changed = x if which == "x" else second
        changed.add_(paddle.ones_like(changed))
    if create_graph:
        (slope,) = paddle.grad(out.sum(), x, create_graph=True)
        (slope * slope).sum().backward()
        return [slope.numpy(), x.grad.numpy()]
    out.sum().backward()
    return [x.grad.numpy()]


@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("case", list(CASES))
def test_an_input_changed_in_place_after_the_call_is_eagers(compile_all, case, create_graph) -> None:
    function, other, which = CASES[case]
    expected = _outcome(lambda: _changed_before_the_backward(function, other, which, create_graph))
    fast = sot.symbolic_translate(function)
    actual = _outcome(lambda: _changed_before_the_backward(fast, other, which, create_graph))
    assert actual == expected  # (a value, or eager's refusal: its type and message)


def test_the_plan_copies_what_eager_does_not_keep(compile_all) -> None:
    sot.symbolic_translate(shifted)(_leaf(), paddle.full([4], 0.5))
    sot.symbolic_translate(kept_factor)(_leaf(), paddle.full([4], 2.0))
    plans = {program.sir.name: program.recompute_plan((0,)) for program in _compiled.values()
             if program.sir.name in ("shifted", "kept_factor")}
    assert plans["shifted"] == RecomputePlan(frozenset({0, 1}), frozenset(), frozenset({0, 1}))
    # (tanh(x) keeps its output: x is read only to recompute it)
    assert plans["kept_factor"] == RecomputePlan(frozenset({0, 1}), frozenset({1}), frozenset({0}))


def test_a_call_without_a_change_pays_no_stand_in(compile_all) -> None:
    """Unchanged inputs are used as they are (their copies only wait for a change)."""
    fast = sot.symbolic_translate(shifted)

    def gradient(function: Callable) -> list:
        x = _leaf()
        function(x, paddle.full([4], 0.5)).sum().backward()
        return [x.grad.numpy()]

    assert _outcome(lambda: gradient(fast)) == _outcome(lambda: gradient(shifted))


class Scaled(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return paddle.tanh(self.fc(x))


def _parameter_changed(model: nn.Layer, inner: nn.Layer, grad_input: bool, name: str) -> list:
    x = paddle.ones([2, 4])
    x.stop_gradient = not grad_input
    out = model(x)
    with paddle.no_grad():
        getattr(inner.fc, name).scale_(2.0)
    out.sum().backward()
    return [inner.fc.weight.grad.numpy(), None if x.grad is None else x.grad.numpy()]


@pytest.mark.parametrize("grad_input", [False, True], ids=["program backward", "recomputed"])
def test_a_held_weight_changed_in_place_before_the_backward_is_refused_as_eager(compile_all, grad_input) -> None:
    """Eager's matmul keeps the weight: changed in place before the backward, eager refuses; the compiled call
    refuses with eager's error (it gave a gradient of the new weight)."""
    paddle.seed(3)
    model = Scaled()
    eager = copy.deepcopy(model)
    expected = _outcome(lambda: _parameter_changed(eager, eager, grad_input, "weight"))
    assert expected[0] == "RuntimeError"
    actual = _outcome(lambda: _parameter_changed(sot.symbolic_translate(model), model, grad_input, "weight"))
    assert actual == expected


def test_a_held_bias_changed_in_place_before_the_program_backward_is_eagers(compile_all) -> None:
    """Eager keeps no bias: the gradient is eager's."""
    paddle.seed(3)
    model = Scaled()
    eager = copy.deepcopy(model)
    expected = _outcome(lambda: _parameter_changed(eager, eager, False, "bias"))
    assert _outcome(lambda: _parameter_changed(sot.symbolic_translate(model), model, False, "bias")) == expected


class Chain(nn.Layer):
    """Held tensors eager's backward does not keep: biases (one frozen), a frozen embedding table. (Frozen: the
    product program of a trainable one has ``embedding_grad``, which has no gradient in Paddle's static mode.)"""

    def __init__(self) -> None:
        super().__init__()
        self.embedding, self.fc, self.out = nn.Embedding(5, 4), nn.Linear(4, 3), nn.Linear(3, 3)
        self.out.bias.stop_gradient = True
        self.embedding.weight.stop_gradient = True

    def forward(self, x: paddle.Tensor, ids: paddle.Tensor) -> paddle.Tensor:
        return paddle.tanh(self.out(paddle.tanh(self.fc(x + self.embedding(ids).sum(0)))))


HELD_CHANGES: dict[str, Callable[[Chain], Any]] = {
    "bias": lambda model: model.fc.bias.scale_(2.0),
    "frozen bias": lambda model: model.out.bias.scale_(2.0),
    "embedding": lambda model: model.embedding.weight.scale_(3.0),
}


def _held_changed(model: nn.Layer, inner: Chain, change: Callable[[Chain], Any], when: str) -> list:
    """A held tensor changed in place under no_grad before a backward (``retain_graph``, then a second one),
    between ``paddle.grad(..., create_graph=True)`` and a backward through its result, or between two calls
    of three whose outputs one backward differentiates."""
    x = _leaf(0, (2, 4))
    ids = paddle.to_tensor([1, 3])
    out = model(x, ids)
    found = []
    if when == "before the backward":
        with paddle.no_grad():
            change(inner)
        out.sum().backward(retain_graph=True)
        found.append(x.grad.numpy())
        out.sum().backward()
    elif when == "between the passes":
        (slope,) = paddle.grad(out.sum(), x, create_graph=True)
        with paddle.no_grad():
            change(inner)
        (slope * slope).sum().backward()
        found.append(slope.numpy())
    else:
        second = model(x, ids)
        with paddle.no_grad():
            change(inner)
        (out.sum() + second.sum() * 2.0 + model(x, ids).sum() * 3.0).backward()
    return found + [x.grad.numpy()] + [None if p.grad is None else p.grad.numpy() for p in inner.parameters()]


@pytest.mark.parametrize("when", ["before the backward", "between the passes", "between calls"])
@pytest.mark.parametrize("change", list(HELD_CHANGES))
def test_a_held_tensor_eager_does_not_keep_changed_in_place_gives_eagers_gradients(compile_all, change, when):
    """Eager's backward keeps no bias nor embedding table: changed in place after the call, the gradients are
    those of the values at the call. The recomputation reads a copy taken at the call (`recompute_plan.HeldCopies`;
    sot refused a changed held parameter, and silently recomputed from a frozen one's new values)."""
    paddle.seed(3)
    model = Chain()
    eager = copy.deepcopy(model)
    expected = _outcome(lambda: _held_changed(eager, eager, HELD_CHANGES[change], when))
    assert not isinstance(expected, tuple), expected  # (values, no refusal)
    translated = sot.symbolic_translate(model)
    assert _outcome(lambda: _held_changed(translated, model, HELD_CHANGES[change], when)) == expected
    assert (sot.stats().graph_breaks, sot.stats().fallbacks) == (0, 0), sot.stats()


def test_a_held_weight_changed_between_the_passes_is_refused_as_eager(compile_all) -> None:
    """Eager's nodes of every order keep the weight (the first-order gradient reads it): changed between
    ``paddle.grad(..., create_graph=True)`` and a backward through its result, eager refuses, and so does the
    product program's call (it keeps what the differentiated program's backward reads, not what its own static
    backward reads: that one reads the bias too, which eager never keeps)."""
    paddle.seed(3)
    model = Chain()
    eager = copy.deepcopy(model)
    def change(chain: Chain) -> None:
        chain.fc.weight.scale_(2.0)

    expected = _outcome(lambda: _held_changed(eager, eager, change, "between the passes"))
    assert expected[0] == "RuntimeError"
    translated = sot.symbolic_translate(model)
    assert _outcome(lambda: _held_changed(translated, model, change, "between the passes")) == expected


def test_copies_of_held_tensors_are_shared_by_equal_values_and_dropped_with_their_calls(compile_all) -> None:
    """Calls that see a held tensor with the same values share one copy (one per inplace version); the copies go
    when the backward lets the calls go."""
    paddle.seed(3)
    model = Chain()
    translated = sot.symbolic_translate(model)
    x, ids = _leaf(0, (2, 4)), paddle.to_tensor([1, 3])
    first, second = translated(x, ids), translated(x, ids)
    copies = recompute_plan.HELD_COPIES._copies
    bias = copies[id(model.fc.bias)]
    held = {id(p): p for p in model.parameters()}
    assert {key for key in copies if key in held} == set(held) - {id(model.fc.weight), id(model.out.weight)}
    with paddle.no_grad():
        model.fc.bias.scale_(2.0)
    third = translated(x, ids)
    assert copies[id(model.fc.bias)][2]() is not bias[2]()  # (a new version: a new copy)
    dropped = [bias[2], copies[id(model.fc.bias)][2], copies[id(model.embedding.weight)][2]]
    (first.sum() + second.sum() + third.sum()).backward()
    gc.collect()
    assert [reference() for reference in dropped] == [None, None, None]


def test_a_released_group_reached_by_a_later_pass_refuses(compile_all) -> None:
    """Two outputs of one group: a pass through the first lets the call's inputs go; a later pass through the
    second is refused, as eager refuses a pass through nodes a pass without ``retain_graph`` cleared."""

    def both(x):
        y = paddle.tanh(x)
        return y * 2.0, y * 3.0

    def second_pass(function: Callable) -> Any:
        x = _leaf()
        a, b = function(x)
        a.sum().backward()
        try:
            b.sum().backward()
        except Exception as exc:  # noqa: BLE001
            return "retain_graph=True" in str(exc)
        return x.grad.numpy()

    assert second_pass(both) is True
    assert second_pass(sot.symbolic_translate(both)) is True

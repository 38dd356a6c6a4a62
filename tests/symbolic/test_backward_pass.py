"""Whether a backward pass keeps its graph (`sot.symbolic.backward_pass`), compared with what eager autograd does:
a second pass through a compiled call after each way of starting the first works, or raises, as eager's does
(type and the start of the message); what a recomputed call and the version checks keep is let go after a pass
that does not keep the graph, and kept otherwise."""
from __future__ import annotations

import gc
import weakref
from typing import Any, Callable

import numpy as np
import paddle
import pytest

import sot
from sot.symbolic import backward_pass


def scaled(x, factor):
    return (paddle.tanh(x) * factor).sum()  # a recomputing backward (x is a leaf requiring grad)


def scaled_product(w, y):
    return ((w * y) * 2.0).sum()  # y does not require grad: the program's own backward (multiply keeps y)


def _leaf() -> paddle.Tensor:
    return paddle.to_tensor(np.linspace(-1.0, 1.0, 3).astype("float32"), stop_gradient=False)


FIRST_PASSES: dict[str, Callable[[paddle.Tensor, paddle.Tensor], Any]] = {
    "backward": lambda out, x: out.backward(),
    "backward retaining": lambda out, x: out.backward(retain_graph=True),
    "autograd.backward": lambda out, x: paddle.autograd.backward([out]),
    "autograd.backward retaining": lambda out, x: paddle.autograd.backward([out], retain_graph=True),
    "grad": lambda out, x: paddle.grad(out, x),
    "grad not retaining": lambda out, x: paddle.grad(out, x, retain_graph=False),
    "grad retaining": lambda out, x: paddle.grad(out, x, retain_graph=True),
    "grad creating a graph": lambda out, x: paddle.grad(out, x, create_graph=True),
}
SECOND_PASSES: dict[str, Callable[[paddle.Tensor, paddle.Tensor], Any]] = {
    "backward": lambda out, x: out.backward(),
    "grad": lambda out, x: paddle.grad(out, x),
}


def _two_passes(function: Callable, first: Callable, second: Callable) -> Any:
    """The gradient of the leaf after both passes, or what the second raised (type, message up to Paddle's
    node name)."""
    x = _leaf()
    out = function(x, paddle.full([3], 2.0))
    first(out, x)
    try:
        second(out, x)
    except Exception as exc:  # noqa: BLE001
        return type(exc).__name__, str(exc).split(" The TensorWrappers of ")[0]
    return None if x.grad is None else np.round(x.grad.numpy(), 5).tolist()


@pytest.mark.parametrize("second", list(SECOND_PASSES))
@pytest.mark.parametrize("first", list(FIRST_PASSES))
@pytest.mark.parametrize("function", [scaled, scaled_product], ids=["recomputed", "program backward"])
def test_a_second_pass_after_each_first_pass_is_eagers(compile_all, function, first, second) -> None:
    fast = sot.symbolic_translate(function)
    expected = _two_passes(function, FIRST_PASSES[first], SECOND_PASSES[second])
    assert _two_passes(fast, FIRST_PASSES[first], SECOND_PASSES[second]) == expected


def _factor_kept(function: Callable, first: Callable) -> bool:
    factor = paddle.full([3], 2.0)
    kept = weakref.ref(factor)
    x = _leaf()
    out = function(x, factor)
    first(out, x)
    del factor
    gc.collect()
    alive = kept() is not None
    del out
    return alive


@pytest.mark.parametrize("function", [scaled, scaled_product], ids=["recomputed", "program backward"])
def test_a_pass_not_keeping_the_graph_lets_the_inputs_go(compile_all, function) -> None:
    """The factor is kept by the recomputation (its inputs) and by the version check of the outputs (multiply
    keeps it): both let it go after ``backward()``, as eager does, while the output lives on."""
    fast = sot.symbolic_translate(function)
    for first in ("backward", "autograd.backward"):
        assert not _factor_kept(function, FIRST_PASSES[first])
        assert not _factor_kept(fast, FIRST_PASSES[first]), first


def test_a_pass_keeping_the_graph_keeps_what_the_next_needs(compile_all) -> None:
    """After ``backward(retain_graph=True)`` or any ``paddle.grad``, the recomputed call keeps its inputs: the next
    pass recomputes from them."""
    fast = sot.symbolic_translate(scaled)
    for first in ("backward retaining", "autograd.backward retaining", "grad", "grad not retaining"):
        assert _factor_kept(fast, FIRST_PASSES[first]), first


@pytest.mark.parametrize("function", [scaled, scaled_product], ids=["recomputed", "program backward"])
def test_a_second_pass_retaining_the_graph_checks_versions_again(compile_all, function) -> None:
    """Each pass checks the versions of what the backward reads: a change between two passes of a retained graph
    is refused by the second, as eager's is (the check used to run once only)."""

    def second_after_a_change(function: Callable) -> Any:
        w, y = _leaf(), paddle.full([3], 2.0)
        out = function(w, y)
        out.backward(retain_graph=True)
        with paddle.no_grad():
            y.scale_(3.0)
        try:
            out.backward()
        except Exception as exc:  # noqa: BLE001
            return type(exc).__name__, str(exc).split(" (at ")[0]
        return np.round(w.grad.numpy(), 5).tolist()

    eager = second_after_a_change(function)
    assert eager[0] == "RuntimeError"
    assert second_after_a_change(sot.symbolic_translate(function)) == eager


def test_outside_a_pass_the_graph_counts_as_kept() -> None:
    assert backward_pass.pass_keeps_graph()


def test_the_pass_is_recorded_by_the_wrappers_of_its_entry_points() -> None:
    """Inside a hook: the answer of the pass that calls it."""
    assert backward_pass.install()
    seen = []
    for flags in ({}, {"retain_graph": True}):
        x = _leaf()
        y = x * 2.0
        y.register_hook(lambda grad: seen.append(backward_pass.pass_keeps_graph()))
        y.sum().backward(**flags)
    for flags in ({}, {"retain_graph": False}):
        x = _leaf()
        y = x * 2.0
        y.register_hook(lambda grad: seen.append(backward_pass.pass_keeps_graph()))
        paddle.grad(y.sum(), x, **flags)
    assert seen == [False, True, True, True]


def _own_frames(failure: BaseException) -> list[str]:
    frames = []
    tb = failure.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == backward_pass.__file__:
            frames.append(tb.tb_frame.f_code.co_name)
        tb = tb.tb_next
    return frames


class _FailingBackward(paddle.autograd.PyLayer):
    @staticmethod
    def forward(ctx, x):
        return x * 2.0

    @staticmethod
    def backward(ctx, grad):
        raise ValueError("the user's backward failed")


@pytest.mark.parametrize("failing", ["second backward", "grad of an unused input", "user backward raising"])
def test_a_failing_pass_shows_one_frame_of_the_wrapper(failing):
    """A pass through a compiled call that Paddle refuses raises as eagerly, its traceback holding one line of
    sot's pass wrapper (the re-raise), not the three frames it runs through."""
    def step(x):
        return (_FailingBackward.apply(x) if failing == "user backward raising" else paddle.tanh(x) * 3.0).sum()

    def failure_of(function: Callable) -> BaseException:
        out = function(_leaf())
        with pytest.raises(Exception) as raised:
            if failing == "second backward":
                out.backward()
                out.backward()
            elif failing == "grad of an unused input":
                paddle.grad(out, [paddle.ones([3])])
            else:
                out.backward()
        return raised.value

    eager = failure_of(step)
    with sot.config.patch(min_graph_size=0):
        translated = failure_of(sot.symbolic_translate(step))
    assert type(translated) is type(eager)
    assert _own_frames(translated) == [{"grad of an unused input": "_run_partial_grad"}.get(failing, "_run_backward")]

"""Entries whose code is right for any inputs relax their guard (native.py `relaxed_guard`).

An entry that runs the original code, or native code whose trampolines pass what any call has at the
break (`trampolines_fit_any_call`), gives eager's results whatever the inputs: its guard only decides
whether the translation (the cost model's choices, hook-freedom) still fits. The C cache then runs the
checks of the arguments themselves on every hit (another shape or dtype misses at once) and the whole
guard every ``RELAXED_GUARD_PERIOD`` hits (a layer's tree, globals, the grad/AMP mode). These tests check
that results stay eager's through changes seen late, when the checks run, and that a frame whose
trampolines depend on the path taken keeps its full guard.
"""
from __future__ import annotations

import numpy as np
import paddle
import pytest

import sot
from sot.eval_frame_ext import RELAXED_GUARD_PERIOD, cache_entries
from sot.opcode_translator.native import ORIGINAL

from conftest import assert_same


class SmallBranch(paddle.nn.Layer):
    """A tensor-valued ``if`` between pieces too small to compile: the entry comes to run natively."""

    def __init__(self) -> None:
        super().__init__()
        self.w = self.create_parameter([8], default_initializer=paddle.nn.initializer.Constant(0.5))

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        scaled = self.w * x
        if x.sum() > 0:
            return paddle.tanh(scaled) * 3.0
        return -scaled


def _positive(rows: int = 4, dtype: str = "float32") -> paddle.Tensor:
    return paddle.to_tensor((np.abs(np.random.default_rng(rows).standard_normal((rows, 8))) + 0.1).astype(dtype))


def _plan(code):
    [(guard, _)] = cache_entries(code)
    return guard.native_plan


def _settled() -> tuple[SmallBranch, SmallBranch, object]:
    """An eager layer, its translated twin (the same parameters) after a few calls, and the input."""
    layer = SmallBranch()
    fast = sot.symbolic_translate(layer)
    x = _positive()
    for _ in range(3):
        assert_same(fast(x), layer(x))
    return layer, fast, x


def test_a_native_entry_has_a_relaxed_guard() -> None:
    _settled()
    plan = _plan(SmallBranch.forward.__code__)
    assert plan.current is not plan.translated and plan.relaxed
    # Only the checks of the arguments themselves run on every hit (the layer's type, the input's meta).
    relaxed = cache_entries(SmallBranch.forward.__code__)[0][0].guard.relaxed_check
    assert callable(relaxed)


@pytest.mark.parametrize("change", ["shape", "dtype"])
def test_an_argument_change_misses_at_once(change: str) -> None:
    layer, fast, _ = _settled()
    before = sot.stats().translate_count
    x = _positive(rows=6) if change == "shape" else _positive(dtype="float64")
    if change == "dtype":
        layer.to(dtype="float64")
    assert_same(fast(x), layer(x))
    assert sot.stats().translate_count > before


def test_a_grad_mode_change_is_seen_by_the_next_full_guard() -> None:
    layer, fast, x = _settled()
    before = sot.stats().translate_count
    with paddle.no_grad():
        for call in range(RELAXED_GUARD_PERIOD + 1):
            out = fast(x)
            assert_same(out, layer(x))
            assert out.stop_gradient, "the original code ran under no_grad, as eagerly"
            if call == 0:
                assert sot.stats().translate_count == before
    assert sot.stats().translate_count > before


def test_a_change_inside_the_layer_is_seen_by_the_next_full_guard() -> None:
    layer, fast, x = _settled()
    before = sot.stats().translate_count
    # A parameter of another shape (broadcast alike): the guard's meta check of `self.w` fails, but only the
    # full guard reads it. The native code reads `self.w` itself: every call is still eager's.
    layer.w = layer.create_parameter([1], default_initializer=paddle.nn.initializer.Constant(3.0))
    assert_same(fast(x), layer(x))
    assert sot.stats().translate_count == before, "seen late: the relaxed check reads the arguments only"
    for _ in range(RELAXED_GUARD_PERIOD):
        assert_same(fast(x), layer(x))
    assert sot.stats().translate_count > before, "the full guard runs every RELAXED_GUARD_PERIOD hits"
    assert_same(fast(x), layer(x))


FLAG = True


def bound_on_one_path(x: paddle.Tensor) -> paddle.Tensor:
    if FLAG:
        y = x + 1.0
    if x.mean() > 0:
        return x * 2.0
    return y  # noqa: F821 (bound only when FLAG was true: an UnboundLocalError otherwise, as eagerly)


def test_a_trampoline_that_depends_on_the_path_taken_keeps_the_full_guard() -> None:
    global FLAG
    FLAG = False
    try:
        fast = sot.symbolic_translate(bound_on_one_path)
        x = _positive()
        for _ in range(3):
            assert_same(fast(x), bound_on_one_path(x))
        plan = _plan(bound_on_one_path.__code__)
        assert plan.current is not plan.translated
        # The branch not taken still calls its resume function, passing the live locals bound in this
        # translation: not `y`, which another call may have bound. Its guard (`FLAG`) stays whole.
        assert any(path.from_jump for path in plan.paths)
        assert plan.current is not ORIGINAL and not plan.relaxed
        FLAG = True
        assert_same(fast(-x), bound_on_one_path(-x))
        FLAG = False
        with pytest.raises(UnboundLocalError):
            fast(-x)
    finally:
        FLAG = True


def test_a_changed_global_in_an_original_code_entry_gives_eager_results() -> None:
    global FLAG
    fast = sot.symbolic_translate(bound_on_one_path)
    x = _positive()
    for sign in (1.0, -1.0, 1.0):  # both branches taken: both run natively, the entry runs the original
        assert_same(fast(sign * x), bound_on_one_path(sign * x))
    code = bound_on_one_path.__code__
    assert [new for _, new in cache_entries(code)] == [code] and _plan(code).relaxed
    FLAG = False
    try:
        for _ in range(RELAXED_GUARD_PERIOD + 2):
            with pytest.raises(UnboundLocalError):
                fast(-x)
            assert_same(fast(x), bound_on_one_path(x))
    finally:
        FLAG = True

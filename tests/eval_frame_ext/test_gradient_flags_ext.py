"""The C++ extension of the gradient flags (sot/eval_frame_ext/gradient_flags.cpp, used by
`sot.symbolic.gradient_flags`): what it reads of a tensor's retain note and of the hooks at its slot, what `fed`
decides from that, and the errors it gives instead of reading what it cannot."""
from __future__ import annotations

import paddle
import pytest

from sot.symbolic import gradient_flags
from sot.symbolic.version_check import PermissionDeniedHook

# (Built, it must be used: a calibration that fails here fails these tests instead of skipping them.)
pytestmark = pytest.mark.skipif(gradient_flags._ext is None, reason="the C++ extension is not built")


def _leaf() -> paddle.Tensor:
    leaf = paddle.ones([2, 3])
    leaf.stop_gradient = False
    return leaf


def test_it_is_used_with_the_paddle_it_was_built_for() -> None:
    """Built against the running Paddle, its readings of the sample tensors right: `install` uses it (else the
    status says why not)."""
    assert gradient_flags._ext.PADDLE_COMMIT == paddle.version.commit
    assert gradient_flags.status() == "installed"


def test_what_the_extension_reads_of_a_non_leaf() -> None:
    """`gradient_observed`: a non-leaf's gradient retained, or hooked at its own slot and rank by anything but
    sot's version check (`PermissionDeniedHook`) and the flag hook; `slot_hooks` lists them. `fed` views a
    non-leaf only when such a hook comes before the flag hook."""
    ext = gradient_flags._ext
    x = _leaf()
    first, second = paddle.split(x * 2, [1, 2], axis=1)
    assert ext.slot_hooks(first) == (False, [], 0, 0) and not ext.gradient_observed(first)
    ext.fed([first], [0], True, gradient_flags._reshape)
    assert ext.slot_hooks(first) == (False, [], 1, 0) and not ext.gradient_observed(first)
    if PermissionDeniedHook is not None:
        first._register_grad_hook(PermissionDeniedHook(lambda grad: None))
        assert not ext.gradient_observed(first)
    first.retain_grads()  # (after the flag hook: the flag runs first, no view is needed)
    assert ext.gradient_observed(first) and ext.slot_hooks(first)[0] is True
    unchanged = [first]
    assert ext.fed(unchanged, [0], True, gradient_flags._reshape) is unchanged
    assert ext.slot_hooks(first)[2] == 1

    def hook(grad: paddle.Tensor) -> None:
        return None

    hook_id = second._register_grad_hook(hook)
    assert ext.gradient_observed(second) and ext.slot_hooks(second)[1] == [hook]
    assert ext.fed([second], [0], True, gradient_flags._reshape)[0] is not second
    second._remove_grad_hook(hook_id)
    assert not ext.gradient_observed(second)
    second.retain_grads()
    assert ext.gradient_observed(second) and ext.slot_hooks(second)[0] is True
    assert not ext.gradient_observed(x) and ext.slot_hooks(x)[0] is False  # (a leaf: retained, not observed)


def test_the_extension_refuses_what_it_cannot_read() -> None:
    """Arguments that are no tensors, bad indexes and a tensor type laid out otherwise are refused with Python
    errors; uncalibrated, the extension tells nothing (the Python way is then used: `install`)."""
    ext = gradient_flags._ext
    with pytest.raises(TypeError):
        ext.gradient_observed(3)
    with pytest.raises(TypeError):
        ext.fed((1,), [0], True, gradient_flags._reshape)
    with pytest.raises(IndexError):
        ext.fed([_leaf()], [1], True, gradient_flags._reshape)
    assert ext.fed([3, "a"], [0, 1], True, gradient_flags._reshape) == [3, "a"]  # (no tensors: left)
    with pytest.raises(RuntimeError):
        ext.calibrate(int, int, ())
    try:
        with pytest.raises(RuntimeError, match="not calibrated"):
            ext.fed([_leaf()], [0], True, gradient_flags._reshape)
    finally:
        gradient_flags._calibrate()
    assert ext.gradient_observed(_leaf() * 2) is False

"""Helpers the generated code calls at run time (`sot.opcode_translator.runtime`)."""
from __future__ import annotations

import numpy as np
import paddle
import pytest

from sot.opcode_translator.runtime import write_back_tensor


@pytest.mark.parametrize("gradient", [True, False], ids=["with gradient", "without"])
@pytest.mark.parametrize("target", ["contiguous", "strided view"])
@pytest.mark.parametrize("changes", [1, 3])
def test_write_back_copies_into_the_target_memory_and_counts_each_change(target, changes, gradient):
    """`write_back_tensor`: the values land in the target's own memory (a strided view's too: there the copy
    is ``assign_out_``, as ``out=`` would write it as a contiguous block), the target takes the value's
    gradient (if it has one), and its inplace version grows by one per change the frame made."""
    base = paddle.arange(6, dtype="float32").reshape([2, 3])
    view = base[:, 1] if target == "strided view" else base[1]
    assert view.is_contiguous() is (target == "contiguous")
    w = paddle.to_tensor([5.0, 6.0] if target == "strided view" else [5.0, 6.0, 7.0], stop_gradient=not gradient)
    version = view._inplace_version()
    write_back_tensor(view, w * 2.0, changes)
    expected = np.arange(6, dtype="float32").reshape([2, 3])
    if target == "strided view":
        expected[:, 1] = [10.0, 12.0]
    else:
        expected[1] = [10.0, 12.0, 14.0]
    np.testing.assert_array_equal(base.numpy(), expected)
    assert view._inplace_version() == version + changes
    assert view.stop_gradient is not gradient
    if gradient:
        assert not view.is_leaf
        (view * view).sum().backward()
        np.testing.assert_allclose(w.grad.numpy(), 4.0 * (w * 2.0).numpy())


def test_a_tensor_written_back_with_gradient_is_differentiated_twice():
    """The recorded copy has a gradient of its gradient, as eager's in-place ops do (``assign_out_``, which
    ``paddle.assign(value, output=target)`` records, has none)."""
    target = paddle.ones([3])
    w = paddle.to_tensor([1.0, 2.0, 3.0], stop_gradient=False)
    write_back_tensor(target, w * w, 1)
    (slope,) = paddle.grad((target * target).sum(), w, create_graph=True)  # 4 w^3
    np.testing.assert_allclose(slope.numpy(), 4.0 * np.array([1.0, 8.0, 27.0]))
    slope.sum().backward()  # 12 w^2
    np.testing.assert_allclose(w.grad.numpy(), 12.0 * np.array([1.0, 4.0, 9.0]))

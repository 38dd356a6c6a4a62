"""A call given a symbolic int (a dynamic dimension) whose static meta disagrees with its eager form's
(`FunctionGraph._symbolic_meta_agrees`): ``F.affine_grid(theta, [n, c, h, w])`` infers a rank-5 grid from a
tensor ``n``; every op after it was mis-inferred and the frame fell back."""
from __future__ import annotations

import numpy as np
import paddle
import paddle.nn.functional as F

import sot

THETA = paddle.to_tensor([[[0.9, 0.1, 0.0], [-0.1, 0.9, 0.0]]])


def _warp_input(x: paddle.Tensor) -> paddle.Tensor:
    batch, channels, height, width = x.shape
    grid = F.affine_grid(THETA.expand([batch, 2, 3]), [batch, channels, height, width], align_corners=False)
    return F.unfold(F.grid_sample(x, grid, align_corners=False), kernel_sizes=3, strides=2)


def _warp_computed(x: paddle.Tensor) -> paddle.Tensor:
    x = F.relu(x * 2.0)
    return _warp_input(x) + 1.0


def test_a_shape_of_input_dimensions_is_passed_as_ints(compile_all: None) -> None:
    """The batch size is pinned for affine_grid (one translation per batch size), no fallback."""
    for batch in (2, 3, 4):
        x = paddle.randn([batch, 4, 7, 7])
        np.testing.assert_allclose(sot.symbolic_translate(_warp_input)(x).numpy(), _warp_input(x).numpy(),
                                   rtol=1e-5, atol=1e-6)
    stats = sot.stats()
    assert (stats.graph_breaks, stats.fallbacks) == (0, 0), stats


def test_a_shape_of_computed_dimensions_breaks_there(compile_all: None) -> None:
    """A dynamic dimension of a computed tensor has no value to pin: a break at affine_grid, not a fallback."""
    for batch in (2, 3, 4):
        x = paddle.randn([batch, 4, 7, 7])
        np.testing.assert_allclose(sot.symbolic_translate(_warp_computed)(x).numpy(), _warp_computed(x).numpy(),
                                   rtol=1e-5, atol=1e-6)
    stats = sot.stats()
    assert stats.fallbacks == 0, stats

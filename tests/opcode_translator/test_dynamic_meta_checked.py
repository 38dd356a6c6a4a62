"""An op whose static meta inference is wrong for a dynamic dimension of its inputs
(`FunctionGraph._dynamic_meta_untrusted`): ``paddle.fft.rfft`` of ``[2, -1]`` infers ``[2, 1]`` (n // 2 + 1 of
-1), and the program built with that meta dropped a later ``[..., :3]`` as a no-op: the result had the wrong
shape, silently, from the second input size on. Checked by inferring again with a size for the dynamic
dimensions; where they disagree the dimensions become numbers: an input's pinned (a translation per size), a
computed tensor's a graph break there."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import paddle
import pytest

import sot

LOW_MODES: dict[str, Callable[[paddle.Tensor], paddle.Tensor]] = {
    "rfft2 sliced": lambda x: paddle.fft.rfft2(x)[:, :, :3, :3].real() * 2,
    "rfft with n sliced": lambda x: paddle.fft.rfft(x, n=16)[..., :3].real() * 2,
    "rfft magnitude sliced": lambda x: paddle.fft.rfft(x).abs()[..., 1:3] * 2,
    "rfftn sliced": lambda x: paddle.fft.rfftn(x, axes=(-2, -1))[..., :3].real() + 1,
    "ihfft sliced": lambda x: paddle.fft.ihfft(x)[..., :3].imag() + 1,
}


def _same(actual: paddle.Tensor, expected: paddle.Tensor) -> None:
    assert list(actual.shape) == list(expected.shape)
    np.testing.assert_allclose(actual.numpy(), expected.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", list(LOW_MODES))
def test_an_op_mis_inferring_a_dynamic_input_dimension_gets_it_pinned(case: str, compile_all: Any) -> None:
    fn = LOW_MODES[case]
    translated = sot.symbolic_translate(fn)
    for size in (8, 12, 16, 12):
        x = paddle.randn([2, 1, size, size])
        _same(translated(x), fn(x))
    stats = sot.stats()
    assert (stats.graph_breaks, stats.fallbacks) == (0, 0), stats
    assert stats.translate_count == 3 and stats.cache_hits == 1  # (a translation per size, then a hit)


def spectral_filter(x: paddle.Tensor) -> paddle.Tensor:
    y = paddle.tanh(x) * 2.0
    return paddle.fft.rfft(y)[..., :3].abs() + 1.0


def test_a_computed_tensors_dynamic_dimension_breaks_the_graph_there(compile_all: Any) -> None:
    translated = sot.symbolic_translate(spectral_filter)
    for size in (8, 12, 16):
        x = paddle.randn([2, size])
        _same(translated(x), spectral_filter(x))
    assert sot.stats().fallbacks == 0


def test_an_op_inferring_dynamic_dimensions_right_stays_dynamic(compile_all: Any) -> None:
    """``fft2`` (the size kept) and plain ops: one dynamic translation serves every later size."""
    def fn(x):
        return paddle.fft.fft2(x).real()[..., :3] * 2 + paddle.tanh(x)[..., :3]

    translated = sot.symbolic_translate(fn)
    for size in (8, 12, 16, 20):
        x = paddle.randn([2, size, size])
        _same(translated(x), fn(x))
    assert sot.stats().translate_count == 2 and sot.stats().cache_hits == 2


def unshuffled(x: paddle.Tensor) -> paddle.Tensor:
    return paddle.nn.functional.pixel_unshuffle(x, 2) + 1


def unshuffled_computed(x: paddle.Tensor) -> paddle.Tensor:
    return paddle.nn.functional.pixel_unshuffle(x * 2, 2) + 1


@pytest.mark.parametrize("fn", [unshuffled, unshuffled_computed])
def test_an_op_rejecting_a_dynamic_dimension_gets_it_pinned(fn: Any, compile_all: Any) -> None:
    """``pixel_unshuffle``'s static check wants the width as a number ("should divide both height[4] and
    width[-1]"): pinned for an input, a break for a computed tensor; the frame used to fall back for good."""
    translated = sot.symbolic_translate(fn)
    for width in (8, 12, 16):
        x = paddle.randn([2, 1, 4, width])
        _same(translated(x), fn(x))
    assert sot.stats().fallbacks == 0
    assert sot.stats().graph_breaks == (0 if fn is unshuffled else 1)


def folded_back(x: paddle.Tensor) -> paddle.Tensor:
    """Patches taken apart and put back at the input's own size: ``output_sizes`` holds symbolic ints of the
    input, ``F.fold``'s static check also wants the patch count of the computed ``patches`` as a number."""
    patches = paddle.nn.functional.unfold(x, kernel_sizes=2, strides=2) * 2
    return paddle.nn.functional.fold(patches, output_sizes=x.shape[2:], kernel_sizes=2, strides=2)


def test_an_op_rejecting_a_computed_dimension_with_symbolic_int_arguments_breaks_there(compile_all: Any) -> None:
    """Pinning the symbolic ints alone does not satisfy the static check: the computed tensor's dynamic
    dimensions need numbers too, a graph break there (the frame fell back for good)."""
    translated = sot.symbolic_translate(folded_back)
    for height, width in ((6, 6), (8, 6), (6, 10), (8, 6)):
        x = paddle.randn([2, 3, height, width])
        _same(translated(x), folded_back(x))
    assert sot.stats().fallbacks == 0


BAKING_SIZES: dict[str, tuple[Any, Callable[[int], list]]] = {
    # (each reads a dynamic dimension as a number in its Python code: built with -1, the program was wrong)
    "kl_div batchmean": (lambda a, b: paddle.nn.functional.kl_div(a, b, reduction="batchmean"),
                         lambda n: [paddle.nn.functional.log_softmax(paddle.rand([n, 4]), -1),
                                    paddle.nn.functional.softmax(paddle.rand([n, 4]) * 3, -1)]),
    "KLDivLoss layer": (paddle.nn.KLDivLoss(reduction="batchmean"),
                        lambda n: [paddle.nn.functional.log_softmax(paddle.rand([n, 4]), -1),
                                   paddle.nn.functional.softmax(paddle.rand([n, 4]) * 3, -1)]),
    "take of a negative index": (lambda x: paddle.take(x, paddle.to_tensor([-1])),
                                 lambda n: [paddle.arange(n * 4, dtype="float32").reshape([n, 4])]),
    "tensor_split": (lambda x: paddle.tensor_split(x, 3, axis=0),
                     lambda n: [paddle.arange(n * 2, dtype="float32").reshape([n, 2])]),
    "covariance": (lambda x: paddle.linalg.cov(x), lambda n: [paddle.rand([3, n])]),
    "trapezoid": (lambda y: paddle.trapezoid(y, dx=0.5, axis=0), lambda n: [paddle.rand([n, 3])]),
    "select_scatter at the last index": (
        lambda x, v: paddle.select_scatter(x, v, axis=0, index=-1),
        lambda n: [paddle.rand([n, 3]), paddle.ones([3])]),
    "fft with n": (lambda x: paddle.fft.fft(x, n=10, axis=0).abs(), lambda n: [paddle.rand([n, 3])]),
    "quantile of data with a NaN": (lambda x: paddle.quantile(x, 0.5, axis=0), lambda n: [_with_nan(n)]),
    "rnnt_loss mean": (lambda x, label: paddle.nn.functional.rnnt_loss(
        x, label, paddle.full([x.shape[0]], 3, "int32"), paddle.full([x.shape[0]], 2, "int32"), reduction="mean"),
        lambda n: [paddle.rand([n, 3, 3, 4]), paddle.ones([n, 2], "int32")]),
}


def _with_nan(rows: int) -> paddle.Tensor:
    """Rows of data with one NaN in the last column: ``quantile`` sorts it last and must answer NaN there."""
    data = np.random.RandomState(rows).randn(rows, 3).astype("float32")
    data[1, 2] = np.nan
    return paddle.to_tensor(data)


@pytest.mark.parametrize("case", list(BAKING_SIZES))
def test_an_op_baking_a_dynamic_size_into_its_program_gets_it_pinned(case: str, compile_all: Any) -> None:
    """The program built from -1 differs from the one built from another size (its ops' attributes): the
    op's dynamic input dimensions are pinned (the results were wrong silently: a loss divided by -1)."""
    fn, make = BAKING_SIZES[case]
    translated = sot.symbolic_translate(fn)
    for size in (8, 12, 16):
        args = make(size)
        expected, actual = fn(*args), translated(*args)
        for want, got in zip(expected if isinstance(expected, (list, tuple)) else [expected],
                             actual if isinstance(actual, (list, tuple)) else [actual]):
            _same(got, want)
    assert sot.stats().fallbacks == 0


"""``recompute(function, ...)``: eager's backward runs ``function`` again, repeating what it changes outside
(a batch norm's running statistics, a list of the caller's). A translation computing it once must not hide
that: such a call runs natively (`recompute._call_recomputed`; a batch norm's statistics:
tests/symbolic/test_recomputed_backward_keeps_buffers.py)."""
from __future__ import annotations

import paddle
import pytest
from paddle.distributed.fleet.utils import recompute

import sot

calls: list[int] = []


def counted_block(x: paddle.Tensor) -> paddle.Tensor:
    calls.append(1)
    return paddle.tanh(x) * 2


def leaf() -> paddle.Tensor:
    x = paddle.ones([2])
    x.stop_gradient = False
    return x


@pytest.mark.parametrize("reentrant", [True, False])
def test_a_recomputed_function_appending_to_a_list_appends_again_in_backward(compile_all: None,
                                                                             reentrant: bool) -> None:
    def f(x: paddle.Tensor) -> paddle.Tensor:
        return recompute(counted_block, x, use_reentrant=reentrant)

    translated = sot.symbolic_translate(f)
    counts = []
    for fn in (translated, f, translated):
        calls.clear()
        x = leaf()
        out = fn(x)
        out.sum().backward()
        counts.append((len(calls), x.grad.numpy().tolist()))
    assert counts[0] == counts[1] == counts[2]


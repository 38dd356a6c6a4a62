"""``Tensor.cpu()`` (executor/variables/callable.py `_cpu`): eager returns the tensor itself when it is already
on the CPU, so in a build without any other device the call is the tensor (no graph break, same identity, same
gradient); with arguments, or where a tensor may live on another device, it runs natively."""
from __future__ import annotations

import numpy as np
import paddle
import pytest

import sot
from conftest import assert_counts, assert_same
from sot.opcode_translator.executor.variables import callable as callable_variables

pytestmark = pytest.mark.skipif(not callable_variables._only_cpu_places(), reason="a CPU-only build")


def _tensor(*shape: int, seed: int = 0) -> paddle.Tensor:
    return paddle.to_tensor(np.random.default_rng(seed).standard_normal(shape).astype("float32"))


def moved_to_cpu(x):
    y = (x * 2).cpu()
    return y + x.cpu(), x.cpu() is x


def test_cpu_of_a_cpu_tensor_is_the_tensor_in_one_graph(compile_all):
    x = _tensor(2, 3)
    x.stop_gradient = False
    fast = sot.symbolic_translate(moved_to_cpu)
    for _ in range(2):
        out, same = fast(x)
        ref, ref_same = moved_to_cpu(x)
        assert_same(out, ref)
        assert same is ref_same is True
    assert_counts(translate_count=1, cache_hits=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)
    out.sum().backward()
    grad = x.grad.numpy()
    x.clear_grad()
    ref.sum().backward()
    np.testing.assert_array_equal(grad, x.grad.numpy())


def test_cpu_runs_natively_where_a_tensor_may_be_on_another_device(compile_all, monkeypatch):
    monkeypatch.setattr(callable_variables, "_only_cpu_places", lambda: False)
    x = _tensor(2, 3)
    out, same = sot.symbolic_translate(moved_to_cpu)(x)
    assert_same(out, moved_to_cpu(x)[0])
    assert same is True
    assert sot.stats().graph_breaks >= 1

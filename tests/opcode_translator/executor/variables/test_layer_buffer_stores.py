"""A tensor assigned to a layer attribute (executor/variables/attribute.py `store_attribute`).

Rebinding a registered buffer (``self.running = self.running * 0.9 + ...``, a step counter ``self.steps =
self.steps + 1``) is recorded and written back after the graph through ``Layer.__setattr__``, which replaces it
in ``_buffers``: no break. A tensor assigned under a new name registers a buffer, and a built-in layer whose
own buffer was rebound would read the old one inside the program: both still run natively."""
from __future__ import annotations

import copy

import numpy as np
import paddle
import paddle.nn as nn
import pytest

import sot
from conftest import assert_same


def _tensor(*shape: int, seed: int = 0) -> paddle.Tensor:
    return paddle.to_tensor(np.random.default_rng(seed).standard_normal(shape).astype("float32"))


class RunningStats(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.norm = nn.LayerNorm(4)
        self.register_buffer("running", paddle.zeros([4]))
        self.register_buffer("steps", paddle.zeros([], "int64"), persistable=False)

    def forward(self, x):
        y = self.fc(x)
        self.running = self.running * 0.9 + y.mean(0).detach() * 0.1
        self.steps = self.steps + 1
        return self.norm(y) + self.running * self.steps.astype("float32")


def _run_pair(model: nn.Layer, calls: int = 3) -> None:
    eager = copy.deepcopy(model)
    fast = sot.symbolic_translate(model)
    for call in range(calls):
        x = _tensor(3, 4, seed=call)
        out, expected = fast(x), eager(x)
        assert_same(out, expected)
        for name, buffer in eager.named_buffers():
            assert_same(dict(model.named_buffers())[name], buffer)
        assert list(model.state_dict()) == list(eager.state_dict())
        out.sum().backward()
        expected.sum().backward()
        np.testing.assert_allclose(model.fc.weight.grad.numpy(), eager.fc.weight.grad.numpy(), rtol=1e-6)
        model.clear_gradients()
        eager.clear_gradients()


def test_rebinding_registered_buffers_is_recorded(compile_all):
    paddle.seed(1)
    _run_pair(RunningStats())
    stats = sot.stats()
    assert stats.translate_count == 1 and stats.graph_breaks == 0 and stats.fallbacks == 0, stats


class NewAttribute(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        y = self.fc(x)
        self.last = y.detach() * 2  # registers a non-persistable buffer named "last"
        return y + self.last


def test_a_tensor_under_a_new_name_registers_it_after_the_graph(compile_all):
    """The write-back (``Layer.__setattr__``) registers the buffer; the next call finds it registered (a
    guard miss) and rebinds it, in a translation then reused."""
    paddle.seed(2)
    model = NewAttribute()
    _run_pair(model)
    assert "last" in dict(model.named_buffers())
    stats = sot.stats()
    assert (stats.fallbacks, stats.graph_breaks, stats.translate_count) == (0, 0, 2), stats


class ListsBuffersAfterANewOne(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.register_buffer("kept", paddle.ones([4]))

    def forward(self, x):
        self.fresh = x.detach() * 2
        count = len(self.buffers())  # the real tree does not hold "fresh" yet: runs natively after the store
        return self.fc(x) * count


def test_listing_buffers_after_a_new_one_sees_it(compile_all):
    paddle.seed(4)
    model = ListsBuffersAfterANewOne()
    _run_pair(model)
    stats = sot.stats()
    assert stats.fallbacks == 0 and stats.graph_breaks == 1, stats


class RebindsABuiltinLayersBuffer(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.fc.register_buffer("scale", paddle.ones([4]))

    def forward(self, x):
        self.fc.scale = self.fc.scale + 1
        return self.fc(x) * self.fc.scale


def test_a_builtin_layer_called_after_its_own_buffer_was_rebound_runs_its_forward_simulated(compile_all):
    """Its ``layer`` statement would hold the old buffer: its forward is simulated instead, in the graph."""
    paddle.seed(3)
    _run_pair(RebindsABuiltinLayersBuffer())
    stats = sot.stats()
    assert stats.fallbacks == 0 and stats.graph_breaks == 0 and stats.translate_count == 1, stats


class _WithRunningBuffer(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.register_buffer("running", paddle.zeros([4]))

    def rebind(self, y: paddle.Tensor) -> None:
        self.running = self.running + y.mean(0).detach()


class ReadsBuffersAfterRebinding(_WithRunningBuffer):
    def forward(self, x):
        y = self.fc(x)
        self.rebind(y)
        total = sum(buffer.sum() for buffer in self.buffers())
        return y * total + self.state_dict()["running"] + dict(self.named_buffers())["running"] \
            + self._buffers["running"]


class RebindsWhileHoldingTheTable(_WithRunningBuffer):
    def forward(self, x):
        y = self.fc(x)
        table = self._buffers  # the live table: it holds the new buffer after the rebinding
        self.rebind(y)
        return y + table["running"]


@pytest.mark.parametrize("make", [ReadsBuffersAfterRebinding, RebindsWhileHoldingTheTable])
def test_the_buffer_table_read_around_a_rebinding_holds_the_new_buffer(make, compile_all):
    """The rebinding reaches ``_buffers`` only after the graph: reading the table after it (``buffers()``,
    ``state_dict()``), or holding it from before, runs natively rather than seeing the old buffer."""
    paddle.seed(4)
    _run_pair(make())
    assert sot.stats().fallbacks == 0

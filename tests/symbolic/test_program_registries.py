"""Paddle's per-program registries keep nothing of the programs a sot section made (`program_registries`): an
entry left behind is inherited by a later program allocated at the same address (a use-after-free)."""
from __future__ import annotations

from typing import Any

import numpy as np
import paddle
import paddle.nn as nn
import pytest
from paddle.jit.dy2static.parameter_recorder import _global_inplace_map, _global_parameter_recorder
from paddle.static import InputSpec

import sot
from sot.symbolic.compile import BUILD_LOCK


def _keys() -> list[set]:
    return [set(_global_parameter_recorder.params_dict), set(_global_parameter_recorder.tensor2value),
            set(_global_inplace_map.params_dict)]


def _raising_trace(layer: nn.Layer) -> None:
    """A ``to_static`` trace that meets the layer's parameters, then raises (as a failed program build does)."""
    @paddle.jit.not_to_static
    def traced(inputs: list) -> list:
        layer(inputs[0])
        raise ValueError("the trace fails")

    static = paddle.jit.to_static(traced, input_spec=[[InputSpec([2, 3], "float32")]], full_graph=True)
    with pytest.raises(Exception, match="the trace fails"):
        static.get_concrete_program([paddle.ones([2, 3])])


def test_paddle_keeps_the_entry_of_a_raising_trace():
    """The Paddle behaviour the module works around (if this fails, Paddle pops on errors too: the workaround
    may go)."""
    layer = nn.Linear(3, 3)
    before = _keys()
    _raising_trace(layer)
    added = set(_global_parameter_recorder.tensor2value) - before[1]
    assert len(added) == 1
    for table in (_global_parameter_recorder.params_dict, _global_parameter_recorder.tensor2value):
        for key in added:
            table.pop(key, None)


def test_a_raising_trace_inside_a_build_section_leaves_no_entry():
    layer = nn.Linear(3, 3)
    before = _keys()
    with BUILD_LOCK:
        _raising_trace(layer)
        assert _keys() != before  # (Paddle's entry, until the section ends)
    assert _keys() == before


def test_entries_from_before_the_section_and_of_nested_sections_are_handled():
    table = _global_inplace_map.params_dict
    table["outer"] = "kept"
    try:
        with BUILD_LOCK:
            with BUILD_LOCK:
                table["inner"] = "dropped at the end of the outermost section"
            assert "inner" in table
        assert "inner" not in table and table["outer"] == "kept"
    finally:
        table.pop("outer", None)
        table.pop("inner", None)


def test_a_build_section_forgets_what_was_added_also_when_it_raises():
    table = _global_inplace_map.params_dict
    with pytest.raises(RuntimeError):
        with BUILD_LOCK:
            table["made inside"] = None
            raise RuntimeError
    assert "made inside" not in table


def _setitem(x: Any) -> Any:
    y = x * 2
    y[0] = 1.0
    return y + 1


def test_meta_inference_of_setitem_leaves_no_entry(compile_all):
    """Meta inference runs ``__setitem__`` on a throwaway program, for which Paddle records an in-place entry
    no trace pops."""
    before = _keys()
    x = paddle.to_tensor(np.arange(6, dtype="float32").reshape(3, 2))
    np.testing.assert_array_equal(sot.symbolic_translate(_setitem)(x).numpy(), _setitem(x).numpy())
    assert sot.stats().graph_breaks == 0
    assert _keys() == before


class _DoubledLinear(nn.Linear):
    def forward(self, x):
        return super().forward(x) * 2


def _call(layer: nn.Layer, x: Any) -> Any:
    return layer(x)


def test_compiled_layer_calls_in_train_mode_leave_no_entry(compile_all):
    before = _keys()
    first, second = _DoubledLinear(3, 3), _DoubledLinear(3, 3)
    x = paddle.ones([2, 3])
    x.stop_gradient = False
    for layer in (first, second, first):
        out = sot.symbolic_translate(_call)(layer, x)
        out.sum().backward()
        np.testing.assert_allclose(out.numpy(), _call(layer, x).numpy(), rtol=1e-6)
    assert _keys() == before

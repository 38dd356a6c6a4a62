"""``isinstance`` of a tensor against a class whose metaclass answers it (callable._is_instance_of_type):
Paddle's ``Variable`` says True for every eager tensor though ``paddle.Tensor`` is no subclass of it; the
simulation answered ``issubclass`` (False) for a tensor made in the frame. And the Paddle helpers
``paddle.distribution`` code calls on the way: ``convert_dtype`` (folded), ``in_pir_mode`` and
``in_dynamic_or_pir_mode`` (guarded queries)."""
from __future__ import annotations

import numpy as np
import paddle
from paddle.base.data_feeder import convert_dtype
from paddle.base.framework import Variable, in_pir_mode
from paddle.framework import in_dynamic_or_pir_mode

import sot

from conftest import assert_same, counts


def checks(x):
    y = x.exp()  # made in the frame: known by its type only
    return (isinstance(y, (Variable, paddle.pir.Value)), isinstance(y, (float, list, np.ndarray, Variable)),
            isinstance(y, Variable), isinstance(y, paddle.Tensor), isinstance(y, (int, str)), isinstance(x, Variable),
            y * 2)


def test_a_tensor_made_in_the_frame_is_a_variable_as_in_eager(compile_all):
    x = paddle.ones([2])
    assert_same(sot.symbolic_translate(checks)(x), checks(x))
    assert counts()["graph_breaks"] == 0 and counts()["fallbacks"] == 0


def dtype_checks(x):
    name = convert_dtype(x.dtype)
    if in_dynamic_or_pir_mode() and not in_pir_mode() and name in ("float32", "float64"):
        return x * 2
    return x - 1


def test_dtype_names_and_mode_queries_do_not_break(compile_all):
    x = paddle.ones([2])
    assert_same(sot.symbolic_translate(dtype_checks)(x), dtype_checks(x))
    assert counts() == {"translate_count": 1, "graph_breaks": 0, "fallbacks": 0, "compiled_graphs": 1}
    y = paddle.ones([2], dtype="int32")  # another dtype: another entry, another branch
    assert_same(sot.symbolic_translate(dtype_checks)(y), dtype_checks(y))

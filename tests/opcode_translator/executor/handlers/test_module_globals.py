"""Globals of another module assigned in a translated frame: by an inlined function of that module
(``global CALLS; CALLS += 1``) or as the module's attribute (``module.SCALE = 3.0``, ``module.helper = fn``).
Each is a side effect replayed after the graph, and the simulation sees it from then on: the module's
functions inlined later read the new value, as eagerly. (Both used to end the simulation: a fallback of
the frame, and a graph break.)"""
from __future__ import annotations

import sys
from typing import Any

import numpy as np
import paddle
import pytest

import sot
from tests.conftest import assert_counts, assert_same
from tests.opcode_translator.executor.handlers import module_with_globals as helpers

THIS_MODULE = sys.modules[__name__]
OWN = 1.0


@pytest.fixture(autouse=True)
def fresh_module() -> Any:
    saved = dict(vars(helpers))
    yield
    vars(helpers).clear()
    vars(helpers).update(saved)


def _x() -> paddle.Tensor:
    return paddle.to_tensor(np.arange(6, dtype="float32").reshape(2, 3))


def _both(fn: Any, *args: Any) -> tuple[Any, dict, Any, dict]:
    """``fn`` run eagerly, then translated from the same module state: results and the globals after each."""
    saved = dict(vars(helpers))
    expected = fn(*args)
    expected_globals = {k: vars(helpers).get(k, "<unset>") for k in ("CALLS", "SCALE", "LAST", "transform")}
    vars(helpers).clear()
    vars(helpers).update(saved)
    actual = sot.symbolic_translate(fn)(*args)
    actual_globals = {k: vars(helpers).get(k, "<unset>") for k in ("CALLS", "SCALE", "LAST", "transform")}
    return actual, actual_globals, expected, expected_globals


def test_an_inlined_function_assigning_its_modules_globals_is_one_graph(compile_all: Any) -> None:
    def step(x):
        y = helpers.counted(x)
        y = helpers.counted(y)  # (reads CALLS and SCALE as the first call left them)
        return y + helpers.CALLS

    actual, actual_globals, expected, expected_globals = _both(step, _x())
    assert_same(actual, expected)
    assert actual_globals == expected_globals and actual_globals["CALLS"] == 2
    assert_counts(translate_count=1, cache_hits=0, graph_breaks=0, fallbacks=0, compiled_graphs=1)


def test_a_module_attribute_set_in_the_frame_is_read_by_the_modules_functions(compile_all: Any) -> None:
    def step(x):
        before = helpers.apply(x)
        helpers.SCALE = 3.0
        return before, helpers.apply(x), helpers.SCALE

    actual, actual_globals, expected, expected_globals = _both(step, _x())
    assert_same(actual, expected)
    assert actual_globals == expected_globals and actual_globals["SCALE"] == 3.0
    assert_counts(translate_count=1, cache_hits=0, graph_breaks=0, fallbacks=0, compiled_graphs=1)


def test_a_helper_swapped_and_put_back_is_one_graph(compile_all: Any) -> None:
    """As ``nn.RNN``'s ``get_initial_states``: a closure made in the frame replaces a function of the module
    for one call of the module, then the original is put back (only the last store is replayed)."""
    def step(x, shift):
        original = helpers.transform
        helpers.transform = lambda v: v - shift
        swapped = helpers.apply(x)
        helpers.transform = original
        return swapped, helpers.apply(x)

    actual, actual_globals, expected, expected_globals = _both(step, _x(), 5.0)
    assert_same(actual, expected)
    assert actual_globals == expected_globals and actual_globals["transform"] is helpers.transform
    assert_counts(translate_count=1, cache_hits=0, graph_breaks=0, fallbacks=0, compiled_graphs=1)


def test_a_helper_left_swapped_is_replayed(compile_all: Any) -> None:
    def step(x):
        helpers.transform = paddle.tanh
        return helpers.apply(x)

    actual, actual_globals, expected, expected_globals = _both(step, _x())
    assert_same(actual, expected)
    assert actual_globals["transform"] is paddle.tanh and expected_globals["transform"] is paddle.tanh


def test_deleting_a_modules_global(compile_all: Any) -> None:
    def step(x):
        y = helpers.counted(x)
        helpers.forget_last()
        return y, hasattr(helpers, "LAST")

    actual, actual_globals, expected, expected_globals = _both(step, _x())
    assert_same(actual, expected)
    assert actual_globals == expected_globals and actual_globals["LAST"] == "<unset>"
    assert sot.stats().fallbacks == 0


def test_deleting_a_missing_module_attribute_raises_as_eagerly() -> None:
    def step(x):
        del helpers.NOT_THERE
        return x

    with pytest.raises(AttributeError, match="NOT_THERE"):
        step(_x())
    with pytest.raises(AttributeError, match="NOT_THERE"):
        sot.symbolic_translate(step)(_x())


def test_the_frames_own_module_as_an_attribute_is_its_globals(compile_all: Any) -> None:
    """``module.OWN = v`` of the frame's own module is the frame's ``STORE_GLOBAL``: a plain read sees it."""
    global OWN

    def step(x):
        THIS_MODULE.OWN = 4.0
        return x * OWN

    try:
        expected = step(_x())
        OWN = 1.0
        actual = sot.symbolic_translate(step)(_x())
        assert_same(actual, expected)
        assert OWN == 4.0
    finally:
        OWN = 1.0


def test_a_changed_global_misses_the_guard_next_call(compile_all: Any) -> None:
    """The second call starts from the globals the first one left: it is translated again, not replayed with
    the old values."""
    def step(x):
        return helpers.counted(x) + helpers.CALLS

    translated = sot.symbolic_translate(step)
    eager_results = []
    for _ in range(3):
        eager_results.append(step(_x()))
    helpers.CALLS = 0
    for expected in eager_results:
        assert_same(translated(_x()), expected)
    assert helpers.CALLS == 3
    assert sot.stats().fallbacks == 0 and sot.stats().graph_breaks == 0

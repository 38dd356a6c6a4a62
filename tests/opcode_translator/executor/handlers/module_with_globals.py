"""A module of its own for test_module_globals.py: functions that assign their module's globals, and one that
reads a helper the caller may swap (as Paddle's ``get_initial_states`` swaps ``layers_utils.is_sequence``)."""
from __future__ import annotations

import paddle

CALLS = 0
SCALE = 2.0
LAST = None


def counted(x: paddle.Tensor) -> paddle.Tensor:
    global CALLS, LAST
    CALLS += 1
    LAST = "counted"
    return x * SCALE


def forget_last() -> None:
    global LAST
    del LAST


def transform(x: paddle.Tensor) -> paddle.Tensor:
    return x + 1


def apply(x: paddle.Tensor) -> paddle.Tensor:
    return transform(x) * SCALE

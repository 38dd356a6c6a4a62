"""Whether the backward pass running now keeps its graph for another pass, as eager autograd's grad nodes see it.

A gradient hook is not told the flags of the pass that calls it, but what a compiled call keeps for its backward
(the inputs a recomputing backward recomputes from, the tensors a version check watches) must be let go when
eager lets go of what its grad nodes saved: at the end of a pass that does not retain the graph (a loss kept
for logging must not keep a batch of inputs alive). The pass is started by one of Paddle's Python entry points,
whose frame is on the stack below the hook (the engine is C++ called from it): its arguments say.

Eager's rules (Paddle 3.3, checked by tests/symbolic/test_backward_pass.py):

* ``Tensor.backward`` and ``paddle.autograd.backward`` clear the saved tensors of the nodes they run unless
  ``retain_graph=True`` (a second pass then raises "The TensorWrappers of ... do not exist").
* ``paddle.grad`` runs on a copy of the graph whatever its ``retain_graph`` and ``create_graph`` say (its
  ``retain_graph`` defaults to ``create_graph``, and only the copy is cleared): the original graph keeps its saved
  tensors, and a later ``backward()`` or ``paddle.grad`` through it works.

A pass started some other way (Paddle's C++ entry points called directly) counts as keeping the graph: what it
keeps is freed with the graph, as before, never too early.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import sys
from types import CodeType, FrameType
from typing import Callable

import paddle

# How far below a hook the entry point's frame may be (the hook itself, Paddle's decorators: a few frames).
_SEARCH_DEPTH = 16


@dataclasses.dataclass(frozen=True)
class PassEntry:
    """A Python function of Paddle that starts a backward pass, and what its frame says of the graph."""

    function: Callable[[], Callable]  # the function (maybe decorated: its innermost code runs the pass)
    keeps_graph: Callable[[FrameType], bool]


def _retain_graph_argument(frame: FrameType) -> bool:
    return bool(frame.f_locals.get("retain_graph", True))


_ENTRIES: tuple[PassEntry, ...] = (
    PassEntry(lambda: paddle.Tensor.backward, _retain_graph_argument),
    PassEntry(lambda: paddle.autograd.backward, _retain_graph_argument),
    PassEntry(lambda: paddle.grad, lambda frame: True),  # (runs on a copy of the graph)
)


@functools.cache
def _entries_by_code() -> dict[int, tuple[CodeType, PassEntry]]:
    """The entries by the id of the code of their frames (the code is kept with it: the id stays its own)."""
    found = {}
    for entry in _ENTRIES:
        code = inspect.unwrap(entry.function()).__code__
        found[id(code)] = (code, entry)
    return found


def pass_keeps_graph() -> bool:
    """Whether the backward pass calling the current hook keeps its graph (see the module's doc); True when no
    pass is running or its entry point is not known."""
    entries = _entries_by_code()
    frame: FrameType | None = sys._getframe(1)
    depth = 0
    while frame is not None and depth < _SEARCH_DEPTH:
        found = entries.get(id(frame.f_code))
        if found is not None:
            return found[1].keeps_graph(frame)
        frame = frame.f_back
        depth += 1
    return True

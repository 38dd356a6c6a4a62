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
import os
import sys
from types import FrameType
from typing import Callable

# How far below a hook the entry point's frame may be (the hook itself, Paddle's decorators: a few frames).
_SEARCH_DEPTH = 16


@dataclasses.dataclass(frozen=True)
class PassEntry:
    """A Python function of Paddle that starts a backward pass, and what its frame says of the graph."""

    module: str  # the module defining it (its file identifies the frame)
    name: str  # the function's code name
    keeps_graph: Callable[[FrameType], bool]


def _retain_graph_argument(frame: FrameType) -> bool:
    return bool(frame.f_locals.get("retain_graph", True))


_ENTRIES: tuple[PassEntry, ...] = (
    PassEntry("paddle.base.dygraph.tensor_patch_methods", "backward", _retain_graph_argument),
    PassEntry("paddle.autograd.backward_mode", "backward", _retain_graph_argument),
    PassEntry("paddle.base.dygraph.base", "grad", lambda frame: True),  # (runs on a copy of the graph)
)


@functools.cache
def _entries_by_code_location() -> dict[tuple[str, str], PassEntry]:
    """The entries by (file, code name) of their frames (the modules are imported by then: a pass is running)."""
    found = {}
    for entry in _ENTRIES:
        module = sys.modules.get(entry.module)
        file = getattr(module, "__file__", None)
        if file is not None:
            found[(os.path.normcase(os.path.abspath(file)), entry.name)] = entry
    return found


@functools.lru_cache(maxsize=256)
def _normalised(file: str) -> str:
    return os.path.normcase(os.path.abspath(file))


def pass_keeps_graph() -> bool:
    """Whether the backward pass calling the current hook keeps its graph (see the module's doc); True when no
    pass is running or its entry point is not known."""
    entries = _entries_by_code_location()
    frame: FrameType | None = sys._getframe(1)
    depth = 0
    while frame is not None and depth < _SEARCH_DEPTH:
        code = frame.f_code
        entry = entries.get((_normalised(code.co_filename), code.co_name))
        if entry is not None:
            return entry.keeps_graph(frame)
        frame = frame.f_back
        depth += 1
    return True

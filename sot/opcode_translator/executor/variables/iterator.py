"""Iterators: what ``GET_ITER``/``FOR_ITER`` and the iterating builtins work on.

An iterator produces variables one at a time, lazily, so ``map``/``filter`` call their function at the same
point of the program as the real interpreter would.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterator

from ....errors import FallbackError
from ..tracker import DummyTracker
from .base import VariableBase
from .basic import TensorVariable

if TYPE_CHECKING:
    from ..function_graph import FunctionGraph


class IteratorVariable(VariableBase):
    """A Python iterator simulated by a generator of variables."""

    def __init__(self, source: Iterator[VariableBase], graph: "FunctionGraph", description: str) -> None:
        super().__init__(graph, DummyTracker())
        self._source = source
        self.description = description

    def next(self) -> VariableBase | None:
        """The next item, or None when exhausted."""
        return next(self._source, None)

    def unpack(self) -> list[VariableBase]:
        return list(self._source)

    def _reconstruct_computed(self, codegen: object) -> None:
        raise FallbackError(f"an iterator ({self.description}) cannot leave the translated frame yet")

    def __repr__(self) -> str:
        return f"IteratorVariable({self.description})"


def iterate(var: VariableBase) -> IteratorVariable:
    """``iter(var)``: sequences, dicts (keys), tensors (along the first axis) and iterators."""
    graph = var.graph
    if isinstance(var, IteratorVariable):
        return var
    if isinstance(var, TensorVariable):
        return IteratorVariable(iter(var.unpack()), graph, "tensor iterator")
    keys = getattr(var, "iter_items", None)
    if keys is not None:
        return IteratorVariable(iter(keys()), graph, f"iterator over {type(var).__name__}")
    raise FallbackError(f"iterating over {var!r} is not supported yet")


def lazy(producer: Callable[[], Iterator[VariableBase]]) -> Iterator[VariableBase]:
    """Defer building an iterator until the first ``next``."""
    yield from producer()

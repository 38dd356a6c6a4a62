"""Iterators: what ``GET_ITER``/``FOR_ITER`` and the iterating builtins work on.

An iterator produces variables one at a time, lazily, so ``map``/``filter`` call their function at the same
point of the program as the real interpreter would.
"""
from __future__ import annotations

from typing import Any, TYPE_CHECKING, Callable, Iterator

from ....errors import FallbackError
from ..tracker import DummyTracker
from .base import VariableBase
from .basic import ConstantVariable, TensorVariable

if TYPE_CHECKING:
    from ..function_graph import FunctionGraph


class IteratorVariable(VariableBase):
    """A Python iterator simulated by a generator of variables."""

    def __init__(self, source: Iterator[VariableBase], graph: "FunctionGraph", description: str,
                 rebuild: tuple[Callable[..., Any], list[VariableBase]] | None = None) -> None:
        rebuilt_from = (*([rebuild[0]] if isinstance(rebuild[0], VariableBase) else []), *rebuild[1]) if rebuild else ()
        super().__init__(graph, DummyTracker(tuple(rebuilt_from)))
        self._source = source
        self.description = description
        # How generated code makes the same iterator, valid while nothing was consumed from it:
        # ``fn(*args)`` (e.g. ``enumerate(ys)``; ``fn`` a variable: a generator function of the frame called
        # again), when a loop over it or a call consuming it runs natively.
        self.rebuild = rebuild
        self.consumed = False
        self.spent = False  # consumed by a simulation rolled back since (`_consume`)
        self.loop_offset: int | None = None  # the FOR_ITER of the translated frame stepping it, if any

    def _consume(self) -> None:
        """Items are taken from now on. Undone when the simulation rolls back to before the first (a graph
        break at a call that began iterating, e.g. 3.10/3.11's call of a comprehension's function with the
        iterator: that call runs natively, on the iterator made again); the simulated one is then spent."""
        if self.spent:
            raise FallbackError(f"an iterator ({self.description}) is read again after a graph break")
        if self.consumed:
            return
        self.consumed = True

        def undo() -> None:
            self.consumed = False
            self.spent = True

        self.graph.side_effects.on_rollback(undo)

    def next(self) -> VariableBase | None:
        """The next item, or None when exhausted."""
        self._consume()
        return next(self._source, None)

    def step(self) -> tuple[VariableBase | None, VariableBase | None]:
        """One step as ``yield from`` drives its delegate: ``(item, None)`` while it yields, then
        ``(None, returned)`` once exhausted, ``returned`` being a simulated generator's return value
        (None for other iterators: ``yield from`` a list evaluates to None)."""
        self._consume()
        try:
            return next(self._source), None
        except StopIteration as stop:
            returned = stop.value if isinstance(stop.value, VariableBase) else None
            return None, returned

    def unpack(self) -> list[VariableBase]:
        self._consume()
        return list(self._source)

    def children(self) -> list[VariableBase]:
        if not self.rebuild:
            return []
        fn, args = self.rebuild
        return [*([fn] if isinstance(fn, VariableBase) else []), *args]

    def _reconstruct_computed(self, codegen: Any) -> None:
        if self.rebuild is None or self.consumed:
            raise FallbackError(f"an iterator ({self.description}) cannot leave the translated frame yet")
        fn, args = self.rebuild
        if not isinstance(fn, VariableBase):
            codegen.call_helper(fn, args)
            return
        # (a generator function of the frame, called again: nothing of its body has run yet)
        codegen.push_callable(lambda: codegen.reconstruct(fn))
        for arg in args:
            codegen.reconstruct(arg)
        codegen.call(len(args))

    def __repr__(self) -> str:
        return f"IteratorVariable({self.description})"


def iterate(var: VariableBase) -> IteratorVariable:
    """``iter(var)``: sequences, dicts (keys), tensors (along the first axis) and iterators."""
    graph = var.graph
    if isinstance(var, IteratorVariable):
        return var
    if isinstance(var, TensorVariable):
        return IteratorVariable(lazy(var.unpack), graph, "tensor iterator", (iter, [var]))
    instance_iterator = getattr(var, "iterator", None)
    if instance_iterator is not None:
        made = instance_iterator()
        if made is not None:
            return made
    keys = getattr(var, "iter_items", None)
    if isinstance(var, ConstantVariable):  # ``iter(None)`` fails at once, not at the first ``next``
        var.check_iterable()
    if keys is not None:
        return IteratorVariable(lazy(keys), graph, f"iterator over {type(var).__name__}", (iter, [var]))
    raise FallbackError(f"iterating over {var!r} is not supported yet")


def lazy(producer: Callable[[], list[VariableBase]]) -> Iterator[VariableBase]:
    """Defer reading the items (and guarding on them) until the first ``next``."""
    yield from producer()

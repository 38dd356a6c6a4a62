"""Text formatted from numbers the simulation only passes on: made again by the generated code.

A training loop's ``print(f"step {step} loss {loss.item():.4f}")`` breaks the graph at ``.item()`` (and at
``print``). The piece of the frame before the break formats ``step``; folded during the simulation, the text
would be a constant of the generated code, so the guard would pin ``step``'s value and every step would
miss and translate the piece again, until the cache limit, even when the piece has a graph.

The text of an int, float, str, bool or None is a pure function of the value (these types' ``__format__``,
``__str__`` and ``__repr__`` run no user code). So when a formatting operation (``FORMAT_VALUE`` and its
3.13 forms, ``BUILD_STRING``, ``str % values``) gets such values re-readable from the frame (an argument,
an attribute...), its result is a `DeferredTextVariable`: the simulation knows its text for this call, and
the generated code computes it again from the values of the call it runs for. The guard checks only the
operands' exact types (`FunctionGraph.add_type_guard`). The text is still a plain known string for the
simulation: anything that decides on it or bakes it into a program (a comparison, ``len``, a dict key, an
argument of a tensor op) guards it, which guards its operands by value, as before (`FunctionGraph.add_guard`
follows the tracker's inputs).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from ..tracker import ConstTracker, DummyTracker
from .base import VariableBase
from .basic import ConstantVariable
from .container import TupleVariable

if TYPE_CHECKING:
    from ...codegen import CodeGen
    from ..function_graph import FunctionGraph

# The types whose text is a pure function of the value (formatting one runs no user code).
PURE_TEXT_TYPES = (int, float, str, bool, type(None))


class DeferredTextVariable(ConstantVariable):
    """A string computed by ``render(*operands)``: known during the simulation, computed again by the
    generated code from the operands (read from the frame there) instead of being a constant."""

    def __init__(self, value: str, graph: "FunctionGraph", render: Callable[..., str],
                 operands: list[VariableBase]) -> None:
        super().__init__(value, graph, DummyTracker(tuple(operands)))
        self.render = render
        self.operands = operands

    def pin_operands(self, data_only: bool) -> None:
        """The text is guarded (something decided on it, or baked it in): the values it was made from are
        then guarded by value, a symbolic int input's too (`FunctionGraph.add_guard`)."""
        reading_data, self.graph.reading_data = self.graph.reading_data, data_only
        try:
            for var in _leaves(self.operands):
                if _is_symbolic_input(var):
                    var.get_py_value()
        finally:
            self.graph.reading_data = reading_data

    def children(self) -> list[VariableBase]:
        return list(self.operands)

    def _reconstruct_computed(self, codegen: "CodeGen") -> None:
        codegen.call_helper(self.render, self.operands)

    def __repr__(self) -> str:
        return f"DeferredTextVariable({self.value!r})"


def _is_symbolic_input(var: VariableBase) -> bool:
    """An int input kept symbolic (`symbolic_int.py`): its value is known, and reading it here must not pin it."""
    from .symbolic_int import SymbolicIntVariable

    return isinstance(var, SymbolicIntVariable) and var.known is not None and var.form is not None \
        and var.form[0] == "input" and var.tracker.is_traceable()


def _is_rereadable(var: VariableBase) -> bool:
    """A value of `PURE_TEXT_TYPES` the generated code reads from the frame (not a literal, not computed)."""
    if _is_symbolic_input(var):
        return True
    return (type(var) is ConstantVariable and type(var.value) in PURE_TEXT_TYPES
            and var.tracker.is_traceable() and not isinstance(var.tracker, ConstTracker))


def _value(var: VariableBase) -> object:
    """The value formatted this call (a symbolic input's without pinning it)."""
    if type(var) is TupleVariable:
        return tuple(_value(item) for item in var.items)
    return var.known if _is_symbolic_input(var) else var.get_py_value()


def _is_operand(var: VariableBase) -> bool:
    """What deferred text may be made of: values of `PURE_TEXT_TYPES` (a literal, one read from the frame, one
    computed), deferred text, and tuples of those built in the frame (``"%d/%d" % (i, n)``)."""
    if isinstance(var, DeferredTextVariable) or _is_symbolic_input(var):
        return True
    if type(var) is TupleVariable:
        return not var.tracker.is_traceable() and all(_is_operand(item) for item in var.items)
    return type(var) is ConstantVariable and type(var.value) in PURE_TEXT_TYPES


def _leaves(operands: list[VariableBase]) -> list[VariableBase]:
    found: list[VariableBase] = []
    for var in operands:
        found.extend(_leaves(var.items) if type(var) is TupleVariable else [var])
    return found


def deferred_text(graph: "FunctionGraph", render: Callable[..., str],
                  operands: list[VariableBase]) -> DeferredTextVariable | None:
    """``render(*operands)`` as deferred text, or None when it is to be folded as a constant: an operand is
    not of `PURE_TEXT_TYPES` (or deferred text, or a tuple of those), none is read from the frame or
    deferred (a constant is as good), the result is no string, or the formatting raises (folding raises the
    user's exception, guarded)."""
    if not all(_is_operand(var) for var in operands):
        return None
    leaves = _leaves(operands)
    if not any(_is_rereadable(var) or isinstance(var, DeferredTextVariable) for var in leaves):
        return None
    try:
        text = render(*(_value(var) for var in operands))
    except Exception:  # noqa: BLE001 - folded instead, which raises it as the user's error
        return None
    if type(text) is not str:
        return None
    for var in leaves:
        if _is_rereadable(var):
            graph.add_type_guard(var)  # (its text is computed by the generated code: any value of its type)
        elif not isinstance(var, DeferredTextVariable):
            graph.add_guard(var, data_only=True)  # (a computed value, made a constant of the generated code)
    return DeferredTextVariable(text, graph, render, list(operands))


__all__ = ["DeferredTextVariable", "PURE_TEXT_TYPES", "deferred_text"]

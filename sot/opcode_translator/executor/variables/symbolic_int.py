"""Symbolic ints: the value of a dynamic dimension, known only when the program runs.

``B, T, C = x.shape`` on an input whose ``T`` varies gives ``T`` as a `SymbolicIntVariable`: a 0-D int
tensor of the graph (``paddle.shape(x)[1]``). Arithmetic with ints stays in the graph, and it can be
passed where Paddle takes a shape (``x.reshape([B * T, C])``), so one translation serves every length.
Using it as a Python value (a branch, ``range(T)``, a slice bound) pins it: the value of the call being
translated is used and guarded; when that value is not known (a computed tensor) the graph breaks there.
"""
from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any, Callable

import paddle

from ....errors import BreakGraphError
from ..tracker import DummyTracker
from .base import VariableBase
from .basic import ConstantVariable, TensorVariable

if TYPE_CHECKING:
    from ...codegen import CodeGen
    from ..function_graph import FunctionGraph
    from ..guard import GuardBuilder

ARITHMETIC = (operator.add, operator.sub, operator.mul, operator.floordiv, operator.mod, operator.neg,
              operator.iadd, operator.isub, operator.imul, operator.ifloordiv)


class SymbolicIntVariable(VariableBase):
    """An int computed in the graph. ``known`` is its value for the call being translated, when derivable
    from the inputs; ``sources`` are the (input tensor, dimension) pairs it depends on (pinned together)."""

    def __init__(self, tensor: TensorVariable, known: int | None, sources: tuple, graph: "FunctionGraph") -> None:
        super().__init__(graph, DummyTracker((tensor,)))
        self.tensor = tensor
        self.known = known
        self.sources = sources

    def children(self) -> list[VariableBase]:
        return [self.tensor]

    def get_py_value(self) -> Any:
        """Pin: this call's value becomes part of the entry's guards."""
        if self.known is None:
            raise BreakGraphError("a dynamic dimension of a computed tensor is used as a Python value")
        for tensor, dim in self.sources:
            self.graph.pin_dimension(tensor, dim)
        return self.known

    def get_py_type(self) -> type:
        return int

    def bool(self) -> bool:
        return bool(self.get_py_value())

    def make_guards(self, builder: "GuardBuilder", expr: str) -> list[str]:
        return []

    def _reconstruct_computed(self, codegen: "CodeGen") -> None:
        codegen.call_helper(int, [self.tensor])

    def __repr__(self) -> str:
        return f"SymbolicIntVariable({self.tensor.symbol.name}, known={self.known})"


def dimension(tensor: TensorVariable, dim: int) -> VariableBase:
    """``tensor.shape[dim]``: a plain int, or a symbolic one for a dynamic dimension."""
    graph = tensor.graph
    size = tensor.meta.shape[dim]
    if size != -1:
        return ConstantVariable(size, graph, DummyTracker((tensor,)))
    shape = graph.call_tensor_op("api", "paddle.shape", paddle.shape, [tensor], {})
    value = graph.call_tensor_op("api", "operator.getitem", operator.getitem,
                                 [shape, ConstantVariable(dim, graph, DummyTracker())], {})
    known = tensor.value.shape[dim] if tensor.value is not None else None
    sources = ((tensor, dim),) if tensor.value is not None else ()
    return SymbolicIntVariable(value, known, sources, graph)


def symbolic_arithmetic(fn: Callable[..., Any], operands: list[VariableBase]) -> VariableBase | None:
    """``fn(*operands)`` kept in the graph when a symbolic int meets ints; None when it does not apply."""
    if fn not in ARITHMETIC or not any(isinstance(o, SymbolicIntVariable) for o in operands):
        return None
    if not all(isinstance(o, SymbolicIntVariable) or (isinstance(o, ConstantVariable) and type(o.value) is int)
               for o in operands):
        return None
    graph = operands[0].graph
    parts = [o.tensor if isinstance(o, SymbolicIntVariable) else o for o in operands]
    result = graph.call_tensor_op("api", f"operator.{fn.__name__}", fn, parts, {})
    knowns = [o.known if isinstance(o, SymbolicIntVariable) else o.value for o in operands]
    for o in operands:
        if isinstance(o, ConstantVariable):
            graph.add_guard(o)
    known = fn(*knowns) if None not in knowns else None
    sources = tuple(s for o in operands if isinstance(o, SymbolicIntVariable) for s in o.sources)
    return SymbolicIntVariable(result, known, sources, graph)

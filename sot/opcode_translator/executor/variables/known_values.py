"""Tensors whose values the simulation knows: ``paddle.shape(x)`` holds x's dimensions.

Library code reads a dimension as ``paddle.shape(x)[0].item()`` (``MultiHeadAttention.gen_cache``, written for
static graphs where ``x.shape`` may hold -1). The tensors are still computed by the graph, but their value is
the simulated dimension (an int guarded with x's shape, or a symbolic int), so ``.item()`` gives that instead of
leaving the graph. A tensor changed in place forgets what it held (`TensorVariable.rebind`).
"""
from __future__ import annotations

import operator
from typing import Any

import paddle

from ..tracker import DummyTracker

from .base import VariableBase
from .basic import ConstantVariable, TensorVariable
from .container import SequenceVariable
from .symbolic_int import SymbolicIntVariable


def note_known_result(api: Any, args: list[VariableBase], kwargs: dict[str, VariableBase],
                      result: VariableBase) -> None:
    """After a Paddle API call: ``paddle.shape(x)`` knows x's dimensions (read now: a later in-place change of
    x's shape does not reach the shape tensor, as in eager)."""
    if api is paddle.shape and len(args) == 1 and not kwargs and isinstance(args[0], TensorVariable) \
            and isinstance(result, TensorVariable):
        result.known_value = args[0].getattr("shape")
    elif api is paddle.numel and len(args) == 1 and not kwargs:
        note_element_count(args[0], result)


def note_element_count(tensor: VariableBase, result: VariableBase) -> None:
    """After ``x.numel()`` (or ``paddle.numel(x)``), a 0-D tensor: it knows x's number of elements, the product
    of x's dimensions now (``int(x.numel())`` normalising a loss, sizing a reshape): a Python int for a static
    shape, a symbolic int over a dynamic one (no guard until a Python use needs its value)."""
    from .symbolic_int import dimension, symbolic_arithmetic

    if not isinstance(tensor, TensorVariable) or not isinstance(result, TensorVariable) or result.meta.shape != ():
        return
    graph = tensor.graph
    if -1 not in tensor.meta.shape:
        count = 1
        for size in tensor.meta.shape:
            count *= size
        result.known_value = ConstantVariable(count, graph, DummyTracker((tensor,)))
        return
    known: VariableBase | None = ConstantVariable(1, graph, DummyTracker())
    for dim in range(len(tensor.meta.shape)):
        known = symbolic_arithmetic(operator.mul, [known, dimension(tensor, dim)]) \
            if isinstance(known, SymbolicIntVariable) or tensor.meta.shape[dim] == -1 \
            else ConstantVariable(known.value * tensor.meta.shape[dim], graph, DummyTracker((tensor,)))
        if known is None:
            return  # (not kept symbolic: no known value, ``int()`` leaves the graph as before)
    result.known_value = known


def item_of_known(tensor: TensorVariable, key: VariableBase, result: VariableBase) -> None:
    """After ``tensor[key]``: an int index into a known 1-D tensor knows that item."""
    known = tensor.known_value
    if not isinstance(known, SequenceVariable) or not isinstance(result, TensorVariable):
        return
    if not isinstance(key, ConstantVariable) or type(key.value) is not int:
        return
    if -len(known.items) <= key.value < len(known.items):
        result.known_value = known.items[key.value]


def known_python_int(tensor: TensorVariable, args: list[VariableBase],
                     kwargs: dict[str, VariableBase]) -> VariableBase | None:
    """What ``tensor.item()`` returns when the simulation knows it (a 0-D tensor holding a known int)."""
    known = tensor.known_value
    if args or kwargs or known is None or isinstance(known, SequenceVariable) or tensor.meta.shape != ():
        return None
    return known

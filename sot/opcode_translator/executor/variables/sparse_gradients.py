"""Ops whose eager gradient is sparse: they run natively (a graph break) while gradients are recorded.

``nn.Embedding(sparse=True)`` (``F.embedding(..., sparse=True)``) gives its weight a SelectedRows gradient in
eager mode: the looked-up rows only. A compiled program's backward gives the same values as a dense tensor,
and an optimizer treats the two differently (``Adam(lazy_mode=True)`` moves only the rows of a sparse
gradient, every row of a dense one; a SelectedRows gradient also accumulates and clips differently). So
such a call is never compiled while its gradient would be recorded: it breaks the graph and runs eagerly,
and the weight gets eager's gradient. Without gradients (``no_grad``, a frozen weight) it is compiled as
usual: the decision is guarded (grad mode always is; the flag and the tensors' ``stop_gradient`` here).
"""
from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Callable

import paddle
import paddle.nn.functional as F

from ....errors import BreakGraphError
from .base import VariableBase
from .basic import ConstantVariable, TensorVariable

if TYPE_CHECKING:
    from ..function_graph import FunctionGraph
    from .layer import LayerVariable

# Paddle functions taking a flag that makes their weight's eager gradient SelectedRows: the flag's parameter.
# (``hsigmoid_loss(is_sparse=True)``: its weight and bias rows; eager's CPU kernel of it may fail, natively so.)
SPARSE_FLAG_OF_FUNCTION: dict[Callable[..., Any], str] = {
    F.embedding: "sparse",
    F.hsigmoid_loss: "is_sparse",
}

# Built-in layers calling those functions with such a flag: the instance attribute holding it.
SPARSE_FLAG_OF_LAYER: dict[type, str] = {
    paddle.nn.Embedding: "_sparse",
    paddle.nn.HSigmoidLoss: "_is_sparse",
}


def check_function_call(graph: "FunctionGraph", function: Any, args: list[VariableBase],
                        kwargs: dict[str, VariableBase]) -> None:
    """Raise a `BreakGraphError` when ``function(*args, **kwargs)``, recorded now, would give a tensor operand a
    sparse gradient in eager mode (its flag set, gradients recorded, an operand requiring them). The flag
    given is guarded (the operands' ``stop_gradient`` is, as part of their meta)."""
    parameter = SPARSE_FLAG_OF_FUNCTION.get(function)
    if parameter is None or not graph.grad_mode:
        return
    try:
        bound = inspect.signature(function).bind(*args, **kwargs)
    except TypeError:
        return  # (eager raises the same error: the statement's inference reports it)
    flag = bound.arguments.get(parameter)
    if flag is None:
        return  # (the default: dense)
    if not isinstance(flag, ConstantVariable):
        raise BreakGraphError(f"{_name(function)} with a {parameter} flag not known during simulation runs natively")
    graph.add_guard(flag)
    if not flag.value:
        return
    operands = [var for var in bound.arguments.values() if isinstance(var, TensorVariable)]
    if any(not var.meta.stop_gradient for var in operands):
        raise BreakGraphError(f"{_name(function)}({parameter}=True) gives a sparse (SelectedRows) gradient eagerly: "
                              "runs natively")


def check_layer_call(layer_var: "LayerVariable") -> None:
    """Raise a `BreakGraphError` when calling the built-in layer of ``layer_var`` as one ``layer`` statement would
    give a parameter of it (or of a sublayer) a sparse gradient in eager mode. A sparse sublayer whose
    parameters are all frozen is compiled: their ``stop_gradient`` flags are then guarded (the program itself
    would follow a parameter unfrozen later, with a dense gradient). The flags themselves are part of the
    layer's configuration, guarded with its statement."""
    graph = layer_var.graph
    if not graph.grad_mode:
        return
    frozen_paths: list[str] = []
    for path, sublayer in _sparse_sublayers(layer_var.value):
        parameters = [(name, p) for name, p in sublayer._parameters.items() if p is not None]
        if any(not p.stop_gradient for _, p in parameters):
            raise BreakGraphError(f"{type(sublayer).__name__} with sparse gradients enabled gives its weight a sparse "
                                  "(SelectedRows) gradient eagerly: runs natively")
        frozen_paths += [f"{{}}{path}._parameters[{name!r}].stop_gradient is True" for name, _ in parameters]
    if frozen_paths and layer_var.tracker.is_traceable():
        for template in frozen_paths:
            graph.add_expr_guard(layer_var, template)


def _sparse_sublayers(layer: paddle.nn.Layer) -> list[tuple[str, paddle.nn.Layer]]:
    """The layers of ``layer``'s tree (itself included) whose sparse flag is set, with their attribute path from
    it (``._sub_layers['a']._sub_layers['b']``; empty for itself)."""
    found = []
    pending: list[tuple[str, paddle.nn.Layer]] = [("", layer)]
    seen: set[int] = set()
    while pending:
        path, current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        attribute = next((attr for cls, attr in SPARSE_FLAG_OF_LAYER.items() if isinstance(current, cls)), None)
        if attribute is not None and getattr(current, attribute, False):
            found.append((path, current))
        for name, child in (current.__dict__.get("_sub_layers") or {}).items():
            if child is not None:
                pending.append((f"{path}._sub_layers[{name!r}]", child))
    return found


def _name(function: Any) -> str:
    return f"{getattr(function, '__module__', '')}.{getattr(function, '__qualname__', function)}"

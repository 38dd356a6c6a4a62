"""Python values Paddle computes from a tensor's meta alone, answered at translation time.

``x.dim()``, ``x.is_floating_point()``, ``paddle.is_tensor(y)``, ``paddle.is_grad_enabled()``, ``x.size``: none
of them reads tensor data, so running them natively (a graph break) or as a graph op (a tensor where eager
gives a Python value) is needless. Each answer is a function of the tensor's rank and dtype (or of the kind of
the variable, or of the simulated grad mode), all of which the entry's guard already checks: the tensor
guard pins the dtype and the rank, and every entry is guarded on the grad mode it was translated in.

The answers are not re-implemented: Paddle's own method runs on a tiny probe tensor of the same dtype and
rank, so every corner (``bool`` is not an integer dtype, complex types, ``element_size`` of float16) is
Paddle's.
"""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Callable

import paddle
from paddle.base.dygraph.math_op_patch import TensorSize

from ....errors import BreakGraphError, FallbackError
from ..tracker import DummyTracker, Tracker
from .base import VariableBase, VariableFactory
from .basic import ConstantVariable, TensorVariable
from .callable import CallableVariable, member_of

if TYPE_CHECKING:
    from ...codegen import CodeGen
    from ..function_graph import FunctionGraph

# Tensor methods and properties whose answer depends on the tensor's dtype and rank only (never on its data
# or sizes).
META_METHODS = frozenset({"dim", "ndimension", "is_floating_point", "is_complex", "is_integer", "element_size"})
META_PROPERTIES = frozenset({"itemsize"})


@functools.lru_cache(maxsize=None)
def _probe(dtype: Any, rank: int) -> paddle.Tensor:
    """An empty tensor of ``dtype`` and ``rank``: what Paddle's meta queries are asked of."""
    with paddle.no_grad():
        return paddle.empty([0] * rank, dtype=dtype)


def meta_method_value(tensor: TensorVariable, name: str, args: list[VariableBase],
                      kwargs: dict[str, VariableBase]) -> VariableBase:
    """``tensor.name(*args, **kwargs)`` for a method of `META_METHODS`, from the (guarded) meta."""
    graph = tensor.graph
    tensor._used_meta()  # the answer depends on dtype and rank: both are in the tensor's guard
    for var in [*args, *kwargs.values()]:
        graph.add_guard(var)
    probe = _probe(tensor.meta.dtype, len(tensor.meta.shape))
    # Extra arguments reach Paddle's method as in eager mode (its TypeError is the user's).
    value = graph.run_user_python(getattr(probe, name), [a.get_py_value() for a in args],
                                  {k: v.get_py_value() for k, v in kwargs.items()})
    return VariableFactory.from_value(value, graph, DummyTracker((tensor, *args, *kwargs.values())))


def is_dist_value(tensor: TensorVariable) -> VariableBase:
    """``tensor.is_dist()`` (a tensor of auto-parallel, laid out over devices), which built-in layers ask before
    their plain path (``Conv2D.forward``). A tensor from outside the frame answers for itself (guarded); an op
    of the graph makes a distributed tensor only from one, so a computed tensor is not one when none of the
    graph's inputs so far (its operands among them) is: those are guarded."""
    graph = tensor.graph
    sources = [tensor] if tensor.value is not None else list(graph.inputs.values())
    answer = False
    for source in sources:
        dist = bool(source.value.is_dist())
        graph.add_expr_guard(source, f"{{}}.is_dist() is {dist!r}")
        answer = answer or dist
    if answer and tensor.value is None:
        raise BreakGraphError("Tensor.is_dist() of a tensor computed from a distributed one runs natively")
    return ConstantVariable(answer, graph, DummyTracker((tensor,)))


def meta_property_value(tensor: TensorVariable, name: str) -> VariableBase:
    """``tensor.name`` for a property of `META_PROPERTIES`, from the (guarded) meta."""
    tensor._used_meta()
    value = getattr(_probe(tensor.meta.dtype, len(tensor.meta.shape)), name)
    return VariableFactory.from_value(value, tensor.graph, DummyTracker((tensor,)))


# -- Paddle functions answered from the kinds of their arguments and the simulated state ----------------------
PredicateRule = Callable[["FunctionGraph", list[VariableBase], dict[str, VariableBase]], VariableBase]


def _dtype_predicate(method: str, function: Callable[..., Any]) -> PredicateRule:
    """``paddle.is_floating_point(x)`` and its kin: the tensor method of the same name; a non-tensor argument
    reaches the real function (which raises eager's TypeError)."""

    def rule(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        if len(args) == 1 and not kwargs and isinstance(args[0], TensorVariable):
            return meta_method_value(args[0], method, [], {})
        operands = [*args, *kwargs.values()]
        if any(isinstance(var, TensorVariable) for var in operands):
            raise FallbackError(f"paddle.{method} with unusual arguments")
        for var in operands:
            graph.add_guard(var)
        value = graph.run_user_python(function, [a.get_py_value() for a in args],
                                      {k: v.get_py_value() for k, v in kwargs.items()})
        return VariableFactory.from_value(value, graph, DummyTracker(tuple(operands)))

    return rule


def _is_tensor(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    """``paddle.is_tensor(x)``: every Tensor (parameters too) is modelled by a `TensorVariable`, nothing else
    is; the kind of a variable follows from the type its guard checks."""
    operands = [*args, *kwargs.values()]
    if len(operands) != 1:
        graph.run_user_python(paddle.is_tensor, [None] * len(args), dict.fromkeys(kwargs))  # eager TypeError
    (value,) = operands
    if not isinstance(value, TensorVariable):
        graph.add_guard(value)
    return ConstantVariable(isinstance(value, TensorVariable), graph, DummyTracker((value,)))


def _is_grad_enabled(graph: "FunctionGraph", args: list[VariableBase],
                     kwargs: dict[str, VariableBase]) -> VariableBase:
    """``paddle.is_grad_enabled()``: the simulated grad mode (``with paddle.no_grad():`` blocks included); the
    mode the frame started in is part of every entry's guard."""
    if args or kwargs:
        graph.run_user_python(paddle.is_grad_enabled, [None] * len(args), dict.fromkeys(kwargs))
    return ConstantVariable(bool(graph.grad_mode), graph, DummyTracker())


def _is_autocast_enabled(graph: "FunctionGraph", args: list[VariableBase],
                         kwargs: dict[str, VariableBase]) -> VariableBase:
    """``paddle.is_autocast_enabled()``: whether the simulated AMP state (``with paddle.amp.auto_cast():`` blocks
    included, as Paddle itself decided on entering them) casts ops; the state at the start is guarded."""
    if args or kwargs:  # (the device argument is ignored by Paddle, but keep its call as written)
        raise BreakGraphError("paddle.is_autocast_enabled() with arguments runs natively")
    return ConstantVariable(bool(graph.amp_state.enabled), graph, DummyTracker())


PREDICATES: dict[Any, PredicateRule] = {
    paddle.is_tensor: _is_tensor,
    paddle.is_grad_enabled: _is_grad_enabled,
    paddle.is_autocast_enabled: _is_autocast_enabled,
    **{getattr(paddle, name): _dtype_predicate(name, getattr(paddle, name))
       for name in ("is_floating_point", "is_complex", "is_integer")},
}


class PaddlePredicateVariable(CallableVariable):
    """One of `PREDICATES`, reached from the frame (``paddle.is_tensor``): guarded by identity."""

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        return PREDICATES[self.value](self.graph, args, kwargs)

    def __repr__(self) -> str:
        return f"PaddlePredicateVariable({self.value.__name__})"


@VariableFactory.register(74)
def _predicate_rule(value: Any, graph: "FunctionGraph", tracker: Tracker) -> VariableBase | None:
    return PaddlePredicateVariable(value, graph, tracker) if member_of(PREDICATES, value) else None


# -- ``x.size``: eager's TensorSize ---------------------------------------------------------------------------
class TensorSizeVariable(ConstantVariable):
    """``x.size``: in eager mode a ``TensorSize``, an int subclass (the number of elements) that carries the
    shape (``as_shape``, a ``paddle.Size``) and, called, gives it (``x.size()``, ``x.size(dim)``). Its
    arithmetic is the int's; its shape reads and calls are the tensor's own ``shape``. Each eager read makes a
    new object (``as_shape`` is a mutable list): the generated code builds one per read too."""

    def __init__(self, tensor: TensorVariable) -> None:
        shape = tensor.concrete_shape()  # the int value is a Python constant of the translation: guarded
        super().__init__(TensorSize(paddle.Size(list(shape))), tensor.graph, DummyTracker((tensor,)))
        self.tensor = tensor
        self._shape: VariableBase | None = None  # ``as_shape``, made at its first read (one list per size)

    def as_shape(self) -> VariableBase:
        if self._shape is None:
            self._shape = self.tensor.getattr("shape")
        return self._shape

    def children(self) -> list[VariableBase]:
        return [self._shape] if self._shape is not None else []

    def getattr(self, name: str) -> VariableBase:
        if name == "as_shape":
            return self.as_shape()
        return super().getattr(name)

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        from .container import SizeVariable

        if kwargs or len(args) > 1:  # the eager TypeError
            self.graph.run_user_python(self.value, [a.get_py_value() for a in args],
                                       {k: v.get_py_value() for k, v in kwargs.items()})
        # ``paddle.Size(self.as_shape)``: a copy of the (maybe changed) list, indexed by ``dim`` if given
        shape = self.as_shape()
        copy = SizeVariable(list(shape.items), self.graph, DummyTracker((shape,)))  # type: ignore[attr-defined]
        return copy.getitem(args[0]) if args and not _is_none(args[0]) else copy

    def _reconstruct_computed(self, codegen: "CodeGen") -> None:
        from ...runtime import tensor_size

        codegen.load_callable_const(tensor_size)
        codegen.load_const(int(self.value))
        if self._shape is not None:  # the very list the frame read (and maybe changed)
            codegen.reconstruct(self._shape)
        else:
            codegen.load_const(tuple(self.value.as_shape))
        codegen.call(2)

    def __repr__(self) -> str:
        return f"TensorSizeVariable({int(self.value)})"


def _is_none(var: VariableBase) -> bool:
    return isinstance(var, ConstantVariable) and var.value is None


class FrameTensorSizeVariable(ConstantVariable):
    """A ``TensorSize`` reached from the frame (e.g. an ``x.size`` kept across a graph break): an int constant
    of the translation (its type and value guarded); calling it or changing its shape runs natively."""

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        raise BreakGraphError("calling a TensorSize from outside the frame runs natively")


@VariableFactory.register(91)
def _tensor_size_rule(value: Any, graph: "FunctionGraph", tracker: Tracker) -> VariableBase | None:
    return FrameTensorSizeVariable(value, graph, tracker) if type(value) is TensorSize else None

"""In-place tensor operations: ``x.add_(y)``, ``x[i] = v``, ``paddle.assign(v, output=x)``, ``out=`` arguments,
``x.set_value(t)``.

The compiled programs stay pure (a failing program reruns the frame natively, see `CodeGen.call_program`): the op
is recorded in its out-of-place form and the tensor's variable is rebound to the result (`TensorVariable.rebind`).
Every alias of the tensor (a list item, an attribute, another local) holds that one variable, so all of them see
the new value; a tensor from outside the frame is written back into the caller's tensor after the program
(`TensorVariable.write_back`). Inplace versions (what eager autograd compares, and reports when it refuses a
backward) end as eager's: one more per change (`_count_the_change`), and an op of the graph keeping the final
value of a tensor from outside makes the caller's tensor watched (`StatementIR.written_back`).

What this model cannot express is never simulated approximately:
  * views. Eager slicing, ``reshape``, ``squeeze``... share memory with their input, so an in-place change of one
    changes the other. Whether an op makes a view is found by running it once on zeros of the same meta (cached,
    `probe`). A tensor that may be a view of another one is not changed in the graph (the frame runs eagerly),
    but for a view made by reshaping ops (`reshaped_view_base`): its base is changed with it (`_change_through_base`);
    views made earlier from the changed tensor become stale, and using one later makes the frame run eagerly too.
    Views among a program's results are made again natively from their base after it (`plan_view_replay`; the
    base of a view of a changed argument is the caller's tensor, once written back), so code after the frame
    (a resume function, the caller) sees views where eager code would;
  * a leaf that requires grad (eager raises, or under ``no_grad`` changes a parameter whose later uses must reach
    its gradient), and a tensor requiring grad changed under ``no_grad`` (its gradient node stays, its data
    changes): the graph breaks and the op runs natively;
  * an op whose out-of-place form gives another shape, dtype or gradient requirement (eager raises or keeps the
    tensor's own): the graph breaks there.
"""
from __future__ import annotations

import inspect
import math
import operator
import sys
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

import numpy as np
import paddle

from ....errors import BreakGraphError, FallbackError
from ....symbolic.pytree import leaves, map_structure
from ....symbolic.sir import MetaInfo, Statement, Symbol
from ..tracker import DummyTracker, Tracker
from .base import VariableBase
from .basic import ConstantVariable, TensorVariable

if TYPE_CHECKING:
    from ...codegen import CodeGen
    from ..function_graph import FunctionGraph
    from ..guard import GuardBuilder


_FLOATING = (paddle.float16, paddle.bfloat16, paddle.float32, paddle.float64)


def set_items(x: paddle.Tensor, key: Any, value: Any) -> paddle.Tensor:
    """``x[key] = value`` out of place: the set_value op eager runs, applied to a copy of ``x``.

    A value that is not a tensor is made one (of ``x``'s dtype) when ``x`` is floating: Paddle's static
    set_value op that takes the value as an attribute passes the gradient of the overwritten items on to
    ``x`` (3.3.1: ``w[0] = 1.5`` in a program gave ``w.grad[0] != 0``), the tensor-valued op does not, as
    eager. (Made by ``assign`` of an array, which keeps the value exactly, the sign of ``-0.0`` too.)"""
    if x.dtype in _FLOATING and not isinstance(value, (paddle.Tensor, paddle.pir.Value)):
        value = paddle.assign(np.asarray(value)).astype(x.dtype)
    return paddle.static.setitem(paddle.assign(x), _scalar_indices_counted_from_the_start(x, key), value)


def _scalar_indices_counted_from_the_start(x: Any, key: Any) -> Any:
    """``key`` with each 0-D integer tensor index made non-negative (``i + size`` for ``i < 0``).

    Paddle's static ``setitem`` (3.3.1) writes the item of a 0-D tensor index ``i`` as the slice
    ``[i, i + 1)``, empty for ``i == -1``: ``y[paddle.to_tensor(-1)] = v`` changed nothing in a program, where
    eager writes the last item. The dimension each index counts in is found as Paddle's ``parse_index`` finds
    it (``...`` stands for the dimensions the other items but ``None`` leave, ``None`` and a Python bool take none)."""
    items = list(key) if isinstance(key, tuple) else [key]
    if not any(_is_integer_scalar_tensor(item) for item in items):
        return key
    rank = len(x.shape)
    if sum(item is Ellipsis for item in items) == 1:
        at = items.index(Ellipsis)
        taking = sum(item is not None and item is not Ellipsis for item in items)  # (a bool too, as Paddle counts)
        items[at:at + 1] = [slice(None)] * max(rank - taking, 0)
    dim = 0
    for position, item in enumerate(items):
        if item is None or isinstance(item, bool):
            continue
        if _is_integer_scalar_tensor(item) and dim < rank:
            size = x.shape[dim]
            if size is None or size < 0:
                size = paddle.shape(x)[dim].astype(item.dtype)
            items[position] = paddle.where(item < 0, item + size, item)
        dim += 1
    return tuple(items) if isinstance(key, tuple) else items[0]


def _is_integer_scalar_tensor(item: Any) -> bool:
    return isinstance(item, (paddle.Tensor, paddle.pir.Value)) and len(item.shape) == 0 and \
        item.dtype not in (paddle.bool, paddle.pir.core.DataType.BOOL)


def zeroed(x: paddle.Tensor) -> paddle.Tensor:
    """``x.zero_()`` out of place."""
    return filled(x, 0)


def filled(x: paddle.Tensor, value: Any) -> paddle.Tensor:
    """``x.fill_(value)`` out of place. Of a tensor that requires grad, the result still does, with a zero
    gradient to ``x`` (eager's node for the in-place fill): the filled values selected over ``x``."""
    out = paddle.full_like(x, value)
    if x.stop_gradient:
        return out
    return paddle.where(paddle.ones_like(x, dtype=paddle.bool), out, x)


# In-place methods whose out-of-place form is not simply the method without the trailing underscore.
METHOD_COUNTERPARTS: dict[str, Callable[..., Any]] = {"zero_": zeroed, "fill_": filled}
# Keyword arguments naming the tensor an API writes its result into.
OUT_PARAMETERS = ("output", "out")


def is_in_place_name(name: str) -> bool:
    return name.endswith("_") and not name.endswith("__")


def _parameters(fn: Any) -> list[str] | None:
    try:
        return [name for name in inspect.signature(fn).parameters if name not in ("name", "out")]
    except (TypeError, ValueError):
        return None


def same_signature(in_place: Any, counterpart: Any) -> bool:
    """Whether ``counterpart`` takes the in-place function's arguments the same way (its parameters start with
    the same names): ``add_(x, y)``/``add(x, y)`` do, ``normal_(x, mean, std)``/``normal(mean, std, shape)``
    do not (the name alone would compute something else)."""
    own, other = _parameters(in_place), _parameters(counterpart)
    return own is not None and other is not None and other[:len(own)] == own


def in_place_method(tensor: TensorVariable, name: str, args: list[VariableBase],
                    kwargs: dict[str, VariableBase]) -> VariableBase:
    """``tensor.name(*args, **kwargs)`` for an in-place method ``name``."""
    counterpart = METHOD_COUNTERPARTS.get(name)
    if counterpart is not None:
        return apply_in_place(tensor, "api", f"Tensor.{name}", counterpart, [tensor, *args], kwargs, name)
    plain: str | None = name[:-1]
    if not same_signature(getattr(paddle.Tensor, name, None), getattr(paddle.Tensor, plain, None)):
        plain = None
    return apply_in_place(tensor, "method", plain or name, plain, [tensor, *args], kwargs, name)


def set_value(target: TensorVariable, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    """``x.set_value(t)``: ``t``'s data copied into ``x`` outside autograd (``x`` keeps its own gradient
    requirement and is no output of ``t``'s graph), as in an EMA or running-statistics update: an assign recorded
    under no_grad. A non-tensor value, and shapes eager compares at run time (symbolic) or refuses, run natively."""
    graph = target.graph
    if kwargs or len(args) != 1 or not isinstance(args[0], TensorVariable):
        raise BreakGraphError("Tensor.set_value() of a value other than one tensor runs natively")
    (value,) = args
    if value is not target:  # (eager returns at once for the tensor itself)
        shape, dtype = target.meta.shape, target.meta.dtype
        if -1 in shape or list(value.meta.shape) != list(shape) or value.meta.dtype != dtype:
            raise BreakGraphError(f"Tensor.set_value() of a {value.meta} into a {target.meta} runs natively (eager "
                                  "checks the shape and dtype)")
        grad_mode, graph.grad_mode = graph.grad_mode, False
        try:
            apply_in_place(target, "api", "paddle.assign", paddle.assign, [value], {}, "Tensor.set_value")
        finally:
            graph.grad_mode = grad_mode
    return ConstantVariable(None, graph, DummyTracker())


def out_parameter(fn: Any, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> str | int | None:
    """Where a call of the API ``fn`` passes a tensor to write into (``output=``/``out=``): a keyword, or the
    position of that parameter; None when it passes none."""
    for key in OUT_PARAMETERS:
        if isinstance(kwargs.get(key), TensorVariable):
            return key
    try:
        parameters = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return None
    for key in OUT_PARAMETERS:
        if key in parameters:
            index = parameters.index(key)
            if index < len(args) and isinstance(args[index], TensorVariable):
                return index
    return None


def in_place_api(fn: Any, name: str, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> \
        VariableBase | None:
    """A Paddle API call that changes a tensor argument (``paddle.assign(v, output=x)``, ``F.relu_(x)``), else
    None."""
    where = out_parameter(fn, args, kwargs)
    if where is not None:
        if isinstance(where, str):
            target, kwargs = kwargs[where], {k: v for k, v in kwargs.items() if k != where}
        else:
            target, args = args[where], args[:where] + args[where + 1:]
        assert isinstance(target, TensorVariable)
        return apply_in_place(target, "api", name, fn, args, kwargs, f"{name}(..., {where}=...)"
                              if isinstance(where, str) else f"{name} (its output argument)")
    fn_name = getattr(fn, "__name__", "")
    if not is_in_place_name(fn_name):
        return None
    if not args or not isinstance(args[0], TensorVariable):
        raise BreakGraphError(f"in-place {name} on a non-tensor runs natively")
    plain = fn_name[:-1]
    homes = (sys.modules.get(getattr(fn, "__module__", "") or ""), paddle, paddle.nn.functional)
    candidates = (getattr(home, plain, None) for home in homes if home is not None)
    counterpart = next((c for c in candidates if callable(c) and same_signature(fn, c)), None)
    return apply_in_place(args[0], "api", name[:-1] if counterpart is not None else name, counterpart, args,
                          kwargs, name)


def apply_in_place(target: TensorVariable, kind: str, name: str, fn: Any, args: list[VariableBase],
                   kwargs: dict[str, VariableBase], spelling: str | None = None) -> TensorVariable:
    """Record ``fn(*args, **kwargs)`` (an out-of-place op, a statement named ``name``; None when there is none)
    as the new value of ``target``; returns ``target`` (eager in-place ops return the tensor itself).
    ``spelling`` is the user's name of the in-place op, for the reasons given."""
    graph = target.graph
    op = spelling or name
    graph.check_not_stale(target)
    base = reshaped_view_base(target, op)
    views = _views(target, op)
    if fn is None:
        _break_natively(views, f"in-place {op} has no out-of-place form in the graph: runs natively")
    if any(hooked is target for hooked in graph.hooked_tensors):
        # (the hook, registered in eager before the change, sees the gradient of the changed tensor: its
        # registration, replayed after the graph, would follow the change instead)
        _break_natively(views, f"in-place {op} on a tensor whose gradient hook the frame registered runs natively")
    if _is_leaf_requiring_grad(target):
        _break_natively(views, f"in-place {op} on a leaf tensor that requires grad runs natively (eager raises "
                               "unless under no_grad, where later uses must reach the leaf's gradient)")
    if not graph.grad_mode and not target.meta.stop_gradient:
        _break_natively(views, f"in-place {op} under no_grad on a tensor that requires grad runs natively")
    if not graph.grad_mode and fn is set_items and \
            any(not operand.meta.stop_gradient for operand in _tensors_in(args[2:])):
        # (eager's ``__setitem__`` passes a differentiable value's flag on to the tensor whatever the grad
        # mode: under no_grad the tensor then requires grad with no gradient node, a new leaf; the other
        # in-place ops, and the set_value statement of a program, leave the flag as it was)
        _break_natively(views, f"{op} of a value that requires grad under no_grad makes the tensor require grad "
                               "(a new leaf, as eager's __setitem__ does): runs natively")
    base_views = _check_base_changeable(base, op) if base is not None else []
    saver = saver_in_graph(target)  # (the tensor itself may not require grad, nor grad be on now)
    if saver is not None:
        raise FallbackError(f"in-place {op} changes a tensor that {saver.name} saved for its backward (eager's "
                            "backward refuses it, a program's would use the old value)", graph.location)
    old_value = _old_value_made_differentiable(target, args, kwargs, views, op)
    if target.tracker.is_traceable() and not target.is_rebound:
        for _, other in list(graph.known_objects.values()):
            check_memory_apart(target, other)
        args, kwargs = _read_through_a_copy(target, args, kwargs, old_value)
    result = graph.call_tensor_op(kind, name, fn, args, kwargs)
    if not isinstance(result, TensorVariable):
        raise FallbackError(f"in-place {op} gave no single tensor")
    meta, before = result.meta, target.meta
    if old_value is not None and meta.stop_gradient:
        _break_natively(views, f"in-place {op} with a differentiable operand makes the tensor require grad, where "
                               "its out-of-place form gives a tensor that does not: runs natively")
    if meta.shape != before.shape or meta.dtype != before.dtype:
        _break_natively(views, f"in-place {op} gives {meta}, not the {before} of the tensor it changes: runs "
                               "natively (eager raises or keeps the tensor's own)")
    if meta.stop_gradient != (meta.stop_gradient and before.stop_gradient):
        _break_natively(views, f"in-place {op} keeps the gradient requirement of the tensor it changes, not its "
                               "out-of-place form's: runs natively")
    if base is not None:
        result = _change_through_base(target, base, result, op)
        meta = result.meta
        views = [*views, *base_views]
    if views:
        _mark(graph, graph.stale_symbols, views)
    target.rebind(result.symbol, meta)
    _count_the_change(target)
    return target


def _mark(graph: "FunctionGraph", marked: set[Symbol], symbols: list[Symbol]) -> None:
    """Add ``symbols`` to one of the graph's sets of symbols (stale, unaliased views); undone on rollback."""
    new = set(symbols) - marked
    marked |= new
    graph.side_effects.on_rollback(lambda: marked.difference_update(new))


# -- changes through a reshaped view: ``y = x.reshape([2, 8]); y[:, 1:3] = 0`` changes ``x`` --------------------
# View ops keeping every element of their one tensor input in order (only the shape changes): a view made by a
# chain of them holds its base's elements in the base's order, so the base's new value is the view's new value
# reshaped back, and the view's is that reshaped again (a view op once more, made again natively after the
# program when it leaves the frame, see `plan_view_replay`).
RESHAPING_FUNCTIONS = frozenset({paddle.reshape, paddle.flatten, paddle.squeeze, paddle.unsqueeze})
RESHAPING_METHODS = frozenset({"reshape", "flatten", "squeeze", "unsqueeze"})


def _is_reshaping_view(statement: Statement, graph: "FunctionGraph") -> bool:
    if statement.kind == "api":
        reshaping = any(statement.target is fn for fn in RESHAPING_FUNCTIONS)
    else:
        reshaping = statement.kind == "method" and statement.target in RESHAPING_METHODS
    if not reshaping or len(statement.inputs()) != 1 or len(statement.output_symbols()) != 1:
        return False
    found = probe(statement, graph)
    # (an op handing back its input itself makes the view the base: eager changes the base then, which may
    # raise, e.g. on a leaf requiring grad)
    return found.known and found.shares_memory and not found.same_object


def reshaped_view_base(target: TensorVariable, name: str) -> TensorVariable | None:
    """The tensor ``target`` is a view of through a chain of reshaping view ops (`RESHAPING_FUNCTIONS`), or None
    when ``target`` is no view. A `FallbackError` when it may be a view of another kind (a slice), or of a
    tensor changed since, or one of unknown shape."""
    graph = target.graph
    symbol = target.history[0]
    statement = producer(graph, symbol)
    if statement is None or not _may_alias(statement, graph):
        return None
    while statement is not None and _may_alias(statement, graph):
        if not _is_reshaping_view(statement, graph):
            raise FallbackError(f"in-place {name} changes a tensor that may be a view of another one (views "
                                "are not simulated, but for reshaping ones)", graph.location)
        symbol = statement.inputs()[0]
        statement = producer(graph, symbol)
    # (a base changed since otherwise than through ``target`` made ``target`` stale: `apply_in_place` marks the
    # views of a tensor it changes)
    base = graph.symbol_owners.get(symbol)
    if base is None or symbol not in base.history or -1 in base.meta.shape or -1 in target.meta.shape:
        raise FallbackError(f"in-place {name} changes a view of a tensor changed since, or of a dynamic shape "
                            "(views are not simulated)", graph.location)
    return base


def _check_base_changeable(base: TensorVariable, name: str) -> list[Symbol]:
    """The views of ``base`` (stale once it changes, but for the one changed), when eager's change through a view
    of it is one the graph can make. A `FallbackError` otherwise: a base requiring grad (its data changes, its
    gradient node stays) other than a tensor from outside changed only this way (written back data only, its
    new value never read in the frame), a base whose value an earlier op keeps for its backward (eager's
    backward refuses then), a base with a gradient hook from the frame, or sharing memory with another tensor."""
    graph = base.graph
    if not base.meta.stop_gradient and not (base.tracker.is_traceable() and (not base.is_rebound
                                                                               or base.data_written_back)):
        raise FallbackError(f"in-place {name} through a view of a tensor requiring grad made in the frame (its data "
                            "changes, its gradient node stays: views are not simulated)", graph.location)
    if any(hooked is base for hooked in graph.hooked_tensors):
        raise FallbackError(f"in-place {name} through a view of a tensor given a gradient hook (views are not "
                            "simulated)", graph.location)
    saver = saver_in_graph(base)
    if saver is not None:
        raise FallbackError(f"in-place {name} through a view changes a tensor that {saver.name} saved for its "
                            "backward (eager's backward refuses it)", graph.location)
    if base.tracker.is_traceable() and not base.is_rebound:
        for _, other in list(graph.known_objects.values()):
            check_memory_apart(base, other)
    return _views(base, name)


def _change_through_base(target: TensorVariable, base: TensorVariable, result: TensorVariable,
                         name: str) -> TensorVariable:
    """``result``, the new value of ``target``, a reshaping view of ``base``, made the new value of ``base`` too
    (reshaped back); returns the value ``target`` takes. A base without gradient takes it, and the view is that
    reshaped again (a view op: the view of the base's new value, as eager's). A base requiring grad takes the
    data only, outside autograd (eager's base keeps its gradient node): the caller's tensor is written the data
    (`TensorVariable.data_written_back`); the view keeps ``result`` (its gradient reaches the value and the old
    view), so it is no view of the base in the graph and must not leave the frame (`unaliased_views`)."""
    graph = target.graph
    base_shape = ConstantVariable(list(base.meta.shape), graph, DummyTracker())
    if base.meta.stop_gradient:
        if not result.meta.stop_gradient:  # (an operand requiring grad made the view require it: broken before)
            raise FallbackError(f"in-place {name} makes a view of a tensor without gradient require grad",
                                graph.location)
        new_base = graph.call_tensor_op("api", "paddle.reshape", paddle.reshape, [result, base_shape], {})
        base.rebind(new_base.symbol, new_base.meta)
        view_shape = ConstantVariable(list(target.meta.shape), graph, DummyTracker())
        return graph.call_tensor_op("api", "paddle.reshape", paddle.reshape, [new_base, view_shape], {})
    grad_mode, graph.grad_mode = graph.grad_mode, False
    try:
        new_data = graph.call_tensor_op("api", "paddle.reshape", paddle.reshape, [result, base_shape], {})
    finally:
        graph.grad_mode = grad_mode
    base.rebind(new_data.symbol, base.meta)
    if not base.data_written_back:
        base.data_written_back = True
        graph.side_effects.on_rollback(lambda: setattr(base, "data_written_back", False))
    _mark(graph, graph.stale_symbols, [new_data.symbol])
    _mark(graph, graph.unaliased_views, [result.symbol])
    return result


def _count_the_change(target: TensorVariable) -> None:
    """The result now standing for a tensor made in the frame gets the inplace version eager's tensor has after
    this change (`Statement.inplace_version`). (A tensor from outside counts from its version at the call: the
    write-back adds the changes, `TensorVariable.write_back`.)"""
    if target.tracker.is_traceable():
        return
    statement = producer(target.graph, target.symbol)
    if statement is not None and statement.outputs is target.symbol:
        statement.inplace_version = len(target.history) - 1


def check_memory_apart(changed: TensorVariable, other: VariableBase) -> None:
    """A tensor from outside the frame changed in place must not share memory with another tensor the frame
    reads from outside (a view of it, or its base): the simulation treats the two as independent values. (The
    guard checks it again at every call: `FunctionGraph._written_back_tensor_guards`.)"""
    if other is changed or not isinstance(other, TensorVariable) or other.value is None \
            or not other.tracker.is_traceable():
        return
    if changed.value._is_shared_buffer_with(other.value):
        raise FallbackError(f"{changed.tracker.describe()}, changed in place, shares memory with "
                            f"{other.tracker.describe()} (views are not simulated)", changed.graph.location)


def _read_through_a_copy(target: TensorVariable, args: list[VariableBase], kwargs: dict[str, VariableBase],
                         old_value: "OldValueVariable | None" = None) -> \
        tuple[list[VariableBase], dict[str, VariableBase]]:
    """The op changing a tensor from outside the frame reads it through a copy made in the program (of
    ``old_value``, the program input standing for the tensor made to require grad, when there is one).

    The caller's tensor is overwritten after the program (the write-back bumps its inplace version): what the
    program's backward saves of it must not be it, or the backward would read the new data (and refuse, see
    `CompiledProgram._watch_saved_tensors`). Eager's in-place op keeps what its own backward needs; only the
    ops that read the tensor before the change save it (and eager refuses their backward just the same)."""
    graph = target.graph
    copy = graph.call_tensor_op("api", "paddle.assign", paddle.assign, [old_value or target], {})

    def substitute(var: VariableBase) -> VariableBase:
        return copy if var is target else var

    return [substitute(arg) for arg in args], {key: substitute(value) for key, value in kwargs.items()}


class OldValueTracker(Tracker):
    """Where the generated code gets an `OldValueVariable`: the tensor it stands for, loaded as that tensor is
    (the program makes it require grad, `made_differentiable`); guarded as that tensor is."""

    def __init__(self, source: TensorVariable) -> None:
        self.inputs = (source,)
        self.source = source

    def guard_expr(self, builder: "GuardBuilder") -> str:
        return builder.expr_of(self.source)

    def gen_load(self, codegen: "CodeGen") -> None:
        self.source.tracker.gen_load(codegen)

    def describe(self) -> str:
        return f"{self.source.tracker.describe()} (made to require grad)"


class OldValueVariable(TensorVariable):
    """The program input standing for a tensor from outside the frame that does not require grad (a constant)
    at an in-place op with a differentiable operand: eager makes the tensor require grad there, so that the
    gradient of its value before the op reaches the tensor itself (a leaf's ``grad`` accumulates it; a tensor
    made to stop gradients by hand reconnects to its gradient node). Only that op reads it (through a copy,
    `_read_through_a_copy`); earlier reads of the tensor read the constant input. The program gets the tensor
    itself in both places, and makes it require grad for the call (`sot.symbolic.made_differentiable`):
    ``StatementIR.made_differentiable`` lists the inputs of this kind."""

    def __init__(self, source: TensorVariable) -> None:
        meta = source.meta
        super().__init__(MetaInfo(meta.shape, meta.dtype, False), source.graph, OldValueTracker(source))
        self.source = source

    def make_guards(self, builder: "GuardBuilder", expr: str) -> list[str]:
        return []  # (the tensor's own guards cover it)


def _old_value_made_differentiable(target: TensorVariable, args: list[VariableBase], kwargs: dict[str, VariableBase],
                                   views: list[Symbol], op: str) -> OldValueVariable | None:
    """The input standing for the value of ``target`` before the op, when the op makes a tensor from outside
    that does not require grad require it (`OldValueVariable`): under grad, an op reading ``target`` with
    another operand requiring grad, as eager decides. Else None. The graph breaks (the op runs natively) when
    that value is not one the program is given: ``target`` was changed in the frame before, or a statement
    may have read the tensor other than as an input (a built-in layer holding it), which must go on seeing a
    constant."""
    graph = target.graph
    if not (graph.grad_mode and target.meta.stop_gradient):
        return None
    operands = _tensors_in([*args, *kwargs.values()])
    if not any(operand is target for operand in operands) or \
            all(operand.meta.stop_gradient for operand in operands if operand is not target):
        return None
    if not target.tracker.is_traceable():
        # Made in the frame: eager's tensor is a leaf (or keeps its own gradient node) whose ``grad`` gets the
        # gradient of its value before the op; the program has no tensor of its own to give it to.
        _break_natively(views, f"in-place {op} with a differentiable operand makes a tensor made in the frame "
                               "without gradient require grad, the gradient of its value before the op going to "
                               "its own grad: runs natively")
    if target.value is None:
        return None
    if target.is_rebound or graph.may_have_read(target):
        _break_natively(views, f"in-place {op} with a differentiable operand makes {target.tracker.describe()} "
                               "require grad, the gradient of its value before the op reaching it, a value the "
                               "program is not given (changed in the frame before, or read by a built-in "
                               "layer): runs natively")
    return OldValueVariable(target)


def _tensors_in(variables: list[VariableBase]) -> list[TensorVariable]:
    """The tensors among ``variables`` and in the lists, tuples and dicts among them: the operands the op's
    statement gets (`FunctionGraph._to_sir_arg`)."""
    from .container import DictVariable, SequenceVariable

    found: list[TensorVariable] = []
    pending = list(variables)
    while pending:
        var = pending.pop()
        if isinstance(var, TensorVariable):
            found.append(var)
        elif isinstance(var, SequenceVariable):
            pending.extend(var.items)
        elif isinstance(var, DictVariable):
            pending.extend(var.items.values())
    return found


def _break_natively(views: list[Symbol], reason: str) -> None:
    """The op runs natively at a graph break, on the program's outputs: separate tensors, so a view of the
    changed tensor would not see the change; with views the whole frame runs eagerly instead."""
    if views:
        raise FallbackError(f"{reason}; a view of the tensor was taken earlier (views are not simulated)")
    raise BreakGraphError(reason)


def _is_leaf_requiring_grad(var: TensorVariable) -> bool:
    if var.meta.stop_gradient:
        return False
    if var.value is None or var.is_rebound:  # an op's output requiring grad is not a leaf
        return False
    return bool(var.value.is_leaf)


def _views(target: TensorVariable, name: str) -> list[Symbol]:
    """Symbols of views taken from ``target`` (from any value it held); a `FallbackError` when ``target`` may
    itself be a view of another tensor (the change would have to reach that one too)."""
    graph = target.graph
    history = set(target.history)
    group = set(history)
    views: list[Symbol] = []
    for statement in graph.statements:
        outputs = statement.output_symbols()
        if history.intersection(outputs):
            continue  # (whether the tensor is a view itself: `reshaped_view_base`)
        if group.intersection(statement.inputs()) and _may_alias(statement, graph):
            group.update(outputs)
            views += outputs
    return views


def saver_in_graph(target: TensorVariable) -> Statement | None:
    """An earlier statement of the graph whose eager backward keeps the tensor ``target`` holds now (as an input
    or an output), so that an in-place change makes eager's ``backward()`` refuse (`saves_for_backward`)."""
    graph = target.graph
    symbol = target.symbol
    for statement in graph.statements:
        if statement.no_grad or all(graph.metas[out].stop_gradient for out in statement.output_symbols()):
            continue  # no gradient node
        if (symbol in statement.inputs() or symbol in statement.output_symbols()) \
                and saves_for_backward(statement, graph, symbol):
            return statement
    return None


_saves_cache: dict[Any, bool] = {}
DYNAMIC_STAND_IN = 2  # the size a dynamic dimension gets in the probe


def saves_for_backward(statement: Statement, graph: "FunctionGraph", symbol: Symbol) -> bool:
    """Whether eager's gradient node of ``statement`` keeps ``symbol`` (one of its inputs or outputs): found by
    running the op on zeros (floating inputs requiring grad), bumping the inplace version of that tensor and
    calling ``backward()`` (cached per op, metas and position; a dynamic dimension gets a size of its own).
    Ops that cannot be run so (layers, PyLayers, a failing probe) count as keeping nothing."""
    if statement.kind not in ("api", "method") or _is_loss_function(statement):
        return False

    def position(leaf: Any) -> Any:
        return leaf == symbol if isinstance(leaf, Symbol) else None

    where = (map_structure(position, (statement.args, statement.kwargs)), map_structure(position, statement.outputs))
    args, kwargs, key = _metas_and_key(statement, graph, repr(where))
    return _cached(_saves_cache, key, lambda: _run_saves_probe(statement, args, kwargs, where))


def _metas_and_key(statement: Statement, graph: "FunctionGraph", *extra: Any) -> tuple[tuple, dict, Any]:
    """The statement's arguments with metas for symbols, and the cache key of a probe on them (None when they
    cannot be hashed)."""
    from ..function_graph import repr_free

    def meta_of(leaf: Any) -> Any:
        return graph.metas[leaf] if isinstance(leaf, Symbol) else leaf

    args = map_structure(meta_of, statement.args)
    kwargs = {k: map_structure(meta_of, v) for k, v in statement.kwargs.items()}
    try:
        key: Any = (statement.kind, statement.target, repr_free(args), repr_free(kwargs), *extra)
        hash(key)
    except TypeError:
        key = None
    return args, kwargs, key


def _cached(cache: dict[Any, Any], key: Any, compute: Callable[[], Any]) -> Any:
    if key is not None and key in cache:
        return cache[key]
    answer = compute()
    if key is not None:
        cache[key] = answer
    return answer


def _call_on(statement: Statement, call_args: tuple, call_kwargs: dict) -> Any:
    """Run the op of ``statement`` on concrete arguments (the random state is restored after)."""
    rng = paddle.get_rng_state()
    try:
        if statement.kind == "method":
            return getattr(call_args[0], statement.target)(*call_args[1:], **call_kwargs)
        return statement.target(*call_args, **call_kwargs)
    finally:
        paddle.set_rng_state(rng)


def _run_saves_probe(statement: Statement, args: tuple, kwargs: dict, where: tuple) -> bool:
    def concrete(shape: tuple[int, ...]) -> list[int]:  # (which tensors an op keeps does not depend on sizes)
        return [DYNAMIC_STAND_IN if dim < 0 else dim for dim in shape]

    metas = [leaf for leaf in leaves((args, kwargs)) if isinstance(leaf, MetaInfo)]
    if sum(math.prod(concrete(meta.shape)) for meta in metas) > PROBE_MAX_ELEMENTS:
        return False

    def zeros(leaf: Any) -> Any:
        if not isinstance(leaf, MetaInfo):
            return leaf
        tensor = paddle.zeros(concrete(leaf.shape), leaf.dtype)
        tensor.stop_gradient = leaf.stop_gradient or leaf.dtype not in _FLOATING
        return tensor

    call_args = map_structure(zeros, args)
    call_kwargs = {k: map_structure(zeros, v) for k, v in kwargs.items()}
    try:
        with paddle.enable_grad():
            result = _call_on(statement, call_args, call_kwargs)
            inputs_where, outputs_where = where
            marked = [t for t, hit in zip(leaves((call_args, call_kwargs)), leaves(inputs_where)) if hit] + \
                [t for t, hit in zip(leaves(result), leaves(outputs_where)) if hit]
            differentiable = [t for t in leaves(result) if isinstance(t, paddle.Tensor) and not t.stop_gradient]
            if not differentiable:
                return False
            for tensor in marked:
                if isinstance(tensor, paddle.Tensor):
                    tensor._bump_inplace_version()
            paddle.add_n([t.sum().astype("float32") for t in differentiable]).backward()
    except RuntimeError as exc:
        return "modified by an inplace operation" in str(exc)
    except Exception:  # noqa: BLE001 - cannot tell
        return False
    return False


class Probe(NamedTuple):
    """How an op's outputs relate to its tensor inputs in eager mode."""

    shares_memory: bool  # an output is a view of an input (or the input itself)
    same_object: bool  # an output is an input itself (``x.reshape(x.shape)``, ``x.astype(x.dtype)``, ``+x``)
    known: bool = True  # False: not probed (a layer, a dynamic shape...), both are assumed


_UNKNOWN = Probe(True, True, known=False)
_NEW_TENSOR = Probe(False, False)
# Binary arithmetic on tensors always computes a new tensor: not probed (the probe runs the op on zeros once
# per signature, which for a large matmul is not free). (``operator.pos`` is not here: ``+x`` is ``x``.)
_COMPUTING_OPERATORS = frozenset({
    operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv, operator.mod, operator.pow,
    operator.matmul, operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ifloordiv,
    operator.imod, operator.ipow, operator.imatmul,
})
_probe_cache: dict[Any, Probe] = {}
# Built-in layers whose forward always computes a new tensor from its input (a matmul, a convolution, a gather, a
# normalisation), never a view of it or the input itself (as ``nn.Identity``, ``nn.Flatten`` or an inactive
# ``nn.Dropout`` give), and whose eager backward keeps no output (`saves_for_backward` counts a layer as keeping
# nothing): an in-place change of the output (``h = self.fc(x); h.add_(r)``) is simulated, not a fallback.
_NEW_TENSOR_LAYERS = frozenset({
    paddle.nn.Linear, paddle.nn.Conv1D, paddle.nn.Conv2D, paddle.nn.Conv3D, paddle.nn.Conv1DTranspose,
    paddle.nn.Conv2DTranspose, paddle.nn.Conv3DTranspose, paddle.nn.Embedding, paddle.nn.LayerNorm,
    paddle.nn.BatchNorm, paddle.nn.BatchNorm1D, paddle.nn.BatchNorm2D, paddle.nn.BatchNorm3D,
    paddle.nn.InstanceNorm1D, paddle.nn.InstanceNorm2D, paddle.nn.InstanceNorm3D,
})


def _computes_new_tensors(target: Any) -> bool:
    """A ``layer`` statement running one of `_NEW_TENSOR_LAYERS`' own forward, without forward hooks (a hook may
    return anything)."""
    from ....symbolic.sir import LayerCall

    if not isinstance(target, LayerCall) or not target.is_alive() or target.runs_forward_hooks():
        return False
    # (an exact class: a subclass may override forward; ``super().forward(x)`` in one runs ``forward_of``'s)
    return (target.forward_of or type(target.layer)) in _NEW_TENSOR_LAYERS


def _is_loss_function(statement: Statement) -> bool:
    """A function of ``paddle.nn.functional.loss``: it computes a new tensor, never a view, and is never run
    on the probes' zeros (``F.ctc_loss`` of zero lengths divides an integer by zero in Paddle's warpctc kernel:
    SIGFPE, the process killed)."""
    return statement.kind == "api" and getattr(statement.target, "__module__", None) == "paddle.nn.functional.loss"


def forget_alias_probes() -> None:
    _probe_cache.clear()
    _saves_cache.clear()


def producer(graph: "FunctionGraph", symbol: Symbol) -> Statement | None:
    """The statement whose outputs include ``symbol`` (None for an input)."""
    return next((s for s in reversed(graph.statements) if symbol in s.output_symbols()), None)


def may_return_an_input(var: TensorVariable) -> bool:
    """Whether the tensor ``var`` was made by an op that may hand back one of its inputs itself."""
    statement = producer(var.graph, var.history[0])
    return statement is None or probe(statement, var.graph).same_object


def _may_alias(statement: Statement, graph: "FunctionGraph") -> bool:
    return probe(statement, graph).shares_memory


def probe(statement: Statement, graph: "FunctionGraph") -> Probe:
    """Whether an output of ``statement`` may share memory with one of its tensor inputs (a view), or be one of
    them: found by running it on zeros of the same meta, under no_grad and with the random state restored
    (cached per op and metas). Anything that cannot be probed (a layer, a dynamic shape, a failing probe) may
    do both."""
    if statement.kind == "layer":
        return _NEW_TENSOR if _computes_new_tensors(statement.target) else _UNKNOWN
    if statement.kind not in ("api", "method"):
        return _UNKNOWN
    if statement.kind == "api" and (any(statement.target is fn for fn in _COMPUTING_OPERATORS)
                                    or _is_loss_function(statement)):
        return _NEW_TENSOR
    args, kwargs, key = _metas_and_key(statement, graph)
    return _cached(_probe_cache, key, lambda: _run_probe(statement, args, kwargs))


# Larger inputs are not probed (the zeros would cost too much memory): their ops count as unknown.
PROBE_MAX_ELEMENTS = 1 << 24


def _run_probe(statement: Statement, args: tuple, kwargs: dict) -> Probe:
    """A dynamic dimension gets a size (`DYNAMIC_STAND_IN`): whether an op makes a view does not depend on the
    sizes, and an unknown answer keeps a view of an input from being made again from it after the program (fuzz
    seed 122592: ``t = y.reshape([-1, 1]).squeeze(-1)`` translated again for another length, ``t[0] = s``
    after a break no longer reached ``y``)."""
    def concrete(shape: tuple[int, ...]) -> list[int]:
        return [DYNAMIC_STAND_IN if dim < 0 else dim for dim in shape]

    metas = [leaf for leaf in leaves((args, kwargs)) if isinstance(leaf, MetaInfo)]
    if any(dim == 0 for meta in metas for dim in meta.shape):
        return _UNKNOWN  # an empty tensor (no memory to compare)
    if sum(math.prod(concrete(meta.shape)) for meta in metas) > PROBE_MAX_ELEMENTS:
        return _UNKNOWN

    def zeros(leaf: Any) -> Any:
        return paddle.zeros(concrete(leaf.shape), leaf.dtype) if isinstance(leaf, MetaInfo) else leaf

    call_args = map_structure(zeros, args)
    call_kwargs = {k: map_structure(zeros, v) for k, v in kwargs.items()}
    try:
        with paddle.no_grad():
            result = _call_on(statement, call_args, call_kwargs)
    except Exception:  # noqa: BLE001 - cannot tell
        return _UNKNOWN
    inputs = [leaf for leaf in leaves((call_args, call_kwargs)) if isinstance(leaf, paddle.Tensor)]
    outputs = [leaf for leaf in leaves(result) if isinstance(leaf, paddle.Tensor)]
    return Probe(any(out._is_shared_buffer_with(inp) for out in outputs for inp in inputs),
                 any(out is inp for out in outputs for inp in inputs))


class ViewReplay(NamedTuple):
    """Outputs of a program that are eagerly views of a tensor the caller can see (an input, a tensor written back
    after the program, or another output): made again natively from that base after the program (a program's
    outputs are separate tensors), so an in-place change of one reaches the other, as in eager mode."""

    statements: list[Statement]  # the view ops, in program order
    roots: list[Symbol]  # their bases: graph inputs, final values of written-back tensors, or program outputs
    views: list[Symbol]  # the outputs they make (no longer returned by the program)


def written_back_tensors(graph: "FunctionGraph") -> dict[Symbol, TensorVariable]:
    """The tensors from outside the frame changed in place, by the symbol of their final value: the generated
    code writes that value back into the caller's tensor (`TensorVariable.write_back`)."""
    return {var.symbol: var for var in graph.side_effects.changed_tensors()}


def plan_view_replay(graph: "FunctionGraph", outputs: list[Symbol], written_back_only: bool = False) -> \
        ViewReplay | None:
    """Which of ``outputs`` are views (found by `probe`) of a graph input, of the final value of a tensor written
    back, or of another output, through a chain of view ops each reading one tensor. Others (a view of a
    temporary nobody sees) stay program outputs. ``written_back_only``: only views of written-back tensors
    (for statements replayed eagerly on the real inputs, whose views of inputs are views already).

    A view of a written-back tensor is made from the caller's tensor after the write-back (`ProgramPlan`):
    made before it, it would see the old data and hang from the old gradient node, where eager's view of the
    changed tensor hangs from the in-place op's."""
    changed = written_back_tensors(graph)
    inputs = set() if written_back_only else \
        {symbol for symbol, var in graph.inputs.items() if not var.is_rebound}
    candidates = set() if written_back_only else set(outputs)
    chains: dict[Symbol, list[Statement]] = {}
    roots: dict[Symbol, Symbol] = {}
    for symbol in outputs:
        if symbol in changed:
            continue  # (the final value of a tensor written back: the write-back makes it the caller's)
        chain: list[Statement] = []
        current = symbol
        while True:
            statement = producer(graph, current)
            if statement is None:
                break
            result = probe(statement, graph)
            sources = set(statement.inputs())
            if not (result.known and result.shares_memory) or len(sources) != 1:
                break
            chain.insert(0, statement)
            current = next(iter(sources))
            if current in inputs or current in changed or current in candidates:
                chains[symbol] = chain
                roots[symbol] = current
                break
    # A root that is itself replayed stays a program output (keeps it simple: roots are never replayed).
    replayed = [symbol for symbol in outputs if symbol in chains and symbol not in roots.values()]
    if not replayed:
        return None
    order = {id(statement): index for index, statement in enumerate(graph.statements)}
    chosen = {id(statement): statement for symbol in replayed for statement in chains[symbol]}
    statements = sorted(chosen.values(), key=lambda statement: order[id(statement)])
    root_list = list(dict.fromkeys(roots[symbol] for symbol in replayed))
    return ViewReplay(statements, root_list, replayed)

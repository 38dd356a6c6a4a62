"""Callables the simulation knows how to call: Paddle APIs, tensor methods, builtins, `psdb` helpers."""
from __future__ import annotations

import abc
import collections
import enum
import functools
import inspect
import operator
import sys
import types
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
import paddle

from ....errors import BreakGraphError, FallbackError, UserCodeError
from ... import pyversion
from ..tracker import ConstTracker, DummyTracker, GetAttrTracker, Tracker
from .base import HEAPTYPE, VariableBase, VariableFactory
from .basic import READ_BY_ATTRIBUTE_C_TYPES, ConstantVariable, ObjectVariable, TensorVariable

if TYPE_CHECKING:
    from ..function_graph import FunctionGraph
    from ..guard import GuardBuilder


class CallableVariable(ObjectVariable):
    """Base of the callables; ``call`` receives simulated arguments."""

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        raise FallbackError(f"calling {self.value!r} is not supported yet")


# Paddle functions that are tensor operations live in these modules; anything else in `paddle` (device
# queries, seeds, I/O, flags) is not an op and must not be run on static placeholders.
_PADDLE_OP_MODULES = (
    "paddle.tensor.", "paddle.nn.functional.", "paddle.base.dygraph.generated_tensor_methods_patch",
    "paddle.base.libpaddle.pir.ops", "paddle._C_ops", "paddle.linalg", "paddle.fft", "paddle.signal",
    "paddle.incubate.nn.functional.", "paddle.geometric.", "paddle.vision.ops", "paddle.audio.functional.",
)
_NOT_OPS = {"create_parameter", "set_printoptions", "is_tensor", "is_complex", "is_integer",
            "is_floating_point", "in_dynamic_mode"}


def is_paddle_op(value: Any) -> bool:
    if isinstance(value, (type, paddle.nn.Layer)) or not callable(value):
        return False
    module = getattr(value, "__module__", None) or ""
    name = getattr(value, "__name__", "")
    return module.startswith(_PADDLE_OP_MODULES) and name not in _NOT_OPS


_PUBLIC_NAMES: dict[int, str] = {}


def _qualified_name(fn: Any) -> str:
    """The public spelling of a Paddle function (``paddle.matmul``, not its patched private name)."""
    if not _PUBLIC_NAMES:
        for module in (paddle.linalg, paddle.fft, paddle.nn.functional, paddle):
            for name in dir(module):
                value = getattr(module, name, None)
                if callable(value) and not isinstance(value, type):
                    _PUBLIC_NAMES[id(value)] = f"{module.__name__}.{name}"
    name = _PUBLIC_NAMES.get(id(fn))
    if name is not None:
        return name
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__name__', repr(fn))}"


class PaddleApiVariable(CallableVariable):
    """A Paddle function such as ``paddle.matmul`` or ``F.relu``: one ``api`` SIR statement per call."""

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        from .inplace import in_place_api

        from .symbolic_int import eager_floor_division

        name = _qualified_name(self.value)
        changed = in_place_api(self.value, name, args, kwargs)
        if changed is not None:
            return changed
        eager_form = eager_floor_division(self.value, args) if not kwargs else None
        if eager_form is not None:
            return eager_form
        result = self.graph.call_tensor_op("api", name, self.value, args, kwargs)
        from .known_values import note_known_result

        note_known_result(self.value, args, kwargs, result)
        return result


# Tensor methods whose result leaves the tensor world (Python values, numpy, autograd state, I/O): a graph
# break, never a graph op (a static op would return a tensor where eager returns a float).
NON_GRAPH_TENSOR_METHODS = frozenset({
    "item", "tolist", "numpy", "__array__", "__bool__", "__int__", "__float__", "__index__", "__len__",
    "__format__", "__repr__", "__str__", "__complex__", "backward", "register_hook", "clear_grad",
    "clear_gradient", "gradient", "data_ptr", "copy_", "_copy_to", "cuda", "pin_memory",
    "value", "get_tensor", "detach_", "_md5sum", "_is_initialized", "is_dense", "is_dist", "is_sparse",
    "numel_", "element_size", "_numel", "contiguous", "is_contiguous", "get_strides", "strides",
})


# Dygraph-only tensor methods (programs are built in static mode, where they raise) with a static method that
# gives the same values and the same memory sharing in eager mode, for a shape argument: ``x.view([B, T, C])``
# is ``x.reshape([B, T, C])`` (both views of ``x``). ``view`` of a dtype reinterprets the bits: not covered.
_STATIC_FOR_SHAPE_ARGUMENT = {"view": "reshape"}


def _static_counterpart(name: str, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> str | None:
    """The static method to record for ``tensor.name(*args, **kwargs)``, or None to record it as it is."""
    from .container import SequenceVariable

    counterpart = _STATIC_FOR_SHAPE_ARGUMENT.get(name)
    if counterpart is None or kwargs.keys() - {"shape_or_dtype"} or len(args) + len(kwargs) != 1:
        return None
    return counterpart if isinstance(_counterpart_argument(args, kwargs), SequenceVariable) else None


def _counterpart_argument(args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    return args[0] if args else kwargs["shape_or_dtype"]


def _register_hook_after_graph(tensor: TensorVariable, args: list[VariableBase],
                               kwargs: dict[str, VariableBase]) -> VariableBase:
    """``tensor.register_hook(hook)`` recorded as a side effect replayed after the graph, when that is what
    eager does: the tensor comes from outside the frame (an input, a parameter), so the gradient reaching it
    in backward is the program's, whenever the hook was registered before backward; it requires gradients
    (guarded; else eager raises: the call runs natively); the handle returned is dropped by the very next
    instruction (a kept handle would be needed before the replay). A later in-place change of the tensor
    breaks the graph (see `apply_in_place`). Otherwise the graph breaks with the reason."""
    graph = tensor.graph
    executor = graph.current_executor
    if kwargs or len(args) != 1:
        raise BreakGraphError("Tensor.register_hook() with other than one hook argument runs natively")
    if tensor.value is None or not tensor.tracker.is_traceable() or tensor.is_rebound:
        raise BreakGraphError("a gradient hook on a tensor computed in the frame: no Python hook sees a gradient "
                              "inside a program, so the graph ends there (register it on an input, or after "
                              "forward, to keep one graph)")
    if executor.next_opname() != "POP_TOP":
        raise BreakGraphError("Tensor.register_hook() whose handle is kept runs natively")
    graph.add_guard(tensor)  # (its stop_gradient among the meta)
    if tensor.meta.stop_gradient:
        raise BreakGraphError("Tensor.register_hook() on a tensor that stops gradients runs natively (eager raises)")
    graph.side_effects.call_after_graph(paddle.Tensor.register_hook, [tensor, args[0]])
    graph.hooked_tensors.append(tensor)
    graph.side_effects.on_rollback(graph.hooked_tensors.pop)
    return ConstantVariable(None, graph, DummyTracker())  # (the handle: dropped, see above)


def _set_value(tensor: TensorVariable, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    from .inplace import set_value

    return set_value(tensor, args, kwargs)


def _is_dist(tensor: TensorVariable, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    from .tensor_values import is_dist_value

    if args or kwargs:
        raise BreakGraphError("Tensor.is_dist() with arguments runs natively (eager raises)")
    return is_dist_value(tensor)


@functools.cache
def _only_cpu_places() -> bool:
    """Whether every tensor of this process is on the CPU: a build with no GPU, XPU nor custom device."""
    device = paddle.device
    return not (device.is_compiled_with_cuda() or device.is_compiled_with_xpu() or device.get_all_custom_device_type())


def _cpu(tensor: TensorVariable, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    """``x.cpu()`` of a tensor already on the CPU is ``x`` itself (eager returns ``self``); where a tensor may be
    elsewhere, the call runs natively."""
    if args or kwargs or not _only_cpu_places():
        raise BreakGraphError("Tensor.cpu() leaves the graph (a copy to another place)")
    return tensor


# Tensor methods simulated by a rule of their own: ``rule(tensor, args, kwargs)`` gives the result.
def _item(tensor: TensorVariable, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    """``t.item()``: the simulated int when the simulation knows ``t``'s value (a dimension read
    through ``paddle.shape(x)[i]``, see `known_values`); otherwise the value leaves the graph (a break)."""
    from .known_values import known_python_int

    known = known_python_int(tensor, args, kwargs)
    if known is None:
        raise BreakGraphError("Tensor.item() leaves the graph (Python value or autograd state)")
    return known


def _set_item(tensor: TensorVariable, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    """``t.__setitem__(key, value)`` called by name: ``t[key] = value`` (an in-place change, see
    `TensorVariable.setitem`), not a method statement whose result the tensor would not take."""
    if kwargs or len(args) != 2:
        raise BreakGraphError("Tensor.__setitem__() with other than two positional arguments runs natively")
    tensor.setitem(args[0], args[1])
    return ConstantVariable(None, tensor.graph, DummyTracker())


_TENSOR_METHOD_RULES: dict[str, Callable[[TensorVariable, list[VariableBase], dict[str, VariableBase]],
                                         VariableBase]] = {
    "set_value": _set_value, "register_hook": _register_hook_after_graph, "is_dist": _is_dist, "cpu": _cpu,
    "item": _item, "__setitem__": _set_item,
}


class TensorMethodVariable(CallableVariable):
    """``tensor.method`` bound during simulation: one ``method`` SIR statement per call."""

    def __init__(self, tensor: TensorVariable, name: str, graph: "FunctionGraph") -> None:
        super().__init__(getattr(paddle.Tensor, name, None), graph, DummyTracker((tensor,)))
        self.tensor = tensor
        self.name = name

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        from .tensor_values import META_METHODS, meta_method_value

        if self.name in META_METHODS:
            return meta_method_value(self.tensor, self.name, args, kwargs)
        rule = _TENSOR_METHOD_RULES.get(self.name)
        if rule is not None:
            return rule(self.tensor, args, kwargs)
        if self.name in NON_GRAPH_TENSOR_METHODS:
            raise BreakGraphError(f"Tensor.{self.name}() leaves the graph (Python value or autograd state)")
        from .inplace import in_place_method, is_in_place_name

        if is_in_place_name(self.name):
            return in_place_method(self.tensor, self.name, args, kwargs)
        counterpart = _static_counterpart(self.name, args, kwargs)
        if counterpart is not None:
            return self.graph.call_tensor_op("method", counterpart, counterpart, [self.tensor, _counterpart_argument(
                args, kwargs)], {})
        result = self.graph.call_tensor_op("method", self.name, self.name, [self.tensor, *args], kwargs)
        if self.name == "numel" and not args and not kwargs:
            from .known_values import note_element_count

            note_element_count(self.tensor, result)
        return result

    def children(self) -> list[VariableBase]:
        return [self.tensor]

    def _reconstruct_computed(self, codegen: Any) -> None:
        codegen.reconstruct(self.tensor)
        codegen.load_attr(self.name)

    def __repr__(self) -> str:
        return f"TensorMethodVariable({self.tensor.symbol.name}.{self.name})"


class RealTensorMethodVariable(TensorMethodVariable):
    """A real bound method of a tensor reached as a value: ``h.reshape`` loaded before the arguments of its
    call, kept on the stack across a graph break in them (``h.reshape([int(h.numel()), 1])``) and received by
    the resume function; a method passed as an argument. Called as ``tensor.name(...)`` on its ``__self__``
    (one variable per real tensor, guarded as any input), the object guarded by its type and function: a new
    object at every access, never by identity (which missed every call, and a Paddle op run on the eager
    tensor it is bound to fell back)."""

    def __init__(self, value: Any, graph: "FunctionGraph", tracker: Tracker) -> None:
        self.tracker = tracker  # (read by the tracker of ``__self__`` as the factory wraps it)
        sub = GetAttrTracker(self, "__self__") if tracker.is_traceable() else DummyTracker((self,))
        tensor = VariableFactory.from_value(value.__self__, graph, sub)
        super().__init__(tensor, value.__name__, graph)
        self.value = value
        self.tracker = tracker

    def make_guards(self, builder: "GuardBuilder", expr: str) -> list[str]:
        kind = type(self.value)
        if kind is types.MethodType:
            return [f"type({expr}) is {builder.constant(kind)}",
                    f"{expr}.__func__ is {builder.constant(self.value.__func__)}"]
        # (a method of C code: the same name on a tensor is the same method, the tensor guarded as an input)
        return [f"type({expr}) is {builder.constant(kind)}", f"{expr}.__name__ == {self.name!r}",
                f"isinstance({expr}.__self__, {builder.constant(paddle.Tensor)})"]

    def get_py_value(self) -> Any:
        return self.value

    def __repr__(self) -> str:
        return f"RealTensorMethodVariable({self.tensor!r}.{self.name})"


def _is_real_tensor_method(value: Any) -> bool:
    """A bound method of a tensor that ``getattr(tensor, name)`` gives (not one stored on it)."""
    if type(value) not in (types.MethodType, types.BuiltinMethodType):
        return False
    owner = getattr(value, "__self__", None)
    if not isinstance(owner, paddle.Tensor):
        return False
    name = getattr(value, "__name__", None)
    if not isinstance(name, str) or name.startswith("__"):
        return False
    try:
        return getattr(type(owner), name, None) is not None and getattr(owner, name) == value
    except Exception:  # noqa: BLE001 - an attribute whose getter raises: not a method of the tensor
        return False


@VariableFactory.register(71)
def _tensor_method_rule(value: Any, graph: "FunctionGraph", tracker: Tracker) -> VariableBase | None:
    return RealTensorMethodVariable(value, graph, tracker) if _is_real_tensor_method(value) else None


# -- builtins: one dispatch table --------------------------------------------------------------------------
BuiltinRule = Callable[["FunctionGraph", list[VariableBase], dict[str, VariableBase]], VariableBase]
BUILTIN_DISPATCH: dict[Any, BuiltinRule] = {}


def builtin_rule(*fns: Any) -> Callable[[BuiltinRule], BuiltinRule]:
    """Register how a builtin is simulated."""

    def decorate(rule: BuiltinRule) -> BuiltinRule:
        for fn in fns:
            BUILTIN_DISPATCH[fn] = rule
        return rule

    return decorate


def constant_fold(fn: Callable[..., Any], graph: "FunctionGraph", args: list[VariableBase],
                  kwargs: dict[str, VariableBase], data_only: bool = False,
                  new_containers: bool = False) -> VariableBase | None:
    """Evaluate ``fn`` directly when every argument is a known Python value (not a tensor).

    ``new_containers``: a container ``fn`` returns is made by the call (as `_returns_new_containers` knows
    of str/bytes/number methods): the frame's own.

    ``data_only``: ``fn`` is a pure computation of plain values (formatting, arithmetic) that decides
    nothing by itself (`FunctionGraph.add_guard`), unless it raises: the exception then decides what the
    frame does next."""
    if any(isinstance(a, TensorVariable) for a in [*args, *kwargs.values()]):
        return None
    _check_no_hidden_user_code(fn, [*args, *kwargs.values()])
    known: dict[int, Any] = {}  # one value per variable: a container passed twice is one object (``s & s``)

    def value_of(var: VariableBase) -> Any:
        if id(var) not in known:
            known[id(var)] = var.get_py_value()
        return known[id(var)]

    reading_data, graph.reading_data = graph.reading_data, data_only  # (a symbolic number pinned as data)
    try:
        values = [value_of(a) for a in args]
        kw_values = {k: value_of(v) for k, v in kwargs.items()}
    finally:
        graph.reading_data = reading_data
    for var in [*args, *kwargs.values()]:
        graph.add_guard(var, data_only=data_only)
        if isinstance(var, ObjectVariable) and fn not in _SHALLOW_FUNCTIONS:
            var.read_contents()
    try:
        result = graph.run_user_python(fn, values, kw_values)
    except UserCodeError:
        for var in [*args, *kwargs.values()]:
            graph.add_guard(var)
        raise
    if isinstance(result, _FRESH_MUTABLE_RESULTS):
        # Folded, it would be one constant object shared by every call (changed in place by one call, seen
        # changed by the next): each eager call makes its own, so the operation runs natively.
        raise BreakGraphError(f"{getattr(fn, '__name__', fn)}() makes a new {type(result).__name__}: runs natively")
    var = VariableFactory.from_value(result, graph, DummyTracker(tuple(args) + tuple(kwargs.values())))
    if new_containers or _returns_new_containers(fn):
        var.outside_object = False  # (a list made by the call: the frame's own, to change as it likes)
    return var


# The types whose methods never hand back an object that existed before the call: what they return that
# can be changed (``str.split``'s list) is made by the call.
_METHODS_MAKE_NEW_CONTAINERS = (str, bytes, int, float, complex, bool)


def _returns_new_containers(fn: Callable[..., Any]) -> bool:
    """Whether a container ``fn`` returns is new (``s.split(",")``), not one from outside the frame: a method
    of a value of `_METHODS_MAKE_NEW_CONTAINERS`, bound or called on the type."""
    owner = getattr(fn, "__self__", None)
    if type(owner) in _METHODS_MAKE_NEW_CONTAINERS:
        return True
    return getattr(fn, "__objclass__", None) in _METHODS_MAKE_NEW_CONTAINERS


# Types of the values a computation may take as data only (`constant_fold`'s ``data_only``).
PLAIN_DATA_TYPES = (int, float, bool, str, type(None))


def is_plain_data(var: VariableBase) -> bool:
    """A known int, float, bool, str or None, or a symbolic number (pinned, as data, by the computation), or
    deferred text (its numbers pinned so)."""
    from .deferred_text import DeferredTextVariable
    from .symbolic_int import SymbolicIntVariable

    if isinstance(var, SymbolicIntVariable):
        return var.known is not None
    return type(var) in (ConstantVariable, DeferredTextVariable) and type(var.value) in PLAIN_DATA_TYPES


# What a folded operation may return that is a new mutable object modelled by no simulated container (a numpy
# array from ``arr > 0.5``, ``a * 2``): it must not become a constant of the translation.
_FRESH_MUTABLE_RESULTS = (np.ndarray, bytearray)


# Functions that look at an object's identity or type only, never at its state or its Python methods.
_SHALLOW_FUNCTIONS = frozenset({operator.is_, operator.is_not, id, type, callable, isinstance, issubclass})


def _check_no_hidden_user_code(fn: Callable[..., Any], operands: list[VariableBase]) -> None:
    """Folding runs ``fn`` on real objects now. On an instance of a user class that could run the class's
    Python dunders (not simulated: unguarded state, and the placeholder of an object made in the frame
    has none of its attributes) or print its address: the graph breaks and it runs natively."""
    from .container import DictVariable, SequenceVariable
    from .dunder import is_user_instance

    if member_of(_SHALLOW_FUNCTIONS, fn):
        return
    containers = [var for var in operands if isinstance(var, (SequenceVariable, DictVariable))]
    if fn in (operator.eq, operator.ne) and not containers:
        return  # reached only without Python __eq__/__ne__ (see dunder.py): the default compares identity
    seen: list[VariableBase] = []
    for var in operands:
        seen.append(var)
        if isinstance(var, SequenceVariable):
            seen.extend(var.items)
        elif isinstance(var, DictVariable):
            seen.extend(var.items.values())
    changed = var_changed(seen[0].graph) if seen else (lambda var: False)
    for var in seen:
        if is_user_instance(var) and (_has_python_dunders(type(var.value)) or getattr(var, "created", False)
                                      or changed(var)):
            raise BreakGraphError(f"{getattr(fn, '__name__', fn)}() on a {type(var.value).__name__} object "
                                  "runs its Python code natively")


def var_changed(graph: "FunctionGraph") -> Callable[[VariableBase], bool]:
    """Whether a user instance from outside the frame has changes the simulation has not applied to the real
    object yet (the items of a list or dict subclass instance, written back after the graph): folding would
    see its old state."""
    mutated = graph.side_effects.mutated

    def changed(var: VariableBase) -> bool:
        return id(var) in mutated

    return changed


def _has_python_dunders(cls: type) -> bool:
    import types

    return any(isinstance(value, types.FunctionType) and name.startswith("__") and name.endswith("__")
               and name not in ("__init__", "__new__", "__init_subclass__")
               for klass in cls.__mro__[:-1] for name, value in vars(klass).items())


IN_PLACE_OPERATORS = frozenset({
    operator.iadd, operator.iand, operator.ifloordiv, operator.ilshift, operator.imatmul, operator.imul,
    operator.imod, operator.ior, operator.ipow, operator.irshift, operator.isub, operator.itruediv,
    operator.ixor,
})


def _changes_in_place(var: VariableBase, fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` (an in-place operator) would mutate the real object ``var`` holds: an object whose
    type defines the in-place method (a numpy array, a C type), not an immutable value or a tensor."""
    if isinstance(var, (ConstantVariable, TensorVariable)):
        return False
    try:
        py_type = var.get_py_type()
    except Exception:  # noqa: BLE001 - unknown value: not folded anyway
        return False
    return hasattr(py_type, f"__{fn.__name__}__")


def apply_operator(graph: "FunctionGraph", fn: Callable[..., Any], operands: list[VariableBase]) -> VariableBase:
    """An operator (a function of `operator`) on variables, dispatched like the interpreter does: user
    dunders are inlined, symbolic ints stay in the graph, known values are folded, tensors become an
    ``api`` statement calling the operator."""
    from .container import container_operator
    from .deferred_text import DeferredTextVariable, deferred_text
    from .dunder import dunder_operator
    from .symbolic_int import (eager_bool_operand, eager_constant_operand, eager_floor_division,
                               eager_reflected_division, eager_scaling, symbolic_arithmetic, tensor_operand,
                               with_eager_scalar_operand_shape, with_eager_scale_bias)

    result = dunder_operator(fn, operands)
    if result is not None:
        return result
    symbolic = symbolic_arithmetic(fn, operands)
    if symbolic is not None:
        return symbolic
    on_items = container_operator(fn, operands)
    if on_items is not None:
        return on_items
    if fn in IN_PLACE_OPERATORS and _changes_in_place(operands[0], fn):
        # Folding would change the real object during simulation (and only then): run it natively.
        raise BreakGraphError(f"in-place {fn.__name__} on a {operands[0].get_py_type().__name__} changes it")
    if fn in _TEXT_OPERATORS and type(operands[0]) in (ConstantVariable, DeferredTextVariable) \
            and type(operands[0].value) is str:  # (``"%d/%d" % (i, n)``, ``"[" + text``: made again at run time)
        deferred = deferred_text(graph, fn, operands)
        if deferred is not None:
            return deferred
    folded = constant_fold(fn, graph, operands, {}, data_only=all(is_plain_data(var) for var in operands))
    if folded is not None:
        return folded
    tensor = next((o for o in operands if isinstance(o, TensorVariable)), None)
    if tensor is None:
        return graph.call_tensor_op("api", f"operator.{fn.__name__}", fn, operands, {})
    operands = with_eager_scalar_operand_shape(fn, operands)
    tensor = next(o for o in operands if isinstance(o, TensorVariable))
    for eager_form in (eager_bool_operand, eager_scaling, eager_reflected_division, eager_constant_operand,
                       eager_floor_division):
        result = eager_form(fn, operands)
        if result is not None:
            return result
    # A symbolic int operand computes in the tensor's dtype, as a Python int would.
    result = graph.call_tensor_op("api", f"operator.{fn.__name__}", fn,
                                  [tensor_operand(tensor, o, fn) for o in operands], {})
    return with_eager_scale_bias(fn, operands, result)


# Operators that make text from a string and values (`deferred_text.py`).
_TEXT_OPERATORS = frozenset({operator.mod, operator.add, operator.iadd})


def _fold_or_tensor(fn: Callable[..., Any], name: str) -> BuiltinRule:
    def rule(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        from .dunder import dunder_operator

        if not kwargs:
            result = dunder_operator(fn, args)
            if result is not None:
                return result
        folded = _fold_data(fn, graph, args, kwargs)
        if folded is not None:
            return folded
        return graph.call_tensor_op("api", name, fn, args, kwargs)

    return rule


# Builtins that compute a value from plain values and decide nothing by themselves (`constant_fold`'s
# ``data_only``; not ``range``, whose iteration decides, nor ``hash``).
_DATA_BUILTINS = frozenset({abs, pow, int, float, str, round, divmod, repr, format, bin, oct, hex, ascii, chr, ord})


def _fold_data(fn: Callable[..., Any], graph: "FunctionGraph", args: list[VariableBase],
               kwargs: dict[str, VariableBase]) -> VariableBase | None:
    operands = [*args, *kwargs.values()]
    return constant_fold(fn, graph, args, kwargs,
                         data_only=fn in _DATA_BUILTINS and all(is_plain_data(var) for var in operands))


def _fold_only(fn: Callable[..., Any]) -> BuiltinRule:
    def rule(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        folded = _fold_data(fn, graph, args, kwargs)
        if folded is None:  # e.g. float(tensor): the value leaves the graph
            raise BreakGraphError(f"{fn.__name__}() of a tensor reads its value: runs natively")
        return folded

    return rule


for _fn in (abs, pow):
    BUILTIN_DISPATCH[_fn] = _fold_or_tensor(_fn, f"builtins.{_fn.__name__}")


# -- the operator module: each function does what its operator does ----------------------------------------
def _operator_rule(fn: Callable[..., Any]) -> BuiltinRule:
    def rule(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        if kwargs:
            raise UserCodeError(f"user code raised TypeError: {fn.__name__}() takes no keyword arguments",
                                original=TypeError(f"{fn.__name__}() takes no keyword arguments"))
        return apply_operator(graph, fn, args)

    return rule


def _register_operator_module() -> None:
    from .dunder import BINARY_DUNDERS, COMPARE_DUNDERS, INPLACE_DUNDERS

    operators = [*BINARY_DUNDERS, *INPLACE_DUNDERS, *COMPARE_DUNDERS, operator.neg, operator.pos,
                 operator.invert, operator.inv, operator.abs, operator.contains]
    for fn in operators:
        BUILTIN_DISPATCH[fn] = _operator_rule(fn)
    # callable objects made from constants (their calls: `call_object`)
    for fn in (operator.itemgetter, operator.attrgetter, operator.methodcaller):
        BUILTIN_DISPATCH[fn] = _fold_only(fn)


_register_operator_module()


@builtin_rule(operator.getitem)
def _operator_getitem(graph: "FunctionGraph", args: list[VariableBase],
                      kwargs: dict[str, VariableBase]) -> VariableBase:
    container, key = args
    return subscript(container, key)


def subscript(container: VariableBase, key: VariableBase) -> VariableBase:
    """``container[key]``, with the guard ``BINARY_SUBSCR`` puts on a value read from the frame."""
    var = container.getitem(key)
    if var.tracker.is_traceable():
        container.graph.guard_read(var)
    return var


@builtin_rule(operator.setitem, operator.delitem)
def _operator_setitem(graph: "FunctionGraph", args: list[VariableBase],
                      kwargs: dict[str, VariableBase]) -> VariableBase:
    container, key, *value = args
    container.setitem(key, value[0] if value else None)
    return ConstantVariable(None, graph, DummyTracker())


def _object_setattr(delete: bool) -> BuiltinRule:
    def rule(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        """``object.__setattr__(obj, name, value)``/``object.__delattr__(obj, name)``: the plain store,
        as a class's own ``__setattr__`` (a frozen dataclass's ``__init__``) does it."""
        from .attribute import store_attribute

        if kwargs or len(args) != (2 if delete else 3) or not isinstance(args[1], ConstantVariable):
            raise FallbackError("object.__setattr__ with unusual arguments")
        target = args[0]
        if not isinstance(target, ObjectVariable) or isinstance(target.value, type):
            raise BreakGraphError(f"object.__setattr__ on {target!r} runs natively")
        graph.add_guard(args[1])
        store_attribute(target, args[1].value, None if delete else args[2], through_object=True)
        return ConstantVariable(None, graph, DummyTracker())

    return rule


BUILTIN_DISPATCH[object.__setattr__] = _object_setattr(delete=False)
BUILTIN_DISPATCH[object.__delattr__] = _object_setattr(delete=True)


@builtin_rule(object.__getattribute__)
def _object_getattribute(graph: "FunctionGraph", args: list[VariableBase],
                         kwargs: dict[str, VariableBase]) -> VariableBase:
    """``object.__getattribute__(obj, name)``: the generic lookup (data descriptors, the instance dict, the
    class), past the class's own ``__getattribute__`` and ``__getattr__``, as a user ``__getattribute__``
    ends (its reads of the instance simulated, not run natively where the stores of the frame are unseen)."""
    from .attribute import load_attribute

    if kwargs or len(args) != 2 or not isinstance(args[1], ConstantVariable) or type(args[1].value) is not str:
        raise FallbackError("object.__getattribute__ with unusual arguments")
    from .function import UserFunctionVariable

    target = args[0]
    plain = isinstance(target, ObjectVariable) and (type(target).getattr is ObjectVariable.getattr
                                                    or isinstance(target, UserFunctionVariable))
    if not plain or isinstance(target.value, type):  # (a class's own lookup is ``type``'s: run natively)
        raise BreakGraphError(f"object.__getattribute__ on {target!r} runs natively")
    graph.add_guard(args[1])
    return load_attribute(target, args[1].value, generic=True)


def frame_locals(graph: "FunctionGraph") -> VariableBase:
    """``locals()`` of the simulated frame, from its simulated variables. Not run natively: the generated code
    holds its own temporaries and not yet the values the simulation computed, and a resume function's frame
    has the stack it received as arguments. A resume function (or loop body) lists the variables of the
    user's function it continues (`frame_groups.frame_origin`), in that function's order."""
    from ...frame_groups import frame_origin
    from .container import DictVariable

    executor = graph.current_executor
    slots: list[tuple[str, VariableBase | None]] = []  # (None: unbound)
    for name, in_cell in pyversion.locals_slots(frame_origin(executor.code)):
        if in_cell is None:  # (a slot always empty: the variable is listed again later)
            slots.append((name, None))
        elif in_cell:
            cell = executor.cells.get(name)
            slots.append((name, cell.content if cell is not None else None))
        else:
            slots.append((name, executor.locals.get(name)))
    if not pyversion.LOCALS_DICT_PER_FRAME:
        items = {name: value for name, value in slots if value is not None}
        return DictVariable(items, graph, DummyTracker(tuple(items.values())))
    # The frame's one dict: set what is bound, remove what is not, in slot order (keys added by the user stay).
    shared = executor.locals_dict
    if shared is None:
        shared = executor.locals_dict = DictVariable({}, graph, DummyTracker())
    for name, value in slots:
        if value is not None:
            shared.items[name] = value
        else:
            shared.items.pop(name, None)
    return shared


@builtin_rule(locals)
def _locals(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    if args or kwargs:
        message = f"locals() takes no arguments ({len(args) + len(kwargs)} given)"
        raise UserCodeError(f"user code raised TypeError: {message}", original=TypeError(message))
    return frame_locals(graph)


@builtin_rule(vars)
def _vars(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    """``vars(obj)`` is ``obj.__dict__``; ``vars()`` is ``locals()``."""
    if not args and not kwargs:
        return frame_locals(graph)
    if len(args) != 1 or kwargs:
        raise BreakGraphError("vars() with unusual arguments runs natively")
    return args[0].getattr("__dict__")


@builtin_rule(eval, exec)
def _eval_or_exec(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    """``eval``/``exec`` run natively. Without namespaces they see the calling frame's variables: when the
    code may read one of them, an inlined function calling them runs natively as a whole (a graph break at
    its call site, then its frame is a real one) and the translated frame itself falls back (the generated
    code's frame has other variables). Code reading none of them (``eval("1")``) runs natively in place."""
    from ...frame_groups import frame_origin

    namespaces = [*args[1:], *kwargs.values()]
    own_frame = all(isinstance(value, ConstantVariable) and value.value is None for value in namespaces)
    executor = graph.current_executor
    if own_frame and executor.parent is None:
        names = _names_read_by_source(args[0]) if args else None
        variables = {name for name, _ in pyversion.locals_slots(frame_origin(executor.code))}
        if names is None or not variables.isdisjoint(names):
            raise FallbackError("eval/exec of the frame's own variables runs the frame eagerly")
    raise BreakGraphError("eval/exec runs natively")


def _names_read_by_source(source: VariableBase) -> set[str] | None:
    """The names code given to ``eval``/``exec`` may look up (its own and its nested code's); None when the
    source is not a constant string (it may read anything)."""
    import types

    if not (isinstance(source, ConstantVariable) and isinstance(source.value, str)):
        return None
    try:
        code = compile(source.value, "<string>", "exec")
    except SyntaxError:
        return set()  # (raised natively, as eager raises it)
    names: set[str] = set()
    pending = [code]
    while pending:
        current = pending.pop()
        names.update(current.co_names, current.co_freevars)
        pending.extend(const for const in current.co_consts if isinstance(const, types.CodeType))
    return names


@builtin_rule(dir)
def _dir(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    """``dir()`` lists the frame's local names, sorted (``dir(obj)`` runs natively)."""
    from .container import ListVariable

    if args or kwargs:
        raise BreakGraphError("dir(obj) runs natively")
    names = sorted(str(name) for name in frame_locals(graph).items)
    return ListVariable([ConstantVariable(name, graph, DummyTracker()) for name in names], graph, DummyTracker())


def _truth_rule(negate: bool) -> BuiltinRule:
    def rule(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        from .dunder import truth_value

        (value,) = args
        return ConstantVariable(truth_value(value) != negate, graph, DummyTracker((value,)))

    return rule


BUILTIN_DISPATCH[operator.truth] = _truth_rule(False)
BUILTIN_DISPATCH[operator.not_] = _truth_rule(True)


def call_operator_getter(var: ObjectVariable, args: list[VariableBase],
                         kwargs: dict[str, VariableBase]) -> VariableBase:
    """A call of an ``itemgetter``/``attrgetter``/``methodcaller`` object: what it does, on variables."""
    from .container import TupleVariable

    getter = var.value
    graph = var.graph
    graph.add_guard(var)
    if kwargs or len(args) != 1:
        raise UserCodeError(f"user code raised TypeError: {type(getter).__name__} expected 1 argument, got "
                            f"{len(args)}", original=TypeError(f"{type(getter).__name__} expected 1 argument"))
    (target,) = args
    maker, params = getter.__reduce__()[:2]
    if type(getter) is operator.itemgetter:
        items = [subscript(target, VariableFactory.from_value(key, graph, DummyTracker((var,)))) for key in params]
        return items[0] if len(items) == 1 else TupleVariable(items, graph, DummyTracker(tuple(items)))
    if type(getter) is operator.attrgetter:
        results = []
        for path in params:
            value = target
            for name in path.split("."):
                value = value.getattr(name)
            results.append(value)
        return results[0] if len(results) == 1 else TupleVariable(results, graph, DummyTracker(tuple(results)))
    # methodcaller: (partial(methodcaller, name, **kwargs), args) or (methodcaller, (name, *args))
    if isinstance(maker, type):
        name, call_args, call_kwargs = params[0], params[1:], {}
    else:
        name, call_args, call_kwargs = maker.args[0], params, maker.keywords
    wrap = lambda value: VariableFactory.from_value(value, graph, DummyTracker((var,)))  # noqa: E731
    return target.getattr(name).call([wrap(a) for a in call_args], {k: wrap(v) for k, v in call_kwargs.items()})
for _fn in (int, float, str, bool, round, divmod, issubclass, callable, hash, repr, chr, ord, range, slice,
            format, bin, oct, hex, ascii, complex, bytes):
    BUILTIN_DISPATCH[_fn] = _fold_only(_fn)


def _int_of_known_tensor(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]
                         ) -> VariableBase:
    """``int(t)`` of a 0-D tensor whose value the simulation knows (``int(x.numel())``, a dimension read
    through ``paddle.shape(x)[i]``: see `known_values`) is that int; of any other tensor it leaves the graph.
    ``int(n / c)`` of a symbolic int stays symbolic (`symbolic_int_of`)."""
    from .known_values import known_python_int
    from .symbolic_int import symbolic_int_of

    if len(args) == 1 and not kwargs and isinstance(args[0], TensorVariable):
        known = known_python_int(args[0], [], {})
        if known is not None:
            return known
    if len(args) == 1 and not kwargs:
        truncated = symbolic_int_of(args[0])  # (``int(n / c)`` of a symbolic int n)
        if truncated is not None:
            return truncated
    return _fold_only(int)(graph, args, kwargs)


BUILTIN_DISPATCH[int] = _int_of_known_tensor


def guard_abc_registrations(graph: "FunctionGraph", classes: Any) -> None:
    """``isinstance``/``issubclass`` (or a class pattern) answered against ``classes``: an ABC among them
    (``ABCMeta``) also says True for the classes ``register``-ed with it, which changes the version of no class
    the guard checks. ABCMeta counts every registration (of any ABC) in ``abc.get_cache_token()``: re-asked at
    every call, it sends a later ``Base.register(Thing)`` to a new translation."""
    pending = [classes]
    while pending:
        item = pending.pop()
        if isinstance(item, tuple):
            pending.extend(item)
        elif isinstance(item, types.UnionType):
            pending.extend(item.__args__)
        elif isinstance(item, abc.ABCMeta):
            graph.add_query_guard(abc.get_cache_token, abc.get_cache_token())
            return


def _issubclass(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    result = _fold_only(issubclass)(graph, args, kwargs)
    if len(args) == 2:
        try:
            guard_abc_registrations(graph, args[1].get_py_value())
        except FallbackError:
            pass
    return result


BUILTIN_DISPATCH[issubclass] = _issubclass


# Builtins that call one dunder of their argument, and the type it must return.
CONVERSION_DUNDERS: dict[Any, tuple[tuple[str, ...], type]] = {
    str: (("__str__", "__repr__"), str), repr: (("__repr__",), str), int: (("__int__", "__index__"), int),
    float: (("__float__",), float), hash: (("__hash__",), int), operator.index: (("__index__",), int),
}


def _conversion(fn: Any, fold: BuiltinRule) -> BuiltinRule:
    """``fn(obj)`` on a user instance whose class defines the dunder in Python inlines it."""
    methods, result_type = CONVERSION_DUNDERS[fn]

    def rule(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        import inspect

        from .dunder import call_method, is_user_instance, user_method

        if len(args) == 1 and not kwargs and is_user_instance(args[0]):
            for name in methods:
                function = user_method(args[0], name)
                if function is not None:
                    result = call_method(args[0], function, [])
                    if isinstance(result, TensorVariable) or not isinstance(result.get_py_value(), result_type):
                        message = f"{name} returned non-{result_type.__name__} (type {result.get_py_type().__name__})"
                        raise UserCodeError(f"user code raised TypeError: {message}", original=TypeError(message))
                    return result
                if inspect.getattr_static(type(args[0].get_py_value()), name, None) is not object.__dict__.get(name):
                    break  # a C-level method in between (e.g. a builtin base class): folded below
        return fold(graph, args, kwargs)

    return rule


for _fn in CONVERSION_DUNDERS:
    BUILTIN_DISPATCH[_fn] = _conversion(_fn, BUILTIN_DISPATCH.get(_fn) or _fold_only(_fn))


@builtin_rule(bool)
def _bool(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    from .dunder import truth_value

    if len(args) != 1 or kwargs:
        return _fold_only(bool)(graph, args, kwargs)
    return ConstantVariable(truth_value(args[0]), graph, DummyTracker((args[0],)))


def _const(graph: "FunctionGraph", value: Any, *sources: VariableBase) -> VariableBase:
    return VariableFactory.from_value(value, graph, DummyTracker(tuple(sources)))


@builtin_rule(len)
def _len(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    (arg,) = args
    if isinstance(arg, TensorVariable):
        if not arg.meta.shape:
            raise UserCodeError("user code raised TypeError: len() of a 0-D tensor")
        return ConstantVariable(arg.concrete_dim(0), graph, DummyTracker((arg,)))
    length = getattr(arg, "length", None)
    if length is not None:
        return ConstantVariable(length(), graph, DummyTracker((arg,)))
    return _fold_only(len)(graph, args, kwargs)


@builtin_rule(isinstance)
def _isinstance(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    obj, classes = args
    graph.add_guard(classes)
    from .symbolic_int import SymbolicIntVariable

    if isinstance(obj, SymbolicIntVariable):  # an int whatever its value (not pinned; an input's type guarded)
        graph.add_guard(obj)
        return ConstantVariable(issubclass(obj.get_py_type(), classes.get_py_value()), graph,
                                DummyTracker((obj, classes)))
    if not isinstance(obj, (ObjectVariable, ConstantVariable)):
        graph.add_guard(obj)  # its guard pins the exact type (a tensor's, a container's)
        result = _is_instance_of_type(obj.get_py_type(), classes.get_py_value())
    elif isinstance(obj.value, READ_BY_ATTRIBUTE_C_TYPES) and _decided_by_type(classes.get_py_value()):
        graph.add_guard(obj)  # (guarded by type: the answer is the type's, the object itself is not used)
        result = issubclass(obj.get_py_type(), classes.get_py_value())
    else:
        graph.add_guard(obj)
        result = isinstance(obj.get_py_value(), classes.get_py_value())
    guard_abc_registrations(graph, classes.get_py_value())
    return ConstantVariable(result, graph, DummyTracker((obj, classes)))


def _decided_by_type(classes: Any) -> bool:
    """Whether ``isinstance(obj, classes)`` is ``issubclass(type(obj), classes)`` for an object whose
    ``__class__`` is its type (a C exception): every class's metaclass is ``type`` or ``ABCMeta`` (which looks
    at the class only), none answers from the object's state."""
    flat = classes if isinstance(classes, tuple) else (classes,)
    return all(_decided_by_type(cls) if isinstance(cls, tuple) else type(cls) in (type, abc.ABCMeta)
               for cls in flat)


def _is_instance_of_type(py_type: type, classes: Any) -> bool:
    """``isinstance`` of a value known by its exact type only (a tensor, a container). A class whose metaclass
    answers ``isinstance`` itself is asked with an empty instance of that type: Paddle's ``Variable``
    (``paddle.static.Variable``) says True for every eager tensor, though ``paddle.Tensor`` is no subclass."""
    flat = classes if isinstance(classes, tuple) else (classes,)
    if py_type is paddle.Tensor and any(_answers_instancecheck(cls) for cls in flat):
        return isinstance(paddle.Tensor(), classes)
    return issubclass(py_type, classes)


def _answers_instancecheck(cls: Any) -> bool:
    return isinstance(cls, type) and type(cls).__instancecheck__ is not type.__instancecheck__


@builtin_rule(type)
def _type(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    if len(args) == 3 and not kwargs:
        # (a new class: a value the simulation does not model; the call runs natively and the frame goes on
        # with the real class, as after a ``class`` statement)
        raise BreakGraphError("type() with three arguments creates a class: runs natively")
    if len(args) != 1 or kwargs:
        raise FallbackError("type() with other than one or three arguments is not supported")
    (obj,) = args
    graph.add_guard(obj)
    cls = obj.get_py_type()
    # The class of an object from outside is reached by a path (``obj.__class__``): the containers read from
    # it (``type(self).registry``) are then the real ones, their mutations replayed and their identity kept,
    # as through ``self.__class__``. (Not when ``__class__`` is overridden to lie about the type.)
    tracker: Tracker = DummyTracker((obj,))
    if obj.tracker.is_traceable() and _reports_own_class(cls):
        tracker = GetAttrTracker(obj, "__class__")
    return VariableFactory.from_value(cls, graph, tracker)


def _reports_own_class(cls: type) -> bool:
    """``value.__class__`` is ``type(value)`` for an instance ``value`` of ``cls`` through ``object``'s own descriptor (no Python code runs)."""
    return inspect.getattr_static(cls, "__class__", None) is object.__dict__["__class__"]


@builtin_rule(id)
def _id(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    (obj,) = args
    if not obj.tracker.is_traceable():
        raise FallbackError("id() of a value created during simulation is not known")
    if hasattr(obj, "needs_identity"):
        obj.needs_identity = True
    graph.add_guard(obj)
    return _const(graph, id(obj.get_py_value()), obj)


@builtin_rule(getattr)
def _getattr(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    obj, name = args[0], args[1]
    graph.add_guard(name)
    if len(args) == 3 and isinstance(obj, ObjectVariable):
        from .attribute import has_attribute

        if not has_attribute(obj, name.get_py_value()):
            return args[2]
    from .attribute import guard_attribute_presence

    try:
        return obj.getattr(name.get_py_value())
    except UserCodeError as exc:
        if len(args) == 3 and isinstance(exc.original, AttributeError):
            guard_attribute_presence(obj, name.get_py_value(), False)  # (the default while it stays missing)
            return args[2]
        raise
    except FallbackError:
        if len(args) == 3 and not hasattr(obj.get_py_value(), name.get_py_value()):
            guard_attribute_presence(obj, name.get_py_value(), False)
            return args[2]
        raise


def _setattr_builtin(delete: bool) -> BuiltinRule:
    def rule(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        """``setattr(obj, name, value)``/``delattr(obj, name)`` with a constant string name: exactly the
        ``obj.name = value``/``del obj.name`` statement (user ``__setattr__``, properties, side effects)."""
        if kwargs or len(args) != (2 if delete else 3) or not isinstance(args[1], ConstantVariable) \
                or type(args[1].value) is not str:
            raise FallbackError(f"{'delattr' if delete else 'setattr'} with unusual arguments")  # (eager error)
        graph.add_guard(args[1])
        try:
            args[0].setattr(args[1].value, None if delete else args[2])
        except FallbackError as exc:  # a store not simulated yet: the call alone runs natively, as before
            raise BreakGraphError(f"{'delattr' if delete else 'setattr'} runs natively: {exc}") from None
        return ConstantVariable(None, graph, DummyTracker())

    return rule


BUILTIN_DISPATCH[setattr] = _setattr_builtin(delete=False)
BUILTIN_DISPATCH[delattr] = _setattr_builtin(delete=True)


@builtin_rule(hasattr)
def _hasattr(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    obj, name = args
    graph.add_guard(name)
    if isinstance(obj, TensorVariable):
        result = hasattr(paddle.Tensor, name.get_py_value()) or name.get_py_value() in ("shape", "dtype")
    elif isinstance(obj, ObjectVariable):
        from .attribute import has_attribute

        result = has_attribute(obj, name.get_py_value())
    else:
        from .attribute import guard_attribute_presence

        result = hasattr(obj.get_py_value(), name.get_py_value())
        guard_attribute_presence(obj, name.get_py_value(), result)
    return ConstantVariable(result, graph, DummyTracker((obj, name)))


def _iter_rule(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    from .iterator import iterate

    return iterate(args[0])


BUILTIN_DISPATCH[iter] = _iter_rule


@builtin_rule(next)
def _next(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    from .iterator import IteratorVariable

    iterator = args[0]
    if not isinstance(iterator, IteratorVariable):
        from .dunder import call_method, user_method

        step = user_method(iterator, "__next__")
        if step is None:
            if isinstance(iterator, ObjectVariable) and not isinstance(iterator.value, type):
                # (a real iterator stepped by C or library code: a generator, a DataLoader's iterator)
                raise BreakGraphError(f"next() of a {type(iterator.value).__name__} object runs natively")
            raise FallbackError(f"next() of {iterator!r} is not supported")
        try:
            return call_method(iterator, step, [])
        except UserCodeError as exc:
            if len(args) > 1 and isinstance(exc.original, StopIteration):
                return args[1]
            raise
    item = iterator.next()
    if item is None:
        if len(args) > 1:
            return args[1]
        raise UserCodeError("user code raised StopIteration", original=StopIteration())
    return item


def _items_of(var: VariableBase) -> list[VariableBase]:
    from .iterator import iterate

    return iterate(var).unpack()


@builtin_rule(enumerate)
def _enumerate(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    from .container import TupleVariable
    from .iterator import IteratorVariable, iterate

    start_var = args[1] if len(args) > 1 else kwargs.get("start")
    start = 0
    if start_var is not None:
        graph.add_guard(start_var)
        start = start_var.get_py_value()
    source = iterate(args[0])

    def produce() -> Any:
        index = start
        while (item := source.next()) is not None:
            yield TupleVariable([ConstantVariable(index, graph, DummyTracker()), item], graph, DummyTracker((item,)))
            index += 1

    # (made again with ``start`` positional: ``enumerate(x, start=5)`` is ``enumerate(x, 5)``)
    rebuild_args = [args[0], *([start_var] if start_var is not None else [])]
    made = IteratorVariable(produce(), graph, "enumerate", (enumerate, rebuild_args))
    if source is not args[0]:  # (its own iterator, which the frame never sees: remade at its index)
        made.stepped = [source]
    return made


@builtin_rule(zip)
def _zip(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    from .container import TupleVariable
    from .iterator import IteratorVariable, iterate

    if set(kwargs) - {"strict"}:
        graph.run_user_python(zip, [], dict.fromkeys(kwargs))  # the eager TypeError
    strict = False
    if "strict" in kwargs:
        graph.add_guard(kwargs["strict"])
        strict = bool(kwargs["strict"].get_py_value())
    sources = [iterate(a) for a in args]
    rows = _in_step(sources, strict)
    produce = (TupleVariable(items, graph, DummyTracker(tuple(items))) for items in rows)
    made = IteratorVariable(produce, graph, "zip", None if kwargs else (zip, list(args)))
    if all(source is not arg for source, arg in zip(sources, args)):  # (its own iterators: remade at their index)
        made.stepped = sources
    return made


def _in_step(sources: list[Any], strict: bool = False) -> Any:
    """One list of items per step of several iterators, until the shortest is exhausted (zip, map);
    ``strict``: iterators of different lengths raise zip's ValueError."""
    while True:
        items = []
        for index, source in enumerate(sources):
            item = source.next()
            if item is None:
                if strict:
                    _check_same_length(sources, index)
                return
            items.append(item)
        yield items


def _check_same_length(sources: list[Any], exhausted: int) -> None:
    def plural(n: int) -> str:
        return f"s 1-{n}" if n > 1 else " 1"

    if exhausted > 0:
        message = f"zip() argument {exhausted + 1} is shorter than argument{plural(exhausted)}"
    else:
        longer = next((i for i, source in enumerate(sources[1:], 1) if source.next() is not None), None)
        if longer is None:
            return
        message = f"zip() argument {longer + 1} is longer than argument{plural(longer)}"
    raise UserCodeError(f"user code raised ValueError: {message}", original=ValueError(message))


@builtin_rule(map)
def _map(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    from .iterator import IteratorVariable, iterate

    fn, rows = args[0], _in_step([iterate(a) for a in args[1:]])
    return IteratorVariable((fn.call(items, {}) for items in rows), graph, "map", (map, list(args)))


@builtin_rule(filter)
def _filter(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    from .iterator import IteratorVariable, iterate

    from .dunder import truth_value

    fn, source = args[0], iterate(args[1])
    # ``filter(None, xs)`` keeps the true items; asked of the variable's kind, not its value (a function made
    # in the frame has no value during simulation).
    keeps_true_items = isinstance(fn, ConstantVariable) and fn.value is None
    if keeps_true_items:
        graph.add_guard(fn)

    def produce() -> Any:
        while (item := source.next()) is not None:
            if truth_value(item if keeps_true_items else fn.call([item], {})):
                yield item

    return IteratorVariable(produce(), graph, "filter", (filter, list(args)))


@builtin_rule(reversed)
def _reversed(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    from .iterator import IteratorVariable, lazy, reversed_live_steps

    live = reversed_live_steps(args[0]) if len(args) == 1 and not kwargs else None
    return IteratorVariable(live if live is not None else lazy(lambda: _items_of(args[0])[::-1]), graph, "reversed",
                            (reversed, list(args)))


@builtin_rule(list)
def _list(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    from .container import ListVariable

    items = _items_of(args[0]) if args else []
    return ListVariable(items, graph, DummyTracker(tuple(args)))


@builtin_rule(tuple)
def _tuple(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    from .container import TupleVariable

    items = _items_of(args[0]) if args else []
    return TupleVariable(items, graph, DummyTracker(tuple(args)))


@builtin_rule(set)
def _set(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    """``set(iterable)``: an empty set updated from the iterable, as ``set.__init__`` does (so laid out alike)."""
    from .container import SetVariable

    if kwargs or len(args) > 1:
        raise FallbackError("set() with unusual arguments")  # (the eager TypeError)
    result = SetVariable(set(), graph, DummyTracker(tuple(args)))
    if args:
        try:
            result.update_from(args[0])
        except FallbackError as exc:  # (elements that are not constants: the set of them is made natively)
            raise BreakGraphError(f"creating an instance of set runs natively: {exc}") from None
    return result


@builtin_rule(dict)
def _dict(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    from .container import DictVariable, merge_into_dict

    items: dict[Any, VariableBase] = {}
    if args:
        merge_into_dict(graph, items, args[0])
    items.update(kwargs)
    return DictVariable(items, graph, DummyTracker(tuple(args) + tuple(kwargs.values())))


def _typed_dict(dict_type: type) -> BuiltinRule:
    """``OrderedDict(...)`` / ``defaultdict(factory, ...)``: the items as ``dict(...)`` takes them."""

    def rule(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        from .container import TypedDictVariable

        factory = None
        if dict_type is collections.defaultdict:
            factory = args[0] if args else ConstantVariable(None, graph, DummyTracker())
            if isinstance(factory, ConstantVariable) and factory.value is not None and not callable(factory.value):
                raise UserCodeError("user code raised TypeError: first argument must be callable or None",
                                    original=TypeError("first argument must be callable or None"))
            args = args[1:]
        plain = _dict(graph, args, kwargs)
        return TypedDictVariable(dict(plain.items), graph, DummyTracker(tuple(plain.items.values())), dict_type,
                                 factory)

    return rule


BUILTIN_DISPATCH[collections.OrderedDict] = _typed_dict(collections.OrderedDict)
BUILTIN_DISPATCH[collections.defaultdict] = _typed_dict(collections.defaultdict)


def _reduce_with(fn: Callable[[Any, Any], Any], start: VariableBase | None, items: list[VariableBase],
                 graph: "FunctionGraph") -> VariableBase:
    acc = start
    for item in items:
        if acc is None:
            acc = item
            continue
        folded = constant_fold(fn, graph, [acc, item], {})
        acc = folded if folded is not None else graph.call_tensor_op("api", f"operator.{fn.__name__}", fn,
                                                                     [acc, item], {})
    assert acc is not None
    return acc


@builtin_rule(sum)
def _sum(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    start = args[1] if len(args) > 1 else kwargs.get("start", ConstantVariable(0, graph, DummyTracker()))
    return _reduce_with(operator.add, start, _items_of(args[0]), graph)


def _truth_reduce(want: bool) -> BuiltinRule:
    def rule(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        from .iterator import iterate

        # Item by item, as CPython's any/all: the first deciding item stops the iteration, so a generator's
        # later items (and the side effects computing them) are never produced.
        source = iterate(args[0])
        while (item := source.next()) is not None:
            truth = item.bool()
            graph.add_guard(item)
            if truth == want:
                return ConstantVariable(want, graph, DummyTracker())
        return ConstantVariable(not want, graph, DummyTracker())

    return rule


BUILTIN_DISPATCH[any] = _truth_reduce(True)
BUILTIN_DISPATCH[all] = _truth_reduce(False)


def ordering_keys(graph: "FunctionGraph", items: list[VariableBase], key: VariableBase | None) -> list[Any]:
    """The Python values ``sorted``/``min``/``max``/``list.sort`` compare: the items, or ``key(item)`` with
    the key function simulated (a lambda, a method...). Guarded; tensors cannot be compared as Python
    values."""
    if key is not None and not (isinstance(key, ConstantVariable) and key.value is None):
        keys = [key.call([item], {}) for item in items]
    else:
        keys = list(items)
    if any(isinstance(k, TensorVariable) for k in keys):
        # Each comparison reads tensor values as Python bools: the call runs natively (a graph break at it,
        # the rest of the frame stays translated).
        raise BreakGraphError("ordering tensors compares them as Python bools: runs natively")
    _check_no_hidden_user_code(sorted, keys)  # comparing instances would run their Python __lt__ natively
    for k in keys:
        graph.add_guard(k)
    stand_ins: dict[int, _TensorInKey] = {}
    return [_comparable(k, stand_ins) for k in keys]


class _ComparesTensor(Exception):
    """An ordering compared a tensor inside a key (a tuple whose earlier items were equal)."""


class _TensorInKey:
    """Stands for a tensor inside a key tuple (``sorted(d.items())`` of a dict of tensors): the order is
    usually decided by the items before it (tuples compare item by item, equal ones by identity first, so
    one stand-in per tensor); comparing it would read the tensor's values, which the ordering refuses."""

    def _refuse(self, other: Any) -> bool:
        raise _ComparesTensor

    __lt__ = __le__ = __gt__ = __ge__ = __eq__ = __ne__ = _refuse  # type: ignore[assignment]
    __hash__ = object.__hash__


def _comparable(var: VariableBase, stand_ins: dict[int, "_TensorInKey"]) -> Any:
    """The Python value of a key, tensors inside tuples and lists replaced by `_TensorInKey` stand-ins."""
    from .container import SequenceVariable

    if isinstance(var, TensorVariable):
        return stand_ins.setdefault(id(var), _TensorInKey())
    if isinstance(var, SequenceVariable) and var.get_py_type() in (tuple, list):
        return var.get_py_type()(_comparable(item, stand_ins) for item in var.items)
    return var.get_py_value()


def run_ordering(graph: "FunctionGraph", fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]) -> Any:
    """``sorted``/``min``/``max`` over `ordering_keys`: a tensor compared inside a key breaks the graph there
    (the call runs natively); any other error is the user's, as `run_user_python` says."""
    try:
        return fn(*args, **kwargs)
    except _ComparesTensor:
        raise BreakGraphError("ordering compares tensors inside the keys as Python bools: runs natively") from None
    except Exception:
        return graph.run_user_python(fn, args, kwargs)  # (raises the same error, as the user's)


def sorted_items(graph: "FunctionGraph", items: list[VariableBase], kwargs: dict[str, VariableBase],
                 name: str = "sorted") -> list[VariableBase]:
    """``items`` in the order ``sorted(items, key=..., reverse=...)`` gives (stable, like Python)."""
    unknown = set(kwargs) - {"key", "reverse"}
    if unknown:
        message = f"{name}() got an unexpected keyword argument {sorted(unknown)[0]!r}"
        raise UserCodeError(f"user code raised TypeError: {message}", original=TypeError(message))
    reverse = False
    if "reverse" in kwargs:
        graph.add_guard(kwargs["reverse"])
        reverse = bool(kwargs["reverse"].get_py_value())
    values = ordering_keys(graph, items, kwargs.get("key"))
    order = run_ordering(graph, sorted, [range(len(items))], {"key": values.__getitem__, "reverse": reverse})
    return [items[i] for i in order]


def _min_max(fn: Callable[..., Any]) -> BuiltinRule:
    def rule(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        if not args or set(kwargs) - {"key", "default"} or ("default" in kwargs and len(args) > 1):
            graph.run_user_python(fn, [0] * len(args), dict.fromkeys(kwargs))  # the eager TypeError
        items = _items_of(args[0]) if len(args) == 1 else list(args)
        if not items:
            if "default" in kwargs:
                return kwargs["default"]
            graph.run_user_python(fn, [[]], {})  # the eager ValueError (its message differs by version)
        values = ordering_keys(graph, items, kwargs.get("key"))
        best = run_ordering(graph, fn, [range(len(items))], {"key": values.__getitem__})
        return items[best]

    return rule


BUILTIN_DISPATCH[min] = _min_max(min)
BUILTIN_DISPATCH[max] = _min_max(max)


@builtin_rule(sorted)
def _sorted(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    from .container import ListVariable

    items = sorted_items(graph, _items_of(args[0]), kwargs)
    return ListVariable(items, graph, DummyTracker(tuple(items)))


@builtin_rule(functools.reduce)
def _reduce(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    """``functools.reduce(fn, iterable[, initial])`` with ``fn`` simulated at each step."""
    if kwargs or not 2 <= len(args) <= 3:
        graph.run_user_python(functools.reduce, [None] * len(args), {})  # the eager TypeError
    fn, source = args[0], iterate_items(args[1])
    acc = args[2] if len(args) == 3 else source.next()
    if acc is None:
        message = "reduce() of empty iterable with no initial value"
        raise UserCodeError(f"user code raised TypeError: {message}", original=TypeError(message))
    while (item := source.next()) is not None:
        acc = fn.call([acc, item], {})
    return acc


def iterate_items(var: VariableBase) -> Any:
    from .iterator import iterate

    return iterate(var)


@builtin_rule(dict.fromkeys)
def _dict_fromkeys(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    """``dict.fromkeys(keys, value=None)``: every key maps to the very same value variable, as eagerly."""
    from .container import DictVariable, dict_key

    if kwargs or not 1 <= len(args) <= 2:
        raise FallbackError("dict.fromkeys with unusual arguments")  # (the eager TypeError)
    value = args[1] if len(args) == 2 else ConstantVariable(None, graph, DummyTracker())
    items = {dict_key(key, tensors=True): value for key in _items_of(args[0])}
    return DictVariable(items, graph, DummyTracker(tuple(args)))


# A frozenset of constants is itself a constant.
BUILTIN_DISPATCH[frozenset] = _fold_only(frozenset)


# Methods of constants that iterate one positional argument to its end, whatever it is: an iterator handed
# to them (``"x".join(str(d) for d in shape)``) is consumed during simulation into a list, which they treat
# the same. (Methods that may stop early, such as ``isdisjoint``, are not listed: they leave the rest.)
_CONSUMING_METHODS: dict[tuple[type, str], int] = {
    (str, "join"): 0, (bytes, "join"): 0,
    **{(kind, name): 0 for kind in (set, frozenset)
       for name in ("union", "intersection", "difference", "symmetric_difference")},
}


def consume_iterators(method: Any, args: list[VariableBase], graph: "FunctionGraph") -> list[VariableBase]:
    from .container import ListVariable
    from .iterator import IteratorVariable

    position = _CONSUMING_METHODS.get((type(getattr(method, "__self__", None)), getattr(method, "__name__", "")))
    if position is None or position >= len(args) or not isinstance(args[position], IteratorVariable):
        return args
    items = _items_of(args[position])
    return [*args[:position], ListVariable(items, graph, DummyTracker(tuple(items))), *args[position + 1:]]


class PureFunctionVariable(CallableVariable):
    """A callable without side effects on Python values (e.g. a bound method of a str): folded when every
    argument is known."""

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        args = consume_iterators(self.value, args, self.graph)
        folded = constant_fold(self.value, self.graph, args, kwargs)
        if folded is None:
            raise FallbackError(f"calling {self.value!r} with tensors is not supported")
        return folded


class BuiltinVariable(CallableVariable):
    """A builtin function simulated through `BUILTIN_DISPATCH`."""

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        return BUILTIN_DISPATCH[self.value](self.graph, args, kwargs)


def member_of(table: Any, value: Any) -> bool:
    """``value in table`` for the dispatch tables (an unhashable value is in none of them). Their members
    are functions and classes: an instance of a Python class hashing or comparing with code of its own is
    none of them, and asking would run that code (a user ``__hash__`` counting its calls, a frozen
    dataclass's ``__hash__`` before its fields are set)."""
    cls = type(value)
    if cls.__flags__ & HEAPTYPE and (cls.__hash__ is not object.__hash__ or cls.__eq__ is not object.__eq__) \
            and not isinstance(value, type):
        return False
    try:
        return value in table
    except TypeError:
        return False


@VariableFactory.register(80)
def _builtin_rule(value: Any, graph: "FunctionGraph", tracker: Tracker) -> VariableBase | None:
    return BuiltinVariable(value, graph, tracker) if member_of(BUILTIN_DISPATCH, value) else None


# Pure functions of C modules: folded on known values.
_PURE_MODULES = ("math", "cmath", "operator", "_operator")


# Paddle functions of known values only, without effects: folded (``paddle.finfo(x.dtype).min`` in an
# attention mask; their results are constants, see basic.CONSTANT_TYPES).
_PURE_PADDLE_FUNCTIONS = frozenset({paddle.finfo, paddle.iinfo,
                                    # a dtype's name (``paddle.distribution`` checks its parameters' dtypes)
                                    paddle.base.data_feeder.convert_dtype})


@VariableFactory.register(75)
def _pure_builtin_rule(value: Any, graph: "FunctionGraph", tracker: Tracker) -> VariableBase | None:
    import types

    if isinstance(value, types.BuiltinFunctionType) and getattr(value, "__module__", None) in _PURE_MODULES:
        return PureFunctionVariable(value, graph, tracker)
    if member_of(_PURE_PADDLE_FUNCTIONS, value):
        return PureFunctionVariable(value, graph, tracker)
    return None


# numpy functions of numbers only, without effects (a ufunc without ``out=``; these reductions): folded when
# every argument is a known number or a list/tuple of them and the result is a number (``np.sqrt(d_k)`` scaling
# attention scores, ``int(np.prod(x.shape[1:]))`` flattening). Other numpy functions may write files
# (``np.save``) or return a new mutable array: they run natively.
_PURE_NUMPY_FUNCTIONS = frozenset(getattr(np, name) for name in (
    "prod", "sum", "mean", "max", "min", "amax", "amin", "round", "around", "clip", "all", "any", "argmax",
    "argmin", "median", "std", "var", "dot", "ptp", "count_nonzero", "trace") if hasattr(np, name))


def _pure_numpy_callable(value: Any) -> bool:
    """A ufunc, a function of `_PURE_NUMPY_FUNCTIONS`, or a numpy scalar type (``np.float32(0.5)``)."""
    if isinstance(value, np.ufunc) or member_of(_PURE_NUMPY_FUNCTIONS, value):
        return True
    return isinstance(value, type) and issubclass(value, np.generic) and value.__module__ == "numpy"


class NumpyFunctionVariable(CallableVariable):
    """A pure numpy function (`_pure_numpy_callable`) called with known numbers: folded into a number, the
    arguments guarded. With a tensor or an array argument (the call would read its data, or make an array) it
    runs natively."""

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        name = getattr(self.value, "__name__", repr(self.value))
        if not all(_known_numbers(var) for var in [*args, *kwargs.values()]) or "out" in kwargs:
            raise BreakGraphError(f"numpy.{name}() of values that are not Python numbers runs natively")
        values = [var.get_py_value() for var in args]
        kw_values = {key: var.get_py_value() for key, var in kwargs.items()}
        result = self.graph.run_user_python(self.value, values, kw_values)
        if not isinstance(result, (np.generic, int, float, bool, complex)):
            raise BreakGraphError(f"numpy.{name}() makes a {type(result).__name__}: runs natively")
        for var in [self, *args, *kwargs.values()]:
            self.graph.add_guard(var)
        return VariableFactory.from_value(result, self.graph, DummyTracker(tuple(args) + tuple(kwargs.values())))


def _known_numbers(var: VariableBase) -> bool:
    """A Python or numpy number, or a list/tuple of them (a shape), at any depth."""
    from .container import SequenceVariable

    if isinstance(var, SequenceVariable):
        return all(_known_numbers(item) for item in var.items)
    return isinstance(var, ConstantVariable) and isinstance(var.value, (np.generic, int, float, bool, complex))


@VariableFactory.register(74)
def _numpy_function_rule(value: Any, graph: "FunctionGraph", tracker: Tracker) -> VariableBase | None:
    return NumpyFunctionVariable(value, graph, tracker) if _pure_numpy_callable(value) else None


class GuardedQueryVariable(CallableVariable):
    """A Paddle query of global state (``paddle.get_default_dtype()``): answered now, and the answer is
    guarded (the function is called again by the guard)."""

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        if args or kwargs:
            raise BreakGraphError(f"{self.value.__name__}() with arguments runs natively")
        result = self.value()
        self.graph.add_query_guard(self.value, result)
        return VariableFactory.from_value(result, self.graph, DummyTracker())


# Built once: the factory asks about every value it wraps.
_GUARDED_QUERIES = frozenset({paddle.get_default_dtype, paddle.in_dynamic_mode, paddle.framework.in_dynamic_mode,
                              paddle.base.framework.in_dygraph_mode, paddle.framework.in_dynamic_or_pir_mode,
                              paddle.base.framework.in_pir_mode,
                              paddle.device.get_device,
                              paddle.distributed.get_rank, paddle.distributed.get_world_size,
                              paddle.amp.is_float16_supported, paddle.amp.is_bfloat16_supported,
                              *(getattr(module, name) for module in (paddle, paddle.device)
                                for name in ("is_compiled_with_cuda", "is_compiled_with_xpu", "is_compiled_with_rocm",
                                             "is_compiled_with_cinn", "is_compiled_with_distribute",
                                             "is_compiled_with_ipu")
                                if callable(getattr(module, name, None)))})


@VariableFactory.register(72)
def _query_rule(value: Any, graph: "FunctionGraph", tracker: Tracker) -> VariableBase | None:
    return GuardedQueryVariable(value, graph, tracker) if member_of(_GUARDED_QUERIES, value) else None


@VariableFactory.register(70)
def _paddle_api_rule(value: Any, graph: "FunctionGraph", tracker: Tracker) -> VariableBase | None:
    if is_paddle_op(value):
        return PaddleApiVariable(value, graph, tracker)
    return None


class PsdbVariable(CallableVariable):
    """One of the `sot.psdb` helpers, which act on the simulation itself."""

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        from ....psdb import SIMULATED

        return SIMULATED[self.value](self.graph, args, kwargs)


@VariableFactory.register(85)
def _psdb_rule(value: Any, graph: "FunctionGraph", tracker: Tracker) -> VariableBase | None:
    from ....psdb import SIMULATED

    return PsdbVariable(value, graph, tracker) if member_of(SIMULATED, value) else None


_TRACING = "changes how the interpreter traces this thread (a tracer, profiler or debugger)"
_FRAMES = "reads the interpreter's frames (translated code runs in frames of its own)"


def _interpreter_state_functions() -> dict[Any, str]:
    """Functions whose answer or effect depends on the frames really running: each with the reason."""
    import builtins
    import inspect
    import pdb
    import threading

    functions = {sys.settrace: _TRACING, sys.setprofile: _TRACING, threading.settrace: _TRACING,
                 threading.setprofile: _TRACING, builtins.breakpoint: _TRACING, pdb.set_trace: _TRACING,
                 sys._getframe: _FRAMES, inspect.currentframe: _FRAMES}
    for name in ("settrace_all_threads", "setprofile_all_threads"):  # (3.12+)
        if hasattr(threading, name):
            functions[getattr(threading, name)] = _TRACING
    monitoring = getattr(sys, "monitoring", None)  # (3.12+)
    if monitoring is not None:
        for function in (monitoring.use_tool_id, monitoring.register_callback, monitoring.set_events,
                         monitoring.set_local_events):
            functions[function] = _TRACING
    return functions


_INTERPRETER_STATE_FUNCTIONS = _interpreter_state_functions()


class InterpreterStateVariable(CallableVariable):
    """``sys.settrace``, ``breakpoint()``, ``pdb.set_trace``, ``sys._getframe()`` and the like: the frame
    that calls one runs eagerly, from its start. A debugger must stop in the user's real frame (not in
    translated code nor in a resume function), a tracer installed here must see the calls that follow as
    written, and a frame read here must be the user's own."""

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        name = getattr(self.value, "__qualname__", None) or repr(self.value)
        raise FallbackError(f"{name}() {_INTERPRETER_STATE_FUNCTIONS[self.value]}", self.graph.location)


@VariableFactory.register(88)
def _interpreter_state_rule(value: Any, graph: "FunctionGraph", tracker: Tracker) -> VariableBase | None:
    if member_of(_INTERPRETER_STATE_FUNCTIONS, value):
        return InterpreterStateVariable(value, graph, tracker)
    return None


class OpaqueCallableVariable(CallableVariable):
    """A C-level callable (e.g. a bound builtin method of a real object): its effects are unknown."""

    def make_guards(self, builder: "GuardBuilder", expr: str) -> list[str]:
        return []  # a bound method is a new object at each access; the guard on its owner covers it

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        # A method of str/bytes/numbers taken from the type (``str.split(s, ",")``, ``map(str.lower, names)``)
        # only reads its immutable operand: folded as the bound method is.
        if getattr(self.value, "__objclass__", None) in _METHODS_MAKE_NEW_CONTAINERS and args and \
                all(isinstance(a, ConstantVariable) for a in [*args, *kwargs.values()]):
            folded = constant_fold(self.value, self.graph, args, kwargs)
            if folded is not None:
                return folded
        raise BreakGraphError(f"call of {getattr(self.value, '__qualname__', self.value)!r} (C code with unknown "
                              "effects) runs natively")


class NativeCallVariable(OpaqueCallableVariable):
    """A callable whose call is a graph break for a known ``reason`` (a method bound from a translation of
    another training flag)."""

    def __init__(self, value: Any, graph: "FunctionGraph", tracker: Tracker, reason: str) -> None:
        super().__init__(value, graph, tracker)
        self.reason = reason

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        raise BreakGraphError(self.reason)


def call_object(var: ObjectVariable, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    """Calling an arbitrary object: instances with a Python ``__call__`` are inlined."""
    import types

    from .function import UserFunctionVariable

    obj = var.value
    from .context import GradModeVariable, grad_mode_for_class, call_set_grad_enabled

    nested = _nested_translation(var)
    if nested is not None:
        return nested.call(args, kwargs)
    mode = grad_mode_for_class(obj)
    if mode is not None and not args and not kwargs:
        var.graph.add_guard(var)
        return GradModeVariable(mode, var.graph)
    if obj is paddle.set_grad_enabled:
        return call_set_grad_enabled(var, args, kwargs)
    if isinstance(obj, type) and issubclass(obj, BaseException) and obj.__module__ == "builtins":
        # Building a builtin exception (``assert x, "msg"``, ``raise ValueError(...)``) has no side effect.
        folded = constant_fold(obj, var.graph, args, kwargs)
        if folded is not None:
            return folded
    if isinstance(obj, enum.EnumMeta) and len(args) == 1 and not kwargs:
        # ``Color(2)``: the member with that value (with more arguments, the functional API makes a class)
        folded = constant_fold(obj, var.graph, args, kwargs)
        if folded is not None:
            return folded
    from .container import construct_namedtuple, namedtuple_class
    from .function import PartialVariable

    if obj is functools.partial:
        if not args:
            raise UserCodeError("user code raised TypeError: type 'partial' takes at least one argument",
                                original=TypeError("type 'partial' takes at least one argument"))
        var.graph.add_guard(var)
        return PartialVariable.build(args[0], args[1:], kwargs, var.graph)

    if namedtuple_class(obj):
        return construct_namedtuple(var, args, kwargs)
    if isinstance(obj, type) and has_finalizer(obj):
        # The simulation builds a stand-in instance (its ``__init__`` inlined, never run on it): dropped, its
        # ``__del__`` would run on a half-built object, at a time of the translator's choosing.
        raise BreakGraphError(f"creating an instance of {obj.__qualname__} (it has a __del__) runs natively")
    if isinstance(obj, type) and is_simple_class(obj):
        return instantiate(var, args, kwargs)
    from .user_mapping import instantiate_mapping, mapping_base

    base = mapping_base(obj)
    if base is not None:
        return instantiate_mapping(var, base, args, kwargs)
    from .user_sequence import instantiate_sequence, sequence_base

    if sequence_base(obj) is not None:
        return instantiate_sequence(var, args, kwargs)
    if isinstance(obj, type):
        raise BreakGraphError(f"creating an instance of {obj.__qualname__} runs natively")
    if type(obj) in (operator.itemgetter, operator.attrgetter, operator.methodcaller):
        return call_operator_getter(var, args, kwargs)
    from .memo_calls import MEMO_WRAPPER_TYPES, call_memo_wrapper

    if type(obj) in MEMO_WRAPPER_TYPES:
        return call_memo_wrapper(var, args, kwargs)
    call = getattr(type(obj), "__call__", None)
    if isinstance(call, types.FunctionType):
        var.graph.add_guard(var)  # the identity (hence the type) of the object fixes __call__
        # A constant, then, and a source for the globals it reads (a library's ``__call__``, such as
        # ``WeightNorm``'s, has globals of its own, which the guard must reach).
        return UserFunctionVariable(call, var.graph, ConstTracker(call)).call([var, *args], kwargs)
    raise BreakGraphError(f"call of {getattr(obj, '__qualname__', None) or type(obj).__name__} runs natively "
                          "(not simulated)")


def translation_original(obj: Any) -> Any:
    """The function or layer ``obj`` is a `symbolic_translate` result of (a `TranslatedFunction` or
    `TranslatedLayer`: a `CallWithCallback` carrying ``__sot_translated__``), or None."""
    from ....eval_frame_ext import CallWithCallback

    own = getattr(obj, "__dict__", None) if isinstance(obj, CallWithCallback) else None
    return own.get("__sot_translated__") if own else None


def nested_translation_original(obj: Any, graph: "FunctionGraph") -> Any:
    """The original (function or layer) of ``obj`` when it is a `symbolic_translate` result that translated
    code may simulate inline, as any user call: the caller's graph then holds it, where the native call would
    be a graph break and a translation of its own. None for anything else. Not across a change of training
    flag (a ``training=False`` translation's programs run without backward, decided by the callback installed
    for the call): a graph break, the call runs natively. The installed callback is re-asked at every call of
    the entry."""
    from ....symbolic.compile import inference_callback_installed

    original = translation_original(obj)
    if original is None:
        return None
    inference = inference_callback_installed()
    graph.add_query_guard(inference_callback_installed, inference)
    if obj.__dict__.get("_sot_training") is inference:
        raise BreakGraphError(f"{getattr(original, '__qualname__', type(original).__name__)} is translated "
                              f"with training={inference}, its caller with training={not inference}: the "
                              "call runs natively")
    return original


def _nested_translation(var: ObjectVariable) -> VariableBase | None:
    """A call of a `symbolic_translate` result: its original, simulated (`nested_translation_original`)."""
    original = nested_translation_original(var.value, var.graph)
    if original is None:
        return None
    var.needs_identity = True  # (which translation it is: another one in its place is another original)
    var.graph.add_guard(var)
    return VariableFactory.from_value(original, var.graph, GetAttrTracker(var, "__sot_translated__"))


def has_finalizer(cls: type) -> bool:
    """Whether instances of ``cls`` run Python code when they die (a ``__del__`` of the class or a base)."""
    return any("__del__" in vars(klass) for klass in cls.__mro__)


def is_simple_class(cls: type) -> bool:
    """A user class whose instances can be built during simulation: plain ``object.__new__``, no
    metaclass (but ``ABCMeta``, whose instances are made by ``type``'s own call), no builtin base other than
    ``object`` (and not a Layer, whose ``__init__`` registers)."""
    import abc

    import paddle as _paddle

    if type(cls) not in (type, abc.ABCMeta) or not cls.__flags__ & HEAPTYPE or cls.__new__ is not object.__new__:
        return False
    if issubclass(cls, (_paddle.nn.Layer, BaseException)):
        return False
    return all(base is object or base.__flags__ & HEAPTYPE for base in cls.__mro__[1:])


def run_python_init(cls_var: ObjectVariable, obj: VariableBase, args: list[VariableBase],
                    kwargs: dict[str, VariableBase]) -> bool:
    """Inline ``type(obj).__init__(obj, *args, **kwargs)`` for an instance made in the frame when it is a Python
    function (then True; False when it is not). It is read as ``cls.__init__``, a path the guards can follow to
    its globals (a class from another module reads that module's names)."""
    import types

    if not isinstance(inspect.getattr_static(cls_var.value, "__init__", None), types.FunctionType):
        return False
    result = cls_var.getattr("__init__").call([obj, *args], kwargs)
    if not (isinstance(result, ConstantVariable) and result.value is None):
        message = f"__init__() should return None, not '{result.get_py_type().__name__}'"
        raise UserCodeError(f"user code raised TypeError: {message}", original=TypeError(message))
    return True


def instantiate(cls_var: ObjectVariable, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    """``cls(*args)``: a new object whose ``__init__`` is inlined; the generated code builds it for real and
    replays its attribute assignments, in program order."""
    from .basic import NewObjectVariable

    cls = cls_var.value
    graph = cls_var.graph
    cls_var.needs_identity = True
    graph.add_guard(cls_var)
    try:
        placeholder = object.__new__(cls)
    except TypeError as exc:  # (an abstract class)
        raise UserCodeError(f"user code raised TypeError: {exc}", original=exc) from None
    obj = NewObjectVariable(placeholder, cls_var, graph)
    if not run_python_init(cls_var, obj, args, kwargs):
        if cls.__init__ is not object.__init__:
            raise BreakGraphError(f"{cls.__qualname__}.__init__ is not Python code: the instance is built natively")
        if args or kwargs:
            raise UserCodeError(f"user code raised TypeError: {cls.__name__}() takes no arguments",
                                original=TypeError(f"{cls.__name__}() takes no arguments"))
    return obj


class SuperVariable(VariableBase):
    """``super()`` inside a simulated method: attribute reads resolve after ``cls`` in ``type(self)``'s MRO."""

    def __init__(self, cls: type, self_var: VariableBase, graph: "FunctionGraph") -> None:
        super().__init__(graph, DummyTracker((self_var,)))
        self.cls = cls
        self.self_var = self_var

    def getattr(self, name: str) -> VariableBase:
        import types

        from .function import BoundMethodVariable, UserFunctionVariable

        owner = self.self_var.get_py_value()
        mro = type(owner).__mro__ if not isinstance(owner, type) else owner.__mro__
        for index in range(mro.index(self.cls) + 1, len(mro)):
            klass = mro[index]
            if name in klass.__dict__:
                attr = klass.__dict__[name]
                if isinstance(attr, types.FunctionType):
                    from .layer import BuiltinForwardVariable, LayerVariable, is_builtin_forward

                    if attr is paddle.nn.Layer.__getattr__ and isinstance(self.self_var, LayerVariable):
                        return LayerOwnGetattrVariable(self.self_var)  # (in a layer's own ``__getattr__``)

                    if name == "forward" and isinstance(self.self_var, LayerVariable) and is_builtin_forward(attr):
                        return BuiltinForwardVariable(self.self_var, klass)  # one statement, not inlined
                    fn = UserFunctionVariable(attr, self.graph, self._member_tracker(owner, index, name))
                    return BoundMethodVariable(fn, self.self_var, self.graph, DummyTracker((fn,)))
                if attr is object.__init__:
                    return PureFunctionVariable(lambda: None, self.graph, DummyTracker((self,)))
                base_method = self._builtin_base_method(klass, name, attr)
                if base_method is not None:
                    return base_method
                if translation_original(attr) is not None:  # (a base's method under ``@symbolic_translate``)
                    return self._translated_member(owner, index, name, attr)
                if not hasattr(type(attr), "__get__"):  # (by its path: a container read is the real one)
                    return VariableFactory.from_value(attr, self.graph, self._member_tracker(owner, index, name))
                raise BreakGraphError(f"super().{name} is a {type(attr).__name__}: not simulated")
        raise UserCodeError(f"user code raised AttributeError: 'super' object has no attribute {name!r}",
                            original=AttributeError(f"'super' object has no attribute '{name}'", name=name,
                                                    obj=self._real_super()))

    def _real_super(self) -> Any:
        """The ``super`` object eager code has here (the ``obj`` of its AttributeError), or None."""
        try:
            return super(self.cls, self.self_var.get_py_value())
        except Exception:  # noqa: BLE001 - (no real receiver to bind: the error just has no obj)
            return None

    def _builtin_base_method(self, klass: type, name: str, attr: Any) -> VariableBase | None:
        """``super().name`` found on a builtin class: ``object.__setattr__``/``__delattr__`` (the plain store,
        past the class's own ``__setattr__``) and the methods of a mapping base acting on the instance's
        simulated items (``super().__setitem__`` in a ``ModelOutput``), and those of ``list`` on a list
        subclass instance's; None for anything else."""
        from .function import BoundMethodVariable
        from .user_mapping import MAPPING_BASES, MappingInstanceVariable

        if klass is object and member_of(BUILTIN_DISPATCH, attr) and name in ("__setattr__", "__delattr__",
                                                                              "__getattribute__"):
            function = BuiltinVariable(attr, self.graph, DummyTracker((self,)))
            return BoundMethodVariable(function, self.self_var, self.graph, DummyTracker((function, self.self_var)))
        if klass in MAPPING_BASES and isinstance(self.self_var, MappingInstanceVariable):
            return self.self_var.base_method(name)
        from .user_sequence import SequenceInstanceVariable

        if klass is list and isinstance(self.self_var, SequenceInstanceVariable):
            return self.self_var.base_method(name)
        return None

    def _translated_member(self, owner: Any, index: int, name: str, translation: Any) -> VariableBase:
        """``super().name`` is a `symbolic_translate` result of a function: its original bound to ``self``,
        simulated inline (`nested_translation_original`; across training flags, a break at the call)."""
        import types

        from .function import BoundMethodVariable, UserFunctionVariable

        translation_var = VariableFactory.from_value(translation, self.graph,
                                                     self._member_tracker(owner, index, name))
        try:
            function = _nested_translation(translation_var)
        except BreakGraphError as mismatch:
            bound = types.MethodType(translation, owner)
            return NativeCallVariable(bound, self.graph, DummyTracker((self,)), mismatch.reason)
        if not isinstance(function, UserFunctionVariable):
            raise BreakGraphError(f"super().{name} is a translation of {type(translation_original(translation))}"
                                  ": not simulated")
        return BoundMethodVariable(function, self.self_var, self.graph, DummyTracker((function,)))

    def _member_tracker(self, owner: Any, index: int, name: str) -> Tracker:
        """``type(self).__mro__[index].__dict__[name]`` as a path from ``self`` when ``self`` has one: the
        function found is then a value of the frame like any other (its globals, defaults and closure are
        guarded through it, whatever module it comes from); otherwise a computed value."""
        from .attribute import class_member_tracker

        return class_member_tracker(self.self_var, index, name)


class LayerOwnGetattrVariable(CallableVariable):
    """``super().__getattr__`` of a layer reaching Paddle's ``Layer.__getattr__`` (a wrapper layer's own
    ``__getattr__`` delegating to another object when the layer has no such member, as LoRA/PEFT wrappers do):
    the layer's members and its ordinary attributes, an AttributeError otherwise, without the class's own
    ``__getattr__`` again."""

    def __init__(self, layer: VariableBase) -> None:
        super().__init__(paddle.nn.Layer.__getattr__, layer.graph, DummyTracker((layer,)))
        self.layer = layer

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        from .attribute import load_attribute

        if len(args) != 1 or kwargs or not isinstance(args[0], ConstantVariable) or type(args[0].value) is not str:
            raise FallbackError("Layer.__getattr__ called with other than one attribute name")
        return load_attribute(self.layer, args[0].value, user_getattr=False)  # type: ignore[arg-type]


@builtin_rule(super)
def _super(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    if len(args) == 2:
        cls_var, self_var = args
        graph.add_guard(cls_var)
        return SuperVariable(cls_var.get_py_value(), self_var, graph)
    if args or kwargs:
        raise FallbackError("super() with one argument is not simulated")
    executor = graph.current_executor
    code = executor.code
    cell = executor.cells.get("__class__")
    # (the interpreter's checks, in its order)
    problem = ("no arguments" if not code.co_argcount else "__class__ cell not found" if cell is None
               else "empty __class__ cell" if cell.content is None else None)
    if problem is not None:
        raise UserCodeError(f"user code raised RuntimeError: super(): {problem}",
                            original=RuntimeError(f"super(): {problem}"))
    first = code.co_varnames[0]
    self_var = executor.locals.get(first)
    if self_var is None and first in executor.cells:
        self_var = executor.cells[first].content
    if self_var is None:
        raise FallbackError("super(): the first argument is not bound")
    cls_var = cell.content
    graph.add_guard(cls_var)
    return SuperVariable(cls_var.get_py_value(), self_var, graph)

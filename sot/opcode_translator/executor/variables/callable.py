"""Callables the simulation knows how to call: Paddle APIs, tensor methods, builtins, `psdb` helpers."""
from __future__ import annotations

import operator
import sys
from typing import TYPE_CHECKING, Any, Callable

import paddle

from ....errors import BreakGraphError, FallbackError, UserCodeError
from ..tracker import DummyTracker, Tracker
from .base import VariableBase, VariableFactory
from .basic import ConstantVariable, ObjectVariable, TensorVariable

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


def _reject_inplace(name: str) -> None:
    # In-place ops mutate an input: a side effect that is replayed only once side effects are modelled.
    if name.endswith("_") and not name.endswith("__"):
        raise FallbackError(f"in-place tensor operation {name!r} is not supported yet")


class PaddleApiVariable(CallableVariable):
    """A Paddle function such as ``paddle.matmul`` or ``F.relu``: one ``api`` SIR statement per call."""

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        _reject_inplace(getattr(self.value, "__name__", ""))
        return self.graph.call_tensor_op("api", _qualified_name(self.value), self.value, args, kwargs)


# Tensor methods whose result leaves the tensor world (Python values, numpy, autograd state, I/O): a graph
# break, never a graph op (a static op would return a tensor where eager returns a float).
NON_GRAPH_TENSOR_METHODS = frozenset({
    "item", "tolist", "numpy", "__array__", "__bool__", "__int__", "__float__", "__index__", "__len__",
    "__format__", "__repr__", "__str__", "__complex__", "backward", "register_hook", "clear_grad",
    "clear_gradient", "gradient", "data_ptr", "set_value", "copy_", "_copy_to", "cpu", "cuda", "pin_memory",
    "value", "get_tensor", "detach_", "_md5sum", "_is_initialized", "is_dense", "is_dist", "is_sparse",
    "numel_", "element_size", "_numel", "contiguous", "is_contiguous", "get_strides", "strides",
})


class TensorMethodVariable(CallableVariable):
    """``tensor.method`` bound during simulation: one ``method`` SIR statement per call."""

    def __init__(self, tensor: TensorVariable, name: str, graph: "FunctionGraph") -> None:
        super().__init__(getattr(paddle.Tensor, name, None), graph, DummyTracker((tensor,)))
        self.tensor = tensor
        self.name = name

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        if self.name in NON_GRAPH_TENSOR_METHODS:
            raise BreakGraphError(f"Tensor.{self.name}() leaves the graph (Python value or autograd state)")
        _reject_inplace(self.name)
        return self.graph.call_tensor_op("method", self.name, self.name, [self.tensor, *args], kwargs)

    def children(self) -> list[VariableBase]:
        return [self.tensor]

    def _reconstruct_computed(self, codegen: Any) -> None:
        codegen.reconstruct(self.tensor)
        codegen.load_attr(self.name)

    def __repr__(self) -> str:
        return f"TensorMethodVariable({self.tensor.symbol.name}.{self.name})"


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
                  kwargs: dict[str, VariableBase]) -> VariableBase | None:
    """Evaluate ``fn`` directly when every argument is a known Python value (not a tensor)."""
    if any(isinstance(a, TensorVariable) for a in [*args, *kwargs.values()]):
        return None
    values = [a.get_py_value() for a in args]
    kw_values = {k: v.get_py_value() for k, v in kwargs.items()}
    for var in [*args, *kwargs.values()]:
        graph.add_guard(var)
    result = graph.run_user_python(fn, values, kw_values)
    return VariableFactory.from_value(result, graph, DummyTracker(tuple(args) + tuple(kwargs.values())))


def _fold_or_tensor(fn: Callable[..., Any], name: str) -> BuiltinRule:
    def rule(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        folded = constant_fold(fn, graph, args, kwargs)
        if folded is not None:
            return folded
        return graph.call_tensor_op("api", name, fn, args, kwargs)

    return rule


def _fold_only(fn: Callable[..., Any]) -> BuiltinRule:
    def rule(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        folded = constant_fold(fn, graph, args, kwargs)
        if folded is None:  # e.g. float(tensor): the value leaves the graph
            raise BreakGraphError(f"{fn.__name__}() of a tensor reads its value: runs natively")
        return folded

    return rule


for _fn in (abs, operator.neg, operator.pos, operator.invert, pow):
    BUILTIN_DISPATCH[_fn] = _fold_or_tensor(_fn, f"{getattr(_fn, '__module__', 'builtins')}.{_fn.__name__}")
for _fn in (int, float, str, bool, round, divmod, issubclass, callable, hash, repr, chr, ord, range, slice,
            format, bin, oct, hex, ascii, complex, bytes):
    BUILTIN_DISPATCH[_fn] = _fold_only(_fn)


def _const(graph: "FunctionGraph", value: Any, *sources: VariableBase) -> VariableBase:
    return VariableFactory.from_value(value, graph, DummyTracker(tuple(sources)))


@builtin_rule(len)
def _len(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    (arg,) = args
    if isinstance(arg, TensorVariable):
        if not arg.meta.shape:
            raise UserCodeError("user code raised TypeError: len() of a 0-D tensor")
        return ConstantVariable(arg.concrete_shape()[0], graph, DummyTracker((arg,)))
    length = getattr(arg, "length", None)
    if length is not None:
        return ConstantVariable(length(), graph, DummyTracker((arg,)))
    return _fold_only(len)(graph, args, kwargs)


@builtin_rule(isinstance)
def _isinstance(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    obj, classes = args
    graph.add_guard(classes)
    if isinstance(obj, TensorVariable):
        graph.add_guard(obj)  # its guard pins the exact tensor type
        result = issubclass(obj.get_py_type(), classes.get_py_value())
    else:
        graph.add_guard(obj)
        result = isinstance(obj.get_py_value(), classes.get_py_value())
    return ConstantVariable(result, graph, DummyTracker((obj, classes)))


@builtin_rule(type)
def _type(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    if len(args) != 1 or kwargs:
        raise FallbackError("type() with three arguments creates a class: not supported")
    (obj,) = args
    graph.add_guard(obj)
    return VariableFactory.from_value(obj.get_py_type(), graph, DummyTracker((obj,)))


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
    try:
        return obj.getattr(name.get_py_value())
    except FallbackError:
        if len(args) == 3 and not hasattr(obj.get_py_value(), name.get_py_value()):
            graph.add_guard(obj)
            return args[2]
        raise


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
        graph.add_guard(obj)
        result = hasattr(obj.get_py_value(), name.get_py_value())
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
        raise FallbackError(f"next() of {iterator!r} is not supported")
    item = iterator.next()
    if item is None:
        if len(args) > 1:
            return args[1]
        raise UserCodeError("user code raised StopIteration")
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

    return IteratorVariable(produce(), graph, "enumerate", None if kwargs else (enumerate, list(args)))


@builtin_rule(zip)
def _zip(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    from .container import TupleVariable
    from .iterator import IteratorVariable, iterate

    if kwargs:
        raise FallbackError("zip(strict=...) is not supported yet")
    rows = _in_step([iterate(a) for a in args])
    produce = (TupleVariable(items, graph, DummyTracker(tuple(items))) for items in rows)
    return IteratorVariable(produce, graph, "zip", (zip, list(args)))


def _in_step(sources: list[Any]) -> Any:
    """One list of items per step of several iterators, until the shortest is exhausted (zip, map)."""
    while True:
        items = []
        for source in sources:
            item = source.next()
            if item is None:
                return
            items.append(item)
        yield items


@builtin_rule(map)
def _map(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    from .iterator import IteratorVariable, iterate

    fn, rows = args[0], _in_step([iterate(a) for a in args[1:]])
    return IteratorVariable((fn.call(items, {}) for items in rows), graph, "map", (map, list(args)))


@builtin_rule(filter)
def _filter(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    from .iterator import IteratorVariable, iterate

    fn, source = args[0], iterate(args[1])

    def produce() -> Any:
        while (item := source.next()) is not None:
            keep = item if fn.get_py_value() is None else fn.call([item], {})
            truth = keep.bool()
            graph.add_guard(keep)
            if truth:
                yield item

    return IteratorVariable(produce(), graph, "filter", (filter, list(args)))


@builtin_rule(reversed)
def _reversed(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    from .iterator import IteratorVariable

    from .iterator import lazy

    return IteratorVariable(lazy(lambda: _items_of(args[0])[::-1]), graph, "reversed", (reversed, list(args)))


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


@builtin_rule(dict)
def _dict(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    from .container import DictVariable

    items: dict[Any, VariableBase] = {}
    if args:
        source = args[0]
        if isinstance(source, DictVariable):
            items.update(source.items)
        else:
            for pair in _items_of(source):
                key, value = pair.unpack()
                graph.add_guard(key)
                items[key.get_py_value()] = value
    items.update(kwargs)
    return DictVariable(items, graph, DummyTracker(tuple(args) + tuple(kwargs.values())))


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
        for item in _items_of(args[0]):
            truth = item.bool()
            graph.add_guard(item)
            if truth == want:
                return ConstantVariable(want, graph, DummyTracker())
        return ConstantVariable(not want, graph, DummyTracker())

    return rule


BUILTIN_DISPATCH[any] = _truth_reduce(True)
BUILTIN_DISPATCH[all] = _truth_reduce(False)


def _min_max(fn: Callable[..., Any]) -> BuiltinRule:
    def rule(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        items = _items_of(args[0]) if len(args) == 1 else list(args)
        if any(isinstance(item, TensorVariable) for item in items):
            raise FallbackError(f"{fn.__name__}() over tensors compares tensors as Python bools")
        if len(args) != 1:
            return constant_fold(fn, graph, items, kwargs)
        # One iterable: called with it (as a tuple), so an empty one raises the eager error, not the one of a
        # call without arguments.
        from .container import TupleVariable

        return constant_fold(fn, graph, [TupleVariable(items, graph, DummyTracker(tuple(items)))], kwargs)

    return rule


BUILTIN_DISPATCH[min] = _min_max(min)
BUILTIN_DISPATCH[max] = _min_max(max)


@builtin_rule(sorted)
def _sorted(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    from .container import ListVariable

    items = _items_of(args[0])
    folded = constant_fold(sorted, graph, [ListVariable(items, graph, DummyTracker(tuple(items)))], kwargs)
    if folded is None:
        raise FallbackError("sorted() over tensors compares tensors as Python bools")
    return folded


class PureFunctionVariable(CallableVariable):
    """A callable without side effects on Python values (e.g. a bound method of a str): folded when every
    argument is known."""

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        folded = constant_fold(self.value, self.graph, args, kwargs)
        if folded is None:
            raise FallbackError(f"calling {self.value!r} with tensors is not supported")
        return folded


class BuiltinVariable(CallableVariable):
    """A builtin function simulated through `BUILTIN_DISPATCH`."""

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        return BUILTIN_DISPATCH[self.value](self.graph, args, kwargs)


def member_of(table: Any, value: Any) -> bool:
    """``value in table`` for the dispatch tables (an unhashable value is in none of them)."""
    try:
        return value in table
    except TypeError:
        return False


@VariableFactory.register(80)
def _builtin_rule(value: Any, graph: "FunctionGraph", tracker: Tracker) -> VariableBase | None:
    return BuiltinVariable(value, graph, tracker) if member_of(BUILTIN_DISPATCH, value) else None


# Pure functions of C modules: folded on known values.
_PURE_MODULES = ("math", "cmath", "operator", "_operator")


@VariableFactory.register(75)
def _pure_builtin_rule(value: Any, graph: "FunctionGraph", tracker: Tracker) -> VariableBase | None:
    import types

    if isinstance(value, types.BuiltinFunctionType) and getattr(value, "__module__", None) in _PURE_MODULES:
        return PureFunctionVariable(value, graph, tracker)
    return None


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
                              paddle.base.framework.in_dygraph_mode, paddle.is_compiled_with_cuda})


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
        raise BreakGraphError(f"call of {getattr(self.value, '__qualname__', self.value)!r} (C code with unknown "
                              "effects) runs natively")


def call_object(var: ObjectVariable, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    """Calling an arbitrary object: instances with a Python ``__call__`` are inlined."""
    import types

    from .function import UserFunctionVariable

    obj = var.value
    from .context import GradModeVariable, grad_mode_for_class

    mode = grad_mode_for_class(obj)
    if mode is not None and not args and not kwargs:
        var.graph.add_guard(var)
        return GradModeVariable(mode, var.graph)
    if isinstance(obj, type) and issubclass(obj, BaseException) and obj.__module__ == "builtins":
        # Building a builtin exception (``assert x, "msg"``, ``raise ValueError(...)``) has no side effect.
        folded = constant_fold(obj, var.graph, args, kwargs)
        if folded is not None:
            return folded
    if isinstance(obj, type) and is_simple_class(obj):
        return instantiate(var, args, kwargs)
    if isinstance(obj, type):
        raise BreakGraphError(f"creating an instance of {obj.__qualname__} runs natively")
    call = getattr(type(obj), "__call__", None)
    if isinstance(call, types.FunctionType):
        var.graph.add_guard(var)  # the identity (hence the type) of the object fixes __call__
        return UserFunctionVariable(call, var.graph, DummyTracker((var,))).call([var, *args], kwargs)
    raise BreakGraphError(f"call of {getattr(obj, '__qualname__', None) or type(obj).__name__} runs natively "
                          "(not simulated)")


def is_simple_class(cls: type) -> bool:
    """A user class whose instances can be built during simulation: plain ``object.__new__``, no
    metaclass, no builtin base other than ``object`` (and not a Layer, whose ``__init__`` registers)."""
    import paddle as _paddle

    if type(cls) is not type or not cls.__flags__ & (1 << 9) or cls.__new__ is not object.__new__:
        return False
    if issubclass(cls, (_paddle.nn.Layer, BaseException)):
        return False
    return all(base is object or base.__flags__ & (1 << 9) for base in cls.__mro__[1:])


def instantiate(cls_var: ObjectVariable, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    """``cls(*args)``: a new object whose ``__init__`` is inlined; the generated code builds it for real and
    replays its attribute assignments, in program order."""
    import types

    from .basic import NewObjectVariable
    from .function import UserFunctionVariable

    cls = cls_var.value
    graph = cls_var.graph
    cls_var.needs_identity = True
    graph.add_guard(cls_var)
    obj = NewObjectVariable(object.__new__(cls), cls_var, graph)
    init = cls.__init__
    if isinstance(init, types.FunctionType):
        result = UserFunctionVariable(init, graph, DummyTracker((cls_var,))).call([obj, *args], kwargs)
        if not (isinstance(result, ConstantVariable) and result.value is None):
            message = f"__init__() should return None, not '{result.get_py_type().__name__}'"
            raise UserCodeError(f"user code raised TypeError: {message}", original=TypeError(message))
    elif init is object.__init__:
        if args or kwargs:
            raise UserCodeError(f"user code raised TypeError: {cls.__name__}() takes no arguments",
                                original=TypeError(f"{cls.__name__}() takes no arguments"))
    else:
        raise BreakGraphError(f"{cls.__qualname__}.__init__ is not Python code: the instance is built natively")
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
        for klass in mro[mro.index(self.cls) + 1:]:
            if name in klass.__dict__:
                attr = klass.__dict__[name]
                if isinstance(attr, types.FunctionType):
                    fn = UserFunctionVariable(attr, self.graph, DummyTracker((self,)))
                    return BoundMethodVariable(fn, self.self_var, self.graph, DummyTracker((fn,)))
                if attr is object.__init__:
                    return PureFunctionVariable(lambda: None, self.graph, DummyTracker((self,)))
                if not hasattr(type(attr), "__get__"):
                    return VariableFactory.from_value(attr, self.graph, DummyTracker((self,)))
                raise BreakGraphError(f"super().{name} is a {type(attr).__name__}: not simulated")
        raise UserCodeError(f"user code raised AttributeError: 'super' object has no attribute {name!r}",
                            original=AttributeError(f"'super' object has no attribute '{name}'"))


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
    if cell is None or cell.content is None or not code.co_argcount:
        raise UserCodeError("user code raised RuntimeError: super(): __class__ cell not found",
                            original=RuntimeError("super(): __class__ cell not found"))
    first = code.co_varnames[0]
    self_var = executor.locals.get(first)
    if self_var is None and first in executor.cells:
        self_var = executor.cells[first].content
    if self_var is None:
        raise FallbackError("super(): the first argument is not bound")
    cls_var = cell.content
    graph.add_guard(cls_var)
    return SuperVariable(cls_var.get_py_value(), self_var, graph)

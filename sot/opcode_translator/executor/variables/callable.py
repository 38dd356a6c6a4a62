"""Callables the simulation knows how to call: Paddle APIs, tensor methods, builtins, `psdb` helpers."""
from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any, Callable

import paddle

from ....errors import FallbackError
from ..tracker import DummyTracker, Tracker
from .base import VariableBase, VariableFactory
from .basic import ConstantVariable, ObjectVariable, TensorVariable

if TYPE_CHECKING:
    from ..function_graph import FunctionGraph


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
    if isinstance(value, type) or not callable(value):
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


class TensorMethodVariable(CallableVariable):
    """``tensor.method`` bound during simulation: one ``method`` SIR statement per call."""

    def __init__(self, tensor: TensorVariable, name: str, graph: "FunctionGraph") -> None:
        super().__init__(getattr(paddle.Tensor, name, None), graph, DummyTracker((tensor,)))
        self.tensor = tensor
        self.name = name

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        _reject_inplace(self.name)
        return self.graph.call_tensor_op("method", self.name, self.name, [self.tensor, *args], kwargs)

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
        if folded is None:
            raise FallbackError(f"{fn.__name__}() of a tensor is not supported yet")
        return folded

    return rule


for _fn in (abs, operator.neg, operator.pos, operator.invert, pow):
    BUILTIN_DISPATCH[_fn] = _fold_or_tensor(_fn, f"{getattr(_fn, '__module__', 'builtins')}.{_fn.__name__}")
for _fn in (int, float, str, bool, round, divmod, isinstance, issubclass, type, callable, hash, id, repr,
            chr, ord, min, max):
    BUILTIN_DISPATCH[_fn] = _fold_only(_fn)


@builtin_rule(len)
def _len(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    (arg,) = args
    if isinstance(arg, TensorVariable):
        if not arg.meta.shape:
            raise FallbackError("len() of a 0-D tensor")
        arg._used_meta()
        return ConstantVariable(arg.meta.shape[0], graph, DummyTracker((arg,)))
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
        result = constant_fold(isinstance, graph, args, kwargs).get_py_value()
    return ConstantVariable(result, graph, DummyTracker((obj, classes)))


class BuiltinVariable(CallableVariable):
    """A builtin function simulated through `BUILTIN_DISPATCH`."""

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        return BUILTIN_DISPATCH[self.value](self.graph, args, kwargs)


@VariableFactory.register(80)
def _builtin_rule(value: Any, graph: "FunctionGraph", tracker: Tracker) -> VariableBase | None:
    try:
        if value in BUILTIN_DISPATCH:
            return BuiltinVariable(value, graph, tracker)
    except TypeError:  # unhashable
        return None
    return None


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

    try:
        if value in SIMULATED:
            return PsdbVariable(value, graph, tracker)
    except TypeError:
        return None
    return None


"""Operators and protocols on instances of user classes: their Python dunder methods are inlined.

``a + b``, ``a[k]``, ``len(a)``, ``k in a``, ``for x in a``, ``bool(a)``, ``-a``... on an instance whose class
defines the matching dunder as a Python function run that function in the simulation (so tensor work inside
it lands in the graph), with the interpreter's dispatch rules: the reflected method of the right operand
when the left one returns ``NotImplemented`` (or first, when the right operand's class is a subclass that
overrides it), in-place methods falling back to the binary ones, ``__len__`` when ``__bool__`` is missing,
``__iter__`` or ``__getitem__`` for ``in``.

A dunder that is not a Python function (C code, a descriptor) is not simulated here: the caller's usual
path (constant folding, a graph break) handles the value.
"""
from __future__ import annotations

import inspect
import operator
import types
from typing import TYPE_CHECKING, Any, Callable

from ....errors import BreakGraphError, UserCodeError
from ..tracker import DummyTracker
from .base import VariableBase
from .basic import ConstantVariable, ObjectVariable, TensorVariable, is_plain_instance

if TYPE_CHECKING:
    from .iterator import IteratorVariable

# operator function -> (method of the left operand, reflected method of the right one, symbol in errors)
BINARY_DUNDERS: dict[Callable[..., Any], tuple[str, str, str]] = {
    operator.add: ("__add__", "__radd__", "+"), operator.sub: ("__sub__", "__rsub__", "-"),
    operator.mul: ("__mul__", "__rmul__", "*"), operator.truediv: ("__truediv__", "__rtruediv__", "/"),
    operator.floordiv: ("__floordiv__", "__rfloordiv__", "//"), operator.mod: ("__mod__", "__rmod__", "%"),
    operator.pow: ("__pow__", "__rpow__", "** or pow()"), operator.matmul: ("__matmul__", "__rmatmul__", "@"),
    operator.lshift: ("__lshift__", "__rlshift__", "<<"), operator.rshift: ("__rshift__", "__rrshift__", ">>"),
    operator.and_: ("__and__", "__rand__", "&"), operator.or_: ("__or__", "__ror__", "|"),
    operator.xor: ("__xor__", "__rxor__", "^"),
}
# in-place operator -> (its method, the binary operator used when the method is missing or NotImplemented)
INPLACE_DUNDERS: dict[Callable[..., Any], tuple[str, Callable[..., Any]]] = {
    operator.iadd: ("__iadd__", operator.add), operator.isub: ("__isub__", operator.sub),
    operator.imul: ("__imul__", operator.mul), operator.itruediv: ("__itruediv__", operator.truediv),
    operator.ifloordiv: ("__ifloordiv__", operator.floordiv), operator.imod: ("__imod__", operator.mod),
    operator.ipow: ("__ipow__", operator.pow), operator.imatmul: ("__imatmul__", operator.matmul),
    operator.ilshift: ("__ilshift__", operator.lshift), operator.irshift: ("__irshift__", operator.rshift),
    operator.iand: ("__iand__", operator.and_), operator.ior: ("__ior__", operator.or_),
    operator.ixor: ("__ixor__", operator.xor),
}
# rich comparison -> (method, the right operand's reflected method, symbol in errors)
COMPARE_DUNDERS: dict[Callable[..., Any], tuple[str, str, str]] = {
    operator.lt: ("__lt__", "__gt__", "<"), operator.le: ("__le__", "__ge__", "<="),
    operator.gt: ("__gt__", "__lt__", ">"), operator.ge: ("__ge__", "__le__", ">="),
    operator.eq: ("__eq__", "__eq__", "=="), operator.ne: ("__ne__", "__ne__", "!="),
}
UNARY_DUNDERS: dict[Callable[..., Any], str] = {
    operator.neg: "__neg__", operator.pos: "__pos__", operator.invert: "__invert__", operator.abs: "__abs__",
    abs: "__abs__",
}


def _type_error(message: str) -> UserCodeError:
    return UserCodeError(f"user code raised TypeError: {message}", original=TypeError(message))


def is_user_instance(var: VariableBase) -> bool:
    """An instance of a user class whose dunders this module may inline."""
    return (isinstance(var, ObjectVariable) and not isinstance(var.value, type)
            and is_plain_instance(var.value))


def user_method(var: VariableBase, name: str) -> types.FunctionType | None:
    """The Python function ``type(var).<name>`` when ``var`` is a user instance, else None."""
    if not is_user_instance(var):
        return None
    found = inspect.getattr_static(type(var.value), name, None)  # type: ignore[attr-defined]
    return found if isinstance(found, types.FunctionType) else None


def defines(var: VariableBase, name: str) -> bool:
    """``type(var)`` has ``name`` at all (maybe as C code: e.g. ``object.__eq__``)."""
    value = var.value if isinstance(var, (ObjectVariable, ConstantVariable)) else None  # (its type only)
    return value is not None and inspect.getattr_static(type(value), name, None) is not None


def call_method(var: VariableBase, function: types.FunctionType, args: list[VariableBase]) -> VariableBase:
    """Inline ``function(var, *args)``; the instance's guard (its type) fixes which function it is."""
    from .function import UserFunctionVariable

    var.graph.add_guard(var)
    return UserFunctionVariable(function, var.graph, DummyTracker((var,))).call([var, *args], {})


def is_not_implemented(var: VariableBase) -> bool:
    return isinstance(var, (ObjectVariable, ConstantVariable)) and var.value is NotImplemented


def _type_name(var: VariableBase) -> str:
    return var.get_py_type().__name__


def _native_may_answer(var: VariableBase) -> bool:
    """Whether a left operand that is not a user instance could handle the operator itself. Builtin
    scalars and containers return NotImplemented for an unknown right operand (then its reflected method
    runs); a tensor's own operator converts its operand (run natively)."""
    return isinstance(var, TensorVariable) or (isinstance(var, ObjectVariable) and not is_user_instance(var))


def _reflected_first(lhs: VariableBase, rhs: VariableBase, reflected: str) -> bool:
    """The right operand's class is a proper subclass of the left's and overrides the reflected method."""
    if not (is_user_instance(lhs) and is_user_instance(rhs)):
        return False
    left, right = type(lhs.value), type(rhs.value)  # type: ignore[attr-defined]
    return (right is not left and issubclass(right, left)
            and inspect.getattr_static(right, reflected, None) is not inspect.getattr_static(left, reflected, None))


def _binary(fn: Callable[..., Any], lhs: VariableBase, rhs: VariableBase, names: tuple[str, str, str],
            comparison: bool) -> VariableBase | None:
    method, reflected, symbol = names
    forward = user_method(lhs, method)
    backward = user_method(rhs, reflected)
    if forward is None and backward is None:
        return None
    if is_user_instance(lhs) and forward is None and defines(lhs, method) and not comparison:
        raise BreakGraphError(f"{_type_name(lhs)}.{method} is not Python code: runs natively")
    if not is_user_instance(lhs) and _native_may_answer(lhs):
        raise BreakGraphError(f"{_type_name(lhs)} {symbol} {_type_name(rhs)}: the left operand's own "
                              "operator runs natively")
    attempts = [(lhs, forward, rhs), (rhs, backward, lhs)]
    if _reflected_first(lhs, rhs, reflected):
        attempts.reverse()
    for receiver, function, other in attempts:
        if function is None:
            continue
        result = call_method(receiver, function, [other])
        if not is_not_implemented(result):
            return result
    graph = lhs.graph
    if comparison:
        if fn in (operator.eq, operator.ne):  # the default: identity
            same = lhs is rhs
            if not same and isinstance(lhs, ObjectVariable) and isinstance(rhs, ObjectVariable):
                for operand in (lhs, rhs):
                    operand.needs_identity = True
                    graph.add_guard(operand)
                same = lhs.value is rhs.value
            return ConstantVariable(same == (fn is operator.eq), graph, DummyTracker((lhs, rhs)))
        raise _type_error(f"'{symbol}' not supported between instances of '{_type_name(lhs)}' and "
                          f"'{_type_name(rhs)}'")
    raise _type_error(f"unsupported operand type(s) for {symbol}: '{_type_name(lhs)}' and '{_type_name(rhs)}'")


def dunder_operator(fn: Callable[..., Any], operands: list[VariableBase]) -> VariableBase | None:
    """``fn(*operands)`` through the operands' Python dunders, or None when no user dunder applies."""
    if not any(is_user_instance(operand) for operand in operands):
        return None
    if fn in UNARY_DUNDERS and len(operands) == 1:
        (operand,) = operands
        function = user_method(operand, UNARY_DUNDERS[fn])
        return None if function is None else call_method(operand, function, [])
    if fn in INPLACE_DUNDERS:
        method, binary = INPLACE_DUNDERS[fn]
        function = user_method(operands[0], method)
        if function is not None:
            result = call_method(operands[0], function, [operands[1]])
            if not is_not_implemented(result):
                return result
        fn = binary
    if fn in BINARY_DUNDERS:
        return _binary(fn, operands[0], operands[1], BINARY_DUNDERS[fn], comparison=False)
    if fn is operator.ne and _inherits_default_ne(operands[0]) and user_method(operands[0], "__eq__") is not None:
        # the default ``__ne__`` inverts ``__eq__`` (unless it returns NotImplemented)
        result = call_method(operands[0], user_method(operands[0], "__eq__"), [operands[1]])  # type: ignore[arg-type]
        if not is_not_implemented(result):
            return ConstantVariable(not truth_value(result), operands[0].graph, DummyTracker((result,)))
    if fn in COMPARE_DUNDERS:
        return _binary(fn, operands[0], operands[1], COMPARE_DUNDERS[fn], comparison=True)
    if fn is operator.contains:
        return contains(operands[0], operands[1])
    return None


def _inherits_default_ne(var: VariableBase) -> bool:
    if not is_user_instance(var):
        return False
    return inspect.getattr_static(type(var.value), "__ne__", None) is object.__ne__  # type: ignore[attr-defined]


def contains(container: VariableBase, item: VariableBase) -> VariableBase | None:
    """``item in container``: ``__contains__``, else a scan of ``__iter__`` (``==`` on each element)."""
    function = user_method(container, "__contains__")
    graph = container.graph
    if function is not None:
        result = call_method(container, function, [item])
        return ConstantVariable(truth_value(result), graph, DummyTracker((result,)))
    # (the container's own iteration: a builtin base's ``__iter__`` wins over a Python ``__getitem__``)
    iterator = container.iterator() if isinstance(container, ObjectVariable) else iterate_instance(container)
    if iterator is None:
        return None
    return scan_for(iterator, item)


def scan_for(iterator: "IteratorVariable", item: VariableBase) -> VariableBase:
    """``item in iterator`` as CPython scans: identity, then ``==``, element by element, stopping at the
    first match (a generator's later elements are never produced)."""
    from .callable import apply_operator

    graph = item.graph
    while (element := iterator.next()) is not None:
        if element is item:
            return ConstantVariable(True, graph, DummyTracker())
        if truth_value(apply_operator(graph, operator.eq, [element, item])):
            return ConstantVariable(True, graph, DummyTracker())
    return ConstantVariable(False, graph, DummyTracker())


def iterate_instance(var: VariableBase) -> "IteratorVariable | None":
    """``iter(var)`` of a user instance with a Python ``__iter__`` (returning an iterator the simulation
    knows, or an instance with a Python ``__next__``), or a Python ``__getitem__`` (indexes from 0 until
    ``IndexError``); None when neither is defined in Python."""
    from .iterator import IteratorVariable, iterate

    graph = var.graph
    function = user_method(var, "__iter__")
    if function is not None:
        result = call_method(var, function, [])
        if isinstance(result, IteratorVariable):
            return result
        step = user_method(result, "__next__")
        if step is None:
            if is_user_instance(result):
                raise _type_error(f"iter() returned non-iterator of type '{_type_name(result)}'")
            return iterate(result)
        return IteratorVariable(_stepping(result, step), graph, f"{_type_name(result)} iterator")
    getitem = user_method(var, "__getitem__")
    if getitem is not None and not defines(var, "__iter__"):  # (an ``__iter__`` in C is used by ``iter()``)
        return IteratorVariable(_indexing(var, getitem), graph, f"{_type_name(var)} sequence iterator")
    return None


def _stepping(iterator: VariableBase, step: types.FunctionType) -> Any:
    while True:
        try:
            item = call_method(iterator, step, [])
        except UserCodeError as exc:
            if isinstance(exc.original, StopIteration):
                return
            raise
        yield item


def _indexing(var: VariableBase, getitem: types.FunctionType) -> Any:
    index = 0
    while True:
        try:
            item = call_method(var, getitem, [ConstantVariable(index, var.graph, DummyTracker())])
        except UserCodeError as exc:
            if isinstance(exc.original, (IndexError, StopIteration)):
                return
            raise
        yield item
        index += 1


def length(var: VariableBase) -> int | None:
    """``len(var)`` through a Python ``__len__``, checked like the interpreter checks it."""
    function = user_method(var, "__len__")
    if function is None:
        return None
    result = call_method(var, function, [])
    if isinstance(result, TensorVariable):
        raise BreakGraphError("__len__ returned a tensor: its value is needed as a Python int")
    value = result.get_py_value()
    if not isinstance(value, int):
        raise _type_error(f"'{type(value).__name__}' object cannot be interpreted as an integer")
    if value < 0:
        error = ValueError("__len__() should return >= 0")
        raise UserCodeError(f"user code raised ValueError: {error}", original=error)
    var.graph.add_guard(result)
    return int(value)


def truth(var: VariableBase) -> bool | None:
    """``bool(var)`` through a Python ``__bool__`` (which must return a bool) or ``__len__``."""
    function = user_method(var, "__bool__")
    if function is not None:
        result = call_method(var, function, [])
        if isinstance(result, TensorVariable):
            raise BreakGraphError("__bool__ returned a tensor: its value decides a Python branch")
        value = result.get_py_value()
        if type(value) is not bool:
            raise _type_error(f"__bool__ should return bool, returned {type(value).__name__}")
        var.graph.add_guard(result)
        return value
    if is_user_instance(var) and defines(var, "__bool__"):
        return None
    size = length(var)
    return None if size is None else size > 0


def truth_value(var: VariableBase) -> bool:
    """``bool(var)`` as a Python decision (guarded); a tensor's truth breaks the graph."""
    if isinstance(var, ConstantVariable) and type(var.value) is bool:
        return var.value
    result = var.bool()
    var.graph.add_guard(var)
    return result

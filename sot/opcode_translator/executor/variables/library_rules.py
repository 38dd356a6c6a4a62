"""Calls of library functions answered during simulation instead of running natively at a graph break.

Library code (the standard library, Paddle, site-packages: `skip_files`) is not inlined; a call of it is a
graph break. A few such calls depend only on what the guard already fixes, or on state a guard can re-ask
cheaply: a rule here answers them (`FunctionVariableBase.call` asks `library_call` first). Rules are keyed
by the function's code object, so a function reached by any path (a bound method, a module attribute) is
found. A rule returns None when it cannot answer: the call then runs natively, as before.
"""
from __future__ import annotations

import copy
import functools
import inspect
import posixpath
import re
import types
import typing
from typing import TYPE_CHECKING, Any, Callable

from ..tracker import ConstTracker, DummyTracker
from .base import VariableBase
from .basic import ConstantVariable

if TYPE_CHECKING:
    from .function import FunctionVariableBase

LibraryRule = Callable[["FunctionVariableBase", list[VariableBase], dict[str, VariableBase]], "VariableBase | None"]
LIBRARY_RULES: dict[types.CodeType, LibraryRule] = {}


def library_rule(*functions: Any) -> Callable[[LibraryRule], LibraryRule]:
    def register(rule: LibraryRule) -> LibraryRule:
        for function in functions:
            LIBRARY_RULES[function.__code__] = rule
        return rule

    return register


def library_call(function: "FunctionVariableBase", args: list[VariableBase],
                 kwargs: dict[str, VariableBase]) -> VariableBase | None:
    """The result of a library call answered during simulation, or None (it runs natively)."""
    rule = LIBRARY_RULES.get(getattr(function, "code", None))  # type: ignore[arg-type]
    return rule(function, args, kwargs) if rule is not None else None


_BOUND_TO = object()  # (the instance a bound method's signature is taken with: it does not depend on it)


@library_rule(inspect.signature)
def _signature(function: "FunctionVariableBase", args: list[VariableBase],
               kwargs: dict[str, VariableBase]) -> VariableBase | None:
    """``inspect.signature(f)`` of a Python function or a bound method of one (``processor.__call__`` in
    transformers' ``LogitsProcessorList``): folded, with the function's identity guarded (its code, defaults
    and annotations are what the signature shows). A constant: ``.parameters``, ``len()``... are folded too."""
    from .function import BoundMethodVariable, UserFunctionVariable

    if len(args) != 1 or kwargs:
        return None
    target = args[0]
    bound = isinstance(target, BoundMethodVariable)
    fn_var = target.function if bound else target  # type: ignore[attr-defined]
    if type(fn_var) is not UserFunctionVariable or not fn_var.tracker.is_traceable():
        return None
    fn = fn_var.value
    if inspect.getattr_static(fn, "__wrapped__", None) is not None or "__signature__" in vars(fn):
        return None  # (the signature of another function, or one set by hand: not fixed by ``fn`` alone)
    fn_var.needs_identity = True
    fn_var.graph.add_guard(fn_var)
    try:
        signature = inspect.signature(types.MethodType(fn, _BOUND_TO) if bound else fn)
    except (TypeError, ValueError):
        return None
    return ConstantVariable(signature, fn_var.graph, DummyTracker((fn_var,)))


# What ``copy.copy``/``copy.deepcopy`` hand back unchanged: the types the ``copy`` module treats as atomic.
_ATOMIC_TYPES = frozenset({type(None), type(Ellipsis), type(NotImplemented), int, float, bool, complex, bytes, str,
                           range, types.CodeType, type})


@library_rule(copy.copy, copy.deepcopy)
def _copy_of_an_atomic_value(function: "FunctionVariableBase", args: list[VariableBase],
                             kwargs: dict[str, VariableBase]) -> VariableBase | None:
    """``copy.deepcopy(3)`` is ``3`` itself: a copy of an atomic constant is the constant (the leaves of
    ``dataclasses.asdict``/``astuple``, which copy every field value that is no container). Anything else (a
    tensor, a user object, a memo passed) still runs natively."""
    if len(args) != 1 or kwargs or not isinstance(args[0], ConstantVariable):
        return None
    return args[0] if type(args[0].value) in _ATOMIC_TYPES else None


@library_rule(typing.cast)
def _typing_cast(function: "FunctionVariableBase", args: list[VariableBase],
                 kwargs: dict[str, VariableBase]) -> VariableBase | None:
    """``typing.cast(T, value)`` is ``value``: a hint for type checkers, nothing at run time."""
    if len(args) == 2 and not kwargs:
        return args[1]
    if len(args) == 1 and set(kwargs) == {"val"}:
        return kwargs["val"]
    return None


# Library functions of str operands only that compute their answer from them and nothing else (no state, no
# file system): with constant operands their answer is a constant too (a list they return is a new one).
# (Python functions only: rules are keyed by code object; one written in C on some version, as 3.13's
# ``normpath``, is C code with unknown effects there: a graph break.)
_PURE_STRING_FUNCTIONS = tuple(
    fn for fn in (posixpath.join, posixpath.basename, posixpath.dirname, posixpath.splitext, posixpath.split,
                  posixpath.normpath, posixpath.isabs, re.match, re.fullmatch, re.search, re.sub, re.subn,
                  re.split, re.findall, re.escape)
    if isinstance(fn, types.FunctionType))


@library_rule(*_PURE_STRING_FUNCTIONS)
def _pure_string_function(function: "FunctionVariableBase", args: list[VariableBase],
                          kwargs: dict[str, VariableBase]) -> VariableBase | None:
    """``os.path.join("ckpt", name)``, ``re.findall(r"\\d+", key)`` of constant strings: folded (each ran
    natively at a graph break). Operands of other types (a callable ``repl``, a path-like object) run
    natively as before."""
    operands = [*args, *kwargs.values()]
    if not all(isinstance(a, ConstantVariable) and isinstance(a.value, (str, bytes, int)) for a in operands):
        return None
    from .callable import constant_fold

    return constant_fold(function.value, function.graph, args, kwargs, new_containers=True)


@library_rule(functools.cached_property.__get__)
def _cached_property_get(function: "FunctionVariableBase", args: list[VariableBase],
                         kwargs: dict[str, VariableBase]) -> VariableBase | None:
    """The first read of a ``functools.cached_property`` on an instance: its function inlined on the
    instance, the result stored in the instance's ``__dict__`` as the real ``__get__`` does (past the
    class's ``__setattr__``), replayed after the graph. (Later reads find it in ``__dict__``, before the
    descriptor.) Off the class, the descriptor itself."""
    from .basic import ObjectVariable
    from .attribute import store_attribute
    from .function import UserFunctionVariable

    if len(args) != 3 or kwargs:
        return None
    descriptor_var, instance, _owner = args
    descriptor = descriptor_var.get_py_value()
    if isinstance(instance, ConstantVariable) and instance.value is None:
        return descriptor_var
    if not isinstance(instance, ObjectVariable) or not isinstance(descriptor.func, types.FunctionType) \
            or descriptor.attrname is None or not isinstance(getattr(instance.value, "__dict__", None), dict):
        return None
    func = UserFunctionVariable(descriptor.func, function.graph, ConstTracker(descriptor.func))
    value = func.call([instance], {})
    store_attribute(instance, descriptor.attrname, value, through_object=True)
    return value

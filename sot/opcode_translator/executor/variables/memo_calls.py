"""Calls of ``functools.lru_cache`` / ``functools.cache`` wrappers with constant arguments.

A memoised helper (``@lru_cache def causal_mask(n)``, ``@cache def get_config(name)``) is a C object whose call
cannot be inlined without losing what makes it a memo (one shared result per key), so a call of it used to be
a graph break at every call. When every argument is a built-in immutable constant (numbers, strings, bytes,
None, tuples of those: hashing and comparing them runs no user code), the call is instead answered during
translation by the real wrapper, and its result is a value *reached by calling the wrapper again*
(`MemoCallTracker`): the guard re-asks ``wrapper(*args)`` and checks what the result was checked for (a tensor's
shape and dtype, a number's value, a list's items), and the generated code loads the result by the same call, so a
tensor held by the cache reaches the program as an input, like any eager tensor held by Python state.

Why this is the memo's own behaviour: on a hit the wrapper only looks the key up in its table (no user code
runs), so re-asking it in the guard and in the generated code is cheap and changes nothing but its hit count.
After ``cache_clear()`` or an eviction (``maxsize``), the guard's call is the miss eager's call would have been:
the helper runs once, its new result is what the guard checks and what the generated code then loads (a hit), so
results always equal eager's. Only the cache statistics differ (``cache_info().hits`` counts the guard's and the
translation's look-ups too), and a miss's side effects happen when the guard or the translation asks, before the
rest of the frame: acceptable for a memo, whose callers cannot rely on when, or whether, the helper runs.

Other arguments (tensors, lists: unhashable ones make eager raise TypeError) keep the call native, as before.
"""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from ....errors import BreakGraphError
from ..tracker import Tracker
from .base import VariableBase, VariableFactory
from .basic import ConstantVariable

if TYPE_CHECKING:
    from ...codegen import CodeGen
    from ..guard import GuardBuilder
    from .basic import ObjectVariable

# ``functools._lru_cache_wrapper`` is the C type (the pure-Python fallback is a plain function, inlined anyway).
MEMO_WRAPPER_TYPES: tuple[type, ...] = (functools._lru_cache_wrapper,)  # type: ignore[attr-defined]

# Keys whose hash and equality are the interpreter's own: looking them up in the memo runs no user code.
_KEY_SCALAR_TYPES = frozenset({int, float, complex, bool, str, bytes, type(None)})


def is_builtin_key(value: Any) -> bool:
    """True for a built-in immutable constant (or a tuple of them): hashable without user code."""
    if type(value) is tuple:
        return all(is_builtin_key(item) for item in value)
    return type(value) in _KEY_SCALAR_TYPES


class MemoCallTracker(Tracker):
    """``wrapper(*args, **kwargs)`` of a memo wrapper with constant arguments: re-asked by the guard and by
    the generated code (a table look-up on a hit, see the module docstring)."""

    def __init__(self, wrapper: VariableBase, args: tuple[Any, ...], kwargs: tuple[tuple[str, Any], ...]) -> None:
        self.inputs = (wrapper,)
        self.wrapper = wrapper
        self.args = args
        self.kwargs = kwargs

    def guard_expr(self, builder: "GuardBuilder") -> str:
        arguments = [builder.constant(arg) for arg in self.args]
        arguments += [f"{name}={builder.constant(value)}" for name, value in self.kwargs]
        return f"{builder.expr_of(self.wrapper)}({', '.join(arguments)})"

    def gen_load(self, codegen: "CodeGen") -> None:
        codegen.push_callable(lambda: codegen.reconstruct(self.wrapper))
        for value in [*self.args, *(value for _, value in self.kwargs)]:
            codegen.load_const(value)
        codegen.call(len(self.args) + len(self.kwargs), tuple(name for name, _ in self.kwargs))

    def describe(self) -> str:
        arguments = [repr(arg) for arg in self.args] + [f"{name}={value!r}" for name, value in self.kwargs]
        return f"{self.wrapper.tracker.describe()}({', '.join(arguments)})"


def call_memo_wrapper(var: "ObjectVariable", args: list[VariableBase],
                      kwargs: dict[str, VariableBase]) -> VariableBase:
    """Answer a call of a memo wrapper now (see the module docstring), or break the graph when an argument is
    not a built-in constant (the call then runs natively, raising eager's TypeError for an unhashable one)."""
    name = getattr(var.value, "__qualname__", None) or type(var.value).__name__
    operands = [*args, *kwargs.values()]
    if not var.tracker.is_traceable() or not all(isinstance(a, ConstantVariable) for a in operands):
        raise BreakGraphError(f"call of memoised {name} with non-constant arguments runs natively")
    values = [a.get_py_value() for a in args]
    kw_values = {key: a.get_py_value() for key, a in kwargs.items()}
    if not all(is_builtin_key(v) for v in [*values, *kw_values.values()]):
        raise BreakGraphError(f"call of memoised {name} with arguments of user types runs natively")
    graph = var.graph
    graph.add_guard(var)  # the wrapper's identity: its table and its helper
    for operand in operands:
        graph.add_guard(operand)  # (a symbolic number, a dynamic dim, is pinned to its value: one key)
    result = graph.run_user_python(var.value, values, kw_values)
    tracker = MemoCallTracker(var, tuple(values), tuple(kw_values.items()))
    return VariableFactory.from_value(result, graph, tracker)

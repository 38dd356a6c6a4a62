"""Calls: ``CALL`` (3.11+, keyword names from ``KW_NAMES`` on 3.11/3.12), ``CALL_KW`` (3.13),
``CALL_FUNCTION``/``CALL_FUNCTION_KW``/``CALL_METHOD`` (3.10) and ``CALL_FUNCTION_EX``.

A callable pushed for a call comes with a NULL, or a method with its ``self``: below it before 3.13, above
it from 3.13 (see `pyversion`). `_pop_callee` reads both layouts the same way: of the two slots, a NULL is
ignored, and when neither is NULL the lower one is the function and the upper one its first argument."""
from __future__ import annotations

import dis

from ....errors import FallbackError, UserCodeError
from ... import pyversion
from ..opcode_executor import OpcodeExecutor, handles
from ..variables.base import NullVariable, VariableBase
from ..variables.container import DictVariable


@handles("KW_NAMES")
def kw_names(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    executor.kw_names = tuple(executor.code.co_consts[instr.arg])


def _do_call(executor: OpcodeExecutor, fn: VariableBase, args: list[VariableBase],
             kwargs: dict[str, VariableBase]) -> None:
    # What runs depends on which callable this is: a function passed as an argument, a method read through
    # an instance (``m.act.__func__``) or a global must be the same one for the entry to apply.
    executor.graph.add_guard(fn)
    result = fn.call(args, kwargs)
    executor.push(result)


def _pop_callee(executor: OpcodeExecutor) -> tuple[VariableBase, list[VariableBase]]:
    """Pop the two slots under a call's arguments: (the function, the arguments to put first)."""
    upper = executor.pop()
    lower = executor.pop()
    if isinstance(lower, NullVariable):
        return upper, []
    if isinstance(upper, NullVariable):
        return lower, []
    # [method, self] as left by a method load (or [function, argument] for a 3.11 comprehension call)
    return lower, [upper]


def _call_with_names(executor: OpcodeExecutor, argc: int, names: tuple[str, ...], has_null_slot: bool) -> None:
    args = executor.pop_n(argc)
    kwargs = dict(zip(names, args[len(args) - len(names):])) if names else {}
    positional = args[: len(args) - len(names)]
    if has_null_slot:
        callee, first = _pop_callee(executor)
        positional = first + positional
    else:
        callee = executor.pop()
    _do_call(executor, callee, positional, kwargs)


@handles("CALL")
def call(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    names = executor.kw_names
    executor.kw_names = ()
    _call_with_names(executor, instr.arg, names, has_null_slot=True)


@handles("CALL_KW")
def call_kw(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    """3.13: the keyword names are a constant tuple on top of the stack."""
    names = tuple(executor.pop().get_py_value())
    _call_with_names(executor, instr.arg, names, has_null_slot=True)


@handles("CALL_FUNCTION")
def call_function(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    """3.10: ``callable, args...``."""
    _call_with_names(executor, instr.arg, (), has_null_slot=False)


@handles("CALL_FUNCTION_KW")
def call_function_kw(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    """3.10: ``callable, args..., names``."""
    names = tuple(executor.pop().get_py_value())
    _call_with_names(executor, instr.arg, names, has_null_slot=False)


@handles("CALL_METHOD")
def call_method(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    """3.10: after ``LOAD_METHOD``: ``NULL, callable, args...`` or ``method, self, args...``."""
    _call_with_names(executor, instr.arg, (), has_null_slot=True)


@handles("CALL_FUNCTION_EX")
def call_function_ex(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    kwargs_var = executor.pop() if instr.arg & 1 else None
    args_var = executor.pop()
    if pyversion.CALL_HAS_NULL_SLOT:
        callee, first = _pop_callee(executor)
        if first:
            raise FallbackError("CALL_FUNCTION_EX on a method with its self is not supported yet")
    else:
        callee = executor.pop()
    kwargs: dict[str, VariableBase] = {}
    if kwargs_var is not None:
        if not isinstance(kwargs_var, DictVariable):
            raise FallbackError("** arguments that are not a dict are not supported yet")
        if not all(isinstance(key, str) for key in kwargs_var.items):
            # (checked by the call, for any callee, before it runs: ``f(**{1: 2})``)
            error = TypeError("keywords must be strings")
            raise UserCodeError(f"user code raised TypeError: {error}", original=error)
        kwargs = dict(kwargs_var.items)
    _do_call(executor, callee, args_var.unpack(), kwargs)

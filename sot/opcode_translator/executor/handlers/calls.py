"""Calls: ``KW_NAMES`` + ``CALL`` (3.11) and ``CALL_FUNCTION_EX``."""
from __future__ import annotations

import dis

from ....errors import FallbackError
from ..opcode_executor import OpcodeExecutor, handles
from ..variables.base import NullVariable, VariableBase
from ..variables.container import DictVariable


@handles("KW_NAMES")
def kw_names(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    executor.kw_names = tuple(executor.code.co_consts[instr.arg])


def _do_call(executor: OpcodeExecutor, fn: VariableBase, args: list[VariableBase],
             kwargs: dict[str, VariableBase]) -> None:
    result = fn.call(args, kwargs)
    executor.push(result)


@handles("CALL")
def call(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    argc = instr.arg
    args = executor.pop_n(argc)
    names = executor.kw_names
    executor.kw_names = ()
    kwargs = dict(zip(names, args[len(args) - len(names):])) if names else {}
    positional = args[: len(args) - len(names)]
    callee = executor.pop()
    below = executor.pop()
    if not isinstance(below, NullVariable):
        # [method, self, args...] as left by LOAD_METHOD/LOAD_ATTR on a plain function
        callee, positional = below, [callee, *positional]
    _do_call(executor, callee, positional, kwargs)


@handles("CALL_FUNCTION_EX")
def call_function_ex(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    kwargs_var = executor.pop() if instr.arg & 1 else None
    args_var = executor.pop()
    callee = executor.pop()
    below = executor.pop()
    if not isinstance(below, NullVariable):
        raise FallbackError("CALL_FUNCTION_EX without a NULL below the callable")
    kwargs: dict[str, VariableBase] = {}
    if kwargs_var is not None:
        if not isinstance(kwargs_var, DictVariable):
            raise FallbackError("** arguments that are not a dict are not supported yet")
        kwargs = dict(kwargs_var.items)
    _do_call(executor, callee, args_var.unpack(), kwargs)

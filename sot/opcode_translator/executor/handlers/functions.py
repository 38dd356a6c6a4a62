"""``MAKE_FUNCTION``: nested functions, lambdas and comprehensions created during simulation."""
from __future__ import annotations

import dis

from ....errors import FallbackError
from ..opcode_executor import OpcodeExecutor, handles
from ..variables.container import DictVariable, TupleVariable
from ..variables.function import CellVariable, NestedFunctionVariable

MAKE_FUNCTION_DEFAULTS = 0x01
MAKE_FUNCTION_KWDEFAULTS = 0x02
MAKE_FUNCTION_ANNOTATIONS = 0x04
MAKE_FUNCTION_CLOSURE = 0x08


@handles("MAKE_FUNCTION")
def make_function(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    code = executor.pop().get_py_value()
    flags = instr.arg
    closure: dict[str, CellVariable] = {}
    if flags & MAKE_FUNCTION_CLOSURE:
        cells = executor.pop()
        assert isinstance(cells, TupleVariable)
        for name, cell in zip(code.co_freevars, cells.items):
            if not isinstance(cell, CellVariable):
                raise FallbackError("a closure built from something other than cells")
            closure[name] = cell
    if flags & MAKE_FUNCTION_ANNOTATIONS:
        executor.pop()  # annotations do not change what the function computes
    kwdefaults = {}
    if flags & MAKE_FUNCTION_KWDEFAULTS:
        kw = executor.pop()
        assert isinstance(kw, DictVariable)
        kwdefaults = dict(kw.items)
    defaults: tuple = ()
    if flags & MAKE_FUNCTION_DEFAULTS:
        defaults = tuple(executor.pop().unpack())
    qualname = getattr(code, "co_qualname", code.co_name)
    executor.push(NestedFunctionVariable(code, qualname, executor.resolver, defaults, kwdefaults, closure,
                                         executor.graph))


@handles("BEFORE_WITH")
def before_with(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    from ..variables.context import enter_context

    exit_var, entered = enter_context(executor.pop())
    executor.push(exit_var)
    executor.push(entered)

"""``MAKE_FUNCTION`` (and 3.13's ``SET_FUNCTION_ATTRIBUTE``): nested functions, lambdas and comprehensions
created during simulation."""
from __future__ import annotations

import dis

from ....errors import FallbackError
from ... import pyversion
from ..opcode_executor import OpcodeExecutor, Yield, handles
from ..tracker import DummyTracker
from ..variables.base import VariableBase
from ..variables.basic import ConstantVariable
from ..variables.container import DictVariable, TupleVariable
from ..variables.function import CellVariable, NestedFunctionVariable

MAKE_FUNCTION_DEFAULTS = pyversion.FUNCTION_DEFAULTS
MAKE_FUNCTION_KWDEFAULTS = pyversion.FUNCTION_KWDEFAULTS
MAKE_FUNCTION_ANNOTATIONS = pyversion.FUNCTION_ANNOTATIONS
MAKE_FUNCTION_CLOSURE = pyversion.FUNCTION_CLOSURE


def _set_function_attribute(fn: NestedFunctionVariable, flag: int, value: VariableBase) -> None:
    """Give a function made during simulation its closure, annotations, keyword defaults or defaults."""
    if flag == MAKE_FUNCTION_CLOSURE:
        assert isinstance(value, TupleVariable)
        closure: dict[str, CellVariable] = {}
        for name, cell in zip(fn.code.co_freevars, value.items):
            if not isinstance(cell, CellVariable):
                raise FallbackError("a closure built from something other than cells")
            closure[name] = cell
        fn._closure = closure
    elif flag == MAKE_FUNCTION_ANNOTATIONS:
        pass  # annotations do not change what the function computes
    elif flag == MAKE_FUNCTION_KWDEFAULTS:
        assert isinstance(value, DictVariable)
        fn._kwdefaults = dict(value.items)
    elif flag == MAKE_FUNCTION_DEFAULTS:
        fn._defaults = tuple(value.unpack())
    else:
        raise FallbackError(f"function attribute flag {flag} is not supported yet")
    fn.tracker = DummyTracker(tuple(fn._defaults) + tuple(fn._kwdefaults.values()))


@handles("MAKE_FUNCTION")
def make_function(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    qualname = None
    if pyversion.MAKE_FUNCTION_POPS_QUALNAME:
        qualname = executor.pop().get_py_value()
    code = executor.pop().get_py_value()
    if qualname is None:
        qualname = getattr(code, "co_qualname", code.co_name)
    fn = NestedFunctionVariable(code, qualname, executor.resolver, (), {}, {}, executor.graph)
    if pyversion.MAKE_FUNCTION_HAS_FLAGS:
        # The stack holds, bottom to top: defaults, kwdefaults, annotations, closure (those flagged).
        for flag in (MAKE_FUNCTION_CLOSURE, MAKE_FUNCTION_ANNOTATIONS, MAKE_FUNCTION_KWDEFAULTS,
                     MAKE_FUNCTION_DEFAULTS):
            if instr.arg & flag:
                _set_function_attribute(fn, flag, executor.pop())
    executor.push(fn)


@handles("SET_FUNCTION_ATTRIBUTE")
def set_function_attribute(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    fn = executor.pop()
    value = executor.pop()
    if not isinstance(fn, NestedFunctionVariable):
        raise FallbackError(f"SET_FUNCTION_ATTRIBUTE on {fn!r}")
    _set_function_attribute(fn, instr.arg, value)
    executor.push(fn)


@handles("BEFORE_WITH")
def before_with(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    from ..variables.context import enter_context

    exit_var, entered = enter_context(executor.pop())
    executor.push(exit_var)
    executor.push(entered)


@handles("SETUP_WITH")
def setup_with(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    """3.10: ``BEFORE_WITH`` plus a try block whose handler calls ``__exit__`` (kept above ``__exit__``)."""
    before_with(executor, instr)
    executor.blocks.append((instr.argval, len(executor.stack) - 1))


@handles("RETURN_GENERATOR")
def return_generator(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    """The start of a simulated generator: the real one would return itself here; the ``POP_TOP`` that
    follows pops this placeholder."""
    executor.push(ConstantVariable(None, executor.graph, DummyTracker()))


@handles("YIELD_VALUE")
def yield_value(executor: OpcodeExecutor, instr: dis.Instruction) -> Yield:
    return Yield(executor.pop())


@handles("GET_YIELD_FROM_ITER")
def get_yield_from_iter(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    from ..variables.iterator import iterate

    executor.push(iterate(executor.pop()))

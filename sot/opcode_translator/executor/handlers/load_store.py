"""Loads and stores: locals, constants, globals, builtins, attributes, closure cells."""
from __future__ import annotations

import dis

from ....errors import FallbackError
from ..opcode_executor import OpcodeExecutor, handles
from ..tracker import ConstTracker, DummyTracker
from ..variables.base import NullVariable, VariableFactory
from ..variables.function import CellVariable


@handles("LOAD_FAST", "LOAD_FAST_CHECK")
def load_fast(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    var = executor.locals.get(instr.argval)
    if var is None:
        raise FallbackError(f"local variable {instr.argval!r} is read before assignment")
    executor.push(var)


@handles("STORE_FAST")
def store_fast(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    executor.locals[instr.argval] = executor.pop()


@handles("DELETE_FAST")
def delete_fast(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    if executor.locals.pop(instr.argval, None) is None:
        raise FallbackError(f"local variable {instr.argval!r} is deleted before assignment")


@handles("LOAD_CONST")
def load_const(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    executor.push(VariableFactory.from_value(instr.argval, executor.graph, ConstTracker(instr.argval)))


@handles("LOAD_GLOBAL")
def load_global(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    if instr.arg & 1:  # 3.11: the low bit asks for a NULL below the global, for a following CALL
        executor.push(NullVariable(executor.graph))
    var = executor.resolver.load(instr.argval, executor.graph)
    executor.graph.add_guard(var)
    executor.push(var)


@handles("LOAD_ATTR")
def load_attr(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    obj = executor.pop()
    var = obj.getattr(instr.argval)
    if var.tracker.is_traceable():
        executor.graph.add_guard(var)
    executor.push(var)


@handles("LOAD_METHOD")
def load_method(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    # Simulated as NULL + bound attribute; CALL then sees an ordinary callable.
    obj = executor.pop()
    var = obj.getattr(instr.argval)
    if var.tracker.is_traceable():
        executor.graph.add_guard(var)
    executor.push(NullVariable(executor.graph))
    executor.push(var)


@handles("MAKE_CELL")
def make_cell(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    name = instr.argval
    executor.cells[name] = CellVariable(executor.locals.pop(name, None), executor.graph, DummyTracker())


@handles("COPY_FREE_VARS")
def copy_free_vars(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    """The executor was created with its free-variable cells already in place."""


@handles("LOAD_DEREF", "LOAD_CLASSDEREF")
def load_deref(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    var = executor.cells[instr.argval].load(instr.argval)
    if var.tracker.is_traceable():
        executor.graph.add_guard(var)
    executor.push(var)


@handles("STORE_DEREF")
def store_deref(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    executor.cells[instr.argval].store(instr.argval, executor.pop())


@handles("DELETE_DEREF")
def delete_deref(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    cell = executor.cells[instr.argval]
    cell.load(instr.argval)  # deleting an empty cell is the user's NameError
    cell.store(instr.argval, None)


@handles("LOAD_CLOSURE")
def load_closure(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    executor.push(executor.cells[instr.argval])


@handles("STORE_ATTR")
def store_attr(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    obj = executor.pop()
    value = executor.pop()
    obj.setattr(instr.argval, value)


@handles("DELETE_ATTR")
def delete_attr(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    executor.pop().setattr(instr.argval, None)


def _top_frame_globals(executor: OpcodeExecutor) -> None:
    if executor.resolver.globals_var is not None:
        raise FallbackError("assigning a global of another module from an inlined function is not supported yet")


@handles("STORE_GLOBAL")
def store_global(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    _top_frame_globals(executor)
    executor.graph.side_effects.store_global(instr.argval, executor.pop())


@handles("DELETE_GLOBAL")
def delete_global(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    _top_frame_globals(executor)
    executor.resolver.load(instr.argval, executor.graph)  # deleting an unknown global is the user's NameError
    executor.graph.side_effects.store_global(instr.argval, None)


@handles("STORE_SUBSCR")
def store_subscr(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    key = executor.pop()
    container = executor.pop()
    value = executor.pop()
    container.setitem(key, value)


@handles("DELETE_SUBSCR")
def delete_subscr(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    key = executor.pop()
    executor.pop().setitem(key, None)

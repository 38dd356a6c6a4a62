"""Loads and stores: locals, constants, globals, builtins, attributes, closure cells."""
from __future__ import annotations

import dis

from ....errors import FallbackError
from ..opcode_executor import OpcodeExecutor, handles
from ..tracker import BuiltinTracker, ClosureTracker, ConstTracker, GlobalTracker
from ..variables.base import NullVariable, VariableFactory


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
    name = instr.argval
    if instr.arg & 1:  # 3.11: the low bit asks for a NULL below the global, for a following CALL
        executor.push(NullVariable(executor.graph))
    frame = executor.frame
    if name in frame.globals:
        var = VariableFactory.from_value(frame.globals[name], executor.graph, GlobalTracker(name))
    elif name in frame.builtins:
        value = frame.builtins[name]
        var = VariableFactory.from_value(value, executor.graph, BuiltinTracker(name, value))
    else:
        raise FallbackError(f"name {name!r} is not defined")
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
    executor.cells[name] = executor.locals.pop(name, None)


@handles("COPY_FREE_VARS")
def copy_free_vars(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    closure = executor.frame.closure or ()
    for index, name in enumerate(executor.code.co_freevars):
        try:
            value = closure[index].cell_contents
        except ValueError:
            executor.cells[name] = None  # an empty cell: reading it fails like in eager code
            continue
        executor.cells[name] = VariableFactory.from_value(value, executor.graph, ClosureTracker(index, name))


@handles("LOAD_DEREF")
def load_deref(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    var = executor.cells.get(instr.argval)
    if var is None:
        raise FallbackError(f"closure variable {instr.argval!r} is read before assignment")
    if var.tracker.is_traceable():
        executor.graph.add_guard(var)
    executor.push(var)


@handles("STORE_DEREF")
def store_deref(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    name = instr.argval
    if name in executor.code.co_freevars:
        raise FallbackError(f"assigning closure variable {name!r} of an enclosing function is a side effect "
                            "not supported yet")
    executor.cells[name] = executor.pop()

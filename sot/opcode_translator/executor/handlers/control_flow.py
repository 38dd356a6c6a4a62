"""Jumps and returns. A jump on a Python value follows the branch taken (the value is guarded); a jump on
a tensor needs a graph break."""
from __future__ import annotations

import dis

from ..opcode_executor import OpcodeExecutor, Return, handles
from ..variables.base import VariableBase
from ..variables.symbolic_int import SymbolicIntVariable


@handles("RETURN_VALUE")
def return_value(executor: OpcodeExecutor, instr: dis.Instruction) -> Return:
    return Return(executor.pop())


@handles("RETURN_CONST")
def return_const(executor: OpcodeExecutor, instr: dis.Instruction) -> Return:
    """3.12+: ``LOAD_CONST`` + ``RETURN_VALUE``."""
    from ..tracker import ConstTracker
    from ..variables.base import VariableFactory

    return Return(VariableFactory.from_value(instr.argval, executor.graph, ConstTracker(instr.argval)))


@handles("JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "JUMP_ABSOLUTE", "JUMP")
def jump(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    executor.jump_to(instr.argval)


def _truth(executor: OpcodeExecutor, value: VariableBase) -> bool:
    truth = value.bool()
    # (a symbolic int's truth is guarded by its expression: its value decided nothing)
    executor.graph.add_guard(value, data_only=isinstance(value, SymbolicIntVariable) and value.truth_is_symbolic)
    return truth


@handles("POP_JUMP_FORWARD_IF_TRUE", "POP_JUMP_BACKWARD_IF_TRUE", "POP_JUMP_IF_TRUE")
def pop_jump_if_true(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    if _truth(executor, executor.pop()):
        executor.jump_to(instr.argval)


@handles("POP_JUMP_FORWARD_IF_FALSE", "POP_JUMP_BACKWARD_IF_FALSE", "POP_JUMP_IF_FALSE")
def pop_jump_if_false(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    if not _truth(executor, executor.pop()):
        executor.jump_to(instr.argval)


def _is_none(executor: OpcodeExecutor, value: VariableBase) -> bool:
    from ..variables.basic import ConstantVariable, ObjectVariable, TensorVariable

    if isinstance(value, TensorVariable):
        return False
    executor.graph.add_guard(value)  # (its kind: the same local may be None at another call)
    if not isinstance(value, (ConstantVariable, ObjectVariable)):
        return False  # a container, function... is never None (and its items' values may be unknown)
    return value.value is None  # (not a use of the whole value: its guarded type or value decide)


@handles("POP_JUMP_FORWARD_IF_NONE", "POP_JUMP_BACKWARD_IF_NONE", "POP_JUMP_IF_NONE")
def pop_jump_if_none(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    if _is_none(executor, executor.pop()):
        executor.jump_to(instr.argval)


@handles("POP_JUMP_FORWARD_IF_NOT_NONE", "POP_JUMP_BACKWARD_IF_NOT_NONE", "POP_JUMP_IF_NOT_NONE")
def pop_jump_if_not_none(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    if not _is_none(executor, executor.pop()):
        executor.jump_to(instr.argval)


@handles("JUMP_IF_TRUE_OR_POP")
def jump_if_true_or_pop(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    if _truth(executor, executor.peek()):
        executor.jump_to(instr.argval)
    else:
        executor.pop()


@handles("JUMP_IF_FALSE_OR_POP")
def jump_if_false_or_pop(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    if not _truth(executor, executor.peek()):
        executor.jump_to(instr.argval)
    else:
        executor.pop()

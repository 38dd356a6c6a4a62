"""Stack shuffling and no-op instructions."""
from __future__ import annotations

import dis

from ..opcode_executor import OpcodeExecutor, handles
from ..variables.base import NullVariable


@handles("NOP", "RESUME", "PRECALL", "CACHE", "EXTENDED_ARG")
def nop(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    """Nothing to simulate: these only matter to the real interpreter."""


@handles("POP_TOP")
def pop_top(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    executor.pop()


@handles("PUSH_NULL")
def push_null(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    executor.push(NullVariable(executor.graph))


@handles("COPY")
def copy(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    executor.push(executor.peek(instr.arg))


@handles("SWAP")
def swap(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    stack = executor.stack
    stack[-1], stack[-instr.arg] = stack[-instr.arg], stack[-1]


# -- 3.10's spellings (3.11 replaced them with COPY and SWAP) ------------------------------------------------
def _rotate(executor: OpcodeExecutor, n: int) -> None:
    """Lift the top of the stack ``n - 1`` positions down."""
    stack = executor.stack
    top = stack.pop()
    stack.insert(len(stack) - (n - 1), top)


@handles("ROT_TWO")
def rot_two(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    _rotate(executor, 2)


@handles("ROT_THREE")
def rot_three(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    _rotate(executor, 3)


@handles("ROT_FOUR")
def rot_four(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    _rotate(executor, 4)


@handles("ROT_N")
def rot_n(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    _rotate(executor, instr.arg)


@handles("DUP_TOP")
def dup_top(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    executor.push(executor.peek())


@handles("DUP_TOP_TWO")
def dup_top_two(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    executor.stack.extend(executor.stack[-2:])

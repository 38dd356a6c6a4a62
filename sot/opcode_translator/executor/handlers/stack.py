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

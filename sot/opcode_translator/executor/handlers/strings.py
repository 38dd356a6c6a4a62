"""f-strings: ``FORMAT_VALUE`` (3.10-3.12), its 3.13 split into ``CONVERT_VALUE``, ``FORMAT_SIMPLE`` and
``FORMAT_WITH_SPEC``, and ``BUILD_STRING``. Python values are formatted during simulation (guarded); a
tensor's text depends on its data, so formatting one breaks the graph and runs natively."""
from __future__ import annotations

import dis
from typing import Any, Callable

from ....errors import BreakGraphError
from ..opcode_executor import OpcodeExecutor, handles
from ..variables.base import VariableBase
from ..variables.basic import TensorVariable
from ..variables.callable import constant_fold

# FORMAT_VALUE's conversion bits (3.10-3.12) and CONVERT_VALUE's argument (3.13) use the same numbers.
CONVERSIONS: dict[int, Callable[[Any], str]] = {1: str, 2: repr, 3: ascii}
FORMAT_VALUE_HAS_SPEC = 0x04


def _fold(executor: OpcodeExecutor, fn: Callable[..., Any], operands: list[VariableBase]) -> VariableBase:
    if any(isinstance(var, TensorVariable) for var in operands):
        raise BreakGraphError("formatting a tensor as text reads its data: runs natively")
    folded = constant_fold(fn, executor.graph, operands, {})
    assert folded is not None
    return folded


@handles("FORMAT_VALUE")
def format_value(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    spec = executor.pop() if instr.arg & FORMAT_VALUE_HAS_SPEC else None
    value = executor.pop()
    conversion = CONVERSIONS.get(instr.arg & 0x03)

    def render(obj: Any, *format_spec: str) -> str:
        return format(conversion(obj) if conversion is not None else obj, *format_spec)

    executor.push(_fold(executor, render, [value] if spec is None else [value, spec]))


@handles("CONVERT_VALUE")
def convert_value(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    executor.push(_fold(executor, CONVERSIONS[instr.arg], [executor.pop()]))


@handles("FORMAT_SIMPLE")
def format_simple(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    executor.push(_fold(executor, format, [executor.pop()]))


@handles("FORMAT_WITH_SPEC")
def format_with_spec(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    spec = executor.pop()
    value = executor.pop()
    executor.push(_fold(executor, format, [value, spec]))


def _concat(*parts: str) -> str:
    return "".join(parts)


@handles("BUILD_STRING")
def build_string(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    executor.push(_fold(executor, _concat, executor.pop_n(instr.arg)))

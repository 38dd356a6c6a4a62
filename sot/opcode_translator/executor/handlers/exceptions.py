"""Raising. An exception raised by user code during simulation ends the simulation of the frame: the frame
then runs eagerly and raises it for real, with the user's own traceback (never an internal error)."""
from __future__ import annotations

import dis

from ....errors import UserCodeError
from ..opcode_executor import OpcodeExecutor, handles
from ..tracker import ConstTracker
from ..variables.base import VariableFactory


@handles("LOAD_ASSERTION_ERROR")
def load_assertion_error(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    executor.push(VariableFactory.from_value(AssertionError, executor.graph, ConstTracker(AssertionError)))


@handles("RAISE_VARARGS")
def raise_varargs(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    values = executor.pop_n(instr.arg)
    what = "a re-raise" if not values else repr(values[0])
    raise UserCodeError(f"user code raised {what}")

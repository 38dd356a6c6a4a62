"""``GET_ITER`` and ``FOR_ITER``: loops over Python values are unrolled during simulation."""
from __future__ import annotations

import dis

from ....errors import FallbackError
from ..opcode_executor import OpcodeExecutor, handles
from ..variables.iterator import IteratorVariable, iterate


@handles("GET_ITER")
def get_iter(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    executor.push(iterate(executor.pop()))


@handles("FOR_ITER")
def for_iter(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    iterator = executor.peek()
    if not isinstance(iterator, IteratorVariable):
        # e.g. the real iterator a natively-run comprehension receives: stepping it would consume it
        raise FallbackError(f"stepping {iterator!r} is not supported (only iterators made during simulation)")
    item = iterator.next()
    if item is None:
        executor.pop()
        executor.jump_to(instr.argval)
    else:
        executor.push(item)

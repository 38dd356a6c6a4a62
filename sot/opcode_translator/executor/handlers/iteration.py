"""``GET_ITER`` and ``FOR_ITER``: loops over Python values are unrolled during simulation."""
from __future__ import annotations

import dis

from ....errors import FallbackError
from ... import pyversion
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
    if executor.parent is None and iterator.loop_offset is None:
        iterator.loop_offset = instr.offset  # a break in this loop's body makes the body a function
    item = iterator.next()
    if item is None:
        executor.pop()
        executor.jump_to(instr.argval)
        executor.pc += pyversion.FOR_ITER_EXIT_SKIP  # 3.12+: past the END_FOR (and POP_TOP) at the target
    else:
        executor.push(item)


@handles("END_FOR")
def end_for(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    """3.12+: the end of a ``for`` loop; an exhausted ``FOR_ITER`` jumps past it, so it only pops."""
    executor.pop_n(pyversion.END_FOR_POPS)

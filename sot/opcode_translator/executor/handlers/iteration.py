"""``GET_ITER`` and ``FOR_ITER``: loops over Python values are unrolled during simulation.

A ``for`` loop over an object whose iteration the simulation cannot model (a ``paddle.io.DataLoader``, an
``enumerate`` or generator object from outside, a numpy array: real iterators, stepped by C or library
code) runs natively: its ``GET_ITER`` raises `NativeLoopBreak`, and the translation runs the loop natively
around a translated loop body function (`transform._translate_loop`), as for a break inside a body.
"""
from __future__ import annotations

import dis

from ....errors import BreakGraphError, FallbackError
from ... import pyversion
from ..opcode_executor import OpcodeExecutor, handles
from ..variables.basic import ObjectVariable
from ..variables.iterator import IteratorVariable, iterate


class NativeLoopBreak(BreakGraphError):
    """The ``GET_ITER`` of the translated frame's ``for`` loop at ``for_iter_offset`` makes an iterator the
    simulation cannot step: the loop runs natively, from the iterator made by real code at its head."""

    def __init__(self, cause: BreakGraphError, for_iter_offset: int) -> None:
        super().__init__(f"the for loop runs natively, its body translated ({cause.reason})", cause.location)
        self.for_iter_offset = for_iter_offset


@handles("GET_ITER")
def get_iter(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    iterable = executor.peek()
    graph = executor.graph
    checkpoint = graph.side_effects.checkpoint(), len(graph.statements), len(graph.inputs)
    try:
        iterator = iterate(iterable)
    except BreakGraphError as exc:
        loop = pyversion.loop_begun_by(executor.code, instr.offset) if executor.parent is None else None
        if loop is None:
            raise  # (an iteration outside a loop: the instruction runs natively)
        for_iter_offset, entry = loop
        if executor.stop_at != entry.setup:
            raise NativeLoopBreak(exc, for_iter_offset) from None
        # Simulated again up to the head of that loop (a 3.12+ inlined comprehension's, past its GET_ITER):
        # what the failed attempt recorded is dropped, and the iterable stands for its iterator, which the
        # generated code makes natively at the loop head.
        graph.side_effects.rollback(checkpoint[0])
        graph.truncate(*checkpoint[1:])
        return
    executor.pop()
    executor.push(iterator)
    if _loop_temporary(executor, iterator):
        executor.loop_generators.append(iterator)


def _loop_temporary(executor: OpcodeExecutor, iterator: IteratorVariable) -> bool:
    """A generator this ``GET_ITER`` hands to the ``FOR_ITER`` after it, made by the call just before (``for v
    in gen(t)``) or by this instruction (an ``__iter__`` generator method): only the loop can refer to it."""
    made_by = iterator.made_by
    return (iterator.generator is not None and made_by is not None and made_by[0] is executor
            and made_by[1] in (executor.pc - 1, executor.pc) and executor.pc < len(executor.instructions)
            and executor.instructions[executor.pc].opname == "FOR_ITER")


@handles("FOR_ITER")
def for_iter(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    iterator = executor.peek()
    if not isinstance(iterator, IteratorVariable):
        # A real iterator (the one a 3.10/3.11 comprehension's function receives): stepping it during simulation
        # would consume it. In an inlined call, that call runs natively; the translated frame cannot break at
        # its own FOR_ITER (its loop would continue in a resume function per item).
        if executor.parent is not None and isinstance(iterator, ObjectVariable):
            raise BreakGraphError(f"stepping a {type(iterator.value).__name__} object runs natively")
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

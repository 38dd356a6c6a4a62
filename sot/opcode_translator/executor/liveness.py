"""Which local variables are read after a given instruction before being written again.

A resume function receives only those: passing a dead local would keep it alive for nothing, and it may
not even be reconstructible in generated code. A classic backward dataflow over the instruction graph,
with exception-table edges.
"""
from __future__ import annotations

import dis
import functools
import types

_USES = {"LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_DEREF", "LOAD_CLOSURE", "DELETE_FAST", "LOAD_FAST_AND_CLEAR"}
_DEFS = {"STORE_FAST", "STORE_DEREF"}
_KILLS = {"DELETE_FAST", "DELETE_DEREF"}
_NO_FALLTHROUGH = {"RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE", "JUMP_FORWARD", "JUMP_BACKWARD",
                   "JUMP_BACKWARD_NO_INTERRUPT", "JUMP_ABSOLUTE", "JUMP"}
_JUMPS = set(dis.hasjrel) | set(dis.hasjabs)


@functools.lru_cache(maxsize=256)
def live_in(code: types.CodeType) -> dict[int, frozenset[str]]:
    """For each instruction offset, the local/cell names live on entry to it."""
    instructions = list(dis.get_instructions(code))
    offsets = [instr.offset for instr in instructions]
    index_of = {offset: i for i, offset in enumerate(offsets)}
    successors: list[list[int]] = []
    handlers = _exception_targets(code)
    for i, instr in enumerate(instructions):
        succ = []
        if instr.opname not in _NO_FALLTHROUGH and i + 1 < len(instructions):
            succ.append(i + 1)
        if instr.opcode in _JUMPS and isinstance(instr.argval, int) and instr.argval in index_of:
            succ.append(index_of[instr.argval])
        for start, end, target in handlers:
            if start <= instr.offset < end and target in index_of:
                succ.append(index_of[target])
        successors.append(succ)
    live: list[frozenset[str]] = [frozenset()] * len(instructions)
    changed = True
    while changed:
        changed = False
        for i in range(len(instructions) - 1, -1, -1):
            instr = instructions[i]
            out: set[str] = set()
            for j in successors[i]:
                out |= live[j]
            name = instr.argval if isinstance(instr.argval, str) else None
            if instr.opname in _DEFS or instr.opname in _KILLS:
                out.discard(name)
            if instr.opname in _USES and name is not None:
                out.add(name)
            new = frozenset(out)
            if new != live[i]:
                live[i] = new
                changed = True
    return {offset: live[i] for i, offset in enumerate(offsets)}


def _exception_targets(code: types.CodeType) -> list[tuple[int, int, int]]:
    parse = getattr(dis, "_parse_exception_table", None)
    if parse is None:  # before 3.11 there is no exception table
        return []
    return [(entry.start, entry.end, entry.target) for entry in parse(code)]

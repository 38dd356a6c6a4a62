"""Which local variables are read after a given instruction before being written again.

A resume function receives only those: passing a dead local would keep it alive for nothing, and it may
not even be reconstructible in generated code. A classic backward dataflow over the instruction graph,
with edges to exception handlers (the exception table of 3.11+, the block stack of 3.10).
"""
from __future__ import annotations

import dis
import types

from .. import pyversion
from .code_memo import per_code
from .guard import argument_names

_USES = {"LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_DEREF", "LOAD_CLOSURE", "DELETE_FAST", "LOAD_FAST_AND_CLEAR",
         "LOAD_CLASSDEREF", "LOAD_FROM_DICT_OR_DEREF"}
_DEFS = {"STORE_FAST", "STORE_DEREF", "DELETE_FAST", "DELETE_DEREF"}  # (a delete ends the old value's life)

# 3.10's block stack: SETUP_* push a block on the normal path; at their handler the block is replaced by an
# "except handler" block (popped by POP_EXCEPT); POP_BLOCK pops.
_BLOCK_PUSH = {"SETUP_FINALLY", "SETUP_WITH", "SETUP_ASYNC_WITH"}
_BLOCK_POP = {"POP_BLOCK", "POP_EXCEPT"}
EXCEPT_HANDLER = -1  # the setup offset of a block that is a running ``except`` (not a handler target)


def _effects(instr: dis.Instruction) -> list[tuple[bool, str]]:
    """The instruction's reads (True) and writes (False) of local/cell names, in execution order."""
    name = instr.opname
    if name == "LOAD_FAST_LOAD_FAST":  # 3.13 super-instructions: the argval is a pair of names
        return [(True, instr.argval[0]), (True, instr.argval[1])]
    if name == "STORE_FAST_LOAD_FAST":
        return [(False, instr.argval[0]), (True, instr.argval[1])]
    if name == "STORE_FAST_STORE_FAST":
        return [(False, instr.argval[0]), (False, instr.argval[1])]
    if not isinstance(instr.argval, str):
        return []
    effects = []
    if name in _USES:
        effects.append((True, instr.argval))
    if name in _DEFS:
        effects.append((False, instr.argval))
    return effects


Block = tuple[int, int]  # (offset of the SETUP_* instruction or EXCEPT_HANDLER, stack level it keeps)


@per_code
def block_stacks(code: types.CodeType) -> dict[int, tuple[int, tuple[Block, ...]]]:
    """3.10: for each reachable instruction offset, the stack depth and the block stack there (innermost
    block last). Empty on 3.11+, which has no block stack."""
    if not pyversion.HAS_BLOCK_STACK:
        return {}
    instructions = list(dis.get_instructions(code))
    index_of = {instr.offset: i for i, instr in enumerate(instructions)}
    states: dict[int, tuple[int, tuple[Block, ...]]] = {}
    work: list[tuple[int, int, tuple[Block, ...]]] = [(0, 0, ())]
    while work:
        i, depth, blocks = work.pop()
        while i < len(instructions):
            instr = instructions[i]
            if instr.offset in states:
                break  # (the compiler gives a point the same state on every path)
            states[instr.offset] = (depth, blocks)
            name = instr.opname
            arg = instr.arg if instr.opcode >= dis.HAVE_ARGUMENT else None
            if instr.opcode in pyversion.JUMP_OPCODES and instr.argval in index_of:
                target_blocks = blocks
                if name in _BLOCK_PUSH:  # the handler runs with the block replaced by its own
                    target_blocks = blocks + ((EXCEPT_HANDLER, depth),)
                work.append((index_of[instr.argval], depth + dis.stack_effect(instr.opcode, arg, jump=True),
                             target_blocks))
            if name in pyversion.NO_FALLTHROUGH:
                break
            if name in _BLOCK_PUSH:
                blocks = blocks + ((instr.offset, depth),)
            elif name in _BLOCK_POP:
                blocks = blocks[:-1]
            depth += dis.stack_effect(instr.opcode, arg, jump=False)
            i += 1
    return states


def _handler_edges(code: types.CodeType) -> list[tuple[int, int, int]]:
    """``(start, end, target)``: an exception raised in [start, end) continues at target."""
    if pyversion.HAS_BLOCK_STACK:
        setup_targets = {instr.offset: instr.argval for instr in dis.get_instructions(code)
                         if instr.opname in _BLOCK_PUSH}
        edges = []
        for offset, (_, blocks) in block_stacks(code).items():
            for setup, _ in blocks:
                if setup != EXCEPT_HANDLER:
                    edges.append((offset, offset + 1, setup_targets[setup]))
        return edges
    return pyversion.exception_table(code)


def is_protected(code: types.CodeType, offset: int) -> bool:
    """Whether an exception raised by the instruction at ``offset`` is caught inside ``code`` (it is in a
    ``try``, ``with`` or ``except`` block): its handler must then see it."""
    if pyversion.HAS_BLOCK_STACK:
        return bool(block_stacks(code).get(offset, (0, ()))[1])
    return any(start <= offset < end for start, end, _ in pyversion.exception_table(code))


@per_code
def live_in(code: types.CodeType) -> dict[int, frozenset[str]]:
    """For each instruction offset, the local/cell names live on entry to it."""
    instructions = list(dis.get_instructions(code))
    offsets = [instr.offset for instr in instructions]
    index_of = {offset: i for i, offset in enumerate(offsets)}
    successors: list[list[int]] = []
    handlers = _handler_edges(code)
    for i, instr in enumerate(instructions):
        succ = []
        if instr.opname not in pyversion.NO_FALLTHROUGH and i + 1 < len(instructions):
            succ.append(i + 1)
        if instr.opcode in pyversion.JUMP_OPCODES and isinstance(instr.argval, int) and instr.argval in index_of:
            succ.append(index_of[instr.argval])
        for start, end, target in handlers:
            if start <= instr.offset < end and target in index_of:
                succ.append(index_of[target])
        successors.append(succ)
    effects = [_effects(instr) for instr in instructions]
    super_offsets = pyversion.argumentless_super_offsets(code)  # (``super()`` reads the first argument)
    for i, instr in enumerate(instructions):
        if instr.offset in super_offsets:
            effects[i].append((True, code.co_varnames[0]))
    live: list[frozenset[str]] = [frozenset()] * len(instructions)
    changed = True
    while changed:
        changed = False
        for i in range(len(instructions) - 1, -1, -1):
            out: set[str] = set()
            for j in successors[i]:
                out |= live[j]
            for is_use, name in reversed(effects[i]):
                if is_use:
                    out.add(name)
                else:
                    out.discard(name)
            new = frozenset(out)
            if new != live[i]:
                live[i] = new
                changed = True
    return {offset: live[i] for i, offset in enumerate(offsets)}


@per_code
def cells_shared_across_breaks(code: types.CodeType) -> frozenset[str]:
    """The cell variables of ``code`` that live as long as the frame: the generated code hands these very
    cells to a resume function (as its closure). Not the cells a 3.12+ inlined comprehension makes again in
    the body (``MAKE_CELL`` after the prologue): a new cell per run of that code."""
    remade = set()
    in_prologue = True
    for instr in dis.get_instructions(code):
        if instr.opname not in pyversion.PROLOGUE_OPNAMES:
            in_prologue = False
        elif instr.opname == "MAKE_CELL" and not in_prologue:
            remade.add(instr.argval)
    return frozenset(code.co_cellvars) - remade


_CLEARS = {"DELETE_FAST", "LOAD_FAST_AND_CLEAR"}  # (3.12+: an inlined comprehension clears its variable)


@per_code
def definitely_bound(code: types.CodeType) -> dict[int, frozenset[str]]:
    """For each reachable instruction offset, the fast locals bound on entry to it on *every* path from the
    function's start, whatever the inputs: the arguments, and what every path has stored since (a forward
    must-analysis).
    Native code that relies on a local being bound somewhere holds for any call when the local is in here.
    Conservative: only fast locals are tracked, and an exception handler starts with the arguments that no
    instruction ever unbinds (it may be entered from anywhere in its block)."""
    instructions = list(dis.get_instructions(code))
    index_of = {instr.offset: i for i, instr in enumerate(instructions)}
    handler_targets = {target for _, _, target in _handler_edges(code)}
    cells = set(code.co_cellvars) | set(code.co_freevars)
    state: list[frozenset[str] | None] = [None] * len(instructions)
    arguments = frozenset(name for name in argument_names(code) if name not in cells)
    cleared = {instr.argval for instr in instructions if instr.opname in _CLEARS}
    state[0] = arguments
    for target in handler_targets:
        if target in index_of:
            state[index_of[target]] = arguments - cleared
    work = [i for i, s in enumerate(state) if s is not None]
    while work:
        i = work.pop()
        instr = instructions[i]
        bound = set(state[i] or ())
        for is_use, name in _effects(instr):
            if not is_use and instr.opname not in _CLEARS and name not in cells:
                bound.add(name)
        if instr.opname in _CLEARS and isinstance(instr.argval, str):
            bound.discard(instr.argval)
        out = frozenset(bound)
        successors = []
        if instr.opname not in pyversion.NO_FALLTHROUGH and i + 1 < len(instructions):
            successors.append(i + 1)
        if instr.opcode in pyversion.JUMP_OPCODES and isinstance(instr.argval, int) and instr.argval in index_of:
            # (3.10: a SETUP_* target is a handler: its start is set above)
            if instr.argval not in handler_targets:
                successors.append(index_of[instr.argval])
        for j in successors:
            new = out if state[j] is None else state[j] & out
            if new != state[j]:
                state[j] = new
                work.append(j)
    return {instr.offset: s for instr, s in zip(instructions, state) if s is not None}

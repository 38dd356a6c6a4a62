"""Which local variables are read after a given instruction before being written again.

A resume function receives only those: passing a dead local would keep it alive for nothing, and it may
not even be reconstructible in generated code. A classic backward dataflow over the instruction graph,
with edges to exception handlers (the exception table of 3.11+, the block stack of 3.10). The save of a
3.12+ inlined comprehension's variable (``LOAD_FAST_AND_CLEAR``) reads it only when the value it puts back
is read (`saved_local_restores`), so the same locals are live on every version.
"""
from __future__ import annotations

import dis
import types
from typing import Iterable

from .. import pyversion
from .code_memo import per_code
from .guard import argument_names

_USES = {"LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_DEREF", "LOAD_CLOSURE", "DELETE_FAST", "LOAD_FAST_AND_CLEAR",
         "LOAD_CLASSDEREF", "LOAD_FROM_DICT_OR_DEREF"}
_DEFS = {"STORE_FAST", "STORE_DEREF", "DELETE_FAST", "DELETE_DEREF"}  # (a delete ends the old value's life)

# Builtins that read every variable of the frame calling them (``locals()``, ``vars()``, ``dir()``, and
# ``eval``/``exec`` without namespaces): where one is loaded (by name, as a global), all of them are live.
FRAME_READERS = frozenset({"locals", "vars", "dir", "eval", "exec"})
_GLOBAL_LOADS = {"LOAD_GLOBAL", "LOAD_NAME"}


class NamesReadFromLocals(tuple):
    """A constant of generated code naming the locals it then reads out of ``locals()`` (some may be unbound:
    `loop._EscapeBlocks`): loading it reads them, as far as liveness goes. (A tuple subclass is not
    marshallable, so `bytecode` never merges it with an equal plain tuple constant.)"""

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


@per_code
def deleted_names(code: types.CodeType) -> frozenset[str]:
    """The locals some instruction of ``code`` deletes (``del x``, the end of ``except ... as x``)."""
    return frozenset(instr.argval for instr in dis.get_instructions(code) if instr.opname == "DELETE_FAST")


def names_used_between(code: types.CodeType, start: int, end: int) -> frozenset[str]:
    """The local and cell names the instructions strictly between offsets ``start`` and ``end`` read or
    write (a loop's body between its ``FOR_ITER`` and its exit)."""
    return frozenset(name for instr in dis.get_instructions(code) if start < instr.offset < end
                     for _, name in _effects(instr))


# Instructions that pop nothing: `saved_local_restores` knows a saved value below them stays in place.
_POP_NOTHING = {"LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_LOAD_FAST", "LOAD_CONST", "LOAD_GLOBAL", "LOAD_DEREF",
                "LOAD_CLOSURE", "LOAD_NAME", "LOAD_ASSERTION_ERROR", "LOAD_BUILD_CLASS", "LOAD_LOCALS", "PUSH_NULL",
                "NOP", "MAKE_CELL", "COPY_FREE_VARS", "RESUME", "EXTENDED_ARG"}
Restore = tuple[int, int]  # (offset of a store instruction, which of its stores: 1 for the second of a pair)


@per_code
def saved_local_restores(code: types.CodeType) -> dict[int, tuple[Restore, ...]]:
    """3.12+ (PEP 709): for each ``LOAD_FAST_AND_CLEAR`` (by offset) whose saved value is followed to the end,
    the stores that put it back in its local (an inlined comprehension's variable gets its outer value, or
    NULL, back after the comprehension: on the normal path and in the comprehension's cleanup handler).

    The outer value only matters when it is read after such a store: until then the local is not live
    (`live_in`), as on 3.10/3.11, where the comprehension is a function of its own. The compiler reorders
    the stores after a comprehension (``x = [v for v in y]`` stores ``x`` first, then ``v``), so the saved
    values are followed through the stack: ``SWAP`` and the stores move them exactly; any other instruction
    that may pop one (it pops at most ``1 - effect`` values, or one when its net effect is positive, unless it
    pops nothing at all) makes that save unknown, and an unknown save is left out: `live_in` then counts its
    ``LOAD_FAST_AND_CLEAR`` as a plain read. No instruction but ``SWAP`` and ``COPY`` moves a value it does
    not pop, so a save followed here is put back by the stores listed and by no other (one that an
    instruction replaces in place, as ``CHECK_EG_MATCH`` may, is put back by none: counting the store of
    the replacement only keeps the local live for nothing). Empty before 3.12, which has no
    ``LOAD_FAST_AND_CLEAR``."""
    instructions = list(dis.get_instructions(code))
    saves = {i: instr.argval for i, instr in enumerate(instructions) if instr.opname == "LOAD_FAST_AND_CLEAR"}
    if not saves:
        return {}
    index_of = {instr.offset: i for i, instr in enumerate(instructions)}
    handlers = pyversion.exception_table_entries(code)
    restores: dict[int, set[Restore]] = {i: set() for i in saves}
    unknown: set[int] = set()
    Stack = tuple[frozenset[int], ...]  # the saves (instruction indices) each stack slot may hold, bottom first
    states: list[Stack | None] = [None] * len(instructions)
    states[0] = ()
    work = [0]

    def flow(j: int, stack: Stack) -> None:
        old = states[j]
        if old is not None and len(old) != len(stack):  # (not in compiled code: give up on every save)
            unknown.update(saves)
            return
        new = stack if old is None else tuple(a | b for a, b in zip(old, stack))
        if new != old:
            states[j] = new
            work.append(j)

    def pop(stack: list[frozenset[int]], count: int) -> int:
        """Pop up to ``count`` values an instruction may work on (a save among them is no longer followed);
        returns how many there were."""
        count = min(count, len(stack))
        for _ in range(count):
            unknown.update(stack.pop())
        return count

    while work:
        i = work.pop()
        instr = instructions[i]
        before = states[i]
        assert before is not None
        for start, end, target, depth, lasti in handlers:
            if start <= instr.offset < end and target in index_of:  # (unwinding drops what is above depth)
                flow(index_of[target], before[:depth] + (frozenset(),) * (1 + lasti))
                break
        name, arg = instr.opname, instr.arg
        stack = list(before)
        if name == "LOAD_FAST_AND_CLEAR":
            stack.append(frozenset({i}))
        elif name == "SWAP":
            stack[-1], stack[-arg] = stack[-arg], stack[-1]
        elif name == "COPY":
            unknown.update(stack[-arg])  # (the copy could be put back somewhere else)
            stack.append(frozenset())
        elif name in ("STORE_FAST", "STORE_FAST_STORE_FAST", "STORE_FAST_LOAD_FAST"):
            parts = pyversion.SUPER_INSTRUCTIONS.get(name, (name,))
            names = instr.argval if len(parts) == 2 else (instr.argval,)
            for part, (op, local) in enumerate(zip(parts, names)):
                if op == "LOAD_FAST":
                    stack.append(frozenset())
                    continue
                for save in stack.pop():
                    if saves[save] == local:
                        restores[save].add((instr.offset, part))
                    else:
                        unknown.add(save)
        else:
            arg_or_none = arg if instr.opcode >= dis.HAVE_ARGUMENT else None
            effects = {False: dis.stack_effect(instr.opcode, arg_or_none, jump=False)}
            if instr.opcode in pyversion.JUMP_OPCODES and instr.argval in index_of:
                effects[True] = dis.stack_effect(instr.opcode, arg_or_none, jump=True)
            popped = pop(stack, 0 if name in _POP_NOTHING else max(1, 1 - min(effects.values())))
            if popped + min(effects.values()) < 0:  # (more than the stack holds: not compiled code)
                unknown.update(saves)
                continue
            if True in effects:
                flow(index_of[instr.argval], tuple(stack) + (frozenset(),) * (popped + effects[True]))
            stack += [frozenset()] * (popped + effects[False])
        if name not in pyversion.NO_FALLTHROUGH and i + 1 < len(instructions):
            flow(i + 1, tuple(stack))
    offset = [instr.offset for instr in instructions]
    return {offset[save]: tuple(sorted(found)) for save, found in restores.items() if save not in unknown}


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
    every_variable = [(True, name) for name, _ in pyversion.locals_slots(code)]
    for i, instr in enumerate(instructions):
        if instr.offset in super_offsets:
            effects[i].append((True, code.co_varnames[0]))
        if instr.opname in _GLOBAL_LOADS and instr.argval in FRAME_READERS:
            effects[i].extend(every_variable)
        elif instr.opname == "LOAD_CONST" and isinstance(instr.argval, NamesReadFromLocals):
            effects[i].extend((True, name) for name in instr.argval)
    # A LOAD_FAST_AND_CLEAR whose stores putting its value back are known reads the local only when one of
    # those stores' values is read: its own effect is the clearing (`saved_local_restores`).
    restored_by = {index_of[save]: [(index_of[offset], part) for offset, part in stores]
                   for save, stores in saved_local_restores(code).items()}
    for i in restored_by:
        effects[i] = [(False, instructions[i].argval)]
    live: list[frozenset[str]] = [frozenset()] * len(instructions)

    def live_after(i: int, part: int) -> set[str]:
        """The names live right after the effect number ``part`` of instruction ``i`` (-1: before it)."""
        out: set[str] = set()
        for j in successors[i]:
            out |= live[j]
        for is_use, name in reversed(effects[i][part + 1:]):
            if is_use:
                out.add(name)
            else:
                out.discard(name)
        return out

    changed = True
    while changed:
        changed = False
        for i in range(len(instructions) - 1, -1, -1):
            out = live_after(i, -1)  # (after no part: on entry)
            if i in restored_by and any(instructions[i].argval in live_after(j, part) for j, part in restored_by[i]):
                out.add(instructions[i].argval)
            new = frozenset(out)
            if new != live[i]:
                live[i] = new
                changed = True
    return {offset: live[i] for i, offset in enumerate(offsets)}


def in_frame_order(code: types.CodeType, names: "Iterable[str]") -> tuple[str, ...]:
    """``names`` (locals passed to a resume function or loop body) in the order the user's function lists its
    variables (`pyversion.locals_slots`; other names after, by name): the entry code's parameters then come
    in that order, so ``locals()`` run natively by it lists them as eager does."""
    from ..frame_groups import frame_origin

    position: dict[str, int] = {}
    for name, _ in pyversion.locals_slots(frame_origin(code)):
        position.setdefault(name, len(position))
    return tuple(sorted(names, key=lambda name: (position.get(name, len(position)), name)))


@per_code
def cells_made_again(code: types.CodeType) -> dict[int, str]:
    """3.12+: the ``MAKE_CELL`` instructions after the prologue (by offset), with their variable: an inlined
    comprehension's variable captured by a closure made in it gets a new cell at each run (PEP 709)."""
    remade = {}
    in_prologue = True
    for instr in dis.get_instructions(code):
        if instr.opname not in pyversion.PROLOGUE_OPNAMES:
            in_prologue = False
        elif instr.opname == "MAKE_CELL" and not in_prologue:
            remade[instr.offset] = instr.argval
    return remade


@per_code
def cells_shared_across_breaks(code: types.CodeType) -> frozenset[str]:
    """The cell variables of ``code`` that live as long as the frame: the generated code hands these very
    cells to a resume function (as its closure). Not the cells a 3.12+ inlined comprehension makes again in
    the body (`cells_made_again`): a new cell per run of that code; but the frame's own cell of such a
    variable when the frame uses it outside the comprehension too (`cells_shadowed_by_comprehensions`)."""
    remade = set(cells_made_again(code).values())
    return frozenset(code.co_cellvars) - (remade - cells_shadowed_by_comprehensions(code).keys())


def comprehension_cell_name(name: str) -> str:
    """The name of a 3.12+ inlined comprehension's own cell of variable ``name`` in code entering the frame's
    code at an offset, where the frame's cell of that name is a free variable (`cells_shadowed_by_comprehensions`)."""
    return f"__sot_comprehension_{name}"


@per_code
def cells_shadowed_by_comprehensions(code: types.CodeType) -> dict[str, frozenset[int]]:
    """3.12+: the cell variables of ``code`` that are both a cell of the frame used outside any inlined
    comprehension (``i = 5; g = lambda: i``) and the variable of a comprehension whose closures capture it
    (``[lambda: i for i in r]``), each with the offsets where the name stands for the comprehension's cell:
    from the ``LOAD_FAST_AND_CLEAR`` saving the frame's cell (the slot holds the cell itself) to the
    ``STORE_FAST`` putting it back, and that store in the comprehension's cleanup handler.

    On 3.10/3.11 these are two variables (the comprehension is a function of its own); here one slot holds
    either cell in turn. Code entering ``code`` at an offset receives the frame's cell in its closure, like
    any cell of the frame, so the closures made before a graph break and the code after it share it: the
    comprehension's cell is then a variable of its own there (`comprehension_cell_name`), or the slot's
    save and restore would put the frame's cell out of reach. A variable whose save is not followed to its
    restores (`saved_local_restores`; never in compiled code) is left out."""
    remade = set(cells_made_again(code).values())
    if not remade:
        return {}
    instructions = list(dis.get_instructions(code))
    restores = saved_local_restores(code)
    regions: dict[str, set[int]] = {}
    unknown: set[str] = set()
    for instr in instructions:
        if instr.opname != "LOAD_FAST_AND_CLEAR" or instr.argval not in remade:
            continue
        stores = restores.get(instr.offset)
        if not stores:
            unknown.add(instr.argval)
            continue
        end = min(offset for offset, _ in stores)  # (the other ones: in the cleanup handler, after the code)
        region = regions.setdefault(instr.argval, set())
        region.update(other.offset for other in instructions if instr.offset <= other.offset <= end)
        region.update(offset for offset, _ in stores)
    shadowed = {}
    for name, region in regions.items():
        if name in unknown:
            continue
        if any(name in (used for _, used in _effects(instr)) for instr in instructions if instr.offset not in region):
            shadowed[name] = frozenset(region)
    return shadowed


_CLEARS = {"DELETE_FAST", "LOAD_FAST_AND_CLEAR"}  # (3.12+: an inlined comprehension clears its variable)


@per_code
def definitely_bound(code: types.CodeType) -> dict[int, frozenset[str]]:
    """For each reachable instruction offset, the fast locals bound on entry to it on *every* path from the
    function's start, whatever the inputs: the arguments, and what every path has stored since (a forward
    must-analysis).
    Native code that relies on a local being bound somewhere holds for any call when the local is in here.
    Conservative: only fast locals are tracked, and an exception handler starts with the arguments that no
    instruction ever unbinds (it may be entered from anywhere in its block)."""
    cells = set(code.co_cellvars) | set(code.co_freevars)
    arguments = frozenset(name for name in argument_names(code) if name not in cells)
    return _must_bound(code, 0, arguments, reads_bind=False)


# Reads that raise UnboundLocalError when their local is unbound (3.12+'s unchecked LOAD_FAST is only emitted
# where the compiler proved it bound): execution goes on past one only with the local bound.
_RAISE_IF_UNBOUND = frozenset({"LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_LOAD_FAST", "STORE_FAST_LOAD_FAST"})


def bound_from(code: types.CodeType, start_offset: int, initial: frozenset[str]) -> dict[int, frozenset[str]]:
    """Like `definitely_bound`, for ``code`` entered at ``start_offset`` with the locals ``initial`` bound (a
    loop body function: `transform._emit_loop`). A read that raises when its local is unbound binds it for
    what follows it: a path goes on past the read only with the local bound."""
    index = [instr.offset for instr in dis.get_instructions(code)].index(start_offset)
    return _must_bound(code, index, initial, reads_bind=True)


def _must_bound(code: types.CodeType, start: int, initial: frozenset[str],
                reads_bind: bool) -> dict[int, frozenset[str]]:
    instructions = list(dis.get_instructions(code))
    index_of = {instr.offset: i for i, instr in enumerate(instructions)}
    handler_targets = {target for _, _, target in _handler_edges(code)}
    cells = set(code.co_cellvars) | set(code.co_freevars)
    state: list[frozenset[str] | None] = [None] * len(instructions)
    cleared = {instr.argval for instr in instructions if instr.opname in _CLEARS}
    state[start] = initial
    for target in handler_targets:
        if target in index_of:
            state[index_of[target]] = initial - cleared
    work = [i for i, s in enumerate(state) if s is not None]
    while work:
        i = work.pop()
        instr = instructions[i]
        bound = set(state[i] or ())
        for is_use, name in _effects(instr):
            if (not is_use and instr.opname not in _CLEARS or reads_bind and is_use
                    and instr.opname in _RAISE_IF_UNBOUND) and name not in cells:
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

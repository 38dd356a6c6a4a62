"""Resume functions: the rest of a frame after a graph break, as a function of its own.

A resume function is the original code with a new entry: its arguments are the values that were on the
stack at the break point plus the live locals; its prologue pushes the stack values back and jumps to the
original instruction. The hook translates it like any other frame, lazily, on its first call. Resume
functions are cached per (code, offset, stack depth, live locals), so a break met again yields the very same
code object, whose own cache entries then accumulate.
"""
from __future__ import annotations

import collections
import dis
import linecache
import re
import types
from functools import lru_cache
from typing import Callable

from bytecode import Bytecode, CellVar, FreeVar, Instr, Label, TryBegin, TryEnd

from ..errors import FallbackError
from . import pyversion
from .frame_groups import _CodeKeyedMap
from .frame_groups import derived_from
from .executor.liveness import (EXCEPT_HANDLER, FRAME_READERS, block_stacks, cells_shadowed_by_comprehensions,
                                cells_shared_across_breaks, comprehension_cell_name)
from .runtime import UNBOUND

STACK_ARG = "__sot_stack_{}"
_PROLOGUE_OPS = pyversion.PROLOGUE_OPNAMES
CO_VARARGS = 0x04
CO_VARKEYWORDS = 0x08


def _abstract_instructions(code: types.CodeType) -> tuple[Bytecode, dict[int, int]]:
    """The abstract bytecode and, for each instruction offset, the index of its `Instr` in it.

    `bytecode` folds ``EXTENDED_ARG`` prefixes into the instruction they extend: their offsets (where a jump
    to that instruction, or the instruction after a break, starts) map to it too."""
    abstract = Bytecode.from_code(code, conserve_exception_block_stackdepth=True)
    pyversion.restore_cell_loads(abstract, abstract.cellvars, abstract.freevars)
    real: list[tuple[dis.Instruction, list[int]]] = []
    prefixes: list[int] = []
    for instr in dis.get_instructions(code):
        if instr.opname == "EXTENDED_ARG":
            prefixes.append(instr.offset)
        elif instr.opname != "CACHE":
            real.append((instr, prefixes))
            prefixes = []
    positions = [i for i, item in enumerate(abstract) if isinstance(item, Instr)]
    if len(real) != len(positions):
        raise RuntimeError(f"instruction mismatch while mapping {code.co_name}: {len(real)} vs {len(positions)}")
    index = {}
    for (instr, extended_by), pos in zip(real, positions):
        index[instr.offset] = pos
        for offset in extended_by:
            index[offset] = pos
    return abstract, index


def abstract_instruction(code: types.CodeType, offset: int) -> Instr:
    """The `bytecode` instruction at ``offset`` of ``code`` (names and constants resolved)."""
    abstract, index = _abstract_instructions(code)
    return abstract[index[offset]]


@lru_cache(maxsize=1024)
def build_resume_code(code: types.CodeType, offset: int, stack_layout: tuple[bool, ...],
                      live: tuple[str, ...], maybe_unbound: tuple[str, ...] = ()) -> types.CodeType:
    """The code of the resume function entering ``code`` at ``offset``.

    ``stack_layout`` describes the stack to rebuild, bottom first: True for a NULL (pushed by the prologue;
    a NULL cannot be passed as an argument), False for a value received as argument ``__sot_stack_<i>``.
    ``live`` are the locals received as arguments of their own name. The frame's cells are received as
    the function's closure (after the original free variables): see `build_entry_code`; those of
    ``maybe_unbound`` may be received as `runtime.UNBOUND`."""
    origin = _plain_resumes.get(code)
    if origin is not None and offset in origin[1]:
        # ``code`` is itself a resume function: continue its origin instead, at the same instruction. The
        # same break met again from a resume function (each iteration of a ``while`` loop with a break in it)
        # then gets the same code object, whose cache entries accumulate up to the cache limit, rather than a
        # new code object per iteration, each translated again (a chain as long as the loop).
        root, offsets = origin
        return build_resume_code(root, offsets[offset], stack_layout, live, maybe_unbound)
    offsets_seen: dict[int, int] = {}
    resume = build_entry_code(code, offset, stack_layout, live, f"resumed at line {_line_at(code, offset)}",
                              cells_from_closure=True, maybe_unbound=maybe_unbound, original_offsets=offsets_seen)
    derived_from(resume, code)  # (its programs are chosen with the frame's: `frame_groups`)
    _plain_resumes[resume] = (code, offsets_seen)
    return resume


# A resume function -> the code it continues and, for each of its instruction offsets that is an instruction of
# that code, the offset there (`build_resume_code`).
_plain_resumes: _CodeKeyedMap[tuple[types.CodeType, dict[int, int]]] = _CodeKeyedMap()


@lru_cache(maxsize=1024)
def build_raising_code(code: types.CodeType, offset: int, stack_layout: tuple[bool, ...],
                       live: tuple[str, ...], maybe_unbound: tuple[str, ...] = ()) -> types.CodeType:
    """The code of a function entering ``code`` at ``offset`` (an instruction inside a ``try``/``with``
    block that raised when the generated code ran it natively) by raising the exception it receives as last
    argument there: the original's own handlers then run, exactly as in eager code. ``stack_layout`` is the
    whole stack before the instruction (its operands are never read: they may be NULLs); ``maybe_unbound`` as
    in `build_resume_code`.

    It runs natively (never translated): it only exists on an exceptional path."""
    from .skip_files import skip_code

    raising = build_entry_code(code, offset, stack_layout, live, f"raising at line {_line_at(code, offset)}",
                               raise_at_entry=True, cells_from_closure=True, maybe_unbound=maybe_unbound)
    skip_code(raising)
    return raising


@lru_cache(maxsize=1024)
def build_native_code(code: types.CodeType, offset: int, stack_layout: tuple[bool, ...],
                      live: tuple[str, ...]) -> types.CodeType:
    """The code of a function entering ``code`` at ``offset`` like a resume function, that runs natively
    (never translated): what the simulation cannot reproduce from there on (an exception it raised and is
    still handling: run for real, from the instruction that raised it) is then eager code."""
    from .skip_files import skip_code

    native = build_entry_code(code, offset, stack_layout, live, f"run natively from line {_line_at(code, offset)}",
                              cells_from_closure=True)
    skip_code(native)
    return native


EXCEPTION_ARG = "__sot_exception"
Edit = Callable[[list, dict[int, int]], None]


def build_entry_code(code: types.CodeType, offset: int, stack_layout: tuple[bool, ...], live: tuple[str, ...],
                     role: str, edit: Edit | None = None, extra_stack: int = 0,
                     raise_at_entry: bool = False, cells_from_closure: bool = False,
                     closure_cells: tuple[str, ...] = (), maybe_unbound: tuple[str, ...] = (),
                     block_handler: Callable[[int], Label] | None = None,
                     original_offsets: dict[int, int] | None = None) -> types.CodeType:
    """``code`` entered at ``offset`` with the given stack and live locals as arguments.

    ``edit(body, index)`` may rewrite the abstract instructions first (``index`` maps an original offset to
    its position in ``body``; edits must replace items in place, keeping positions valid) and then need up to
    ``extra_stack`` more stack slots. ``role`` is appended to the qualified name (logs and reports).
    ``raise_at_entry``: the entry raises the exception passed as last argument (`build_raising_code`) as the
    instruction at ``offset`` would, from a block after the body covered by the same exception-table entry
    (`_raising_exit`).
    ``cells_from_closure``: the original's cell variables (`cells_shared_across_breaks`) become free variables
    (after its own), so the function is made with the very cells of the frame it continues (closures made
    before the entry share them, as in the original frame); they are then never received as ``live``
    arguments. A 3.12+ inlined comprehension's own cell of the name of such a cell is then a cell variable of
    another name (`cells_shadowed_by_comprehensions`), unless it is one of ``closure_cells``.
    ``closure_cells``: more cell variables received in the closure, after those (a 3.12+ inlined
    comprehension's, which the original makes again at each run of the comprehension: see
    `loop.build_loop_body_code`), whose plain-local uses (their save and restore around the comprehension)
    the caller must keep out of what the function runs.
    ``maybe_unbound``: arguments among ``live`` that may be `runtime.UNBOUND` (a local a loop body had not
    bound yet, carried between iterations): the prologue deletes such a local, which is then unbound as in the
    original (a read raises UnboundLocalError).
    ``block_handler``: 3.10, the blocks around the entry the prologue sets up again lead to the label it gives
    for their stack level (added to the body by ``edit``), not to the original's handlers (a loop body's
    exceptions leaving it for handlers around the loop: `loop.build_loop_body_code`).
    ``original_offsets``: filled with the offset in ``code`` of each instruction of the new code copied from it
    (by the new offset)."""
    if pyversion.super_without_positional_parameter(code):
        raise FallbackError(f"{code.co_name} calls super() without positional parameters (a RuntimeError in "
                            f"eager): entered at an offset, it would take its first local as the instance")
    abstract, index = _abstract_instructions(code)
    target = Label()
    body = list(abstract)
    copied = {id(body[position]): offset for offset, position in sorted(index.items())}  # (the last: no prefix)
    stack_loads_before_edit = _stack_argument_loads(body)
    comprehension_cells: list[str] = []
    if cells_from_closure:  # (while ``index`` still maps each offset to its instruction)
        comprehension_cells = _rename_comprehension_cells(body, index, {
            name: offsets for name, offsets in cells_shadowed_by_comprehensions(code).items()
            if name not in closure_cells})
    if edit is not None:
        edit(body, index)
    cellvars = list(abstract.cellvars) + comprehension_cells
    freevars = list(abstract.freevars)
    if cells_from_closure:
        shared = [name for name in cellvars if name in cells_shared_across_breaks(code)]
        shared += [name for name in closure_cells if name not in shared]
        if set(live) & set(shared):
            raise ValueError(f"cells {sorted(set(live) & set(shared))} passed as arguments of {role}")
        _cells_to_free_variables(body, set(shared))
        freevars += shared
        cellvars = [name for name in cellvars if name not in shared]
    if raise_at_entry:
        body += _raising_exit(body, index[offset], _line_at(code, offset) or code.co_firstlineno, target)
        extra_stack += 1
    else:
        body.insert(index[offset], target)
    if pyversion.argumentless_super_offsets(code):
        self_name = code.co_varnames[0]
        cell_kind = FreeVar if self_name in freevars else CellVar if self_name in cellvars else None
        pyversion.make_super_calls_explicit(body, cell_kind(self_name) if cell_kind else self_name)
        extra_stack += 2  # (before 3.12: the class and the instance pushed for the call)
    end = _prologue_end(body)
    body = [item for i, item in enumerate(body)
            if not (isinstance(item, Instr) and item.name in _PROLOGUE_OPS and i <= end)]
    first_line = code.co_firstlineno
    prologue: list = []

    def emit(name: str, *arg: object) -> None:
        prologue.append(Instr(name, *arg, lineno=first_line))

    pyversion.emit_prologue(emit, len(freevars), cellvars, CellVar)
    for name in maybe_unbound:
        bound = Label()
        emit("LOAD_FAST", name)
        emit("LOAD_CONST", UNBOUND)
        emit("IS_OP", 0)
        pyversion.emit_pop_jump_forward_if(emit, False, bound)
        emit("DELETE_FAST", name)
        prologue.append(bound)
    blocks = _blocks_to_rebuild(code, offset, len(stack_layout))
    # The stack arguments are deleted once pushed when the body lists the frame's variables (``locals()`` run
    # natively by this code then lists the user's only), but for those the body reads by name: the blocks an
    # edit put in (a loop body's exits pass its stack on), in this code or the entry code it is built from.
    stack_read = frozenset(_stack_argument_loads(body) - stack_loads_before_edit) | \
        (_reads_stack_arguments.get(code) or frozenset())
    hide_stack = not FRAME_READERS.isdisjoint(code.co_names)
    n_stack = 0
    for depth in range(len(stack_layout) + 1):
        for level, setup_offset in blocks:
            if level == depth:  # 3.10: re-enter the try/with blocks around the entry point
                emit("SETUP_FINALLY", abstract[index[setup_offset]].arg if block_handler is None
                     else block_handler(level))
        if depth == len(stack_layout):
            break
        if stack_layout[depth]:
            pyversion.emit_push_null(emit)
        else:
            emit("LOAD_FAST", STACK_ARG.format(n_stack))
            if hide_stack and STACK_ARG.format(n_stack) not in stack_read:
                emit("DELETE_FAST", STACK_ARG.format(n_stack))
            n_stack += 1
    emit("JUMP_FORWARD", target)

    resume = Bytecode(prologue + pyversion.split_super_instructions(body))
    resume.argnames = [STACK_ARG.format(i) for i in range(n_stack)] + list(live) + \
        ([EXCEPTION_ARG] if raise_at_entry else [])
    resume.argcount = len(resume.argnames)
    resume.posonlyargcount = 0
    resume.kwonlyargcount = 0
    resume.name = abstract.name
    if hasattr(abstract, "qualname"):
        base = abstract.qualname.split(" (")[0]
        resume.qualname = f"{base} ({role})"
    resume.filename = abstract.filename
    resume.first_lineno = abstract.first_lineno
    resume.flags = abstract.flags & ~(CO_VARARGS | CO_VARKEYWORDS)
    resume.cellvars = cellvars
    resume.freevars = freevars
    resume.docstring = None
    # The body before the entry point is only reachable through jumps back into it, so `bytecode`'s flow
    # analysis from the new entry can miss try-blocks (and their handlers' stack use). Both facts are known
    # exactly instead: every point of the body has the original's stack (the prologue rebuilds it), so the
    # original's stack size and exception-table depths hold.
    stacksize = max(code.co_stacksize, len(stack_layout)) + extra_stack
    new_code = resume.to_code(stacksize=stacksize, compute_exception_stack_depths=False)
    if original_offsets is not None:
        instructions = [i for i in dis.get_instructions(new_code) if i.opname not in ("EXTENDED_ARG", "CACHE")]
        items = [item for item in resume if isinstance(item, Instr)]
        if len(items) == len(instructions):
            original_offsets.update((instr.offset, copied[id(item)]) for item, instr in zip(items, instructions)
                                    if id(item) in copied)
    # (3.10 code objects carry no qualified name: give reports and logs this one)
    pyversion.remember_qualname(new_code, f"{pyversion.code_qualname(code).split(' (')[0]} ({role})")
    _entry_lines[new_code] = _line_at(code, offset)
    if stack_read:
        _reads_stack_arguments[new_code] = stack_read
    return new_code


def _stack_argument_loads(body: list) -> "collections.Counter[str]":
    """How many times ``body`` loads each stack-argument name (`STACK_ARG`)."""
    loads: collections.Counter[str] = collections.Counter()
    for item in body:
        if isinstance(item, Instr) and item.name.startswith("LOAD_FAST"):  # (3.13: LOAD_FAST_LOAD_FAST, a pair)
            loads.update(name for name in (item.arg if isinstance(item.arg, tuple) else (item.arg,))
                         if isinstance(name, str) and _STACK_ARG_PATTERN.fullmatch(name))
    return loads


# An entry code whose body reads stack arguments by name -> those names (`build_entry_code`).
_reads_stack_arguments: _CodeKeyedMap[frozenset[str]] = _CodeKeyedMap()
# An entry code (resume function, loop body...) -> the line of the user's code where it enters (the break).
_entry_lines: _CodeKeyedMap[int | None] = _CodeKeyedMap()
_STACK_ARG_PATTERN = re.compile(STACK_ARG.replace("{}", r"(\d+)"))


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def in_user_terms(code: types.CodeType, text: str) -> str:
    """``text`` (a readable guard check of ``code``) with the stack values an entry code receives
    (``__sot_stack_<i>``, internal names) described as the user knows them: the i-th value the expression
    being evaluated at the break, in the user's file and line, had computed and not yet used (an operand of
    a call, a part of an f-string...)."""
    line = _entry_lines.get(code)
    if line is None or not _STACK_ARG_PATTERN.search(text):
        return text
    where = f"{code.co_filename}:{line}"
    described = _STACK_ARG_PATTERN.sub(
        lambda match: f"<the {_ordinal(int(match.group(1)) + 1)} value pending on the stack at {where}>", text)
    source = linecache.getline(code.co_filename, line).strip()
    return f"{described} (a value computed on line {line}" + (f", `{source}`" if source else "") + \
        ", before the graph break there, and not yet stored in a variable)"


def _raising_exit(body: list, position: int, line: int, target: Label) -> list:
    """What the entry of a raising function (`build_raising_code`) jumps to, placed after the body: raising the
    exception received as if the instruction at ``position`` raised it, covered by the exception-table entry
    covering that instruction (its handler, stack depth and lasti flag; on 3.10 the prologue re-entered the
    blocks). Not in the body's own flow: a loop coming back to the instruction runs it again (seed 122287: a
    ``while`` loop around a ``with`` block re-raised the first iteration's exception instead of calling)."""
    covering = covering_try(body, position)
    # (unbound once pushed: the exception's traceback will hold this frame, whose locals would hold it)
    raising = [Instr("LOAD_FAST", EXCEPTION_ARG, lineno=line), Instr("DELETE_FAST", EXCEPTION_ARG, lineno=line),
               Instr("RAISE_VARARGS", 1, lineno=line)]
    if covering is None:
        return [target, *raising]
    entry = TryBegin(covering.target, covering.push_lasti, covering.stack_depth)
    return [target, entry, *raising, TryEnd(entry)]


def covering_try(body: list, position: int) -> TryBegin | None:
    """3.11+: the exception-table entry (`bytecode` TryBegin) covering the item at ``position`` of ``body``."""
    covering = None
    for item in body[:position]:
        if isinstance(item, TryBegin):
            covering = item
        elif isinstance(item, TryEnd) and item.entry is covering:
            covering = None
    return covering


def _rename_comprehension_cells(body: list, index: dict[int, int],
                                shadowed: dict[str, frozenset[int]]) -> list[str]:
    """Give the instructions at the offsets of ``shadowed`` (`cells_shadowed_by_comprehensions`) the name of
    the comprehension's own cell (`comprehension_cell_name`) instead of their variable's, and return those
    names (new cell variables): the frame's cell of that name becomes a free variable
    (`_cells_to_free_variables`), whose slot the comprehension's ``MAKE_CELL`` would wrap in a new cell (and
    its save and restore would reach another slot, a plain local's)."""
    for name, offsets in shadowed.items():
        own = comprehension_cell_name(name)
        for offset in offsets:
            instr = body[index[offset]]
            if isinstance(instr.arg, tuple):  # (3.13 super-instructions: a pair of names)
                instr.arg = tuple(own if arg == name else arg for arg in instr.arg)
            elif isinstance(instr.arg, (CellVar, FreeVar)) and instr.arg.name == name:
                instr.arg = CellVar(own)
            elif instr.arg == name:
                instr.arg = own
    return [comprehension_cell_name(name) for name in shadowed]


def _cells_to_free_variables(body: list, names: set[str]) -> None:
    """Rewrite the instructions of ``body`` that reach the cells ``names`` to reach free variables of the
    same names instead (the prologue's ``MAKE_CELL`` of them is dropped with the prologue)."""
    for item in body:
        if isinstance(item, Instr) and isinstance(item.arg, CellVar) and item.arg.name in names:
            item.arg = FreeVar(item.arg.name)


def _line_at(code: types.CodeType, offset: int) -> int | None:
    line = None
    for instr in dis.get_instructions(code):
        line = pyversion.instruction_line(instr) or line
        if instr.offset >= offset and line is not None:
            return line
    return None


def _blocks_to_rebuild(code: types.CodeType, offset: int, depth: int) -> list[tuple[int, int]]:
    """3.10: the blocks around ``offset`` as ``(stack level, SETUP_* offset)``, outermost first, for the
    prologue to push again (each is a SETUP_FINALLY to the same handler, set up at the same stack level, which
    is what SETUP_WITH leaves too). Entering an ``except``/``finally`` handler that is running cannot be
    reproduced (its block holds the exception state): that falls back. Empty on 3.11+ (exception table)."""
    if not pyversion.HAS_BLOCK_STACK:
        return []
    state = block_stacks(code).get(offset)
    if state is None or state[0] != depth:
        raise FallbackError(f"cannot rebuild the block stack at offset {offset} of {code.co_name}")
    blocks = state[1]
    if any(setup == EXCEPT_HANDLER for setup, _ in blocks):
        raise FallbackError(f"Python {pyversion.PY[0]}.{pyversion.PY[1]}: a graph break inside an except or "
                            "finally handler cannot resume there (the handler's block stack cannot be rebuilt)")
    return [(level, setup) for setup, level in blocks]


def _prologue_end(body: list) -> int:
    """Index of the last instruction of the original prologue (cells, free variables, RESUME)."""
    last = -1
    for i, item in enumerate(body):
        if isinstance(item, Instr):
            if item.name not in _PROLOGUE_OPS:
                break
            last = i
    return last


__all__ = ["FreeVar", "STACK_ARG", "in_user_terms", "abstract_instruction", "build_entry_code", "build_native_code",
           "build_raising_code", "build_resume_code"]

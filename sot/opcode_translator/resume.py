"""Resume functions: the rest of a frame after a graph break, as a function of its own.

A resume function is the original code with a new entry: its arguments are the values that were on the
stack at the break point plus the live locals; its prologue pushes the stack values back and jumps to the
original instruction. The hook translates it like any other frame, lazily, on its first call. Resume
functions are cached per (code, offset, stack depth, live locals), so a break met again yields the very same
code object, whose own cache entries then accumulate.
"""
from __future__ import annotations

import dis
import types
from functools import lru_cache

from bytecode import Bytecode, CellVar, FreeVar, Instr, Label

STACK_ARG = "__sot_stack_{}"
_PROLOGUE_OPS = ("COPY_FREE_VARS", "MAKE_CELL", "RESUME")
CO_VARARGS = 0x04
CO_VARKEYWORDS = 0x08


def _abstract_instructions(code: types.CodeType) -> tuple[Bytecode, dict[int, int]]:
    """The abstract bytecode and, for each instruction offset, the index of its `Instr` in it."""
    abstract = Bytecode.from_code(code)
    real = [instr for instr in dis.get_instructions(code) if instr.opname not in ("EXTENDED_ARG", "CACHE")]
    positions = [i for i, item in enumerate(abstract) if isinstance(item, Instr)]
    if len(real) != len(positions):
        raise RuntimeError(f"instruction mismatch while mapping {code.co_name}: {len(real)} vs {len(positions)}")
    return abstract, {instr.offset: pos for instr, pos in zip(real, positions)}


def abstract_instruction(code: types.CodeType, offset: int) -> Instr:
    """The `bytecode` instruction at ``offset`` of ``code`` (names and constants resolved)."""
    abstract, index = _abstract_instructions(code)
    return abstract[index[offset]]


@lru_cache(maxsize=1024)
def build_resume_code(code: types.CodeType, offset: int, stack_layout: tuple[bool, ...],
                      live: tuple[str, ...]) -> types.CodeType:
    """The code of the resume function entering ``code`` at ``offset``.

    ``stack_layout`` describes the stack to rebuild, bottom first: True for a NULL (pushed by the prologue;
    a NULL cannot be passed as an argument), False for a value received as argument ``__sot_stack_<i>``.
    ``live`` are the locals received as arguments of their own name."""
    abstract, index = _abstract_instructions(code)
    target = Label()
    body = list(abstract)
    body.insert(index[offset], target)
    end = _prologue_end(body)
    body = [item for i, item in enumerate(body)
            if not (isinstance(item, Instr) and item.name in _PROLOGUE_OPS and i <= end)]
    first_line = code.co_firstlineno
    prologue: list = []
    if code.co_freevars:
        prologue.append(Instr("COPY_FREE_VARS", len(code.co_freevars), lineno=first_line))
    for name in code.co_cellvars:
        prologue.append(Instr("MAKE_CELL", CellVar(name), lineno=first_line))
    prologue.append(Instr("RESUME", 0, lineno=first_line))
    n_stack = 0
    for is_null in stack_layout:
        if is_null:
            prologue.append(Instr("PUSH_NULL", lineno=first_line))
        else:
            prologue.append(Instr("LOAD_FAST", STACK_ARG.format(n_stack), lineno=first_line))
            n_stack += 1
    prologue.append(Instr("JUMP_FORWARD", target, lineno=first_line))

    resume = Bytecode(prologue + body)
    resume.argnames = [STACK_ARG.format(i) for i in range(n_stack)] + list(live)
    resume.argcount = len(resume.argnames)
    resume.posonlyargcount = 0
    resume.kwonlyargcount = 0
    resume.name = abstract.name
    if hasattr(abstract, "qualname"):
        line = _line_at(code, offset)
        base = abstract.qualname.split(" (resumed at line")[0]
        resume.qualname = f"{base} (resumed at line {line})"
    resume.filename = abstract.filename
    resume.first_lineno = abstract.first_lineno
    resume.flags = abstract.flags & ~(CO_VARARGS | CO_VARKEYWORDS)
    resume.cellvars = list(abstract.cellvars)
    resume.freevars = list(abstract.freevars)
    resume.docstring = None
    return resume.to_code()


def _line_at(code: types.CodeType, offset: int) -> int | None:
    for instr in dis.get_instructions(code):
        if instr.offset >= offset and instr.positions is not None and instr.positions.lineno is not None:
            return instr.positions.lineno
    return None


def _prologue_end(body: list) -> int:
    """Index of the last instruction of the original prologue (cells, free variables, RESUME)."""
    last = -1
    for i, item in enumerate(body):
        if isinstance(item, Instr):
            if item.name not in _PROLOGUE_OPS:
                break
            last = i
    return last


__all__ = ["FreeVar", "STACK_ARG", "abstract_instruction", "build_resume_code"]

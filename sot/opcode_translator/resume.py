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

from ..errors import FallbackError
from . import pyversion
from .executor.liveness import block_stacks

STACK_ARG = "__sot_stack_{}"
_PROLOGUE_OPS = pyversion.PROLOGUE_OPNAMES
CO_VARARGS = 0x04
CO_VARKEYWORDS = 0x08


def _abstract_instructions(code: types.CodeType) -> tuple[Bytecode, dict[int, int]]:
    """The abstract bytecode and, for each instruction offset, the index of its `Instr` in it."""
    abstract = Bytecode.from_code(code, conserve_exception_block_stackdepth=True)
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
    _check_enterable(code, offset)
    abstract, index = _abstract_instructions(code)
    target = Label()
    body = list(abstract)
    body.insert(index[offset], target)
    end = _prologue_end(body)
    body = [item for i, item in enumerate(body)
            if not (isinstance(item, Instr) and item.name in _PROLOGUE_OPS and i <= end)]
    first_line = code.co_firstlineno
    prologue: list = []

    def emit(name: str, *arg: object) -> None:
        prologue.append(Instr(name, *arg, lineno=first_line))

    pyversion.emit_prologue(emit, code, CellVar)
    n_stack = 0
    for is_null in stack_layout:
        if is_null:
            pyversion.emit_push_null(emit)
        else:
            emit("LOAD_FAST", STACK_ARG.format(n_stack))
            n_stack += 1
    emit("JUMP_FORWARD", target)

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
    # The body before the entry point is only reachable through jumps back into it, so `bytecode`'s flow
    # analysis from the new entry can miss try-blocks (and their handlers' stack use). Both facts are known
    # exactly instead: every point of the body has the original's stack (the prologue rebuilds it), so the
    # original's stack size and exception-table depths hold.
    return resume.to_code(stacksize=max(code.co_stacksize, len(stack_layout)), compute_exception_stack_depths=False)


def _line_at(code: types.CodeType, offset: int) -> int | None:
    line = None
    for instr in dis.get_instructions(code):
        line = pyversion.instruction_line(instr) or line
        if instr.offset >= offset and line is not None:
            return line
    return None


def _check_enterable(code: types.CodeType, offset: int) -> None:
    """A resume function enters ``code`` at ``offset`` with an empty block stack: on 3.10, a point inside
    a ``try``/``with`` block (or an ``except`` handler) cannot be entered that way."""
    if pyversion.HAS_BLOCK_STACK and block_stacks(code).get(offset, ()):
        raise FallbackError(f"Python {pyversion.PY[0]}.{pyversion.PY[1]}: a graph break inside a try/with "
                            "block cannot resume there (its block stack cannot be rebuilt)")


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

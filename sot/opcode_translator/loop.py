"""Graph breaks inside ``for`` loops: the loop runs natively, its body becomes a function of its own.

Paddle's SOT makes the whole frame fall back when a break happens in a loop body. Here the code before the
loop is compiled as usual, the generated code then iterates natively and calls a *loop body function* once
per item, and the code after the loop continues in a resume function. The body function is the original
code entered at the top of the body, with the loop head (``FOR_ITER``) and the loop exit rewritten into
returns, so it is translated by the hook like any frame (its own breaks get their own resume functions).

A body function receives ``(*below, None, item, *live)``: ``None`` stands for the iterator the body never
touches, ``below`` are the values under it on the stack (none for a ``for`` statement at the top of a
function; an enclosing loop's iterator, in a body function; a 3.12+ inlined comprehension's result, into
which its body appends, and the variables it saved), and ``live`` are the locals live at the loop head. It
returns ``(flag, value, live_values)``: flag 0 = next item, 1 = ``break``, 2 = ``return value``.

A comprehension's body function runs natively (`transform._emit_loop`): the comprehension runs as eager
code between the compiled code before and after it, as on 3.10/3.11, where the hook runs the frame of a
comprehension's own function natively.
"""
from __future__ import annotations

import dis
import types
from functools import lru_cache

from bytecode import Instr

from ..errors import FallbackError
from . import pyversion
from .frame_groups import derived_from
from .resume import build_entry_code

CONTINUE, BREAK, RETURN = 0, 1, 2
# Instructions reaching a 3.12+ cell variable's slot as a plain local (3.13's LOAD_FAST of a cell for a closure
# is decoded back to the cell: `pyversion.restore_cell_loads`).
_PLAIN_LOCAL_USES = frozenset({"LOAD_FAST_AND_CLEAR", "STORE_FAST", "STORE_FAST_STORE_FAST", "STORE_FAST_LOAD_FAST",
                               "LOAD_FAST_CHECK", "DELETE_FAST"})


def loop_exit(code: types.CodeType, for_iter_offset: int) -> int:
    """Offset of the first instruction after the loop whose head is at ``for_iter_offset``: where an
    exhausted ``FOR_ITER`` continues (on 3.12+ past the ``END_FOR`` at its target) and ``break`` jumps."""
    instructions = list(dis.get_instructions(code))
    offsets = [instr.offset for instr in instructions]
    for instr in instructions:
        if instr.offset == for_iter_offset:
            return offsets[offsets.index(instr.argval) + pyversion.FOR_ITER_EXIT_SKIP]
    raise FallbackError("loop head not found")


def check_loop_supported(code: types.CodeType, for_iter_offset: int,
                         cause: FallbackError | None = None) -> pyversion.LoopEntry:
    """How the loop is entered (`pyversion.loop_entry`). Loops inside ``try``/``with`` blocks (an exception
    would leave the body function) stay fallbacks (``cause`` is the break inside the loop). The hidden
    handler of a 3.12+ inlined comprehension is no ``try`` block: an exception leaving the comprehension
    leaves the frame."""
    entry = pyversion.loop_entry(code, for_iter_offset)
    if entry.kind == "other":
        raise FallbackError("a graph break in a loop whose iterator is not made right before it")
    inside = any(start <= for_iter_offset < end for start, end, target in pyversion.exception_table(code)
                 if not pyversion.comprehension_cleanup(code, target))
    if pyversion.HAS_BLOCK_STACK:  # 3.10: no exception table, a block stack
        from .executor.liveness import block_stacks

        inside = bool(block_stacks(code).get(for_iter_offset, (0, ()))[1])
    if inside:
        raise FallbackError("a graph break inside a for loop within a try/with block is not supported yet")
    return entry


def _result(flag: int, live: tuple[str, ...], lineno: int, below: int = 0) -> list:
    """Instructions returning ``(flag, None, (live...))`` (the dummy iterator was popped before), after
    popping the ``below`` values under the loop's iterator."""
    out = [Instr("POP_TOP", lineno=lineno) for _ in range(below)]
    out += [Instr("LOAD_CONST", flag, lineno=lineno), Instr("LOAD_CONST", None, lineno=lineno)]
    out += [Instr("LOAD_FAST", name, lineno=lineno) for name in live]
    out += [Instr("BUILD_TUPLE", len(live), lineno=lineno), Instr("BUILD_TUPLE", 3, lineno=lineno),
            Instr("RETURN_VALUE", lineno=lineno)]
    return out


def _body_region(code: types.CodeType, for_iter_offset: int) -> set[int]:
    exit_offset = loop_exit(code, for_iter_offset)
    return {i.offset for i in dis.get_instructions(code) if for_iter_offset < i.offset < exit_offset}


def shared_loop_cells(code: types.CodeType, how: pyversion.LoopEntry, for_iter_offset: int) -> tuple[str, ...]:
    """The cells a 3.12+ inlined comprehension makes before its loop that every item shares (given to its
    body function in the closure). Not those its body makes again (``MAKE_CELL``): 3.12 saves and makes the
    variables of a comprehension nested in it there too, and the nested comprehension makes its own at each
    of its runs, which the body function then does as well."""
    region = _body_region(code, for_iter_offset)
    remade = {i.argval for i in dis.get_instructions(code) if i.offset in region and i.opname == "MAKE_CELL"}
    return tuple(name for name in how.cells if name not in remade)


@lru_cache(maxsize=256)
def build_loop_body_code(code: types.CodeType, for_iter_offset: int, live: tuple[str, ...],
                         below: int = 0, native: bool = False, loop_cells: tuple[str, ...] = (),
                         maybe_unbound: tuple[str, ...] = ()) -> types.CodeType:
    """The loop body function of the loop at ``for_iter_offset``, under whose iterator the stack holds
    ``below`` values (an enclosing loop's iterator; a comprehension's result and the variables it saved):
    they come first among its arguments (the values it never reads may be None).

    Its closure holds the frame's cells (`resume.build_entry_code`'s ``cells_from_closure``), then the
    ``loop_cells``: those a 3.12+ inlined comprehension makes for its variables before its loop, one per run
    of the comprehension, so every item (every closure made in the body) shares it, as in eager code.

    ``native``: the function runs natively, never translated (a comprehension's body: `transform._emit_loop`).
    ``maybe_unbound``: the locals of ``live`` the loop may not have bound yet (received as `runtime.UNBOUND`,
    then unbound in the body: `resume.build_entry_code`); the caller checked that the body binds them before it
    hands them back (`transform._check_bound_when_handed_back`)."""
    exit_offset = loop_exit(code, for_iter_offset)
    offsets = [i.offset for i in dis.get_instructions(code)]
    body_start = offsets[offsets.index(for_iter_offset) + 1]
    region = _body_region(code, for_iter_offset)
    for instr in dis.get_instructions(code):
        if instr.offset in region and instr.opname in _PLAIN_LOCAL_USES and \
                set(instr.argval if isinstance(instr.argval, tuple) else (instr.argval,)) & set(loop_cells):
            # (the body would reach a local slot of that name, not the cell: `shared_loop_cells` leaves out
            # the cells the body makes again, which are the ones it saves)
            raise FallbackError(f"a graph break in a comprehension whose body uses its cell {instr.argval!r} as a "
                                "plain local")

    def edit(body: list, index: dict[int, int]) -> None:
        head = body[index[for_iter_offset]]
        line = head.lineno or code.co_firstlineno
        # Back at the loop head: pop the stand-in iterator and hand the locals back for the next item.
        body[index[for_iter_offset]] = _Block([Instr("POP_TOP", lineno=line),
                                               *_result(CONTINUE, live, line, below)])
        # Reaching the exit inside the body means ``break`` (the iterator was already popped).
        exit_instr = body[index[exit_offset]]
        body[index[exit_offset]] = _Block([*_result(BREAK, live, line, below), exit_instr])
        for offset in region:
            instr = body[index[offset]]
            if isinstance(instr, Instr) and instr.name in ("RETURN_VALUE", "RETURN_CONST"):
                block = _Block()
                ln = instr.lineno

                def emit(name: str, *arg: object) -> None:
                    block.append(Instr(name, *arg, lineno=ln))

                if instr.name == "RETURN_CONST":  # 3.12+
                    emit("LOAD_CONST", RETURN)
                    emit("LOAD_CONST", instr.arg)
                else:
                    emit("LOAD_CONST", RETURN)
                    pyversion.emit_swap_top_two(emit)
                emit("LOAD_CONST", ())
                emit("BUILD_TUPLE", 3)
                emit("RETURN_VALUE")
                body[index[offset]] = block

    role = f"for-loop body at line {_line(code, body_start)}"
    body = build_entry_code(code, body_start, (False,) * (below + 2), live, role, _flatten(edit), len(live) + 4,
                            cells_from_closure=True, closure_cells=loop_cells, maybe_unbound=maybe_unbound)
    derived_from(body, code)  # (its programs are chosen with the frame's: `frame_groups`)
    if native:
        from .skip_files import skip_code

        skip_code(body)
    return body


class _Block(list):
    """Several instructions standing at one position of the body while it is being edited."""


def _flatten(edit):  # type: ignore[no-untyped-def]
    def apply(body: list, index: dict[int, int]) -> None:
        edit(body, index)
        # Expand blocks in place (from the end so earlier positions stay valid for the caller's label).
        for position in sorted((i for i, item in enumerate(body) if isinstance(item, _Block)), reverse=True):
            block = body[position]
            body[position:position + 1] = list(block)
            _shift(index, position, len(block) - 1)

    return apply


def _shift(index: dict[int, int], position: int, by: int) -> None:
    for offset, at in index.items():
        if at > position:
            index[offset] = at + by


def _line(code: types.CodeType, offset: int) -> int | None:
    for instr in dis.get_instructions(code):
        if instr.offset >= offset:
            line = pyversion.instruction_line(instr)
            if line is not None:
                return line
    return None

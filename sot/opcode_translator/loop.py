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
returns ``(flag, value, live_values)``: flag 0 = next item, 1 = ``break``, 2 = ``return value``, 3 = an
exception left the body for a handler around the loop (``value``).

A loop inside a ``try`` or ``with`` block: the handlers around the loop belong to the frame, not to the body.
In the body function, the exception-table entries (3.10: the blocks its prologue sets up again) leading to
them lead instead to a block handing the exception back with the body's locals (flag 3); the generated code
then enters the original at the loop head by raising it there (`resume.build_raising_code`), so the user's
``except``, ``finally`` or ``__exit__`` runs with the locals as they were when it was raised, as in eager code.
An exception raised by the iterator itself, natively, takes the same way.

A comprehension's body function runs natively (`transform._emit_loop`): the comprehension runs as eager
code between the compiled code before and after it, as on 3.10/3.11, where the hook runs the frame of a
comprehension's own function natively.
"""
from __future__ import annotations

import dis
import types
from functools import lru_cache

from bytecode import Instr, Label, TryBegin

from ..errors import FallbackError
from . import pyversion
from .executor.liveness import NamesReadFromLocals, bound_from
from .frame_groups import derived_from
from .resume import build_entry_code, covering_try
from .runtime import values_or_unbound

CONTINUE, BREAK, RETURN, RAISE = 0, 1, 2, 3
# Where the block handing back an exception that leaves a loop body keeps it while it pops the stack.
_EXCEPTION_LOCAL = "__sot_loop_exception"
# Where a loop body function puts a NULL under the loop's iterator when it returns (never read).
_NULL_LOCAL = "__sot_loop_null"
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
    """How the loop is entered (`pyversion.loop_entry`). Loops inside ``try``/``with`` blocks are supported
    (their body hands exceptions back: see the module docstring), but not, on 3.10, a loop inside a running
    ``except`` or ``finally`` handler, whose block cannot be set up again. ``cause`` is the break inside the
    loop."""
    entry = pyversion.loop_entry(code, for_iter_offset)
    if entry.kind == "other":
        raise FallbackError("a graph break in a loop whose iterator is not made right before it")
    if pyversion.HAS_BLOCK_STACK:  # 3.10: no exception table, a block stack
        from .executor.liveness import EXCEPT_HANDLER, block_stacks

        blocks = block_stacks(code).get(for_iter_offset, (0, ()))[1]
        if blocks and blocks[-1][0] == EXCEPT_HANDLER:
            raise FallbackError("Python 3.10: a graph break in a for loop inside an except or finally handler "
                                "is not supported")
    return entry


def caught_around_loop(code: types.CodeType, for_iter_offset: int) -> bool:
    """Whether an exception leaving the loop at ``for_iter_offset`` is caught in the frame (the loop is inside a
    ``try``/``with`` block). The hidden handler of a 3.12+ inlined comprehension, which puts the variables it
    saved back and re-raises, is no ``try`` block: what counts is whether its re-raise is caught."""
    from .executor.liveness import is_protected

    if pyversion.HAS_BLOCK_STACK:
        return is_protected(code, for_iter_offset)
    for start, end, target in pyversion.exception_table(code):
        if start <= for_iter_offset < end:
            return is_protected(code, target) if pyversion.comprehension_cleanup(code, target) else True
    return False


def _result(flag: int, live: tuple[str, ...], lineno: int, below: tuple[bool, ...] = (),
            unsure: tuple[str, ...] = ()) -> list:
    """Instructions returning ``(flag, None, (live...))`` (the dummy iterator was popped before), after
    popping the values under the loop's iterator (``below``: their layout, True for a NULL, which
    ``POP_TOP`` cannot pop: it is stored in a local nothing reads); ``unsure``: as in `_emit_live_values`."""
    out = [Instr("STORE_FAST", _NULL_LOCAL, lineno=lineno) if is_null else Instr("POP_TOP", lineno=lineno)
           for is_null in reversed(below)]

    def emit(name: str, *arg: object) -> None:
        out.append(Instr(name, *arg, lineno=lineno))

    emit("LOAD_CONST", flag)
    emit("LOAD_CONST", None)
    _emit_live_values(emit, live, unsure)
    emit("BUILD_TUPLE", 3)
    emit("RETURN_VALUE")
    return out


def _emit_live_values(emit: pyversion.Emit, live: tuple[str, ...], unsure: tuple[str, ...]) -> None:
    """Push the tuple of the values of the ``live`` locals. When some (``unsure``) may be unbound there (a
    local the loop binds only in its body), they are read out of ``locals()``, with `runtime.UNBOUND` for an
    unbound one, which the function receiving them unbinds again (`resume.build_entry_code`)."""
    if unsure:
        pyversion.emit_callable(emit, lambda: emit("LOAD_CONST", values_or_unbound))
        pyversion.emit_callable(emit, lambda: emit("LOAD_CONST", locals))
        pyversion.emit_call(emit, 0)
        emit("LOAD_CONST", NamesReadFromLocals(live))
        pyversion.emit_call(emit, 2)
        return
    for name in live:
        emit("LOAD_FAST", name)
    emit("BUILD_TUPLE", len(live))


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
                         below: tuple[bool, ...] = (), native: bool = False, loop_cells: tuple[str, ...] = (),
                         maybe_unbound: tuple[str, ...] = ()) -> types.CodeType:
    """The loop body function of the loop at ``for_iter_offset``, under whose iterator the stack holds
    values laid out as ``below``, bottom first (an enclosing loop's iterator; a comprehension's result and
    the variables it saved): they come first among its arguments, but for the NULLs (True), which its
    prologue pushes. A 3.12+ inlined comprehension saves an unbound variable as a NULL, and its hidden
    handler, kept in the body function, puts the saved value back when an exception leaves an item: a None
    passed instead would bind the variable for the user's handler after it.

    Its closure holds the frame's cells (`resume.build_entry_code`'s ``cells_from_closure``), then the
    ``loop_cells``: those a 3.12+ inlined comprehension makes for its variables before its loop, one per run
    of the comprehension, so every item (every closure made in the body) shares it, as in eager code.

    ``native``: the function runs natively, never translated (a comprehension's body: `transform._emit_loop`).
    ``maybe_unbound``: the locals of ``live`` the loop may not have bound yet (received as `runtime.UNBOUND`,
    then unbound in the body: `resume.build_entry_code`); where the body may hand them back still unbound, it
    hands back `runtime.UNBOUND` (`_emit_live_values`)."""
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

    bound = bound_from(code, body_start, frozenset(live) - set(maybe_unbound)) if maybe_unbound else {}

    def unsure_at(offset: int) -> tuple[str, ...]:
        """The locals of ``maybe_unbound`` some path through the body reaches ``offset`` without binding."""
        return tuple(name for name in maybe_unbound if offset in bound and name not in bound[offset])

    def edit(body: list, index: dict[int, int]) -> None:
        head = body[index[for_iter_offset]]
        line = head.lineno or code.co_firstlineno
        # Back at the loop head: pop the stand-in iterator and hand the locals back for the next item.
        body[index[for_iter_offset]] = _Block([Instr("POP_TOP", lineno=line),
                                               *_result(CONTINUE, live, line, below, unsure_at(for_iter_offset))])
        # Reaching the exit inside the body means ``break`` (the iterator was already popped).
        exit_instr = body[index[exit_offset]]
        body[index[exit_offset]] = _Block([*_result(BREAK, live, line, below, unsure_at(exit_offset)), exit_instr])
        # Every return the body function reaches returns from inside the loop, also those outside the body's
        # offsets: 3.12+ places an ``except`` handler of the body after the function's last line, and may jump
        # from a ``break`` to a copy of a short exit (the code before the loop or after it is never reached).
        for position in sorted(set(index.values())):
            instr = body[position]
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
                body[position] = block

    escapes = _EscapeBlocks(live, maybe_unbound, _line(code, body_start) or code.co_firstlineno)

    def edit_and_hand_back_escapes(body: list, index: dict[int, int]) -> None:
        edit(body, index)
        escapes.retarget(body, index[for_iter_offset], code, body_start, comprehension=native)
        body.extend(escapes.instructions())

    role = f"for-loop body at line {_line(code, body_start)}"
    body = build_entry_code(code, body_start, below + (False, False), live, role,
                            _flatten(edit_and_hand_back_escapes), len(live) + 6,
                            cells_from_closure=True, closure_cells=loop_cells, maybe_unbound=maybe_unbound,
                            block_handler=escapes.label if pyversion.HAS_BLOCK_STACK else None)
    derived_from(body, code)  # (its programs are chosen with the frame's: `frame_groups`)
    if native:
        from .skip_files import skip_code

        skip_code(body)
    return body


class _EscapeBlocks:
    """The blocks of a loop body function that hand back an exception leaving the body for a handler around
    the loop: ``(RAISE, exception, live values)``, after popping the stack down to the handler's depth. One
    block per (depth, lasti) of the exception-table entries leading to that handler (3.10: per level of the
    blocks the prologue sets up again, each of which leads to the block of its level)."""

    def __init__(self, live: tuple[str, ...], maybe_unbound: tuple[str, ...], line: int) -> None:
        self.live, self.maybe_unbound, self.line = live, maybe_unbound, line
        self.labels: dict[tuple[int, bool], Label] = {}

    def label(self, depth: int, lasti: bool = False) -> Label:
        return self.labels.setdefault((depth, lasti), Label())

    def retarget(self, body: list, position: int, code: types.CodeType, body_start: int,
                 comprehension: bool = False) -> None:
        """Lead the exceptions that would reach the handler around the loop head (at ``position``) to these
        blocks instead. 3.11+: every exception-table entry to that handler (also those of cleanups inside the
        body re-raising to it); 3.10: one block per level of the block stack at the body's start.
        ``comprehension``: a 3.12+ inlined comprehension's loop, whose head is covered by its hidden handler
        (kept: it puts the saved variables back, in the body function's own locals, then re-raises): the
        handler around that one is the one leaving the loop."""
        if pyversion.HAS_BLOCK_STACK:
            from .executor.liveness import block_stacks

            for _, level in block_stacks(code).get(body_start, (0, ()))[1]:
                self.label(level)
            return
        covering = covering_try(body, position)
        if covering is not None and comprehension:
            hidden = covering.target
            at = next(i for i, item in enumerate(body) if item is hidden)
            while not isinstance(body[at], Instr):  # (the entry covering the handler begins after its label)
                at += 1
            covering = covering_try(body, at)
        if covering is None:
            return
        handler = covering.target
        for item in body:
            if isinstance(item, TryBegin) and item.target is handler:
                item.target = self.label(item.stack_depth, item.push_lasti)

    def instructions(self) -> list:
        out: list = []
        line = self.line

        def emit(name: str, *arg: object) -> None:
            out.append(Instr(name, *arg, lineno=line))

        for (depth, lasti), label in self.labels.items():
            out.append(label)
            pyversion.emit_handler_entry(emit, lambda: emit("STORE_FAST", _EXCEPTION_LOCAL))
            for _ in range(depth + lasti):
                emit("POP_TOP")
            emit("LOAD_CONST", RAISE)
            emit("LOAD_FAST", _EXCEPTION_LOCAL)
            emit("DELETE_FAST", _EXCEPTION_LOCAL)  # (the exception's traceback holds this frame: no cycle)
            # (a local the loop binds later may be unbound wherever the exception left the body)
            _emit_live_values(emit, self.live, self.maybe_unbound)
            emit("BUILD_TUPLE", 3)
            emit("RETURN_VALUE")
        return out


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

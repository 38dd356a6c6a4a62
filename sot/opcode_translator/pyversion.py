"""Everything that differs between the CPython versions sot runs on (3.10, 3.11, 3.12, 3.13).

This is the only module of the translator that looks at ``sys.version_info``. The rest of the code asks
here, in three ways:

* **facts** about the running interpreter's instruction set (module constants, e.g. `NULL_BELOW_CALLABLE`);
* **decoders** for the few instruction arguments whose meaning changed (`pushes_null`,
  `compare_converts_to_bool`, `instruction_line`, ...);
* **emit helpers** that spell the few instruction sequences the code generator writes (a call, a NULL,
  a function with a closure, a resume prologue), each taking the generator's ``emit(name, arg)`` function.

Handlers for opcodes that exist only in some versions are ordinary handlers in ``executor/handlers/``, with
their family (registering a handler for an opname the running version lacks is harmless). What each
version's opcodes are, and which of them fall back, is in `sot.opcodes`.

Summary of the differences that matter to us (a "NULL" is the marker ``CALL`` uses to tell a plain call from a
method call):

======================  ==================  ==================  ==================  =====================
                        3.10                3.11                3.12                3.13
======================  ==================  ==================  ==================  =====================
call                    CALL_FUNCTION[_KW]  PRECALL + CALL      CALL                CALL
                        CALL_METHOD
keyword names           tuple on the stack  KW_NAMES (consts)   KW_NAMES (consts)   CALL_KW, tuple on
                        (CALL_FUNCTION_KW)                                          the stack
NULL of a call          none (LOAD_METHOD   below the callable  below the callable  above the callable
                        pushes one below)
LOAD_GLOBAL arg         name index          low bit: + NULL     low bit: + NULL     low bit: + NULL
LOAD_ATTR arg           name index          name index          low bit: method     low bit: method
                                            (LOAD_METHOD)       load                load
CALL_FUNCTION_EX        no NULL             NULL below          NULL below          NULL above
MAKE_FUNCTION           code, qualname,     code, flags         code, flags         code only; then
                        flags                                                       SET_FUNCTION_ATTRIBUTE
cells                   made by the frame   MAKE_CELL,          same as 3.11        same; a closure is
                                            COPY_FREE_VARS                          built with LOAD_FAST
blocks / exceptions     SETUP_* block stack exception table     exception table     exception table
FOR_ITER exhausted      jumps to target     jumps to target     skips END_FOR       skips END_FOR, POP_TOP
COMPARE_OP arg          op                  op                  op << 4             op << 5, bit 16:
                                                                                    result made a bool
conditional jumps       absolute, any value relative, any value relative, any value relative, bool only
                                                                                    (TO_BOOL before)
line of an instruction  starts_line         positions.lineno    positions.lineno    positions.lineno
comprehension           own code object     own code object     inlined (PEP 709):  inlined (PEP 709)
                                                                LOAD_FAST_AND_CLEAR
                                                                saves its variables
                                                                on the stack, a
                                                                STORE_FAST puts
                                                                each back
======================  ==================  ==================  ==================  =====================
"""
from __future__ import annotations

import dis
import functools
import gc
import sys
import types
import weakref
from typing import Any, Callable, NamedTuple, Sequence

PY: tuple[int, int] = sys.version_info[:2]
SUPPORTED_PYTHONS: tuple[tuple[int, int], ...] = ((3, 10), (3, 11), (3, 12), (3, 13))

# An ``emit(name, arg=<none>)`` function of the code generator.
Emit = Callable[..., None]

# -- calls -------------------------------------------------------------------------------------------------
#: 3.11 only: every ``CALL`` is preceded by ``PRECALL`` with the same argument.
HAS_PRECALL = PY == (3, 11)
#: 3.11, 3.12: keyword names of the next ``CALL`` come from a ``KW_NAMES`` instruction (a constant).
HAS_KW_NAMES = (3, 11) <= PY < (3, 13)
#: Where a call's NULL sits relative to the callable: below it (3.11, 3.12) or above it (3.13). On 3.10 only
#: ``LOAD_METHOD``/``CALL_METHOD`` use one, below the callable.
NULL_BELOW_CALLABLE = PY < (3, 13)
#: Whether ``CALL``/``CALL_FUNCTION_EX`` expect a NULL (or ``self``) slot next to the callable (3.11+).
CALL_HAS_NULL_SLOT = PY >= (3, 11)

# -- loads -------------------------------------------------------------------------------------------------
#: ``LOAD_GLOBAL``'s low argument bit asks for a NULL next to the global (3.11+).
LOAD_GLOBAL_NULL_BIT = PY >= (3, 11)
#: ``LOAD_ATTR``'s low argument bit makes it a method load, like the older ``LOAD_METHOD`` (3.12+).
LOAD_ATTR_METHOD_BIT = PY >= (3, 12)

# -- frames, cells and functions ---------------------------------------------------------------------------
#: Cells are created by ``MAKE_CELL`` and free variables copied by ``COPY_FREE_VARS`` in the code's prologue
#: (3.11+); on 3.10 the frame has them before the first instruction runs.
CELLS_MADE_BY_BYTECODE = PY >= (3, 11)
#: Opnames of the prologue every 3.11+ code object starts with (empty on 3.10).
PROLOGUE_OPNAMES: tuple[str, ...] = ("COPY_FREE_VARS", "MAKE_CELL", "RESUME") if PY >= (3, 11) else ()
#: 3.13: ``LOAD_CLOSURE`` became ``LOAD_FAST`` on the cell's slot, so ``LOAD_FAST`` may push a cell.
LOAD_FAST_MAY_PUSH_CELL = PY >= (3, 13)
#: 3.10: ``MAKE_FUNCTION`` also pops the qualified name (pushed after the code object).
MAKE_FUNCTION_POPS_QUALNAME = PY < (3, 11)
#: Before 3.13 ``MAKE_FUNCTION``'s argument says which of defaults, kwdefaults, annotations and closure are
#: on the stack; 3.13 makes a bare function and sets each with ``SET_FUNCTION_ATTRIBUTE``.
MAKE_FUNCTION_HAS_FLAGS = PY < (3, 13)
#: Flag values of ``MAKE_FUNCTION`` (before 3.13) and ``SET_FUNCTION_ATTRIBUTE`` (3.13): the same bits.
FUNCTION_DEFAULTS = 0x01
FUNCTION_KWDEFAULTS = 0x02
FUNCTION_ANNOTATIONS = 0x04
FUNCTION_CLOSURE = 0x08

# -- control flow ------------------------------------------------------------------------------------------
#: 3.10: ``try``/``with`` push entries on a block stack (``SETUP_*``/``POP_BLOCK``); 3.11+ use an exception
#: table instead, and code may be entered anywhere.
HAS_BLOCK_STACK = PY < (3, 11)
#: The instruction entering a ``with`` block, right after its manager is made.
WITH_ENTRY = "SETUP_WITH" if PY < (3, 11) else "BEFORE_WITH"
#: How many instructions after its target an exhausted ``FOR_ITER`` skips (the ``END_FOR`` of 3.12, the
#: ``END_FOR``/``POP_TOP`` pair of 3.13), i.e. where execution really continues.
FOR_ITER_EXIT_SKIP = {(3, 12): 1, (3, 13): 2}.get(PY, 0)
#: How many values ``END_FOR`` pops when it does run (3.12: two; 3.13: one, a ``POP_TOP`` follows).
END_FOR_POPS = 2 if PY == (3, 12) else 1
#: 3.10: ``MATCH_KEYS`` and ``MATCH_CLASS`` also push a success flag (True/False) above their result, and
#: ``MATCH_CLASS`` leaves the subject in place on failure (3.11+ push the result or None alone).
MATCH_PUSHES_SUCCESS_FLAG = PY < (3, 11)
#: 3.11: when the delegate of ``yield from`` returns, ``SEND`` replaces the delegate with the returned value;
#: 3.12+ keep the delegate under it and ``END_SEND`` (the jump target) removes it.
SEND_POPS_DELEGATE_ON_RETURN = PY < (3, 12)
#: 3.13: ``POP_JUMP_IF_TRUE``/``POP_JUMP_IF_FALSE`` require an exact bool (the compiler puts ``TO_BOOL`` or a
#: bool-producing ``COMPARE_OP`` before them); generated code must do the same.
JUMP_NEEDS_BOOL = PY >= (3, 13)
#: A local read that raises UnboundLocalError when unbound (3.12+ LOAD_FAST assumes the compiler proved it
#: bound).
LOAD_FAST_CHECKED = "LOAD_FAST_CHECK" if PY >= (3, 12) else "LOAD_FAST"


def unbound_local_message(name: str) -> str:
    """The message of the UnboundLocalError a read or ``del`` of the unbound local ``name`` raises."""
    if PY >= (3, 11):
        return f"cannot access local variable {name!r} where it is not associated with a value"
    return f"local variable {name!r} referenced before assignment"
#: The conditional jumps a value's truth decides.
TRUTH_JUMPS = frozenset({"POP_JUMP_IF_TRUE", "POP_JUMP_IF_FALSE", "POP_JUMP_FORWARD_IF_TRUE",
                         "POP_JUMP_FORWARD_IF_FALSE", "POP_JUMP_BACKWARD_IF_TRUE", "POP_JUMP_BACKWARD_IF_FALSE"})
#: The unconditional jumps.
UNCONDITIONAL_JUMPS = frozenset({"JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT",
                                 "JUMP_ABSOLUTE", "JUMP"})
#: Instructions after which execution never falls through to the next one.
NO_FALLTHROUGH = UNCONDITIONAL_JUMPS | {"RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE"}
#: Opcodes (numbers) whose argument is a jump target (``dis`` gives it as an offset in ``argval``).
JUMP_OPCODES = frozenset(getattr(dis, "hasjump", ())) | frozenset(dis.hasjrel) | frozenset(dis.hasjabs)

# -- objects -----------------------------------------------------------------------------------------------
#: Up to 3.12, C types whose ``__setattr__`` is the generic one (``object.__setattr__``'s) still list it as a
#: slot wrapper of their own (3.13 inherits ``object``'s): setting an attribute through them is a plain store,
#: e.g. on a ``types.SimpleNamespace`` or an exception.
GENERIC_SETATTR_WRAPPERS = frozenset(cls.__dict__["__setattr__"] for cls in (types.SimpleNamespace, BaseException)
                                     if "__setattr__" in cls.__dict__)


# -- decoders ----------------------------------------------------------------------------------------------
def instruction_line(instr: dis.Instruction) -> int | None:
    """The source line of ``instr``, or None when the instruction does not start or carry one."""
    positions = getattr(instr, "positions", None)
    if positions is not None:
        return positions.lineno
    return instr.starts_line  # 3.10: only the first instruction of a line has it


def line_numbers(code: types.CodeType) -> dict[int, int | None]:
    """The source line of every instruction offset of ``code`` (3.10's ``dis`` gives it only where a line
    starts, which leaves an instruction reached by a jump without one)."""
    lines: dict[int, int | None] = {}
    for start, end, line in code.co_lines():
        for offset in range(start, end, 2):
            lines[offset] = line
    return lines


def pushes_null(instr: dis.Instruction) -> bool:
    """Whether a ``LOAD_GLOBAL``/``LOAD_ATTR``/``LOAD_SUPER_ATTR`` also pushes a NULL (or ``self``) for a
    following call."""
    if instr.opname == "LOAD_GLOBAL":
        return LOAD_GLOBAL_NULL_BIT and bool(instr.arg & 1)
    if instr.opname in ("LOAD_ATTR", "LOAD_SUPER_ATTR"):
        return LOAD_ATTR_METHOD_BIT and bool(instr.arg & 1)
    return instr.opname == "LOAD_METHOD"


def compare_converts_to_bool(instr: dis.Instruction) -> bool:
    """3.13: ``COMPARE_OP``'s argument bit 16 makes the result an exact bool (for a following jump)."""
    return PY >= (3, 13) and bool(instr.arg & 16)


def call_operand_count(instr: dis.Instruction) -> int | None:
    """How many stack values a call instruction consumes (callable, NULL/self, arguments, names), or None
    when ``instr`` is not a call."""
    name, arg = instr.opname, instr.arg
    if name == "CALL":
        return arg + 2
    if name == "CALL_KW":
        return arg + 3
    if name == "CALL_FUNCTION":
        return arg + 1
    if name in ("CALL_FUNCTION_KW", "CALL_METHOD"):
        return arg + 2
    if name == "CALL_FUNCTION_EX":
        return (3 if CALL_HAS_NULL_SLOT else 2) + (arg & 1)
    return None


def exception_table(code: types.CodeType) -> list[tuple[int, int, int]]:
    """``(start, end, target)`` offsets of the exception table (3.11+); empty on 3.10, whose handlers are
    found through the block stack."""
    return [(start, end, target) for start, end, target, _, _ in exception_table_entries(code)]


def exception_table_entries(code: types.CodeType) -> list[tuple[int, int, int, int, bool]]:
    """The exception table (3.11+; empty on 3.10) in full: ``(start, end, target, depth, lasti)``, where the
    handler at ``target`` starts with the stack cut to ``depth`` values, then the offset of the raising
    instruction when ``lasti``, then the exception."""
    parse = getattr(dis, "_parse_exception_table", None)
    if parse is None:
        return []
    return [(entry.start, entry.end, entry.target, entry.depth, entry.lasti) for entry in parse(code)]


_COMPREHENSION_RESULTS = frozenset({"BUILD_LIST", "BUILD_SET", "BUILD_MAP"})


class LoopEntry(NamedTuple):
    """How the loop whose head is a ``FOR_ITER`` is entered: ``setup`` is the offset of the instruction right
    before the head (where a translation stops to run the loop natively), and ``kind`` what it leaves:

    * ``"statement"``: ``GET_ITER`` of a ``for`` statement; the iterator is made from the value on top.
    * ``"inlined"``: 3.12+, a list, set or dict comprehension inlined into the code (PEP 709): its
      ``GET_ITER`` (at ``get_iter``) is followed by a ``LOAD_FAST_AND_CLEAR`` saving each of its variables
      (``saved``, bottom first) and by the empty result; ``setup`` is the ``SWAP 2`` putting the result
      under the iterator. (3.10/3.11 make a comprehension a function of its own, called with its iterator,
      whose frame the hook runs natively: a break inside it is a break at that call.)
    * ``"other"``: anything else (not supported).

    ``cells``: the variables of the inlined comprehension that are cells (captured by a closure made in it),
    each made anew by a ``MAKE_CELL`` after its save: one cell per run of the comprehension, shared by every
    item (3.10/3.11: the cells of the comprehension's own function)."""

    setup: int
    kind: str
    saved: tuple[str, ...] = ()
    get_iter: int | None = None
    cells: tuple[str, ...] = ()

    @property
    def saved_on_stack(self) -> tuple[str, ...]:
        """The saved variables in their order on the stack, bottom first: the ``SWAP n+1`` that puts the
        iterator back on top moves the last one saved to the bottom (``i, x`` saved: ``x, i``)."""
        return self.saved[-1:] + self.saved[:-1]


def loop_entry(code: types.CodeType, for_iter_offset: int) -> LoopEntry:
    """The `LoopEntry` of the loop at ``for_iter_offset``. ``EXTENDED_ARG`` prefixes are no instructions of
    their own here: a ``FOR_ITER`` jumping past a long body (over 255 code units) carries one, and the
    ``GET_ITER`` is still the instruction before it."""
    instructions = [instr for instr in dis.get_instructions(code) if instr.opname != "EXTENDED_ARG"]
    at = [instr.offset for instr in instructions].index(for_iter_offset)
    before = instructions[at - 1]
    if before.opname == "GET_ITER":
        return LoopEntry(before.offset, "statement", get_iter=before.offset)
    if PY >= (3, 12) and before.opname == "SWAP" and before.arg == 2 and at >= 4 \
            and instructions[at - 2].opname in _COMPREHENSION_RESULTS and instructions[at - 2].arg == 0 \
            and instructions[at - 3].opname == "SWAP":
        saved: list[str] = []
        cells: list[str] = []
        i = at - 4
        while i >= 0 and instructions[i].opname in ("LOAD_FAST_AND_CLEAR", "MAKE_CELL"):
            (cells if instructions[i].opname == "MAKE_CELL" else saved).insert(0, instructions[i].argval)
            i -= 1
        if i >= 0 and instructions[i].opname == "GET_ITER" and saved:
            return LoopEntry(before.offset, "inlined", tuple(saved), instructions[i].offset, tuple(cells))
    return LoopEntry(before.offset, "other")


def loop_begun_by(code: types.CodeType, get_iter_offset: int) -> tuple[int, LoopEntry] | None:
    """``(for_iter_offset, entry)`` of the ``for`` loop (a statement or a 3.12+ inlined comprehension) whose
    iterator the ``GET_ITER`` at ``get_iter_offset`` makes; None when that iterator goes elsewhere."""
    instructions = [instr for instr in dis.get_instructions(code) if instr.opname != "EXTENDED_ARG"]
    at = [instr.offset for instr in instructions].index(get_iter_offset)
    for instr in instructions[at + 1:]:
        if instr.opname == "FOR_ITER":
            entry = loop_entry(code, instr.offset)
            return (instr.offset, entry) if entry.get_iter == get_iter_offset else None
        if instr.opname not in ("LOAD_FAST_AND_CLEAR", "MAKE_CELL", "SWAP", *_COMPREHENSION_RESULTS):
            return None
    return None


def comprehension_cleanup(code: types.CodeType, target: int) -> bool:
    """3.12+: whether the exception handler at ``target`` is the hidden one of an inlined comprehension, which
    puts its saved variables back and re-raises (``SWAP 2, POP_TOP, SWAP n, STORE_FAST..., RERAISE 0``): no
    ``try`` block of the user's."""
    if PY < (3, 12):
        return False
    instructions = list(dis.get_instructions(code))
    at = [instr.offset for instr in instructions].index(target)
    head = instructions[at:at + 3]
    if [(i.opname, i.arg) for i in head[:2]] != [("SWAP", 2), ("POP_TOP", None)] or len(head) < 3 \
            or head[2].opname != "SWAP":
        return False
    for instr in instructions[at + 3:]:
        if instr.opname == "RERAISE":
            return instr.arg == 0
        if instr.opname not in ("STORE_FAST", "STORE_FAST_STORE_FAST", "STORE_DEREF"):
            return False
    return False


_qualnames: "weakref.WeakKeyDictionary[types.CodeType, str]" = weakref.WeakKeyDictionary()


def remember_qualname(code: types.CodeType, qualname: str) -> None:
    """Record the qualified name of a code object sot made (3.10 cannot store it in the code)."""
    if not hasattr(code, "co_qualname"):
        try:
            _qualnames[code] = qualname
        except TypeError:  # (a code hashes by its constants: one holding a dict cannot be a key)
            pass


def known_qualname(code: types.CodeType) -> str | None:
    """The qualified name stored in ``code`` (3.11+) or recorded for it (`remember_qualname`, 3.10), or None:
    cheap, for every frame of a traceback."""
    qualname = getattr(code, "co_qualname", None)
    if qualname is not None:
        return qualname
    try:
        return _qualnames.get(code)
    except TypeError:  # (unhashable, see remember_qualname)
        return None


def code_qualname(code: types.CodeType) -> str:
    """The qualified name of the function of ``code`` (``Net.forward``), for reports and logs.

    3.11+ store it in the code object; on 3.10 it is read from a function object using the code (found once
    through the garbage collector, then cached), or is the plain name when there is none."""
    qualname = known_qualname(code)
    if qualname is None:
        qualname = code.co_name
        for referrer in gc.get_referrers(code):
            if isinstance(referrer, types.FunctionType) and referrer.__code__ is code:
                qualname = referrer.__qualname__
                break
        remember_qualname(code, qualname)
    return qualname


# -- emit helpers ------------------------------------------------------------------------------------------
def call_without_self(fn: Any, *args: Any) -> Any:
    """3.10's stand-in for a NULL below a callable: ``CALL_METHOD`` calls it with the callable first."""
    return fn(*args)


def emit_push_null(emit: Emit) -> None:
    """Push the NULL a pending call expects (a simulated NULL rebuilt in generated code).

    3.10 has no instruction pushing NULL, and there a NULL is only ever consumed by ``CALL_METHOD``, which
    calls what is below the callable with the callable as first argument: `call_without_self` does it."""
    if PY < (3, 11):
        emit("LOAD_CONST", call_without_self)
    else:
        emit("PUSH_NULL")


def emit_callable(emit: Emit, push: Callable[[], None]) -> None:
    """Push a callable, with the NULL `emit_call` needs next to it: ``push()`` emits the callable itself."""
    if CALL_HAS_NULL_SLOT and NULL_BELOW_CALLABLE:
        emit("PUSH_NULL")
    push()
    if CALL_HAS_NULL_SLOT and not NULL_BELOW_CALLABLE:
        emit("PUSH_NULL")


def emit_call(emit: Emit, argc: int, kw_names: tuple[str, ...] = ()) -> None:
    """Call the callable pushed by `emit_callable` with ``argc`` arguments above it, the last
    ``len(kw_names)`` of them by keyword."""
    if PY < (3, 11):
        if kw_names:
            emit("LOAD_CONST", tuple(kw_names))
            emit("CALL_FUNCTION_KW", argc)
        else:
            emit("CALL_FUNCTION", argc)
        return
    if PY >= (3, 13):
        if kw_names:
            emit("LOAD_CONST", tuple(kw_names))
            emit("CALL_KW", argc)
        else:
            emit("CALL", argc)
        return
    if kw_names:
        emit("KW_NAMES", tuple(kw_names))
    if HAS_PRECALL:
        emit("PRECALL", argc)
    emit("CALL", argc)


def load_global_arg(name: str, push_null: bool = False) -> Any:
    """The `bytecode` argument of ``LOAD_GLOBAL name``."""
    return (push_null, name) if LOAD_GLOBAL_NULL_BIT else name


def load_attr_arg(name: str, method: bool = False) -> Any:
    """The `bytecode` argument of a plain (``method=False``) ``LOAD_ATTR name``."""
    return (method, name) if LOAD_ATTR_METHOD_BIT else name


def emit_dup_top(emit: Emit) -> None:
    """Duplicate the top of the stack."""
    if PY < (3, 11):
        emit("DUP_TOP")
    else:
        emit("COPY", 1)


def emit_load_closure(emit: Emit, var: Any) -> None:
    """Push the cell of ``var`` (a `bytecode` ``CellVar``/``FreeVar``) for a closure tuple."""
    # (3.13: LOAD_CLOSURE is gone; LOAD_FAST on the cell's slot, which `bytecode` spells with the CellVar or
    # FreeVar itself; a plain name would make a new, unbound local)
    emit("LOAD_FAST" if PY >= (3, 13) else "LOAD_CLOSURE", var)


def restore_cell_loads(items: list, cellvars: Sequence[str], freevars: Sequence[str]) -> None:
    """Give the loads of cells decoded as plain locals their `bytecode` ``CellVar``/``FreeVar`` back.

    3.13: ``LOAD_CLOSURE`` became ``LOAD_FAST`` of the cell's slot, which `bytecode` (0.19) decodes with a
    plain name. Re-encoded with the same cells that is the same slot, but in code rebuilt around other cells
    (a resume function receiving the frame's cells as free variables) the name would become a new, unbound
    local, and the closure tuple would hold a NULL. Earlier versions decode ``LOAD_CLOSURE`` with the cell."""
    if PY < (3, 13):
        return
    from bytecode import CellVar, FreeVar, Instr

    cells, frees = set(cellvars), set(freevars)
    for item in items:
        if isinstance(item, Instr) and item.name == "LOAD_FAST" and isinstance(item.arg, str):
            if item.arg in cells:
                item.arg = CellVar(item.arg)
            elif item.arg in frees:
                item.arg = FreeVar(item.arg)


def emit_make_function(emit: Emit, code: types.CodeType, has_closure: bool) -> None:
    """Make a function of ``code``; when ``has_closure`` the closure tuple is already on the stack."""
    emit("LOAD_CONST", code)
    if MAKE_FUNCTION_POPS_QUALNAME:
        emit("LOAD_CONST", code_qualname(code))
    if MAKE_FUNCTION_HAS_FLAGS:
        emit("MAKE_FUNCTION", FUNCTION_CLOSURE if has_closure else 0)
    else:
        emit("MAKE_FUNCTION")
        if has_closure:
            emit("SET_FUNCTION_ATTRIBUTE", FUNCTION_CLOSURE)


def emit_prologue(emit: Emit, n_freevars: int, cellvars: Sequence[str], cell_var: Callable[[str], Any]) -> None:
    """The prologue of a new entry into a code object (a resume function): copy its ``n_freevars`` free
    variables, make its ``cellvars`` (``cell_var(name)`` gives the `bytecode` argument), and ``RESUME``.
    Nothing on 3.10."""
    if not CELLS_MADE_BY_BYTECODE:
        return
    if n_freevars:
        emit("COPY_FREE_VARS", n_freevars)
    for name in cellvars:
        emit("MAKE_CELL", cell_var(name))
    emit("RESUME", 0)


#: ``locals()`` in a function returns the frame's one dict, updated in place at each call (a variable unbound
#: since is removed from it, keys the user added stay); 3.13 returns a new snapshot each time (PEP 667).
LOCALS_DICT_PER_FRAME = PY < (3, 13)


def locals_slots(code: types.CodeType) -> tuple[tuple[str, bool | None], ...]:
    """The variables ``locals()`` of a frame of ``code`` reads, in the order of the dict it makes, each with
    whether it lives in a cell (a cell or free variable: True) or a fast local (False). 3.10 lists every fast
    local first, an argument that is also a cell included, with an always empty fast slot (None: it lives in
    its cell, listed with the cells after, so an update removes it and adds it back last); 3.11+ lists the
    locals in one sequence with the cells in it."""
    in_cells = set(code.co_cellvars) | set(code.co_freevars)
    if PY < (3, 11):
        return (*((name, None if name in in_cells else False) for name in code.co_varnames),
                *((name, True) for name in code.co_cellvars + code.co_freevars))
    return (*((name, name in in_cells) for name in code.co_varnames),
            *((name, True) for name in code.co_cellvars if name not in code.co_varnames),
            *((name, True) for name in code.co_freevars))


@functools.lru_cache(maxsize=256)
def super_without_positional_parameter(code: types.CodeType) -> bool:
    """``code`` may call ``super()`` without arguments though it has no positional parameter (``def f(*args)``,
    a nested function of a method): eager raises ``RuntimeError``; a function entered somewhere else in it (a
    resume function, whose first locals are the stack it receives) would find an instance."""
    return "__class__" in code.co_freevars and code.co_argcount == 0 and "super" in code.co_names


def argumentless_super_offsets(code: types.CodeType) -> frozenset[int]:
    """The offsets of the ``super()`` calls without arguments of ``code`` (3.12+: their ``LOAD_SUPER_ATTR``;
    before, the ``LOAD_GLOBAL super`` of the call). Such a call finds its class and instance implicitly, in
    the ``__class__`` cell and the frame's first local (the first argument), which a function entered
    somewhere else (a resume function, whose first locals are the stack it receives) does not have there."""
    if not ("__class__" in code.co_freevars and code.co_argcount > 0 and "super" in code.co_names):
        return frozenset()
    instructions = [instr for instr in dis.get_instructions(code) if instr.opname != "CACHE"]
    offsets = set()
    for index, instr in enumerate(instructions):
        if instr.opname == "LOAD_SUPER_ATTR" and not instr.arg & 2:
            offsets.add(instr.offset)
        elif instr.opname == "LOAD_GLOBAL" and instr.argval == "super":
            calls = [call.opname for call in instructions[index + 1:index + (3 if PY == (3, 11) else 2)]
                     if call.arg == 0]
            if calls in (["PRECALL", "CALL"], ["CALL_FUNCTION"]):
                offsets.add(instr.offset)
    return frozenset(offsets)


def make_super_calls_explicit(body: list, first_argument: Any) -> None:
    """Rewrite every ``super()`` of the `bytecode` items ``body`` into ``super(__class__, <first argument>)``
    (``first_argument``: the name or `CellVar` of the original's first argument, which must be a local of
    the new function). 3.12+ already loads both for ``LOAD_SUPER_ATTR``: its flag to pass them is set;
    before, the two loads are inserted before the call."""
    from bytecode import FreeVar, Instr

    load_first = "LOAD_DEREF" if not isinstance(first_argument, str) else "LOAD_FAST"
    index = 0
    while index < len(body):
        item = body[index]
        index += 1
        if not isinstance(item, Instr):
            continue
        if item.name == "LOAD_SUPER_ATTR" and isinstance(item.arg, tuple) and not item.arg[1]:
            item.arg = (item.arg[0], True, *item.arg[2:])
            continue
        if item.name != "LOAD_GLOBAL" or (item.arg[1] if isinstance(item.arg, tuple) else item.arg) != "super":
            continue
        calls = body[index:index + (2 if PY == (3, 11) else 1)]
        if not all(isinstance(call, Instr) and call.arg == 0 for call in calls) or \
                [call.name for call in calls] not in (["PRECALL", "CALL"], ["CALL_FUNCTION"]):
            continue  # (``super`` read, not called without arguments)
        body[index:index] = [Instr("LOAD_DEREF", FreeVar("__class__"), location=item.location),
                             Instr(load_first, first_argument, location=item.location)]
        for call in calls:
            call.arg = 2
        index += 2 + len(calls)


def plain_attribute_arg(arg: Any) -> Any:
    """The `bytecode` argument of a ``LOAD_ATTR``/``LOAD_SUPER_ATTR`` (3.12+: ``(method, ..., name)``) with
    the method bit cleared: the instruction then pushes the bound attribute alone."""
    return (False, *arg[1:]) if isinstance(arg, tuple) else arg


def emit_jump(emit: Emit, label: Any, backward: bool = False) -> None:
    """An unconditional jump to ``label`` (a `bytecode` Label), which is before it when ``backward``."""
    if backward:
        emit("JUMP_ABSOLUTE" if PY < (3, 11) else "JUMP_BACKWARD", label)
    else:
        emit("JUMP_FORWARD", label)


def emit_pop_jump_forward_if(emit: Emit, truth: bool, label: Any) -> None:
    """Pop the top of the stack and jump forward to ``label`` if its truth is ``truth``."""
    if JUMP_NEEDS_BOOL:
        emit("TO_BOOL")
    if PY == (3, 11):
        emit("POP_JUMP_FORWARD_IF_TRUE" if truth else "POP_JUMP_FORWARD_IF_FALSE", label)
    else:
        emit("POP_JUMP_IF_TRUE" if truth else "POP_JUMP_IF_FALSE", label)


def emit_for_iter_exit(emit: Emit) -> None:
    """What must stand at the exhaustion target of a ``FOR_ITER`` (3.12+: the ``END_FOR`` it skips, and the
    ``POP_TOP`` after it on 3.13); execution continues after it."""
    if PY >= (3, 12):
        emit("END_FOR")
    if PY >= (3, 13):
        emit("POP_TOP")


def begin_exception_region(add: Callable[[Any], None], handler: Any, lineno: int) -> Any:
    """Start a region of generated code whose exceptions go to ``handler`` (a `bytecode` Label) with an empty
    stack. Returns what `end_exception_region` needs. 3.10: a ``SETUP_FINALLY`` block; 3.11+: an
    exception-table entry."""
    import bytecode  # (not at import: this module must load on unsupported Pythons to say so)

    if HAS_BLOCK_STACK:
        add(bytecode.Instr("SETUP_FINALLY", handler, lineno=lineno))
        return handler
    entry = bytecode.TryBegin(handler, push_lasti=False)
    add(entry)
    return entry


def end_exception_region(add: Callable[[Any], None], region: Any, lineno: int, first: bool) -> None:
    """End the region at the start of each path leaving it (``first``: the fall-through path, right after
    the region's last instruction; later paths are jump targets placed after it)."""
    import bytecode

    if HAS_BLOCK_STACK:
        add(bytecode.Instr("POP_BLOCK", lineno=lineno))
    elif first:
        add(bytecode.TryEnd(region))


def emit_handler_entry(emit: Emit, store_exception: Callable[[], None]) -> None:
    """At the handler of `begin_exception_region`: store the exception (``store_exception`` emits the store
    of the top of the stack) and leave the stack empty, with the thread's handled exception unchanged.
    3.10 enters with (previous traceback, value, type, traceback, value, type) and a running-handler block,
    which ``POP_EXCEPT`` removes (restoring the previous exception info)."""
    if HAS_BLOCK_STACK:
        emit("POP_TOP")
        store_exception()
        emit("POP_TOP")
        emit("POP_EXCEPT")
    else:
        store_exception()


def emit_native_with_entry(codegen: Any) -> None:
    """Enter, in generated code, the ``with`` block of the manager on top of the stack, leaving its
    ``__exit__`` and what ``__enter__`` returned (on top), as `WITH_ENTRY` does, without the block itself: the
    resume function continuing in the block sets that up again. 3.11+: ``BEFORE_WITH``, which pushes no block.
    3.10: ``SETUP_WITH`` also pushes a block whose handler is in the original code, so a runtime helper
    (`runtime.enter_with`) enters the manager instead."""
    if not HAS_BLOCK_STACK:
        codegen.emit("BEFORE_WITH")
        return
    from .runtime import enter_with

    codegen.load_callable_const(enter_with)
    codegen.emit("ROT_TWO")
    codegen.call(1)
    codegen.emit("UNPACK_SEQUENCE", 2)  # (the first item ends on top)


def emit_swap_top_two(emit: Emit) -> None:
    if PY < (3, 11):
        emit("ROT_TWO")
    else:
        emit("SWAP", 2)


#: 3.13's super-instructions: two local-variable instructions in one, each index in 4 bits.
SUPER_INSTRUCTIONS = {"LOAD_FAST_LOAD_FAST": ("LOAD_FAST", "LOAD_FAST"),
                      "STORE_FAST_LOAD_FAST": ("STORE_FAST", "LOAD_FAST"),
                      "STORE_FAST_STORE_FAST": ("STORE_FAST", "STORE_FAST")}


def split_super_instructions(items: list) -> list:
    """The `bytecode` items with 3.13's super-instructions split in two plain ones.

    Needed when copied code gets new local indices (a resume function's arguments come first): `bytecode`
    (0.19) packs a second index of 16 wrongly (it overflows into the first), which silently swaps locals."""
    if not SUPER_INSTRUCTIONS.keys() & {getattr(item, "name", None) for item in items}:
        return items
    from bytecode import Instr

    out = []
    for item in items:
        pair = SUPER_INSTRUCTIONS.get(getattr(item, "name", None)) if isinstance(item, Instr) else None
        if pair is None:
            out.append(item)
        else:
            out += [Instr(pair[0], item.arg[0], location=item.location),
                    Instr(pair[1], item.arg[1], location=item.location)]
    return out


def emit_truth_jump_prefix(emit: Emit, opname: str) -> None:
    """What must precede a natively run conditional jump so it sees the value it expects (3.13: a bool)."""
    if JUMP_NEEDS_BOOL and opname in TRUTH_JUMPS:
        emit("TO_BOOL")


def unsupported_python_message() -> str | None:
    """Why the running interpreter is not supported, or None when it is."""
    if PY in SUPPORTED_PYTHONS and sys.implementation.name == "cpython":
        return None
    supported = ", ".join(f"{major}.{minor}" for major, minor in SUPPORTED_PYTHONS)
    return (f"sot supports CPython {supported}; this is {sys.implementation.name} "
            f"{sys.version_info.major}.{sys.version_info.minor}")

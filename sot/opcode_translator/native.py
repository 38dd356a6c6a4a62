"""Entries that come to run the original code natively, once every piece of them turned out to run eagerly.

A translated frame whose graphs are all run eagerly (below ``min_graph_size``, or the cost model found the
compiled program slower than replaying its statements: `CompiledProgram.choice`) gains nothing from its
generated code, and a graph break makes it pay twice: the generated code (replay, list of outputs, a new
resume function per call) and a second hooked, guarded frame for the rest. Such an entry is switched to the
original code, behind the same guard (`replace_entry_code`; a change of the inputs still misses and
translates again), and the hook then runs the frame itself (no shadow frame).

For a graph break, each path the breaking instruction continues on (the next instruction, the jump target)
had its own resume function. A path whose resume function runs natively in every entry it has is simply
the original code going on (resume functions are shared by the entries of a frame that break at the same
place, so an entry translated later, e.g. for another dtype, takes that as known too). A path whose resume
function is translated to something else, or was never called yet (a branch not taken so far), keeps
calling it: the switched code is the original one with a small trampoline at that point ("pass the stack
and the live locals to the resume function and return what it returns", what the generated code did
there), so that a branch taken for the first time later is still translated, and keeps its compiled
graphs.

Whether the entry switches is decided again whenever something it depends on changes: a program's cost model
chooses (`CHOICE_LISTENERS`), a resume function gets an entry (the callback, `entry_added`), or one is
switched. Frames that inlined calls (user functions, dunders) are never switched: natively, each of those
calls would become a hooked, guarded frame of its own, which can cost more than the replay saves.

What runs is always the original code or the translation of a part of it, so results, gradients, side
effects and exceptions are eager's either way. In ``sot.stats()`` a switched entry still counts one cache
hit per call; a path run natively no longer calls (nor counts a hit for) its resume function.
"""
from __future__ import annotations

import dataclasses
import functools
import types
import weakref
from typing import Any

from bytecode import Instr, Label

from ..config import config
from ..eval_frame_ext import cache_entries, callback_installed, is_skipped, replace_entry_code
from ..log import log
from ..symbolic.compile import CHOICE_LISTENERS, CompiledProgram
from . import pyversion
from .resume import _abstract_instructions

NATIVE_TEMP = "__sot_native_{}"


@dataclasses.dataclass(frozen=True)
class ResumePath:
    """Where a graph break continues: the resume function and what it is called with."""

    resume: types.CodeType
    from_jump: bool  # reached through the breaking instruction's jump (else: right after the instruction)
    n_stack: int  # values on the stack there, all passed first (bottom first)
    live: tuple[str, ...]  # then these locals
    callable_natively: bool  # a trampoline can call it from the original code (no NULL, no closure...)


ORIGINAL = None  # `NativePlan.current`/`wanted`: the entry runs the original code itself


class NativePlan:
    """How one cache entry may run the original code: the programs that must all have turned out eager, and
    the paths of its graph break (none for a frame that returned).

    It holds the original code weakly: the entry (in the code's extra slot) holds the guard, which holds the
    plan, and code objects are invisible to the garbage collector, so a strong reference would keep the
    code alive forever."""

    def __init__(self, code: types.CodeType, translated: types.CodeType, programs: list[Any],
                 break_offset: int | None = None, paths: tuple[ResumePath, ...] = ()) -> None:
        self._code = weakref.ref(code)
        self.name = code.co_name
        self.translated = translated
        self.programs = programs
        self.break_offset = break_offset
        self.paths = paths
        self.current: types.CodeType | None = translated  # what the entry runs (ORIGINAL: the code itself)
        self.guard: Any = None  # the entry's guard function, once the callback returned it
        for program in programs:
            if isinstance(program, CompiledProgram) and program.choice is None:
                _program_watchers.setdefault(program, weakref.WeakSet()).add(self)
        for path in paths:
            _resume_watchers.setdefault(path.resume, weakref.WeakSet()).add(self)

    def wanted(self, pending: dict[types.CodeType, types.CodeType] | None = None) -> types.CodeType | None:
        """The code the entry should run now (``pending``: entries being added, not yet in the cache)."""
        code = self._code()
        if code is None or not all(_runs_eagerly(program) for program in self.programs):
            return self.translated
        calls = tuple(path for path in self.paths if not _runs_natively(path.resume, pending or {}))
        if not calls:
            return ORIGINAL
        if self.break_offset is None or not all(path.callable_natively for path in calls):
            return self.translated
        try:
            return native_code(code, self.break_offset, calls)
        except Exception as exc:  # a bug of ours must not break user code: the translated code stays
            if config.strict_mode:
                raise
            log(1, f"{self.name}: could not build its native code ({type(exc).__name__}: {exc}); "
                   "the translated code stays")
            self.paths = tuple(dataclasses.replace(path, callable_natively=False) for path in self.paths)
            return self.translated

    def refresh(self, pending: dict[types.CodeType, types.CodeType] | None = None) -> None:
        wanted = self.wanted(pending)
        if wanted is self.current:
            return
        code = self._code()
        if self.guard is not None:
            if code is None or not replace_entry_code(code, self.guard, code if wanted is ORIGINAL else wanted):
                return  # the entry is gone (``sot.reset()``, the code object died)
        self.current = wanted
        log(2, f"{self.name}: every graph of this entry runs eagerly: it runs "
               f"{'the original code' if wanted is ORIGINAL else 'the original code up to its resume call(s)'}")
        if self.guard is not None and code is not None:
            _notify(code)


def _runs_eagerly(program: Any) -> bool:
    """Nothing, or eager statements (an `EagerProgram`), or a compiled program its cost model found slower."""
    return not isinstance(program, CompiledProgram) or program.choice == "eager"


def _runs_natively(code: types.CodeType, pending: dict[types.CodeType, types.CodeType]) -> bool:
    """Every entry of ``code`` (at least one) runs ``code`` itself, or it is never translated (SKIP)."""
    if is_skipped(code):
        return True
    codes = [new_code for _, new_code in cache_entries(code)]
    if code in pending:
        codes.append(pending[code])
    return bool(codes) and all(new_code is code for new_code in codes)


# Plans waiting for a program's choice / watching a resume function's entries (held weakly: a plan lives as
# long as its entry's guard).
_program_watchers: "weakref.WeakKeyDictionary[CompiledProgram, weakref.WeakSet[NativePlan]]" = \
    weakref.WeakKeyDictionary()
_resume_watchers: "weakref.WeakKeyDictionary[types.CodeType, weakref.WeakSet[NativePlan]]" = \
    weakref.WeakKeyDictionary()


def _notify(code: types.CodeType, pending: dict[types.CodeType, types.CodeType] | None = None) -> None:
    for plan in list(_resume_watchers.get(code, ())):
        plan.refresh(pending)


def _program_chose(program: CompiledProgram) -> None:
    # Called from the program's run inside a translated call: the hook is off while our code runs (the frames
    # of the libraries it uses must not be translated).
    with callback_installed(None):
        for plan in list(_program_watchers.pop(program, ())):
            plan.refresh()


CHOICE_LISTENERS.append(_program_chose)


def entry_added(code: types.CodeType, plan: NativePlan | None, guard: Any, new_code: types.CodeType) -> \
        types.CodeType:
    """The callback is about to add the entry ``(guard, new_code)`` to ``code``: returns the code the entry
    should start with, and lets the entries whose resume function ``code`` is decide again."""
    if plan is not None:
        plan.current = plan.wanted()
        plan.guard = guard
        new_code = code if plan.current is ORIGINAL else plan.current
    _notify(code, {code: new_code})
    return new_code


@functools.lru_cache(maxsize=256)
def native_code(code: types.CodeType, offset: int, calls: tuple[ResumePath, ...]) -> types.CodeType:
    """``code`` where the paths ``calls`` of the instruction at ``offset`` call their resume function and
    return its result (as the translated code did there), instead of going on in ``code``."""
    abstract, index = _abstract_instructions(code)
    body = list(abstract)
    position = index[offset]
    breaking = body[position]
    line = breaking.lineno
    tail: list[Any] = []

    def emit(name: str, arg: Any = None) -> None:
        tail.append(Instr(name, arg, lineno=line) if arg is not None else Instr(name, lineno=line))

    after_label = None
    stack_needed = 0
    for path in calls:
        label = Label()
        if path.from_jump:
            body[position] = Instr(breaking.name.replace("BACKWARD", "FORWARD"), label, lineno=line)
        else:
            after_label = label
        tail.append(label)
        temps = [NATIVE_TEMP.format(i) for i in range(path.n_stack)]
        for temp in reversed(temps):
            emit("STORE_FAST", temp)
        pyversion.emit_callable(emit, lambda path=path: pyversion.emit_make_function(emit, path.resume, False))
        for temp in temps:
            emit("LOAD_FAST", temp)
        for name in path.live:
            emit(pyversion.LOAD_FAST_CHECKED, name)
        pyversion.emit_call(emit, len(temps) + len(path.live))
        emit("RETURN_VALUE")
        stack_needed = max(stack_needed, 2 + len(temps) + len(path.live))
    if after_label is not None:
        jump: list[Any] = []
        pyversion.emit_jump(lambda name, arg: jump.append(Instr(name, arg, lineno=line)), after_label)
        body[position + 1:position + 1] = jump
    abstract[:] = body + tail
    stacksize = max(code.co_stacksize, stack_needed + max((p.n_stack for p in calls), default=0))
    return abstract.to_code(stacksize=stacksize, compute_exception_stack_depths=False)


def can_call_from_native(code: types.CodeType, resume: types.CodeType, stack_layout: tuple[bool, ...],
                         protected: bool) -> bool:
    """A trampoline can call ``resume`` from ``code``: no NULL on the stack (it cannot be stored), no cells
    (the locals are passed by value), and not inside a ``try``/``with`` block (the translated code runs the
    instruction in a region of its own)."""
    return not any(stack_layout) and not resume.co_freevars and not code.co_cellvars \
        and not code.co_freevars and not protected


__all__ = ["NativePlan", "ResumePath", "can_call_from_native", "entry_added", "native_code"]

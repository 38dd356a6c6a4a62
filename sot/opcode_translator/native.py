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
place, so an entry translated later, e.g. for another dtype, takes that as known too), unless one of those
entries' guards reads a value the breaking entry's guard leaves open (a local first read after the break,
what the breaking instruction returned): another call may bring a value no entry admits, which must reach
the resume function to be translated for it (`_path_runs_natively`). A path whose resume
function is translated to something else, or was never called yet (a branch not taken so far), keeps
calling it: the switched code is the original one with a small trampoline at that point ("pass the stack
and the live locals to the resume function and return what it returns", what the generated code did
there), so that a branch taken for the first time later is still translated, and keeps its compiled
graphs.

Whether the entry switches is decided again whenever something it depends on changes: a program's cost model
chooses, or chooses again (`CHOICE_LISTENERS`), a resume function gets an entry (the callback, `entry_added`), or one is
switched. Frames that inlined calls (user functions, dunders) are never switched: natively, each of those
calls would become a hooked, guarded frame of its own, which can cost more than the replay saves.

A switched entry is also *hook-free* when nothing it runs natively would be translated: its breaking
instruction, if any, runs no user code (`runs_only_library_code`: e.g. a tensor's truth value, ``.numpy()``,
``print``, but not a call of a user function the executor could not inline, whose own frame is translated),
and every path it goes on natively (no trampoline) is hook-free in every entry of its resume function.
Without inlined calls, everything else it calls is library code the hook would only mark SKIP. The hook
then suspends the thread's callback while the entry runs (eval_frame.c): the Paddle frames it calls, several
per tensor op, run with the interpreter's own evaluation function, as fast as eagerly (a custom one also
keeps CPython 3.11+ from inlining Python-to-Python calls). Trampolines call their resume function through
``call_with_callback``, which re-installs the callback for that call: a branch taken for the first time is
still translated and keeps its compiled graphs. An entry that runs the original code without a plan (a
frame whose only graph was too small, `transform.Translation.hook_free`) is hook-free when it inlined no
calls.

An entry whose code is right for any call, not only for the calls its guard admits (the original code, or
native code whose trampolines pass what any call has at the break: `trampolines_fit_any_call`), has its
guard *relaxed* (`relaxed_guard`): the C cache runs the checks of the arguments themselves on every hit and
the whole guard every `RELAXED_GUARD_PERIOD` hits. On a small frame the guard (a layer tree's identity and
configuration checks, Paddle's reads of the grad/AMP mode) cost more than everything else sot adds.

What runs is always the original code or the translation of a part of it, so results, gradients, side
effects and exceptions are eager's either way. In ``sot.stats()`` a switched entry still counts one cache
hit per call; a path run natively no longer calls (nor counts a hit for) its resume function.
"""
from __future__ import annotations

import dataclasses
import functools
import sys
import types
import weakref
from typing import Any, Iterable

import paddle
from bytecode import Instr, Label

from ..config import config
from ..eval_frame_ext import call_with_callback, cache_entries, callback_installed, is_skipped, \
    replace_entry_code
from ..log import log
from ..symbolic.compile import CHOICE_LISTENERS, CompiledProgram
from . import pyversion
from .executor.liveness import definitely_bound, in_frame_order, live_in
from .resume import _abstract_instructions
from .skip_files import should_skip, skip_filename

NATIVE_TEMP = "__sot_native_{}"


@dataclasses.dataclass(frozen=True)
class ResumePath:
    """Where a graph break continues: the resume function and what it is called with."""

    resume: types.CodeType
    from_jump: bool  # reached through the breaking instruction's jump (else: right after the instruction)
    n_stack: int  # values on the stack there, all passed first (bottom first)
    live: tuple[str, ...]  # then these locals
    callable_natively: bool  # a trampoline can call it from the original code (no NULL, no closure...)
    # Its arguments whose values the guard of the entry breaking here does not determine (the breaking
    # instruction's results, locals it never read): see `_path_runs_natively`.
    unpinned: tuple[str, ...] = ()


ORIGINAL = None  # `NativePlan.current`/`wanted`: the entry runs the original code itself

# Entries being added, not yet in the cache: code -> (the entry's code, whether it is hook-free, its guard)
Pending = dict[types.CodeType, tuple[types.CodeType, bool, Any]]


class NativePlan:
    """How one cache entry may run the original code: the programs that must all have turned out eager, and
    the paths of its graph break (none for a frame that returned).

    It holds the original code weakly: the entry (in the code's extra slot) holds the guard, which holds the
    plan, and code objects are invisible to the garbage collector, so a strong reference would keep the
    code alive forever."""

    def __init__(self, code: types.CodeType, translated: types.CodeType, programs: list[Any],
                 break_offset: int | None = None, paths: tuple[ResumePath, ...] = (),
                 break_runs_user_code: bool = False, trampolines_fit_any_call: bool = False) -> None:
        self._code = weakref.ref(code)
        self.name = code.co_name
        self.translated = translated
        self.programs = programs
        self.break_offset = break_offset
        self.paths = paths
        self.break_runs_user_code = break_runs_user_code  # the breaking instruction may call user code
        # Its trampolines pass what any call of the original code has there (`relaxable_break`): the native
        # code is then right for any inputs, as the original is.
        self.trampolines_fit_any_call = trampolines_fit_any_call
        self.current: types.CodeType | None = translated  # what the entry runs (ORIGINAL: the code itself)
        self.hook_free = False  # the entry runs with the thread's callback suspended
        self.relaxed = False  # the entry's guard is relaxed (`relaxed_guard`)
        self.guard: Any = None  # the entry's guard function, once the callback returned it
        for program in programs:
            if isinstance(program, CompiledProgram):  # (even one that chose: its cost model may measure again)
                _program_watchers.setdefault(program, weakref.WeakSet()).add(self)
        for path in paths:
            _resume_watchers.setdefault(path.resume, weakref.WeakSet()).add(self)

    def wanted(self, pending: Pending | None = None) -> types.CodeType | None:
        """The code the entry should run now (``pending``: entries being added, not yet in the cache)."""
        return self._wanted(self._calls(pending or {}))

    def _calls(self, pending: Pending) -> tuple[ResumePath, ...] | None:
        """The paths the entry must keep calling their resume function on (those not run natively in every
        entry of it), or None while a program of the entry does not run eagerly (or the code is gone)."""
        if self._code() is None or not all(_runs_eagerly(program) for program in self.programs):
            return None
        return tuple(path for path in self.paths if not _path_runs_natively(path, pending))

    def _wanted(self, calls: tuple[ResumePath, ...] | None) -> types.CodeType | None:
        code = self._code()
        if calls is None or code is None:
            return self.translated
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

    def decide(self, pending: Pending | None = None) -> tuple[types.CodeType | None, bool, bool]:
        """`wanted`, whether the entry then runs hook-free, and whether its guard can be relaxed."""
        pending = pending or {}
        calls = self._calls(pending)
        wanted = self._wanted(calls)
        relaxed = wanted is ORIGINAL or (wanted is not self.translated and self.trampolines_fit_any_call)
        if wanted is self.translated or self.break_runs_user_code:
            return wanted, False, relaxed
        natively = [path for path in self.paths if path not in (calls or ())]
        return wanted, all(_runs_hook_free(path.resume, pending) for path in natively), relaxed

    def refresh(self, pending: Pending | None = None) -> None:
        wanted, hook_free, relaxed = self.decide(pending)
        if wanted is self.current and hook_free == self.hook_free and relaxed == self.relaxed:
            return
        code = self._code()
        if self.guard is not None:
            if code is None or not replace_entry_code(code, self.guard, code if wanted is ORIGINAL else wanted,
                                                      hook_free, relaxed_guard(self.guard, relaxed)):
                return  # the entry is gone (``sot.reset()``, the code object died)
            self.guard.hook_free = hook_free
        if wanted is not self.current:
            log(2, f"{self.name}: every graph of this entry runs eagerly: it runs "
                   f"{'the original code' if wanted is ORIGINAL else 'the original code up to its resume call(s)'}"
                   f"{', hook-free' if hook_free else ''}")
        self.current, self.hook_free, self.relaxed = wanted, hook_free, relaxed
        if self.guard is not None and code is not None:
            _notify(code)


def _runs_eagerly(program: Any) -> bool:
    """Nothing, or eager statements (an `EagerProgram`), or a compiled program its cost model found slower."""
    return not isinstance(program, CompiledProgram) or program.choice == "eager"


def _entries(code: types.CodeType, pending: Pending) -> list[tuple[types.CodeType, bool, Any]]:
    """``code``'s entries: what each runs, whether hook-free (`entry_added` marks the guard), its guard."""
    entries = [(new_code, getattr(guard, "hook_free", False), guard) for guard, new_code in cache_entries(code)]
    if code in pending:
        entries.append(pending[code])
    return entries


def _path_runs_natively(path: ResumePath, pending: Pending) -> bool:
    """Every entry of the path's resume function (at least one) runs its code itself, or it is never
    translated (SKIP); and no entry's guard reads an argument the breaking entry's guard leaves open
    (`ResumePath.unpinned`). Such an argument may come with a value none of the entries admits (a flag
    the frame never read before the break, what the breaking instruction returned): run natively, the
    path would then go on untranslated instead of being translated for it."""
    code = path.resume
    if is_skipped(code):
        return True
    entries = _entries(code, pending)
    return bool(entries) and all(new_code is code and not (path.unpinned and guard.guard.reads_arguments(path.unpinned))
                                 for new_code, _, guard in entries)


def _runs_hook_free(code: types.CodeType, pending: Pending) -> bool:
    """Every entry of ``code`` (at least one) is hook-free. Not a code marked SKIP (e.g. at the cache
    limit): it runs under the hook, which still translates the user functions it calls."""
    entries = [] if is_skipped(code) else _entries(code, pending)
    return bool(entries) and all(hook_free for _, hook_free, _ in entries)


# Plans waiting for a program's choice / watching a resume function's entries (held weakly: a plan lives as
# long as its entry's guard).
_program_watchers: "weakref.WeakKeyDictionary[CompiledProgram, weakref.WeakSet[NativePlan]]" = \
    weakref.WeakKeyDictionary()
_resume_watchers: "weakref.WeakKeyDictionary[types.CodeType, weakref.WeakSet[NativePlan]]" = \
    weakref.WeakKeyDictionary()


def _notify(code: types.CodeType, pending: Pending | None = None) -> None:
    for plan in list(_resume_watchers.get(code, ())):
        plan.refresh(pending)


def _program_chose(program: CompiledProgram) -> None:
    # Called from the program's run inside a translated call: the hook is off while our code runs (the frames
    # of the libraries it uses must not be translated).
    with callback_installed(None):
        for plan in list(_program_watchers.get(program, ())):
            plan.refresh()


CHOICE_LISTENERS.append(_program_chose)


def relaxed_guard(guard: Any, relaxed: bool) -> Any:
    """What the C cache runs on the hits between two full checks of an entry's guard (``guard``: the check
    the callback returned, which carries its `Guard`), or None when every hit runs the full guard.

    An entry whose code is right whatever the inputs (the original code; native code whose trampolines fit
    any call) needs its guard only to know whether its translation still fits the inputs: whether the cost
    model's choices and the hook-freedom made for them still hold. Only the checks of the arguments
    themselves then run on every hit (a call with other inputs misses at once); the whole guard, with the
    layer tree, globals and the grad/AMP mode, every `RELAXED_GUARD_PERIOD` hits. A change seen late costs
    at most that many calls in the old way (e.g. a new sublayer's frames untranslated, a graph that would
    be compiled under AMP run eagerly), never a wrong result: the original code runs under the mode as
    eagerly."""
    return guard.guard.relaxed_check if relaxed else None


def entry_added(code: types.CodeType, plan: NativePlan | None, guard: Any, new_code: types.CodeType,
                hook_free: bool, relaxed: bool) -> tuple[types.CodeType, bool, Any]:
    """The callback is about to add the entry ``(guard, new_code)`` to ``code`` (``hook_free`` and
    ``relaxed`` as translated): returns the code the entry should start with, whether it is hook-free and
    its relaxed guard (for the C cache), and lets the entries whose resume function ``code`` is decide
    again."""
    if plan is not None:
        plan.current, plan.hook_free, plan.relaxed = plan.decide()
        plan.guard = guard
        new_code = code if plan.current is ORIGINAL else plan.current
        hook_free, relaxed = plan.hook_free, plan.relaxed
    guard.hook_free = hook_free
    _notify(code, {code: (new_code, hook_free, guard)})
    return new_code, hook_free, relaxed_guard(guard, relaxed)


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
        # (through call_with_callback: a hook-free entry's suspended callback is back for the resume function)
        pyversion.emit_callable(emit, lambda: emit("LOAD_CONST", call_with_callback))
        pyversion.emit_make_function(emit, path.resume, False)
        for temp in temps:
            emit("LOAD_FAST", temp)
        for name in path.live:
            emit(pyversion.LOAD_FAST_CHECKED, name)
        pyversion.emit_call(emit, 1 + len(temps) + len(path.live))
        emit("RETURN_VALUE")
        stack_needed = max(stack_needed, 4 + len(temps) + len(path.live))  # (3.10: + the qualname)
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


def trampolines_fit_any_call(code: types.CodeType, offset: int, stack_below: int,
                             paths: Iterable[tuple[int, tuple[str, ...]]]) -> bool:
    """The trampolines of a break at ``offset`` (``paths``: where each continues, and the locals it passes)
    pass what *any* call of ``code`` has there, not only the calls its guard admits: nothing is on the
    stack below the instruction's operands (a value there may be a NULL in another call, e.g. after a
    method load), and every local live where a path continues is passed, and bound there on every path
    from the function's start (`definitely_bound`). Native code built on them is then right for any
    inputs, as the original code is."""
    if stack_below:
        return False
    bound = definitely_bound(code).get(offset)
    live_at = live_in(code)
    return bound is not None and all(live == in_frame_order(code, live_at[target]) and bound.issuperset(live)
                                     for target, live in paths)


# Values an instruction can work on without running Python code of its own (beyond library code).
_PLAIN_TYPES = (int, float, complex, bool, str, bytes, type(None), type(Ellipsis), type(NotImplemented), slice,
                range, types.ModuleType)
_CONTAINER_TYPES = (tuple, list, set, frozenset)
_FUNCTION_TYPES = (types.BuiltinFunctionType, types.MethodWrapperType, types.WrapperDescriptorType,
                   types.MethodDescriptorType, types.ClassMethodDescriptorType)
_MAX_DEPTH = 3  # nesting of containers looked into; deeper counts as user code
_MAX_ITEMS = 32  # items of one container looked at; more counts as user code


def runs_only_library_code(variables: Iterable[Any]) -> bool:
    """An instruction run natively on these simulated values (a graph break's operands) can reach no user
    code the hook would translate: they are tensors, plain values and library functions, objects and classes
    (`should_skip`), in containers of those. Unknown counts as user code: the entry then keeps the hook."""
    return all(_variable_is_library(var, 0) for var in variables)


def _variable_is_library(var: Any, depth: int) -> bool:
    from .executor.variables import NullVariable, TensorVariable

    if isinstance(var, (NullVariable, TensorVariable)):
        return True
    if depth > _MAX_DEPTH:
        return False
    value = getattr(var, "__dict__", {}).get("value", _variable_is_library)  # the real object, if it holds one
    if value is not _variable_is_library:
        if not _value_is_library(value, depth):
            return False
    else:
        try:
            if not _type_is_library(var.get_py_type()):
                return False
        except Exception:  # noqa: BLE001 - a value the simulation cannot type: unknown
            return False
    children = var.children()
    return len(children) <= _MAX_ITEMS and all(_variable_is_library(child, depth + 1) for child in children)


def _value_is_library(value: Any, depth: int) -> bool:
    if isinstance(value, _PLAIN_TYPES):
        return True
    if depth > _MAX_DEPTH:
        return False
    if isinstance(value, types.FunctionType):
        return should_skip(value.__code__, value.__globals__)
    if isinstance(value, types.MethodType):
        return _value_is_library(value.__func__, depth + 1) and _value_is_library(value.__self__, depth + 1)
    if isinstance(value, functools.partial):
        return all(_value_is_library(item, depth + 1)
                   for item in (value.func, *value.args, *value.keywords.values()))
    if isinstance(value, _FUNCTION_TYPES):
        owner = getattr(value, "__self__", None)
        return owner is None or _value_is_library(owner, depth + 1)
    if isinstance(value, type):
        return _type_is_library(value)
    if isinstance(value, paddle.nn.Layer):
        return _layer_is_library(value, depth)
    if isinstance(value, dict):
        value = [*value.keys(), *value.values()]
    if isinstance(value, _CONTAINER_TYPES) and type(value) in _CONTAINER_TYPES:
        return len(value) <= _MAX_ITEMS and all(_value_is_library(item, depth + 1) for item in value)
    return _type_is_library(type(value))


def _layer_is_library(layer: paddle.nn.Layer, depth: int) -> bool:
    """A layer of a library class still calls user code through the layers it holds (``nn.Sequential``,
    ``paddle.DataParallel`` around a user model) and through hooks registered on any of them."""
    for sub in layer.sublayers(include_self=True):
        if not _type_is_library(type(sub)):
            return False
        hooks = [*sub._forward_pre_hooks.values(), *sub._forward_post_hooks.values()]
        if not all(_value_is_library(hook, depth + 1) for hook in hooks):
            return False
    return True


_library_types: "weakref.WeakKeyDictionary[type, bool]" = weakref.WeakKeyDictionary()


def _type_is_library(cls: type) -> bool:
    """Every class of ``cls``'s MRO is built in, or defined in a file the skip policy skips (a module
    without a file that is not built in, e.g. an interactive ``__main__``, or no module: unknown)."""
    known = _library_types.get(cls)
    if known is None:
        known = _library_types[cls] = all(_module_is_library(base.__module__) for base in cls.__mro__)
    return known


def _module_is_library(name: str) -> bool:
    filename = getattr(sys.modules.get(name), "__file__", None)
    return skip_filename(filename) if isinstance(filename, str) else name in sys.builtin_module_names


__all__ = ["NativePlan", "ResumePath", "can_call_from_native", "entry_added", "native_code", "relaxed_guard",
           "runs_only_library_code", "trampolines_fit_any_call"]

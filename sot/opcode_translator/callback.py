"""The frame callback the C hook calls on a cache miss: skip policy, cache policy, then translation."""
from __future__ import annotations

import dataclasses
import sys
import types
import weakref
import warnings
from typing import Any, Callable

from paddle.base.framework import in_dygraph_mode

from ..config import config
from ..errors import BreakGraphCheckError, UnsupportedError, UserCodeError
from ..eval_frame_ext import SKIP, cache_entries, cache_size, set_traceback_merger
from ..log import enabled, log
from ..stack_room import enter_room, leave_room
from ..stats import counters
from ..symbolic.compile import BUILD_LOCK, INFERENCE_CALLBACK, compiled_programs
from .executor.function_graph import FrameInfo
from .executor.dynamic_shape import learn_from_miss
from .executor.guard import log_guard_misses
from . import frame_groups
from .graph_free import keeps_missing_without_a_graph, widened_guard
from .native import entry_added
from .resume import in_user_terms
from .skip_files import runs_hook_free, should_skip
from .transform import Translation, describe_code, translate_frame

# Code objects whose translation must not fall back / break (``psdb.check_no_fallback`` and friends).
no_fallback_codes: set[types.CodeType] = set()
no_breakgraph_codes: set[types.CodeType] = set()

# Observers of translations (``sot.explain`` and reports subscribe here).
_listeners: list[Callable[[Translation, FrameInfo], None]] = []
_warned_limit: set[types.CodeType] = set()


# Codes with cache entries: `sot.reset()` empties their records right away (the hook would only do it on
# their next call), so what the entries hold (compiled programs, layers they call) is freed at once.
translated_codes: "weakref.WeakSet[types.CodeType]" = weakref.WeakSet()


def forget_warnings() -> None:
    """``sot.reset()``: a frame that hits the cache limit again is reported again."""
    _warned_limit.clear()


def purge_cache_records() -> None:
    """After ``reset_cache()``: empty every known code's (now stale) record."""
    for code in list(translated_codes):
        cache_size(code)
    translated_codes.clear()
    frame_groups.forget()


def add_listener(listener: Callable[[Translation, FrameInfo], None]) -> None:
    _listeners.append(listener)


def remove_listener(listener: Callable[[Translation, FrameInfo], None]) -> None:
    _listeners.remove(listener)


def _cache_limit_reached(code: types.CodeType, frame: FrameInfo, guards: list[Any]) -> bool:
    if len(guards) < config.cache_limit:
        return False
    if code not in _warned_limit:
        _warned_limit.add(code)
        reason = ""
        if guards:
            failure = guards[0].first_failure(frame.globals, frame.closure, frame.args)
            reason = f"; the guard that keeps failing: {in_user_terms(code, failure)}" if failure else ""
        message = (f"sot: {describe_code(code)} reached the cache limit of {config.cache_limit} translations and "
                   f"now runs eagerly{reason}")
        try:
            warnings.warn(message, RuntimeWarning, stacklevel=2)
        except Warning:  # (the user's filters make warnings errors: sot's diagnostic must not raise in their code)
            print(f"RuntimeWarning: {message}", file=sys.stderr)
    return True


_COMPREHENSION_BODIES = ("<listcomp>", "<dictcomp>", "<setcomp>")


def _is_comprehension_body(code: types.CodeType) -> bool:
    """A list/dict/set comprehension's own function (Python 3.10/3.11; inlined in its parent from 3.12).

    A translated parent inlines it; a call reaching the hook comes from a parent running natively (graph
    too small, fallback) and passes a live iterator (``.0``) that simulation cannot step without consuming
    it: such a body runs natively, it is not a fallback of its own."""
    return code.co_name in _COMPREHENSION_BODIES and code.co_argcount == 1 and code.co_varnames[0] == ".0"


def frame_callback(code: types.CodeType, globals_: dict, builtins_: dict, closure: tuple | None,
                   args: tuple) -> Any:
    """Called by the hook for a frame whose cached entries all failed their guards (or none exist)."""
    enter_room()  # the translator must work even when the user's stack is almost full
    try:
        return _on_miss(code, globals_, builtins_, closure, args)
    except RecursionError:
        # Even with the extra room (a runaway recursion inside sot, or of user code folded during the
        # simulation): this frame runs eagerly, and is translated again next time.
        counters.fallbacks += 1
        log(1, f"fallback in {describe_code(code)}: the translation ran out of stack (not cached)")
        return None
    finally:
        leave_room()


def _always(*_: Any) -> bool:
    """The guard of a hook-free native entry: right for any inputs."""
    return True


def _on_miss(code: types.CodeType, globals_: dict, builtins_: dict, closure: tuple | None, args: tuple) -> Any:
    if runs_hook_free(code):
        # the original code, for any inputs, with the callback suspended while it (and all it calls) runs
        return _always, code, 0, True, True
    if should_skip(code, globals_) or _is_comprehension_body(code):
        return SKIP
    if not in_dygraph_mode():
        # Paddle is building a static program (a ``@paddle.jit.to_static`` function called by translated code
        # runs its transformed code once to build it): its tensors are the program's variables, no eager
        # values to simulate. Run as written, nothing cached (the same code may run eagerly later).
        return None
    frame = FrameInfo(code, globals_, builtins_, closure, args)
    guards = [entry[0].guard for entry in cache_entries(code) if hasattr(entry[0], "guard")]
    if guards and enabled(1):
        log_guard_misses(code, guards, globals_, closure, args)
    if _cache_limit_reached(code, frame, guards):
        return SKIP
    if guards:
        widened = _widened_entry(code, frame)
        if widened is not None:
            return widened
        if keeps_missing_without_a_graph(code):
            log(1, f"{describe_code(code)} keeps missing with no graph in any of its {len(guards)} entries: "
                   "it runs natively from now on")
            return SKIP
        learn_from_miss(code, guards, globals_, closure, args)
    counters.translate_count += 1
    try:
        with BUILD_LOCK:
            translation = translate_frame(frame)
    except RecursionError:
        raise  # not an internal error: frame_callback runs the frame eagerly, uncached, even in strict mode
    except Exception as exc:  # a bug of ours outside the simulation (e.g. building the guard)
        if config.strict_mode:
            raise
        counters.fallbacks += 1
        log(1, f"fallback in {describe_code(code)}: internal error: {type(exc).__name__}: {exc} "
               "(the frame runs eagerly, not cached)")
        return None
    for listener in list(_listeners):
        listener(translation, frame)
    if translation.kind == "fallback":
        _on_fallback(code, translation)
    elif translation.kind == "break":
        _on_break(code, translation)
    elif translation.kind == "compiled":
        log(1, f"translated {describe_code(code)}: one graph of {len(translation.sir)} ops")
    translated_codes.add(code)
    guard = translation.guard.check
    guard.guard = translation.guard  # type: ignore[attr-defined]  # lets a later miss explain itself
    # For sot.explain; without the code objects, which would make a cycle through the code's extra slot
    # that the garbage collector cannot see.
    guard.translation = dataclasses.replace(translation, code=None, native=None)  # type: ignore[attr-defined]
    guard.native_plan = translation.native  # type: ignore[attr-defined]  # lives as long as the entry
    if translation.program is not None:  # chosen compiled or eager with the frame's other programs
        for program in compiled_programs(translation.program):
            frame_groups.join(code, translation.guard, program)
    # (a frame run as written, its graph too small: the original code, right for any inputs)
    new_code, hook_free, relaxed = entry_added(code, translation.native, guard, translation.code,
                                               translation.hook_free, translation.kind == "eager")
    frame_groups.translated(new_code, code)
    return guard, new_code, translation.frames, hook_free, relaxed


def _widened_entry(code: types.CodeType, frame: FrameInfo) -> tuple | None:
    """The entry to add instead of translating again: the original code under the widened guard of an entry
    without a graph that only computed with the numbers that changed (graph_free.py), or None."""
    found = widened_guard(code, frame)
    if found is None:
        return None
    widened, entry_check = found
    log(1, f"{describe_code(code)} has no graph and only formats (or computes with) the numbers that changed: "
           "it runs natively for any values of their types")
    guard = widened.check
    guard.guard = widened  # type: ignore[attr-defined]
    guard.translation = entry_check.translation  # type: ignore[attr-defined]
    guard.native_plan = None  # type: ignore[attr-defined]
    translated_codes.add(code)
    # (the same path as the entry's, with the same calls: hook-free when it is)
    new_code, hook_free, relaxed = entry_added(code, None, guard, code, getattr(entry_check, "hook_free", False),
                                               True)
    return guard, new_code, 0, hook_free, relaxed


def _on_break(code: types.CodeType, translation: Translation) -> None:
    failure = translation.failure
    counters.graph_breaks += 1
    ops = len(translation.sir) if translation.sir is not None else 0
    log(1, f"graph break in {describe_code(code)}: {failure}; {ops} ops before it "
           f"{'compiled' if translation.program is not None else 'run eagerly'}, the rest resumes in a new function")
    if code in no_breakgraph_codes:
        raise BreakGraphCheckError(f"graph break in {describe_code(code)}: {failure}")
    if config.strict_mode:
        raise UnsupportedError(f"strict mode: graph break in {describe_code(code)}: {failure}")


def _on_fallback(code: types.CodeType, translation: Translation) -> None:
    failure = translation.failure
    assert failure is not None
    counters.fallbacks += 1
    log(1, f"fallback in {describe_code(code)}: {failure} (the frame runs eagerly)")
    if translation.is_break and code in no_breakgraph_codes:
        raise BreakGraphCheckError(f"graph break in {describe_code(code)}: {failure}")
    if code in no_fallback_codes:
        raise UnsupportedError(f"{describe_code(code)} fell back to eager: {failure}")
    if config.strict_mode and not isinstance(failure, UserCodeError):
        raise UnsupportedError(f"strict mode: {describe_code(code)} cannot be translated: {failure}")


def inference_frame_callback(code: types.CodeType, globals_: dict, builtins_: dict, closure: tuple | None,
                             args: tuple) -> Any:
    """The callback of ``symbolic_translate(..., training=False)``: the same translation; compiled programs
    look at which callback is installed (a C thread-local read) to run without building backward."""
    return frame_callback(code, globals_, builtins_, closure, args)


INFERENCE_CALLBACK[0] = inference_frame_callback
# A traceback shows each user frame once, as eager's would, however many pieces graph breaks split it into:
# the hook drops the entry of a frame whose next entry is the rest of it (a resume function, a loop body).
set_traceback_merger(frame_groups.same_activation)

"""PEP 523 frame evaluation hook of sot (thin wrapper over the C extension).

While a thread has a *callback* (``set_callback`` / ``callback_installed``),
every new function frame of that thread is intercepted before it executes:

* generator/coroutine frames, module and class bodies, frames started
  while the callback or a guard of this thread is running, and every frame
  of a thread that has a trace or profile function (``sys.settrace``,
  ``sys.setprofile``: debuggers, profilers, coverage.py) are never
  intercepted: those tools see the code as written, and their callbacks
  are never translated;
* a code marked ``SKIP`` runs normally;
* otherwise the cache entries of the frame's code are tried, most recently
  hit first: ``guard(globals, closure, *args)`` is called and the first
  entry whose guard returns true has its code run instead of the original
  one (an entry whose code is the original code itself runs the frame as
  it is, without a shadow frame; a guard that raises counts as false; one that raises RecursionError
  makes the frame run normally, as does a callback that raises it: a full
  stack near the recursion limit says nothing about the frame);
* on a miss, ``callback(code, globals, builtins, closure, args)`` is called
  (with the hook disabled for this thread). It returns ``None`` (run the
  frame normally, cache nothing), ``SKIP`` (run it normally, and never ask
  again until ``reset_cache()``) or ``(guard, new_code)`` (cache the entry at
  the front and run ``new_code`` now, without calling the guard);
* ``(guard, new_code, frames, hook_free)``: with ``hook_free`` true, nothing
  ``new_code`` calls needs the hook (none of its frames would be
  translated): while the entry runs, the thread's callback is *suspended*
  (``callback_active()`` is false, ``get_callback()`` still returns it), so
  that, when no other thread has a callback, the frames it calls run with
  the interpreter's own evaluation function, at eager speed;
  ``call_with_callback(fn, *args)`` re-installs it for one call (the way
  back into translated code); a ``set_callback`` meanwhile ends the
  suspension;
* ``(guard, new_code, frames, hook_free, relaxed)``: ``relaxed`` (None, True
  or a callable) says that ``new_code`` is right whatever the inputs (e.g. the
  original code itself) and the guard only decides whether the entry still
  fits them: the full guard then runs on every ``RELAXED_GUARD_PERIOD``-th hit
  of the entry only, and ``relaxed(globals, closure, *args)`` (a part of the
  guard, e.g. its checks of the arguments themselves) on the hits between
  (nothing for True); a failing ``relaxed`` is a failing guard. None: the
  guard runs on every call;
* ``(guard, new_code, frames)`` also says how many Python frames
  ``new_code`` may need on top of its own (calls it inlined, which the
  original makes as frames; a runner it calls): when fewer are left before
  the recursion limit, a passing entry is not used and the frame runs as
  written (neither a hit nor a miss), so RecursionError comes where it comes
  eagerly.

``args`` are the frame's argument values in signature order: positional
(including positional-only) parameters, keyword-only parameters, then the
``*args`` tuple and the ``**kwargs`` dict if the function has them.
``closure`` is the function's ``__closure__`` (or None). (On Python 3.10,
where a frame does not know its function, it is a tuple of the same cell
objects rebuilt from the frame, equal to but not the same tuple as
``__closure__``; no tuple is built for a function without free variables.)

Supported: CPython 3.10, 3.11, 3.12 and 3.13, with the same behaviour.

``new_code`` runs in a "shadow" frame with the original function's globals,
builtins and closure: it must have exactly the original's ``co_freevars``
(same names, same order). Argument values are copied into the locals of the
same name in ``new_code`` (its own signature does not matter); its other
locals start unbound.

A cache entry keeps its guard and new code alive until the original code
object dies, or until it is first looked up after ``reset_cache()``.
"""

from __future__ import annotations

from types import CodeType
from typing import Any, Callable, ContextManager, Dict, List, Optional, Tuple, Union

try:
    from . import _eval_frame as _ext
except ImportError as _exc:  # pragma: no cover - depends on the build
    raise ImportError(
        "sot's C extension sot.eval_frame_ext._eval_frame is not built or cannot be loaded "
        "(%s). Build it by running `pip install -e .` in the root of the sot repository "
        "(needs gcc and the Python development headers)." % (_exc,)
    ) from _exc

__all__ = [
    "Callback",
    "CallWithCallback",
    "CallbackResult",
    "Guard",
    "SKIP",
    "cache_entries",
    "cache_size",
    "clone_set_layout",
    "call_with_callback",
    "callback_active",
    "callback_installed",
    "get_callback",
    "set_traceback_merger",
    "hit_count",
    "is_skipped",
    "replace_entry_code",
    "reset_cache",
    "RELAXED_GUARD_PERIOD",
    "set_callback",
    "tensor_matches",
    "type_version",
    "HEAPTYPE",
    "dtype_matches",
    "GuardProgram",
    "GUARD_OPCODES",
]

#: ``guard(globals, closure, *args) -> bool``
Guard = Callable[..., Any]
#: What a callback returns: None, SKIP or (guard, new_code).
CallbackResult = Union[None, object, Tuple[Guard, CodeType]]
#: ``callback(code, globals, builtins, closure, args) -> CallbackResult``
Callback = Callable[
    [CodeType, Dict[str, Any], Dict[str, Any], Optional[Tuple[Any, ...]], Tuple[Any, ...]],
    CallbackResult,
]

# The functions below are the C functions themselves (no Python wrapper, so
# that calling them never creates a frame the hook would see); the
# annotations are for type checkers and the docstrings come from C.

#: Unique sentinel: returned by a callback, the code is never intercepted
#: again until ``reset_cache()``.
SKIP: object = _ext.SKIP

#: ``set_callback(callback_or_None) -> previous_or_None`` for the current thread.
set_callback: Callable[[Optional[Callback]], Optional[Callback]] = _ext.set_callback

#: ``set_traceback_merger(same_activation_or_None)``: ``same_activation(inner_frame, outer_frame) -> bool``
#: says whether two frames of consecutive traceback entries are pieces of one call of a user function split
#: by graph breaks; a hooked frame ending with an exception then drops its own entry, so a traceback shows
#: each call once.
set_traceback_merger: Callable[[Optional[Callable[[Any, Any], bool]]], None] = _ext.set_traceback_merger

#: ``get_callback() -> callback_or_None`` of the current thread.
get_callback: Callable[[], Optional[Callback]] = _ext.get_callback

#: ``callback_active() -> bool``: this thread's callback is set and not suspended by a hook-free entry.
callback_active: Callable[[], bool] = _ext.callback_active

#: ``call_with_callback(fn, *args)``: ``fn(*args)`` with this thread's suspended callback re-installed for
#: the call (the trampolines of native code call their resume functions through it).
call_with_callback: Callable[..., Any] = _ext.call_with_callback

#: ``CallWithCallback``: a base class whose instances, once bound with ``_sot_bind(callback, target)``, are
#: called as ``target(*args, **kwargs)`` with the thread's callback set to ``callback`` for the call (the
#: previous one back afterwards), in C: no Python frame of its own.
CallWithCallback: type = _ext.CallWithCallback

#: ``reset_cache()``: forget every cache entry and SKIP mark (all code objects).
reset_cache: Callable[[], None] = _ext.reset_cache

#: ``replace_entry_code(code, guard, new_code, hook_free=False, relaxed=None) -> bool``: the entry of
#: ``code`` whose guard is ``guard`` runs ``new_code`` from now on (``code`` itself: the original runs
#: natively, with no shadow frame, behind the same guard), hook-free or not, its guard relaxed or not (as a
#: callback's ``relaxed``); False if there is no such entry.
replace_entry_code: Callable[..., bool] = _ext.replace_entry_code

#: Hits of an entry with a relaxed guard per run of its full guard.
RELAXED_GUARD_PERIOD: int = _ext.RELAXED_GUARD_PERIOD

#: ``cache_size(code) -> int``: number of cache entries of a code object.
cache_size: Callable[[CodeType], int] = _ext.cache_size

#: ``cache_entries(code) -> [(guard, new_code), ...]``, most recently hit first.
cache_entries: Callable[[CodeType], List[Tuple[Guard, CodeType]]] = _ext.cache_entries

#: ``is_skipped(code) -> bool``: the callback returned SKIP for it (since the last reset).
is_skipped: Callable[[CodeType], bool] = _ext.is_skipped

#: ``hit_count() -> int``: frames served from the cache since import.
hit_count: Callable[[], int] = _ext.hit_count

#: ``tensor_matches(x, cls, shape, dtype, stop_gradient) -> bool``: a tensor's meta guard in one call
#: (``shape`` a list to compare with, or a tuple pattern with -1 for a dynamic dimension, not 0 or 1;
#: ``x.dtype`` compared with ``dtype`` as ``dtype_matches`` does). With the optional C++ reader installed
#: (tensor_meta.py), dtype and shape are read from the C++ tensor, with the same result.
tensor_matches: Callable[[Any, type, Any, Any, bool], bool] = _ext.tensor_matches

#: ``Py_TPFLAGS_HEAPTYPE`` in ``cls.__flags__``: a class made by a ``class`` statement (Python code), not a
#: builtin; the classes that can change, so whose lookups are guarded (`type_version`).
HEAPTYPE = 1 << 9

#: ``type_version(cls) -> int``: the version tag of a type, changed by any change of its attributes or its
#: bases' (0: no valid tag, nothing to guard by); guards of class lookups compare it (guard.py).
type_version: Callable[[type], int] = _ext.type_version

#: ``dtype_matches(have, want) -> bool``: ``have is want``, or both of one type and equal (a dtype object
#: of the legacy IR is made anew by each read of ``x.dtype``; one of the other IR never matches).
dtype_matches: Callable[[Any, Any], bool] = _ext.dtype_matches

#: ``clone_set_layout(s) -> set``: a new set with the very hash table of ``s`` (so the same iteration order
#: and the same behaviour under later changes), which ``set(s)`` does not keep; escaping sets of a simulated
#: frame are rebuilt with it.
clone_set_layout: Callable[[set], set] = _ext.clone_set_layout

#: ``GuardProgram(nargs, consts, nwork, code, call_args)``: a cache entry's guard checks as one C call,
#: built by sot's guard compiler (opcode_translator/executor/guard.py); ``GUARD_OPCODES`` names its
#: instructions.
GuardProgram: type = _ext.GuardProgram
GUARD_OPCODES: Dict[str, int] = _ext.GUARD_OPCODES

#: ``with callback_installed(callback): ...`` sets the callback of the current
#: thread and restores the previous one on exit. ``__enter__`` returns the
#: callback. It is implemented in C: the callback never sees its frames.
callback_installed: Callable[[Optional[Callback]], ContextManager[Optional[Callback]]] = (
    _ext.callback_installed
)

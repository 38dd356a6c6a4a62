"""The frame groups of the cost model: the compiled programs of one frame's entries and of its resume
functions (and loop bodies), which the cost model measures in step and chooses together
(`sot.symbolic.cost_model.CostGroup`).

A frame broken by a graph break runs as several pieces: the entry's program up to the break, then a resume
function, translated as a frame of its own, with its own program. Chosen one by one, two pieces that are
each a near-tie ended up mixed (one compiled, one eager), which cost more than either way for all of them.
A resume function (or loop body) is derived from the code it continues (`derived_from`, called where they
are built); the group of a translated code is that of the user's code it was derived from (`frame_origin`),
so the entries of a function for other inputs, and all its resume functions, are one group.
"""
from __future__ import annotations

import types
import weakref
from typing import Any, Generic, TypeVar

from ..eval_frame_ext import cache_entries
from ..symbolic.compile import CompiledProgram
from ..symbolic.cost_model import CostGroup

_V = TypeVar("_V")


class _CodeKeyedMap(Generic[_V]):
    """A map from code objects, by identity, holding them weakly.

    Not a `weakref.WeakKeyDictionary`: code objects hash and compare by their fields, constants included, so
    two distinct codes can be one key, and a code with an unhashable constant (a dict some generated code
    loads) cannot be a key at all."""

    def __init__(self) -> None:
        self._entries: dict[int, tuple[weakref.ref[types.CodeType], _V]] = {}

    def __setitem__(self, code: types.CodeType, value: _V) -> None:
        key = id(code)

        def forget(ref: weakref.ref[types.CodeType]) -> None:
            entry = self._entries.get(key)
            if entry is not None and entry[0] is ref:
                del self._entries[key]

        self._entries[key] = (weakref.ref(code, forget), value)

    def get(self, code: types.CodeType) -> _V | None:
        entry = self._entries.get(id(code))
        return entry[1] if entry is not None and entry[0]() is code else None

    def clear(self) -> None:
        self._entries.clear()


# A resume function / loop body -> the user's code it continues (held weakly both ways: the resume code's
# builders cache it as long as they need it).
_origins: _CodeKeyedMap[weakref.ref[types.CodeType]] = _CodeKeyedMap()
_groups: _CodeKeyedMap[CostGroup] = _CodeKeyedMap()
# A translated code -> the code it translates (a frame runs the former: tracebacks show it).
_sources: _CodeKeyedMap[weakref.ref[types.CodeType]] = _CodeKeyedMap()


def derived_from(derived: types.CodeType, code: types.CodeType) -> None:
    """``derived`` (a resume function, a loop body) continues ``code``: it belongs to ``code``'s frame."""
    _origins[derived] = weakref.ref(frame_origin(code))


def translated(new_code: types.CodeType, code: types.CodeType) -> None:
    """A frame of ``code`` runs ``new_code`` (its translation, or ``code`` itself)."""
    if new_code is not code:
        _sources[new_code] = weakref.ref(code)


def _source(code: types.CodeType) -> types.CodeType:
    """The code ``code`` is the translation of (itself, when it is no translation)."""
    source = _sources.get(code)
    found = source() if source is not None else None
    return found if found is not None else code


def frame_origin(code: types.CodeType) -> types.CodeType:
    """The user's code ``code`` was derived from (itself, for user code)."""
    origin = _origins.get(code)
    found = origin() if origin is not None else None
    return found if found is not None else code


def _same_function(a: types.CodeType, b: types.CodeType) -> bool:
    return (a.co_filename, a.co_firstlineno, a.co_name) == (b.co_filename, b.co_firstlineno, b.co_name)


def _is_piece(code: types.CodeType) -> bool:
    """Whether a frame running ``code`` is a later piece of a user frame split by graph breaks (a resume
    function, a loop body, a native re-raise: derived from the user's code, `derived_from`; 3.11+ also name
    it after the frame with its role, "main (resumed at line 8)"), not the start of a call of the function."""
    from .pyversion import known_qualname

    source = _source(code)
    if frame_origin(source) is not source:
        return True
    qualname = known_qualname(code)
    return qualname is not None and qualname.endswith(")") and " (" in qualname


def _activation(frame: types.FrameType) -> types.FrameType:
    """The frame that began the call of the user function that ``frame`` is a piece of: its callers are
    walked back through the pieces of the same function (a resume function is called by the piece before it,
    a loop body by the code running the loop)."""
    code = frame.f_code
    while _is_piece(frame.f_code):
        back = frame.f_back
        if back is None or not _same_function(back.f_code, code):
            break
        frame = back
    return frame


def same_activation(inner: types.FrameType, outer: types.FrameType) -> bool:
    """Whether the traceback entries of frames ``inner`` (the later entry) and ``outer`` are pieces of one
    call of one user function, split by graph breaks: eager's traceback shows that call once, at the line
    where it raised. A recursive call of the function is a call of its own: its pieces begin at another
    frame."""
    if not _same_function(inner.f_code, outer.f_code) or not _is_piece(inner.f_code):
        return False
    return _activation(inner) is _activation(outer)


def join(code: types.CodeType, guard: Any, program: CompiledProgram) -> None:
    """The entry ``guard`` of ``code`` (being added to its cache) runs ``program``: the program joins the
    group of ``code``'s frame, for as long as the entry is in the cache and the program can run."""
    origin = frame_origin(code)
    group = _groups.get(origin)
    if group is None:
        group = _groups[origin] = CostGroup(origin.co_name)
    code_ref, guard_ref, program_ref = weakref.ref(code), weakref.ref(guard), weakref.ref(program)

    def alive() -> bool:
        entry_code, entry_guard, entry_program = code_ref(), guard_ref(), program_ref()
        if entry_code is None or entry_guard is None or entry_program is None:
            return False
        if entry_program.static_function is None:  # released: a layer it calls was deleted
            return False
        return any(getattr(check, "guard", None) is entry_guard for check, _ in cache_entries(entry_code))

    group.add(program.cost, alive)


def group_of(code: types.CodeType) -> CostGroup | None:
    """The group of ``code``'s frame, if one of its programs joined one."""
    return _groups.get(frame_origin(code))


def forget() -> None:
    """``sot.reset()``: every entry is gone."""
    _groups.clear()


__all__ = ["derived_from", "forget", "frame_origin", "group_of", "join"]

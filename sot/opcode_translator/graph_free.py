"""Frames without a graph: one entry, run natively, for every value of the numbers they only format.

A helper such as ``progress(step, total, loss)`` writing ``f"{step}/{total} loss={loss:.4f}"`` records no
tensor op: its translation runs the original code (native.py), but the simulation formatted the numbers,
so its guard pins their values, and every step's new numbers would miss and translate it again, until the
cache limit. Specializing on those values gains nothing.

On a miss, an existing entry of the code is *widened* when:

- it runs the original code itself and no piece of it recorded a tensor op (`_graph_free`): neither its own
  translation nor, after a graph break, any entry of the resume functions the break continues in (all of
  which also run their code natively). The arithmetic of numbers kept in the graph (``step % 10`` of a
  symbolic int) is no tensor op: every value it computes is a 0-D int64/float64;
- its guard checks the values of some numbers (ints, floats, and symbolic ones pinned) only because the
  simulation computed with them (`FunctionGraph.add_guard`'s ``data_only``: the text of an f-string, a sum),
  never because they decided something (a jump, an index, a call, an exception; a symbolic int's branch is
  guarded by its expression, ``step % 10 == 0``, which stays): the simulation takes the same path, with no
  tensor op, for any other values those checks admit;
- the resume functions' entries decide nothing on the values the frame hands them (type checks and
  data-only number checks aside: `Guard.decides_on_arguments`);
- the missing call passes the guard without those value checks (`Guard.widened`; the numbers' types are
  still checked, so a tensor argument misses and is translated).

The new entry runs the original code under the widened guard: no translation per value. What runs is the
original code, so results, side effects and exceptions are eager's whatever the guard admits; a decision the
analysis missed could at worst leave a graph uncompiled (run eagerly, as the callees of the frame, which are
still hooked, are translated). A frame whose numbers decide its tensor ops (``x * step``, ``range(n)`` over
tensor ops, a shape) records a graph, or decides on them: it stays guarded by value.
"""
from __future__ import annotations

import types
from typing import Any

import paddle

from ..eval_frame_ext import cache_entries, is_skipped
from .executor.function_graph import FrameInfo
from .executor.guard import Guard, argument_names

_MAX_RESUME_DEPTH = 4  # resume functions of resume functions looked into; deeper counts as having a graph
# Entries without a graph a piece of a frame broken by graph breaks (a resume function, a loop body) may gather
# before it runs natively for good (`keeps_missing_without_a_graph`).
GRAPH_FREE_PIECE_ENTRIES = 3


# What the arithmetic of numbers kept in the graph (symbolic ints and floats: `symbolic_int.py`) computes in.
_SCALAR_DTYPES = (paddle.int64, paddle.float64)


def _records_no_tensor_op(check: Any) -> bool:
    """The entry's translation recorded no statement, or only arithmetic of varying numbers: every value of
    its graph is a 0-D int64/float64 (the numbers given to the program, what it computes from them)."""
    translation = getattr(check, "translation", None)
    if translation is None:
        return False
    sir = translation.sir
    if sir is None or not sir.statements:
        return True
    return all(meta.shape == () and meta.dtype in _SCALAR_DTYPES for meta in sir.metas.values())


def _graph_free(code: types.CodeType, check: Any, new_code: types.CodeType, depth: int = 0) -> bool:
    """The entry ``(check, new_code)`` of ``code`` runs ``code`` itself, and neither it nor the entries of
    the resume functions it continues in recorded a tensor statement (those decide nothing on the values
    they are handed)."""
    if new_code is not code or not _records_no_tensor_op(check) or depth > _MAX_RESUME_DEPTH:
        return False
    plan = getattr(check, "native_plan", None)
    for path in plan.paths if plan is not None else ():
        resume = path.resume
        if is_skipped(resume):
            return False  # (not known: e.g. at the cache limit)
        entries = cache_entries(resume)
        if not entries:
            return False  # (a path never taken: not known)
        for resume_check, resume_code in entries:
            guard = getattr(resume_check, "guard", None)
            if guard is None or not _graph_free(resume, resume_check, resume_code, depth + 1) \
                    or guard.decides_on_arguments(argument_names(resume)):
                return False
    return True


def widened_guard(code: types.CodeType, frame: FrameInfo) -> tuple[Guard, Any] | None:
    """The widened guard of an entry of ``code`` (see above) that admits the missing call ``frame``, and that
    entry's check; None when there is none."""
    for check, new_code in cache_entries(code):
        guard = getattr(check, "guard", None)
        if guard is None or not _graph_free(code, check, new_code):
            continue
        widened = guard.widened()
        if widened is None:
            continue
        try:
            admitted = widened.check(frame.globals, frame.closure, *frame.args)
        except Exception:  # noqa: BLE001 - a check that raises rejects the call, as in the hook
            admitted = False
        if admitted:
            return widened, check
    return None


def keeps_missing_without_a_graph(code: types.CodeType) -> bool:
    """Whether ``code``, a piece of a frame broken by graph breaks, has `GRAPH_FREE_PIECE_ENTRIES` entries
    already, none of whose translations recorded a tensor op, and still misses: it then runs natively for
    good (with what follows it in the frame, which its entries ran as further pieces), instead of a
    translation per value.

    Those pieces are where a training loop's Python values land: ``print(f"step {step} lr {lr:.6f} loss
    {loss.item():.6f}")`` split at ``get_lr()`` and ``.item()`` leaves pieces that format a new step, learning
    rate or loss at every step. Their values may decide things (widening does not apply), and they gain
    nothing from translation. A user's own function is left to widening and the cache limit: called with a
    tensor later, it is translated."""
    from .frame_groups import frame_origin

    if frame_origin(code) is code:
        return False
    entries = cache_entries(code)
    return len(entries) >= GRAPH_FREE_PIECE_ENTRIES and all(_records_no_tensor_op(check) for check, _ in entries)


__all__ = ["GRAPH_FREE_PIECE_ENTRIES", "keeps_missing_without_a_graph", "widened_guard"]

"""Automatic mixed precision (``paddle.amp.auto_cast``) as part of what a statement computes.

Paddle decides per op, from process-wide state, whether its inputs are cast to a low-precision dtype: the
AMP level, the dtype, the white and black op lists and the promotion switch. Eager mode and static
program building read the same state (``core._get_amp_attrs()`` is the tracer's), so a statement recorded
inside an ``auto_cast`` block is run, built and meta-inferred with that state applied around it, and the
program contains exactly the casts eager mode performs.

Eager mode only casts tensors that live on an accelerator (GPU, XPU, custom device): on a CPU place an
``auto_cast`` block changes the state but no op's dtype, and ``amp_guard`` even switches the level back to
O0 when the expected place is a CPU. Static programs have no place and would cast; `op_amp_state` maps a
state to what ops really see, so both agree.
"""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Iterator

import paddle
from paddle.base import core

AmpLevel = core.AmpLevel


@dataclasses.dataclass(frozen=True)
class AmpState:
    """What Paddle's AMP decides for each op (the op lists only matter when the level is not O0)."""

    level: Any  # a core.AmpLevel
    dtype: str
    white: frozenset[str] = frozenset()
    black: frozenset[str] = frozenset()
    use_promote: bool = True

    @property
    def enabled(self) -> bool:
        return self.level != AmpLevel.O0

    def __str__(self) -> str:
        return f"amp {self.level.name} {self.dtype}" if self.enabled else "amp off"


AMP_OFF = AmpState(AmpLevel.O0, "float32")


def current_amp_state() -> AmpState:
    """The AMP state ops created now would see (O0 states are all the same `AMP_OFF`)."""
    attrs = core._get_amp_attrs()
    if attrs._amp_level == AmpLevel.O0:
        return AMP_OFF
    white, black = core._get_amp_op_list()
    return AmpState(attrs._amp_level, attrs._amp_dtype, frozenset(white), frozenset(black),
                    bool(attrs._use_promote))


def amp_lists_and_promotion() -> tuple:
    """The parts of the AMP state not in the per-call grad/AMP tuple: guarded when AMP is on."""
    white, black = core._get_amp_op_list()
    return frozenset(white), frozenset(black), bool(core._get_amp_attrs()._use_promote)


def _place_casts(place: Any) -> bool:
    """Whether eager AMP casts tensors on ``place`` (it never casts CPU tensors)."""
    return bool(place.is_gpu_place() or place.is_xpu_place() or place.is_custom_place())


def op_amp_state(state: AmpState) -> AmpState:
    """The state ops recorded under ``state`` must be built with to compute what eager computes."""
    if not state.enabled:
        return AMP_OFF
    place = paddle.base.framework._current_expected_place()
    return state if _place_casts(place) else AMP_OFF


@contextlib.contextmanager
def amp_applied(state: AmpState) -> Iterator[None]:
    """Ops created inside see ``state`` (eager and static alike); the previous state is restored after."""
    attrs = core._get_amp_attrs()
    saved = (attrs._amp_level, attrs._amp_dtype, attrs._use_promote, core._get_amp_op_list())
    attrs._amp_level = state.level
    attrs._amp_dtype = state.dtype
    attrs._use_promote = state.use_promote
    core._set_amp_op_list(set(state.white), set(state.black))
    try:
        yield
    finally:
        attrs._amp_level, attrs._amp_dtype, attrs._use_promote = saved[:3]
        core._set_amp_op_list(*saved[3])


AMP_ATTRS = core._get_amp_attrs()  # one process-wide object, shared with the tracer


def ambient_amp_enabled() -> bool:
    """Whether AMP is on now; asked at every run of a graph, so the cheap read comes first: AMP off is always
    "float32" (``auto_cast(enable=False)`` and places without AMP set level O0 with it, and ``auto_cast``
    refuses to enable AMP with it), and reading the level builds one of Paddle's enum objects (~1 us with
    the comparison, against ~0.1 us for the dtype string)."""
    return AMP_ATTRS._amp_dtype != "float32" and AMP_ATTRS._amp_level != AmpLevel.O0

"""Exceptions of `sot`.

Internal control flow (a frame falls back, a graph must break) is expressed with exceptions raised inside
the executor and caught by the frame callback; users only ever see `SotError` subclasses in strict mode or
from the `psdb` checks.
"""
from __future__ import annotations

import types
from dataclasses import dataclass


class SotError(Exception):
    """Base class of the errors `sot` raises to users."""


class UnsupportedError(SotError):
    """Raised to the user in strict mode (or by ``psdb.check_no_fallback``) instead of falling back."""


class BreakGraphCheckError(SotError):
    """Raised by ``psdb.check_no_breakgraph`` when a graph break happens inside the checked function."""


@dataclass
class SourceLocation:
    """A line of user code, as shown in reports: ``file:line``."""

    filename: str
    lineno: int | None

    def __str__(self) -> str:
        return f"{self.filename}:{self.lineno}" if self.lineno is not None else self.filename


class FallbackError(Exception):
    """The current frame cannot be simulated; it runs eagerly instead (never a wrong result)."""

    def __init__(self, reason: str, location: SourceLocation | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.location = location
        # ``psdb.fallback(recursive=True)``: the code object that asked for its whole call tree to run eagerly
        # (honoured only when it is the frame being translated, not a call inlined into it).
        self.recursive_code: types.CodeType | None = None

    def __str__(self) -> str:
        where = f" at {self.location}" if self.location else ""
        return f"{self.reason}{where}"

    def forget_frames(self, handled: BaseException | None = None) -> None:
        """Keep only the report (reason, location): drop the tracebacks of this error and of the errors
        chained to it. A failure is stored with its cache entry, and a traceback holds the simulated
        frames, whose locals hold the user's arguments: the cache would keep them alive.

        ``handled`` is the exception the user's code was handling when the frame was called (a call in an
        ``except`` or ``finally`` block): Python chains errors raised during the translation to it, but it
        is the user's, still in flight, and its traceback must stay whole. The walk stops there."""
        seen: set[int] = set()
        error: BaseException | None = self
        while error is not None and error is not handled and id(error) not in seen:
            seen.add(id(error))
            error.__traceback__ = None
            if isinstance(error, UserCodeError):
                error.original = None  # only needed while simulating (a ``try`` block may catch it)
            error = error.__cause__ or error.__context__
        self.__cause__ = self.__context__ = None


class UserCodeError(FallbackError):
    """User code raised during simulation (e.g. ``1 // 0``): the frame runs eagerly and raises it there,
    with the user's own traceback. Never turned into an `UnsupportedError` by strict mode.

    ``original`` is the exception the user code raised, when known: a ``try`` block of the simulated code
    can then catch it (handlers/exceptions.py).

    ``reraise``: a bare ``raise`` or ``RERAISE`` of an exception already raised, which keeps its
    ``__context__`` (a new raise takes the exception being handled as its context, as the interpreter's
    ``_PyErr_SetObject`` does: `OpcodeExecutor.chain_context`); ``chained``: that was done (once, by the
    frame that raised it, not again by each caller it leaves)."""

    def __init__(self, reason: str, location: "SourceLocation | None" = None,
                 original: BaseException | None = None, reraise: bool = False) -> None:
        super().__init__(reason, location)
        self.original = original
        self.reraise = reraise
        self.chained = False


class BreakGraphError(FallbackError):
    """Simulation reached something that cannot go into a graph (tensor-valued branch, print, ...).

    Until resume functions exist the frame falls back; the kind is kept so it is counted and reported as a
    graph break.

    ``eager_before``: what runs natively at the break differentiates the tensors made before it twice
    (``paddle.grad(..., create_graph=True)``). The graph before the break is then replayed eagerly: a
    compiled program's backward makes gradients without gradient nodes of their own, so a gradient of them
    would be lost or refused.
    """

    eager_before: bool = False

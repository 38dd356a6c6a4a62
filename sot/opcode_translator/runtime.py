"""Small helpers the generated code calls at run time (kept out of the bytecode for readability)."""
from __future__ import annotations

from typing import Any


def write_back_list(target: list, content: list) -> None:
    """Give ``target`` the content the simulation computed for it, keeping its identity."""
    target[:] = content


def extend_list(target: list, added: list) -> None:
    """Replay appends to a list from outside (its earlier content was never read)."""
    target.extend(added)


def write_back_dict(target: dict, content: dict) -> None:
    target.clear()
    target.update(content)


class BlockExit:
    """The ``__exit__`` of a block entered for real at a graph break, handed to the resume function.

    ``kind`` ("grad" or "amp") and ``previous`` (the grad mode or `AmpState` before the block) let the
    resume function's translation simulate the end of the block: its generated code then calls `leave_block`
    before its graph. Run natively, the resume function calls it as ``__exit__``. It runs once: an exception
    escaping generated code with the block open calls `abandon_blocks`, and as a last resort it runs when the
    frames holding it are freed, so the mode never stays switched for the rest of the program."""

    __slots__ = ("_exit", "kind", "previous")

    def __init__(self, exit_: Any, kind: str, previous: Any) -> None:
        self._exit = exit_
        self.kind = kind
        self.previous = previous

    def __call__(self, *exc_info: Any) -> Any:
        exit_, self._exit = self._exit, None
        return exit_(*exc_info) if exit_ is not None else None

    def __del__(self) -> None:
        if self._exit is not None:
            try:
                self(None, None, None)
            except Exception:  # (at interpreter exit Paddle may be gone: nothing left to restore)
                pass


def leave_block(block_exit: BlockExit) -> None:
    """The normal end of a block entered before a graph break (simulated by the resume function)."""
    block_exit(None, None, None)


def abandon_blocks(*block_exits: BlockExit) -> None:
    """An exception leaves the generated code while these blocks are open: leave them, innermost first
    (each exit runs once: one the resume function already called does nothing)."""
    for block_exit in reversed(block_exits):
        block_exit(None, None, None)


def enter_grad_mode(enabled: bool) -> Any:
    """Enter ``paddle.enable_grad()``/``paddle.no_grad()`` for real; returns its ``__exit__``."""
    import paddle

    previous = paddle.is_grad_enabled()
    manager = paddle.enable_grad() if enabled else paddle.no_grad()
    manager.__enter__()
    return BlockExit(manager.__exit__, "grad", previous)


def enter_context_manager(make_manager: Any) -> Any:
    """Enter a fresh AMP ``make_manager()`` for real (a block a graph break interrupted); returns its
    ``__exit__``."""
    from ..symbolic.amp import current_amp_state

    previous = current_amp_state()
    manager = make_manager()
    manager.__enter__()
    return BlockExit(manager.__exit__, "amp", previous)


def set_cell(cell: Any, value: Any) -> None:
    """``nonlocal`` assignment replayed on the real cell."""
    cell.cell_contents = value


def new_object(cls: type) -> Any:
    """An instance of ``cls`` without running ``__init__`` (its effects are replayed after it)."""
    return object.__new__(cls)

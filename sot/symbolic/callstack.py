"""Cheap op call stacks while sot builds static programs.

Paddle's PIR records, for every op it creates, the Python call stack of the creating thread: its C++ op
builder calls ``traceback.extract_stack()`` each time (whatever ``FLAGS_call_stack_level`` says). The cost
grows with the depth of the stack and includes reading source lines. sot builds ops from deep stacks (the
user's frames, the simulated frames of inlined calls, meta inference of every statement, then the program
itself), so on the first call of resnet18 this bookkeeping took about a third of the translation time. The
recorded stacks are of no use to sot's users: a failing compiled program is replayed eagerly to report the
user's own line (see `compile.py`).

`shallow_op_callstacks()` keeps only the innermost frame in those records (its file, line number and
function, not its source text), for the current thread only and only inside the block: other threads
calling ``traceback.extract_stack`` meanwhile get the full stack.
"""
from __future__ import annotations

import contextlib
import sys
import threading
import traceback
import types
from typing import Iterator

_original_extract_stack = traceback.extract_stack
_lock = threading.Lock()
_active: dict[int, int] = {}  # thread ident -> nesting depth of shallow_op_callstacks()


def _extract_stack(f: types.FrameType | None = None, limit: int | None = None) -> traceback.StackSummary:
    if f is None:
        f = sys._getframe(1)
    if limit is None and threading.get_ident() in _active:
        # The innermost frame's place, without its source line: reading it stats the file every time
        # (``linecache.checkcache``, ~70 % of the cost of one frame) and reads the whole file the first time
        # (linecache then holds Paddle's sources: ~1.6 MB after vgg11's first calls).
        code = f.f_code
        frame = traceback.FrameSummary(code.co_filename, f.f_lineno, code.co_name, line="")
        return traceback.StackSummary([frame])
    return _original_extract_stack(f, limit)


@contextlib.contextmanager
def shallow_op_callstacks() -> Iterator[None]:
    """Inside the block, ops created by this thread record one frame of call stack instead of all."""
    ident = threading.get_ident()
    with _lock:
        _active[ident] = _active.get(ident, 0) + 1
        traceback.extract_stack = _extract_stack  # type: ignore[assignment]
    try:
        yield
    finally:
        with _lock:
            depth = _active.pop(ident) - 1
            if depth:
                _active[ident] = depth
            if not _active and traceback.extract_stack is _extract_stack:  # (unless replaced meanwhile)
                traceback.extract_stack = _original_extract_stack

"""`shallow_op_callstacks`: one frame of call stack for ops built by this thread, full stacks elsewhere."""
from __future__ import annotations

import threading
import traceback

from sot.symbolic.callstack import shallow_op_callstacks


def _depth() -> int:
    return len(traceback.extract_stack())


def _nested(n: int) -> int:
    return _depth() if n == 0 else _nested(n - 1)


def test_only_the_building_thread_gets_shallow_stacks_and_only_inside_the_block() -> None:
    original = traceback.extract_stack
    full = _nested(5)
    other: list[int] = []
    with shallow_op_callstacks():
        assert _nested(5) == 1
        with shallow_op_callstacks():  # nested blocks (the build lock is reentrant)
            assert _nested(5) == 1
        assert _nested(5) == 1
        thread = threading.Thread(target=lambda: other.append(_nested(5)))
        thread.start()
        thread.join()
        assert traceback.extract_stack(limit=3) and len(traceback.extract_stack(limit=3)) == 3
    assert other[0] > 5
    assert _nested(5) == full
    assert traceback.extract_stack is original


def test_a_replacement_installed_meanwhile_by_someone_else_is_kept() -> None:
    original = traceback.extract_stack

    def theirs(f=None, limit=None):  # noqa: ANN001, ANN202
        return original(f, limit)

    try:
        with shallow_op_callstacks():
            traceback.extract_stack = theirs
        assert traceback.extract_stack is theirs
    finally:
        traceback.extract_stack = original


def test_the_one_frame_kept_names_its_place_without_reading_the_source(monkeypatch) -> None:
    import linecache
    import sys

    def no_reading(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("the source file was looked at")

    with shallow_op_callstacks():
        monkeypatch.setattr(linecache, "checkcache", no_reading)
        monkeypatch.setattr(linecache, "getline", no_reading)
        line = sys._getframe().f_lineno + 1
        stack = traceback.extract_stack()
        monkeypatch.undo()
    (frame,) = stack
    assert (frame.filename, frame.lineno) == (__file__, line)
    assert frame.name == "test_the_one_frame_kept_names_its_place_without_reading_the_source"
    assert frame.line == "" and traceback.format_list(stack)[0].startswith(f'  File "{__file__}", line {line}')

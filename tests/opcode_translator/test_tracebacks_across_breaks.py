"""Tracebacks through graph breaks show each user frame once, at the line where it raised, as eager's do.

A frame split by graph breaks runs as pieces calling each other (the translated code calls its resume
function, a native loop calls its body function), each adding a traceback entry of the same user function.
The hook drops the entry of a frame whose next entry is a later piece of the same call (`frame_groups.same_activation`), so the
whole traceback (files, functions, lines) is eager's, at the first call and at cached ones."""
from __future__ import annotations

import sys
import traceback
from typing import Any, Callable

import paddle
import pytest

import sot
from sot.eval_frame_ext import set_traceback_merger


class Boom(Exception):
    pass


def helper(y: Any) -> None:
    raise Boom("boom")


def _entries(fn: Callable[..., Any], *args: Any) -> tuple[list, BaseException]:
    """``(file, function, line)`` of every traceback entry of the exception ``fn(*args)`` raises (the call
    itself made from this one line, eager or translated)."""
    try:
        fn(*args)
    except Boom as exc:
        return [(fs.filename, fs.name, fs.lineno) for fs in traceback.extract_tb(exc.__traceback__)], exc
    raise AssertionError("no exception")


def _check_like_eager(fn: Callable[..., Any], make_args: Callable[[], tuple]) -> None:
    expected, _ = _entries(fn, *make_args())
    translated = sot.symbolic_translate(fn)
    for _ in range(3):  # translated, then cached
        actual, _ = _entries(translated, *make_args())
        assert actual == expected


def break_then_raise(x):
    y = x * 2
    print("a graph break")
    z = y + 1
    return helper(z)


def break_in_a_for_loop(xs):
    total = 0
    for x in xs:
        print("a graph break")
        total = total + helper(x)
    return total


def for_loop_in_try_finally(xs, log):
    try:
        for x in xs:
            print("a graph break")
            helper(x)
    finally:
        log.append("finally")


def tensor_while(x, n):
    i = 0
    while x.sum() < n:  # a graph break at every test
        x = x * 2
        i += 1
        if i == 3:
            helper(x)
    return x


def two_breaks_then_raise_in_a_handler(x):
    y = x + 1
    print("first break")
    try:
        print("second break")
        helper(y)
    except Boom as exc:
        raise Boom("again") from exc


CASES = [
    (break_then_raise, lambda: (paddle.ones([2]),)),
    (break_in_a_for_loop, lambda: ([paddle.ones([2]), paddle.ones([2])],)),
    (for_loop_in_try_finally, lambda: ([paddle.ones([2])], [])),
    (tensor_while, lambda: (paddle.ones([2]), 1000.0)),
    (two_breaks_then_raise_in_a_handler, lambda: (paddle.ones([2]),)),
]


@pytest.mark.parametrize("fn, make_args", CASES, ids=[fn.__name__ for fn, _ in CASES])
def test_a_traceback_through_graph_breaks_is_eagers(fn, make_args, compile_all):
    _check_like_eager(fn, make_args)
    assert sot.stats().graph_breaks >= 1


def test_the_cause_of_a_reraised_exception_keeps_eagers_traceback(compile_all):
    _, expected = _entries(two_breaks_then_raise_in_a_handler, paddle.ones([2]))
    _, actual = _entries(sot.symbolic_translate(two_breaks_then_raise_in_a_handler), paddle.ones([2]))
    assert [(fs.name, fs.lineno) for fs in traceback.extract_tb(actual.__cause__.__traceback__)] == \
        [(fs.name, fs.lineno) for fs in traceback.extract_tb(expected.__cause__.__traceback__)]


def recursive_with_a_break(x, depth):
    print("a graph break")
    if depth == 0:
        helper(x)
    return recursive_with_a_break(x * 2, depth - 1)


def test_recursion_keeps_one_entry_per_call(compile_all):
    """A call of the same function is a frame of its own, not the rest of its caller: every level stays."""
    _check_like_eager(recursive_with_a_break, lambda: (paddle.ones([2]), 3))
    expected, _ = _entries(recursive_with_a_break, paddle.ones([2]), 3)
    assert [name for _, name, _ in expected].count("recursive_with_a_break") == 4


def test_without_the_merger_a_piece_adds_its_own_entry(compile_all):
    """What the merger removes (the test above would fail without it)."""
    from sot.opcode_translator.frame_groups import same_activation

    expected, _ = _entries(break_then_raise, paddle.ones([2]))
    set_traceback_merger(None)
    try:
        actual, _ = _entries(sot.symbolic_translate(break_then_raise), paddle.ones([2]))
    finally:
        set_traceback_merger(same_activation)
    assert len(actual) > len(expected)  # (the frame before the break, and the one raising natively in helper)


def test_set_traceback_merger_rejects_a_non_callable():
    with pytest.raises(TypeError, match="callable or None"):
        set_traceback_merger(42)


class _Boom(ValueError):
    pass


def _raises() -> None:
    raise _Boom("boom")


def _calls_at_a_break(x: Any) -> Any:
    y = x * 2
    z = _raises()  # (a user function raising: the call is a graph break, run natively)
    return y + z


def _formatted_user_entries(fn: Callable[..., Any], *args: Any) -> list[str]:
    try:
        fn(*args)
    except _Boom as exc:
        return traceback.format_list(traceback.extract_tb(exc.__traceback__)[1:])
    raise AssertionError("did not raise")


def test_the_instruction_run_at_a_break_keeps_its_columns() -> None:
    """The entry of a call run natively at a graph break underlines the call (``^^^^``) as eager's does:
    the generated instruction has the original's columns, not only its line."""
    x = paddle.ones([2])
    expected = _formatted_user_entries(_calls_at_a_break, x)
    if sys.version_info[:2] in ((3, 11), (3, 12)):  # (3.10 prints lines only; 3.13 formats this entry bare)
        assert any("^^^" in entry for entry in expected)
    with sot.config.patch(min_graph_size=0):
        translated = sot.symbolic_translate(_calls_at_a_break)
        for _ in range(2):
            assert _formatted_user_entries(translated, x) == expected


def matmul_of(a, b):
    c = a * 2
    return paddle.matmul(c, b)


def test_a_compiled_program_failing_at_run_time_shows_the_frame_once(compile_all: Any) -> None:
    """A shape a symbolic dimension let through the simulation fails in the program; the frame then runs
    natively from its start (`runtime.native_rerun`): its entry is shown once, at the failing line, with
    its columns, as eagerly (the translated frame's entry used to come first, the same line again)."""
    def entries(fn: Callable[..., Any]) -> list:
        fn(paddle.ones([2, 3]), paddle.ones([3, 2]))
        with pytest.raises(ValueError) as raised:
            fn(paddle.ones([2, 3]), paddle.ones([4, 2]))  # (b's first dimension becomes symbolic)
        return [(fs.filename, fs.name, fs.lineno, getattr(fs, "colno", None))  # (3.11+: columns)
                for fs in traceback.extract_tb(raised.value.__traceback__)]

    expected = entries(matmul_of)
    actual = entries(sot.symbolic_translate(matmul_of))
    assert [entry[1] for entry in actual].count("matmul_of") == 1
    assert actual[1:] == expected[1:]  # (the first entry is this test's own call, on another line)

"""Exceptions raised by an instruction that breaks the graph inside a ``try``/``with`` block: the generated
code runs that instruction natively, outside the original's exception table, so its exception must still
reach the user's handlers (``except``, ``finally``, ``__exit__``) exactly as in eager code: same result,
same exception, same printed output, same effects on the arguments, same grad mode afterwards."""
from __future__ import annotations

import sys
import traceback
from typing import Any, Callable

import numpy as np
import paddle
import pytest

import sot
from _conformance import check


class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("cannot print me")


class Printable:
    def __str__(self) -> str:
        return "fine"


def assert_parity(fn: Callable[..., Any], *makers: Callable[[], tuple], min_graph_size: int = 0, calls: int = 3,
                  kwargs: Callable[[], dict] | None = None) -> None:
    """`_conformance.check` (result or exception, printed output, arguments after the call), plus the grad mode
    each call leaves behind; every call starts with gradients enabled, and so does the next test."""
    try:
        with sot.config.patch(min_graph_size=min_graph_size):
            check(fn, *makers, calls=calls, breaks=None, fallbacks=None, stable=False, kwargs=kwargs,
                  reset=lambda: paddle.set_grad_enabled(True), state=paddle.is_grad_enabled)
    finally:
        paddle.set_grad_enabled(True)


def finally_after_a_failing_print(x, obj, d):
    y = x * 2
    try:
        print("value", obj)
        y = y + 1
    finally:
        d["seen"] = True
        y = y * 3
        print("finally", y.numpy().tolist())
    return y


@pytest.mark.parametrize("obj", [Unprintable, Printable])
@pytest.mark.parametrize("min_graph_size", [0, 10])
def test_finally_runs_when_the_breaking_instruction_raises(obj: type, min_graph_size: int) -> None:
    assert_parity(finally_after_a_failing_print, lambda: (paddle.ones([2]), obj(), {}), min_graph_size=min_graph_size)


def except_catches_the_breaking_instruction(x, obj, log):
    y = x + 1
    try:
        print("value", obj)
    except RuntimeError as exc:
        log.append(str(exc))
        log.append(sys.exc_info()[0].__name__)
        y = y * 10
    log.append(sys.exc_info()[0])
    return y - 1


@pytest.mark.parametrize("obj", [Unprintable, Printable])
def test_except_catches_the_breaking_instruction(obj: type) -> None:
    assert_parity(except_catches_the_breaking_instruction, lambda: (paddle.ones([2]), obj(), []))


def nested_handlers(x, obj):
    y = x * 2
    try:
        try:
            print(obj)
        except ValueError:
            y = y + 100
        y = y + 1
    except RuntimeError:
        y = y - 1
    return y


def test_an_outer_handler_catches_what_the_inner_one_does_not() -> None:
    assert_parity(nested_handlers, lambda: (paddle.ones([2]), Unprintable()))


class Recorder:
    def __init__(self, log: list, swallow: bool) -> None:
        self.log = log
        self.swallow = swallow

    def __enter__(self) -> "Recorder":
        self.log.append("enter")
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        self.log.append(exc_type.__name__ if exc_type else "exit")
        return self.swallow


def with_block_sees_the_exception(x, obj, log, swallow):
    y = x * 2
    with Recorder(log, swallow):
        print(obj)
        y = y + 1
    return y


@pytest.mark.parametrize("swallow", [True, False])
def test_exit_of_a_with_block_sees_the_exception(swallow: bool) -> None:
    assert_parity(with_block_sees_the_exception, lambda: (paddle.ones([2]), Unprintable(), [], swallow))


def no_grad_block_with_a_failing_break(x, obj):
    with paddle.no_grad():
        y = x * 2
        print(obj)
    return y


def test_grad_mode_is_restored_when_a_break_in_no_grad_raises() -> None:
    w = paddle.ones([2])
    w.stop_gradient = False
    assert_parity(no_grad_block_with_a_failing_break, lambda: (w, Unprintable()))


def tensor_condition_in_try(x):
    y = x * 2
    try:
        if y:  # a tensor of two elements: its truth raises in eager code
            y = y + 1
    except (AssertionError, ValueError) as exc:
        y = y - 1
        print(type(exc).__name__)
    return y


def test_a_failing_tensor_condition_inside_try_is_caught() -> None:
    assert_parity(tensor_condition_in_try, lambda: (paddle.ones([2]),))
    assert_parity(tensor_condition_in_try, lambda: (paddle.ones([1]),))


def helper_that_prints(obj):
    print("helper", obj)
    return 1


def caller_catches_an_inlined_break(x, obj):
    y = x + 1
    try:
        n = helper_that_prints(obj)
    except RuntimeError:
        n = -1
    return y * n


def test_a_break_inside_an_inlined_call_is_caught_by_the_caller() -> None:
    assert_parity(caller_catches_an_inlined_break, lambda: (paddle.ones([2]), Unprintable()))
    assert_parity(caller_catches_an_inlined_break, lambda: (paddle.ones([2]), Printable()))


def try_inside_a_loop_body(x, items):
    total = x
    failures = 0
    for item in items:
        try:
            print("item", item)
            total = total + 1
        except RuntimeError:
            failures += 1
            total = total * 2
    return total, failures


def test_try_inside_a_loop_body_with_a_break() -> None:
    assert_parity(try_inside_a_loop_body,
                  lambda: (paddle.ones([2]), [Printable(), Unprintable(), Printable(), Unprintable()]))


def uncaught_through_a_handler(x, obj):
    y = x * 2
    try:
        print(obj)  # the failing line
    except KeyError:
        y = y + 1
    return y


def test_an_uncaught_exception_keeps_the_user_line_in_its_traceback() -> None:
    with sot.config.patch(min_graph_size=0):
        translated = sot.symbolic_translate(uncaught_through_a_handler)
        for _ in range(2):
            with pytest.raises(RuntimeError, match="cannot print me") as info:
                translated(paddle.ones([2]), Unprintable())
            frames = [(fs.name, fs.line) for fs in traceback.extract_tb(info.value.__traceback__)]
            assert ("uncaught_through_a_handler", "print(obj)  # the failing line") in frames, frames
            assert frames[-1][0] == "__str__"


def test_no_exception_path_still_compiles_the_graphs() -> None:
    """The protected region costs nothing when nothing raises: the graphs around the break are compiled."""
    with sot.config.patch(min_graph_size=0):
        translated = sot.symbolic_translate(except_catches_the_breaking_instruction)
        out = translated(paddle.ones([2]), Printable(), [])
    assert np.allclose(out.numpy(), except_catches_the_breaking_instruction(paddle.ones([2]), Printable(), []))
    stats = sot.stats()
    assert stats.graph_breaks >= 1 and stats.compiled_graphs >= 1, stats


# -- an op of a compiled graph fails at run time (only the kernel checks the values) --------------------------
def kernel_error_caught_by_the_user(x, idx, log):
    y = x + 1
    try:
        z = paddle.gather(y, idx)
    except (IndexError, ValueError) as exc:
        log.append(type(exc).__name__)
        z = y * 0
    return z * 2


@pytest.mark.parametrize("min_graph_size", [0, 10])
def test_a_kernel_error_inside_try_is_caught_by_the_user(min_graph_size: int) -> None:
    assert_parity(kernel_error_caught_by_the_user, lambda: (paddle.ones([4]), paddle.to_tensor([9]), []),
                  min_graph_size=min_graph_size)
    assert_parity(kernel_error_caught_by_the_user, lambda: (paddle.ones([4]), paddle.to_tensor([1]), []),
                  min_graph_size=min_graph_size)


class Box:
    def __init__(self) -> None:
        self.count = 0


def effects_before_a_kernel_error(x, i, lst, d, box):
    lst.append(len(lst))
    d["before"] = 1
    box.count += 1
    y = x[i]  # i out of range: only the kernel of the compiled graph finds it
    lst.append(-1)
    d["after"] = 1
    return y


@pytest.mark.parametrize("min_graph_size", [0, 10])
def test_effects_before_a_kernel_error_are_applied_once(min_graph_size: int) -> None:
    assert_parity(effects_before_a_kernel_error, lambda: (paddle.ones([5]), -6, [], {}, Box()),
                  min_graph_size=min_graph_size)


def kernel_error_after_a_break_in_finally(x, i, log):
    y = x * 2
    print("before")
    try:
        z = y[i]
    finally:
        log.append("finally")
    return z


def test_a_kernel_error_in_a_resume_function_runs_the_finally_block() -> None:
    assert_parity(kernel_error_after_a_break_in_finally, lambda: (paddle.ones([5]), 7, []))
    assert_parity(kernel_error_after_a_break_in_finally, lambda: (paddle.ones([5]), 2, []))


def kernel_error_with_star_arguments(x, *rest, scale=1, **options):
    y = x * scale
    return paddle.gather(y, rest[0]) + options.get("shift", 0)


def test_the_native_rerun_passes_every_kind_of_argument() -> None:
    assert_parity(kernel_error_with_star_arguments, lambda: (paddle.ones([4]), paddle.to_tensor([7])), calls=2)
    assert_parity(kernel_error_with_star_arguments, lambda: (paddle.ones([4]), paddle.to_tensor([2])),
                  lambda: (paddle.ones([4]), paddle.to_tensor([8])), kwargs=lambda: {"scale": 3, "shift": 1})


# -- values the generated code builds once and hands to every path out of a break ----------------------------
def new_list_live_in_a_handler(x, obj):
    items = [1, 2]
    try:
        print(obj)
    except RuntimeError:
        items.append(3)
    return x + len(items), items


def test_a_list_built_in_the_frame_reaches_the_handler() -> None:
    assert_parity(new_list_live_in_a_handler, lambda: (paddle.ones([2]), Unprintable()))
    assert_parity(new_list_live_in_a_handler, lambda: (paddle.ones([2]), Printable()))


def new_list_live_on_both_branches(x):
    items = [1, 2]
    y = x * 2
    if y.sum() > 0:  # a tensor condition: the jump runs natively, each branch resumes in its own function
        items.append(5)
    return y + len(items), items


@pytest.mark.parametrize("sign", [1, -1])
def test_a_list_built_in_the_frame_reaches_both_branches_of_a_tensor_condition(sign: int) -> None:
    assert_parity(new_list_live_on_both_branches, lambda: (paddle.ones([2]) * sign,))


def _closure_with_a_failing_op(scale: int) -> Callable[..., Any]:
    def failing(x, idx, log):
        k = scale

        def inner():
            return k + 1

        y = x * inner()
        log.append(1)
        return paddle.gather(y, idx)

    return failing


@pytest.mark.parametrize("index", [1, 9])
def test_the_native_rerun_of_a_closure_sees_its_cells(index: int) -> None:
    assert_parity(_closure_with_a_failing_op(2), lambda: (paddle.ones([3]), paddle.to_tensor([index]), []))

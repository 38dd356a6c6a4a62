"""Exceptions: a user exception raised inside translated code has the eager type, message and a traceback
through the user's own lines, wherever it is raised (in a compiled graph, at a graph break, in a resume
function); an internal error of the translator never crashes user code (the frame falls back with a logged
reason), except in strict mode where it propagates."""
from __future__ import annotations

from typing import Any, Callable

import paddle
import pytest

import sot
from conftest import check_same_exception, raised
from sot import psdb


# -- in a graph: a kernel error at run time ----------------------------------------------------------------
def gather_in_graph(x, idx):
    y = x + 1
    z = paddle.gather(y, idx)  # out-of-range index values: only the kernel knows
    return z * 2


def test_kernel_error_in_a_compiled_graph_cache_hit() -> None:
    check_same_exception(gather_in_graph, lambda: (paddle.ones([4]), paddle.to_tensor([10])), "paddle.gather",
                         warm_args=lambda: (paddle.ones([4]), paddle.to_tensor([1])))


def test_kernel_error_in_a_compiled_graph_first_call() -> None:
    check_same_exception(gather_in_graph, lambda: (paddle.ones([4]), paddle.to_tensor([10])), "paddle.gather")


def test_kernel_error_replay_runs_no_translation() -> None:
    """Replaying the failed graph eagerly (to get the eager error) must not translate sot's own replay frames:
    no new translation and no graph break for a cache hit."""
    with sot.config.patch(min_graph_size=0):
        translated = sot.symbolic_translate(gather_in_graph)
        translated(paddle.ones([4]), paddle.to_tensor([1]))
        before = sot.stats()
        with pytest.raises(IndexError):
            translated(paddle.ones([4]), paddle.to_tensor([10]))
        after = sot.stats()
    assert (after.translate_count, after.graph_breaks) == (before.translate_count, before.graph_breaks), \
        f"{before} -> {after}"


def index_in_graph(x, i):
    y = x * 2
    return y[i]  # a shape error found while simulating


def test_index_error_found_during_simulation() -> None:
    check_same_exception(index_in_graph, lambda: (paddle.ones([4]), 7), "return y[i]")


def reshape_in_graph(x):
    y = x + 1
    z = paddle.reshape(y, [3, 5])
    return z


def test_shape_error_in_a_graph() -> None:
    check_same_exception(reshape_in_graph, lambda: (paddle.ones([4]),), "paddle.reshape")


# -- in a graph with dynamic dimensions: only the kernel sees the mismatch -----------------------------------
def matmul_in_graph(x, y):
    z = x * 2
    out = paddle.matmul(z, y)
    return out + 1


def reshape_to(x, rows):
    y = x + 1
    z = paddle.reshape(y, [rows, -1])
    return z * 2


def item_of(x, i):
    y = x * 2
    return y[i] + 1


DYNAMIC_SHAPE_ERRORS = {  # fn, calls making dimensions dynamic, the failing call, its line
    "matmul": (matmul_in_graph, [([2, 3], [3, 5]), ([2, 4], [4, 5])], ([2, 4], [6, 5]), "paddle.matmul"),
    "reshape": (reshape_to, [([6], 2), ([8], 2)], ([7], 2), "paddle.reshape"),
    "index": (item_of, [([6], 2), ([8], 3)], ([7], 9), "return y[i]"),  # (may be guarded to stay in range)
}
ONLY_THE_KERNEL_SEES_IT = ("matmul", "reshape")


def _tensors(args: tuple) -> tuple:
    return tuple(paddle.ones(a) if isinstance(a, list) else a for a in args)


@pytest.mark.parametrize("case", list(DYNAMIC_SHAPE_ERRORS))
def test_kernel_error_of_a_graph_with_dynamic_shapes(case: str) -> None:
    """The failing call passes the guards of the entry compiled with symbolic dimensions (a cache hit, where
    nothing but the static program's kernel can see the mismatch), yet the user sees eager's error."""
    fn, warm_calls, failing, line_text = DYNAMIC_SHAPE_ERRORS[case]
    with sot.config.patch(min_graph_size=0, dynamic_shape=True):
        warm = sot.symbolic_translate(fn)
        for args in warm_calls:
            warm(*_tensors(args))
        translations = sot.stats().translate_count
        check_same_exception(fn, lambda: _tensors(failing), line_text)
    if case in ONLY_THE_KERNEL_SEES_IT:
        assert sot.stats().translate_count == translations, "the failing call was not served by the dynamic entry"


# -- chained exceptions: ``raise ... from`` and the exception being handled --------------------------------
def raise_from_in_a_graph(x, d):
    y = x + 1
    try:
        d["k"]
    except KeyError as exc:
        raise ValueError("wrapped") from exc
    return y


def raise_while_handling_after_a_break(x, d):
    y = x + 1
    psdb.breakgraph()
    try:
        d["k"]
    except KeyError:
        raise ValueError("wrapped")
    return y


def kernel_error_while_handling(x, idx, d):
    y = x + 1
    try:
        d["k"]
    except KeyError:
        y = paddle.gather(y, idx)
    return y


def _chain(exc: BaseException | None) -> list[tuple[str, str, bool]]:
    links = []
    while exc is not None:
        links.append((type(exc).__name__, str(exc), exc.__suppress_context__))
        exc = exc.__cause__ or exc.__context__
    return links


@pytest.mark.parametrize("fn,make_args", [
    (raise_from_in_a_graph, lambda: (paddle.ones([3]), {})),
    (raise_while_handling_after_a_break, lambda: (paddle.ones([3]), {})),
    (kernel_error_while_handling, lambda: (paddle.ones([4]), paddle.to_tensor([10]), {})),
], ids=["raise_from", "implicit_context_after_a_break", "kernel_error_while_handling"])
def test_chained_exceptions_are_eagers(fn: Any, make_args: Callable[[], tuple]) -> None:
    """``__cause__`` and ``__context__`` link the user's exceptions as eagerly, and nothing of sot's own (the
    failure of a static program replayed eagerly) appears in the chain."""
    expected = _chain(raised(fn, *make_args()))
    assert len(expected) == 2
    with sot.config.patch(min_graph_size=0):
        translated = sot.symbolic_translate(fn)
        for _ in range(2):
            assert _chain(raised(translated, *make_args())) == expected


# -- between graphs: the breaking instruction itself raises natively ---------------------------------------
@sot.skip_function
def native_helper(v):
    raise ValueError(f"bad value {v}")


def raise_at_break(x, n):
    y = x * 2
    native_helper(n)
    return y + 1


def test_exception_from_a_native_call_at_a_graph_break() -> None:
    check_same_exception(raise_at_break, lambda: (paddle.ones([3]), 4), "native_helper(n)",
                         also_through=[(native_helper, "raise ValueError")])


class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("cannot print me")


def raise_in_print(x, obj):
    y = x * 2
    print("value:", obj)
    return y


def test_exception_from_print_at_a_graph_break(capsys: Any) -> None:
    check_same_exception(raise_in_print, lambda: (paddle.ones([3]), Unprintable()), 'print("value:"')


# -- in a resume function ----------------------------------------------------------------------------------
def key_error_after_break(x, d):
    y = x + 1
    print("before")
    z = y * 2
    return d["missing"] + z


def test_key_error_in_a_resume_function(capsys: Any) -> None:
    check_same_exception(key_error_after_break, lambda: (paddle.ones([3]), {"a": 1}), 'd["missing"]')


def zero_division_after_break(x, n):
    y = x + 1
    psdb.breakgraph()
    scale = 10 // n
    return y * scale


def test_zero_division_in_a_resume_function() -> None:
    check_same_exception(zero_division_after_break, lambda: (paddle.ones([3]), 0), "10 // n",
                         warm_args=lambda: (paddle.ones([3]), 2))


def kernel_error_after_break(x, idx):
    y = x + 1
    psdb.breakgraph()
    z = paddle.gather(y * 2, idx)
    return z


def test_kernel_error_in_a_resume_function_graph() -> None:
    check_same_exception(kernel_error_after_break, lambda: (paddle.ones([4]), paddle.to_tensor([9])),
                         "paddle.gather", warm_args=lambda: (paddle.ones([4]), paddle.to_tensor([0])))


def raise_after_break_in_loop(x, items):
    total = x
    for item in items:
        print("item", item)
        total = total + 1 / item
    return total


def test_exception_in_a_loop_body_after_a_break(capsys: Any) -> None:
    check_same_exception(raise_after_break_in_loop, lambda: (paddle.ones([3]), [1, 2, 0]), "1 / item",
                         warm_args=lambda: (paddle.ones([3]), [1, 2, 4]))


# -- in an inlined helper: the traceback goes through both user functions ----------------------------------
def failing_helper(lst, i):
    return lst[i] * 2


def calls_failing_helper(x, lst, i):
    y = x * 2
    v = failing_helper(lst, i)
    return y + v


def test_exception_in_an_inlined_helper_has_both_frames() -> None:
    check_same_exception(calls_failing_helper, lambda: (paddle.ones([3]), [1, 2], 5), "failing_helper(lst, i)",
                         also_through=[(failing_helper, "return lst[i]")])


class Plain:
    pass


def attribute_error_after_mutation(x, lst, obj):
    lst.append(1)
    y = x * 2
    del obj.missing
    return y


def test_exception_points_at_the_raising_line_not_the_return() -> None:
    """An effect replayed at the end of a graph must raise with the line that caused it."""
    check_same_exception(attribute_error_after_mutation, lambda: (paddle.ones([3]), [], Plain()),
                         "del obj.missing")


def delete_in_try(x, obj):
    y = x * 2
    try:
        del obj.extra
        outcome = "deleted"
    except AttributeError as exc:
        outcome = f"caught {exc}"
    return y, outcome


class WithExtra:
    def __init__(self) -> None:
        self.extra = 1


@pytest.mark.parametrize("order", ["missing_first", "present_first"])
def test_attribute_deletion_is_guarded_on_the_attribute_being_there(order: str) -> None:
    """The same code with and without the attribute: deletion succeeds, or the user's ``try`` catches the
    eager error (a cache entry for one case must not serve the other)."""
    objects = [Plain, WithExtra] if order == "missing_first" else [WithExtra, Plain]
    with sot.config.patch(min_graph_size=0):
        translated = sot.symbolic_translate(delete_in_try)
        for cls in objects * 2:
            eager_obj, sot_obj = cls(), cls()
            expected = delete_in_try(paddle.ones([2]), eager_obj)[1]
            assert translated(paddle.ones([2]), sot_obj)[1] == expected
            assert vars(sot_obj) == vars(eager_obj)


def delete_twice(x, obj):
    y = x + 1
    del obj.extra
    del obj.extra  # again
    return y


def test_attribute_deleted_twice_raises_at_the_second_deletion() -> None:
    check_same_exception(delete_twice, lambda: (paddle.ones([3]), WithExtra()), "# again")


def inner_removes(lst, value):
    lst.remove(value)
    return len(lst)


def outer_catches(x, lst, value):
    y = x * 3
    try:
        n = inner_removes(lst, value)
    except ValueError as exc:
        n = str(exc)
    return y, n


def test_builtin_error_in_an_inlined_call_is_caught_by_the_caller() -> None:
    for lst, value in (([1, 2], 5), ([1, 2], 2)):
        eager_list, sot_list = list(lst), list(lst)
        expected = outer_catches(paddle.ones([2]), eager_list, value)[1]
        with sot.config.patch(min_graph_size=0):
            got = sot.symbolic_translate(outer_catches)(paddle.ones([2]), sot_list, value)[1]
        assert (got, sot_list) == (expected, eager_list)


def reduce_empty(x, lst):
    out = []
    for fn in (min, max):
        try:
            out.append(fn(lst))
        except ValueError as exc:
            out.append(str(exc))
        out.append(fn(lst, default=-1))
    return x + 1, out


def test_min_and_max_of_an_empty_iterable_match_eager() -> None:
    expected = reduce_empty(paddle.ones([2]), [])[1]
    with sot.config.patch(min_graph_size=0):
        assert sot.symbolic_translate(reduce_empty)(paddle.ones([2]), [])[1] == expected
        assert sot.symbolic_translate(reduce_empty)(paddle.ones([2]), [3, 1])[1] == \
            reduce_empty(paddle.ones([2]), [3, 1])[1]


def small_graph_error_in_a_helper(x, i):
    return x[i]


def small_graph_then_break(x, i):
    y = small_graph_error_in_a_helper(x, i)
    print("after")
    return y


def test_kernel_error_of_an_eagerly_replayed_graph_points_at_the_op_in_an_inlined_helper(capsys: Any) -> None:
    """A graph below min_graph_size is replayed eagerly at the break: the error shows the op's own line, in
    the helper that made it."""
    check_same_exception(small_graph_then_break, lambda: (paddle.ones([5]), -6),
                         "small_graph_error_in_a_helper(x, i)", min_graph_size=10,
                         also_through=[(small_graph_error_in_a_helper, "return x[i]")])


def mutation_then_error(x, lst):
    lst.append(7)
    y = x * 2
    return lst[5] + y


def test_mutations_before_an_exception_are_applied() -> None:
    eager_list: list[int] = []
    with pytest.raises(IndexError):
        mutation_then_error(paddle.ones([3]), eager_list)
    with sot.config.patch(min_graph_size=0):
        translated = sot.symbolic_translate(mutation_then_error)
        for _ in range(2):
            lst: list[int] = []
            with pytest.raises(IndexError):
                translated(paddle.ones([3]), lst)
            assert lst == eager_list


# -- internal errors: never crash user code ---------------------------------------------------------------
def simple(x, lst):
    y = x * 2
    lst.append(1)
    return y + 1


def breaking(x, lst):
    y = x * 2
    psdb.breakgraph()
    lst.append(1)
    return y + 1


def _boom(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("injected internal error")


def _injection_points() -> dict[str, tuple[Any, str, Any]]:
    import sot.opcode_translator.callback as callback
    import sot.opcode_translator.transform as transform
    from sot.opcode_translator.codegen import CodeGen
    from sot.opcode_translator.executor.function_graph import FunctionGraph
    from sot.opcode_translator.executor.opcode_executor import OpcodeExecutor

    return {
        "OpcodeExecutor.for_frame": (OpcodeExecutor, "for_frame", classmethod(_boom)),
        "OpcodeExecutor.run": (OpcodeExecutor, "run", _boom),
        "compile_graph": (transform, "compile_graph", _boom),
        "CodeGen.to_code": (CodeGen, "to_code", _boom),
        "build_resume_code": (transform, "build_resume_code", _boom),
        "FunctionGraph.build_guard": (FunctionGraph, "build_guard", _boom),
        "translate_frame": (callback, "translate_frame", _boom),
    }


INJECTION_POINTS = ["OpcodeExecutor.for_frame", "OpcodeExecutor.run", "compile_graph", "CodeGen.to_code",
                    "build_resume_code", "FunctionGraph.build_guard", "translate_frame"]


def _inject(monkeypatch: Any, point: str) -> None:
    owner, attr, replacement = _injection_points()[point]
    monkeypatch.setattr(owner, attr, replacement)


CASES = [(point, fn) for fn in (simple, breaking) for point in INJECTION_POINTS
         if not (fn is simple and point == "build_resume_code")]  # no resume function without a break


@pytest.mark.parametrize("point,fn", CASES, ids=[f"{fn.__name__}-{point}" for point, fn in CASES])
def test_internal_error_falls_back_with_correct_results(monkeypatch: Any, capsys: Any, point: str,
                                                        fn: Any) -> None:
    """A RuntimeError raised by an internal function (monkeypatched) while translating: the call still returns
    the eager result and effects, and the reason is logged at log_level=1."""
    x = paddle.ones([3])
    expected_list: list[int] = []
    expected = fn(x, expected_list).numpy()
    _inject(monkeypatch, point)
    with sot.config.patch(min_graph_size=0, log_level=1):
        translated = sot.symbolic_translate(fn)
        for _ in range(2):
            lst: list[int] = []
            out = translated(x, lst)
            assert (out.numpy() == expected).all() and lst == expected_list
    err = capsys.readouterr().err
    assert "injected internal error" in err, f"the fallback reason is not logged:\n{err}"


def test_internal_error_propagates_in_strict_mode(monkeypatch: Any) -> None:
    _inject(monkeypatch, "OpcodeExecutor.for_frame")
    with sot.config.patch(min_graph_size=0, strict_mode=True):
        with pytest.raises(RuntimeError, match="injected internal error"):
            sot.symbolic_translate(simple)(paddle.ones([3]), [])


def test_internal_error_is_counted_as_a_fallback(monkeypatch: Any) -> None:
    _inject(monkeypatch, "OpcodeExecutor.for_frame")
    with sot.config.patch(min_graph_size=0):
        sot.symbolic_translate(simple)(paddle.ones([3]), [])
    assert sot.stats().fallbacks == 1


# -- internal errors of a compiled program at run time: the eager replay answers ---------------------------
def graph_with_effect(x, lst):
    y = paddle.tanh(x * 2) + 1
    lst.append(len(lst))
    return (y * y).sum()


PROGRAM_FAILURES = {  # (what fails, the Paddle method patched)
    "build": ("paddle.jit.dy2static.program_translator.ASTStaticFunction", "get_concrete_program"),
    "run": ("paddle.jit.dy2static.pir_partial_program.PartialProgramLayer", "sot_call"),
}


def _break_programs(monkeypatch: Any, what: str) -> list[int]:
    """Make every static program fail to build or to run, as a bug of Paddle's static mode would; the list
    returned counts the failures."""
    failures: list[int] = []

    def fail(*args: Any, **kwargs: Any) -> Any:
        failures.append(1)
        raise RuntimeError(f"injected {what} failure")

    monkeypatch.setattr(_class(PROGRAM_FAILURES[what][0]), PROGRAM_FAILURES[what][1], fail)
    return failures


def _class(dotted: str) -> type:
    import importlib

    module_name, _, class_name = dotted.rpartition(".")
    return getattr(importlib.import_module(module_name), class_name)


@pytest.mark.parametrize("what", list(PROGRAM_FAILURES))
def test_a_program_failing_where_eager_works_gives_eager_results_and_logs_why(
        monkeypatch: Any, capsys: Any, what: str) -> None:
    """An internal error of the compiled program itself (not of the user's ops, which eager replay would raise
    again): results, gradients and effects are eager's, the reason is logged at log_level=1, and the graph
    replays eagerly from then on instead of failing at every call."""
    x = paddle.ones([3])
    x.stop_gradient = False
    eager_list: list[int] = []
    expected = graph_with_effect(x, eager_list)
    expected.backward()
    expected_grad = x.grad.numpy()
    x.clear_grad()
    failures = _break_programs(monkeypatch, what)
    with sot.config.patch(min_graph_size=0, log_level=1):
        translated = sot.symbolic_translate(graph_with_effect)
        for _ in range(3):
            lst: list[int] = []
            out = translated(x, lst)
            out.backward()
            assert out.numpy() == expected.numpy() and (x.grad.numpy() == expected_grad).all()
            assert lst == eager_list
            x.clear_grad()
    assert failures == [1], f"the broken program was tried {len(failures)} times"
    err = capsys.readouterr().err
    assert f"injected {what} failure" in err and "eager mode works" in err, err
    # A program that never built is no compiled graph; one that built and failed to run was compiled.
    assert sot.stats().compiled_graphs == (0 if what == "build" else 1)


def _a_sir(scale: float = 2.0) -> Any:
    """A one-statement SIR, ``x * scale``, for a [3] float32 input."""
    from sot.symbolic.sir import MetaInfo, Statement, StatementIR, Symbol

    x, y = Symbol("var_0"), Symbol("var_1")
    metas = {x: MetaInfo((3,), paddle.float32, True), y: MetaInfo((3,), paddle.float32, True)}
    return StatementIR("test", [x], [Statement("api", "scale", paddle.scale, (x, scale), {}, y)], [y], metas)


def test_a_failed_build_after_a_reset_is_not_taken_off_the_new_count(monkeypatch: Any) -> None:
    """The count a failed build takes back is the one of the epoch it was counted in: a reset in between
    leaves the new count alone."""
    from sot.symbolic import compile as compile_module

    _break_programs(monkeypatch, "build")
    with sot.config.patch(min_graph_size=0):
        program = compile_module.compile_sir(_a_sir())
        sot.reset()
        other = compile_module.compile_sir(_a_sir(scale=3.0))
        assert sot.stats().compiled_graphs == 1
        x = paddle.ones([3])
        program([x])  # fails to build, replays eagerly
        assert sot.stats().compiled_graphs == 1
        other([x])
        assert sot.stats().compiled_graphs == 0


@pytest.mark.parametrize("what", list(PROGRAM_FAILURES))
def test_a_program_failing_where_eager_works_raises_in_strict_mode(monkeypatch: Any, what: str) -> None:
    """Strict mode raises the internal error (a SotError caused by it) before any effect of the frame."""
    _break_programs(monkeypatch, what)
    lst: list[int] = []
    with sot.config.patch(min_graph_size=0, strict_mode=True):
        with pytest.raises(sot.SotError, match="eager mode works") as info:
            sot.symbolic_translate(graph_with_effect)(paddle.ones([3]), lst)
    assert isinstance(info.value.__cause__, RuntimeError) and lst == []


def test_a_user_error_in_a_program_is_not_taken_for_an_internal_one(capsys: Any) -> None:
    """A kernel error the eager replay raises too is the user's: the program stays compiled and nothing is
    logged about it."""
    from sot.symbolic import compile as compile_module

    with sot.config.patch(min_graph_size=0, log_level=1):
        translated = sot.symbolic_translate(gather_in_graph)
        translated(paddle.ones([4]), paddle.to_tensor([1]))
        with pytest.raises(IndexError):
            translated(paddle.ones([4]), paddle.to_tensor([10]))
        translated(paddle.ones([4]), paddle.to_tensor([2]))
    programs = [p for p in compile_module._compiled.values() if p.sir.name.startswith("gather_in_graph")]
    assert programs and all(p.choice is None for p in programs), [p.choice for p in programs]
    assert "eager mode works" not in capsys.readouterr().err


@pytest.mark.parametrize("where", ["translation", "build"])
def test_a_keyboard_interrupt_inside_sot_propagates_and_leaves_sot_usable(monkeypatch: Any, where: str) -> None:
    """Ctrl-C while sot simulates a frame or builds a program interrupts the call (it is no internal error to
    hide), before any effect of the frame; the hook, the build lock and the cache are left so that the next
    call translates and runs correctly, from another thread too."""
    import threading

    from sot.eval_frame_ext import get_callback

    def interrupt(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    owner, attr = {"translation": ("sot.opcode_translator.executor.opcode_executor.OpcodeExecutor", "run"),
                   "build": PROGRAM_FAILURES["build"]}[where]
    lst: list[int] = []
    x = paddle.ones([3])
    with sot.config.patch(min_graph_size=0):
        translated = sot.symbolic_translate(graph_with_effect)
        with monkeypatch.context() as patch:
            patch.setattr(_class(owner), attr, interrupt)
            with pytest.raises(KeyboardInterrupt):
                translated(x, lst)
        assert lst == [] and get_callback() is None
        results: list[Any] = []
        worker = threading.Thread(target=lambda: results.append(translated(x, [])))
        worker.start()
        worker.join(60)
        assert len(results) == 1 and results[0].numpy() == graph_with_effect(x, []).numpy()
        assert translated(x, lst).numpy() == graph_with_effect(x, []).numpy() and lst == [0]


# -- errors found while simulating, caught by the user's own ``try`` -----------------------------------------
class Slotted:
    __slots__ = ("a",)


class InitReturnsValue:
    def __init__(self) -> None:
        return 1  # type: ignore[return-value]


def _kwargs_target(**kwargs: Any) -> int:
    return len(kwargs)


def errors_caught_in_the_frame(x, obj, extra):
    messages = []
    try:
        obj.b = 1
    except AttributeError as exc:
        messages.append(str(exc))
    try:
        InitReturnsValue()
    except TypeError as exc:
        messages.append(str(exc))
    try:
        _kwargs_target(**{"k": 1}, **extra)
    except TypeError as exc:
        messages.append(str(exc))
    return x + 1, messages


def test_simulated_errors_have_the_eager_messages() -> None:
    expected = errors_caught_in_the_frame(paddle.ones([2]), Slotted(), {"k": 2})[1]
    with sot.config.patch(min_graph_size=0):
        translated = sot.symbolic_translate(errors_caught_in_the_frame)
        for _ in range(2):
            assert translated(paddle.ones([2]), Slotted(), {"k": 2})[1] == expected

"""Entries whose every graph runs eagerly come to run the original code natively (native.py).

A frame with a graph break whose pieces are all too small to compile (or that the cost model found faster
eagerly) would pay for its generated code and a second hooked, guarded frame per call; it is switched to
the original code behind the same guard. These tests check that the switch is exact: outputs, side effects,
gradients and exceptions equal eager's before and after it, a path never taken is still translated when it
is first taken (a trampoline calls its resume function), changed inputs still miss the guard and translate
again, and the `sot.stats()` counts are those documented in native.py.
"""
from __future__ import annotations

import numpy as np
import paddle
import pytest

import sot
from sot.eval_frame_ext import cache_entries, callback_active, callback_installed, get_callback
from sot.eval_frame_ext._eval_frame import _hook_installed
from sot.opcode_translator.callback import frame_callback
from sot.opcode_translator.native import runs_only_library_code
from sot.symbolic import cost_model

from conftest import assert_same
from fake_clock import fake_clock  # noqa: F401 (a fixture)

LOG: list = []


def tensor_if(x: paddle.Tensor, w: paddle.Tensor) -> paddle.Tensor:
    h = x * w
    LOG.append("before")
    if x.mean() > 0:
        h = h + 1.0
        LOG.append("then")
    else:
        h = h - 1.0
        LOG.append("else")
    return h * 2.0


def _inputs(sign: float, dtype: str = "float32") -> tuple[paddle.Tensor, paddle.Tensor]:
    rng = np.random.default_rng(3)
    x = paddle.to_tensor((sign * (np.abs(rng.standard_normal((4, 8))) + 0.1)).astype(dtype))
    w = paddle.to_tensor(rng.standard_normal(8).astype(dtype))
    x.stop_gradient = False
    w.stop_gradient = False
    return x, w


def _entry_codes(code) -> list:
    return [new_code for _, new_code in cache_entries(code)]


def _branches_at_the_break(code) -> bool:
    """The entry's graph break is at the conditional jump itself (two paths, two resume functions)."""
    plan = cache_entries(code)[0][0].native_plan
    return any(path.from_jump for path in plan.paths)


def _run_and_compare(fast, fn, sign: float, dtype: str = "float32") -> None:
    """One call each, translated and eager, on fresh inputs: output, gradients and the logged effects."""
    x1, w1 = _inputs(sign, dtype)
    x2, w2 = _inputs(sign, dtype)
    LOG.clear()
    out = fast(x1, w1)
    fast_log = list(LOG)
    LOG.clear()
    expected = fn(x2, w2)
    assert fast_log == LOG
    assert_same(out, expected)
    if dtype == "float32":
        out.sum().backward()
        expected.sum().backward()
        np.testing.assert_allclose(x1.grad.numpy(), x2.grad.numpy(), rtol=1e-6)
        np.testing.assert_allclose(w1.grad.numpy(), w2.grad.numpy(), rtol=1e-6)


def test_small_pieces_around_a_break_run_the_original_code() -> None:
    fast = sot.symbolic_translate(tensor_if)
    code = tensor_if.__code__
    _run_and_compare(fast, tensor_if, 1.0)
    stats = sot.stats()
    assert (stats.translate_count, stats.graph_breaks, stats.compiled_graphs) == (2, 1, 0)
    # The prefix is below min_graph_size and the branch taken runs natively: the entry runs the original code
    # except on the branch never taken, which still calls its resume function. (On every version the break
    # is at the jump itself, 3.13's bool conversion before it included.)
    [entry] = _entry_codes(code)
    assert _branches_at_the_break(code)
    assert entry is not code and entry.co_name == code.co_name
    hits = sot.stats().cache_hits
    for _ in range(3):
        _run_and_compare(fast, tensor_if, 1.0)
    assert sot.stats().cache_hits - hits == 3, "one hit per call: the branch taken no longer calls its resume"
    print("COUNTS", sot.stats()); assert sot.stats().translate_count == 2

    # The other branch, first taken now: its resume function is translated then (as without the switch).
    _run_and_compare(fast, tensor_if, -1.0)
    assert sot.stats().translate_count == 3
    assert _entry_codes(code) == [code], "both branches run natively: the original code itself"
    for sign in (1.0, -1.0, 1.0):
        _run_and_compare(fast, tensor_if, sign)
    assert sot.stats().translate_count == 3 and sot.stats().graph_breaks == 1


def test_changed_inputs_still_miss_the_guard_after_the_switch() -> None:
    fast = sot.symbolic_translate(tensor_if)
    for sign in (1.0, -1.0):
        _run_and_compare(fast, tensor_if, sign)
    assert _entry_codes(tensor_if.__code__) == [tensor_if.__code__]
    before = sot.stats().translate_count
    _run_and_compare(fast, tensor_if, 1.0, dtype="float64")
    assert sot.stats().translate_count == before + 1, "a dtype change translates the frame again"
    # Its resume functions (the same code objects) run natively in every entry they have: so does the new
    # entry, right away.
    assert _entry_codes(tensor_if.__code__) == [tensor_if.__code__] * 2
    for sign in (1.0, -1.0):
        _run_and_compare(fast, tensor_if, sign)  # the float32 entry still serves float32 inputs
        _run_and_compare(fast, tensor_if, sign, dtype="float64")
    assert sot.stats().translate_count == before + 1


def test_no_switch_when_graphs_are_compiled() -> None:
    fast = sot.symbolic_translate(tensor_if)
    with sot.config.patch(min_graph_size=0):  # every graph compiled, no cost model
        for sign in (1.0, -1.0, 1.0):
            _run_and_compare(fast, tensor_if, sign)
    [entry] = _entry_codes(tensor_if.__code__)
    assert entry is not tensor_if.__code__ and entry is cache_entries(tensor_if.__code__)[0][0].native_plan.translated


def raises_after_the_break(x: paddle.Tensor, items: list) -> paddle.Tensor:
    y = x + 1.0
    if y.sum() > 0:
        items.append(len(items))
        return y[items[-1] * 100]  # an index out of range past the first call
    return y


def test_an_exception_after_the_break_is_eager_s() -> None:
    fast = sot.symbolic_translate(raises_after_the_break)
    x = paddle.ones([4])
    items_fast, items_eager = [], []
    assert_same(fast(x, items_fast), raises_after_the_break(x, items_eager))
    for _ in range(2):
        with pytest.raises(Exception) as fast_error:
            fast(x, items_fast)
        with pytest.raises(Exception) as eager_error:
            raises_after_the_break(x, items_eager)
        assert type(fast_error.value) is type(eager_error.value)
        assert str(fast_error.value) == str(eager_error.value)
        assert items_fast == items_eager
    # The resume function's guard reads ``items``, which the frame's guard leaves open (read only after the
    # break): the branch keeps calling it, and it is translated for each length seen, as when the graphs are
    # compiled (run natively, the branch would never be translated for another length).
    stats = sot.stats()
    assert (stats.translate_count, stats.fallbacks) == (4, 0), stats
    with sot.config.patch(min_graph_size=0):
        sot.reset()
        items_fast = []
        fast(x, items_fast)
        for _ in range(2):
            with pytest.raises(IndexError):
                fast(x, items_fast)
        assert sot.stats().translate_count == stats.translate_count


def bigger_pieces(x: paddle.Tensor, w: paddle.Tensor) -> paddle.Tensor:
    h = paddle.tanh(x * w) + 0.5
    LOG.append("before")
    if x.mean() > 0:
        h = paddle.tanh(h * 2.0) - 0.25
        LOG.append("then")
    else:
        h = paddle.tanh(h * 3.0) + 0.25
        LOG.append("else")
    return h * w


SETTLED = cost_model.WARMUP_CALLS + 2 * cost_model.SAMPLES


@pytest.mark.parametrize("compiled, eager, switched", [(2.0, 1.0, True), (1.0, 2.0, False)])
def test_the_switch_waits_for_the_cost_model(fake_clock, compiled: float, eager: float,
                                             switched: bool) -> None:
    clock = fake_clock(compiled, eager)
    fast = sot.symbolic_translate(bigger_pieces)
    code = bigger_pieces.__code__
    with sot.config.patch(min_graph_size=2):
        for call in range(SETTLED + 3):
            _run_and_compare(fast, bigger_pieces, 1.0)
            if call == 0:
                [first] = _entry_codes(code)
                assert first is not code
            if call == SETTLED - 2:  # both programs are still being measured
                assert _entry_codes(code) != [code]
        runs = len(clock.kinds)
        for _ in range(3):
            _run_and_compare(fast, bigger_pieces, 1.0)
        if switched:
            assert len(clock.kinds) == runs, "no program runs once both pieces chose eager"
            [entry] = _entry_codes(code)
            # (the else branch, never taken, still calls its resume function)
            assert entry is not code and _branches_at_the_break(code)
            _run_and_compare(fast, bigger_pieces, -1.0)  # translated now; its program is measured afresh
        else:
            assert clock.kinds[runs:] == ["compiled"] * 6
            assert _entry_codes(code)[0] is cache_entries(code)[0][0].native_plan.translated
    assert sot.stats().graph_breaks == 1


def test_a_program_that_chooses_again_switches_the_entry(fake_clock) -> None:
    """A choice is not final (backward passes after a forward-only choice measure again; a program that
    fails compiled gives up): when the compiled programs of an entry come to run eagerly later, the entry
    switches then. (It stayed on its translated code: the plan stopped watching a program once it chose.)"""
    fake_clock(1.0, 2.0)  # compiled is faster: both pieces choose compiled
    fast = sot.symbolic_translate(bigger_pieces)
    code = bigger_pieces.__code__
    with sot.config.patch(min_graph_size=2):
        for _ in range(SETTLED + 3):
            _run_and_compare(fast, bigger_pieces, 1.0)
        plan = cache_entries(code)[0][0].native_plan
        assert _entry_codes(code)[0] is plan.translated
        resumed = [guard.native_plan for path in plan.paths for guard, _ in cache_entries(path.resume)]
        assert resumed  # (the piece after the break, on the path taken)
        for program in [p for each in [plan, *resumed] for p in each.programs]:
            program._give_up_compiling(RuntimeError("chooses eager now"))  # as if it measured again
        [entry] = _entry_codes(code)
        assert entry is not plan.translated
        assert entry is not code and _branches_at_the_break(code)
        for _ in range(3):
            _run_and_compare(fast, bigger_pieces, 1.0)
    assert sot.stats().graph_breaks == 1


@sot.skip_function
def native_helper(t: paddle.Tensor) -> paddle.Tensor:
    LOG.append("helper")
    return t * 3.0


def break_inside_an_expression(x: paddle.Tensor, w: paddle.Tensor) -> paddle.Tensor:
    h = x * w
    z = h + native_helper(h) * 2.0  # the break leaves ``h`` below the call's result on the stack
    LOG.append("after")
    return z - w


def test_a_break_at_a_call_inside_an_expression() -> None:
    """The path after the call gets the stack below the call and the call's result (the trampoline's temps),
    then runs natively once its resume function does."""
    fast = sot.symbolic_translate(break_inside_an_expression)
    code = break_inside_an_expression.__code__
    for _ in range(4):
        _run_and_compare(fast, break_inside_an_expression, 1.0)
    assert _entry_codes(code) == [code]
    stats = sot.stats()
    assert (stats.translate_count, stats.graph_breaks, stats.fallbacks) == (2, 1, 0)


def flag_read_after_a_break(x: paddle.Tensor, flag: bool) -> paddle.Tensor:
    y = x * 2.0
    y.numpy()  # a graph break (library code): ``flag`` is first read after it, by the resume function
    if flag:
        return y * 3.0
    z = y * 4.0
    for _ in range(12):  # a graph big enough to compile
        z = z + 1.0
    return z


def flag_returned_by_the_break(x: paddle.Tensor) -> paddle.Tensor:
    y = x * 2.0
    big = y.sum().item() > 10.0  # the break's result decides the branch
    if big:
        return y * 3.0
    z = y * 4.0
    for _ in range(12):
        z = z + 1.0
    return z


@pytest.mark.parametrize("fn, first, then", [
    (flag_read_after_a_break, (True,), (False,)),
    (flag_returned_by_the_break, (), ()),
])
def test_a_continuation_is_translated_for_a_value_the_frame_guard_leaves_open(fn, first, then) -> None:
    """The small pieces run natively, but the resume function's guard reads a value the frame's guard does
    not determine (a local first read after the break, the breaking instruction's result): the path keeps
    calling its resume function, translated again (and its bigger graph compiled) when that value changes."""
    fast = sot.symbolic_translate(fn)
    ones, zeros = paddle.ones([8]), paddle.zeros([8])
    for _ in range(3):
        assert_same(fast(ones, *first), fn(ones, *first))
    stats = sot.stats()
    assert (stats.translate_count, stats.graph_breaks, stats.fallbacks, stats.compiled_graphs) == (2, 1, 0, 0)
    for _ in range(3):
        assert_same(fast(zeros, *then), fn(zeros, *then))
    stats = sot.stats()
    assert (stats.translate_count, stats.graph_breaks, stats.fallbacks, stats.compiled_graphs) == (3, 1, 0, 1)


# -- hook-free entries: the callback is suspended while a switched entry runs (native.py, eval_frame.c) ------

HOOK_STATES: list = []


@sot.skip_function
def hook_probe(t: paddle.Tensor) -> paddle.Tensor:
    """Where a call from the frame stands: this thread's callback active, sot's eval function installed."""
    HOOK_STATES.append((callback_active(), _hook_installed()))
    return t


def probed_if(x: paddle.Tensor, w: paddle.Tensor) -> paddle.Tensor:
    h = hook_probe(x * w)
    LOG.append("before")
    if x.mean() > 0:
        h = hook_probe(h + 1.0)
        LOG.append("then")
    else:
        # big enough to compile: the branch, first taken late, must still get its graph
        h = paddle.tanh(h * 3.0) + paddle.exp(h * 0.5) - paddle.sin(h) * paddle.cos(h) + paddle.abs(h) * 0.5
        h = paddle.tanh(h * 2.0) + paddle.exp(h * 0.25) - paddle.sin(h) * 2.0
        LOG.append("else")
    return h * 2.0


def _hook_is_off_inside(code) -> bool:
    return all(getattr(guard, "hook_free", False) for guard, _ in cache_entries(code))


def _probed_call(fast, sign: float) -> list:
    """What `hook_probe` saw during one translated call."""
    HOOK_STATES.clear()
    fast(*_inputs(sign))
    return list(HOOK_STATES)


def test_a_switched_entry_runs_with_the_hook_off_and_a_later_branch_still_compiles() -> None:
    fast = sot.symbolic_translate(probed_if)
    code = probed_if.__code__
    _run_and_compare(fast, probed_if, 1.0)
    assert sot.stats().compiled_graphs == 0
    for _ in range(3):
        _run_and_compare(fast, probed_if, 1.0)
        # The break is at a tensor's truth value (library code), and the path taken runs natively: nothing
        # the frame calls is translated, and the interpreter's own eval function runs it all.
        assert _probed_call(fast, 1.0) == [(False, False)] * 2
    assert _hook_is_off_inside(code)
    translated = sot.stats().translate_count

    # The other branch, first taken now, reaches its resume function through the trampoline with the
    # callback back on: translated, its graph compiled, and run compiled from then on (on every version:
    # 3.13's bool conversion before the jump is the jump's).
    for _ in range(3):
        _run_and_compare(fast, probed_if, -1.0)
    stats = sot.stats()
    assert (stats.translate_count, stats.compiled_graphs) == (translated + 1, 1)
    assert _hook_is_off_inside(code), "the trampoline is the way back into translated code"
    _run_and_compare(fast, probed_if, -1.0)
    assert (sot.stats().translate_count, sot.stats().compiled_graphs) == (translated + 1, 1)
    assert _probed_call(fast, 1.0) == [(False, False)] * 2


def test_the_callback_is_back_after_a_hook_free_entry_raises() -> None:
    x = paddle.ones([4])
    items: list = []
    with callback_installed(frame_callback):
        raises_after_the_break(x, items)
        for _ in range(3):
            with pytest.raises(IndexError):
                raises_after_the_break(x, items)
            assert callback_active() and get_callback() is frame_callback and _hook_installed()
    assert _hook_is_off_inside(raises_after_the_break.__code__)


def not_inlinable(t: paddle.Tensor) -> paddle.Tensor:
    LOG.append("helper")
    print(end="")  # (breaks the graph: the call of this function cannot be inlined)
    return hook_probe(t * 3.0)


def breaks_at_a_user_call(x: paddle.Tensor, w: paddle.Tensor) -> paddle.Tensor:
    h = x * w
    h = not_inlinable(h)
    LOG.append("after")
    return h - w


def test_a_break_at_a_call_of_user_code_keeps_the_hook() -> None:
    """The function called at the break runs natively: it must still reach the hook, to be translated."""
    fast = sot.symbolic_translate(breaks_at_a_user_call)
    for _ in range(3):
        _run_and_compare(fast, breaks_at_a_user_call, 1.0)
    assert not _hook_is_off_inside(breaks_at_a_user_call.__code__)
    assert cache_entries(not_inlinable.__code__), "the callee was translated"
    hits = sot.stats().cache_hits
    fast(*_inputs(1.0))
    # The frame, the callee (hook-free itself: it breaks at print), the frame's resume function after the call
    assert sot.stats().cache_hits - hits == 3, "the callee's own entry served it"


class UserThing:
    def __init__(self, scale: float) -> None:
        self.scale = scale


class UserLayer(paddle.nn.Layer):
    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return x * 2.0


def test_which_values_run_only_library_code() -> None:
    from sot.opcode_translator.executor.function_graph import FrameInfo, FunctionGraph
    from sot.opcode_translator.executor.tracker import DummyTracker
    from sot.opcode_translator.executor.variables import VariableFactory

    code = tensor_if.__code__
    graph = FunctionGraph(FrameInfo(code, globals(), __builtins__, None, ()), code.co_name)

    def judged(value) -> bool:
        return runs_only_library_code([VariableFactory.from_value(value, graph, DummyTracker())])

    for value in (1, "s", None, (1, 2.0), [1, [2, (3,)]], {"a": 1}, print, len, paddle.tanh, paddle.Tensor,
                  np.float32(1.0), [1].append):
        assert judged(value), value
    for value in (not_inlinable, UserThing, UserThing(1.0), [1, UserThing(2.0)], UserThing(1.0).__init__,
                  {"f": not_inlinable}):
        assert not judged(value), value
    # A layer of a library class calls the layers it holds and the hooks registered on them.
    hooked = paddle.nn.Linear(2, 2)
    hooked.register_forward_post_hook(lambda layer, inputs, output: output)
    for layer in (paddle.nn.Sequential(paddle.nn.Linear(2, 2), UserLayer()), hooked,
                  paddle.nn.Sequential(paddle.nn.ReLU(), hooked)):
        assert not judged(layer), layer
    assert judged(paddle.nn.Sequential(paddle.nn.Linear(2, 2), paddle.nn.ReLU()))


@sot.skip_function
def resets_sot(t: paddle.Tensor) -> paddle.Tensor:
    LOG.append("reset")
    sot.reset()
    return t


def resets_inside(x: paddle.Tensor, w: paddle.Tensor) -> paddle.Tensor:
    h = x * w
    if x.mean() > 0:
        h = resets_sot(h + 1.0)
    else:
        h = resets_sot(h - 1.0)
    LOG.append("after")
    return h * 2.0


def test_sot_reset_inside_a_hook_free_entry() -> None:
    """Every call empties the cache from inside the running entry: it finishes as eager code would, the next
    call translates again, and the callback is back after each call."""
    with callback_installed(frame_callback):
        for sign in (1.0, 1.0, -1.0, 1.0):
            x, w = _inputs(sign)
            LOG.clear()
            out = resets_inside(x, w)
            fast_log = list(LOG)
            assert callback_active() and get_callback() is frame_callback
            LOG.clear()
            assert_same(out, resets_inside(*_inputs(sign)))
            assert fast_log == LOG

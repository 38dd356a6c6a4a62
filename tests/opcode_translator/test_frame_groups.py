"""The programs of one frame (its entry's, its resume functions') are measured in step and chosen together
(frame_groups.py, `cost_model.CostGroup`). A fake clock gives each piece its own compiled and eager times, so
every choice is deterministic; outputs and gradients equal eager's at every call, whichever way each piece
runs."""
from __future__ import annotations

import numpy as np
import paddle
import pytest

import sot
from sot.eval_frame_ext import cache_entries
from sot.opcode_translator import frame_groups
from sot.symbolic import compile as compile_module
from sot.symbolic import cost_model

from fake_clock import fake_clock  # noqa: F401 (a fixture)


def two_pieces(x: paddle.Tensor, w: paddle.Tensor) -> paddle.Tensor:
    h = paddle.tanh(x * w) + 0.5
    if x.mean() > 0:
        h = paddle.tanh(h * 2.0) - 0.25
        h = h * 1.5 + 1.0
    else:
        h = paddle.tanh(h * 3.0) + 0.25
    return h * w


def _inputs(sign: float) -> tuple[paddle.Tensor, paddle.Tensor]:
    rng = np.random.default_rng(5)
    x = paddle.to_tensor((sign * (np.abs(rng.standard_normal((4, 8))) + 0.1)).astype("float32"))
    w = paddle.to_tensor(rng.standard_normal(8).astype("float32"))
    x.stop_gradient = False
    w.stop_gradient = False
    return x, w


def _call(fast, sign: float, backward: bool = True) -> None:  # noqa: ANN001
    """One translated call against eager's: output and (when ``backward``) gradients."""
    x, w = _inputs(sign)
    x_ref, w_ref = _inputs(sign)
    out, expected = fast(x, w), two_pieces(x_ref, w_ref)
    np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-6)
    if not backward:
        return
    out.sum().backward()
    expected.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), x_ref.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(w.grad.numpy(), w_ref.grad.numpy(), rtol=1e-6)


def _pieces() -> tuple[compile_module.CompiledProgram, compile_module.CompiledProgram]:
    """The programs of the entry (before the break) and of the branch taken (positive inputs)."""
    [(guard, _)] = cache_entries(two_pieces.__code__)
    [prefix] = guard.native_plan.programs
    [branch] = [p for p in compile_module._compiled.values() if p is not prefix]
    assert len(prefix.sir) != len(branch.sir)  # (the fake clock tells them apart by their size)
    return prefix, branch


SETTLED = cost_model.WARMUP_CALLS + 2 * cost_model.SAMPLES + 3


@pytest.mark.parametrize("prefix_costs, branch_costs, choices, how", [
    ((1.0, 0.9), (1.0, 0.97), ("eager", "eager"), "joint"),  # each alone: eager, compiled
    ((1.0, 0.9), (3.0, 3.0), ("compiled", "compiled"), "joint"),  # each alone: eager, compiled
    ((1.0, 0.2), (1.0, 5.0), ("eager", "compiled"), "joint, mixed"),  # a mix clearly faster
])
def test_the_pieces_of_a_frame_are_chosen_together(fake_clock, prefix_costs: tuple[float, float],
                                                   branch_costs: tuple[float, float], choices: tuple[str, str],
                                                   how: str) -> None:
    clock = fake_clock(1.0, 1.0)
    fast = sot.symbolic_translate(two_pieces)
    with sot.config.patch(min_graph_size=2):
        _call(fast, 1.0)
        prefix, branch = _pieces()
        for program, (compiled, eager) in ((prefix, prefix_costs), (branch, branch_costs)):
            clock.by_size[len(program.sir)] = {"compiled": compiled, "eager": eager}
        for _ in range(SETTLED):
            _call(fast, 1.0, backward=False)  # (forward times: a training loop compares whole steps, no mix)
    assert (prefix.choice, branch.choice) == choices
    assert prefix.cost.chosen_how == branch.cost.chosen_how == how
    assert prefix.cost.group is branch.cost.group is frame_groups.group_of(two_pieces.__code__)
    # measured in step: at each call, both pieces ran the same way
    timed = slice(cost_model.WARMUP_CALLS, cost_model.WARMUP_CALLS + 2 * cost_model.SAMPLES)
    assert clock.runs_of(len(prefix.sir))[timed] == clock.runs_of(len(branch.sir))[timed]
    [(guard, entry_code)] = cache_entries(two_pieces.__code__)
    # the entry's piece eager: it runs the original code up to the break (native.py)
    assert (entry_code is not guard.native_plan.translated) == (choices[0] == "eager")


def test_a_branch_taken_later_is_measured_in_step_then_prefers_the_group_s_way(fake_clock) -> None:
    """The else branch first (its piece joins the group), then the then branch while the frame is measured:
    from its warm-up on, the new piece runs the way the entry's piece runs at each call. The branch first
    taken after the choice is measured alone and, a near-tie, takes the group's way (eager) where alone it
    would stay compiled."""
    clock = fake_clock(1.0, 0.9)  # every piece: eager clearly faster
    fast = sot.symbolic_translate(two_pieces)
    with sot.config.patch(min_graph_size=2):
        for _ in range(cost_model.WARMUP_CALLS + 2):
            _call(fast, 1.0)
        prefix, branch = _pieces()
        per_call = []
        for _ in range(SETTLED):
            start = len(clock.kinds)
            _call(fast, 1.0)
            per_call.append(clock.kinds[start:])
        assert prefix.choice == branch.choice == "eager"
        assert prefix.cost.chosen_how == "joint"
        assert all(len(set(kinds)) == 1 for kinds in per_call if len(kinds) == 2)
        # the else branch, first taken now: a near-tie alone
        others = set(compile_module._compiled.values()) - {prefix, branch}
        clock.cost = {"compiled": 1.0, "eager": 1.02}
        for _ in range(SETTLED):
            _call(fast, -1.0)
        [late] = set(compile_module._compiled.values()) - {prefix, branch} - others
        assert late.choice == "eager" and late.cost.chosen_how == "alone"
        assert late.cost.group is prefix.cost.group


def test_backward_passes_after_a_forward_only_choice_measure_the_whole_group_again(fake_clock) -> None:
    """Chosen on forward times (compiled faster), then a training loop whose backward makes eager faster:
    the first piece whose probes see the backward passes opens the whole group again, and both pieces are
    measured in step and chosen together."""
    clock = fake_clock(1.0, 2.0)
    x, w = _inputs(1.0)
    clock.backward_costs_on(x, compiled=8.0, eager=1.0)
    fast = sot.symbolic_translate(two_pieces)
    with sot.config.patch(min_graph_size=2):
        for _ in range(SETTLED):
            np.testing.assert_allclose(fast(x, w).numpy(), two_pieces(x, w).numpy(), rtol=1e-6)
        prefix, branch = _pieces()
        assert prefix.choice == branch.choice == "compiled"
        group = prefix.cost.group
        for _ in range(cost_model.PROBE_EVERY * (cost_model.PROBE_HITS + 1) + cost_model.MAX_SAMPLES + 3):
            out, expected = fast(x, w), two_pieces(x.detach(), w.detach())
            np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-6)
            out.sum().backward()
            x.clear_grad()
            w.clear_grad()
    assert group.remeasures == 1 and prefix.cost.remeasures == branch.cost.remeasures == 1
    assert prefix.choice == branch.choice == "eager"
    assert prefix.cost.with_backward and branch.cost.with_backward


def test_after_a_reset_the_group_starts_afresh(fake_clock) -> None:
    """The entries of the first translation are gone: their programs neither count nor hold the new ones to
    their way (a near-tie, which a group that chose eager would keep eager, is compiled)."""
    clock = fake_clock(1.0, 0.5)
    fast = sot.symbolic_translate(two_pieces)
    with sot.config.patch(min_graph_size=2):
        for _ in range(SETTLED):
            _call(fast, 1.0)
        old = _pieces()
        assert [p.choice for p in old] == ["eager", "eager"]
        sot.reset()
        clock.cost = {"compiled": 1.0, "eager": 1.02}
        for _ in range(SETTLED):
            _call(fast, 1.0)
        new = _pieces()
    group = new[0].cost.group
    assert set(group.live_members()) == {p.cost for p in new}
    assert [p.choice for p in new] == ["compiled", "compiled"] and new[0].cost.chosen_how == "joint"


def two_breaks(x: paddle.Tensor) -> paddle.Tensor:
    h = x * 2.0
    if x.mean() > 0:
        h = h + 1.0
    if h.mean() > 0:
        h = h - 0.5
    return h


def test_resume_functions_of_resume_functions_belong_to_the_frame() -> None:
    """A resume function's own break makes more resume functions: all of them are the user's function's
    frame, one group."""
    fast = sot.symbolic_translate(two_breaks)
    x = paddle.ones([2, 3])
    np.testing.assert_allclose(fast(x).numpy(), two_breaks(x).numpy())
    seen, codes = set(), [two_breaks.__code__]
    while codes:
        code = codes.pop()
        seen.add(code)
        for guard, _ in cache_entries(code):
            plan = getattr(guard, "native_plan", None)
            codes += [path.resume for path in (plan.paths if plan else ()) if path.resume not in seen]
    derived = seen - {two_breaks.__code__}
    assert len(derived) >= 4  # (two paths at each break)
    assert {frame_groups.frame_origin(code) for code in seen} == {two_breaks.__code__}


def loop_with_a_break(x: paddle.Tensor) -> paddle.Tensor:
    h = x * 2.0
    for _ in range(3):
        h = h + float(h.mean().numpy()) * 0.1  # a break in the body: a body function
    return h - 1.0


def test_loop_bodies_and_what_follows_the_loop_belong_to_the_frame() -> None:
    from sot.opcode_translator.callback import translated_codes

    fast = sot.symbolic_translate(loop_with_a_break)
    x = paddle.ones([2, 3])
    np.testing.assert_allclose(fast(x).numpy(), loop_with_a_break(x).numpy(), rtol=1e-6)
    codes = [code for code in translated_codes if code.co_filename == loop_with_a_break.__code__.co_filename
             and code is not loop_with_a_break.__code__]
    assert codes  # (the loop body, translated at its first call)
    assert {frame_groups.frame_origin(code) for code in codes} == {loop_with_a_break.__code__}


def test_a_piece_that_gives_up_while_measured_does_not_hold_the_others(fake_clock) -> None:
    """The branch's program fails compiled in the middle of the measurement (given up: eager for good): the
    entry's piece is still chosen, on its own times, and the group's way is its way."""
    fake_clock(1.0, 2.0)
    fast = sot.symbolic_translate(two_pieces)
    with sot.config.patch(min_graph_size=2):
        for _ in range(cost_model.WARMUP_CALLS + 2):
            _call(fast, 1.0)
        prefix, branch = _pieces()
        branch._give_up_compiling(RuntimeError("fails compiled"))
        for _ in range(SETTLED):
            _call(fast, 1.0)
    assert branch.choice == "eager" and branch.cost.chosen_how == "gave up"
    assert prefix.choice == "compiled" and prefix.cost.chosen_how == "alone"
    assert prefix.cost.group.decided and prefix.cost.group.mode == "compiled"


def _a_function() -> int:
    return 1


def test_code_maps_key_codes_by_identity_even_with_unhashable_constants() -> None:
    """Generated code may load a dict constant (code objects hash their constants), and two distinct codes
    with equal fields must stay two keys (code objects compare by their fields)."""
    source = _a_function.__code__
    with_dict = source.replace(co_consts=(*source.co_consts, {"a": 1}))
    twin = source.replace()  # equal to ``source``, another object
    assert twin == source and twin is not source
    frame_groups.translated(with_dict, source)
    frame_groups.translated(twin, with_dict)
    assert frame_groups._source(with_dict) is source
    assert frame_groups._source(twin) is with_dict
    assert frame_groups._source(source) is source
    frame_groups.derived_from(with_dict, source)
    assert frame_groups.frame_origin(with_dict) is source
    assert frame_groups.frame_origin(twin) is twin

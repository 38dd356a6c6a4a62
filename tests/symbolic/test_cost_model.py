"""The cost model of `CompiledProgram`: compiled runs and eager replays are timed alternately after a
warm-up, forward and backward, and the faster is kept. A fake clock makes the choice deterministic (no timing
asserts); whichever way runs, results and gradients equal eager's."""
from __future__ import annotations

import gc

import numpy as np
import paddle
import pytest

import sot
from sot.eval_frame_ext import cache_entries
from sot.symbolic import compile as compile_module
from sot.symbolic import cost_model
from sot.translate import TranslatedLayer

from fake_clock import fake_clock  # noqa: F401 (a fixture)


def chain(x: paddle.Tensor) -> paddle.Tensor:
    for _ in range(4):
        x = paddle.tanh(x * 1.5) + 0.25
    return x


def _run(calls: int) -> compile_module.CompiledProgram:
    sot.reset()
    fn = sot.symbolic_translate(chain)
    x = paddle.randn([3, 4])
    with sot.config.patch(min_graph_size=2):
        for _ in range(calls):
            np.testing.assert_allclose(fn(x).numpy(), chain(x).numpy(), rtol=1e-6)
    programs = list(compile_module._compiled.values())
    assert len(programs) == 1
    return programs[0]


@pytest.mark.parametrize("compiled, eager, choice", [(2.0, 1.0, "eager"), (1.0, 2.0, "compiled"),
                                                     (1.0, 0.97, "compiled")])  # within 5 %: compiled
def test_the_faster_way_is_kept(fake_clock, compiled: float, eager: float, choice: str) -> None:
    clock = fake_clock(compiled, eager)
    program = _run(3 + 2 * cost_model.SAMPLES + 4)
    assert program._choice == choice
    measured = clock.kinds[cost_model.WARMUP_CALLS:cost_model.WARMUP_CALLS + 2 * cost_model.SAMPLES]
    block = cost_model.BLOCK
    # alternating blocks, starting with the compiled program
    assert measured == [("compiled", "eager")[(i // block) % 2] for i in range(len(measured))]
    after = clock.kinds[cost_model.WARMUP_CALLS + 2 * cost_model.SAMPLES:]
    [(_, entry_code)] = cache_entries(chain.__code__)
    if choice == "compiled":
        assert after == ["compiled"] * 4 and entry_code is not chain.__code__
    else:  # the frame's only graph runs eagerly: once chosen (on the call after the last timed one, which
        # runs the replay), the entry runs the original code natively (native.py)
        assert after == ["eager"] and entry_code is chain.__code__


def chain_with_a_call(x: paddle.Tensor) -> paddle.Tensor:
    return chain(x) * 2.0


def test_eager_choice_in_a_frame_that_inlined_calls_keeps_the_replay(fake_clock) -> None:
    """Natively, the inlined call would be a hooked, guarded frame of its own: the replay stays."""
    clock = fake_clock(2.0, 1.0)
    sot.reset()
    fn = sot.symbolic_translate(chain_with_a_call)
    x = paddle.randn([3, 4])
    with sot.config.patch(min_graph_size=2):
        for _ in range(3 + 2 * cost_model.SAMPLES + 4):
            np.testing.assert_allclose(fn(x).numpy(), chain_with_a_call(x).numpy(), rtol=1e-6)
    assert clock.kinds[-4:] == ["eager"] * 4
    [(_, entry_code)] = cache_entries(chain_with_a_call.__code__)
    assert entry_code is not chain_with_a_call.__code__


def test_no_choice_before_enough_samples(fake_clock) -> None:
    fake_clock(2.0, 1.0)
    program = _run(cost_model.WARMUP_CALLS + 2 * cost_model.SAMPLES - 1)
    assert program._choice is None


def test_min_graph_size_zero_always_compiles(fake_clock) -> None:
    clock = fake_clock(2.0, 1.0)
    sot.reset()
    fn = sot.symbolic_translate(chain)
    with sot.config.patch(min_graph_size=0):
        for _ in range(20):
            fn(paddle.ones([2, 2]))
    assert set(clock.kinds) == {"compiled"}


def _train_calls(fn, reference, x: paddle.Tensor, backward: list[bool]) -> None:  # noqa: ANN001
    """Call ``fn(x)`` and, where ``backward[i]``, differentiate it; every output and gradient equals
    ``reference``'s (the eager function) on the same input, whichever way the program runs at that call."""
    x_ref = x.detach()
    x_ref.stop_gradient = False
    for differentiate in backward:
        out = fn(x)
        expected = reference(x_ref)
        np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-6)
        if differentiate:
            out.sum().backward()
            expected.sum().backward()
            np.testing.assert_allclose(x.grad.numpy(), x_ref.grad.numpy(), rtol=1e-6)
            x.clear_grad()
            x_ref.clear_grad()


def _program_of(fn, x: paddle.Tensor, backward: list[bool]) -> compile_module.CompiledProgram:  # noqa: ANN001
    with sot.config.patch(min_graph_size=2):
        _train_calls(fn, chain, x, backward)
    programs = list(compile_module._compiled.values())
    assert len(programs) == 1
    return programs[0]


def _leaf(seed: int = 0) -> paddle.Tensor:
    paddle.seed(seed)
    x = paddle.randn([3, 4])
    x.stop_gradient = False
    return x


_TIMED = 2 * cost_model.SAMPLES


@pytest.mark.parametrize("with_backward, choice", [(True, "eager"), (False, "compiled")])
def test_backward_counts(fake_clock, with_backward: bool, choice: str) -> None:
    """Compiled forward is twice as fast, but its backward is 4 s against 1 s: with a backward after every
    call eager replay wins (2 + 1 < 1 + 4); forward-only calls (gradients recorded) keep compiled."""
    clock = fake_clock(1.0, 2.0)
    x = _leaf()
    clock.backward_costs_on(x, compiled=4.0, eager=1.0)
    sot.reset()
    program = _program_of(sot.symbolic_translate(chain), x, [with_backward] * (cost_model.WARMUP_CALLS + _TIMED + 4))
    assert program._choice == choice
    assert program._cost.with_backward is with_backward
    assert set(clock.kinds[-3:]) == {choice}


def test_backward_on_some_calls_is_weighted(fake_clock) -> None:
    """Backward after every call: compiled 1 + 3 against eager 2 + 1, eager wins. After every other call:
    1 + 3/2 against 2 + 1/2, a tie, and compiled is kept."""
    for every, choice in ((1, "eager"), (2, "compiled")):
        clock = fake_clock(1.0, 2.0)
        x = _leaf()
        clock.backward_costs_on(x, compiled=3.0, eager=1.0)
        sot.reset()
        calls = cost_model.WARMUP_CALLS + 2 * _TIMED + 4
        program = _program_of(sot.symbolic_translate(chain), x, [i % every == 0 for i in range(calls)])
        assert program._choice == choice, every
        assert program._cost.with_backward


def test_a_training_loop_compares_whole_steps(fake_clock) -> None:
    """One call and one backward per step: what comes after the backward counts too. Compiled runs 1 s
    forward and 1 s backward but slows the rest of the step (the optimizer) by 3 s; eager replay runs 2 s and
    1.5 s. Forward plus backward alone would keep compiled (2 against 3.5); whole steps pick eager (5 against
    3.5)."""
    clock = fake_clock(1.0, 2.0)
    x = _leaf()
    clock.backward_costs_on(x, compiled=1.0, eager=1.5)
    sot.reset()
    fn = sot.symbolic_translate(chain)
    with sot.config.patch(min_graph_size=2):
        for _ in range(cost_model.WARMUP_CALLS + _TIMED + 4):
            fn(x).sum().backward()
            x.clear_grad()
            clock.now += 3.0 if clock.kinds[-1] == "compiled" else 0.0  # the rest of the step
    (program,) = compile_module._compiled.values()
    assert program._choice == "eager" and program._cost.with_backward


@pytest.mark.parametrize("compiled, eager, switched_into, choice", [(1.0, 0.8, "eager", "eager"),
                                                                    (1.0, 1.2, "compiled", "compiled")])
def test_a_switch_is_not_charged_to_the_way_switched_into(fake_clock, compiled: float, eager: float,
                                                          switched_into: str, choice: str) -> None:
    """The first call of each block pays for the switch (the compiled program's threads woken up again, or
    its leftover work slowing the eager replay right after it), here 10 s. Once chosen, a way runs back to
    back and never pays it: the faster way run back to back is kept (a median over every call of a way,
    half of them after a switch, came out of the switch costs)."""
    clock = fake_clock(compiled, eager)
    clock.switch[switched_into] = 10.0
    program = _run(cost_model.WARMUP_CALLS + _TIMED + 4)
    assert program._choice == choice
    assert set(clock.kinds[-3:]) == {choice}


def test_no_grad_calls_decide_on_forward(fake_clock) -> None:
    clock = fake_clock(1.0, 2.0)
    x = _leaf()
    clock.backward_costs_on(x, compiled=4.0, eager=1.0)
    sot.reset()
    fn = sot.symbolic_translate(chain)
    with sot.config.patch(min_graph_size=2), paddle.no_grad():
        for _ in range(cost_model.WARMUP_CALLS + _TIMED + 4):
            out = fn(x)
            assert out.stop_gradient
            np.testing.assert_allclose(out.numpy(), chain(x).numpy(), rtol=1e-6)
    (program,) = compile_module._compiled.values()
    assert program._choice == "compiled" and not program._cost.with_backward
    assert set(clock.kinds[-3:]) == {"compiled"}


def test_backward_after_a_forward_only_choice_measures_again(fake_clock) -> None:
    """Forward-only calls first (compiled wins on forward), then a training loop: probes see the backward
    passes, both ways are timed again with their backward, and eager replay takes over; gradients equal
    eager's before, during and after the switch."""
    clock = fake_clock(1.0, 2.0)
    x = _leaf()
    clock.backward_costs_on(x, compiled=4.0, eager=1.0)
    sot.reset()
    fn = sot.symbolic_translate(chain)
    forward_only = cost_model.WARMUP_CALLS + _TIMED + 2
    program = _program_of(fn, x, [False] * forward_only)
    assert program._choice == "compiled" and not program._cost.with_backward
    probing = cost_model.PROBE_EVERY * (cost_model.PROBE_HITS + 1)
    assert _program_of(fn, x, [True] * (probing + _TIMED + 4)) is program
    assert program._choice == "eager" and program._cost.with_backward
    assert program._cost.remeasures == 1
    assert set(clock.kinds[-3:]) == {"eager"}


@pytest.fixture
def fired(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the cost model's backward hooks, in the order they fire."""
    names: list[str] = []
    for name in ("on_output_grad", "on_input_grad"):
        original = getattr(cost_model.Sample, name)
        monkeypatch.setattr(cost_model.Sample, name,
                            lambda self, grad, original=original, name=name: (names.append(name), original(self, grad))[1])
    return names


def test_timing_hooks_are_removed(fake_clock, fired: list[str]) -> None:
    """Once the choice is made, no backward pass runs a hook of the cost model any more (the hooks on leaf
    tensors would otherwise stay for the tensor's life)."""
    fake_clock(1.0, 2.0)
    x = _leaf()
    sot.reset()
    fn = sot.symbolic_translate(chain)
    program = _program_of(fn, x, [True] * (cost_model.WARMUP_CALLS + _TIMED + 1))
    assert program._choice is not None and fired
    fired.clear()
    _program_of(fn, x, [True] * 3)
    assert fired == []
    # A program dropped in the middle of measuring takes its hooks with it.
    sot.reset()
    fn = sot.symbolic_translate(chain)
    program = _program_of(fn, x, [True] * (cost_model.WARMUP_CALLS + 2))
    assert program._choice is None and fired
    del program, fn
    sot.reset()
    gc.collect()
    fired.clear()
    chain(x).sum().backward()
    assert fired == []


def test_a_leaf_output_gets_no_hook(fired: list[str]) -> None:
    """A graph output that is a leaf (a parameter returned as it is) is not hooked as an output: a hook on a
    leaf would stay for its whole life (those on the inputs are removed when the sample closes)."""
    x = _leaf()
    y = x * 2
    sample = cost_model.Sample(eager=True, forward=0.0)
    cost_model._watch_backward(sample, [x], [y, x])
    (y.sum() + x.sum()).backward()
    assert sample.backward is not None and "on_output_grad" in fired
    sample.closed = True
    sample.remove_hooks()
    fired.clear()
    x.sum().backward()
    assert fired == []


def test_calls_in_one_backward_pass_are_cut_apart() -> None:
    """A graph applied 3 times in a loop: in the one backward pass the calls run last to first, and all end
    at the shared parameters' gradients (at 10.0). Each call's span ends where the next call's starts; a
    call from an earlier pass (closed) and one whose backward has not run are left alone."""
    model = cost_model.CostModel()
    old = cost_model.Sample(False, 1.0, backward_start=0.0, backward_end=0.5, closed=True)
    first, second, third = (cost_model.Sample(eager, 1.0, backward_start=start, backward_end=10.0)
                            for eager, start in ((False, 7.0), (True, 4.0), (False, 1.0)))
    pending = cost_model.Sample(True, 1.0)
    model.samples = [old, first, second, third, pending]
    model.settle()
    assert [s.backward for s in (old, first, second, third)] == [0.5, 3.0, 3.0, 3.0]
    assert first.closed and second.closed and third.closed and not pending.closed
    assert pending.backward is None
    assert model.several_per_pass  # (so whole-step times, which mix the calls' ways, are not used)


class _Mlp(paddle.nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.first, self.second = paddle.nn.Linear(4, 8), paddle.nn.Linear(8, 4)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return paddle.tanh(self.second(paddle.tanh(self.first(x)))) * 1.5 + 0.25


def _translated_mlp_and_eager_copy(seed: int) -> tuple[_Mlp, _Mlp, TranslatedLayer, paddle.Tensor]:
    """A layer, an eager copy with the same parameters, the translated layer (on a reset cache) and an input."""
    paddle.seed(seed)
    layer = _Mlp()
    reference = _Mlp()
    reference.set_state_dict(layer.state_dict())
    sot.reset()
    return layer, reference, sot.symbolic_translate(layer), paddle.randn([5, 4])


def _assert_same_grads_and_clear(layer: _Mlp, reference: _Mlp, rtol: float) -> None:
    for p, q in zip(layer.parameters(), reference.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=rtol)
        p.clear_grad()
        q.clear_grad()


def test_parameters_are_timed_and_their_gradients_exact() -> None:
    """A layer's parameters are not inputs of the graph: the backward is timed up to their gradients (real
    clock), and the parameter gradients equal those of an eager copy at every step of the measurement."""
    layer, reference, fn, x = _translated_mlp_and_eager_copy(seed=3)
    with sot.config.patch(min_graph_size=2):
        for _ in range(cost_model.WARMUP_CALLS + _TIMED + 4):
            fn(x).sum().backward()
            reference(x).sum().backward()
            _assert_same_grads_and_clear(layer, reference, rtol=1e-6)
    (program,) = compile_module._compiled.values()
    assert program._choice in ("compiled", "eager") and program._cost.with_backward


def test_several_calls_per_backward_pass_are_exact() -> None:
    """The translated layer applied 3 times per training step (one backward pass over all three calls, the
    parameters shared): gradients equal an eager copy's at every step, through the measurement and after the
    choice, which weighed the backward."""
    layer, reference, fn, x = _translated_mlp_and_eager_copy(seed=4)
    with sot.config.patch(min_graph_size=2):
        for _ in range(cost_model.WARMUP_CALLS + _TIMED + 4):
            y, z = x, x
            for _ in range(3):
                y, z = fn(y), reference(z)
            np.testing.assert_allclose(y.numpy(), z.numpy(), rtol=1e-6)
            y.sum().backward()
            z.sum().backward()
            _assert_same_grads_and_clear(layer, reference, rtol=1e-5)
    # (two programs: the first call's input does not require grad, the next two calls' do)
    programs = list(compile_module._compiled.values())
    assert len(programs) == 2
    assert all(p._choice in ("compiled", "eager") and p._cost.with_backward for p in programs)
    assert sorted(p._cost.several_per_pass for p in programs) == [False, True]


# -- groups: the programs of one frame, chosen together (`CostGroup`) -------------------------------------
def _measured(compiled: float, eager: float) -> cost_model.CostModel:
    """A cost model with `SAMPLES` steady forward times of each way (no backward)."""
    model = cost_model.CostModel()
    model.samples = [cost_model.Sample(False, compiled) for _ in range(cost_model.SAMPLES)] + \
                    [cost_model.Sample(True, eager) for _ in range(cost_model.SAMPLES)]
    return model


def _group(*members: tuple[cost_model.CostModel, list[bool]]) -> cost_model.CostGroup:
    group = cost_model.CostGroup("frame")
    for model, alive in members:
        assert group.add(model, lambda alive=alive: alive[0])
    return group


@pytest.mark.parametrize("first, second, choices, how", [
    ((1.0, 0.9), (1.0, 0.97), ("eager", "eager"), "joint"),  # alone: eager, compiled
    ((1.0, 0.9), (3.0, 3.0), ("compiled", "compiled"), "joint"),  # alone: eager, compiled
    ((1.0, 0.2), (1.0, 5.0), ("eager", "compiled"), "joint, mixed"),  # a mix clearly faster
])
def test_a_group_keeps_one_way_unless_a_mix_is_clearly_faster(first: tuple[float, float],
                                                                second: tuple[float, float],
                                                                choices: tuple[str, str], how: str) -> None:
    one, two = _measured(*first), _measured(*second)
    group = _group((one, [True]), (two, [True]))
    assert one.decide() == choices[0]
    assert (one.choice, two.choice) == choices and one.chosen_how == two.chosen_how == how
    assert group.decided and group.mode == (None if how == "joint, mixed" else choices[0])
    assert not one.samples and not two.samples


def test_a_member_whose_entry_is_gone_is_not_weighed() -> None:
    """Weighed, the second member (eager 10x slower) would keep the group compiled; its entry is gone from the
    cache: the first is chosen on its own times, the second is left alone."""
    for alive, choice in ((True, "compiled"), (False, "eager")):
        one, two = _measured(1.0, 0.8), _measured(1.0, 10.0)
        _group((one, [True]), (two, [alive]))
        assert one.decide() == choice
        assert two.choice == ("compiled" if alive else None)


def test_a_member_that_gave_up_neither_counts_nor_is_measured_again() -> None:
    one, two = _measured(1.0, 0.8), _measured(1.0, 10.0)
    group = _group((one, [True]), (two, [True]))
    two.give_up()
    assert one.decide() == "eager" and one.chosen_how == "alone" and group.mode == "eager"
    assert two.choice == "eager" and two.chosen_how == "gave up"
    group.reopen()  # (backward passes came: measure again)
    assert one.choice is None and one.remeasures == 1 and not group.decided
    assert two.choice == "eager" and two.remeasures == 0


def test_a_member_measured_after_the_group_chose_prefers_its_way() -> None:
    """A near-tie (eager 2 % slower) keeps compiled alone, but joins its group's eager way; a clear difference
    still wins."""
    for own, choice in (((1.0, 1.02), "eager"), ((1.0, 2.0), "compiled")):
        first = _measured(1.0, 0.5)
        group = _group((first, [True]))
        assert first.decide() == "eager" and group.mode == "eager"
        late = _measured(*own)
        group.add(late, lambda: True)
        assert late.decide() == choice and late.chosen_how == "alone"
    assert _measured(1.0, 1.02).decide() == "compiled"  # (no group)


def test_members_of_a_measuring_group_run_the_same_way_in_a_round() -> None:
    """The way changes every `BLOCK` rounds; a round ends when a member is called again, so members called at
    different rates (one in two frame calls) run the frame's way."""
    one, two = cost_model.CostModel(), cost_model.CostModel()
    group = _group((one, [True]), (two, [True]))
    ways = []
    for call in range(4 * cost_model.BLOCK):
        way = one.next_is_eager()
        ways.append(way)
        if call % 2:
            assert two.next_is_eager() == way
    assert ways == [(i // cost_model.BLOCK) % 2 == 1 for i in range(4 * cost_model.BLOCK)]
    assert not group.decided

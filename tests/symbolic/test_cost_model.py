"""The cost model of `CompiledProgram`: compiled runs and eager replays are timed alternately after a
warm-up, and the faster is kept. A fake clock makes the choice deterministic (no timing asserts)."""
from __future__ import annotations

import numpy as np
import paddle
import pytest

import sot
from sot.eval_frame_ext import cache_entries
from sot.symbolic import compile as compile_module


def chain(x: paddle.Tensor) -> paddle.Tensor:
    for _ in range(4):
        x = paddle.tanh(x * 1.5) + 0.25
    return x


class FakeClock:
    """``perf_counter`` that moves only when a program runs: by ``compiled`` or ``eager`` seconds."""

    def __init__(self, compiled: float, eager: float) -> None:
        self.now = 0.0
        self.cost = {"compiled": compiled, "eager": eager}
        self.kinds: list[str] = []

    @sot.skip_function  # test machinery, called from inside translated calls
    def __call__(self) -> float:
        return self.now

    @sot.skip_function
    def ran(self, kind: str) -> None:
        self.now += self.cost[kind]
        self.kinds.append(kind)


@pytest.fixture
def fake_clock(monkeypatch: pytest.MonkeyPatch):
    def install(compiled: float, eager: float) -> FakeClock:
        clock = FakeClock(compiled, eager)
        run_compiled, replay = compile_module.CompiledProgram._run_compiled, compile_module.CompiledProgram._replay

        @sot.skip_function
        def timed_compiled(self, inputs):  # noqa: ANN001, ANN202
            clock.ran("compiled")
            return run_compiled(self, inputs)

        @sot.skip_function
        def timed_replay(self, inputs):  # noqa: ANN001, ANN202
            clock.ran("eager")
            return replay(self, inputs)

        monkeypatch.setattr(compile_module.time, "perf_counter", clock)
        monkeypatch.setattr(compile_module.CompiledProgram, "_run_compiled", timed_compiled)
        monkeypatch.setattr(compile_module.CompiledProgram, "_replay", timed_replay)
        return clock

    return install


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
    program = _run(3 + 2 * compile_module._SAMPLES + 4)
    assert program._choice == choice
    measured = clock.kinds[compile_module._WARMUP_CALLS:compile_module._WARMUP_CALLS + 2 * compile_module._SAMPLES]
    block = compile_module._BLOCK
    # alternating blocks, starting with the compiled program
    assert measured == [("compiled", "eager")[(i // block) % 2] for i in range(len(measured))]
    after = clock.kinds[compile_module._WARMUP_CALLS + 2 * compile_module._SAMPLES:]
    [(_, entry_code)] = cache_entries(chain.__code__)
    if choice == "compiled":
        assert after == ["compiled"] * 4 and entry_code is not chain.__code__
    else:  # the frame's only graph runs eagerly: the entry runs the original code natively (native.py)
        assert after == [] and entry_code is chain.__code__


def chain_with_a_call(x: paddle.Tensor) -> paddle.Tensor:
    return chain(x) * 2.0


def test_eager_choice_in_a_frame_that_inlined_calls_keeps_the_replay(fake_clock) -> None:
    """Natively, the inlined call would be a hooked, guarded frame of its own: the replay stays."""
    clock = fake_clock(2.0, 1.0)
    sot.reset()
    fn = sot.symbolic_translate(chain_with_a_call)
    x = paddle.randn([3, 4])
    with sot.config.patch(min_graph_size=2):
        for _ in range(3 + 2 * compile_module._SAMPLES + 4):
            np.testing.assert_allclose(fn(x).numpy(), chain_with_a_call(x).numpy(), rtol=1e-6)
    assert clock.kinds[-4:] == ["eager"] * 4
    [(_, entry_code)] = cache_entries(chain_with_a_call.__code__)
    assert entry_code is not chain_with_a_call.__code__


def test_no_choice_before_enough_samples(fake_clock) -> None:
    fake_clock(2.0, 1.0)
    program = _run(compile_module._WARMUP_CALLS + 2 * compile_module._SAMPLES - 1)
    assert program._choice is None


def test_min_graph_size_zero_always_compiles(fake_clock) -> None:
    clock = fake_clock(2.0, 1.0)
    sot.reset()
    fn = sot.symbolic_translate(chain)
    with sot.config.patch(min_graph_size=0):
        for _ in range(20):
            fn(paddle.ones([2, 2]))
    assert set(clock.kinds) == {"compiled"}

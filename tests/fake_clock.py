"""A fake ``time.perf_counter`` for tests of the cost model (sot/symbolic/cost_model.py): time moves only
when a compiled program or its eager replay runs, so every compiled-vs-eager choice is deterministic (no
timing asserts). Import ``fake_clock`` into a test module to use the fixture."""
from __future__ import annotations

import paddle
import pytest

import sot
from sot.symbolic import compile as compile_module
from sot.symbolic import cost_model


class FakeClock:
    """``perf_counter`` that moves only when a program runs: by ``compiled`` or ``eager`` seconds (plus
    ``switch[kind]`` when the run before was of the other kind), and by ``backward[kind]`` seconds in the
    backward of the last run (see `backward_costs_on`). ``by_size[n]`` overrides ``compiled``/``eager`` for the
    programs of ``n`` statements (the pieces of a frame, each with costs of its own)."""

    def __init__(self, compiled: float, eager: float) -> None:
        self.now = 0.0
        self.cost = {"compiled": compiled, "eager": eager}
        self.backward = {"compiled": 0.0, "eager": 0.0}
        self.switch = {"compiled": 0.0, "eager": 0.0}
        self.by_size: dict[int, dict[str, float]] = {}
        self.kinds: list[str] = []
        self.sizes: list[int] = []  # the statements of the program of each run, as ``kinds``

    def backward_costs_on(self, x: paddle.Tensor, compiled: float, eager: float) -> None:
        """The backward of a run that reads ``x`` (a leaf: this hook runs before those the cost model puts on
        it later, i.e. inside the span it times) takes ``compiled`` or ``eager`` seconds."""
        self.backward = {"compiled": compiled, "eager": eager}

        def advance(grad: paddle.Tensor) -> None:
            self.now += self.backward[self.kinds[-1]]

        x.register_hook(advance)

    @sot.skip_function  # test machinery, called from inside translated calls
    def __call__(self) -> float:
        return self.now

    @sot.skip_function
    def ran(self, kind: str, size: int = 0) -> None:
        cost = self.by_size.get(size, self.cost)[kind]
        self.now += cost + (self.switch[kind] if self.kinds and self.kinds[-1] != kind else 0.0)
        self.kinds.append(kind)
        self.sizes.append(size)

    def runs_of(self, size: int) -> list[str]:
        """The kinds of the runs of the programs of ``size`` statements, in order."""
        return [kind for kind, ran in zip(self.kinds, self.sizes) if ran == size]


@pytest.fixture
def fake_clock(monkeypatch: pytest.MonkeyPatch):
    def install(compiled: float, eager: float) -> FakeClock:
        clock = FakeClock(compiled, eager)
        run_compiled, replay = compile_module.CompiledProgram._run_compiled, compile_module.CompiledProgram._replay

        @sot.skip_function
        def timed_compiled(self, inputs):  # noqa: ANN001, ANN202
            if self.key is not None:  # (a product program runs inside a backward: `backward_costs_on` times it)
                clock.ran("compiled", len(self.sir))
            return run_compiled(self, inputs)

        @sot.skip_function
        def timed_replay(self, inputs):  # noqa: ANN001, ANN202
            clock.ran("eager", len(self.sir))
            return replay(self, inputs)

        monkeypatch.setattr(cost_model.time, "perf_counter", clock)
        monkeypatch.setattr(compile_module.CompiledProgram, "_run_compiled", timed_compiled)
        monkeypatch.setattr(compile_module.CompiledProgram, "_replay", timed_replay)
        return clock

    return install

"""What giving gradients eager's autograd flags costs a train step (`sot.symbolic.gradient_flags`, issue 9).

    python benchmarks/gradient_flags.py            # full run (~1-2 min on 2 CPU cores)
    python benchmarks/gradient_flags.py --quick    # smoke run

One translated train step (forward, ``backward()``, an SGD step, ``clear_grad``) of a small model,
``Linear(16, 16) -> tanh -> Linear(16, 4) -> mean`` on [8, 16], compiled (``min_graph_size=0``):

* ``plain``: one graph; the four parameters are held by the program (what the hooks cost);
* ``break``: a graph break between the layers, so the activation is a non-leaf input of the resume
  function's graph (what its view costs, with the hooks).

Each model runs in two modes, interleaved in one process on the same model and programs: ``with`` what
`gradient_flags` does (one `_with_eager_flag` hook per parameter, non-leaf inputs of a call with the program's
own backward fed through a view) and ``without`` (no hook, no view of non-leaf inputs: the state before).
The mode is switched at the first call of each timed batch. Reported: the median per-step time over rounds
(wall and process CPU) and the time ``with`` adds, paired per round. Before timing, ``with`` must give the
parameters' and the activation's retained gradient eager's flags and values.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
import paddle  # noqa: E402
from paddle import nn  # noqa: E402

import sot  # noqa: E402
from _common import (Variant, add_timing_args, format_table, interleave, load_average,  # noqa: E402
                     machine_description, paired_difference_us, resolve_timing_args)
from sot.symbolic import gradient_flags  # noqa: E402


class Plain(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(16, 16)
        self.b = nn.Linear(16, 4)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return self.b(paddle.tanh(self.a(x))).mean()


class Broken(Plain):
    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        h = paddle.tanh(self.a(x))
        sot.psdb.breakgraph()
        return self.b(h).mean()


class Modes:
    """Switches `gradient_flags` between what it does (``with``) and the state before it (``without``)."""

    def __init__(self) -> None:
        self.views = True
        self.hooked: list[tuple[paddle.Tensor, int]] = []
        self.parameters: list[paddle.Tensor] = []
        original_fed = gradient_flags.fed

        @sot.skip_function
        def fed(inputs: list, grad_inputs: list[int], non_leaves: bool) -> list:
            return original_fed(inputs, grad_inputs, non_leaves and self.views)

        @sot.skip_function
        def keep_eager_flags(parameters: list) -> None:  # (hooks are registered by `switch`)
            return None

        gradient_flags.fed, gradient_flags.keep_eager_flags = fed, keep_eager_flags

    def switch(self, on: bool) -> None:
        if self.views == on:
            return
        self.views = on
        while self.hooked:
            parameter, hook_id = self.hooked.pop()
            parameter._remove_grad_hook(hook_id)
        if on:
            self.hooked = [(p, p._register_grad_hook(gradient_flags._with_eager_flag)) for p in self.parameters]


def make_step(model_class: type, modes: Modes, on: bool):  # noqa: ANN201
    paddle.seed(0)
    model = model_class()
    modes.parameters = model.parameters()
    modes.views = not on
    modes.switch(on)
    fast = sot.symbolic_translate(model)
    optimizer = paddle.optimizer.SGD(0.01, parameters=model.parameters())
    x = paddle.randn([8, 16])

    def step(mode: bool) -> None:
        modes.switch(mode)
        loss = fast(x)
        loss.backward()
        optimizer.step()
        optimizer.clear_grad()

    return model, fast, x, step


def check_flags() -> None:
    """Before `Modes` patches anything: two translated layers chained (the activation a non-leaf input of the
    second's program) give the parameters' gradients and the activation's retained one eager's flags and
    values."""
    def gradients(translate: bool) -> list:
        paddle.seed(0)
        model = Plain()
        first, second = (sot.symbolic_translate(model.a), sot.symbolic_translate(model.b)) if translate \
            else (model.a, model.b)
        h = paddle.tanh(first(paddle.ones([8, 16])))
        h.retain_grads()
        second(h).mean().backward()
        return [(t.stop_gradient, t.numpy()) for t in (model.a.weight.grad, model.b.weight.grad, h.grad)]

    for (flag, value), (want_flag, want_value) in zip(gradients(True), gradients(False)):
        if flag != want_flag:
            raise SystemExit("a gradient's stop_gradient differs from eager's")
        np.testing.assert_allclose(value, want_value, rtol=1e-6, atol=1e-7)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_timing_args(parser, rounds=200, calls=20, quick_rounds=20, quick_calls=10)
    args = parser.parse_args()
    rounds, calls = resolve_timing_args(args)
    sot.config.min_graph_size = 0
    check_flags()
    modes = Modes()
    variants = []
    for name, model_class in (("plain", Plain), ("break", Broken)):
        _, _, _, step = make_step(model_class, modes, True)
        for on in (False, True):
            for _ in range(100):
                step(on)  # (warm-up: translation, compilation, both modes' first runs)
        variants.append(Variant(f"{name}-without", f"{name}: without", step, (False,)))
        variants.append(Variant(f"{name}-with", f"{name}: with", step, (True,), baseline=f"{name}-without"))
    cpu: dict[str, list[float]] = {}
    samples = interleave(variants, rounds, calls, cpu_samples=cpu)
    rows = []
    for v in variants:
        added = "" if v.baseline is None else f"{paired_difference_us(samples[v.key], samples[v.baseline]):+.1f}"
        added_cpu = "" if v.baseline is None else f"{paired_difference_us(cpu[v.key], cpu[v.baseline]):+.1f}"
        rows.append((v.label, f"{statistics.median(samples[v.key]) * 1e6:.1f}",
                     f"{statistics.median(cpu[v.key]) * 1e6:.1f}", added, added_cpu))
    print(machine_description())
    print(load_average())
    print(f"{rounds} rounds x {calls} steps per variant; sot stats: {sot.stats()}")
    print(format_table(("train step", "median us (wall)", "median us (CPU)", "added us (wall, paired)",
                        "added us (CPU, paired)"), rows, right=(False, True, True, True, True)))


if __name__ == "__main__":
    main()

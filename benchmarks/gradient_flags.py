"""What giving gradients eager's autograd flags costs a train step (`sot.symbolic.gradient_flags`, issue 9).

    python benchmarks/gradient_flags.py            # full run (~1-2 min on 2 CPU cores)
    python benchmarks/gradient_flags.py --quick    # smoke run

One translated train step (forward, ``backward()``, an SGD step, ``clear_grad``) of small models, compiled
(``min_graph_size=0``), ``x`` of [8, 16]:

* ``plain``: ``Linear(16, 16) -> tanh -> Linear(16, 4) -> mean``, one graph; the four parameters are held by the
  program (what the parameter hooks cost);
* ``break``: the same with a graph break between the layers, so the activation is a non-leaf input of the
  resume function's graph (what it costs, with the hooks);
* ``params``: 16 ``Linear(16, 16)`` layers in a row, one graph: 32 parameters (the cost per parameter);
* ``crossings``: ``Linear(16, 128) -> tanh``, split into 8 activations, a graph break, then their products
  summed: 8 non-leaf inputs of the resume function's graph (the cost per crossing activation).

Each model runs in three modes, interleaved in one process on the same model and programs:

* ``without``: no hook, no view of non-leaf inputs (what main did before the flags: a view of a leaf input only);
* ``python``: the Python way (the first version of the flags, and the fallback without the C++ extension):
  a Python hook per parameter, every non-leaf input of a call with the program's own backward viewed;
* ``C++``: the extension's way: a C++ hook per parameter, a view only of a non-leaf input whose gradient is
  observed (none here: nothing is retained or hooked), the others given the C++ flag hook at each call.

Wall-clock numbers on this shared 2-CPU machine move with the load; instruction counts do not. With
``--instructions MODEL MODE`` the script runs (after the same warm-up) ``--steps`` train steps of one model in
one mode inside one ``functools.reduce``, for callgrind to count (per step: the total over ``--steps``)::

    valgrind --tool=callgrind --instr-atstart=no --toggle-collect=functools_reduce \
        --callgrind-out-file=/tmp/cg.out python benchmarks/gradient_flags.py --instructions params C++
    callgrind_annotate /tmp/cg.out | head -20

The mode is switched at the first call of each timed batch. Reported: the median per-step time over rounds
(wall and process CPU) and the time each mode adds to ``without``, paired per round; for ``params`` and
``crossings`` also per parameter and per crossing activation. Before timing, both modes must give the
parameters' and a retained activation's gradients eager's flags and values.
"""
from __future__ import annotations

import argparse
import functools
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

CROSSINGS = 8
LAYERS = 16


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


class Params(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(*[nn.Linear(16, 16) for _ in range(LAYERS)])

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return self.layers(x).mean()


class Crossings(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(16, 16 * CROSSINGS)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        h0, h1, h2, h3, h4, h5, h6, h7 = paddle.split(paddle.tanh(self.a(x)), CROSSINGS, axis=1)
        sot.psdb.breakgraph()
        return (h0 * h1 + h2 * h3 + h4 * h5 + h6 * h7).mean()


MODELS = {"plain": (Plain, None), "break": (Broken, None), "params": (Params, ("parameter", 2 * LAYERS)),
          "crossings": (Crossings, ("crossing activation", CROSSINGS))}
MODES = ("without", "python", "C++")


class Modes:
    """Switches `gradient_flags` between the modes (module docstring) on the parameters of the current model."""

    def __init__(self) -> None:
        self.mode = "without"
        self.hooked: list[tuple[paddle.Tensor, int]] = []
        self.parameters: list[paddle.Tensor] = []
        python_fed = gradient_flags._python_fed
        native_fed = gradient_flags._native_fed
        modes = self

        @sot.skip_function
        def fed(inputs: list, grad_inputs: list[int], non_leaves: bool) -> list:
            if modes.mode == "C++":
                return native_fed(inputs, grad_inputs, non_leaves)
            return python_fed(inputs, grad_inputs, non_leaves and modes.mode == "python")

        @sot.skip_function
        def keep_eager_flags(parameters: list) -> None:  # (hooks are registered by `switch`)
            return None

        gradient_flags.fed, gradient_flags.keep_eager_flags = fed, keep_eager_flags

    def switch(self, mode: str) -> None:
        if self.mode == mode:
            return
        self.mode = mode
        while self.hooked:
            parameter, hook_id = self.hooked.pop()
            parameter._remove_grad_hook(hook_id)
        if mode == "python":
            self.hooked = [(p, p._register_grad_hook(gradient_flags._with_eager_flag)) for p in self.parameters]
        elif mode == "C++":
            self.hooked = [(p, gradient_flags._ext.keep_eager_flags(p)) for p in self.parameters]
            if any(hook_id is None or hook_id < 0 for _, hook_id in self.hooked):
                raise SystemExit("a parameter had the C++ hook already, or has no accumulation node")


def make_step(model_class: type, modes: Modes):  # noqa: ANN201
    paddle.seed(0)
    model = model_class()
    modes.switch("without")
    modes.parameters = model.parameters()
    fast = sot.symbolic_translate(model)
    optimizer = paddle.optimizer.SGD(0.01, parameters=model.parameters())
    x = paddle.randn([8, 16])

    def step(mode: str) -> None:
        modes.switch(mode)
        loss = fast(x)
        loss.backward()
        optimizer.step()
        optimizer.clear_grad()

    return step


def check_flags() -> None:
    """Before `Modes` patches anything, in both ways: two translated layers chained (the activation a non-leaf
    input of the second's program) give the parameters' gradients and the activation's retained one eager's
    flags and values."""
    def gradients(translate: bool) -> list:
        paddle.seed(0)
        model = Plain()
        first, second = (sot.symbolic_translate(model.a), sot.symbolic_translate(model.b)) if translate \
            else (model.a, model.b)
        h = paddle.tanh(first(paddle.ones([8, 16])))
        h.retain_grads()
        second(h).mean().backward()
        return [(t.stop_gradient, t.numpy()) for t in (model.a.weight.grad, model.b.weight.grad, h.grad)]

    expected = gradients(False)
    for native in (True, False):
        if native:
            gradient_flags.install()
        else:
            gradient_flags.uninstall()
        for (flag, value), (want_flag, want_value) in zip(gradients(True), expected):
            if flag != want_flag:
                raise SystemExit(f"a gradient's stop_gradient differs from eager's ({'C++' if native else 'python'})")
            np.testing.assert_allclose(value, want_value, rtol=1e-6, atol=1e-7)


def warmed_up_step(model_class: type, modes: Modes):  # noqa: ANN201
    step = make_step(model_class, modes)
    for mode in MODES:
        for _ in range(50):
            step(mode)  # (warm-up: translation, compilation, each mode's first runs)
    return step


def count_instructions(model: str, mode: str, steps: int) -> None:
    """``steps`` train steps of ``model`` in ``mode`` inside one ``functools.reduce`` (callgrind's
    ``--toggle-collect=functools_reduce``), instrumentation turned on just before them."""
    from instructions import _instrument_on

    step = warmed_up_step(MODELS[model][0], Modes())
    step(mode)
    _instrument_on()
    functools.reduce(lambda _, __: step(mode), range(steps), None)
    print(f"{model} {mode}: {steps} steps counted; sot stats: {sot.stats()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_timing_args(parser, rounds=200, calls=20, quick_rounds=20, quick_calls=10)
    parser.add_argument("--instructions", nargs=2, metavar=("MODEL", "MODE"),
                        help=f"count one model ({', '.join(MODELS)}) in one mode ({', '.join(MODES)}) under callgrind")
    parser.add_argument("--steps", type=int, default=100, help="train steps counted with --instructions")
    args = parser.parse_args()
    rounds, calls = resolve_timing_args(args)
    if not gradient_flags.install():
        raise SystemExit(f"the C++ extension is not used: {gradient_flags.status()}")
    sot.config.min_graph_size = 0
    check_flags()
    gradient_flags.install()
    if args.instructions:
        model, mode = args.instructions
        if model not in MODELS or mode not in MODES:
            raise SystemExit(f"--instructions MODEL MODE: MODEL in {list(MODELS)}, MODE in {list(MODES)}")
        count_instructions(model, mode, args.steps)
        return
    modes = Modes()
    variants = []
    for name, (model_class, _) in MODELS.items():
        step = warmed_up_step(model_class, modes)
        for mode in MODES:
            variants.append(Variant(f"{name}-{mode}", f"{name}: {mode}", step, (mode,),
                                    baseline=None if mode == "without" else f"{name}-without"))
    cpu: dict[str, list[float]] = {}
    samples = interleave(variants, rounds, calls, cpu_samples=cpu)
    rows = []
    for v in variants:
        added = per_unit = ""
        added_cpu = ""
        if v.baseline is not None:
            difference = paired_difference_us(samples[v.key], samples[v.baseline])
            added, added_cpu = f"{difference:+.1f}", f"{paired_difference_us(cpu[v.key], cpu[v.baseline]):+.1f}"
            unit = MODELS[v.key.split("-")[0]][1]
            if unit is not None:
                per_unit = f"{difference / unit[1]:+.2f} per {unit[0]}"
        rows.append((v.label, f"{statistics.median(samples[v.key]) * 1e6:.1f}",
                     f"{statistics.median(cpu[v.key]) * 1e6:.1f}", added, added_cpu, per_unit))
    print(machine_description())
    print(load_average())
    print(f"{rounds} rounds x {calls} steps per variant; sot stats: {sot.stats()}")
    print(format_table(("train step", "median us (wall)", "median us (CPU)", "added us (wall, paired)",
                        "added us (CPU, paired)", "added us (wall) per unit"), rows,
                       right=(False, True, True, True, True, True)))


if __name__ == "__main__":
    main()

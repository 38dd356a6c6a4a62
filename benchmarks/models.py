"""Whole models: eager vs Paddle's AST to_static vs Paddle's SOT vs sot (issue 8, "Speed").

    python benchmarks/models.py                      # full run (~8-9 min on 2 CPU cores)
    python benchmarks/models.py --quick              # smoke run: tiny inputs only, few rounds (~3 min)
    python benchmarks/models.py --quick --no-memory  # the same without the per-variant processes (~1 min)
    python benchmarks/models.py --models resnet18,lstm --sizes large --rounds 21
    python benchmarks/models.py --models gpt --profile sot     # cProfile sot's forward instead of timing

Workloads: the models of ``tests/models/zoo.py`` (resnet18, mobilenet_v2, vgg11, squeezenet, transformer,
lstm, gru, gpt, data_dependent_branch), each at the zoo's tiny inputs and at larger ones (8x3x32x32 images;
batch 8 x 32 tokens for the text models; 256 rows for data_dependent_branch), plus two micro workloads:
``small_ops_200`` (200 elementwise ops on [8, 64]) and ``tensor_if`` (a few ops around one tensor-valued
``if``). Each workload is run by four variants, every one on its own deep copy of the same seeded model:

    eager   the layer itself
    AST     paddle.jit.to_static(layer, full_graph=True)
    PSOT    paddle.jit.to_static(layer, full_graph=False)   (Paddle's own SOT)
    sot     sot.symbolic_translate(layer)

Measured per workload and variant (method in README.md):

* each workload is timed in its own process (one subprocess per workload, so no program, cache or thread
  pool of an earlier workload is around), its four variants interleaved round-robin, each variant's batch
  sized to ~20 ms of its own time; before timing, every variant runs 1 + 12 forward calls and 3 train
  steps (sot's cost model decides compiled vs eager per graph within its first 16 calls), and before the
  train-step timing 32 more untimed train steps (sot's cost model measures again, backward included, when
  backward passes come after a choice made on forward-only calls);
* steady state, forward: median per call over interleaved rounds (train mode, gradients recorded, as in a
  training loop's forward), wall time; the process CPU time of the same batches is reported too;
* steady state, train step: forward + loss + backward + Adam step + clear_grad, median per step;
* first call and first train step, and the peak memory: each (workload, variant) in a fresh subprocess, so
  no translator cache and no allocator pool is shared with another variant. The child first warms up the
  variant's machinery on a throwaway 13-op layer (so one-time library initialisation is not charged to the
  first model measured), builds the model, resets the RSS high-water mark (``/proc/self/clear_refs``), then
  times the first forward and the first train step and runs 3 more of each; peak = ``VmHWM`` - ``VmRSS`` at
  the reset; what the retained memory is made of (code pages, Paddle's tensors and their high-water mark,
  Paddle's interpreter cache, the rest of the C heap, Python objects: ``_memory_parts_table``);
* parity with eager: the first forward output and 3 Adam-step losses of each variant against eager's
  (rtol 1e-4, atol 1e-5, the model tests' tolerance);
* what the translators did: ``sot.stats()`` (translations, compiled graphs, breaks, fallbacks, and whether
  anything was translated again while timing) and Paddle SOT's translation / compiled-graph counters.
"""
from __future__ import annotations

import argparse
import copy
import dataclasses
import gc
import importlib.util
import json
import math
import os
import statistics
import subprocess
import sys
import time
import traceback
from typing import Any, Callable

os.environ.setdefault("GLOG_minloglevel", "2")

import warnings  # noqa: E402

warnings.filterwarnings("ignore")

import numpy as np  # noqa: E402
import paddle  # noqa: E402
import paddle.nn as nn  # noqa: E402

import _common  # noqa: E402,F401  (first: puts this checkout's sot on sys.path)
import sot  # noqa: E402

from _common import (  # noqa: E402
    REPO,
    load_average,
    Variant,
    cprofile_top,
    format_table,
    hooks_left_installed,
    interleave,
    interpreter_cache_mb,
    machine_description,
    memory_parts,
    paddle_sot_compiled_graphs,
    paddle_sot_translate_count,
    paired_ratio,
    paired_ratio_to_best,
    peak_rss_kb,
    proc_status_kb,
    reset_peak_rss,
    reset_tensor_peak,
    verdict,
)


def _load_zoo() -> Any:
    """``tests/models/zoo.py`` loaded by path (a package named ``models`` would clash with this script)."""
    path = os.path.join(REPO, "tests", "models", "zoo.py")
    spec = importlib.util.spec_from_file_location("sot_bench_zoo", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look the module up
    spec.loader.exec_module(module)
    return module


zoo = _load_zoo()

VARIANTS = [("eager", "eager"), ("ast", "AST"), ("psot", "Paddle SOT"), ("sot", "sot")]
LABEL = dict(VARIANTS)
RTOL, ATOL = 1e-4, 1e-5
LEARNING_RATE = 1e-3
CHILD_STEPS = 3  # forward calls and train steps after the first ones, in a memory child
# Untimed forward calls of every variant after the 3 parity train steps and before timing: sot's cost model
# times each graph's first calls (3 warm-up, 4 compiled, 4 eager) and then keeps the faster way to run it;
# the steady state is what comes after that.
SETTLE_CALLS = 12
# Untimed train steps of every variant before the train-step timing: the graphs' choices above were made on
# forward-only calls; sot's cost model notices the backward passes (a probe every 4th call, 2 needed), times
# both ways again with their backward (12 calls) and keeps the faster.
SETTLE_STEPS = 32


# -- workloads --------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Workload:
    name: str    # unique: "<model>/<size>"
    model: str
    size: str
    build: Callable[[], nn.Layer]
    inputs: Callable[[], tuple]
    loss: Callable[[Any, tuple], paddle.Tensor]


def _vgg11(in_features: int) -> nn.Layer:
    """As the zoo's vgg11 (stock ``VGG.forward``, no 7x7 pool, a small classifier), for any input size."""
    from paddle.vision.models.vgg import VGG, cfgs, make_layers

    model = VGG(make_layers(cfgs["A"]), num_classes=0, with_pool=False)
    model.num_classes = zoo.NUM_CLASSES
    model.classifier = nn.Sequential(nn.Linear(in_features, 64), nn.ReLU(), nn.Dropout(), nn.Linear(64, 64),
                                     nn.ReLU(), nn.Dropout(), nn.Linear(64, zoo.NUM_CLASSES))
    return model


class SmallOps200(nn.Layer):
    """200 elementwise ops on a [8, 64] input (50 x 4 ops; one parameter so that there is a train step)."""

    def __init__(self, width: int = 64) -> None:
        super().__init__()
        self.w = self.create_parameter([width], default_initializer=nn.initializer.Constant(0.01))

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        h = x
        for _ in range(50):
            h = h * 0.9
            h = h + self.w
            h = paddle.tanh(h)
            h = h - 0.05
        return h


class TensorIf(nn.Layer):
    """A handful of ops around one ``if`` on a tensor value (a graph break for the bytecode translators, a
    ``cond`` op for AST). The condition reads the input only, so training never flips the branch."""

    def __init__(self, width: int = 64) -> None:
        super().__init__()
        self.w = self.create_parameter([width], default_initializer=nn.initializer.Constant(0.5))

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        h = x * self.w
        if x.mean() > 0:
            h = h + 1.0
        else:
            h = h - 1.0
        return h * 2.0


def _large_features() -> tuple:
    x = np.random.default_rng(0).standard_normal((LARGE_ROWS, 8)).astype("float32")
    return (paddle.to_tensor(np.abs(x) + 0.1),)


def _gpt_inputs(batch: int, length: int) -> Callable[[], tuple]:
    def make() -> tuple:
        ids = zoo.randint(0, zoo.VOCAB, (batch, length + 1), seed=3)
        return ids[:, :-1], ids[:, 1:]

    return make


# The "large" inputs. Vision: batch 8 of 32x32 images (4x the zoo's 2x3x32x32). 8x3x64x64 (16x) made one full
# run take far more than 10 minutes on 2 cores (vgg11: 0.63 s per forward, 2 s per train step in eager).
LARGE_IMAGE = (8, 32)
LARGE_TEXT = (8, 32)  # batch, sequence length
LARGE_ROWS = 256      # data_dependent_branch: rows of 8 features (the zoo: 4)


def _workloads() -> list[Workload]:
    out: list[Workload] = []
    vision_builders = {
        "resnet18": lambda: paddle.vision.models.resnet18(num_classes=zoo.NUM_CLASSES),
        "mobilenet_v2": lambda: paddle.vision.models.mobilenet_v2(scale=0.5, num_classes=zoo.NUM_CLASSES),
        "vgg11": None,
        "squeezenet": lambda: paddle.vision.models.squeezenet1_1(num_classes=zoo.NUM_CLASSES),
    }
    for name, builder in vision_builders.items():
        spec = zoo.ZOO[name]
        out.append(Workload(f"{name}/tiny", name, "tiny", spec.build, spec.inputs, spec.loss))
        if name == "vgg11":  # five 2x2 max-pools: 512 x (size/32)^2 features into the classifier
            large_build = zoo.seeded(lambda: _vgg11(512 * (LARGE_IMAGE[1] // 32) ** 2))
        else:
            large_build = zoo.seeded(builder)
        out.append(Workload(f"{name}/large", name, "large", large_build, lambda: zoo.image(*LARGE_IMAGE),
                            spec.loss))

    spec = zoo.ZOO["transformer"]
    out.append(Workload("transformer/tiny", "transformer", "tiny", spec.build, spec.inputs, spec.loss))
    out.append(Workload("transformer/large", "transformer", "large",
                        zoo.seeded(lambda: zoo.TransformerSeq2Seq(max_len=LARGE_TEXT[1])),
                        lambda: (zoo.token_ids(*LARGE_TEXT, seed=1, pad_tail=False),
                                 zoo.token_ids(*LARGE_TEXT, seed=2, pad_tail=False)), spec.loss))
    for name in ("lstm", "gru"):
        spec = zoo.ZOO[name]
        out.append(Workload(f"{name}/tiny", name, "tiny", spec.build, spec.inputs, spec.loss))
        out.append(Workload(f"{name}/large", name, "large", spec.build, lambda: (zoo.token_ids(*LARGE_TEXT),), spec.loss))
    spec = zoo.ZOO["gpt"]
    out.append(Workload("gpt/tiny", "gpt", "tiny", spec.build, spec.inputs, spec.loss))
    out.append(Workload("gpt/large", "gpt", "large", zoo.seeded(lambda: zoo.GPT({**zoo.GPT_CONFIG, "block_size": LARGE_TEXT[1]})),
                        _gpt_inputs(*LARGE_TEXT), spec.loss))
    spec = zoo.ZOO["data_dependent_branch"]
    out.append(Workload("data_dependent_branch/tiny", "data_dependent_branch", "tiny", spec.build, spec.inputs,
                        spec.loss))
    out.append(Workload("data_dependent_branch/large", "data_dependent_branch", "large", spec.build,
                        _large_features, spec.loss))

    out.append(Workload("small_ops_200/-", "small_ops_200", "-", zoo.seeded(SmallOps200),
                        lambda: (zoo.randn(8, 64, seed=4),), zoo.mean_square_loss))
    out.append(Workload("tensor_if/-", "tensor_if", "-", zoo.seeded(TensorIf),
                        lambda: (zoo.randn(8, 64, seed=5).abs() + 0.1,), zoo.mean_square_loss))
    return out


WORKLOADS = {w.name: w for w in _workloads()}


def select_workloads(models: str | None, sizes: str | None) -> list[Workload]:
    chosen = list(WORKLOADS.values())
    if models:
        wanted = [m.strip() for m in models.split(",") if m.strip()]
        unknown = [m for m in wanted if m not in WORKLOADS and m not in {w.model for w in chosen}]
        if unknown:
            raise SystemExit(f"--models: unknown {', '.join(unknown)}; known: "
                             f"{', '.join(dict.fromkeys(w.model for w in WORKLOADS.values()))} "
                             f"(or model/size, e.g. resnet18/large)")
        chosen = [w for w in chosen if w.model in wanted or w.name in wanted]
    if sizes:
        keep = {s.strip() for s in sizes.split(",")} | {"-"}
        chosen = [w for w in chosen if w.size in keep]
    return chosen


def describe_inputs(inputs: tuple) -> str:
    return ", ".join("x".join(str(d) for d in t.shape) for t in inputs if isinstance(t, paddle.Tensor))


# -- variants ---------------------------------------------------------------------------------------------
def make_variant(key: str, model: nn.Layer) -> Callable[..., Any]:
    if key == "eager":
        return model
    if key == "ast":
        return paddle.jit.to_static(model, full_graph=True)
    if key == "psot":
        return paddle.jit.to_static(model, full_graph=False)
    if key == "sot":
        return sot.symbolic_translate(model)
    raise ValueError(key)


def make_train_step(fn: Callable[..., Any], model: nn.Layer, inputs: tuple,
                    loss_fn: Callable[[Any, tuple], paddle.Tensor]) -> Callable[[], paddle.Tensor]:
    opt = paddle.optimizer.Adam(learning_rate=LEARNING_RATE, parameters=model.parameters())

    def step() -> paddle.Tensor:
        loss = loss_fn(fn(*inputs), inputs)
        loss.backward()
        opt.step()
        opt.clear_grad()
        return loss

    return step


def max_difference(out: Any, ref: Any) -> tuple[bool, float]:
    """(all close, max abs difference) over the tensor leaves of two outputs."""
    a, b = zoo.tensor_leaves(out), zoo.tensor_leaves(ref)
    if len(a) != len(b):
        return False, math.inf
    ok, worst = True, 0.0
    for x, y in zip(a, b):
        xn, yn = x.numpy(), y.numpy()
        if xn.shape != yn.shape:
            return False, math.inf
        if xn.size:
            worst = max(worst, float(np.max(np.abs(xn.astype("float64") - yn.astype("float64")))))
        ok = ok and bool(np.allclose(xn, yn, rtol=RTOL, atol=ATOL))
    return ok, worst


class _WarmUp(nn.Layer):
    """A throwaway 13-op layer: warms up a translator's machinery (imports, executor, compile pipeline) in a
    memory child before the model is measured. 13 ops: above both translators' minimum graph size (10)."""

    def __init__(self) -> None:
        super().__init__()
        self.w = self.create_parameter([4])

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        h = x * self.w
        for _ in range(6):
            h = paddle.tanh(h) + 1.0
        return h


def warm_up_machinery(key: str) -> None:
    keys = ["eager"] if key == "eager" else ["eager", key]
    for k in keys:
        layer = _WarmUp()
        fn = make_variant(k, layer)
        step = make_train_step(fn, layer, (paddle.ones([2, 4]),), zoo.mean_square_loss)
        for _ in range(2):
            step()


# -- the memory / first-call child ------------------------------------------------------------------------
def child_main(workload_name: str, key: str) -> int:
    """Fresh process, one (workload, variant): first-call times and the peak RSS over the first calls."""
    wl = WORKLOADS[workload_name]
    result: dict[str, Any] = {"workload": workload_name, "variant": key}
    try:
        warm_up_machinery(key)
        gc.collect()
        model = wl.build()
        model.train()
        inputs = wl.inputs()
        fn = make_variant(key, model)
        step = make_train_step(fn, model, inputs, wl.loss)
        gc.collect()
        result["peak_reset"] = reset_peak_rss()
        reset_tensor_peak()
        base_parts = memory_parts()
        base_kb = proc_status_kb("VmRSS") if result["peak_reset"] else peak_rss_kb()
        start = time.perf_counter()
        fn(*inputs)
        result["first_call_s"] = time.perf_counter() - start
        start = time.perf_counter()
        step()
        result["first_step_s"] = time.perf_counter() - start
        for _ in range(CHILD_STEPS):
            fn(*inputs)
            step()
        peak_kb = peak_rss_kb()
        result["base_rss_mb"] = base_kb / 1024
        result["peak_delta_mb"] = (peak_kb - base_kb) / 1024
        result["retained_mb"] = (proc_status_kb("VmRSS") - base_kb) / 1024
        end_parts = memory_parts()
        result["parts_mb"] = {name: end_parts[name] - base_parts[name] for name in end_parts if name in base_parts}
        if "tensor_peak" in end_parts and "tensors" in base_parts:
            result["parts_mb"]["tensor_peak"] = end_parts["tensor_peak"] - base_parts["tensors"]
        result["parts_mb"]["interpreters"] = interpreter_cache_mb()  # (last: it empties Paddle's cache)
    except Exception as exc:  # noqa: BLE001 - reported in the table
        result["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}"
    print("CHILD-RESULT " + json.dumps(result), flush=True)
    return 0


def run_child(args: list[str], timeout: float) -> dict[str, Any]:
    cmd = [sys.executable, os.path.abspath(__file__), *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "GLOG_minloglevel": os.environ.get("GLOG_minloglevel", "2")})
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout:g} s"}
    for text in reversed(proc.stdout.splitlines()):
        if text.startswith("CHILD-RESULT "):
            return json.loads(text[len("CHILD-RESULT "):])
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return {"error": f"child exited {proc.returncode}: {tail[:160]}"}


# -- one workload in the main process ---------------------------------------------------------------------
@dataclasses.dataclass
class Result:
    workload: Workload
    inputs: str = ""
    errors: dict[str, str] = dataclasses.field(default_factory=dict)
    match: dict[str, tuple[bool, float]] = dataclasses.field(default_factory=dict)
    first_in_process_s: dict[str, float] = dataclasses.field(default_factory=dict)
    fwd: dict[str, list[float]] = dataclasses.field(default_factory=dict)    # seconds per call, one per round
    train: dict[str, list[float]] = dataclasses.field(default_factory=dict)  # seconds per step, one per round
    fwd_cpu: dict[str, list[float]] = dataclasses.field(default_factory=dict)  # the same batches, CPU seconds
    train_cpu: dict[str, list[float]] = dataclasses.field(default_factory=dict)
    fwd_calls: dict[str, int] = dataclasses.field(default_factory=dict)      # calls per timed batch
    train_calls: dict[str, int] = dataclasses.field(default_factory=dict)
    sot_stats: dict[str, int] | None = None
    sot_graphs: list[str] = dataclasses.field(default_factory=list)  # per compiled graph: statements, choice
    # The same, as they were when the forward timing started (the choices the forward rows were timed with;
    # ``sot_graphs`` is after the train-step timing, which may have measured again with backward)
    sot_graphs_fwd: list[str] = dataclasses.field(default_factory=list)
    sot_retranslated: int = 0
    psot_translations: int | None = None
    psot_graphs: int | None = None
    psot_retranslated: int | None = None
    phase_s: dict[str, float] = dataclasses.field(default_factory=dict)
    child: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["workload"] = self.workload.name
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Result":
        data = dict(data)
        data["workload"] = WORKLOADS[data["workload"]]
        data["match"] = {k: tuple(v) for k, v in data.get("match", {}).items()}
        return cls(**data)


def _error_text(exc: BaseException) -> str:
    first = str(exc).strip().splitlines()[0][:100] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {first}"


def _delta(after: int | None, before: int | None) -> int | None:
    return None if after is None or before is None else after - before


def prepare(wl: Workload) -> tuple[Result, dict[str, Callable[..., Any]], dict[str, Callable[[], Any]], tuple]:
    """Fresh copies, first calls, parity checks; returns the forward callables and train steps that work."""
    res = Result(wl)
    base = wl.build()
    base.train()
    inputs = wl.inputs()
    res.inputs = describe_inputs(inputs)
    fwd: dict[str, Callable[..., Any]] = {}
    steps: dict[str, Callable[[], Any]] = {}
    first_out: dict[str, Any] = {}
    losses: dict[str, list[float]] = {}
    for key, _ in VARIANTS:
        model = copy.deepcopy(base)
        model.train()
        try:
            if key == "sot":
                sot.reset()
            pd_t, pd_g = paddle_sot_translate_count(), paddle_sot_compiled_graphs()
            fn = make_variant(key, model)
            start = time.perf_counter()
            first_out[key] = fn(*inputs)
            res.first_in_process_s[key] = time.perf_counter() - start
            step = make_train_step(fn, model, inputs, wl.loss)
            losses[key] = [float(step()) for _ in range(3)]
            for _ in range(SETTLE_CALLS):  # past sot's cost model (it picks compiled or eager per graph)
                fn(*inputs)
            if key == "psot":
                res.psot_translations = _delta(paddle_sot_translate_count(), pd_t)
                res.psot_graphs = _delta(paddle_sot_compiled_graphs(), pd_g)
        except Exception as exc:  # noqa: BLE001 - reported in the table
            res.errors[key] = _error_text(exc)
            if os.environ.get("SOT_BENCH_TRACEBACK"):
                traceback.print_exc()
            continue
        problems = hooks_left_installed()
        if problems:
            raise RuntimeError(f"{wl.name}, {key}: after the first calls " + "; ".join(problems))
        fwd[key], steps[key] = fn, step
    if "eager" not in fwd:
        raise RuntimeError(f"{wl.name}: eager failed: {res.errors.get('eager')}")
    for key in fwd:
        ok_out, diff_out = max_difference(first_out[key], first_out["eager"])
        ok_loss = bool(np.allclose(losses[key], losses["eager"], rtol=RTOL, atol=ATOL))
        diff_loss = float(np.max(np.abs(np.array(losses[key]) - np.array(losses["eager"]))))
        res.match[key] = (ok_out and ok_loss, max(diff_out, diff_loss))
    return res, fwd, steps, inputs


def _per_call(fn: Callable[[], Any], calls: int = 3) -> float:
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _batched(fn: Callable[..., Any], args: tuple, calls: int) -> Callable[[], None]:
    def batch() -> None:
        for _ in range(calls):
            fn(*args)

    return batch


def _timed(variants: dict[str, tuple[Callable[..., Any], tuple]], rounds: int, target_s: float,
           check: Callable[[Variant, int], None]) -> tuple[dict[str, list[float]], dict[str, list[float]],
                                                            dict[str, int]]:
    """Interleaved rounds; each variant's batch is sized to about ``target_s`` of its own time (at least one
    call), so a variant 20x slower than eager does not stretch the run 20-fold. Seconds per call, wall
    time and process CPU time (all threads) of the same batches."""
    calls = {k: max(1, min(5000, round(target_s / _per_call(lambda: fn(*args))))) for k, (fn, args) in variants.items()}
    batches = [Variant(k, LABEL[k], _batched(fn, args, calls[k])) for k, (fn, args) in variants.items()]
    for v in batches:  # one untimed batch each
        v.fn()
    cpu: dict[str, list[float]] = {}
    raw = interleave(batches, rounds, 1, after_batch=check, cpu_samples=cpu)
    per_call = {k: [t / calls[k] for t in samples] for k, samples in raw.items()}
    return per_call, {k: [t / calls[k] for t in samples] for k, samples in cpu.items()}, calls


def measure(wl: Workload, rounds: int, target_s: float) -> Result:
    t0 = time.perf_counter()
    res, fwd, steps, inputs = prepare(wl)
    t1 = time.perf_counter()
    sot_before = sot.stats() if "sot" in fwd else None
    res.sot_graphs_fwd = sot_graph_choices() if "sot" in fwd else []
    pd_before = paddle_sot_translate_count()

    def check(variant: Variant, calls: int) -> None:
        problems = hooks_left_installed()
        if problems:
            raise RuntimeError(f"{wl.name}: after timing {variant.label}: " + "; ".join(problems))

    res.fwd, res.fwd_cpu, res.fwd_calls = _timed({k: (fn, inputs) for k, fn in fwd.items()}, rounds, target_s, check)
    for step in steps.values():
        for _ in range(SETTLE_STEPS):
            step()
    t2 = time.perf_counter()
    res.train, res.train_cpu, res.train_calls = _timed({k: (st, ()) for k, st in steps.items()}, rounds, 2 * target_s,
                                                       check)
    t3 = time.perf_counter()
    res.phase_s = {"first calls and parity": t1 - t0, "forward timing": t2 - t1, "train timing": t3 - t2}
    if sot_before is not None:
        st = sot.stats()
        res.sot_stats = dataclasses.asdict(st)
        res.sot_retranslated = st.translate_count - sot_before.translate_count
    res.psot_retranslated = _delta(paddle_sot_translate_count(), pd_before) if "psot" in fwd else None
    res.sot_graphs = sot_graph_choices()
    return res


def sot_graph_choices() -> list[str]:
    """Each graph sot compiled in this process: its statement count, how its cost model runs it
    (``compiled``, ``eager``, or ``undecided``) and, after a slash, how that was chosen: ``joint`` (with the
    other graphs of its frame, one way for all), ``mixed`` (with them, a mix), ``alone`` (by itself: the only
    graph measured, or measured after its frame's choice), ``gave up`` (failed compiled). Reads sot
    internals; empty if they moved."""
    try:
        from sot.symbolic import compile as sot_compile

        programs = list(sot_compile._compiled.values())
    except Exception:  # noqa: BLE001
        return []
    choices = [f"{len(p.sir)}:{getattr(p, '_choice', None) or 'undecided'}{_how_chosen(p)}" for p in programs]
    return choices + sot_entry_kinds()


def _how_chosen(program: Any) -> str:
    how = getattr(getattr(program, "cost", None), "chosen_how", "")
    return "/" + how.replace("joint, mixed", "mixed") if how and program.choice is not None else ""


def sot_entry_kinds() -> list[str]:
    """How sot's cache entries run (sot/opcode_translator/native.py): ``entries N/P/T`` = N run the original
    code natively, P the original code with calls of resume functions for paths not run natively yet, T
    their translated code. Reads sot internals; empty if they moved."""
    try:
        from sot.eval_frame_ext import cache_entries
        from sot.opcode_translator.callback import translated_codes
    except Exception:  # noqa: BLE001
        return []
    native = partial = translated = 0
    for code in list(translated_codes):
        for guard, new_code in cache_entries(code):
            plan = getattr(guard, "native_plan", None)
            if new_code is code:
                native += 1
            elif plan is not None and new_code is not plan.translated:
                partial += 1
            else:
                translated += 1
    return [f"entries {native}/{partial}/{translated}"]


def timing_child_main(workload_name: str, rounds: int, target_s: float) -> int:
    """One workload's interleaved timing in a fresh process (no program, cache or thread pool of another
    workload around)."""
    try:
        data = measure(WORKLOADS[workload_name], rounds, target_s).to_json()
    except Exception as exc:  # noqa: BLE001
        traceback.print_exc()
        data = {"workload": workload_name, "errors": {"eager": _error_text(exc)}}
    print("CHILD-RESULT " + json.dumps(data), flush=True)
    return 0


# -- report -----------------------------------------------------------------------------------------------
def _ms(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1e3:.3f}"


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _steady_table(results: list[Result], which: str) -> tuple[str, list[tuple[str, float]]]:
    rows, worse = [], []
    for r in results:
        s, c = getattr(r, which), getattr(r, which + "_cpu")
        if not s:
            continue
        e = s["eager"]
        cells = [r.workload.model, r.inputs, _ms(e)]
        for key in ("ast", "psot", "sot"):
            cells.append(_x(paired_ratio(s[key], e)) if key in s else r.errors.get(key, "n/a")[:24])
        if "sot" in s:
            best = [e] + ([s["ast"]] if "ast" in s else [])
            vs_best = paired_ratio_to_best(s["sot"], *best)
            vs_psot = paired_ratio(s["sot"], s["psot"]) if "psot" in s else None
            cpu_best = [c["eager"]] + ([c["ast"]] if "ast" in c else [])
            cells += [_x(vs_best), _x(vs_psot), verdict(vs_best <= 1.05),
                      _x(paired_ratio(c["sot"], c["eager"])), _x(paired_ratio_to_best(c["sot"], *cpu_best))]
            if vs_best > 1.05:
                worse.append((r.workload.name, vs_best))
        else:
            cells += ["-"] * 5
        rows.append(cells)
    headers = ["model", "inputs", "eager ms", "AST / eager", "PSOT / eager", "sot / eager", "sot / min(eager,AST)",
               "sot / PSOT", "<= 1.05", "CPU time: sot / eager", "sot / min(eager,AST)"]
    return format_table(headers, rows, right=[False, False] + [True] * 6 + [False, True, True]), worse


def _first_call_table(results: list[Result], isolated: bool) -> str:
    rows = []
    for r in results:
        cells = [r.workload.model, r.inputs]
        for field in ("first_call_s", "first_step_s"):
            for key, _ in VARIANTS:
                if isolated:
                    c = r.child.get(key, {})
                    cells.append(f"{c[field]:.2f}" if field in c else ("err" if "error" in c else "-"))
                else:
                    value = r.first_in_process_s.get(key) if field == "first_call_s" else None
                    cells.append(f"{value:.2f}" if value is not None else "-")
        if isolated:
            s, a = r.child.get("sot", {}).get("first_call_s"), r.child.get("ast", {}).get("first_call_s")
        else:
            s, a = r.first_in_process_s.get("sot"), r.first_in_process_s.get("ast")
        ratio = s / a if s is not None and a else None
        cells += [_x(ratio), verdict(ratio <= 1.0) if ratio is not None else "-"]
        rows.append(cells)
    headers = ["model", "inputs", "eager s", "AST s", "PSOT s", "sot s",
               "step: eager s", "AST s", "PSOT s", "sot s", "sot / AST (1st call)", "<= 1"]
    return format_table(headers, rows, right=[False, False] + [True] * 9 + [False])


def _memory_table(results: list[Result]) -> str:
    rows = []
    for r in results:
        cells = [r.workload.model, r.inputs]
        for key, _ in VARIANTS:
            c = r.child.get(key, {})
            cells.append(f"{c['peak_delta_mb']:.1f}" if "peak_delta_mb" in c else ("err" if "error" in c else "-"))
        for key, _ in VARIANTS:
            c = r.child.get(key, {})
            cells.append(f"{c['retained_mb']:.1f}" if "retained_mb" in c else "-")
        s = r.child.get("sot", {}).get("peak_delta_mb")
        p = r.child.get("psot", {}).get("peak_delta_mb")
        ok = s is not None and p is not None and s <= p
        cells += [_x(s / p) if s is not None and p else "-", verdict(ok) if s is not None and p is not None else "-"]
        rows.append(cells)
    headers = ["model", "inputs", "peak eager MB", "AST MB", "PSOT MB", "sot MB",
               "retained eager MB", "AST MB", "PSOT MB", "sot MB", "sot / PSOT peak", "<= PSOT"]
    return format_table(headers, rows, right=[False, False] + [True] * 9 + [False])


def _memory_parts_table(results: list[Result]) -> str:
    """Per workload and variant, what the retained memory is made of (`child_main`'s ``parts_mb``)."""
    rows = []
    for r in results:
        for key, label in VARIANTS:
            c = r.child.get(key, {})
            p = c.get("parts_mb")
            if not p:
                continue

            def cell(value: float | None) -> str:
                return "-" if value is None else f"{value:.1f}"

            malloc, tensors, interpreters = p.get("malloc"), p.get("tensors"), p.get("interpreters")
            other_c = malloc - tensors - interpreters if None not in (malloc, tensors, interpreters) else None
            free = p.get("malloc_free")
            other_anon = p["anon"] - malloc - free if None not in (p.get("anon"), malloc, free) else None
            rows.append([r.workload.model, r.inputs, label, cell(c.get("peak_delta_mb")), cell(c.get("retained_mb")),
                         cell(p.get("file")), cell(tensors), cell(p.get("tensor_peak")), cell(interpreters),
                         cell(other_c), cell(free), cell(other_anon)])
    headers = ["model", "inputs", "variant", "peak MB", "retained", "code pages", "tensors", "tensor high-water",
               "interpreters", "other C heap", "C heap free", "other anon"]
    return format_table(headers, rows, right=[False] * 3 + [True] * 9)


def _match_cell(r: Result, key: str) -> str:
    if key in r.errors:
        return "error"
    ok, diff = r.match.get(key, (False, math.inf))
    return "yes" if ok and diff == 0 else (f"yes ({diff:.0e})" if ok else f"NO ({diff:.1e})")


def _stats_table(results: list[Result]) -> str:
    rows = []
    for r in results:
        st = r.sot_stats
        sot_cells = ([st["translate_count"] - r.sot_retranslated, st["compiled_graphs"], st["graph_breaks"],
                      st["fallbacks"], r.sot_retranslated] if st is not None else ["-"] * 5)
        pd_cells = [r.psot_translations if r.psot_translations is not None else "-",
                    r.psot_graphs if r.psot_graphs is not None else "-",
                    r.psot_retranslated if r.psot_retranslated is not None else "-"]
        choices = " ".join(r.sot_graphs) or "-"
        fwd_choices = " ".join(r.sot_graphs_fwd) or "-"
        rows.append([r.workload.model, r.inputs, _match_cell(r, "ast"), _match_cell(r, "psot"), _match_cell(r, "sot"),
                     *sot_cells, fwd_choices, choices, *pd_cells])
    headers = ["model", "inputs", "AST = eager", "PSOT = eager", "sot = eager", "sot translations", "graphs",
               "breaks", "fallbacks", "retranslated while timed", "forward timed with (ops:run as/chosen)",
               "after the train steps, entries N/P/T",
               "PSOT translations",
               "PSOT graphs", "PSOT retranslated"]
    return format_table(headers, rows, right=[False] * 5 + [True] * 5 + [False] * 2 + [True] * 3)


def report(results: list[Result], rounds: int, target_s: float, isolated: bool, load_start: str) -> str:
    fwd_table, fwd_worse = _steady_table(results, "fwd")
    train_table, train_worse = _steady_table(results, "train")
    lines = [
        machine_description(),
        f"{load_start} at the start, {load_average()} at the end (other processes on the machine skew wall times; "
        "the CPU-time columns are less sensitive to them)",
        f"rounds: {rounds}; each variant's timed batch is sized to ~{target_s * 1e3:g} ms (forward) / "
        f"~{2 * target_s * 1e3:g} ms (train step) of its own time, at least one call; one process per workload",
        "",
        "Steady state, forward (train mode, gradients recorded): eager median ms per call (wall time); the other "
        "columns are medians over rounds of per-round ratios, wall time, then process CPU time of the same batches",
        "",
        fwd_table,
        "",
        "Steady state, train step (forward + loss + backward + Adam step + clear_grad): eager median ms per step, "
        "per-round ratios",
        "",
        train_table,
        "",
    ]
    if isolated:
        lines += ["First forward call and first train step (s), each variant in a fresh process after warming up its "
                  "machinery on a throwaway layer", "", _first_call_table(results, True), "",
                  "Peak memory: RSS high-water mark minus RSS just before the first call (MB), over the first call, "
                  f"the first train step and {CHILD_STEPS} more forward calls and train steps, each variant in a "
                  "fresh process; 'retained' = RSS at the end minus RSS before", "", _memory_table(results), "",
                  "What the retained memory is made of (MB, changes over the same calls): 'code pages' = file-backed "
                  "pages (the code of the libraries that ran); 'tensors' = Paddle's host tensors at the end, and "
                  "their high-water mark over the calls; 'interpreters' = the C heap Paddle's global interpreter "
                  "cache holds at the end (the warm-up layer's included); 'other C heap' = the rest of the C heap in "
                  "use (programs, autograd, optimizer bookkeeping); 'C heap free' = freed but kept by malloc; "
                  "'other anon' = the rest of the anonymous memory (Python objects, thread stacks; below 0 when malloc "
                  "counts large blocks whole whose pages were not all touched)", "",
                  _memory_parts_table(results), ""]
    else:
        lines += ["First forward call (s), measured in the timing process (--no-memory: variants one after the "
                  "other in one process, so later ones may find library state warm; no memory figures)", "",
                  _first_call_table(results, False), ""]
    lines += ["Parity with eager (first output and 3 Adam-step losses, rtol 1e-4 atol 1e-5; max abs diff) and what "
              "the translators did (sot.stats() after the warm-up; 'ops:run as/chosen' = statements of each sot graph, "
              "what sot's cost model chose for it and how (joint: with the other graphs of its frame, one way "
              "for all; mixed: with them, a mix; alone), when the forward timing started and after the train "
              "steps; 'entries N/P/T' = sot's cache entries that run the original code "
              "natively / the original code with resume calls on paths not yet native / their translated code; "
              "PSOT = Paddle SOT's own counters)", "",
              _stats_table(results), ""]
    for r in results:
        for key, text in r.errors.items():
            lines.append(f"{r.workload.name}: {LABEL[key]} failed: {text}")
    lines.append(f"target 'sot steady state <= 1.05 x min(eager, AST)', forward: "
                 f"{verdict(not fwd_worse)}" + (f" (worse: {', '.join(f'{n} {v:.2f}x' for n, v in fwd_worse)})"
                                                if fwd_worse else ""))
    lines.append(f"target 'sot steady state <= 1.05 x min(eager, AST)', train step: "
                 f"{verdict(not train_worse)}" + (f" (worse: {', '.join(f'{n} {v:.2f}x' for n, v in train_worse)})"
                                                  if train_worse else ""))
    return "\n".join(lines)


def dump_json(path: str, results: list[Result]) -> None:
    with open(path, "w") as f:
        json.dump([r.to_json() for r in results], f, indent=1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", help="comma-separated models (resnet18, ..., small_ops_200, tensor_if) or "
                                         "model/size (resnet18/large); default all")
    parser.add_argument("--sizes", help="comma-separated sizes: tiny, large (default both; tiny with --quick)")
    parser.add_argument("--rounds", type=int, default=None, help="timed rounds (default 11; 5 with --quick)")
    parser.add_argument("--target-ms", type=float, default=None,
                        help="eager work per forward batch, ms (default 20; 10 with --quick); train batches get 2x")
    parser.add_argument("--quick", action="store_true", help="smoke run: tiny inputs, few rounds")
    parser.add_argument("--no-memory", action="store_true",
                        help="skip the per-variant subprocesses: no memory figures, first calls from the timing process")
    parser.add_argument("--in-process", action="store_true",
                        help="time every workload in this process instead of one subprocess per workload (programs, "
                             "caches and thread pools of earlier workloads then stay around and slow later ones)")
    parser.add_argument("--child-timeout", type=float, default=600.0, help=argparse.SUPPRESS)
    parser.add_argument("--json", help="also write the raw samples and counters to this file")
    parser.add_argument("--profile", metavar="VARIANT", choices=[k for k, _ in VARIANTS],
                        help="instead of timing, cProfile forward calls of one variant on the selected workloads")
    parser.add_argument("--progress", action="store_true", help="progress lines on stderr")
    parser.add_argument("--child-mem", nargs=2, metavar=("WORKLOAD", "VARIANT"), help=argparse.SUPPRESS)
    parser.add_argument("--child-time", metavar="WORKLOAD", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child_mem:
        return child_main(*args.child_mem)

    rounds = args.rounds if args.rounds is not None else (5 if args.quick else 11)
    target_s = (args.target_ms if args.target_ms is not None else (10.0 if args.quick else 20.0)) / 1e3
    if rounds < 1 or target_s <= 0:
        parser.error("--rounds and --target-ms must be positive")
    if args.child_time:
        return timing_child_main(args.child_time, rounds, target_s)
    sizes = args.sizes if args.sizes is not None else ("tiny" if args.quick else None)
    workloads = select_workloads(args.models, sizes)

    if args.profile:
        for wl in workloads:
            res, fwd, _, inputs = prepare(wl)
            if args.profile not in fwd:
                print(f"{wl.name}: {args.profile} failed: {res.errors.get(args.profile)}")
                continue
            calls = max(1, round(0.5 / _per_call(lambda: fwd[args.profile](*inputs))))
            print(f"== {wl.name} ({res.inputs}): cProfile of {calls} forward calls of {LABEL[args.profile]}")
            print(cprofile_top(fwd[args.profile], inputs, calls, top=25))
            if args.profile == "sot":
                print(f"sot.stats(): {sot.stats()}")
        return 0

    started = time.perf_counter()
    load_start = load_average()

    def note(text: str) -> None:
        if args.progress:
            print(f"[{time.perf_counter() - started:6.1f} s] {text}", file=sys.stderr, flush=True)

    results = []
    for wl in workloads:
        t0 = time.perf_counter()
        if args.in_process:
            res = measure(wl, rounds, target_s)
            gc.collect()
        else:
            data = run_child(["--child-time", wl.name, "--rounds", str(rounds), "--target-ms", str(target_s * 1e3)],
                             args.child_timeout)
            if "error" in data and "workload" not in data:
                data = {"workload": wl.name, "errors": {"eager": data["error"]}}
            res = Result.from_json(data)
        results.append(res)
        phases = ", ".join(f"{k} {v:.1f} s" for k, v in res.phase_s.items())
        note(f"timed {wl.name} in {time.perf_counter() - t0:.1f} s ({phases})")
    failed = [r for r in results if not r.fwd]
    results = [r for r in results if r.fwd]
    if not args.no_memory:
        for r in results:
            t0 = time.perf_counter()
            for key, _ in VARIANTS:
                r.child[key] = run_child(["--child-mem", r.workload.name, key], args.child_timeout)
            note(f"first calls and memory of {r.workload.name} in {time.perf_counter() - t0:.1f} s")
    print(report(results, rounds, target_s, not args.no_memory, load_start))
    for r in failed:
        print(f"{r.workload.name}: not timed: {'; '.join(f'{LABEL[k]}: {v}' for k, v in r.errors.items())}")
    print(f"\n(total run time {time.perf_counter() - started:.0f} s)")
    if args.json:
        dump_json(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())

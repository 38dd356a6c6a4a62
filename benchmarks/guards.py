"""Guards and cache: the hit-path cost as guards and cache entries grow, and recompiles over a shape sweep
(issue 5, "Benchmark").

    python benchmarks/guards.py              # full run (~1-2 min on 2 CPU cores)
    python benchmarks/guards.py --quick      # smoke run
    python benchmarks/guards.py --profile s50 --calls 20000   # cProfile one variant instead of timing

Everything runs interleaved in one process, against eager and Paddle's own SOT
(``paddle.jit.sot.symbolic_translate``: the translator without the ``to_static(full_graph=False)`` wrapper,
which adds about 17 us per call on its own, see overhead.py):

* hit path with 1, 10 and 50 guarded tensor inputs: ``f(a0, ..., aN-1) = paddle.add_n([a0, ..., aN-1])``.
  One op, so both translators run the frame natively behind its guard (the graph is below their minimum
  graph size of 10 ops), and every input is used, hence guarded. Row ``eN`` is eager, ``sN`` sot, ``pN``
  Paddle's SOT; the added time over eager is paired per round.
* 8 cache entries: ``f(x, mode) = x * SCALE[mode]`` warmed up with ``mode`` = "m0" ... "m7" (a value guard
  on the string: 8 entries of one code object). Each timed call of the driver makes 8 calls of ``f``:
  ``1st`` repeats "m7", which after the first call is the most recently hit entry (tried first);
  ``8th`` cycles "m0" ... "m7", so with most-recently-hit-first ordering every call hits the least recently
  hit entry, the 8th tried (checked before timing from ``cache_entries``). Reported per call of ``f``.
* sequence-length sweep: a user layer around ``nn.TransformerEncoderLayer(d_model=32, nhead=4,
  dim_feedforward=64, dropout=0)`` called on [2, L, 32] for L = 8 ... 64. The first pass counts the
  translations (sot: ``sot.stats()``; Paddle's SOT: its ``OpcodeExecutorCache.translate_count``, i.e. frames
  it translated, resume functions included); the steady time is then one pass over all lengths per call,
  interleaved, reported per forward.
* C guard program against the Python ``and`` chain it is compiled from: rows ``cN`` are sot with every
  guard built as the Python chain instead (what sot ran before the program; ``python_chain_guards``), and
  ``gm``/``gmpy`` call the guard of a mobilenet_v2 forward entry directly, as the program and as the chain
  (about 1200 checks: a deep layer tree). Interleaved with the rest, so the two are compared under the
  same load.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import linecache
import os
import statistics
import sys
import warnings

os.environ.setdefault("GLOG_minloglevel", "2")
warnings.filterwarnings("ignore", message="No ccache found")
warnings.filterwarnings("ignore", message="Tensor do not have 'place' interface")  # Paddle SOT, sweep

import numpy as np  # noqa: E402
import paddle  # noqa: E402
import paddle.jit.sot  # noqa: E402  (not imported by `import paddle`)
import paddle.nn as nn  # noqa: E402

import _common  # noqa: E402,F401  (first: puts this checkout's sot on sys.path)
import sot  # noqa: E402
from sot.eval_frame_ext import cache_entries  # noqa: E402

from _common import (  # noqa: E402
    python_chain_guards,
    Variant,
    assert_same_tensor,
    cprofile_top,
    format_table,
    hooks_left_installed,
    interleave,
    load_average,
    machine_description,
    paddle_sot_compiled_graphs,
    paddle_sot_translate_count,
    paired_difference_us,
    paired_ratio,
    verdict,
)

TARGET_10_INPUTS_US = 3.0
TARGET_PER_GUARD_US = 0.1
TARGET_8TH_VS_1ST = 2.0
TARGET_SWEEP_TRANSLATIONS = 2
INPUT_COUNTS = (1, 10, 50)
MODES = tuple(f"m{i}" for i in range(8))
SCALE = {m: float(i + 1) for i, m in enumerate(MODES)}


# -- functions: one fresh code object per variant ---------------------------------------------------------
def _define(source: str, name: str, tag: str) -> "function":  # noqa: F821
    """``def name`` from ``source``, compiled under its own file name (registered in ``linecache``, so tools
    that read the source find it). Each call gives a new code object: no two variants share a cache."""
    filename = f"<benchmarks/guards.py:{name}:{tag}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"paddle": paddle, "SCALE": SCALE}
    exec(compile(source, filename, "exec"), namespace)
    return namespace[name]


def add_n_source(n: int) -> str:
    names = ", ".join(f"a{i}" for i in range(n))
    return f"def add_{n}({names}):\n    return paddle.add_n([{names}])\n"


SCALE_SOURCE = "def scaled(x, mode):\n    return x * SCALE[mode]\n"


def drive(f, x, modes):  # noqa: ANN001, ANN201 - 8 calls of f per timed call
    for m in modes:
        f(x, m)


class Block(nn.Layer):
    """User code around a built-in transformer block (as people write it)."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.0)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return self.encoder(x)


def run_sweep(fn, inputs) -> None:  # noqa: ANN001
    for x in inputs:
        fn(x)


# -- setup ------------------------------------------------------------------------------------------------
def guard_atoms(code) -> list[int]:  # noqa: ANN001
    """Number of guard checks of each sot cache entry of ``code`` (most recently hit first)."""
    return [len(getattr(getattr(g, "guard", None), "readable", None) or []) for g, _ in cache_entries(code)]


class Setup:
    def __init__(self, seq_lengths: list[int]) -> None:
        paddle.seed(0)
        self.variants: list[Variant] = []
        self.sot_keys: set[str] = set()
        self.notes: list[str] = []
        self.guards: dict[int, int] = {}
        sot.reset()
        pd0 = paddle_sot_translate_count()

        # Hit path, N guarded inputs.
        for n in INPUT_COUNTS:
            xs = tuple(paddle.rand([4], dtype="float32") for _ in range(n))
            src = add_n_source(n)
            eager, f_sot, f_pd, f_chain = (_define(src, f"add_{n}", tag) for tag in ("eager", "sot", "psot", "chain"))
            expected = eager(*xs)
            t_sot = sot.symbolic_translate(f_sot)
            t_pd = paddle.jit.sot.symbolic_translate(f_pd)
            t_chain = sot.symbolic_translate(f_chain)
            for fn, what in ((t_sot, "sot"), (t_pd, "Paddle SOT"), (t_chain, "sot, Python-chain guard")):
                with python_chain_guards() if fn is t_chain else contextlib.nullcontext():
                    for _ in range(3):
                        out = fn(*xs)
                assert_same_tensor(out, expected, f"add_n of {n} inputs, {what}")
            atoms = guard_atoms(f_sot.__code__)
            self.guards[n] = atoms[0] if atoms else 0
            self.variants += [
                Variant(f"e{n}", f"eager, {n} input{'s' if n > 1 else ''}", eager, xs),
                Variant(f"s{n}", f"sot, {n} guarded input{'s' if n > 1 else ''} ({self.guards[n]} guard checks)",
                        t_sot, xs, f"e{n}"),
                Variant(f"p{n}", f"Paddle SOT, {n} guarded input{'s' if n > 1 else ''}", t_pd, xs, f"e{n}"),
                Variant(f"c{n}", f"sot, {n} input{'s' if n > 1 else ''}, Python-chain guard (no C program)", t_chain,
                        xs, f"e{n}"),
            ]
            self.sot_keys |= {f"s{n}", f"c{n}"}
        st = sot.stats()
        if st.translate_count != 2 * len(INPUT_COUNTS) or st.compiled_graphs != 0:
            self.notes.append(f"WARNING: expected {2 * len(INPUT_COUNTS)} sot translations and no compiled graph "
                              f"for the hit-path functions, got {st}")

        # The guard of a deep layer tree, called alone: C program against the Python chain.
        net = paddle.vision.models.mobilenet_v2()
        net.eval()
        forward = type(net).forward
        sot.symbolic_translate(net)(paddle.rand([1, 3, 32, 32]))
        entry_guard = cache_entries(forward.__code__)[0][0].guard
        guard_args = (forward.__globals__, None, net, paddle.rand([1, 3, 32, 32]))
        self.tree_checks = len(entry_guard.readable)
        self.tree_program = entry_guard.program is not None and entry_guard.check is entry_guard.program
        self.tree_net = net  # (the entry holds the layers weakly)
        self.variants += [
            Variant("gmpy", f"mobilenet_v2 guard alone, Python chain ({self.tree_checks} checks)",
                    entry_guard.reference, guard_args),
            Variant("gm", "mobilenet_v2 guard alone, C program (ratio and difference: to gmpy)",
                    entry_guard.check, guard_args, "gmpy"),
        ]

        # 8 cache entries.
        x = paddle.rand([4], dtype="float32")
        eager, f_sot, f_pd = (_define(SCALE_SOURCE, "scaled", tag) for tag in ("eager", "sot", "psot"))
        t_sot = sot.symbolic_translate(f_sot)
        t_pd = paddle.jit.sot.symbolic_translate(f_pd)
        before_sot, before_pd = sot.stats().translate_count, paddle_sot_translate_count()
        for fn, what in ((t_sot, "sot"), (t_pd, "Paddle SOT")):
            for _ in range(2):
                for m in MODES:
                    assert_same_tensor(fn(x, m), eager(x, m), f"8 cache entries, {what}, mode {m}")
        self.entries_sot = sot.stats().translate_count - before_sot
        pd_after = paddle_sot_translate_count()
        self.entries_pd = None if pd_after is None else pd_after - before_pd
        # After a pass m0..m7 the most recently hit entry is m7's; the next call (m0) must try the 8th.
        drive(t_sot, x, MODES)
        order = [next((t for t in (getattr(getattr(g, "guard", None), "readable", None) or []) if t.startswith("mode ==")),
                      "?") for g, _ in cache_entries(f_sot.__code__)]
        self.entry_order = order
        if len(order) != 8 or order[-1] != "mode == 'm0'" or order[0] != "mode == 'm7'":
            self.notes.append(f"WARNING: sot's entries after an m0..m7 pass are not m7..m0 (most recently hit first): "
                              f"{order}; the '8th entry' row may not hit the 8th entry")
        same, cycle = (MODES[-1],) * 8, MODES
        self.variants += [
            Variant("e8a", "eager, f(x, 'm7') x8", drive, (eager, x, same)),
            Variant("s8a", "sot, 8 entries, 1st entry hit", drive, (t_sot, x, same), "e8a"),
            Variant("p8a", "Paddle SOT, 8 entries, 'm7' repeated", drive, (t_pd, x, same), "e8a"),
            Variant("e8h", "eager, f(x, m0..m7)", drive, (eager, x, cycle)),
            Variant("s8h", "sot, 8 entries, 8th entry hit", drive, (t_sot, x, cycle), "e8h"),
            Variant("p8h", "Paddle SOT, 8 entries, m0..m7 cycled", drive, (t_pd, x, cycle), "e8h"),
        ]
        self.sot_keys |= {"s8a", "s8h"}
        self.per_call_divisor = {k: 8 for k in ("e8a", "s8a", "p8a", "e8h", "s8h", "p8h")}

        # Sequence-length sweep.
        block = Block()
        block.train()
        self.seq_lengths = seq_lengths
        seqs = [paddle.to_tensor(np.random.default_rng(L).standard_normal((2, L, 32)).astype("float32"))
                for L in seq_lengths]
        m_sot, m_pd = copy.deepcopy(block), copy.deepcopy(block)
        t_sot = sot.symbolic_translate(m_sot)
        t_pd = paddle.jit.to_static(m_pd, full_graph=False)
        before = sot.stats()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            outs_sot = [t_sot(x) for x in seqs]
        after = sot.stats()
        self.sweep_sot = (after.translate_count - before.translate_count, after.compiled_graphs - before.compiled_graphs,
                          after.graph_breaks - before.graph_breaks, after.fallbacks - before.fallbacks)
        self.sweep_sot_warnings = [str(w.message).splitlines()[0] for w in caught
                                   if issubclass(w.category, RuntimeWarning) and "sot" in str(w.message)]
        pd_t, pd_g = paddle_sot_translate_count(), paddle_sot_compiled_graphs()
        outs_pd = [t_pd(x) for x in seqs]
        pd_t2, pd_g2 = paddle_sot_translate_count(), paddle_sot_compiled_graphs()
        self.sweep_pd = (None if pd_t is None else pd_t2 - pd_t, None if pd_g is None else pd_g2 - pd_g)
        self.sweep_mismatch = []
        for L, x, o_s, o_p in zip(seq_lengths, seqs, outs_sot, outs_pd):
            ref = block(x).numpy()
            for what, o in (("sot", o_s), ("Paddle SOT", o_p)):
                if not np.allclose(o.numpy(), ref, rtol=1e-5, atol=1e-6):
                    self.sweep_mismatch.append(f"{what} L={L}: max abs diff {np.abs(o.numpy() - ref).max():.1e}")
        self.variants += [
            Variant("sw_e", "eager, sweep", run_sweep, (block, seqs)),
            Variant("sw_s", "sot, sweep", run_sweep, (t_sot, seqs), "sw_e"),
            Variant("sw_p", "Paddle SOT (to_static full_graph=False), sweep", run_sweep, (t_pd, seqs), "sw_e"),
        ]
        self.sot_keys.add("sw_s")
        for k in ("sw_e", "sw_s", "sw_p"):
            self.per_call_divisor[k] = len(seqs)

        for v in self.variants:  # warm the CPU caches and branch predictors
            for _ in range(20):
                v.fn(*v.args)
        self.sot_translations = sot.stats().translate_count
        self.pd_translations = paddle_sot_translate_count()
        self.pd_translations_setup = None if pd0 is None else self.pd_translations - pd0


class Check:
    """After each timed batch: no hook left installed; count anything translated again."""

    def __init__(self, setup: Setup) -> None:
        self.setup = setup
        self.sot = sot.stats().translate_count
        self.pd = paddle_sot_translate_count()
        self.retranslated: dict[str, int] = {}

    def __call__(self, variant: Variant, calls: int) -> None:
        problems = hooks_left_installed()
        if problems:
            raise RuntimeError(f"after timing {variant.key} ({variant.label}): " + "; ".join(problems))
        now_sot, now_pd = sot.stats().translate_count, paddle_sot_translate_count()
        delta = (now_sot - self.sot) + ((now_pd - self.pd) if now_pd is not None and self.pd is not None else 0)
        if delta:
            self.retranslated[variant.key] = self.retranslated.get(variant.key, 0) + delta
        self.sot, self.pd = now_sot, now_pd


# -- report -----------------------------------------------------------------------------------------------
def report(setup: Setup, samples: dict[str, list[float]], rounds: int, calls: int, check: Check,
           load_start: str) -> str:
    div = setup.per_call_divisor
    by_key = {v.key: v for v in setup.variants}

    def per_call(key: str) -> list[float]:
        return [s / div.get(key, 1) for s in samples[key]]

    def median_us(key: str) -> float:
        return statistics.median(per_call(key)) * 1e6

    def added(key: str) -> float:
        return paired_difference_us(per_call(key), per_call(by_key[key].baseline))

    def ratio(key: str) -> float:
        return paired_ratio(samples[key], samples[by_key[key].baseline])

    rows = []
    for v in setup.variants:
        if v.key.startswith("sw_"):
            continue
        base = v.baseline
        rows.append([v.key, v.label, f"{median_us(v.key):.2f}",
                     f"{ratio(v.key):.2f}x" if base else "1 (baseline)", f"{added(v.key):+.2f}" if base else "-"])
    hit_table = format_table(["#", "variant", "median us per call of f", "ratio to eager", "added us over eager"],
                             rows, right=[False, False, True, True, True])

    sw_rows = []
    n = len(setup.seq_lengths)
    sweep_counts = {"sw_e": ("-", "-", "-"),
                    "sw_s": (setup.sweep_sot[0], setup.sweep_sot[1], f"{setup.sweep_sot[2]} / {setup.sweep_sot[3]}"),
                    "sw_p": (setup.sweep_pd[0] if setup.sweep_pd[0] is not None else "n/a",
                             setup.sweep_pd[1] if setup.sweep_pd[1] is not None else "n/a", "-")}
    for key in ("sw_e", "sw_s", "sw_p"):
        v = by_key[key]
        t, g, bf = sweep_counts[key]
        sw_rows.append([v.label, t, g, bf, f"{median_us(key) / 1e3:.3f}",
                        f"{ratio(key):.2f}x" if v.baseline else "1 (baseline)"])
    sweep_table = format_table(["variant", "translations", "compiled graphs", "breaks / fallbacks",
                                "median ms per forward", "ratio to eager"], sw_rows,
                               right=[False, True, True, True, True, True])

    a1, a10, a50 = added("s1"), added("s10"), added("s50")
    c1, c10, c50 = added("c1"), added("c10"), added("c50")
    p1, p10, p50 = added("p1"), added("p10"), added("p50")
    g1, g50 = setup.guards[1], setup.guards[50]
    per_guard = (a50 - a1) / (g50 - g1) if g50 != g1 else float("nan")
    per_input, pd_per_input = (a50 - a1) / 49, (p50 - p1) / 49
    first, eighth = added("s8a"), added("s8h")
    pd_first, pd_eighth = added("p8a"), added("p8h")
    lines = [
        machine_description(),
        f"{load_start} at the start, {load_average()} at the end",
        f"rounds: {rounds}, calls per variant per round: {calls} (the 8-entry rows: {max(1, calls // 8)} driver calls "
        f"of 8 calls of f each); sweep: lengths {setup.seq_lengths[0]}..{setup.seq_lengths[-1]} "
        f"({n} shapes), one pass per call, {max(1, calls // 400)} passes per batch",
        "",
        hit_table,
        "",
        f"Sequence-length sweep (translations and graphs counted over the first pass over the {n} lengths)",
        "",
        sweep_table,
        "",
        f"sot guard checks per entry: 1 input {setup.guards[1]}, 10 inputs {setup.guards[10]}, 50 inputs "
        f"{setup.guards[50]}; 8-entry function: {setup.entries_sot} sot entries, "
        f"{setup.entries_pd if setup.entries_pd is not None else 'n/a'} Paddle SOT translations",
        f"target 'under {TARGET_10_INPUTS_US:g} us added per call for 10 tensor inputs': "
        f"{verdict(a10 < TARGET_10_INPUTS_US)}, sot {a10:+.2f} us (Paddle SOT {p10:+.2f} us)",
        f"target 'under {TARGET_PER_GUARD_US:g} us per extra guard': {verdict(per_guard < TARGET_PER_GUARD_US)}, "
        f"sot {per_guard:+.3f} us per extra guard check ({a50 - a1:+.2f} us for {g50 - g1} more checks, 1 -> 50 "
        f"inputs)",
        f"   per extra guarded tensor input ({g50 - g1} / 49 = {(g50 - g1) / 49:.1f} checks each): sot "
        f"{per_input:+.3f} us ({verdict(per_input < TARGET_PER_GUARD_US)} if one input counted as one guard), "
        f"Paddle SOT {pd_per_input:+.3f} us",
        f"C guard program against the Python chain (added over eager, same run): 1 input {a1:+.2f} vs {c1:+.2f} us, "
        f"10 inputs {a10:+.2f} vs {c10:+.2f} us, 50 inputs {a50:+.2f} vs {c50:+.2f} us; mobilenet_v2 guard alone "
        f"({setup.tree_checks} checks{'' if setup.tree_program else ', NOT one program'}): {median_us('gm'):.1f} vs "
        f"{median_us('gmpy'):.1f} us -> {ratio('gm'):.2f}x",
        f"target '8th cache entry no more than {TARGET_8TH_VS_1ST:g}x the first' (added time over eager): "
        f"{verdict(eighth <= TARGET_8TH_VS_1ST * first)}, sot 1st {first:+.2f} us, 8th {eighth:+.2f} us -> "
        f"{eighth / first:.2f}x (Paddle SOT 'm7' repeated {pd_first:+.2f} us, cycled {pd_eighth:+.2f} us -> "
        f"{pd_eighth / pd_first:.2f}x)",
        f"target '{TARGET_SWEEP_TRANSLATIONS} translations over the sequence-length sweep': "
        f"{verdict(setup.sweep_sot[0] == TARGET_SWEEP_TRANSLATIONS)}, sot {setup.sweep_sot[0]}, Paddle SOT "
        f"{setup.sweep_pd[0] if setup.sweep_pd[0] is not None else 'n/a'}",
    ]
    if setup.sweep_sot_warnings:
        lines.append(f"sot warnings during the sweep: {setup.sweep_sot_warnings[0]}"
                     + (f" (+{len(setup.sweep_sot_warnings) - 1} more)" if len(setup.sweep_sot_warnings) > 1 else ""))
    for text in setup.sweep_mismatch:
        lines.append(f"MISMATCH with eager in the sweep: {text}")
    if check.retranslated:
        lines.append("translated again while timed (batches): " + ", ".join(f"{k}: {v}" for k, v in
                                                                            check.retranslated.items()))
    lines += setup.notes
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=None, help="timed rounds (default 21; 5 with --quick)")
    parser.add_argument("--calls", type=int, default=None,
                        help="calls of the hit-path functions per variant per round (default 2000; 200 with --quick); "
                             "the 8-entry drivers make calls/8 calls of 8, the sweep calls/400 passes")
    parser.add_argument("--quick", action="store_true", help="smoke run: few rounds and calls, lengths 8..64 step 8")
    parser.add_argument("--seq-step", type=int, default=None, help="step of the length sweep 8..64 (default 1; 8 "
                                                                   "with --quick)")
    parser.add_argument("--profile", metavar="VARIANT", help="cProfile --calls calls of one variant (e.g. s50)")
    parser.add_argument("--progress", action="store_true", help="a line per round on stderr")
    args = parser.parse_args(argv)
    rounds = args.rounds if args.rounds is not None else (5 if args.quick else 21)
    calls = args.calls if args.calls is not None else (200 if args.quick else 2000)
    step = args.seq_step if args.seq_step is not None else (8 if args.quick else 1)
    if rounds < 1 or calls < 1 or step < 1:
        parser.error("--rounds, --calls and --seq-step must be positive")

    load_start = load_average()
    setup = Setup(list(range(8, 65, step)))
    if args.profile:
        chosen = {v.key: v for v in setup.variants}.get(args.profile)
        if chosen is None:
            parser.error(f"--profile: unknown variant; one of {', '.join(v.key for v in setup.variants)}")
        print(f"cProfile of {calls} calls of {chosen.key} ({chosen.label}), sorted by own time:")
        print(cprofile_top(chosen.fn, chosen.args, calls, top=20))
        return 0

    check = Check(setup)
    # Batches of similar length: the hit-path rows make `calls` calls, the 8-entry drivers calls/8 (8 calls of f
    # each), the sweep calls/400 passes (a pass is ~57 forwards of ~0.3 ms).
    groups = {"hit": [v for v in setup.variants if v.key[1:] in {str(n) for n in INPUT_COUNTS}],
              "tree": [v for v in setup.variants if v.key in ("gm", "gmpy")],
              "entries": [v for v in setup.variants if v.key[1:] in ("8a", "8h")],
              "sweep": [v for v in setup.variants if v.key.startswith("sw_")]}
    batch = {"hit": calls, "tree": max(1, calls // 40), "entries": max(1, calls // 8), "sweep": max(1, calls // 400)}
    samples: dict[str, list[float]] = {}
    for name, group in groups.items():
        samples.update(interleave(group, rounds, batch[name], after_batch=check, progress=args.progress))
    print(report(setup, samples, rounds, calls, check, load_start))
    return 0


if __name__ == "__main__":
    sys.exit(main())

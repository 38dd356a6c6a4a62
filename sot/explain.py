"""`sot.explain`: what the translator did with one call, in words a user can act on."""
from __future__ import annotations

import dataclasses
import types
from typing import Any, Callable

import paddle

from .eval_frame_ext import cache_entries
from .opcode_translator.callback import add_listener, remove_listener
from .opcode_translator.executor.function_graph import FrameInfo
from .opcode_translator.transform import Translation, describe_code
from .stats import Stats, stats


@dataclasses.dataclass
class FrameReport:
    """One translation that happened during the explained call."""

    code: types.CodeType
    translation: Translation


@dataclasses.dataclass
class ExplainReport:
    """Returned by `sot.explain`; ``str()`` renders it."""

    function: str
    translations: list[FrameReport]
    cache: dict[str, list[Any]]
    stats_delta: Stats
    result: Any = None

    @property
    def graphs(self) -> list[Translation]:
        return [r.translation for r in self.translations if r.translation.kind == "compiled"]

    @property
    def breaks(self) -> list[Translation]:
        return [r.translation for r in self.translations if r.translation.kind == "break"]

    @property
    def fallbacks(self) -> list[Translation]:
        return [r.translation for r in self.translations if r.translation.kind == "fallback"]

    def summary(self) -> str:
        n_frames = len(self.translations)
        graphs = self.graphs + [t for t in self.breaks if t.program is not None]
        n_ops = sum(len(t.sir) for t in graphs if t.sir is not None)
        n_eager = sum(1 for r in self.translations if r.translation.kind == "eager")
        text = (f"Calling {self.function} translated {n_frames} frame(s): {len(graphs)} compiled graph(s) "
                f"holding {n_ops} op(s), {len(self.breaks)} graph break(s) (the code before each is a graph, "
                f"the rest continues in a resume function), {n_eager} frame(s) kept eager because their graph "
                f"was smaller than min_graph_size, and {len(self.fallbacks)} fallback(s).")
        if self.fallbacks:
            text += " Fallbacks run the whole frame eagerly; the reasons below say which line to change."
        if n_frames == 0:
            text += " Every frame was served from the cache (see the guards below)."
        return text

    def __str__(self) -> str:
        lines = [f"== sot.explain: {self.function} ==", self.summary(), ""]
        for index, report in enumerate(self.translations):
            t = report.translation
            lines.append(f"-- frame {index}: {describe_code(report.code)}: {t.kind}")
            if t.failure is not None:
                kind = "graph break" if t.is_break else "fallback"
                where = t.failure.location or "?"
                lines.append(f"   {kind} at {where}: {t.failure.reason}")
            if t.sir is not None and t.sir.statements:
                lines.extend("   " + line for line in t.sir.dump().splitlines())
        lines.append("")
        lines.append("-- cache entries (most recently used first) and their guards:")
        for name, guards in self.cache.items():
            for number, guard in enumerate(guards):
                translation = getattr(guard, "translation", None)
                kind = f" ({translation.kind})" if translation is not None else ""
                lines.append(f"   {name} entry {number}{kind}, guarded by:")
                lines.extend(f"      {text}" for text in (guard.readable or ["(no guard: always valid)"]))
                shown = translation is not None and any(
                    r.translation.sir is translation.sir for r in self.translations)
                if translation is not None and translation.sir is not None and translation.sir.statements \
                        and not shown:
                    lines.extend("      " + line for line in translation.sir.dump().splitlines())
        s = self.stats_delta
        lines.append("")
        lines.append(f"-- stats for this call: translate_count={s.translate_count} cache_hits={s.cache_hits} "
                     f"graph_breaks={s.graph_breaks} fallbacks={s.fallbacks} compiled_graphs={s.compiled_graphs}")
        return "\n".join(lines)


def _code_of(fn: Any) -> types.CodeType | None:
    fn = getattr(fn, "__sot_translated__", fn)
    if isinstance(fn, paddle.nn.Layer):
        fn = fn.forward
    fn = getattr(fn, "__func__", fn)
    return getattr(fn, "__code__", None)


def explain(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> ExplainReport:
    """Run one translated call of ``fn`` and report graphs, breaks, fallbacks and guards."""
    from .translate import symbolic_translate

    translated = fn if hasattr(fn, "__sot_translated__") else symbolic_translate(fn)
    records: list[FrameReport] = []

    def listen(translation: Translation, frame: FrameInfo) -> None:
        records.append(FrameReport(frame.code, translation))

    before = stats()
    add_listener(listen)
    try:
        result = translated(*args, **kwargs)
    finally:
        remove_listener(listen)
    after = stats()
    delta = Stats(*(getattr(after, f.name) - getattr(before, f.name) for f in dataclasses.fields(Stats)))
    codes = [r.code for r in records]
    own = _code_of(getattr(fn, "__sot_translated__", fn))
    if own is not None and own not in codes:
        codes.insert(0, own)
    cache = {}
    for code in dict.fromkeys(codes):
        guards = []
        for guard_fn, _ in cache_entries(code):
            guard = getattr(guard_fn, "guard", None)
            if guard is not None:
                guard.translation = getattr(guard_fn, "translation", None)
                guards.append(guard)
        cache[describe_code(code)] = guards
    layer = getattr(fn, "_layer", fn)
    name = getattr(fn, "__qualname__", None) or f"{type(layer).__name__} (a {type(layer).__bases__[0].__name__})"
    return ExplainReport(name, records, cache, delta, result)

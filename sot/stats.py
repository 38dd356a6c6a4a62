"""Counters behind ``sot.stats()``: what the translator did since the last ``sot.reset()``."""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Stats:
    """A snapshot; fields as specified in API.md."""

    translate_count: int = 0
    cache_hits: int = 0
    graph_breaks: int = 0
    fallbacks: int = 0
    compiled_graphs: int = 0


@dataclasses.dataclass
class _Counters:
    translate_count: int = 0
    graph_breaks: int = 0
    fallbacks: int = 0
    compiled_graphs: int = 0
    # Cache hits are counted in C on the hot path; we keep the value at the last reset.
    hit_baseline: int = 0
    # Bumped by every reset: a count taken back (`uncount_compiled_graph`) must belong to the current one.
    epoch: int = 0


counters = _Counters()


def _hit_count() -> int:
    from .eval_frame_ext import hit_count

    return hit_count()


def stats() -> Stats:
    """What happened since the last ``sot.reset()``."""
    return Stats(
        translate_count=counters.translate_count,
        cache_hits=_hit_count() - counters.hit_baseline,
        graph_breaks=counters.graph_breaks,
        fallbacks=counters.fallbacks,
        compiled_graphs=counters.compiled_graphs,
    )


def reset_counters() -> None:
    global counters
    counters.translate_count = counters.graph_breaks = counters.fallbacks = counters.compiled_graphs = 0
    counters.hit_baseline = _hit_count()
    counters.epoch += 1


def count_compiled_graph() -> int:
    """Count a new SIR program; returns the epoch to hand back to `uncount_compiled_graph`."""
    counters.compiled_graphs += 1
    return counters.epoch


def uncount_compiled_graph(epoch: int) -> None:
    """A program counted in ``epoch`` turned out not to build (its statements run eagerly): it is no compiled
    graph. Nothing to take back when a reset came in between."""
    if epoch == counters.epoch and counters.compiled_graphs > 0:
        counters.compiled_graphs -= 1

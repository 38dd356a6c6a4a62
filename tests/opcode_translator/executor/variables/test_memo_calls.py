"""Calls of ``functools.lru_cache`` / ``functools.cache`` helpers (memo_calls.py): with built-in constant
arguments (a dynamic dim included) they are answered during translation and their result is re-read by the
call at each run, so they break no graph and hit the cache; results equal eager's on repeated calls, after
``cache_clear()``, after an eviction and with other arguments; other arguments keep the call native (an
unhashable one raises eager's TypeError)."""
from __future__ import annotations

import functools

import numpy as np
import paddle
import pytest

import sot

SCALE = [2.0]


@functools.lru_cache(maxsize=2)
def causal_mask(n):
    return paddle.tril(paddle.ones([n, n])) * SCALE[0]


@functools.cache
def get_config(name, factor=1):
    return {"hidden": SCALE[0] * factor, "name": name}


@functools.lru_cache
def rope_freqs(dim, base=10000.0):
    return [1.0 / base ** (i / dim) for i in range(0, dim, 2)]


def _clear_all() -> None:
    for memo in (causal_mask, get_config, rope_freqs):
        memo.cache_clear()


def attention_like(x):
    mask = causal_mask(x.shape[0])  # a dim of the input: one key per size
    scale = get_config("base", factor=3)["hidden"]
    return x @ mask * scale + rope_freqs(8)[1]


def test_memo_helpers_break_no_graph_and_hit_the_cache(compile_all):
    _clear_all()
    fast = sot.symbolic_translate(attention_like)
    x = paddle.rand([4, 4])
    for _ in range(3):
        np.testing.assert_allclose(attention_like(x).numpy(), fast(x).numpy(), rtol=1e-6)
    stats = sot.stats()
    assert stats.graph_breaks == 0 and stats.fallbacks == 0
    assert stats.translate_count == 1 and stats.cache_hits == 2


def test_memo_results_follow_other_arguments_clear_and_eviction(compile_all):
    _clear_all()
    SCALE[0] = 2.0
    fast = sot.symbolic_translate(attention_like)
    try:
        for step, n in enumerate([4, 3, 5, 4, 4, 3]):  # maxsize=2: sizes evict each other
            if step == 4:  # what the helpers read changes, and the user clears the memos as they must
                SCALE[0] = 5.0
                _clear_all()
            x = paddle.rand([n, n])
            np.testing.assert_allclose(attention_like(x).numpy(), fast(x).numpy(), rtol=1e-6)
    finally:
        SCALE[0] = 2.0
    assert sot.stats().graph_breaks == 0


@functools.lru_cache
def _frequencies(dim):
    return [float(i) for i in range(dim)]


@functools.lru_cache
def _buffer(n):
    return paddle.zeros([n])


def test_memo_results_are_the_cached_objects(compile_all):
    def grow(x):  # the cached list is the one changed
        freqs = _frequencies(3)
        freqs.append(1.0)
        return x + len(freqs) + (_frequencies(4) is _frequencies(4)) + (_frequencies(4) is _frequencies(3))

    def accumulate(x):  # the cached tensor is a program input, changed in place
        buffer = _buffer(3)
        buffer.add_(x)
        return buffer * 2

    for fn in (grow, accumulate):
        results = []
        for run in (fn, sot.symbolic_translate(fn)):
            _frequencies.cache_clear()
            _buffer.cache_clear()
            results.append([run(paddle.ones([3])).numpy() for _ in range(3)])
        np.testing.assert_array_equal(np.array(results[0]), np.array(results[1]))


STATE = {"ok": True}


@functools.cache
def _lookup(name):
    if not STATE["ok"]:
        raise KeyError(name)
    return 2


def test_memo_helper_raising_and_unhashable_arguments_raise_as_eagerly(compile_all):
    def scaled(x):
        return x * _lookup("a")

    fast = sot.symbolic_translate(scaled)
    x = paddle.ones([3])
    _lookup.cache_clear()
    try:
        np.testing.assert_array_equal(scaled(x).numpy(), fast(x).numpy())
        STATE["ok"] = False
        _lookup.cache_clear()
        for run in (scaled, fast):
            with pytest.raises(KeyError):
                run(x)
    finally:
        STATE["ok"] = True

    def unhashable(x, key):
        return x + rope_freqs(key)[0]

    for run in (unhashable, sot.symbolic_translate(unhashable)):
        with pytest.raises(TypeError, match="unhashable"):
            run(x, [8])


class _Table:
    def __init__(self) -> None:
        self.computed = 0

    @functools.lru_cache
    def row(self, n):
        self.computed += 1
        return [float(n)] * n


def test_memoised_method_runs_natively_at_a_break_not_a_fallback(compile_all):
    def read(x, table):
        return x + table.row(3)[0] * 2

    for run in (read, sot.symbolic_translate(read)):
        _Table.row.cache_clear()
        table = _Table()
        results = [run(paddle.ones([3]), table).numpy() for _ in range(3)]
        assert table.computed == 1  # the memo answered the later calls, as eagerly
        np.testing.assert_array_equal(np.array(results), np.full((3, 3), 7.0, dtype="float32"))
    stats = sot.stats()
    assert stats.fallbacks == 0 and stats.graph_breaks == 1

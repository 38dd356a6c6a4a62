"""Tensors as keys of dicts made in the frame (``Tensor.__hash__`` is by identity): simulated with the key
held by its tensor's variable (container.TensorKey), one variable per tensor checked when the key is made
(a new tensor of an op; tensors from outside guarded distinct); were a fallback of the whole frame."""
from __future__ import annotations

import collections

import numpy as np
import paddle

import sot
from sot import psdb

from conftest import assert_counts, assert_same, raised


def _t(*shape: int, seed: int = 0) -> paddle.Tensor:
    rng = np.random.default_rng(seed)
    return paddle.to_tensor(rng.standard_normal(shape).astype("float32"))


def keyed(x, y):
    z = x * 2
    d = {x: 1.0, y: 2.0}
    d[z] = 3.0
    found = (x in d, z in d, (x + 0) in d, d.get(y), d.get(x * 3, -1.0))
    d.pop(y)
    total = x
    for key, scale in d.items():
        total = total + key * scale
    return d, total, found, len(d)


def check_keyed(fast, x, y):
    expected = keyed(x, y)
    out = fast(x, y)
    assert_same(out[1:], expected[1:])
    assert len(out[0]) == len(expected[0])
    keys = list(out[0])
    assert keys[0] is x  # the very tensors are the keys of the returned dict
    assert_same(keys[1], list(expected[0])[1])
    assert list(out[0].values()) == list(expected[0].values())


def test_a_dict_keyed_by_tensors(compile_all):
    x, y = _t(3), _t(3, seed=1)
    fast = sot.symbolic_translate(keyed)
    for _ in range(2):
        check_keyed(fast, x, y)
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)
    assert sot.stats().cache_hits == 1


def test_the_same_tensor_twice_is_one_key(compile_all):
    x, y = _t(3), _t(3, seed=1)
    fast = sot.symbolic_translate(keyed)
    check_keyed(fast, x, y)
    # x passed for both: one key in eager; the distinctness guard misses, and the translation follows.
    expected = keyed(x, x)
    out = fast(x, x)
    assert len(out[0]) == len(expected[0]) == 1
    assert_same(out[1:], expected[1:])
    assert sot.stats().fallbacks == 0


def grouped(xs):
    groups = collections.defaultdict(list)
    for i, t in enumerate(xs):
        groups[xs[i % 2]].append(t * i)
    return [sum(v) for v in groups.values()], len(groups)


def test_a_defaultdict_grouping_by_tensor(compile_all):
    xs = [_t(2, seed=k) for k in range(4)]
    expected = grouped(xs)
    fast = sot.symbolic_translate(grouped)
    for _ in range(2):
        assert_same(fast(xs), expected)
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


def cache_lookup(x, cache):
    table = {}
    for t in cache:
        table[t] = t.sum()
    return table[cache[1]] + x


def test_lookup_by_a_list_item(compile_all):
    cache = [_t(3, seed=3), _t(3, seed=4)]
    x = _t(3)
    expected = cache_lookup(x, cache)
    fast = sot.symbolic_translate(cache_lookup)
    for _ in range(2):
        assert_same(fast(x, cache), expected)
    assert sot.stats().fallbacks == 0


def missing(x, y):
    d = {x: 1}
    return d[y]


def test_a_missing_tensor_key_raises_key_error():
    x, y = _t(3), _t(3, seed=1)
    expected = raised(missing, x, y)
    actual = raised(sot.symbolic_translate(missing), x, y)
    assert type(actual) is type(expected) is KeyError
    assert actual.args[0] is y


def maybe_same(x):
    same = x.astype(x.dtype)  # may be x itself: which key it is is not known during simulation
    d = {x: 1, same: 2}
    return len(d), d[x]


def test_an_op_that_may_return_its_input_stays_correct(compile_all):
    x = _t(3)
    assert sot.symbolic_translate(maybe_same)(x) == maybe_same(x)


def from_pairs(x, y):
    d = dict([(x, 1.0)])
    return list(d)[0] + y


def test_dict_from_pairs_keyed_by_an_input_is_that_input(compile_all):
    """Was: the first call's tensor embedded in the generated code as a constant key (a crash)."""
    a, b = _t(2), _t(2, seed=1)
    fast = sot.symbolic_translate(from_pairs)
    assert_same(fast(a, b), from_pairs(a, b))
    assert_same(fast(b, b), from_pairs(b, b))
    assert sot.stats().fallbacks == 0


def counted(x):
    d = collections.defaultdict(int)
    d[(1, "a")] += 1
    d[(1, "a")] += 2
    return x * d[(1, "a")]


def test_a_defaultdict_with_a_missing_tuple_key_calls_its_factory(compile_all):
    x = _t(3)
    fast = sot.symbolic_translate(counted)
    for _ in range(2):
        assert_same(fast(x), counted(x))
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


def across_a_break(x, y):
    d = {x: 1.0, y * 2: 2.0}
    psdb.breakgraph()
    return sum(k * v for k, v in d.items()), d[x]


def test_a_tensor_keyed_dict_across_a_graph_break(compile_all):
    x, y = _t(3), _t(3, seed=1)
    expected = across_a_break(x, y)
    fast = sot.symbolic_translate(across_a_break)
    for _ in range(2):
        assert_same(fast(x, y), expected)
    assert_counts(translate_count=2, graph_breaks=1, fallbacks=0, compiled_graphs=2)


def received(x, table):
    table[x * 1] = 0.0  # a new tensor: a new key, written back
    return table[x] * x + len(table)


def test_a_received_dict_keyed_by_tensors(compile_all):
    x, y = _t(3), _t(3, seed=1)
    fast = sot.symbolic_translate(received)
    for _ in range(2):
        eager_table, fast_table = {x: 3.0, y: 4.0}, {x: 3.0, y: 4.0}
        assert_same(fast(x, fast_table), received(x, eager_table))
        assert len(fast_table) == len(eager_table) == 3
        assert all(a is b for a, b in zip(list(fast_table)[:2], [x, y]))
        assert list(fast_table.values()) == list(eager_table.values())
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)
    # Another dict with other tensors in its keys: the key at the lookup is not ``x``: a miss, then KeyError
    # as eagerly.
    other = {y: 3.0, _t(3, seed=5): 4.0}
    expected = raised(received, x, dict(other))
    actual = raised(fast, x, other)
    assert type(actual) is type(expected) is KeyError

"""``OrderedDict.move_to_end`` and ``popitem(last=...)`` on a simulated OrderedDict (received, built in the
frame, or a user OrderedDict subclass instance such as a ModelOutput): simulated on its items (were a
fallback; ``popitem(last=False)`` of a user OrderedDict subclass popped the last item)."""
from __future__ import annotations

import collections

import numpy as np
import paddle
import pytest

import sot

from conftest import assert_counts, assert_same, raised


def _t(*shape: int, seed: int = 0) -> paddle.Tensor:
    rng = np.random.default_rng(seed)
    return paddle.to_tensor(rng.standard_normal(shape).astype("float32"))


class Output(collections.OrderedDict):
    pass


def lru_touch(cache, x):
    cache.move_to_end("a")
    cache.move_to_end("c", last=False)
    key, value = cache.popitem(last=False)
    last_key, last_value = cache.popitem()
    return x * value + last_value, key, last_key


def make(kind):
    return lambda: kind(a=_t(3, seed=1), b=2.0, c=3.0, d=_t(3, seed=2))


@pytest.mark.parametrize("kind", [collections.OrderedDict, Output], ids=lambda k: k.__name__)
def test_received_ordered_dict_reordered_and_written_back(compile_all, kind):
    x = _t(3)
    fast = sot.symbolic_translate(lru_touch)
    for _ in range(2):
        eager, translated = make(kind)(), make(kind)()
        expected = lru_touch(eager, x)
        assert_same(fast(translated, x), expected)
        assert type(translated) is kind
        assert list(translated) == list(eager)
        assert_same(list(translated.values()), list(eager.values()))
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)
    assert sot.stats().cache_hits == 1


def built(x):
    od = collections.OrderedDict()
    od["first"] = x + 1
    od["second"] = x * 2
    od["third"] = x - 1
    od.move_to_end("first")
    od.move_to_end("third", False)
    return od, list(od)


def test_built_ordered_dict_keeps_the_order(compile_all):
    x = _t(3)
    expected = built(x)
    fast = sot.symbolic_translate(built)
    for _ in range(2):
        out = fast(x)
        assert type(out[0]) is collections.OrderedDict
        assert_same(list(out[0].items()), list(expected[0].items()))
        assert out[1] == expected[1]
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


def missing_key(od, x):
    od.move_to_end("zzz")
    return x


def empty_pop(od, x):
    od.popitem(last=False)
    return x


@pytest.mark.parametrize("fn, make_od", [(missing_key, lambda: collections.OrderedDict(a=1)),
                                         (empty_pop, collections.OrderedDict)])
def test_errors_as_eager(fn, make_od):
    x = _t(3)
    eager_od, fast_od = make_od(), make_od()
    expected = raised(fn, eager_od, x)
    actual = raised(sot.symbolic_translate(fn), fast_od, x)
    assert type(actual) is type(expected) and str(actual) == str(expected)
    assert list(fast_od.items()) == list(eager_od.items())

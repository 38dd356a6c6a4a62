"""``OrderedDict`` and ``defaultdict`` objects reached from the frame (arguments, ``layer.state_dict()`` kept
across a graph break): read, iterated and changed like dicts, with the eager result and the change written
into the very object; their class, keys and default factory are guarded."""
from __future__ import annotations

import collections
from typing import Any, Callable

import numpy as np
import paddle
import paddle.nn as nn

import sot


def _picture(value: Any) -> Any:
    if isinstance(value, paddle.Tensor):
        return ("tensor", tuple(value.shape), value.numpy().round(5).tolist())
    if isinstance(value, dict):
        extra = getattr(value, "default_factory", None)
        return (type(value).__name__, extra, [(k, _picture(v)) for k, v in value.items()])
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [_picture(v) for v in value])
    return (type(value).__name__, value)


def _check(fn: Callable[..., Any], make: Callable[[], tuple], breaks: int | None = 0) -> Any:
    fast = sot.symbolic_translate(fn)
    for _ in range(2):
        eager_args, fast_args = make(), make()
        assert _picture(fast(*fast_args)) == _picture(fn(*eager_args))
        assert _picture(fast_args) == _picture(eager_args)
    stats = sot.stats()
    assert stats.fallbacks == 0 and (breaks is None or stats.graph_breaks == breaks), stats
    return stats


def _x() -> paddle.Tensor:
    return paddle.to_tensor(np.array([1.0, -2.0], "float32"))


def test_ordered_dict_argument_read_iterated_and_changed(compile_all):
    def fn(x, od):
        total = x * 0
        for key in od:
            total = total + od[key]
        od["sum"] = total
        od.pop("a")
        return total, list(od.keys()), len(od)

    _check(fn, lambda: (_x(), collections.OrderedDict(a=_x(), b=_x() * 2)))


def test_defaultdict_argument_missing_key(compile_all):
    def fn(x, counts):
        counts["seen"].append(1)
        counts["other"]
        return x + len(counts["seen"])

    _check(fn, lambda: (_x(), collections.defaultdict(list, seen=[0])))


def test_defaultdict_factory_change_is_seen(compile_all):
    def fn(x, d):
        return x + len(d["missing"])

    fast = sot.symbolic_translate(fn)
    for factory in (list, lambda: [1, 2, 3], list):
        expected, actual = fn(_x(), collections.defaultdict(factory)), fast(_x(), collections.defaultdict(factory))
        assert _picture(actual) == _picture(expected)


def test_state_dict_kept_across_a_break(compile_all):
    def fn(layer, x):
        state = layer.state_dict()
        print("break")
        return x @ state["weight"], list(state)

    paddle.seed(3)
    layer = nn.Linear(2, 2)
    _check(fn, lambda: (layer, _x().unsqueeze(0)), breaks=None)


def test_ordered_dict_copy_and_popitem(compile_all):
    def fn(x, od, empty):
        copy = od.copy()
        copy["new"] = x
        last = od.popitem()
        try:
            empty.popitem()
        except KeyError as exc:
            message = str(exc)
        return copy, last, message, od.popitem(last=False)

    _check(fn, lambda: (_x(), collections.OrderedDict(a=1, b=2, c=3), collections.OrderedDict()), breaks=None)

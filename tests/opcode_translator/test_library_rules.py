"""Library calls answered during simulation (variables/library_rules.py): ``inspect.signature`` of a Python
function or bound method is folded under a guard on the function's identity."""
from __future__ import annotations

import functools
import inspect

import numpy as np
import paddle

import sot

from conftest import assert_counts, assert_same


def _t(*shape: int, seed: int = 0) -> paddle.Tensor:
    rng = np.random.default_rng(seed)
    return paddle.to_tensor(rng.standard_normal(shape).astype("float32"))


def two(a, b):
    return a + b


def three(a, b, c=1):
    return a + b + c


def arity(fn, x):
    params = inspect.signature(fn).parameters
    names = "c" in params
    if len(params) > 2:
        return fn(x, x, 2) * 1, names
    return fn(x, x) * 1, names


def test_signature_is_folded_and_guarded_by_identity(compile_all):
    x = _t(3)
    fast = sot.symbolic_translate(arity)
    for fn in (two, two, three):
        assert_same(fast(fn, x), arity(fn, x))
    assert_counts(translate_count=2, graph_breaks=0, fallbacks=0, compiled_graphs=2)
    assert sot.stats().cache_hits == 1


def wrapper(fn):
    @functools.wraps(fn)
    def inner(*args):
        return fn(*args)

    return inner


def test_a_wrapped_function_runs_natively_and_stays_correct(compile_all):
    x = _t(3)
    wrapped = wrapper(three)
    assert_same(sot.symbolic_translate(arity)(wrapped, x), arity(wrapped, x))
    assert sot.stats().fallbacks == 0

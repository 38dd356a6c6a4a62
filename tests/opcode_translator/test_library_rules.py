"""Library calls answered during simulation (variables/library_rules.py): ``inspect.signature`` of a Python
function or bound method is folded under a guard on the function's identity; ``copy.copy``/``deepcopy`` of an
atomic constant is the constant, so ``dataclasses.asdict``/``astuple`` (inlined) of a config do not break;
``typing.cast`` is its value; ``os.path``/``re`` functions of constant strings are folded."""
from __future__ import annotations

import collections
import copy
import dataclasses
import functools
import inspect
import os
import re
import typing

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


@dataclasses.dataclass
class Inner:
    depth: int = 2
    names: list = dataclasses.field(default_factory=lambda: ["a", "b"])


@dataclasses.dataclass
class Config:
    scale: float = 0.5
    name: str = "cfg"
    inner: Inner = dataclasses.field(default_factory=Inner)
    sizes: tuple = (3, 4)
    table: dict = dataclasses.field(default_factory=lambda: {"k": 1.5})
    nothing: None = None


def use_asdict(x, cfg):
    d = dataclasses.asdict(cfg)
    d["inner"]["names"].append("c")  # (a copy: the config's own list is left alone)
    t = dataclasses.astuple(cfg)
    o = dataclasses.asdict(cfg, dict_factory=collections.OrderedDict)
    return x * d["scale"] + d["inner"]["depth"] + len(t) + len(d["inner"]["names"]), d, t, list(o)


def test_asdict_and_astuple_of_a_config_are_simulated_without_a_break(compile_all):
    x, cfg = _t(3), Config()
    expected = use_asdict(x, Config())
    assert_same(sot.symbolic_translate(use_asdict)(x, cfg), expected)
    assert cfg.inner.names == ["a", "b"]
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


def test_asdict_is_guarded_on_the_field_values(compile_all):
    x = _t(3)
    fast = sot.symbolic_translate(use_asdict)
    for cfg in (Config(), Config(scale=2.0), Config(inner=Inner(depth=5)), Config(scale=2.0)):
        assert_same(fast(x, cfg), use_asdict(x, dataclasses.replace(cfg)))
    assert sot.stats().translate_count == 3 and sot.stats().graph_breaks == 0


@dataclasses.dataclass
class Holder:
    weight: paddle.Tensor
    factor: int = 3


def asdict_of_tensors(x, holder):
    d = dataclasses.asdict(holder)
    return d["weight"] * x + d["factor"], d["weight"] is holder.weight


def test_asdict_copies_a_tensor_field_as_eager_does(compile_all):
    """``copy.deepcopy`` of a tensor runs natively (a break): a new tensor, its own data, no gradient link."""
    x = _t(3)
    w = _t(3, seed=1)
    w.stop_gradient = False
    out, same = sot.symbolic_translate(asdict_of_tensors)(x, Holder(w))
    ref, ref_same = asdict_of_tensors(x, Holder(w))
    assert_same(out, ref)
    assert same is ref_same is False


def copies(x, n, s):
    return x * copy.deepcopy(n) + len(copy.copy(s)), copy.deepcopy(s) is s


def test_a_copy_of_an_atomic_constant_is_the_constant(compile_all):
    x = _t(3)
    assert_same(sot.symbolic_translate(copies)(x, 2, "abc"), copies(x, 2, "abc"))
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


def paths_and_patterns(x, name):
    path = os.path.join("checkpoints", name, "model.pdparams")
    stem, ext = os.path.splitext(os.path.basename(path))
    digits = re.findall(r"\d+", name)
    digits.append("0")  # (a new list: the frame's own)
    layer = int(re.sub(r"[^0-9]", "", name) or 0)
    y = typing.cast(paddle.Tensor, x * len(stem))
    return y + layer + len(digits), path, ext, digits


def test_path_and_regex_functions_of_constants_are_folded(compile_all):
    fast = sot.symbolic_translate(paths_and_patterns)
    x = _t(3)
    for name in ("block12", "block12", "layer3"):
        got = fast(x, name)
        assert_same(got, paths_and_patterns(x, name))
    assert_counts(translate_count=2, graph_breaks=0, fallbacks=0, compiled_graphs=2)


def split_with_a_callable(x, text):
    return x * len(re.sub(r"\d", lambda m: m.group(0) * 2, text))


def test_a_regex_with_a_callable_replacement_still_runs_natively(compile_all):
    x = _t(3)
    assert_same(sot.symbolic_translate(split_with_a_callable)(x, "a1b2"), split_with_a_callable(x, "a1b2"))
    assert sot.stats().graph_breaks >= 1 and sot.stats().fallbacks == 0  # (re.sub ran natively)

"""Conformance: what a cached translation depends on. The same function is called with inputs that differ in
ways real code produces (dynamic batch sizes, aliased tensors, grown mutable defaults, globals and closures
changed in place, containers of varying content), and each call must give eager's answer.
"""
from __future__ import annotations

import paddle
import paddle.nn.functional as F

import sot

from _conformance import T, assert_observed_same, check, observe

GLOBAL_W = T(4, 4, seed=5)
GLOBAL_CONFIG = {"scale": 2.0, "act": "relu"}
GLOBAL_FLAGS = [True]


# -- dynamic shapes ----------------------------------------------------------------------------------------------
def batch_dependent_python_arithmetic(x):
    batch = x.shape[0]
    half = batch // 2
    padded = paddle.concat([x, paddle.zeros([batch % 2 + 1, x.shape[1]])])
    return x * batch, padded, x.reshape([batch * x.shape[1]]), half, paddle.zeros([batch, 2]), batch > 3


def batch_dependent_loop(x):
    total = x[0] * 0
    for i in range(x.shape[0]):
        total = total + x[i] * i
    return total


def batch_dependent_python_list(x):
    sizes = [x.shape[0]] * 2
    return paddle.split(paddle.concat([x, x]), sizes), sizes


def test_dynamic_batch_python_arithmetic(compile_all):
    check(batch_dependent_python_arithmetic, *[(lambda b=b: (T(b, 3),)) for b in (2, 3, 4, 5, 8, 3)], stable=False)


def test_dynamic_batch_loop(compile_all):
    check(batch_dependent_loop, *[(lambda b=b: (T(b, 3),)) for b in (2, 3, 5, 2)], stable=False)


def test_dynamic_batch_split_sizes(compile_all):
    check(batch_dependent_python_list, *[(lambda b=b: (T(b, 3),)) for b in (2, 3, 4)], stable=False)


def test_dynamic_batch_in_a_layer(compile_all):
    paddle.seed(3)
    layer = paddle.nn.Sequential(paddle.nn.Linear(3, 5), paddle.nn.ReLU(), paddle.nn.Linear(5, 2))

    def fn(x):
        out = layer(x)
        return out.reshape([x.shape[0], -1]).mean(axis=0), out.shape[0]

    check(fn, *[(lambda b=b: (T(b, 3),)) for b in (2, 3, 7, 2)], stable=False)


# -- aliasing ---------------------------------------------------------------------------------------------------
def two_tensors(x, y):
    return x * 2 + y, x - y


def test_same_tensor_twice_then_two_tensors(compile_all):
    """``fn(x, x)`` then ``fn(x, y)``: a translation that merged the two inputs must not be reused."""
    same = lambda: (lambda t: (t, t))(T(3))  # noqa: E731
    check(two_tensors, same, lambda: (T(3), T(3, seed=1)), same, stable=False)


def test_two_tensors_then_the_same_tensor_twice(compile_all):
    same = lambda: (lambda t: (t, t))(T(3))  # noqa: E731
    check(two_tensors, lambda: (T(3), T(3, seed=1)), same, stable=False)


def append_to_both(x, a, b):
    a.append(x)
    b.append(x * 2)
    return len(a), len(b)


def test_list_aliasing_both_directions(compile_all):
    """Fixed (kept as a regression test); was: WRONG RESULT: the translation made for two distinct lists is reused
    when the same list is passed twice: ``len(b)`` is 1 instead of 2 (the append through ``a`` is not seen through
    ``b``). Aliasing between arguments must be guarded (see also test_aliased_arguments_then_distinct)."""
    shared = lambda: (lambda s: (T(3), s, s))([])  # noqa: E731
    distinct = lambda: (T(3), [], [])  # noqa: E731
    check(append_to_both, distinct, shared, distinct, stable=False)


# -- mutable state read by the translation -------------------------------------------------------------------
def mutable_default(x, acc=[]):  # noqa: B006 - the classic shared default, on purpose
    acc.append(1)
    return x * len(acc)


def test_mutable_default_grows_each_call(compile_all):
    """The shared default list grows on every call; the result depends on its length."""
    mutable_default.__defaults__[0].clear()
    expected = [mutable_default(T(3)).numpy() for _ in range(3)]
    mutable_default.__defaults__[0].clear()
    fast = sot.symbolic_translate(mutable_default)
    for index in range(3):
        assert (fast(T(3)).numpy() == expected[index]).all(), index
    assert len(mutable_default.__defaults__[0]) == 3


def read_global_dict(x):
    act = {"relu": F.relu, "tanh": paddle.tanh}[GLOBAL_CONFIG["act"]]
    return act(x) * GLOBAL_CONFIG["scale"]


def test_global_dict_changed_in_place(compile_all):
    fast = sot.symbolic_translate(read_global_dict)
    try:
        for scale, act in ((2.0, "relu"), (3.0, "relu"), (3.0, "tanh"), (2.0, "relu")):
            GLOBAL_CONFIG["scale"], GLOBAL_CONFIG["act"] = scale, act
            x = T(3)
            assert_observed_same(observe(fast(x)), observe(read_global_dict(x)), f"{scale} {act}")
    finally:
        GLOBAL_CONFIG.update(scale=2.0, act="relu")


def read_global_list_flag(x):
    return x + 1 if GLOBAL_FLAGS[0] else x - 1


def test_global_list_changed_in_place(compile_all):
    fast = sot.symbolic_translate(read_global_list_flag)
    try:
        for flag in (True, False, True):
            GLOBAL_FLAGS[0] = flag
            x = T(3)
            assert_observed_same(observe(fast(x)), observe(read_global_list_flag(x)), f"flag={flag}")
    finally:
        GLOBAL_FLAGS[0] = True


def read_global_tensor(x):
    return x @ GLOBAL_W


def test_global_tensor_changed_in_place(compile_all):
    """``GLOBAL_W.set_value(...)`` between calls: the translated code must read the current values."""
    fast = sot.symbolic_translate(read_global_tensor)
    saved = GLOBAL_W.numpy().copy()
    try:
        for seed in (5, 6, 7):
            GLOBAL_W.set_value(T(4, 4, seed=seed).numpy())
            x = T(2, 4)
            assert_observed_same(observe(fast(x)), observe(read_global_tensor(x)), f"seed={seed}")
    finally:
        GLOBAL_W.set_value(saved)


def test_closure_list_changed_in_place(compile_all):
    options = {"k": 2}

    def fn(x):
        return x * options["k"]

    fast = sot.symbolic_translate(fn)
    for k in (2, 5, 2):
        options["k"] = k
        x = T(3)
        assert_observed_same(observe(fast(x)), observe(fn(x)), f"k={k}")


def test_object_attribute_changed_in_place(compile_all):
    class Cfg:
        pass

    cfg = Cfg()
    cfg.depth = 2

    def fn(x):
        for _ in range(cfg.depth):
            x = x * 2
        return x

    fast = sot.symbolic_translate(fn)
    for depth in (2, 3, 0, 2):
        cfg.depth = depth
        x = T(3)
        assert_observed_same(observe(fast(x)), observe(fn(x)), f"depth={depth}")


def test_argument_list_contents_change(compile_all):
    def fn(items):
        out = []
        for item in items:
            out.append(item * 2 if isinstance(item, paddle.Tensor) else item)
        return out

    check(fn, lambda: ([T(2), 3],), lambda: ([3, T(2)],), lambda: ([T(2, dtype="int64"), 3],),
          lambda: ([T(3), "s"],), stable=False)


def test_nested_container_argument_change(compile_all):
    def fn(batch):
        return batch["x"] * batch["meta"]["scale"] + len(batch["meta"]["names"])

    check(fn, lambda: ({"x": T(3), "meta": {"scale": 2, "names": ["a"]}},),
          lambda: ({"x": T(3), "meta": {"scale": 3, "names": ["a"]}},),
          lambda: ({"x": T(3), "meta": {"scale": 2, "names": ["a", "b"]}},), stable=False)


def test_bool_and_int_arguments_are_not_confused(compile_all):
    def fn(x, flag):
        return x * flag, type(flag).__name__

    check(fn, lambda: (T(3), True), lambda: (T(3), 1), lambda: (T(3), 1.0), lambda: (T(3), False),
          lambda: (T(3), 0), stable=False)


def test_none_and_tensor_for_the_same_argument(compile_all):
    def fn(x, mask=None):
        if mask is not None:
            x = x * mask
        return x + 1

    check(fn, lambda: (T(3), None), lambda: (T(3), T(3, seed=1)), lambda: (T(3),), stable=False)


def test_training_flag_of_grad_mode(compile_all):
    def fn(x):
        return x * 2

    fast = sot.symbolic_translate(fn)
    x = T(3, stop_gradient=False)
    with paddle.no_grad():
        assert fast(x).stop_gradient == fn(x).stop_gradient
    assert fast(x).stop_gradient == fn(x).stop_gradient


def test_slice_bound_from_a_dynamic_dimension(compile_all):
    """Unexpected fallback: once the batch dimension is dynamic (second batch size), ``x[:x.shape[0] // 2]``
    falls back ("slice bounds that are not Python constants are not supported yet"), and every later batch size
    runs eagerly; the bound should become a symbolic slice in the graph."""

    def fn(x):
        half = x.shape[0] // 2
        return x[:half] * 2, x[half:]

    check(fn, *[(lambda b=b: (T(b, 3),)) for b in (2, 3, 4, 5)], stable=False)


def sliced_by_tensor_bounds(x, n):
    return x[:, :n] * 2, x[n:] + 1, x[-n:, 1:], x[::2, n - 1:]


def test_slice_bounds_that_are_one_element_integer_tensors(compile_all):
    """``x[:, :n]`` with ``n`` a tensor (eager reads its value: ``ids[:, :mask.sum(1).max()]``) fell back for
    good ("slice bounds that are not Python constants"); the program slices by the tensor, negative, zero and
    out-of-range bounds clamped as eager clamps them: one translation for every value."""
    makers = [(lambda n=n: (T(5, 4), paddle.to_tensor(n))) for n in (2, -1, 9, 0, -9, 3)]
    stats = check(sliced_by_tensor_bounds, *makers)
    assert stats.translate_count == 1, stats


def list_sliced_by_a_tensor(x, n):
    weights = [1.0, 2.0, 3.0, 4.0]
    return x * sum(weights[:n])


def test_a_list_sliced_by_a_tensor_bound_breaks_there(compile_all):
    """A tensor bound slicing a list needs the tensor's value as a Python int: the graph breaks there."""
    check(list_sliced_by_a_tensor, *[(lambda n=n: (T(3), paddle.to_tensor(n))) for n in (2, 3)], breaks=None,
          stable=False)

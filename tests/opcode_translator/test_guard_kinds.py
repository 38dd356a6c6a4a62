"""Guard kinds not covered elsewhere: dynamic dimensions, symbolic ints, weak references, grad mode."""
from __future__ import annotations

import gc
import weakref

import numpy as np
import paddle

import sot
from conftest import assert_same


def _t(*shape, seed=0):
    return paddle.to_tensor(np.random.RandomState(seed).randn(*shape).astype("float32"))


def test_batch_dimension_becomes_dynamic(compile_all):
    lin = paddle.nn.Linear(8, 4)

    def f(x):
        return paddle.nn.functional.relu(lin(x)) * 2 + 1

    fast = sot.symbolic_translate(f)
    for batch in (3, 5, 7):
        x = _t(batch, 8, seed=batch)
        assert_same(fast(x), f(x))
    stats = sot.stats()
    # 3 specialised, 5 makes the batch dimension dynamic, 7 hits that entry
    assert stats.translate_count == 2 and stats.cache_hits == 1, stats


def test_zero_and_one_stay_specialised(compile_all):
    def f(x):
        return x * 2

    fast = sot.symbolic_translate(f)
    for batch in (3, 5, 1, 7):
        x = _t(batch, 2)
        assert_same(fast(x), f(x))
    assert sot.stats().translate_count == 3  # 3, the dynamic entry, and 1 on its own


def test_symbolic_int_in_shape_arithmetic(compile_all):
    def f(x):
        b, t, c = x.shape
        return (x * 2).reshape([b * t, c]).sum(axis=0)

    fast = sot.symbolic_translate(f)
    for length in (4, 6, 8, 10):
        x = _t(2, length, 3, seed=length)
        assert_same(fast(x), f(x))
    assert sot.stats().translate_count == 2


def test_dynamic_dimension_used_as_python_value_is_pinned(compile_all):
    def f(x):
        n = x.shape[0]
        if n > 4:  # a Python decision on the dimension: guarded
            return x * 2
        return x - 1

    fast = sot.symbolic_translate(f)
    for batch in (3, 5, 6, 2):
        x = _t(batch, 2)
        assert_same(fast(x), f(x))
    assert sot.stats().fallbacks == 0


def test_dynamic_shape_can_be_switched_off(compile_all):
    def f(x):
        return x * 2

    with sot.config.patch(dynamic_shape=False):
        fast = sot.symbolic_translate(f)
        for batch in (3, 5, 7):
            assert_same(fast(_t(batch, 2)), f(_t(batch, 2)))
    assert sot.stats().translate_count == 3


def test_guards_hold_layers_weakly(compile_all):
    class Net(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.fc = paddle.nn.Linear(2, 2)

        def forward(self, x):
            return self.fc(x) + 1

    net = Net()
    fast = sot.symbolic_translate(net)
    fast(_t(3, 2))
    ref = weakref.ref(net.fc)
    del fast, net
    gc.collect()
    sot.reset()  # compiled programs hold built-in layers they call; a reset releases them
    gc.collect()
    assert ref() is None


def test_grad_mode_change_misses(compile_all):
    w = _t(2, 2)
    w.stop_gradient = False

    def f(x):
        return (x @ w).sum()

    fast = sot.symbolic_translate(f)
    x = _t(3, 2)
    with paddle.no_grad():
        assert fast(x).stop_gradient
    out = fast(x)
    assert not out.stop_gradient
    out.backward()
    assert w.grad is not None
    assert sot.stats().translate_count == 2


def _divide_by(x: paddle.Tensor, s: float) -> paddle.Tensor:
    return paddle.divide(x, paddle.full([1], s))


def test_the_sign_of_a_float_zero_is_guarded():
    """-0.0 == 0.0, but ``x / s`` is +inf for one and -inf for the other: each gets its own entry.

    (Compiled, a -0.0 fill value would come out as 0.0: see tests/symbolic/test_zero_sign.py.)"""
    x = paddle.to_tensor([1.0, -2.0])
    translated = sot.symbolic_translate(_divide_by)
    for s in (0.0, -0.0, 0.0, -0.0):
        np.testing.assert_array_equal(translated(x, s).numpy(), _divide_by(x, s).numpy())
    assert sot.stats().translate_count == 2


def test_programs_differing_only_in_the_sign_of_a_zero_constant_are_not_shared():
    from sot.symbolic.sir import MetaInfo, Statement, StatementIR, Symbol

    a, b = Symbol("var_0"), Symbol("var_1")

    def sir(zero: float) -> StatementIR:
        return StatementIR("t", [a], [Statement("api", "scale", paddle.scale, (a, zero), {}, b)], [b],
                           {a: MetaInfo((2,), paddle.float32, True), b: MetaInfo((2,), paddle.float32, True)})

    assert sir(0.0).structural_key() != sir(-0.0).structural_key()
    assert sir(0.0).structural_key() == sir(0.0).structural_key()


def test_default_dtype_change_misses(compile_all):
    """``paddle.zeros([3])`` makes a tensor of the default dtype: a program built under float32 must not serve
    a call after ``paddle.set_default_dtype("float64")`` (it gave float32)."""
    def f(x):
        return x + paddle.zeros([3]) + paddle.full([3], 0.5)

    fast = sot.symbolic_translate(f)
    x = _t(2, 3)
    assert fast(x).dtype == f(x).dtype == paddle.float32
    try:
        paddle.set_default_dtype("float64")
        want, got = f(x), fast(x)
        assert got.dtype == want.dtype == paddle.float64
        assert fast(x).dtype == paddle.float64
    finally:
        paddle.set_default_dtype("float32")
    assert fast(x).dtype == paddle.float32
    stats = sot.stats()
    assert stats.translate_count == 2 and stats.cache_hits == 2, stats

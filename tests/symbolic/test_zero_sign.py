"""Compiled programs give eager's float zeros bit for bit, the sign of -0.0 included (fuzz seed 1074).

Paddle's IR context keeps one attribute per value and -0.0 == 0.0: whichever sign a process puts into an
attribute first stands for both afterwards (see sot/symbolic/zero_sign.py). Every test compiles its graphs
(``min_graph_size=0``) and compares the bits of the results with eager's."""
from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import paddle
import pytest

import sot
from sot.symbolic.compile import _compiled
from sot.symbolic.zero_sign import _zero_signs


def bits(value):
    if isinstance(value, (tuple, list)):
        return [bits(v) for v in value]
    array = value.numpy()
    return str(value.dtype), array.shape, array.tobytes()


def negative_zeros() -> paddle.Tensor:
    return paddle.to_tensor([-0.0, 0.0, 1.0, -2.0])


def s_fill(x, s):
    return paddle.full([4], s) + x * 0, paddle.full_like(x, s), x.clone().fill_(s), paddle.zeros([4]).fill_(s)


def s_scalars(x, s):
    return paddle.ones([4]) * s, s * x, x / paddle.full([1], s), paddle.scale(x, scale=s), x.clip(min=s, max=s)


def s_to_tensor(x, s):
    return paddle.to_tensor(s) + x[:1] * 0, paddle.to_tensor([s, 1.0]), paddle.to_tensor([0.0, s, -0.0])


def s_setitem(x, s):
    y = x * 1
    y[1] = s
    return y


ZEROS = np.array([0.0, -0.0, 1.0], dtype="float32")


def s_array_constant(x, s):
    return paddle.assign(ZEROS) * s + x[:3] * 0, paddle.assign(ZEROS)


@pytest.mark.parametrize("fn", [s_fill, s_scalars, s_to_tensor, s_setitem, s_array_constant])
def test_zero_constants_of_either_sign_keep_their_sign(fn) -> None:
    """Called with 0.0 and -0.0 alternately (each gets its own entry: the sign is guarded), the constant goes
    into the graph; every result has eager's bits."""
    with sot.config.patch(min_graph_size=0):
        translated = sot.symbolic_translate(fn)
        for s in (0.0, -0.0, 0.0, -0.0):
            assert bits(translated(negative_zeros(), s)) == bits(fn(negative_zeros(), s)), s
    assert sot.stats().compiled_graphs >= 1 and sot.stats().fallbacks == sot.stats().graph_breaks == 0


def literal_negative_zero(x):
    return x * -0.0, paddle.full([2], -0.0), x - 0.0, x / -math.inf


def literal_zero(x):
    return x * 0.0, paddle.full([2], 0.0), x + 0.0, x / math.inf


def test_a_graph_with_a_negative_zero_constant_runs_its_statements_eagerly_and_positive_zeros_compile() -> None:
    """The -0.0 one cannot be an attribute of a program: the graph is replayed eagerly; translated after it,
    the graph with 0.0 constants compiles, and its zeros stay positive."""
    with sot.config.patch(min_graph_size=0):
        for fn in (literal_negative_zero, literal_zero):
            assert bits(sot.symbolic_translate(fn)(negative_zeros())) == bits(fn(negative_zeros()))
    choices = sorted(str(program.choice) for program in _compiled.values())
    assert choices == ["None", "eager"]  # (None: compiled, the cost model never measures at size 0)


def divisions_and_subtractions(x, n):
    return x / 3.0, x / 7, x / n, x.__truediv__(0.3), x - 0, x - 0.0, x.__sub__(-0.0), 2.0 - x, x - 1.5


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int64"])
def test_a_tensor_divided_or_decreased_by_a_number_has_eager_bits(dtype: str) -> None:
    """Paddle's static ``x / 3.0`` multiplies by the reciprocal (an ulp off in a third of the results) and
    ``x - 0`` adds -0.0 (which stands for 0.0): compiled programs divide and subtract as eager does."""
    values = np.concatenate([np.random.RandomState(0).randn(200) * 5, [-0.0, 0.0]])
    x = paddle.to_tensor(values.astype(dtype))
    with sot.config.patch(min_graph_size=0):
        translated = sot.symbolic_translate(divisions_and_subtractions)
        for n in (3, -1.0, 0.25):
            assert bits(translated(x, n)) == bits(divisions_and_subtractions(x, n)), n


def test_zero_signs_of_constants() -> None:
    assert _zero_signs(-0.0) == {-1.0} and _zero_signs(0.0) == {1.0} and _zero_signs(1.0) == set()
    assert _zero_signs(np.float32(-0.0)) == {-1.0} and _zero_signs(complex(0.0, -0.0)) == {1.0, -1.0}
    assert _zero_signs(np.array([[1.0, -0.0], [2.0, 0.0]])) == {1.0, -1.0}
    assert _zero_signs(np.array([1, 0])) == set() and _zero_signs(False) == set() and _zero_signs("0") == set()
    assert _zero_signs(0) == _zero_signs(np.int64(0)) == {1.0}  # (``x * 0`` scales by the attribute 0.0)


def test_when_negative_zero_came_first_positive_zero_constants_are_kept() -> None:
    """Another part of the process built a program with a -0.0 attribute before sot's first one: then every
    0.0 would come out as -0.0, so graphs holding a 0.0 constant run their statements eagerly."""
    script = textwrap.dedent("""
        import numpy as np, paddle, sot
        paddle.enable_static()
        with paddle.static.program_guard(paddle.static.Program()):
            paddle.full([1], -0.0, dtype="float64")
            paddle.scale(paddle.static.data("x", [1], "float32"), bias=-0.0)
            paddle.assign(np.array([-0.0], dtype="float32"))
        paddle.disable_static()

        def f(x):
            return x / paddle.full([1], 0.0), x + paddle.to_tensor([0.0, 0.0])

        def g(x):
            return x * 0, x.sum(axis=0)

        x = paddle.to_tensor([1.0, -2.0])
        for fn in (f, g):
            with sot.config.patch(min_graph_size=0):
                got = sot.symbolic_translate(fn)(x)
            expected = fn(x)
            assert all(a.numpy().tobytes() == b.numpy().tobytes() for a, b in zip(got, expected)), (got, expected)
        print("ok", sot.stats().compiled_graphs)
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd(), *sys.path]), GLOG_minloglevel="2")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0 and "ok 2" in done.stdout, done.stderr[-3000:]

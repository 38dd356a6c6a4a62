"""Guards and the translation cache: what makes a second call reuse a translation, and what does not."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import types
import warnings

import numpy as np
import paddle
import paddle.nn.functional as F
import pytest

import sot

from conftest import assert_same

ACTIVATION = F.relu
SCALE = 2.0
WEIGHT = paddle.ones([4, 2])


def _t(*shape: int, dtype: str = "float32", seed: int = 0, stop_gradient: bool = True) -> paddle.Tensor:
    rng = np.random.default_rng(seed)
    value = paddle.to_tensor(rng.standard_normal(shape).astype(dtype))
    value.stop_gradient = stop_gradient
    return value


def body(x, y):
    z = x * 2 + y
    return F.relu(z) - 1


def body_twin(a, b):
    c = a * 2 + b
    return F.relu(c) - 1


def scaled(x, n):
    return (x + 1) * n


def uses_global_activation(x):
    return ACTIVATION(x * 2) + 1


def uses_global_scalar(x):
    return (x - 1) * SCALE


def uses_global_tensor(x):
    return paddle.matmul(x, WEIGHT) + 1


def _snapshot():
    return sot.stats()


def test_second_call_hits_cache(compile_all):
    fast = sot.symbolic_translate(body)
    x, y = _t(3, 4), _t(3, 4, seed=1)
    assert_same(fast(x, y), body(x, y))
    # new tensor objects with the same meta and other values
    x2, y2 = _t(3, 4, seed=5), _t(3, 4, seed=6)
    assert_same(fast(x2, y2), body(x2, y2))
    stats = sot.stats()
    assert stats.translate_count == 1, stats
    assert stats.cache_hits >= 1, stats
    assert stats.compiled_graphs >= 1, stats


@pytest.mark.parametrize("change", ["shape", "dtype", "stop_gradient", "rank"])
def test_tensor_meta_change_retranslates(change, compile_all):
    fast = sot.symbolic_translate(body)
    first = (_t(3, 4), _t(3, 4, seed=1))
    if change == "shape":
        second = (_t(5, 4), _t(5, 4, seed=1))
    elif change == "rank":
        second = (_t(2, 3, 4), _t(2, 3, 4, seed=1))
    elif change == "dtype":
        second = (_t(3, 4, dtype="float64"), _t(3, 4, dtype="float64", seed=1))
    else:
        second = (_t(3, 4, stop_gradient=False), _t(3, 4, seed=1))
    assert_same(fast(*first), body(*first))
    assert sot.stats().translate_count == 1
    assert_same(fast(*second), body(*second))
    assert sot.stats().translate_count == 2
    hits = sot.stats().cache_hits
    # both entries now hit
    assert_same(fast(*first), body(*first))
    assert_same(fast(*second), body(*second))
    stats = sot.stats()
    assert stats.translate_count == 2, stats
    assert stats.cache_hits == hits + 2, stats


def test_python_scalar_value_change_retranslates(compile_all):
    fast = sot.symbolic_translate(scaled)
    x = _t(3, 4)
    assert_same(fast(x, 3), scaled(x, 3))
    assert_same(fast(x, 4), scaled(x, 4))
    assert sot.stats().translate_count == 2
    hits = sot.stats().cache_hits
    assert_same(fast(x, 3), scaled(x, 3))
    assert_same(fast(x, 4), scaled(x, 4))
    assert sot.stats().translate_count == 2
    assert sot.stats().cache_hits == hits + 2


def test_python_scalar_type_change_retranslates(compile_all):
    fast = sot.symbolic_translate(scaled)
    xi = paddle.to_tensor([[1, 2], [3, 4]], dtype="int64")
    assert_same(fast(xi, 2), scaled(xi, 2))
    assert_same(fast(xi, 2.0), scaled(xi, 2.0))  # int vs float: different result dtype
    assert_same(fast(xi, True), scaled(xi, True))
    assert sot.stats().translate_count == 3


def test_monkeypatched_global_function_retranslates(compile_all, monkeypatch):
    fast = sot.symbolic_translate(uses_global_activation)
    x = _t(3, 4)
    assert_same(fast(x), F.relu(x * 2) + 1)
    assert_same(fast(x), F.relu(x * 2) + 1)
    assert sot.stats().translate_count == 1
    monkeypatch.setattr(sys.modules[__name__], "ACTIVATION", F.sigmoid)
    assert_same(fast(x), F.sigmoid(x * 2) + 1)
    assert sot.stats().translate_count == 2
    monkeypatch.setattr(sys.modules[__name__], "ACTIVATION", F.relu)
    assert_same(fast(x), F.relu(x * 2) + 1)
    assert sot.stats().translate_count == 2  # the first entry is still valid


def test_global_scalar_change_retranslates(compile_all, monkeypatch):
    fast = sot.symbolic_translate(uses_global_scalar)
    x = _t(3)
    assert_same(fast(x), (x - 1) * 2.0)
    monkeypatch.setattr(sys.modules[__name__], "SCALE", 5.0)
    assert_same(fast(x), (x - 1) * 5.0)
    assert sot.stats().translate_count == 2


def test_global_tensor_rebound_is_read_fresh(compile_all, monkeypatch):
    fast = sot.symbolic_translate(uses_global_tensor)
    x = _t(3, 4)
    assert_same(fast(x), paddle.matmul(x, paddle.ones([4, 2])) + 1)
    new_weight = paddle.full([4, 2], 3.0)
    monkeypatch.setattr(sys.modules[__name__], "WEIGHT", new_weight)
    # same meta: no retranslation needed, but the new values must be used
    assert_same(fast(x), paddle.matmul(x, new_weight) + 1)
    assert sot.stats().translate_count == 1


def test_closure_cell_change(compile_all):
    def make():
        factor = 2.0
        bias = paddle.ones([3])

        def inner(x):
            return x * factor + bias

        def update(new_factor, new_bias):
            nonlocal factor, bias
            factor, bias = new_factor, new_bias

        return inner, update

    inner, update = make()
    fast = sot.symbolic_translate(inner)
    x = _t(3)
    assert_same(fast(x), x * 2.0 + 1)
    update(2.0, paddle.full([3], 4.0))  # new tensor of the same meta: read fresh
    assert_same(fast(x), x * 2.0 + 4)
    update(3.0, paddle.full([3], 4.0))  # new Python scalar: retranslate
    assert_same(fast(x), x * 3.0 + 4)
    assert sot.stats().translate_count == 2


def _discard_then_use(x, cfg):
    cfg.a  # read and discarded: its variable dies right away
    cfg.a
    return x * cfg.scale


def _branch_then_use(x, cfg):
    if cfg.debug:
        x = x + 1
    return x * cfg.scale


@pytest.mark.parametrize("fn", [_discard_then_use, _branch_then_use])
def test_attribute_read_after_a_discarded_one_is_guarded(fn, compile_all):
    # Repeated because a missing guard here depends on memory reuse between simulated variables.
    x = paddle.ones([2])
    for _ in range(30):
        sot.reset()
        cfg = types.SimpleNamespace(scale=0.5, a=1, debug=False)
        fast = sot.symbolic_translate(fn)
        assert_same(fast(x, cfg), fn(x, cfg))
        cfg.scale = 2.0
        assert_same(fast(x, cfg), fn(x, cfg))
        assert sot.stats().translate_count == 2


def _star(*ts):
    return paddle.add_n(list(ts)) * 2


def _from_containers(xs, cfg):
    return xs[0] * cfg["scale"] + xs[-1]


def test_container_argument_changes(compile_all):
    a, b, c = _t(3), _t(3, seed=1), _t(3, seed=2)
    fast = sot.symbolic_translate(_star)
    assert_same(fast(a, b), _star(a, b))
    assert_same(fast(a, b, c), _star(a, b, c))  # *args length changes
    assert sot.stats().translate_count == 2
    fast2 = sot.symbolic_translate(_from_containers)
    xs = [a, b]
    cfg = {"scale": 2.0}
    assert_same(fast2(xs, cfg), _from_containers(xs, cfg))
    xs.append(c)  # the list argument grows: xs[-1] is another tensor now
    assert_same(fast2(xs, cfg), _from_containers(xs, cfg))
    cfg["scale"] = -1.0  # a value inside a dict argument changes
    assert_same(fast2(xs, cfg), _from_containers(xs, cfg))
    xs[0] = paddle.full([3], 7.0)  # same meta, new data: read fresh
    assert_same(fast2(xs, cfg), _from_containers(xs, cfg))


def test_reset_zeroes_stats_and_forces_retranslation(compile_all):
    fast = sot.symbolic_translate(body)
    x, y = _t(3, 4), _t(3, 4, seed=1)
    fast(x, y)
    fast(x, y)
    assert sot.stats().translate_count == 1 and sot.stats().cache_hits >= 1
    sot.reset()
    assert sot.stats() == sot.Stats()
    for field in ("translate_count", "cache_hits", "graph_breaks", "fallbacks", "compiled_graphs"):
        assert getattr(sot.stats(), field) == 0
    assert_same(fast(x, y), body(x, y))
    stats = sot.stats()
    assert stats.translate_count == 1 and stats.cache_hits == 0 and stats.compiled_graphs == 1, stats


def test_identical_sir_reuses_compiled_program(compile_all):
    x, y = _t(3, 4), _t(3, 4, seed=1)
    assert_same(sot.symbolic_translate(body)(x, y), body(x, y))
    assert sot.stats().compiled_graphs == 1
    assert_same(sot.symbolic_translate(body_twin)(x, y), body_twin(x, y))
    stats = sot.stats()
    assert stats.translate_count == 2, stats
    assert stats.compiled_graphs == 1, stats


def test_different_sir_compiles_new_program(compile_all):
    def other(x, y):
        z = x * 3 + y
        return F.relu(z) - 1

    x, y = _t(3, 4), _t(3, 4, seed=1)
    sot.symbolic_translate(body)(x, y)
    assert_same(sot.symbolic_translate(other)(x, y), other(x, y))
    assert sot.stats().compiled_graphs == 2


def test_cache_limit_warns_once_and_runs_eagerly(compile_all):
    def limited(x):
        return x * 2 + 1

    shapes = [[2], [3], [4], [5], [6], [2], [7]]
    with sot.config.patch(cache_limit=2, dynamic_shape=False):
        fast = sot.symbolic_translate(limited)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for shape in shapes:
                x = paddle.rand(shape)
                assert_same(fast(x), limited(x))
    relevant = [w for w in caught if issubclass(w.category, RuntimeWarning) and "limited" in str(w.message)]
    assert len(relevant) == 1, [str(w.message) for w in caught]
    assert sot.stats().translate_count == 2, sot.stats()
    assert sot.stats().compiled_graphs <= 2, sot.stats()


def test_log_level_1_names_failing_guard(compile_all, capsys):
    fast = sot.symbolic_translate(body)
    fast(_t(3, 4), _t(3, 4, seed=1))
    capsys.readouterr()
    sot.config.log_level = 1
    fast(_t(5, 4), _t(5, 4, seed=1))
    err = capsys.readouterr().err
    assert "x.shape" in err, err
    assert "body" in err, err


def test_log_level_0_is_silent(compile_all, capsys):
    fast = sot.symbolic_translate(body)
    fast(_t(3, 4), _t(3, 4, seed=1))
    fast(_t(5, 4), _t(5, 4, seed=1))
    captured = capsys.readouterr()
    assert "[sot]" not in captured.err and "[sot]" not in captured.out


def test_log_level_2_dumps_sir(compile_all, capsys):
    sot.config.log_level = 2
    sot.symbolic_translate(body)(_t(3, 4), _t(3, 4, seed=1))
    err = capsys.readouterr().err
    assert "SIR" in err and "relu" in err, err


def test_env_log_level_2_dumps_sir(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent("""
        import paddle
        import paddle.nn.functional as F
        import sot

        def model(x, w):
            h = paddle.matmul(x, w)
            return F.relu(h) * 2

        assert sot.config.log_level == 2
        fast = sot.symbolic_translate(model)
        out = fast(paddle.ones([2, 3]), paddle.ones([3, 4]))
        print("RESULT", float(out.sum()))
    """))
    env = dict(os.environ, SOT_LOG_LEVEL="2", SOT_MIN_GRAPH_SIZE="0", GLOG_minloglevel="2")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                          cwd=str(tmp_path), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "RESULT 48.0" in proc.stdout
    assert "SIR" in proc.stderr, proc.stderr
    assert "matmul" in proc.stderr and "relu" in proc.stderr, proc.stderr

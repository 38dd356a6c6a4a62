"""psdb helpers: the debugger stop during simulation, and the in_sot / assert_true / fallback markers."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import paddle

import sot

from conftest import assert_same


def test_breakpoint_shows_the_simulated_locals(tmp_path):
    script = tmp_path / "stop.py"
    script.write_text(textwrap.dedent("""
        import paddle, sot
        def f(x):
            y = x * 2
            sot.psdb.breakpoint()
            return y + 1
        with sot.config.patch(min_graph_size=0):
            print("result", sot.symbolic_translate(f)(paddle.ones([2])).numpy().tolist())
    """))
    commands = "p sorted(simulated_locals)\np simulated_locals['y']\nc\n"
    env = dict(os.environ, GLOG_minloglevel="2")
    done = subprocess.run([sys.executable, str(script)], input=commands, capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert "['x', 'y']" in done.stdout  # the simulated locals, seen from the debugger
    assert "TensorVariable" in done.stdout  # y is a symbolic tensor during simulation
    assert "result [3.0, 3.0]" in done.stdout
    assert "stop.py:5" in done.stderr  # where the simulation stopped


def test_in_sot_and_assert_true(compile_all):
    def f(x):
        sot.psdb.assert_true(x.shape[0] == 2)
        return x + 1 if sot.psdb.in_sot() else x - 1

    x = paddle.ones([2])
    assert_same(sot.symbolic_translate(f)(x), x + 1)
    assert_same(f(x), x - 1)


def test_fallback_recursive_runs_the_call_tree_eagerly(compile_all):
    """``fallback(recursive=True)``: the frame and every function it calls run eagerly (none simulated);
    without it, only the frame does and its callees are translated. Called in a function the simulation
    inlines, it is that function's frame that runs eagerly: its caller breaks the graph at the call."""
    seen: list[tuple[str, bool]] = []

    def leaf(x):
        seen.append(("leaf", sot.psdb.in_sot()))
        return x + 1

    def recursive(x):
        sot.psdb.fallback(recursive=True)
        return leaf(x) * 2

    def positional(x):
        sot.psdb.fallback(True)
        return leaf(x) * 2

    def flat(x):
        sot.psdb.fallback()
        return leaf(x) * 2

    def other(x):
        seen.append(("other", sot.psdb.in_sot()))
        return x - 1

    def outer(x):
        return recursive(other(x) * 3) + other(x)

    x = paddle.ones([2])
    for fn, expected in [(recursive, [("leaf", False)]), (positional, [("leaf", False)]),
                         (flat, [("leaf", True)])]:
        sot.reset()
        for _ in range(2):  # translated, then from the cache
            seen.clear()
            assert_same(sot.symbolic_translate(fn)(x), (x + 1) * 2)
            assert seen == expected, fn.__name__
            assert sot.stats().fallbacks == 1
    sot.reset()
    for _ in range(2):
        seen.clear()
        assert_same(sot.symbolic_translate(outer)(x), ((x - 1) * 3 + 1) * 2 + x - 1)
        assert seen == [("other", True), ("leaf", False), ("other", True)]
        # only ``recursive``'s frame fell back; ``outer`` broke its graph at the call
        assert (sot.stats().fallbacks, sot.stats().graph_breaks) == (1, 1)


def test_checks_accept_a_layer_instance(compile_all):
    """``check_no_breakgraph(model)`` / ``check_no_fallback(model)`` on a Layer instance (or its translation)
    check its ``forward``, what translating the layer translates (they raised TypeError)."""
    import pytest

    class Breaking(paddle.nn.Layer):
        def forward(self, x):
            y = x + 1
            sot.psdb.breakgraph()
            return y * 2

    class FallingBack(paddle.nn.Layer):
        def forward(self, x):
            sot.psdb.fallback()
            return x * 2

    x = paddle.ones([2])
    breaking = Breaking()
    assert sot.psdb.check_no_breakgraph(breaking) is breaking
    with pytest.raises(sot.BreakGraphCheckError, match="psdb.breakgraph"):
        sot.symbolic_translate(breaking)(x)
    falling_back = sot.symbolic_translate(FallingBack())
    assert sot.psdb.check_no_fallback(falling_back) is falling_back
    with pytest.raises(sot.UnsupportedError, match="psdb.fallback"):
        falling_back(x)


def test_fallback_recursive_from_an_argument_is_guarded(compile_all):
    """``fallback(recursive=flag)``: each value of ``flag`` gets its own cache entry (hook-free or not)."""
    seen: list[bool] = []

    def leaf(x):
        seen.append(sot.psdb.in_sot())
        return x + 1

    def fn(x, flag):
        sot.psdb.fallback(recursive=flag)
        return leaf(x)

    fast, x = sot.symbolic_translate(fn), paddle.ones([2])
    for flag in (True, False, True, False):
        assert_same(fast(x, flag), x + 1)
    assert seen == [False, True, False, True]
    assert sot.stats().fallbacks == 2

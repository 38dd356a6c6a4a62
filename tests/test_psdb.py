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

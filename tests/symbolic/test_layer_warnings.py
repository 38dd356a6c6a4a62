"""A built-in layer's own warnings (BatchNorm2D's "When training, we now always track global mean and
variance") are issued after each compiled run, as its eager forward issues them at every call
(`build_warnings.LayerWarning`): as one compiled statement the forward ran only at the build, where sot drops
what static mode warns, and the warning was lost."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings
from typing import Any

import paddle
import paddle.nn as nn

import sot


def _net() -> nn.Layer:
    paddle.seed(0)
    return nn.Sequential(nn.Conv2D(3, 4, 3), nn.BatchNorm2D(4), nn.ReLU(), nn.Conv2D(4, 4, 3), nn.BatchNorm2D(4))


def _warnings_of(model: Any, calls: int = 3) -> list[tuple[str, str, int]]:
    x = paddle.randn([2, 3, 8, 8])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(calls):
            model(x)
    return [(str(w.message), w.filename, w.lineno) for w in caught]


def test_each_compiled_call_issues_the_layers_warnings(compile_all: Any) -> None:
    expected = _warnings_of(_net())
    actual = _warnings_of(sot.symbolic_translate(_net()))
    assert len(expected) == 6 and actual == expected
    assert sot.stats().compiled_graphs == 1 and sot.stats().fallbacks == 0


def test_a_layer_in_eval_mode_issues_none(compile_all: Any) -> None:
    net = _net()
    net.eval()
    assert _warnings_of(sot.symbolic_translate(net)) == _warnings_of(net) == []


def test_the_default_filter_shows_it_once_per_process_as_eagerly() -> None:
    """(A child process: the default filter's registry is per process.)"""
    script = textwrap.dedent("""
        import paddle, sot
        net = paddle.nn.Sequential(paddle.nn.Conv2D(3, 4, 3), paddle.nn.BatchNorm2D(4))
        with sot.config.patch(min_graph_size=0):
            fast = sot.symbolic_translate(net)
            for _ in range(3):
                fast(paddle.randn([2, 3, 8, 8]))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env={"GLOG_minloglevel": "2", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr.count("When training, we now always track global mean and variance") == 1

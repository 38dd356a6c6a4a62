"""When Paddle's static meta inference refuses a call, sot asks eager whether it fails too, on stand-in
tensors of the same metas (`function_graph._fails_eagerly`): a user error then, a fallback otherwise. The
stand-ins of a dividing call are ones: an integer kernel dividing by zero kills the process (SIGFPE)."""
from __future__ import annotations

import operator
import subprocess
import sys
from pathlib import Path

import paddle
import pytest

from sot.opcode_translator.executor.function_graph import _divides, _fails_eagerly
from sot.symbolic.sir import MetaInfo

ROOT = Path(__file__).resolve().parents[3]

_PROBE = """
import operator, paddle
from sot.opcode_translator.executor.function_graph import _divides, _fails_eagerly
from sot.symbolic.sir import MetaInfo
meta = MetaInfo((3,), paddle.int32, True)
for call in (paddle.remainder, paddle.floor_divide, operator.mod, operator.floordiv):
    print(_fails_eagerly(call, (meta, meta), {}, _divides(call)))
"""


def test_integer_division_is_probed_without_dividing_by_zero() -> None:
    """(In a child process: without the ones, the probe's SIGFPE would kill the test run.)"""
    done = subprocess.run([sys.executable, "-c", _PROBE], cwd=str(ROOT), capture_output=True, text=True,
                          timeout=300, env={"PYTHONPATH": str(ROOT), "GLOG_minloglevel": "2",
                                            "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["False"] * 4


@pytest.mark.parametrize("call", [paddle.remainder, paddle.floor_divide, operator.mod, operator.floordiv,
                                  operator.truediv, "__rmod__", "floor_divide"])
def test_dividing_calls_are_known(call: object) -> None:
    assert _divides(call)


def test_a_shape_mismatch_still_fails_eagerly_with_ones() -> None:
    left, right = MetaInfo((3,), paddle.int64, True), MetaInfo((4,), paddle.int64, True)
    assert _fails_eagerly(paddle.remainder, (left, right), {}, divides=True)
    assert not _divides(paddle.add) and not _divides([])

"""`sot.profile()`: kernels counted eager versus compiled, per step, from ``paddle.profiler`` events."""
from __future__ import annotations

from typing import Any

import paddle
import pytest

import sot

N_OPS = 6


def six_ops(x: paddle.Tensor, y: paddle.Tensor) -> paddle.Tensor:
    a = paddle.matmul(x, y)
    b = paddle.nn.functional.relu(a)
    c = paddle.exp(b * 0.1)
    d = paddle.tanh(c)
    return paddle.sum(d, axis=1)


def inputs() -> tuple:
    return paddle.randn([8, 8]), paddle.randn([8, 8])


def test_compiled_graph_runs_compiled_kernels_only(compile_all: Any) -> None:
    x, y = inputs()
    fast = sot.symbolic_translate(six_ops)
    fast(x, y)  # translate and compile outside the measured block
    assert sot.stats().compiled_graphs == 1
    with sot.profile() as prof:
        fast(x, y)
    assert len(prof.steps) == 1
    total = prof.total
    assert total.eager_kernels == 0
    assert total.compiled_kernels >= N_OPS
    assert total.compiled_time_ns > 0
    assert total.compiled_fraction == 1.0
    assert {"matmul", "relu", "exp", "tanh", "sum"} <= set(total.compiled_by_name)


def test_eager_function_runs_eager_kernels_only() -> None:
    x, y = inputs()
    with sot.profile() as prof:
        six_ops(x, y)
    total = prof.total
    assert total.compiled_kernels == 0
    assert total.eager_kernels >= N_OPS
    assert total.eager_time_ns > 0
    assert total.compiled_fraction == 0.0
    assert {"matmul", "relu", "exp", "tanh", "sum"} <= set(total.eager_by_name)


def test_graph_below_min_graph_size_counts_as_eager() -> None:
    """A graph smaller than ``min_graph_size`` is replayed op by op: honest numbers say so."""
    x, y = inputs()
    fast = sot.symbolic_translate(six_ops)
    with sot.config.patch(min_graph_size=100):
        fast(x, y)
        with sot.profile() as prof:
            fast(x, y)
    assert sot.stats().compiled_graphs == 0
    assert prof.total.compiled_kernels == 0 and prof.total.eager_kernels >= N_OPS


def test_steps_backward_and_table(compile_all: Any) -> None:
    x, y = inputs()
    y.stop_gradient = False
    fast = sot.symbolic_translate(six_ops)
    fast(x, y).sum().backward()  # warm up forward and backward programs
    with sot.profile() as prof:
        fast(x, y)
        prof.step()
        six_ops(x, y)
        prof.step()
        loss = fast(x, y).sum()  # the final sum runs eagerly, outside the translated function
        loss.backward()
        prof.step()  # called at the end of every iteration: no empty trailing step is reported
    assert [s.step for s in prof.steps] == [0, 1, 2]
    compiled, eager, mixed = prof.steps
    # (``y``, a leaf requiring grad, makes the call run with a recomputing backward: its outputs are linked to
    # its inputs by a few eager ops, `sot.symbolic.higher_order.run_with_recomputed_backward`)
    link = {"reshape", "slice", "sum", "multiply", "subtract", "assign"}
    assert compiled.eager_by_name.keys() == link and compiled.compiled_kernels >= N_OPS
    assert eager.compiled_kernels == 0 and eager.eager_kernels >= N_OPS
    # The backward of the compiled graph runs in the compiled backward program.
    assert mixed.compiled_kernels > compiled.compiled_kernels
    assert any(name.endswith("_grad") for name in mixed.compiled_by_name)
    assert "sum" in mixed.eager_by_name and 0 < mixed.compiled_fraction < 1
    total = prof.total
    assert total.eager_kernels == sum(s.eager_kernels for s in prof.steps)
    assert total.compiled_time_ns == sum(s.compiled_time_ns for s in prof.steps)

    table = str(prof)
    lines = table.splitlines()
    assert "eager kernels" in lines[1] and "compiled kernels" in lines[1] and "compiled % (time)" in lines[1]
    rows = [line for line in lines if line.startswith("| ")][1:]
    assert [row.split("|")[1].strip() for row in rows] == ["0", "1", "2", "total"]
    first = [cell.strip() for cell in rows[0].split("|")[1:-1]]
    assert int(first[1]) == compiled.eager_kernels and int(first[3]) == compiled.compiled_kernels
    assert first[5] == f"{100 * compiled.compiled_fraction:.1f}%"
    assert "most expensive eager kernels" in table
    assert "compiled" in repr(prof)


def test_one_step_without_step_calls_is_the_total() -> None:
    x, y = inputs()
    with sot.profile() as prof:
        six_ops(x, y)
        six_ops(x, y)
    assert len(prof.steps) == 1 and prof.steps[0].eager_kernels == prof.total.eager_kernels
    assert "total (1 step)" in str(prof)


def test_profiling_is_off_outside_the_block() -> None:
    from paddle.profiler import utils

    x, y = inputs()
    with pytest.raises(ZeroDivisionError):
        with sot.profile():
            six_ops(x, y)
            1 / 0
    assert utils._is_profiler_used is False
    with sot.profile() as prof:  # the native profiler was released: a new block can start
        with pytest.raises(RuntimeError, match="nested"):
            with sot.profile():
                pass
        six_ops(x, y)
    assert prof.total.eager_kernels >= N_OPS
    with pytest.raises(RuntimeError, match="inside"):
        prof.step()
    with pytest.raises(RuntimeError, match="already used"):
        with prof:
            pass

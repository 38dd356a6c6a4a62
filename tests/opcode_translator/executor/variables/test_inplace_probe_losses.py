"""Loss functions are never run on the alias probes' zeros (`inplace._is_loss_function`): ``F.ctc_loss`` of zero
lengths divides an integer by zero in Paddle's warpctc kernel, a SIGFPE that killed the process on the first
translated call whose loss left the graph (a CRNN train step). A loss computes a new tensor, never a view."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import paddle
import paddle.nn.functional as F

import sot
from tests.conftest import assert_same


def _ctc_inputs() -> tuple:
    paddle.seed(0)
    logits = paddle.randn([8, 2, 12])
    logits.stop_gradient = False
    labels = paddle.randint(1, 12, [2, 4]).astype("int32")
    return logits, labels, paddle.to_tensor([8, 8], dtype="int64"), paddle.to_tensor([4, 3], dtype="int64")


def ctc_step(logits, labels, input_lengths, label_lengths):
    log_probs = F.log_softmax(logits * 2.0, -1)
    return F.ctc_loss(log_probs, labels, input_lengths, label_lengths, blank=0, reduction="mean")


def test_a_ctc_loss_leaving_the_graph_matches_eager(compile_all) -> None:
    eager_inputs, inputs = _ctc_inputs(), _ctc_inputs()
    expected = ctc_step(*eager_inputs)
    expected.backward()
    actual = sot.symbolic_translate(ctc_step)(*inputs)
    actual.backward()
    assert_same(actual, expected)
    np.testing.assert_allclose(inputs[0].grad.numpy(), eager_inputs[0].grad.numpy(), rtol=1e-5, atol=1e-6)
    assert sot.stats().fallbacks == 0 and sot.stats().graph_breaks == 0


def test_the_ctc_probe_no_longer_kills_the_process() -> None:
    """(In a child process: the failure this guards against is a signal, not an exception.)"""
    script = textwrap.dedent("""
        import paddle, paddle.nn.functional as F, sot
        logp = F.log_softmax(paddle.randn([8, 2, 12]), -1)
        labels = paddle.randint(1, 12, [2, 4]).astype("int32")
        loss = lambda *a: F.ctc_loss(*a, blank=0, reduction="mean")
        args = (logp, labels, paddle.to_tensor([8, 8]), paddle.to_tensor([4, 3]))
        with sot.config.patch(min_graph_size=0):
            print(float(sot.symbolic_translate(loss)(*args)) == float(loss(*args)))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("True")

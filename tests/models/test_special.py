"""Models with a custom PyLayer and with a data-dependent branch."""
from __future__ import annotations

import numpy as np
import paddle

import sot

from .harness import (assert_close, assert_whole_graph, check_whole_model, eval_parity, make_pair, stats_line,
                      train_parity)
from .zoo import SPECIAL, negative_features


def test_pylayer_model() -> None:
    """A custom ``PyLayer`` (its own backward, different from autograd's) is captured inside the graph."""
    check_whole_model(SPECIAL["pylayer_mlp"])


def test_pylayer_backward_is_the_custom_one() -> None:
    """The gradient through ``ClippedScale`` is the custom one (zero where |x| >= 1), in eager and in sot."""
    spec = SPECIAL["pylayer_mlp"]
    model, eager = make_pair(spec)
    fast = sot.symbolic_translate(model)
    (x,) = spec.inputs()
    fc2_out = eager.fc2(paddle.nn.functional.relu(eager.norm(eager.fc1(x))))
    clipped = (fc2_out.abs() >= 1.0).numpy()
    assert clipped.any() and not clipped.all(), "the inputs must exercise both sides of the clip"
    spec.loss(fast(x), (x,)).backward()
    spec.loss(eager(x), (x,)).backward()
    # fc2's bias gradient is the column sum of the PyLayer's input gradient: clipped entries contribute 0.
    np.testing.assert_allclose(model.fc2.bias.grad.numpy(), eager.fc2.bias.grad.numpy(), rtol=1e-4, atol=1e-5)
    assert_whole_graph(sot.stats(), translations=1, graphs=1, phase="pylayer model, one call")


def test_data_dependent_branch() -> None:
    """``if x.mean() > 0`` needs the value of a tensor: exactly one graph break, no fallback.

    The code before the branch is one graph; the branch taken, with the rest of the function, another.
    Training with inputs that always take the same branch adds no graph after the first step; inputs
    that take the other branch add one graph for that branch and no new break.
    """
    spec = SPECIAL["data_dependent_branch"]
    model, eager = make_pair(spec)
    fast = sot.symbolic_translate(model)
    inputs = spec.inputs()
    assert float(inputs[0].mean()) > 0

    train_parity(spec, model, eager, fast, inputs)
    stats = sot.stats()
    message = f"after training on one branch: {stats_line(stats)}"
    assert stats.fallbacks == 0, message
    assert stats.graph_breaks == 1, message
    assert stats.compiled_graphs == 2, message
    translations = stats.translate_count

    negative = negative_features()
    assert float(negative[0].mean()) < 0
    for _ in range(2):
        assert_close(fast(*negative), eager(*negative), "output on the other branch")
    stats = sot.stats()
    message = f"after the other branch: {stats_line(stats)}"
    assert stats.fallbacks == 0, message
    assert stats.graph_breaks == 1, message
    assert stats.compiled_graphs == 3, message
    assert stats.translate_count <= translations + 1, message

    # Eval mode: new entries (the training flags are guarded), still no fallback.
    eval_parity(model, eager, fast, inputs)
    eval_parity(model, eager, fast, negative)
    assert sot.stats().fallbacks == 0, stats_line(sot.stats())

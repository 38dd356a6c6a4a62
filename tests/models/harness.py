"""The parity check every zoo model goes through: outputs, gradients, a 5-step Adam loss curve, eval mode.

Two identical copies of a model (one a ``copy.deepcopy`` of the other) run side by side, one eagerly and
one through ``sot.symbolic_translate``, each with its own optimizer. ``sot.stats()`` is checked after the
training phase and after the eval phase.
"""
from __future__ import annotations

import copy
from typing import Any

import numpy as np
import paddle

import sot

from conftest import assert_same

from .zoo import ModelSpec

RTOL, ATOL = 1e-4, 1e-5
STEPS = 5
LEARNING_RATE = 1e-3


def assert_close(actual: Any, expected: Any, what: str, rtol: float = RTOL, atol: float = ATOL) -> None:
    try:
        assert_same(actual, expected, rtol=rtol, atol=atol)
    except AssertionError as exc:
        raise AssertionError(f"{what}: {exc}") from None


def assert_grads_equal(model: paddle.nn.Layer, eager: paddle.nn.Layer, rtol: float = RTOL,
                       atol: float = ATOL) -> None:
    for (name, p), (e_name, ep) in zip(model.named_parameters(), eager.named_parameters(), strict=True):
        assert name == e_name
        if ep.grad is None:
            assert p.grad is None, f"{name}: a gradient where eager has none"
            continue
        assert p.grad is not None, f"{name}: no gradient (eager has one)"
        np.testing.assert_allclose(p.grad.numpy(), ep.grad.numpy(), rtol=rtol, atol=atol,
                                   err_msg=f"gradient of {name}")


def assert_state_equal(model: paddle.nn.Layer, eager: paddle.nn.Layer, rtol: float = RTOL,
                       atol: float = ATOL) -> None:
    """Parameters and buffers (BatchNorm running statistics included)."""
    state, e_state = model.state_dict(), eager.state_dict()
    assert list(state) == list(e_state)
    for name, value in e_state.items():
        np.testing.assert_allclose(state[name].numpy(), value.numpy(), rtol=rtol, atol=atol,
                                   err_msg=f"state {name}")


def make_pair(spec: ModelSpec) -> tuple[paddle.nn.Layer, paddle.nn.Layer]:
    """(model to translate, eager twin)."""
    model = spec.build()
    eager = copy.deepcopy(model)
    assert_state_equal(model, eager, rtol=0, atol=0)
    return model, eager


def stats_line(stats: sot.Stats) -> str:
    return (f"translate_count={stats.translate_count} compiled_graphs={stats.compiled_graphs} "
            f"graph_breaks={stats.graph_breaks} fallbacks={stats.fallbacks} cache_hits={stats.cache_hits}")


def assert_whole_graph(stats: sot.Stats, translations: int, graphs: int, phase: str) -> None:
    """No fallback, no break, and exactly the expected translations / compiled graphs."""
    message = f"{phase}: expected the forward captured whole ({translations} translation(s), {graphs} " \
              f"graph(s), no break/fallback); got {stats_line(stats)}"
    assert stats.fallbacks == 0, message
    assert stats.graph_breaks == 0, message
    assert stats.translate_count == translations, message
    assert stats.compiled_graphs == graphs, message


RANDOM_SEED = 77


def seeded_call(function: Any, inputs: tuple, random: bool) -> Any:
    """``function(*inputs)``, after seeding Paddle's generators when the model draws random numbers (so the
    eager and the translated call draw from the same state)."""
    if random:
        paddle.seed(RANDOM_SEED)
    return function(*inputs)


def train_parity(spec: ModelSpec, model: paddle.nn.Layer, eager: paddle.nn.Layer, fast: Any,
                 inputs: tuple, steps: int = STEPS) -> list[float]:
    """``steps`` Adam steps on both copies; outputs compared at every step, gradients at the first, the
    loss curves and the final state (parameters and buffers) at the end. Returns the loss curve."""
    model.train()
    eager.train()
    opt = paddle.optimizer.Adam(learning_rate=LEARNING_RATE, parameters=model.parameters())
    e_opt = paddle.optimizer.Adam(learning_rate=LEARNING_RATE, parameters=eager.parameters())
    losses, e_losses = [], []
    for step in range(steps):
        out = seeded_call(fast, inputs, spec.random)
        e_out = seeded_call(eager, inputs, spec.random)
        assert_close(out, e_out, f"train-mode output at step {step}")
        loss = spec.loss(out, inputs)
        e_loss = spec.loss(e_out, inputs)
        loss.backward()
        e_loss.backward()
        if step == 0:
            assert_grads_equal(model, eager)
        opt.step()
        e_opt.step()
        opt.clear_grad()
        e_opt.clear_grad()
        losses.append(float(loss))
        e_losses.append(float(e_loss))
    np.testing.assert_allclose(losses, e_losses, rtol=RTOL, atol=ATOL, err_msg="loss curve")
    assert_state_equal(model, eager)
    return losses


def eval_parity(model: paddle.nn.Layer, eager: paddle.nn.Layer, fast: Any, inputs: tuple,
                calls: int = 2, random: bool = False) -> None:
    model.eval()
    eager.eval()
    expected = seeded_call(eager, inputs, random)
    for call in range(calls):
        assert_close(seeded_call(fast, inputs, random), expected, f"eval-mode output (call {call})")


def other_batch_parity(spec: ModelSpec, model: paddle.nn.Layer, eager: paddle.nn.Layer, fast: Any) -> None:
    """Another batch size after the translations above, in train mode (output and gradients) and in eval
    mode: whether sot retranslates or makes the batch dimension symbolic, the forward stays whole."""
    assert spec.other_batch is not None
    inputs = spec.other_batch()
    before = sot.stats()
    model.train()
    eager.train()
    out, e_out = seeded_call(fast, inputs, spec.random), seeded_call(eager, inputs, spec.random)
    assert_close(out, e_out, "train-mode output at another batch size")
    spec.loss(out, inputs).backward()
    spec.loss(e_out, inputs).backward()
    assert_grads_equal(model, eager)
    model.clear_gradients()
    eager.clear_gradients()
    eval_parity(model, eager, fast, inputs, random=spec.random)
    stats = sot.stats()
    message = f"{spec.name}, another batch size: {stats_line(stats)}"
    assert stats.fallbacks == before.fallbacks and stats.graph_breaks == before.graph_breaks, message
    # At most one new program per mode.
    assert stats.compiled_graphs <= before.compiled_graphs + 2, message


def check_whole_model(spec: ModelSpec) -> None:
    """The full check for a model sot must capture whole: one graph per forward in each mode."""
    assert spec.whole_graph
    model, eager = make_pair(spec)
    fast = sot.symbolic_translate(model)
    inputs = spec.inputs()

    train_parity(spec, model, eager, fast, inputs)
    # One translation and one compiled graph for the whole training: optimizer updates must not retranslate.
    assert_whole_graph(sot.stats(), translations=1, graphs=1, phase=f"{spec.name}, {STEPS} training steps")

    eval_parity(model, eager, fast, inputs, random=spec.random)
    # Eval mode is a new cache entry where a ``training`` flag is read (guarded); its graph may only be shared
    # with the train-mode one when the two programs are the same. A model where no layer reads it (an RNN
    # without dropout between layers and no other mode-dependent layer) keeps its one entry.
    stats = sot.stats()
    assert stats.compiled_graphs in (1, 2) and stats.translate_count in (1, 2), stats_line(stats)
    assert_whole_graph(stats, translations=stats.translate_count, graphs=stats.compiled_graphs,
                       phase=f"{spec.name}, eval mode")

    if spec.other_batch is not None:
        other_batch_parity(spec, model, eager, fast)

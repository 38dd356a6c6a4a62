"""User code patterns found to break, fall back or compute otherwise than eager, as whole models and loops:
a training loop translated as a whole with its logging (a long loop body), attention scaled with numpy
(``np.sqrt(d_k)``, ``np.prod`` of a shape), and a float64 physics-informed MLP with Python float constants."""
from __future__ import annotations

import copy
import math

import numpy as np
import paddle
import paddle.nn as nn
import paddle.nn.functional as F

import sot

from .harness import assert_close, assert_grads_equal, assert_state_equal, stats_line
from .zoo import randint, randn

# -- a training loop translated as a whole ---------------------------------------------------------------------


class SmallClassifier(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.0), nn.Linear(16, 4))

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return self.net(x)


def train(model, optimizer, scheduler, data, history, epochs=2):
    model.train()
    metrics = {"loss": [], "acc": []}
    for epoch in range(epochs):
        total = 0.0
        for step, (x, y) in enumerate(data):
            logits = model(x)
            loss = F.cross_entropy(logits, y)
            loss.backward()
            optimizer.step()
            optimizer.clear_grad()
            scheduler.step()
            acc = (logits.argmax(-1) == y).astype("float32").mean().item()
            total += float(loss)
            metrics["loss"].append(loss.item())
            metrics["acc"].append(acc)
        history.append(total / len(data))
    return metrics


def _training_setup() -> tuple:
    paddle.seed(0)
    model = SmallClassifier()
    scheduler = paddle.optimizer.lr.StepDecay(0.1, step_size=2, gamma=0.5)
    optimizer = paddle.optimizer.Momentum(scheduler, parameters=model.parameters(),
                                          grad_clip=nn.ClipGradByGlobalNorm(1.0))
    return model, optimizer, scheduler


def test_a_training_loop_translated_whole_matches_eager() -> None:
    """Its loop body (with the logging) is long enough for the loop head to carry an EXTENDED_ARG: the frame
    fell back whole. Now every break runs natively where it is, and losses, metrics, parameters and the
    learning rate are eager's exactly."""
    data = [(randn(4, 8, seed=i), randint(0, 4, (4,), seed=10 + i)) for i in range(3)]
    model, optimizer, scheduler = _training_setup()
    e_model, e_optimizer, e_scheduler = _training_setup()
    history, e_history = [], []
    metrics = sot.symbolic_translate(train)(model, optimizer, scheduler, data, history)
    e_metrics = train(e_model, e_optimizer, e_scheduler, data, e_history)
    assert metrics == e_metrics and history == e_history
    assert_state_equal(model, e_model, rtol=0, atol=0)
    assert scheduler.last_lr == e_scheduler.last_lr
    stats = sot.stats()
    assert stats.fallbacks == 0 and stats.graph_breaks > 0, stats_line(stats)


# -- attention scaled with numpy ----------------------------------------------------------------------------------


class NumpyScaledAttention(nn.Layer):
    """Attention as ported from a tutorial: ``np.sqrt(d_k)`` scaling, ``np.prod`` flattening the heads."""

    def __init__(self, dim: int = 16, heads: int = 4, num_classes: int = 3) -> None:
        super().__init__()
        self.heads, self.d_k = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        batch, length = x.shape[0], x.shape[1]
        q, k, v = [t.reshape([batch, length, self.heads, self.d_k]).transpose([0, 2, 1, 3])
                   for t in self.qkv(x).chunk(3, axis=-1)]
        scores = paddle.matmul(q, k, transpose_y=True) / np.sqrt(self.d_k)
        context = paddle.matmul(F.softmax(scores, axis=-1), v).transpose([0, 2, 1, 3])
        context = context.reshape([batch, length, int(np.prod(context.shape[2:]))])
        return self.head(self.out(context).mean(axis=1))


def test_attention_scaled_with_numpy_is_one_graph() -> None:
    paddle.seed(1)
    model = NumpyScaledAttention()
    eager = copy.deepcopy(model)
    fast = sot.symbolic_translate(model)
    x = randn(2, 5, 16, seed=3)
    out, e_out = fast(x), eager(x)
    assert_close(out, e_out, "output")
    out.sum().backward()
    e_out.sum().backward()
    assert_grads_equal(model, eager)
    stats = sot.stats()
    assert (stats.translate_count, stats.compiled_graphs, stats.graph_breaks, stats.fallbacks) == (1, 1, 0, 0), \
        stats_line(stats)


# -- a float64 physics-informed MLP ------------------------------------------------------------------------------


class HeatPINN(nn.Layer):
    """u(x, t) for the heat equation, in float64 as scientific codes run: inputs scaled by Python floats."""

    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2, width), nn.Tanh(), nn.Linear(width, width), nn.Tanh(),
                                 nn.Linear(width, 1))
        self.diffusivity = 0.01

    def forward(self, x: paddle.Tensor, t: paddle.Tensor) -> paddle.Tensor:
        x_scaled = (x - 0.5) * 2.0 / math.pi
        t_scaled = t * 0.1 + 1e-3
        u = self.net(paddle.concat([x_scaled, t_scaled], axis=-1))
        return u * paddle.sin(math.pi * x) * self.diffusivity + u ** 3 * 0.3


def test_a_float64_model_with_python_float_constants_is_eager_bit_for_bit() -> None:
    paddle.seed(2)
    model = HeatPINN().to(dtype="float64")
    eager = copy.deepcopy(model)
    fast = sot.symbolic_translate(model)
    x = paddle.to_tensor(np.random.default_rng(0).uniform(0, 1, (32, 1)))
    t = paddle.to_tensor(np.random.default_rng(1).uniform(0, 1, (32, 1)))
    out, e_out = fast(x, t), eager(x, t)
    assert np.array_equal(out.numpy(), e_out.numpy())
    (out ** 2).mean().backward()
    (e_out ** 2).mean().backward()
    assert_grads_equal(model, eager, rtol=1e-12, atol=0)
    stats = sot.stats()
    assert stats.graph_breaks == 0 and stats.fallbacks == 0 and stats.compiled_graphs == 1, stats_line(stats)



# -- a policy network with paddle.distribution ---------------------------------------------------------------------


class GaussianPolicy(nn.Layer):
    """An actor-critic head as RL code writes it: ``Normal(mu, std)`` log-probabilities and entropy, a
    ``Categorical`` over discrete actions, ``sample()`` for the rollout."""

    def __init__(self, observations: int = 4, actions: int = 2) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(observations, 16), nn.Tanh())
        self.mu = nn.Linear(16, actions)
        self.log_std = self.create_parameter([actions], default_initializer=nn.initializer.Constant(-0.5))
        self.value = nn.Linear(16, 1)

    def forward(self, obs: paddle.Tensor, actions: paddle.Tensor) -> tuple:
        h = self.body(obs)
        dist = paddle.distribution.Normal(self.mu(h), self.log_std.exp())
        log_prob = dist.log_prob(actions).sum(-1)
        entropy = dist.entropy().sum(-1).mean()
        discrete = paddle.distribution.Categorical(F.softmax(self.mu(h), axis=-1))
        sampled = dist.sample([3])
        return log_prob, entropy, self.value(h).squeeze(-1), discrete.entropy(), sampled


def test_a_policy_with_paddle_distributions_is_one_graph() -> None:
    """``paddle.distribution`` ran natively (each method a break); simulated, its ``isinstance(x, Variable)``
    (a metaclass check, True for every eager tensor) was False and the frame fell back."""
    paddle.seed(3)
    model = GaussianPolicy()
    eager = copy.deepcopy(model)
    fast = sot.symbolic_translate(model)
    obs, actions = randn(5, 4, seed=1), randn(5, 2, seed=2)
    for call in range(2):
        paddle.seed(10 + call)
        out = fast(obs, actions)
        paddle.seed(10 + call)
        e_out = eager(obs, actions)
        assert_close(out, e_out, f"call {call}")
        sum(t.sum() for t in out[:4]).backward()
        sum(t.sum() for t in e_out[:4]).backward()
        assert_grads_equal(model, eager)
        model.clear_gradients()
        eager.clear_gradients()
    stats = sot.stats()
    assert (stats.translate_count, stats.compiled_graphs, stats.graph_breaks, stats.fallbacks) == (1, 1, 0, 0), \
        stats_line(stats)

def test_a_float_accumulated_across_logging_breaks_is_not_retranslated_per_step() -> None:
    """``total += float(loss)`` between two breaks: the resume function receives ``total`` and the new float,
    folds their sum and guards both values, so each step translates it again until the cache limit (then it
    runs eagerly, with a warning). Results are right; the counts should not grow with the number of steps."""
    data = [(randn(4, 8, seed=i), randint(0, 4, (4,), seed=10 + i)) for i in range(12)]
    model, optimizer, scheduler = _training_setup()
    sot.symbolic_translate(train)(model, optimizer, scheduler, data[:4], [], epochs=1)
    few = sot.stats().translate_count
    sot.reset()
    model, optimizer, scheduler = _training_setup()
    sot.symbolic_translate(train)(model, optimizer, scheduler, data, [], epochs=1)
    assert sot.stats().translate_count == few, stats_line(sot.stats())

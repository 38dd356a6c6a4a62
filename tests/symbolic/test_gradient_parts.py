"""A graph whose results belong to separate gradient graphs runs as one program per part (sot/symbolic/
gradient_parts.py): a ``backward()`` through one part must leave the others usable, as eager's nodes are."""
from __future__ import annotations

from typing import Any

import numpy as np
import paddle
import paddle.nn as nn
import paddle.nn.functional as F
import pytest

import sot
from conftest import assert_counts, assert_same
from sot.symbolic.compile import compiled_programs
from sot.symbolic.gradient_parts import gradient_parts


def _parameters(seed: int = 1) -> tuple[paddle.Tensor, paddle.Tensor]:
    paddle.seed(seed)
    return paddle.create_parameter([2, 2], "float32"), paddle.create_parameter([2, 1], "float32")


def _independent(x: paddle.Tensor, y: paddle.Tensor, w1: paddle.Tensor, w2: paddle.Tensor) -> tuple:
    return (x @ w1).tanh().sum(), (y @ w2).exp().sum()


def _programs(function: Any, *args: Any) -> int:
    """How many programs run the first graph of ``function``'s translation."""
    sot.reset()
    explained = sot.explain(function, *args)
    return len(compiled_programs(explained.graphs[0].program))


def test_results_computed_apart_run_as_parts_counted_as_one_graph(compile_all) -> None:
    """Two towers fed two inputs: two programs, one compiled graph in `sot.stats()` (gradients as eager's)."""
    x, y = paddle.ones([3, 2]), paddle.full([3, 2], 0.5)
    runs = []
    for function in (_independent, sot.symbolic_translate(_independent)):
        w1, w2 = _parameters()
        a, b = function(x, y, w1, w2)
        (a + b).backward()
        runs.append([a, b, w1.grad, w2.grad])
    assert_same(runs[1], runs[0])
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)
    assert _programs(_independent, x, y, *_parameters()) == 2


def test_separate_backward_passes_through_results_computed_apart_match_eager(compile_all) -> None:
    """With one program, the pass through ``a`` gave ``w2`` a gradient of zeros (eager: None) and used up the
    node, so the pass through ``b`` raised where eager's works."""
    x, y = paddle.ones([3, 2]), paddle.full([3, 2], 0.5)
    runs = []
    for function in (_independent, sot.symbolic_translate(_independent)):
        w1, w2 = _parameters()
        a, b = function(x, y, w1, w2)
        a.backward()
        after_first = w2.grad
        b.backward()
        runs.append([a, b, w1.grad, w2.grad, after_first is None])
    assert_same(runs[1], runs[0])


def _detached_middle(x: paddle.Tensor, w1: paddle.Tensor, w2: paddle.Tensor) -> tuple:
    h = x @ w1
    return h, (h.detach() * 2 @ w2).sum()


def test_a_pass_through_a_detached_read_leaves_the_producer_untouched(compile_all) -> None:
    """``w1.grad`` stays None after the pass through the detached side (one program gave it zeros), and the
    later pass through ``h`` works (one program raised: its node was consumed)."""
    x = paddle.ones([3, 2])
    runs = []
    for function in (_detached_middle, sot.symbolic_translate(_detached_middle)):
        w1, w2 = _parameters(2)
        h, loss = function(x, w1, w2)
        loss.backward()
        first = w1.grad
        h.sum().backward()
        runs.append((first, [h, loss, w1.grad, w2.grad]))
    assert runs[1][0] is None and runs[0][0] is None
    assert_same(runs[1][1], runs[0][1])


def test_the_split_graph_hits_its_cache_on_the_next_call(compile_all) -> None:
    translated = sot.symbolic_translate(_detached_middle)
    w1, w2 = _parameters()
    for _ in range(3):
        translated(paddle.ones([3, 2]), w1, w2)
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)
    assert sot.stats().cache_hits == 2
    assert _programs(_detached_middle, paddle.ones([3, 2]), *_parameters()) == 2


def _connected(x: paddle.Tensor, w1: paddle.Tensor, w2: paddle.Tensor) -> tuple:
    h = (x @ w1).tanh()
    return (h @ w2).sum(), h.mean()


def test_results_sharing_a_gradient_graph_stay_one_program(compile_all) -> None:
    w1, w2 = _parameters()
    a, b = sot.symbolic_translate(_connected)(paddle.ones([3, 2]), w1, w2)
    (a + b).backward()
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)
    assert _programs(_connected, paddle.ones([3, 2]), w1, w2) == 1


def test_nothing_is_split_without_gradients(compile_all) -> None:
    w1, w2 = _parameters()
    with paddle.no_grad():
        sot.symbolic_translate(_detached_middle)(paddle.ones([3, 2]), w1, w2)
        assert _programs(_detached_middle, paddle.ones([3, 2]), w1, w2) == 1


def _two_dropouts(x: paddle.Tensor, w1: paddle.Tensor, w2: paddle.Tensor) -> tuple:
    a = F.dropout(x @ w1, 0.5)
    total = a.sum()
    b = F.dropout(a.detach() @ w2, 0.5)
    return total, b.sum(), a, b


@pytest.mark.parametrize("seed", [0, 3])
def test_random_numbers_are_drawn_in_eager_order_across_parts(compile_all, seed: int) -> None:
    x = paddle.ones([64, 2])
    runs = []
    for function in (_two_dropouts, sot.symbolic_translate(_two_dropouts)):
        w1, w2 = _parameters()
        paddle.seed(seed)
        runs.append(function(x, w1, w2))
    assert_same(runs[1], runs[0])
    assert _programs(_two_dropouts, x, *_parameters()) == 2


def test_the_parts_of_a_recorded_graph(compile_all) -> None:
    """The cut is where no gradient crosses but ``h`` does: the detach reads it in the second part, fed
    detached."""
    explained = sot.explain(_detached_middle, paddle.ones([3, 2]), *_parameters())
    found = gradient_parts(explained.graphs[0].sir)
    assert found is not None
    parts, where = found
    assert len(parts) == 2 and where == [(0, 0), (1, 0)]
    first, second = parts
    assert [s.name for s in first.sir.statements] == ["operator.matmul"]
    assert second.sources[0] == (0, 0) and second.detached == frozenset({0})
    assert second.sir.metas[second.sir.inputs[0]].stop_gradient


# -- training steps backward()-ing one result at a time ------------------------------------------------------
def _actor_critic(actor: nn.Layer, critic: nn.Layer, opt_a: Any, opt_c: Any, x: paddle.Tensor,
                  actions: paddle.Tensor, returns: paddle.Tensor) -> tuple:
    """The critic's values reach the actor's loss detached, after both networks ran: the parts run in
    another order than recorded (the critic's first)."""
    logits = actor(x)
    values = critic(x).squeeze(-1)
    chosen = paddle.take_along_axis(F.log_softmax(logits, -1), actions.unsqueeze(-1), -1).squeeze(-1)
    actor_loss = -(chosen * (returns - values.detach())).mean()
    critic_loss = F.mse_loss(values, returns)
    opt_a.clear_grad()
    actor_loss.backward()
    opt_a.step()
    opt_c.clear_grad()
    critic_loss.backward()
    opt_c.step()
    return actor_loss, critic_loss


def _two_models(actor: nn.Layer, critic: nn.Layer, opt_a: Any, opt_c: Any, x: paddle.Tensor,
                actions: paddle.Tensor, returns: paddle.Tensor) -> tuple:
    loss_a = actor(x).mean()
    loss_c = critic(x).mean()
    loss_a.backward()
    paddle.autograd.backward([loss_c])
    opt_a.step()
    opt_c.step()
    opt_a.clear_grad()
    opt_c.clear_grad()
    return loss_a, loss_c


def _networks(dropout: float = 0.0) -> tuple:
    paddle.seed(0)
    actor = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Dropout(dropout), nn.Linear(16, 3))
    critic = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))
    return (actor, critic, paddle.optimizer.Adam(1e-2, parameters=actor.parameters()),
            paddle.optimizer.Adam(1e-2, parameters=critic.parameters()))


@pytest.mark.parametrize("step", [_actor_critic, _two_models], ids=["actor_critic_detached", "two_models"])
@pytest.mark.parametrize("dropout", [0.0, 0.5])
def test_separate_backward_passes_in_one_training_step_match_eager(step: Any, dropout: float) -> None:
    model, e_model = _networks(dropout), _networks(dropout)
    fast = sot.symbolic_translate(step)
    for index in range(3):
        paddle.seed(10 + index)
        x, actions, returns = paddle.randn([8, 4]), paddle.randint(0, 3, [8]), paddle.randn([8])
        paddle.seed(20 + index)
        expected = step(*e_model, x, actions, returns)
        paddle.seed(20 + index)
        assert_same(list(fast(*model, x, actions, returns)), list(expected))
    for layer, e_layer in zip(model[:2], e_model[:2]):
        for p, e_p in zip(layer.parameters(), e_layer.parameters()):
            np.testing.assert_allclose(p.numpy(), e_p.numpy(), rtol=1e-5, atol=1e-6)
    stats = sot.stats()
    assert stats.fallbacks == 0 and stats.compiled_graphs == 1, stats


def _both_draw(x: paddle.Tensor, w1: paddle.Tensor, w2: paddle.Tensor) -> tuple:
    a = F.dropout(x @ w1, 0.5)
    b = F.dropout(x @ w2, 0.5)
    return a.sum() * (b.detach() * 0 + 1).sum(), b.sum()


def test_parts_that_would_run_reordered_while_both_draw_random_numbers_stay_whole(compile_all) -> None:
    """``b`` (made second) must run before ``a``'s loss that reads it detached: both draw, so the graph
    stays one program, drawing in eager's order."""
    explained = sot.explain(_both_draw, paddle.ones([4, 2]), *_parameters())
    sir = explained.graphs[0].sir
    assert gradient_parts(sir) is None
    x = paddle.ones([64, 2])
    runs = []
    for function in (_both_draw, sot.symbolic_translate(_both_draw)):
        w1, w2 = _parameters()
        paddle.seed(7)
        runs.append(function(x, w1, w2))
    assert_same(runs[1], runs[0])


def _one_optimizer_one_result(models: tuple, opt: Any, x: paddle.Tensor, which: int) -> tuple:
    first, second = models[0](x).mean(), models[1](x).tanh().mean()
    (first if which == 0 else second).backward()
    opt.step()
    opt.clear_grad()
    return first, second


def test_an_optimizer_over_two_models_steps_after_a_backward_through_one_of_them_as_eager(compile_all) -> None:
    """AdamW over both models: the model the pass does not reach has no gradient and is not moved, as eager
    (one program gave it gradients of zeros: AdamW's weight decay and momentum then moved it)."""
    def make() -> tuple:
        paddle.seed(0)
        models = (nn.Linear(4, 3), nn.Linear(4, 2))
        parameters = models[0].parameters() + models[1].parameters()
        return models, paddle.optimizer.AdamW(1e-2, parameters=parameters, weight_decay=0.1)

    (models, opt), (e_models, e_opt) = make(), make()
    fast = sot.symbolic_translate(_one_optimizer_one_result)
    for index in range(4):
        x = paddle.randn([5, 4])
        assert_same(list(fast(models, opt, x, index % 2)), list(_one_optimizer_one_result(e_models, e_opt, x,
                                                                                           index % 2)))
        for model, e_model in zip(models, e_models):
            for p, e_p in zip(model.parameters(), e_model.parameters()):
                np.testing.assert_allclose(p.numpy(), e_p.numpy(), rtol=1e-6, atol=1e-7)
    assert sot.stats().fallbacks == 0


class _PowerIterated(nn.Layer):
    """A discriminator updating a buffer in place under no_grad, as ``nn.utils.spectral_norm``'s hook does."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 1)
        self.register_buffer("u", paddle.ones([4]))

    def forward(self, x):
        with paddle.no_grad():
            paddle.assign(self.u * 0.9, self.u)
        return self.lin(x * self.u)


def _gan(kind: str) -> tuple[nn.Layer, nn.Layer]:
    paddle.seed(5)
    generator = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 4))
    if kind == "spectral norm":
        discriminator = nn.Sequential(nn.utils.spectral_norm(nn.Linear(4, 8)), nn.LeakyReLU(0.2), nn.Linear(8, 1))
    else:
        discriminator = _PowerIterated()
    return generator, discriminator


@pytest.mark.parametrize("kind", ["buffer assigned", "spectral norm"])
def test_a_gan_step_whose_discriminator_changes_a_buffer_in_place(kind: str, compile_all) -> None:
    """The graph before ``loss_d.backward()`` writes a buffer back; it is split all the same (the write-back
    goes with its part), so the pass through ``fake.detach()`` leaves the generator's node for ``loss_g``
    (it raised "The TensorWrappers of Dy2StGradNode do not exist")."""
    def make_step(generator, discriminator):
        optimizer = paddle.optimizer.Adam(0.01, parameters=generator.parameters() + discriminator.parameters())

        def step(z):
            fake = generator(z)
            loss_d = discriminator(fake.detach()).mean()
            loss_d.backward()
            loss_g = -discriminator(fake).mean()
            loss_g.backward()
            optimizer.step()
            optimizer.clear_grad()
            return loss_d, loss_g

        return step

    eager_models, models = _gan(kind), _gan(kind)
    eager_step, step = make_step(*eager_models), sot.symbolic_translate(make_step(*models))
    for seed in range(3):
        paddle.seed(seed)
        z = paddle.randn([2, 4])
        assert_same(step(z), eager_step(z), rtol=1e-5, atol=1e-6)
    for (name, expected), actual in zip(eager_models[1].state_dict().items(), models[1].state_dict().values()):
        np.testing.assert_allclose(actual.numpy(), expected.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
    assert sot.stats().fallbacks == 0

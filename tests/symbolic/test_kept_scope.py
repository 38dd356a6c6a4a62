"""Later backward passes through a call keeping the program's own backward (its differentiable inputs are
parameters only): `sot.symbolic.kept_scope` keeps what that backward reads when a pass may leave the graph
usable (``retain_graph=True``, any ``paddle.grad``), where Paddle's runner frees it. Every gradient is
compared with eager's, and the kept scopes must go back to the runner once no pass can need them."""
from __future__ import annotations

import copy
import gc
import weakref

import numpy as np
import paddle
import paddle.nn as nn
import pytest

import sot
from _conformance import assert_observed_same
from sot.symbolic import backward_pass, compile as compile_module, kept_scope


def _model() -> nn.Layer:
    paddle.seed(3)
    return nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 2))


def _grads(network: nn.Layer) -> list:
    return [None if p.grad is None else p.grad.numpy() for p in network.parameters()]


def _compare(scenario, steps: int = 2) -> None:  # noqa: ANN001
    """``scenario(network)`` (returning a list of arrays) on the translated model and on an eager copy, equal
    at each step (the first translates, the others hit the cache)."""
    model = _model()
    eager = copy.deepcopy(model)
    fast = sot.symbolic_translate(model)
    for _ in range(steps):
        model.clear_gradients()
        eager.clear_gradients()
        assert_observed_same(scenario(fast, model), scenario(eager, eager), "values", atol=1e-6)


def _ones(scale: float = 1.0) -> paddle.Tensor:
    return paddle.full([2, 4], scale)


def _leaf(shape: list) -> paddle.Tensor:
    x = paddle.to_tensor(np.random.default_rng(1).standard_normal(shape).astype("float32"))
    x.stop_gradient = False
    return x


def test_three_backward_passes_with_retain_graph(compile_all):
    def scenario(network, layer):
        loss = (network(_ones()) ** 2).sum()
        loss.backward(retain_graph=True)
        loss.backward(retain_graph=True)
        loss.backward()
        return _grads(layer)

    _compare(scenario)
    stats = sot.stats()
    assert (stats.graph_breaks, stats.fallbacks) == (0, 0), stats


def test_paddle_grad_without_retain_graph_leaves_the_graph_usable(compile_all):
    """Eager's ``paddle.grad`` runs on copies of the nodes: a backward through the same call works after it
    (the copies freed the program's values)."""

    def scenario(network, layer):
        out = network(_ones())
        scale = _leaf([2])
        (slope,) = paddle.grad((out * scale).sum(), scale)
        out.sum().backward()
        return [slope.numpy()] + _grads(layer)

    _compare(scenario)


def test_paddle_grad_of_the_parameters_then_a_backward(compile_all):
    """The pass runs the node (a copy of it), which frees the values; the backward runs it again."""

    def scenario(network, layer):
        out = network(_ones())
        grads = paddle.grad(out.sum(), list(layer.parameters()))
        (out * out).sum().backward()
        return [g.numpy() for g in grads] + _grads(layer)

    _compare(scenario)


@pytest.mark.parametrize("first", ["retain_graph", "paddle.grad"])
def test_a_run_between_two_passes_does_not_take_the_kept_scope(compile_all, first):
    """The freed scope would be handed to the next run of the program: the first call's second pass would
    read the values of the second call."""

    def scenario(network, layer):
        out = network(_ones())
        if first == "retain_graph":
            out.sum().backward(retain_graph=True)
        else:
            scale = _leaf([2])
            paddle.grad((out * scale).sum(), scale)
        after = _grads(layer)
        other = network(_ones(3.0))
        (out * out).sum().backward()
        between = _grads(layer)
        (other * other).sum().backward()
        return after + between + _grads(layer) + [other.numpy()]

    _compare(scenario)


def test_a_second_backward_after_one_without_retain_graph_raises_as_eager(compile_all):
    """The first pass frees the node's saved tensors: eager raises at the second, so does sot (Paddle's own
    error for the program's node), also when another run of the program came in between."""
    model = _model()
    fast = sot.symbolic_translate(model)
    for between in (False, True):
        for network in (copy.deepcopy(model), fast):
            out = network(_ones())
            out.sum().backward()
            if between:
                network(_ones(2.0))
            with pytest.raises(Exception, match="TensorWrappers of .* do not exist"):
                out.sum().backward()


def _program() -> compile_module.CompiledProgram:
    (program,) = compile_module._compiled.values()
    return program


def _scopes() -> list:
    """The scopes in the cache of the (only) compiled program's runner."""
    return [scope for scopes in _program()._program._scope_cache.values() for scope in scopes]


def _latest_call() -> kept_scope._CallScope:
    """The record of the latest call of the (only) compiled program."""
    return kept_scope._occupants[id(_program()._scopes.last_scope)]()


def test_kept_scopes_go_back_to_the_runner(compile_all):
    """A loop keeping each step's graph until the next step's run (``retain_graph=True`` then a second
    backward, the loss kept for logging): the runner needs two scopes, no more, and a dead graph's scope and
    values are let go of (the record of its call dies with the node), as are those of a graph whose last pass
    consumed it."""
    fast = sot.symbolic_translate(_model())
    calls = []
    for step in range(5):
        out = fast(_ones(float(step + 1)))
        calls.append(weakref.ref(_latest_call()))
        loss = (out * out).sum()
        loss.backward(retain_graph=True)
        loss.backward(retain_graph=step % 2 == 0)  # (kept after the pass, or returned by it)
        assert (_latest_call().snapshot is not None) == (step % 2 == 0)
    assert len(_scopes()) <= 2
    kept = calls[-1]
    assert kept().home is not None and kept().scope not in _scopes()
    del out, loss
    gc.collect()
    assert all(call() is None for call in calls)
    assert len(_scopes()) == 2  # (both back)


def test_a_pass_of_unknown_kind_keeps_the_scope(compile_all, monkeypatch):
    """A pass the wrappers did not see (started from C++): the hook cannot tell whether it frees the graph and
    keeps the values; a later pass works."""
    fast = sot.symbolic_translate(_model())
    out = fast(_ones())
    monkeypatch.setattr(backward_pass, "current", lambda: None)
    out.sum().backward(retain_graph=True)
    assert _latest_call().snapshot is not None
    monkeypatch.undo()
    out.sum().backward()
    assert _latest_call().snapshot is None and _latest_call().consumed


def test_a_parameter_changed_in_place_between_two_passes_is_refused(compile_all):
    """As eager: the second pass reads the weight the first one read (saved by the matmul), changed since."""
    model = _model()
    fast = sot.symbolic_translate(model)
    for network, layer in ((copy.deepcopy(model), None), (fast, model)):
        out = network(_ones())
        loss = (out * out).sum()
        loss.backward(retain_graph=True)
        with paddle.no_grad():
            (layer or network)[2].weight.scale_(2.0)
        with pytest.raises(Exception, match="modified by an inplace operation"):
            loss.backward()


def test_a_backward_inside_a_hook_of_a_retained_pass(compile_all):
    """Reentrancy: a hook of the outer pass (which keeps the graph) runs a whole backward through another call
    of the same program; both passes and the later one give eager's gradients."""

    def scenario(network, layer):
        out = network(_ones())
        doubled = out * 2.0
        inner_grads = []

        def hook(grad):
            inner = network(_ones(3.0))
            inner.sum().backward()
            inner_grads.append(_grads(layer))
            return grad

        doubled.register_hook(hook)
        doubled.sum().backward(retain_graph=True)
        (out * out).sum().backward()
        return inner_grads[0] + _grads(layer)

    _compare(scenario)


def test_a_gan_loop_with_retain_graph_trains_as_eager(compile_all):
    """The discriminator's loss is taken with ``retain_graph=True``, the generator's goes back through the same
    graph of the discriminator's call; two optimizers step. Parameters after some steps equal eager's."""

    def train(translate: bool) -> list:
        paddle.seed(7)
        generator = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 4))
        discriminator = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
        g_opt = paddle.optimizer.SGD(0.1, parameters=generator.parameters())
        d_opt = paddle.optimizer.SGD(0.1, parameters=discriminator.parameters())
        g = sot.symbolic_translate(generator) if translate else generator
        d = sot.symbolic_translate(discriminator) if translate else discriminator
        real = paddle.to_tensor(np.random.default_rng(0).standard_normal((5, 4)).astype("float32"))
        noise = paddle.to_tensor(np.random.default_rng(1).standard_normal((5, 2)).astype("float32"))
        for _ in range(4):
            fake_score = d(g(noise))
            d_loss = fake_score.mean() - d(real).mean()
            d_opt.clear_grad()
            g_opt.clear_grad()
            d_loss.backward(retain_graph=True)
            d_opt.step()  # (changes the weights the retained graph saved: the generator's pass reads them)
            d_opt.clear_grad()
            (-fake_score.mean()).backward()
            g_opt.step()
        return [p.numpy() for p in (*generator.parameters(), *discriminator.parameters())]

    assert_observed_same(train(True), train(False), "values", atol=1e-6)


class _TwoGraphs(nn.Layer):
    """A graph break in the middle: the second graph's input is the first one's output (a program output: it
    keeps its own backward too)."""

    def __init__(self) -> None:
        super().__init__()
        paddle.seed(8)
        self.fc1, self.fc2 = nn.Linear(4, 6), nn.Linear(6, 2)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        h = paddle.tanh(self.fc1(x))
        print("", end="")  # (a graph break)
        return self.fc2(h * h)


def test_later_passes_through_two_graphs_around_a_break(compile_all):
    model = _TwoGraphs()
    eager = copy.deepcopy(model)
    fast = sot.symbolic_translate(model)

    def scenario(network, layer):
        out = network(_ones())
        loss = (out * out).sum()
        loss.backward(retain_graph=True)
        (g,) = paddle.grad(loss, [layer.fc1.weight])
        loss.backward()
        return [g.numpy()] + _grads(layer)

    for _ in range(2):
        model.clear_gradients()
        eager.clear_gradients()
        assert_observed_same(scenario(fast, model), scenario(eager, eager), "values", atol=1e-6)
    assert sot.stats().graph_breaks >= 1

    def differentiated(network, layer):  # (create_graph through both graphs' own backward, then a pass more)
        (g,) = paddle.grad((network(_ones()) ** 2).sum(), [layer.fc1.weight], create_graph=True)
        return [g.numpy()] + [h.numpy() for h in paddle.grad((g * g).sum(), [layer.fc1.weight, layer.fc2.weight])]

    assert_observed_same(differentiated(fast, model), differentiated(eager, eager), "values", rtol=1e-5, atol=1e-5)

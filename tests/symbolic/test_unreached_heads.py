"""A backward pass reaching some results of a compiled program leaves the tensors only the others depend on
without gradient, as eager (sot/symbolic/unreached_heads.py): the program, one grad node, gave them zeros."""
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
from sot.symbolic.unreached_heads import head_leaves


def _parameters(count: int, seed: int = 1) -> list[paddle.Tensor]:
    paddle.seed(seed)
    shapes = [[2, 2], [2, 1], [2, 3]]
    return [paddle.create_parameter(shapes[i], "float32") for i in range(count)]


def _two_heads(x: paddle.Tensor, w1: paddle.Tensor, w2: paddle.Tensor, w3: paddle.Tensor) -> tuple:
    h = (x @ w1).tanh()
    return (h @ w2).sum(), (h @ w3).mean()  # (w2, w3: one result's head each)


def _explained(function: Any, *args: Any) -> Any:
    sot.reset()
    return sot.explain(function, *args).graphs[0]


@pytest.mark.parametrize("which", [0, 1])
def test_a_pass_through_one_head_leaves_the_other_without_gradient(compile_all, which: int) -> None:
    """Then a pass through the other result (the first kept its graph) accumulates as eager's."""
    x = paddle.ones([3, 2])
    runs = []
    for function in (_two_heads, sot.symbolic_translate(_two_heads)):
        w1, w2, w3 = _parameters(3)
        results = function(x, w1, w2, w3)
        results[which].backward(retain_graph=True)
        first = [w1.grad.clone(), w2.grad is None, w3.grad is None]
        results[1 - which].backward()
        runs.append([*results, first, w1.grad, w2.grad, w3.grad])
    assert_same(runs[1], runs[0])
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)
    graph = _explained(_two_heads, x, *_parameters(3))
    assert len(compiled_programs(graph.program)) == 1  # (still one program: corrected, not split)


def test_a_leaf_input_only_one_head_reads_keeps_no_gradient(compile_all) -> None:
    x = paddle.ones([3, 2])
    runs = []
    for function in (_two_heads, sot.symbolic_translate(_two_heads)):
        w1, w2, _ = _parameters(3)
        w3 = paddle.full([2, 3], 0.5)
        w3.stop_gradient = False  # (a leaf that is not a parameter)
        a, b = function(x, w1, w2, w3)
        a.backward()
        runs.append([a, b, w1.grad, w2.grad, w3.grad is None])
    assert_same(runs[1], runs[0])


def test_a_gradient_accumulated_before_the_pass_is_kept(compile_all) -> None:
    """A head with a gradient from an earlier pass: zeros added, its gradient unchanged, as eager's."""
    x = paddle.ones([3, 2])
    runs = []
    for function in (_two_heads, sot.symbolic_translate(_two_heads)):
        w1, w2, w3 = _parameters(3)
        function(x, w1, w2, w3)[1].backward()
        a, b = function(x, w1, w2, w3)
        a.backward()
        runs.append([w1.grad, w2.grad, w3.grad])
    assert_same(runs[1], runs[0])


def test_paddle_grad_of_one_head_matches_eager(compile_all) -> None:
    x = paddle.ones([3, 2])
    runs = []
    for function in (_two_heads, sot.symbolic_translate(_two_heads)):
        w1, w2, w3 = _parameters(3)
        a, b = function(x, w1, w2, w3)
        grads = paddle.grad([a], [w1, w2, w3], allow_unused=True)
        runs.append([grads[0], grads[1], grads[2] is None, w1.grad is None, w3.grad is None])
    assert_same(runs[1], runs[0])


def test_paddle_grad_of_one_head_without_allow_unused_raises_as_eager(compile_all) -> None:
    x = paddle.ones([3, 2])
    errors = []
    for function in (_two_heads, sot.symbolic_translate(_two_heads)):
        w1, w2, w3 = _parameters(3)
        a, _ = function(x, w1, w2, w3)
        with pytest.raises(ValueError) as raised:
            paddle.grad([a], [w1, w3])
        errors.append(str(raised.value).splitlines()[0])
    assert errors[1] == errors[0]


def test_paddle_grad_with_create_graph_of_one_head_matches_eager(compile_all) -> None:
    """Second order through the head reached; the other head's target is None."""
    x = paddle.ones([3, 2])
    runs = []
    for function in (_two_heads, sot.symbolic_translate(_two_heads)):
        w1, w2, w3 = _parameters(3)
        a, _ = function(x, w1, w2, w3)
        g1, g2, g3 = paddle.grad([a], [w1, w2, w3], create_graph=True, allow_unused=True)
        (g1.square().sum() + g2.sum()).backward()
        runs.append([g1, g2, g3 is None, w1.grad, w2.grad, w3.grad is None])
    assert_same(runs[1], runs[0])


class _AuxiliaryClassifier(nn.Layer):
    """GoogLeNet's shape: a trunk, an auxiliary head on a middle activation, the main head at the end."""

    def __init__(self, dropout: float) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(6, 16), nn.ReLU())
        self.body = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Dropout(dropout))
        self.aux = nn.Sequential(nn.Linear(16, 8), nn.ReLU(), nn.Dropout(dropout), nn.Linear(8, 3))
        self.main = nn.Sequential(nn.Dropout(dropout), nn.Linear(16, 3))

    def forward(self, x: paddle.Tensor) -> tuple:
        middle = self.stem(x)
        aux = self.aux(middle)
        return self.main(self.body(middle)), aux


def _auxiliary_step(model: nn.Layer, opt: Any, x: paddle.Tensor, label: paddle.Tensor, with_aux: bool) -> tuple:
    main, aux = model(x)
    loss = F.cross_entropy(main, label)
    if with_aux:
        loss = loss + 0.3 * F.cross_entropy(aux, label)
    loss.backward()
    opt.step()
    opt.clear_grad(set_to_zero=False)
    return loss, main, aux


@pytest.mark.parametrize("dropout", [0.0, 0.5])
def test_training_with_and_without_the_auxiliary_head_matches_eager(compile_all, dropout: float) -> None:
    """AdamW moves the auxiliary head only in the steps whose loss uses it, as eager (the program gave it
    gradients of zeros in the others: weight decay and momentum moved it)."""
    def make() -> tuple:
        paddle.seed(0)
        model = _AuxiliaryClassifier(dropout)
        return model, paddle.optimizer.AdamW(1e-2, parameters=model.parameters(), weight_decay=0.1)

    (model, opt), (e_model, e_opt) = make(), make()
    fast = sot.symbolic_translate(model)
    for index in range(4):
        x, label = paddle.randn([5, 6]), paddle.randint(0, 3, [5])
        paddle.seed(30 + index)
        expected = _auxiliary_step(e_model, e_opt, x, label, index % 2 == 1)
        paddle.seed(30 + index)
        assert_same(list(_auxiliary_step(fast, opt, x, label, index % 2 == 1)), list(expected))
        for p, e_p in zip(model.parameters(), e_model.parameters()):
            np.testing.assert_array_equal(p.numpy(), e_p.numpy())
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


class _Encoder(nn.Layer):
    """Returns every layer's hidden state: a layer's parameters reach its own and every later one."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.LayerList([nn.Linear(4, 4) for _ in range(3)])

    def forward(self, x: paddle.Tensor) -> list:
        states = []
        for layer in self.layers:
            x = F.gelu(layer(x))
            states.append(x)
        return states


@pytest.mark.parametrize("which", [0, 1, 2])
def test_a_pass_from_an_earlier_hidden_state_leaves_the_later_layers_without_gradient(compile_all,
                                                                                    which: int) -> None:
    x = paddle.randn([2, 4])
    runs = []
    for translate in (False, True):
        paddle.seed(0)
        model = _Encoder()
        states = (sot.symbolic_translate(model) if translate else model)(x)
        states[which].sum().backward()
        runs.append([*states, [p.grad for p in model.parameters()]])
    assert_same(runs[1], runs[0])


def _tied_heads(x: paddle.Tensor, w1: paddle.Tensor, w2: paddle.Tensor) -> tuple:
    h = x @ w1
    return (h @ w2).sum(), (h.tanh() @ w2).sum(), h.mean()


@pytest.mark.parametrize("which", [0, 1, 2])
def test_a_parameter_shared_by_two_heads_gets_a_gradient_from_either(compile_all, which: int) -> None:
    x = paddle.ones([3, 2])
    runs = []
    for function in (_tied_heads, sot.symbolic_translate(_tied_heads)):
        w1, w2 = _parameters(2)
        results = function(x, w1, w2)
        results[which].backward()
        runs.append([*results, w1.grad, w2.grad])
    assert_same(runs[1], runs[0])


def test_the_usual_forward_has_nothing_to_correct(compile_all) -> None:
    """No hook on a graph whose every leaf reaches every result (one result; or all results sharing them)."""
    def shared(x: paddle.Tensor, w1: paddle.Tensor, w2: paddle.Tensor) -> tuple:
        y = (x @ w1).tanh() @ w2
        return y.sum(), y.mean()

    x = paddle.ones([3, 2])
    assert head_leaves(_explained(shared, x, *_parameters(2)).sir) is None
    model = nn.Sequential(nn.Linear(2, 4), nn.ReLU(), nn.Linear(4, 1))
    assert head_leaves(_explained(model, x).sir) is None
    assert head_leaves(_explained(_two_heads, x, *_parameters(3)).sir) is not None


# Operands eager's backward of an op does not differentiate (``.grad`` None): the program's gave them zeros.
_OPERANDS_WITHOUT_GRADIENT = {
    "lerp weight": lambda x, w: paddle.lerp(x, x * 2, w),
    "lerp method weight": lambda x, w: x.lerp(x * 2, w),
    "scale by a tensor": lambda x, w: paddle.scale(x, w[0, :1], 0.5),
    "expand_as shape": lambda x, w: x[:1].expand_as(w),
    "label_smooth prior": lambda x, w: F.label_smooth(F.softmax(x).unsqueeze(0), prior_dist=F.softmax(w[:1]),
                                                      epsilon=0.2),
    "soft label": lambda x, w: F.cross_entropy(x, F.softmax(w), soft_label=True),
    "clip bounds": lambda x, w: paddle.clip(x, w[0, 0] - 1.0, w[0, 1] + 1.0),
    "clip method bounds": lambda x, w: x.clip(min=w.mean()),
    "type_as other": lambda x, w: x.type_as(w),
    # (argsort's indices require gradients in eager: an index operand of a gather-like op takes none)
    "take_along_axis indices": lambda x, w: paddle.take_along_axis(x, paddle.argsort(w, 1), 1),
    "gather index": lambda x, w: x.gather(paddle.argsort(w, 1)[0, :2] % 3),
    "index_select index": lambda x, w: paddle.index_select(x, paddle.argsort(w, 1)[0], 1),
    "embedding ids": lambda x, w: F.embedding(paddle.argsort(w, 1) % 3, x),
}


@pytest.mark.parametrize("name", list(_OPERANDS_WITHOUT_GRADIENT))
@pytest.mark.parametrize("as_parameter", [False, True], ids=["leaf input", "parameter"])
def test_an_operand_eager_does_not_differentiate_keeps_no_gradient(compile_all, name: str,
                                                                   as_parameter: bool) -> None:
    fn = _OPERANDS_WITHOUT_GRADIENT[name]
    fast = sot.symbolic_translate(fn)
    for call in range(2):
        results = []
        for function in (fn, fast):
            x = paddle.to_tensor(np.random.default_rng(call).standard_normal([3, 4]).astype("float32"),
                                 stop_gradient=False)
            paddle.seed(call)
            w = paddle.create_parameter([3, 4], "float32") if as_parameter else \
                paddle.to_tensor(np.random.default_rng(call + 9).random([3, 4]).astype("float32"), stop_gradient=False)
            out = function(x if not as_parameter else x.detach(), w)
            out.sum().backward()
            results.append((out, None if as_parameter else x.grad, w.grad))
        assert_same(results[1][0], results[0][0])
        assert results[1][2] is None and results[0][2] is None
        if not as_parameter:
            assert_same(results[1][1], results[0][1])
    assert sot.stats().graph_breaks == 0 and sot.stats().fallbacks == 0

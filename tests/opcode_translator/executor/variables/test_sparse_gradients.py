"""Ops with a sparse eager gradient (``nn.Embedding(sparse=True)``, ``F.embedding(..., sparse=True)``) give their
weight a SelectedRows gradient; through a compiled program it would be dense: equal values, but an optimizer
treating them differently updates differently (``Adam(lazy_mode=True)`` moves only the looked-up rows of a
sparse gradient, every row of a dense one). While gradients are recorded such a call breaks the graph and runs
eagerly; without them (``no_grad``, a frozen weight) it stays compiled."""
from __future__ import annotations

import copy

import numpy as np
import paddle
import paddle.nn as nn
import paddle.nn.functional as F

import sot


class _Bag(nn.Layer):
    def __init__(self, sparse: bool = True) -> None:
        super().__init__()
        self.embedding = nn.Embedding(10, 4, sparse=sparse)
        self.head = nn.Linear(4, 2)

    def forward(self, ids: paddle.Tensor) -> paddle.Tensor:
        return self.head(self.embedding(ids)).sum(axis=1)


def _assert_same_gradient(got: paddle.Tensor, want: paddle.Tensor) -> None:
    """Same kind (SelectedRows or dense), same rows for a sparse one, same values."""
    assert got.is_selected_rows() == want.is_selected_rows()
    if want.is_selected_rows():
        assert list(got.rows()) == list(want.rows())
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


def test_a_sparse_embeddings_lazy_adam_updates_match_eager() -> None:
    paddle.seed(2)
    model = _Bag()
    eager = copy.deepcopy(model)
    fast = sot.symbolic_translate(model)
    optimizers = [paddle.optimizer.Adam(0.1, parameters=layer.parameters(), lazy_mode=True)
                  for layer in (model, eager)]
    with sot.config.patch(min_graph_size=0):
        for ids in ([[1, 2, 3]], [[4, 5, 1]], [[7, 7, 2]], [[1, 9, 0]]):
            for network, optimizer in zip((fast, eager), optimizers):
                network(paddle.to_tensor(ids)).sum().backward()
                optimizer.step()
                optimizer.clear_grad()
    for got, want in zip(model.parameters(), eager.parameters()):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    assert sot.stats().fallbacks == 0


def _one_backward(sparse: bool, seed: int) -> tuple[_Bag, _Bag]:
    """A `_Bag` run translated (every graph compiled) and its eager copy, each through one backward; the
    embedding gradients compared."""
    paddle.seed(seed)
    model = _Bag(sparse=sparse)
    eager = copy.deepcopy(model)
    fast = sot.symbolic_translate(model)
    ids = paddle.to_tensor([[1, 2, 1]])
    with sot.config.patch(min_graph_size=0):
        fast(ids).sum().backward()
    eager(ids).sum().backward()
    _assert_same_gradient(model.embedding.weight.grad, eager.embedding.weight.grad)
    return model, eager


def test_a_sparse_embedding_layer_breaks_the_graph_and_its_weight_gets_eagers_selected_rows() -> None:
    model, eager = _one_backward(sparse=True, seed=3)
    assert model.embedding.weight.grad.is_selected_rows()
    np.testing.assert_allclose(model.head.weight.grad.numpy(), eager.head.weight.grad.numpy(), rtol=1e-6)
    stats = sot.stats()
    assert (stats.graph_breaks, stats.fallbacks) == (1, 0)
    assert stats.compiled_graphs >= 1  # (the head after the break)


def test_a_dense_embedding_still_compiles_without_a_break() -> None:
    _one_backward(sparse=False, seed=4)
    stats = sot.stats()
    assert (stats.graph_breaks, stats.fallbacks, stats.compiled_graphs) == (0, 0, 1)


def test_f_embedding_with_sparse_true_in_an_inlined_helper_gives_selected_rows() -> None:
    paddle.seed(5)
    weight = paddle.create_parameter([10, 4], "float32")
    eager_weight = paddle.create_parameter([10, 4], "float32")
    eager_weight.set_value(weight)

    def lookup(ids: paddle.Tensor, table: paddle.Tensor) -> paddle.Tensor:
        return F.embedding(ids, table, sparse=True) * 2.0

    def step(ids: paddle.Tensor, table: paddle.Tensor) -> paddle.Tensor:
        return (lookup(ids + 1, table) + 1.0).tanh().sum()

    ids = paddle.to_tensor([0, 3, 3, 6])
    with sot.config.patch(min_graph_size=0):
        loss = sot.symbolic_translate(step)(ids, weight)
    loss.backward()
    want = step(ids, eager_weight)
    want.backward()
    np.testing.assert_allclose(loss.numpy(), want.numpy(), rtol=1e-6)
    _assert_same_gradient(weight.grad, eager_weight.grad)
    assert weight.grad.is_selected_rows()
    assert sot.stats().fallbacks == 0


def test_a_sparse_embedding_without_gradients_stays_compiled() -> None:
    paddle.seed(6)
    model = _Bag()
    fast = sot.symbolic_translate(model)
    ids = paddle.to_tensor([[1, 2, 3]])
    with sot.config.patch(min_graph_size=0), paddle.no_grad():
        np.testing.assert_allclose(fast(ids).numpy(), model.forward(ids).numpy(), rtol=1e-6)
    stats = sot.stats()
    assert (stats.graph_breaks, stats.fallbacks, stats.compiled_graphs) == (0, 0, 1)


def test_a_frozen_sparse_embedding_compiles_and_unfreezing_it_retranslates_to_a_sparse_gradient() -> None:
    paddle.seed(7)
    model = _Bag()
    model.embedding.weight.stop_gradient = True
    eager = copy.deepcopy(model)
    fast = sot.symbolic_translate(model)
    ids = paddle.to_tensor([[1, 2, 3]])
    with sot.config.patch(min_graph_size=0):
        fast(ids).sum().backward()
        stats = sot.stats()
        assert (stats.graph_breaks, stats.compiled_graphs) == (0, 1)
        assert model.embedding.weight.grad is None
        model.embedding.weight.stop_gradient = False
        eager.embedding.weight.stop_gradient = False
        fast(ids).sum().backward()
    eager(ids).sum().backward()
    _assert_same_gradient(model.embedding.weight.grad, eager.embedding.weight.grad)
    assert model.embedding.weight.grad.is_selected_rows()


def test_a_subclass_calling_the_sparse_embeddings_forward_gets_selected_rows() -> None:
    class Scaled(nn.Embedding):
        def forward(self, ids: paddle.Tensor) -> paddle.Tensor:
            return super().forward(ids) * 3.0

    paddle.seed(8)
    layer = Scaled(10, 4, sparse=True)
    eager = copy.deepcopy(layer)
    ids = paddle.to_tensor([[4, 1, 4]])
    with sot.config.patch(min_graph_size=0):
        sot.symbolic_translate(layer)(ids).sum().backward()
    eager(ids).sum().backward()
    _assert_same_gradient(layer.weight.grad, eager.weight.grad)
    assert layer.weight.grad.is_selected_rows()

"""``nn.RNN``/``nn.BiRNN`` layers are compiled, built unrolled as eager runs them (`sir._rnn_unrolled_as_eager`).

Paddle's static form of these layers (a while op over tensor arrays) fails to build in Paddle 3.3.1, and the
whole graph then ran eagerly (correct, never compiled). Built as eager's loop over the time steps, the program
runs every kernel and gives eager's outputs and gradients bit for bit. A time dimension the program does not
know (a dynamic sequence length) is not built in Paddle's form, whose final states have no backward Paddle
can lower (``backward()`` raised, the forward's results right): an input's is pinned (a translation per
length), a computed tensor's breaks the graph before the layer."""
from __future__ import annotations

from typing import Any

import numpy as np
import paddle
import pytest

import sot
from conftest import assert_counts


class RecurrentModel(paddle.nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.rnn = paddle.nn.RNN(paddle.nn.SimpleRNNCell(4, 8))
        self.bi = paddle.nn.BiRNN(paddle.nn.GRUCell(8, 6), paddle.nn.GRUCell(8, 6))
        self.lstm = paddle.nn.RNN(paddle.nn.LSTMCell(12, 5), is_reverse=True)
        self.fc = paddle.nn.Linear(5, 2)

    def forward(self, x: paddle.Tensor, lengths: paddle.Tensor) -> paddle.Tensor:
        y, _ = self.rnn(x)
        z, _ = self.bi(y, sequence_length=lengths)
        w, (h, _) = self.lstm(z)
        return self.fc(w).tanh().sum(-1) * 2 + h.sum()


def _outcome(model: paddle.nn.Layer, fn: Any, x: paddle.Tensor, lengths: paddle.Tensor) -> tuple:
    model.clear_gradients()
    out = fn(x, lengths)
    out.sum().backward()
    return out.numpy().tobytes(), [p.grad.numpy().tobytes() for p in model.parameters()]


def _inputs(steps: int) -> tuple[paddle.Tensor, paddle.Tensor]:
    rng = np.random.default_rng(steps)
    x = paddle.to_tensor(rng.standard_normal((3, steps, 4)).astype("float32"))
    return x, paddle.to_tensor([steps, steps - 2, steps - 1])


def test_a_recurrent_model_runs_compiled_with_eager_results(compile_all: Any) -> None:
    paddle.seed(0)
    model = RecurrentModel()
    fast = sot.symbolic_translate(model)
    x, lengths = _inputs(5)
    expected = _outcome(model, model, x, lengths)
    assert _outcome(model, fast, x, lengths) == expected
    with sot.profile() as prof:
        assert _outcome(model, fast, x, lengths) == expected
    assert prof.total.compiled_kernel_fraction > 0.9, str(prof)
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


def test_a_dynamic_number_of_steps_still_gives_eager_results(compile_all: Any) -> None:
    paddle.seed(0)
    model = RecurrentModel()
    fast = sot.symbolic_translate(model)
    for steps in (5, 7, 6):
        x, lengths = _inputs(steps)
        assert _outcome(model, fast, x, lengths) == _outcome(model, model, x, lengths)


class LastStateClassifier(paddle.nn.Layer):
    """Reads the final state ``h`` (the usual classifier over a sequence): Paddle's form over a dynamic
    number of steps built, and ``backward()`` then failed ("Only support DenseTensorType ...")."""

    def __init__(self, embedded: bool) -> None:
        super().__init__()
        self.embedding = paddle.nn.Embedding(10, 4) if embedded else None
        self.rnn = paddle.nn.RNN(paddle.nn.GRUCell(4, 8))
        self.fc = paddle.nn.Linear(8, 2)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        if self.embedding is not None:
            x = self.embedding(x)
        y, h = self.rnn(x)
        return self.fc(y).mean() + self.fc(h).mean()


def _sequence(embedded: bool, steps: int) -> paddle.Tensor:
    rng = np.random.default_rng(steps)
    if embedded:
        return paddle.to_tensor(rng.integers(0, 10, (3, steps)))
    return paddle.to_tensor(rng.standard_normal((3, steps, 4)).astype("float32"))


@pytest.mark.parametrize("embedded", [False, True], ids=["input sequence", "computed sequence"])
def test_the_final_state_over_a_changing_length_has_eagers_gradients(compile_all: Any, embedded: bool) -> None:
    paddle.seed(0)
    model = LastStateClassifier(embedded)
    fast = sot.symbolic_translate(model)
    for steps in (5, 7, 6, 7):
        x = _sequence(embedded, steps)
        model.clear_gradients()
        expected = model(x)
        expected.backward()
        grads = [p.grad.numpy() for p in model.parameters()]
        model.clear_gradients()
        actual = fast(x)
        actual.backward()
        np.testing.assert_allclose(actual.numpy(), expected.numpy(), rtol=1e-6)
        for got, want in zip([p.grad.numpy() for p in model.parameters()], grads):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
    stats = sot.stats()
    assert stats.fallbacks == 0, stats
    assert stats.cache_hits >= 1, stats  # (the length seen before is served from the cache)

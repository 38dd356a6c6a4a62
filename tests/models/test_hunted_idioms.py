"""Training and inference idioms of user code, each a whole train step translated and compared with eager
Paddle over several steps (same seeds before both calls): results, printed output, parameters, gradients and
buffers afterwards. Found working by a hunt for wrong answers (see tests/known_bugs.txt for those that are
not): schedulers fed by the step, optimizer and model state dicts round-tripped mid-training, structured
outputs and hooks, train/eval switching with an EMA copy, AMP O2 with a GradScaler, data-dependent shapes in
a loss, a PyLayer with non-tensor arguments and paddle.autograd.grad with allow_unused."""
from __future__ import annotations

import collections
import contextlib
import copy
import dataclasses
import io
from typing import Any, Callable

import numpy as np
import paddle
import paddle.nn as nn
import paddle.nn.functional as F
from paddle.autograd import PyLayer

import sot

from .harness import assert_grads_equal



def _assert_tree_close(actual: Any, expected: Any, where: str) -> None:
    """Results compared as trees: tensors by dtype, shape, values and stop_gradient; the rest exactly."""
    if isinstance(expected, paddle.Tensor):
        assert isinstance(actual, paddle.Tensor), f"{where}: {type(actual).__name__} instead of a Tensor"
        assert (actual.dtype, list(actual.shape)) == (expected.dtype, list(expected.shape)), where
        np.testing.assert_allclose(actual.numpy().astype("float64"), expected.numpy().astype("float64"),
                                   rtol=1e-5, atol=1e-6, err_msg=where)
        assert actual.stop_gradient == expected.stop_gradient, where
    elif isinstance(expected, (list, tuple)):
        assert type(actual) is type(expected) and len(actual) == len(expected), where
        for index, (a, e) in enumerate(zip(actual, expected)):
            _assert_tree_close(a, e, f"{where}[{index}]")
    elif isinstance(expected, dict):
        assert type(actual) is type(expected) and actual.keys() == expected.keys(), where
        for key in expected:
            _assert_tree_close(actual[key], expected[key], f"{where}[{key!r}]")
    elif dataclasses.is_dataclass(expected):
        assert type(actual) is type(expected), where
        for field in dataclasses.fields(expected):
            _assert_tree_close(getattr(actual, field.name), getattr(expected, field.name), f"{where}.{field.name}")
    elif isinstance(expected, float):
        assert isinstance(actual, float), where
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6, err_msg=where)
    else:
        assert type(actual) is type(expected) and actual == expected, f"{where}: {actual!r} != {expected!r}"


def _run_printing(step: Callable[..., Any], args: tuple, seed: int) -> tuple[Any, str]:
    paddle.seed(seed)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        result = step(*args)
    return result, printed.getvalue()


def assert_step_parity(make: Callable[[], tuple], step: Callable[..., Any],
                       batch: Callable[[int], list], steps: int = 3) -> None:
    """``steps`` calls of ``step(*make(), *batch(i))`` eagerly and translated, on two copies made alike; every
    layer among the made objects must end with the same state (parameters, buffers) and gradients."""
    translated_objects, eager_objects = make(), make()
    translated = sot.symbolic_translate(step)
    for index in range(steps):
        expected, expected_print = _run_printing(step, (*eager_objects, *batch(index)), 200 + index)
        actual, actual_print = _run_printing(translated, (*translated_objects, *batch(index)), 200 + index)
        _assert_tree_close(actual, expected, f"step {index}")
        assert actual_print == expected_print
    for mine, theirs in zip(translated_objects, eager_objects):
        if not isinstance(theirs, nn.Layer):
            continue
        for (name, value), (_, expected) in zip(mine.state_dict().items(), theirs.state_dict().items()):
            np.testing.assert_allclose(value.numpy().astype("float64"), expected.numpy().astype("float64"),
                                       rtol=1e-5, atol=1e-6, err_msg=name)
        for (name, param), (_, expected) in zip(mine.named_parameters(), theirs.named_parameters()):
            assert (param.grad is None) == (expected.grad is None), name
            if expected.grad is not None:
                np.testing.assert_allclose(param.grad.numpy(), expected.grad.numpy(), rtol=1e-5, atol=1e-6,
                                           err_msg=name)
    assert sot.stats().translate_count > 0


def classification_batch(index: int) -> list:
    paddle.seed(100 + index)
    return [paddle.randn([8, 4]), paddle.randint(0, 3, [8])]


def small_mlp(dropout: float = 0.0) -> nn.Layer:
    paddle.seed(0)
    return nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Dropout(dropout), nn.Linear(16, 3))


# -- schedulers, state dicts and logging ---------------------------------------------------------------------


def make_warmup_and_plateau() -> tuple:
    model = small_mlp()
    warmup = paddle.optimizer.lr.LinearWarmup(paddle.optimizer.lr.CosineAnnealingDecay(0.1, 10), warmup_steps=2,
                                              start_lr=0.0, end_lr=0.1)
    optimizer = paddle.optimizer.AdamW(warmup, parameters=model.parameters(), weight_decay=0.01)
    plateau = paddle.optimizer.lr.ReduceOnPlateau(1.0, patience=0, factor=0.5)
    return model, optimizer, warmup, plateau


def step_with_schedulers_and_state_dicts(model, optimizer, warmup, plateau, x, y):
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    total_norm = nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.1)
    optimizer.step()
    optimizer.clear_grad()
    warmup.step()
    plateau.step(loss)
    optimizer.set_state_dict(optimizer.state_dict())
    model.set_state_dict({name: value.clone() for name, value in model.state_dict().items()})
    print(f"loss {loss.item():.4f} norm {float(total_norm):.4f} lr {optimizer.get_lr():.5f}")
    return loss, total_norm, optimizer.get_lr(), plateau.last_lr


def test_schedulers_clipping_and_state_dict_round_trips_match_eager() -> None:
    assert_step_parity(make_warmup_and_plateau, step_with_schedulers_and_state_dicts, classification_batch, steps=4)


# -- structured outputs and hooks ----------------------------------------------------------------------------

Features = collections.namedtuple("Features", ["logits", "hidden"])


@dataclasses.dataclass
class ModelOutput:
    logits: paddle.Tensor
    loss: Any = None


class StructuredOutputs(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Linear(4, 16)
        self.head = nn.Linear(16, 3)

    def forward(self, x: paddle.Tensor, kind: str) -> Any:
        hidden = F.relu(self.encoder(x))
        logits = self.head(hidden)
        if kind == "dict":
            return {"logits": logits, "hidden": hidden}
        if kind == "namedtuple":
            return Features(logits, hidden)
        return ModelOutput(logits)


def make_structured_with_hooks() -> tuple:
    paddle.seed(0)
    model = StructuredOutputs()
    model.encoder.register_forward_pre_hook(lambda layer, inputs: (inputs[0] * 2.0,))
    model.head.register_forward_post_hook(lambda layer, inputs, output: output + 1.0)
    return model, paddle.optimizer.SGD(0.1, parameters=model.parameters())


def step_with_structured_outputs(model, optimizer, x, y):
    as_dict, as_tuple, as_dataclass = model(x, "dict"), model(x, "namedtuple"), model(x, "dataclass")
    as_dataclass.loss = F.cross_entropy(as_dataclass.logits, y)
    loss = F.cross_entropy(as_dict["logits"], y) + as_tuple.hidden.mean() + as_dataclass.loss
    loss.backward()
    optimizer.step()
    optimizer.clear_grad()
    return as_dict, as_tuple, as_dataclass


def test_dict_namedtuple_and_dataclass_outputs_with_input_changing_hooks_match_eager() -> None:
    assert_step_parity(make_structured_with_hooks, step_with_structured_outputs, classification_batch)


# -- train/eval switching, a no_grad evaluation and an EMA copy ----------------------------------------------


def make_batchnorm_with_ema() -> tuple:
    paddle.seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.BatchNorm1D(16), nn.ReLU(), nn.Dropout(0.5), nn.Linear(16, 3))
    ema = copy.deepcopy(model)
    for param in ema.parameters():
        param.stop_gradient = True
    return model, ema, paddle.optimizer.Momentum(0.1, parameters=model.parameters())


@paddle.no_grad()
def evaluate(model, x, y):
    model.eval()
    logits = model(x)
    accuracy = (logits.argmax(-1) == y).astype("float32").mean()
    model.train()
    return logits, accuracy


def step_with_eval_and_ema(model, ema, optimizer, x, y):
    model.train()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.clear_grad()
    with paddle.no_grad():
        for shadow, param in zip(ema.parameters(), model.parameters()):
            shadow.set_value(shadow * 0.9 + param * 0.1)
    logits, accuracy = evaluate(model, x, y)
    correct = 0
    correct += (logits.argmax(-1) == y).sum().item()
    ema.eval()
    return loss, logits, accuracy, correct, ema(x), model.training, model[1].training


def test_train_eval_switching_with_no_grad_evaluation_and_ema_matches_eager() -> None:
    assert_step_parity(make_batchnorm_with_ema, step_with_eval_and_ema, classification_batch)


# -- AMP -----------------------------------------------------------------------------------------------------


def make_o2_float16() -> tuple:
    paddle.seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.LayerNorm(16), nn.ReLU(), nn.Linear(16, 3))
    optimizer = paddle.optimizer.AdamW(0.01, parameters=model.parameters(), multi_precision=True)
    model, optimizer = paddle.amp.decorate(model, optimizer, level="O2", dtype="float16")
    return model, optimizer, paddle.amp.GradScaler(init_loss_scaling=2.0**10, incr_every_n_steps=2)


def step_o2(model, optimizer, scaler, x, y):
    with paddle.amp.auto_cast(level="O2", dtype="float16"):
        logits = model(x)
        loss = F.cross_entropy(logits.astype("float32"), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.clear_grad()
    return loss, logits.dtype == paddle.float32


def test_amp_o2_with_a_grad_scaler_matches_eager() -> None:
    assert_step_parity(make_o2_float16, step_o2, classification_batch, steps=4)


# -- data-dependent shapes and in-batch negatives ------------------------------------------------------------


def make_two_towers() -> tuple:
    paddle.seed(0)
    query, key = nn.Linear(4, 8), nn.Linear(4, 8)
    return query, key, paddle.optimizer.AdamW(0.01, parameters=query.parameters() + key.parameters())


def step_contrastive_with_masks(query, key, optimizer, x, y):
    a = F.normalize(query(x), axis=-1)
    b = F.normalize(key(x.flip([0])), axis=-1)
    logits = paddle.matmul(a, b.T) / 0.07
    labels = paddle.arange(x.shape[0])
    loss = (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels)) / 2
    positive = paddle.masked_select(logits, logits > 0)
    picked = paddle.index_select(logits, paddle.nonzero(y == 1).flatten())
    classes, counts = paddle.unique(y, return_counts=True)
    loss = loss + 1e-3 * (positive.sum() + picked.sum()) + paddle.where(logits > 1, logits, 0.0 * logits).mean()
    loss.backward()
    optimizer.step()
    optimizer.clear_grad()
    accuracy = (logits.argmax(-1) == labels).astype("float32").mean().item()
    return loss, accuracy, positive.shape[0], classes, counts


def test_contrastive_loss_with_data_dependent_shapes_matches_eager() -> None:
    assert_step_parity(make_two_towers, step_contrastive_with_masks, classification_batch)


# -- PyLayer, paddle.autograd.grad, freezing ---------------------------------------------------------------------


class ScaledClip(PyLayer):
    @staticmethod
    def forward(ctx, x, scale, low=-1.0):
        ctx.save_for_backward(x)
        ctx.scale, ctx.low = scale, low
        return (x * scale).clip(min=low)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensor()
        return grad * ctx.scale * (x * ctx.scale > ctx.low).astype(grad.dtype)


def make_mlp_and_adam() -> tuple:
    paddle.seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
    return model, paddle.optimizer.Adam(0.01, parameters=model.parameters())


def step_with_pylayer_grad_and_freezing(model, optimizer, x, y):
    x = x.detach()
    x.stop_gradient = False
    unused = paddle.randn([3])
    unused.stop_gradient = False
    hidden = ScaledClip.apply(model[0](x), 2.0, low=-0.5)
    loss = F.cross_entropy(model[2](hidden), y)
    grad_x, grad_unused = paddle.autograd.grad([loss], [x, unused], retain_graph=True, allow_unused=True)
    (loss + 0.1 * (hidden * grad_x.abs().mean()).mean()).backward()
    optimizer.step()
    optimizer.clear_grad()
    for param in model[0].parameters():
        param.trainable = not param.trainable
    return loss, grad_x, grad_unused is None


def test_pylayer_with_non_tensor_arguments_autograd_grad_and_freezing_match_eager() -> None:
    assert_step_parity(make_mlp_and_adam, step_with_pylayer_grad_and_freezing, classification_batch, steps=4)


# -- weight and spectral norm --------------------------------------------------------------------------------


def make_normalized_weights() -> tuple:
    paddle.seed(0)
    model = nn.Sequential(nn.utils.weight_norm(nn.Linear(4, 16)), nn.ReLU(),
                          nn.utils.spectral_norm(nn.Linear(16, 3), n_power_iterations=1))
    return model, paddle.optimizer.SGD(0.1, parameters=model.parameters())


def plain_step(model, optimizer, x, y):
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.clear_grad()
    return loss


def test_weight_norm_and_spectral_norm_layers_match_eager() -> None:
    assert_step_parity(make_normalized_weights, plain_step, classification_batch)


# -- a momentum encoder with a queue of negatives (MoCo) -----------------------------------------------------


class MomentumContrast(nn.Layer):
    """Python state on the layer (the queue pointer) and a buffer written by slice assignment under no_grad."""

    def __init__(self, queue_size: int = 12, dim: int = 4) -> None:
        super().__init__()
        self.query = nn.Linear(4, dim)
        self.key = copy.deepcopy(self.query)
        for param in self.key.parameters():
            param.stop_gradient = True
        self.register_buffer("queue", F.normalize(paddle.randn([dim, queue_size]), axis=0))
        self.pointer = 0
        self.queue_size = queue_size

    @paddle.no_grad()
    def momentum_update(self, momentum: float = 0.9) -> None:
        for key_param, query_param in zip(self.key.parameters(), self.query.parameters()):
            key_param.set_value(key_param * momentum + query_param * (1 - momentum))

    @paddle.no_grad()
    def enqueue(self, keys: paddle.Tensor) -> None:
        start = self.pointer
        self.queue[:, start:start + keys.shape[0]] = keys.T
        self.pointer = (start + keys.shape[0]) % self.queue_size

    def forward(self, view1: paddle.Tensor, view2: paddle.Tensor) -> paddle.Tensor:
        q = F.normalize(self.query(view1), axis=1)
        self.momentum_update()
        k = F.normalize(self.key(view2), axis=1)
        logits = paddle.concat([(q * k).sum(1, keepdim=True), q @ self.queue.clone().detach()], 1) / 0.2
        self.enqueue(k)
        return F.cross_entropy(logits, paddle.zeros([view1.shape[0]], dtype="int64"))


def make_moco() -> tuple:
    paddle.seed(0)
    model = MomentumContrast()
    return model, paddle.optimizer.SGD(0.1, parameters=model.query.parameters())


def moco_step(model, optimizer, x):
    loss = model(x, x + 0.1 * paddle.randn(x.shape))
    loss.backward()
    optimizer.step()
    optimizer.clear_grad()
    return loss, model.pointer


def test_momentum_encoder_with_a_queue_buffer_matches_eager() -> None:
    def batch(index: int) -> list:
        paddle.seed(100 + index)
        return [paddle.randn([4, 4])]

    assert_step_parity(make_moco, moco_step, batch, steps=5)


# -- a GAN step freezing the discriminator by stop_gradient, truncated BPTT ----------------------------------


def make_gan() -> tuple:
    paddle.seed(0)
    generator = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 4))
    discriminator = nn.Sequential(nn.Linear(4, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))
    return (generator, discriminator, paddle.optimizer.Adam(0.01, parameters=generator.parameters()),
            paddle.optimizer.Adam(0.01, parameters=discriminator.parameters()))


def gan_step(generator, discriminator, generator_optimizer, discriminator_optimizer, real, noise):
    fake = generator(noise)
    for param in discriminator.parameters():
        param.stop_gradient = False
    ones, zeros = paddle.ones([real.shape[0], 1]), paddle.zeros([noise.shape[0], 1])
    d_loss = (F.binary_cross_entropy_with_logits(discriminator(real), ones)
              + F.binary_cross_entropy_with_logits(discriminator(fake.detach()), zeros))
    d_loss.backward()
    discriminator_optimizer.step()
    discriminator_optimizer.clear_grad()
    for param in discriminator.parameters():
        param.stop_gradient = True
    g_loss = F.binary_cross_entropy_with_logits(discriminator(fake), ones)
    g_loss.backward()
    generator_optimizer.step()
    generator_optimizer.clear_grad()
    return d_loss, g_loss, fake


def test_gan_step_freezing_the_discriminator_by_stop_gradient_matches_eager() -> None:
    def batch(index: int) -> list:
        paddle.seed(100 + index)
        return [paddle.randn([6, 4]), paddle.randn([6, 2])]

    assert_step_parity(make_gan, gan_step, batch, steps=3)


def make_lstm_cell() -> tuple:
    paddle.seed(0)
    cell, head = nn.LSTMCell(4, 8), nn.Linear(8, 3)
    return cell, head, paddle.optimizer.Adam(0.01, parameters=cell.parameters() + head.parameters()), {}


def truncated_bptt_step(cell, head, optimizer, carried, x, y):
    h, c = carried.get("state", (paddle.zeros([x.shape[0], 8]), paddle.zeros([x.shape[0], 8])))
    loss = 0
    for t in range(x.shape[1]):
        out, (h, c) = cell(x[:, t], (h, c))
        loss = loss + F.cross_entropy(head(out), y[:, t])
    loss.backward()
    optimizer.step()
    optimizer.clear_grad()
    carried["state"] = (h.detach(), c.detach())
    return loss, h


def test_truncated_bptt_carrying_detached_state_across_steps_matches_eager() -> None:
    def batch(index: int) -> list:
        paddle.seed(100 + index)
        return [paddle.randn([2, 3, 4]), paddle.randint(0, 3, [2, 3])]

    assert_step_parity(make_lstm_cell, truncated_bptt_step, batch, steps=3)


# -- greedy decoding with a key/value cache ------------------------------------------------------------------


class TinyDecoder(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.embedding = nn.Embedding(12, 8)
        self.attention = nn.MultiHeadAttention(8, 2)
        self.head = nn.Linear(8, 12)

    def forward(self, ids: paddle.Tensor, cache: Any) -> tuple:
        hidden = self.embedding(ids)
        out, cache = self.attention(hidden, hidden, hidden, cache=cache)
        return self.head(out), cache


def make_decoder() -> tuple:
    paddle.seed(0)
    model = TinyDecoder()
    model.eval()
    return (model,)


@paddle.no_grad()
def greedy_decode(model, prompt, max_new_tokens, eos=3):
    ids = prompt
    finished = paddle.zeros([prompt.shape[0]], dtype="bool")
    cache = model.attention.gen_cache(model.embedding(prompt), type=nn.MultiHeadAttention.Cache)
    logits, cache = model(prompt, cache)
    for step in range(max_new_tokens):
        token = logits[:, -1].argmax(-1)
        token = paddle.where(finished, paddle.full_like(token, eos), token)
        finished = finished | (token == eos)
        ids = paddle.concat([ids, token.unsqueeze(-1)], axis=1)
        if finished.all():
            break
        logits, cache = model(token.unsqueeze(-1), cache)
    return ids, step


def test_greedy_decoding_with_a_kv_cache_and_early_stop_matches_eager() -> None:
    def batch(index: int) -> list:
        paddle.seed(100 + index)
        return [paddle.randint(0, 12, [3, 4]), 4 + index]

    assert_step_parity(make_decoder, greedy_decode, batch, steps=3)


# -- position buckets by floor division (a known bug: tests/known_bugs.txt) ----------------------------------


class BucketedPositions(nn.Layer):
    """Position ids (int32) divided into buckets by a stride kept as an int64 0-d tensor."""

    def __init__(self) -> None:
        super().__init__()
        self.embedding = nn.Embedding(8, 4)
        self.register_buffer("stride", paddle.to_tensor(2, dtype="int64"))

    def forward(self, positions: paddle.Tensor) -> tuple:
        buckets = positions // self.stride
        return self.embedding(buckets), buckets


def make_bucketed_positions() -> tuple:
    paddle.seed(0)
    model = BucketedPositions()
    return model, paddle.optimizer.SGD(0.1, parameters=model.parameters())


def bucketed_positions_step(model, optimizer, positions):
    embedded, buckets = model(positions)
    loss = embedded.pow(2).mean()
    loss.backward()
    optimizer.step()
    optimizer.clear_grad()
    return loss, buckets


def test_position_buckets_by_floor_division_with_an_int64_stride_match_eager() -> None:
    def batch(index: int) -> list:
        return [paddle.arange(index, index + 12, dtype="int32").reshape([2, 6])]

    with sot.config.patch(min_graph_size=0):
        assert_step_parity(make_bucketed_positions, bucketed_positions_step, batch)


# -- a tensor method whose arguments break the graph (its bound method kept on the stack across the break) ----


class SortedByLength(nn.Layer):
    """Sequences sorted by length with numpy before an LSTM and put back in order afterwards: ``h.index_select``
    is loaded before its argument, whose ``lengths.numpy()`` breaks the graph; the resume function receives
    the bound method ``h.index_select``. It was a Paddle API bound to an eager tensor there (its static call
    failed: a fallback) guarded by identity (a new object at every call: translated again at every call)."""

    def __init__(self) -> None:
        super().__init__()
        self.embedding = nn.Embedding(20, 8)
        self.rnn = nn.LSTM(8, 8)
        self.head = nn.Linear(8, 3)

    def forward(self, ids: paddle.Tensor, lengths: paddle.Tensor) -> paddle.Tensor:
        h = self.embedding(ids)
        order = np.argsort(-lengths.numpy(), kind="stable")
        h = h.index_select(paddle.to_tensor(order), axis=0)
        out, _ = self.rnn(h, sequence_length=lengths.index_select(paddle.to_tensor(order)))
        pooled = out.reshape([int(out.shape[0]), -1, 8]).mean(axis=1)
        restore = paddle.to_tensor(np.argsort(order, kind="stable"))
        return self.head(pooled.index_select(restore, axis=0))


def _assert_step_matches(model: nn.Layer, eager: nn.Layer, out: paddle.Tensor, expected: paddle.Tensor) -> None:
    """One forward's outputs and the parameters' gradients of a loss over them equal eager's; gradients cleared."""
    np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-5, atol=1e-6)
    out.pow(2).mean().backward()
    expected.pow(2).mean().backward()
    assert_grads_equal(model, eager, rtol=1e-5, atol=1e-6)
    model.clear_gradients()
    eager.clear_gradients()


def test_a_tensor_method_called_with_a_breaking_argument_resumes_compiled_and_hits_the_cache() -> None:
    paddle.seed(0)
    model = SortedByLength()
    eager = copy.deepcopy(model)
    fast = sot.symbolic_translate(model)
    batches = [(paddle.randint(1, 20, [4, 6]), paddle.to_tensor([3, 6, 2, 5])),
               (paddle.randint(1, 20, [4, 6]), paddle.to_tensor([6, 1, 4, 4]))] * 2
    for ids, lengths in batches:
        _assert_step_matches(model, eager, fast(ids, lengths), eager(ids, lengths))
    stats = sot.stats()
    assert stats.fallbacks == 0, stats
    translated = stats.translate_count
    for ids, lengths in batches:
        fast(ids, lengths)
    assert sot.stats().translate_count == translated, sot.stats()


# -- padding trimmed by a tensor slice bound -------------------------------------------------------------------------


class TrimmedEncoder(nn.Layer):
    """Padding trimmed before the encoder by the longest sequence of the batch: ``ids[:, :lengths.max()]``
    slices by a one-element tensor (eager reads its value). The frame fell back for good ("slice bounds that
    are not Python constants"); the program slices by the tensor (a data-dependent dimension)."""

    def __init__(self) -> None:
        super().__init__()
        self.embedding = nn.Embedding(20, 8)
        self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0), 1)
        self.head = nn.Linear(8, 3)

    def forward(self, ids: paddle.Tensor, mask: paddle.Tensor) -> paddle.Tensor:
        longest = mask.sum(axis=1).max()
        ids, mask = ids[:, :longest], mask[:, :longest]
        keep = mask.astype("float32")
        attention = (1.0 - keep[:, None, None, :]) * -1e4
        hidden = self.encoder(self.embedding(ids), attention)
        pooled = (hidden * keep.unsqueeze(-1)).sum(axis=1) / keep.sum(axis=1, keepdim=True)
        return self.head(pooled)


def test_padding_trimmed_by_a_tensor_slice_bound_is_one_graph_for_every_length() -> None:
    paddle.seed(0)
    model = TrimmedEncoder()
    eager = copy.deepcopy(model)
    fast = sot.symbolic_translate(model)
    for longest in (3, 5, 2, 6):
        paddle.seed(longest)
        ids = paddle.randint(1, 20, [3, 6])
        mask = (paddle.arange(6)[None, :] < paddle.to_tensor([[longest], [2], [1]])).astype("int64")
        _assert_step_matches(model, eager, fast(ids, mask), eager(ids, mask))
    stats = sot.stats()
    assert (stats.translate_count, stats.graph_breaks, stats.fallbacks) == (1, 0, 0), stats


# -- a Swin window reverse: the batch recovered by int() of a true division ---------------------------------------


def window_partition(x: paddle.Tensor, size: int) -> paddle.Tensor:
    batch, height, width, channels = x.shape
    x = x.reshape([batch, height // size, size, width // size, size, channels])
    return x.transpose([0, 1, 3, 2, 4, 5]).reshape([-1, size, size, channels])


def window_reverse(windows: paddle.Tensor, size: int, height: int, width: int) -> paddle.Tensor:
    batch = int(windows.shape[0] / (height * width / size / size))  # (as PaddleClas' Swin writes it)
    x = windows.reshape([batch, height // size, width // size, size, size, -1])
    return x.transpose([0, 1, 3, 2, 4, 5]).reshape([batch, height, width, -1])


class WindowAttentionBlock(nn.Layer):
    """Self-attention inside 2x2 windows of a 4x4 map. With the batch dynamic, ``windows.shape[0]`` (a
    computed tensor's) divided by a float was pinned: a graph break at every call."""

    def __init__(self, dim: int = 8, size: int = 2, resolution: tuple = (4, 4)) -> None:
        super().__init__()
        self.size, self.resolution = size, resolution
        self.norm = nn.LayerNorm(dim)
        self.attention = nn.MultiHeadAttention(dim, 2)
        self.head = nn.Linear(dim, 3)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        height, width = self.resolution
        batch, _, channels = x.shape
        h = self.norm(x).reshape([batch, height, width, channels])
        windows = window_partition(h, self.size).reshape([-1, self.size * self.size, channels])
        attended = self.attention(windows, windows, windows).reshape([-1, self.size, self.size, channels])
        x = x + window_reverse(attended, self.size, height, width).reshape([batch, height * width, channels])
        return self.head(x.mean(axis=1))


def test_a_swin_window_reverse_over_a_dynamic_batch_is_one_graph() -> None:
    paddle.seed(0)
    model = WindowAttentionBlock()
    eager = copy.deepcopy(model)
    fast = sot.symbolic_translate(model)
    for batch in (2, 3, 5, 4):
        paddle.seed(batch)
        x = paddle.randn([batch, 16, 8])
        _assert_step_matches(model, eager, fast(x), eager(x))
    stats = sot.stats()
    assert (stats.graph_breaks, stats.fallbacks, stats.translate_count) == (0, 0, 2), stats


# -- a @paddle.jit.to_static helper called by a translated model ---------------------------------------------------


@paddle.jit.to_static(full_graph=True)
def static_activation(x: paddle.Tensor) -> paddle.Tensor:
    return paddle.tanh(x) * 2.0 + x.mean()


class CallsAStaticHelper(nn.Layer):
    """Calls a function Paddle compiles itself: its call runs natively (a graph break), and the code Paddle
    transforms it into runs once in static mode to build Paddle's program. That code was translated too (its
    tensors are the program's variables: nothing to simulate), with graph breaks of its own."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return self.fc(static_activation(x)) + 1.0


def test_code_run_while_paddle_builds_a_static_program_is_not_translated() -> None:
    paddle.seed(0)
    model = CallsAStaticHelper()
    fast = sot.symbolic_translate(model)
    x = paddle.randn([3, 4])
    for _ in range(3):
        out = fast(x)
        np.testing.assert_allclose(out.numpy(), model(x).numpy(), rtol=1e-5, atol=1e-6)
    stats = sot.stats()
    # The forward before the helper and its rest after it, each translated once.
    assert (stats.translate_count, stats.graph_breaks, stats.fallbacks) == (2, 1, 0), stats

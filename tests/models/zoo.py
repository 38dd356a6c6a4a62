"""The model zoo: small, deterministic model builders with tiny example inputs.

Shared by the model tests (``tests/models/test_*.py``) and reusable by benchmarks. Every entry is a
`ModelSpec`: ``build()`` makes a fresh model (seeded, so two calls give identical weights), ``inputs()``
makes the example inputs (seeded numpy data, so two calls give equal tensors) and ``loss(output, inputs)``
reduces the model's output to a scalar for backward and training.

Randomness that eager Paddle and a compiled program would draw differently (dropout) is switched off
(``p=0``) in the builders; everything else (BatchNorm statistics included) is deterministic and compared.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

import numpy as np
import paddle
import paddle.nn as nn
import paddle.nn.functional as F
from paddle.autograd import PyLayer

# -- the spec ------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    name: str
    build: Callable[[], nn.Layer]
    inputs: Callable[[], tuple]
    loss: Callable[[Any, tuple], paddle.Tensor]
    # Whether sot should capture one forward as a single graph (no break, no fallback). False only for
    # models whose control flow really depends on tensor data.
    whole_graph: bool = True
    # Long-running (big model or slow to translate/compile): skipped by ``pytest -m 'not slow'``.
    slow: bool = False
    # Inputs with another batch size (a guard miss: retranslation or a symbolic dimension), if checked.
    other_batch: Callable[[], tuple] | None = None
    # Draws random numbers in forward (dropout masks, noise): the harness seeds Paddle alike before the eager
    # and the translated call, and the translation must draw eager's numbers.
    random: bool = False


SEED = 2024


def seeded(builder: Callable[[], nn.Layer], seed: int = SEED) -> Callable[[], nn.Layer]:
    """``builder`` made deterministic: parameters are initialised after ``paddle.seed(seed)``."""

    def build() -> nn.Layer:
        paddle.seed(seed)
        np.random.seed(seed)
        model = builder()
        disable_dropout(model)
        return model

    build.__name__ = getattr(builder, "__name__", "build")
    return build


def disable_dropout(model: nn.Layer) -> nn.Layer:
    """Set every ``nn.Dropout*`` layer to ``p=0``: eager and compiled code would draw different masks."""
    for layer in model.sublayers(include_self=True):
        if isinstance(layer, (nn.Dropout, nn.Dropout2D, nn.Dropout3D, nn.AlphaDropout)):
            layer.p = 0.0
    return model


def randn(*shape: int, seed: int = 0, dtype: str = "float32") -> paddle.Tensor:
    return paddle.to_tensor(np.random.default_rng(seed).standard_normal(shape).astype(dtype))


def randint(low: int, high: int, shape: tuple[int, ...], seed: int = 0) -> paddle.Tensor:
    return paddle.to_tensor(np.random.default_rng(seed).integers(low, high, shape).astype("int64"))


def tensor_leaves(value: Any) -> list[paddle.Tensor]:
    if isinstance(value, paddle.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in tensor_leaves(item)]
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in tensor_leaves(item)]
    return []


def mean_square_loss(output: Any, inputs: tuple) -> paddle.Tensor:
    """A scalar from any output structure: the sum of the mean squares of its float tensors."""
    floats = [t for t in tensor_leaves(output) if t.dtype in (paddle.float32, paddle.float64)]
    return paddle.add_n([(t * t).mean() for t in floats])


def classification_loss(num_classes: int, seed: int = 7) -> Callable[[Any, tuple], paddle.Tensor]:
    """Cross entropy of ``[N, num_classes]`` logits against fixed random labels."""

    def loss(logits: paddle.Tensor, inputs: tuple) -> paddle.Tensor:
        labels = randint(0, num_classes, (logits.shape[0],), seed=seed)
        return F.cross_entropy(logits, labels)

    return loss


# -- vision: paddle.vision.models ---------------------------------------------------------------------------
NUM_CLASSES = 10


def image(batch: int = 2, size: int = 32, seed: int = 0, channels: int = 3) -> tuple:
    return (randn(batch, channels, size, size, seed=seed),)


def _vgg11() -> nn.Layer:
    # vgg11's stock classifier is 25088 -> 4096 -> 4096 (120M parameters). Without the 7x7 pool the features
    # of a 32x32 image are 512x1x1; a small classifier of the same structure keeps ``VGG.forward`` unchanged.
    from paddle.vision.models.vgg import VGG, cfgs, make_layers

    model = VGG(make_layers(cfgs["A"]), num_classes=0, with_pool=False)
    model.num_classes = NUM_CLASSES
    model.classifier = nn.Sequential(nn.Linear(512, 64), nn.ReLU(), nn.Dropout(), nn.Linear(64, 64), nn.ReLU(),
                                     nn.Dropout(), nn.Linear(64, NUM_CLASSES))
    return model


def _alexnet() -> nn.Layer:
    # AlexNet's stock classifier expects 256x6x6 features (a 224x224 image) and has 58M parameters; at 64x64
    # the features are 256x1x1, and a small classifier of the same structure keeps ``AlexNet.forward``.
    model = paddle.vision.models.alexnet(num_classes=NUM_CLASSES)
    model._fc6, model._fc7, model._fc8 = nn.Linear(256, 64), nn.Linear(64, 64), nn.Linear(64, NUM_CLASSES)
    return model


def _googlenet() -> nn.Layer:
    # The two auxiliary heads flatten a 128x3x3 map (a 224x224 image); at 96x96 it is 128x1x1.
    model = paddle.vision.models.googlenet(num_classes=NUM_CLASSES)
    model._fc_o1, model._fc_o2 = nn.Linear(128, 1024), nn.Linear(128, 1024)
    return model


def sum_of_classification_losses(num_classes: int) -> Callable[[Any, tuple], paddle.Tensor]:
    """For models with auxiliary heads (GoogLeNet returns three logits)."""
    single = classification_loss(num_classes)
    return lambda outputs, inputs: paddle.add_n([single(logits, inputs) for logits in outputs])


def _vision(name: str, builder: Callable[[], nn.Layer], size: int = 32, slow: bool = False,
            loss: Callable[[Any, tuple], paddle.Tensor] = classification_loss(NUM_CLASSES),
            channels: int = 3) -> ModelSpec:
    return ModelSpec(name, seeded(builder), lambda: image(2, size, channels=channels), loss, slow=slow,
                     other_batch=lambda: image(3, size, seed=1, channels=channels))


VISION = {
    spec.name: spec for spec in [
        _vision("resnet18", lambda: paddle.vision.models.resnet18(num_classes=NUM_CLASSES)),
        _vision("mobilenet_v2", lambda: paddle.vision.models.mobilenet_v2(scale=0.5, num_classes=NUM_CLASSES)),
        _vision("mobilenet_v3_small",
                lambda: paddle.vision.models.mobilenet_v3_small(scale=0.5, num_classes=NUM_CLASSES)),
        _vision("vgg11", _vgg11),
        _vision("shufflenet_v2", lambda: paddle.vision.models.shufflenet_v2_x0_25(num_classes=NUM_CLASSES)),
        _vision("squeezenet", lambda: paddle.vision.models.squeezenet1_1(num_classes=NUM_CLASSES)),
        _vision("densenet121", lambda: paddle.vision.models.densenet121(num_classes=NUM_CLASSES), slow=True),
        _vision("lenet", lambda: paddle.vision.models.LeNet(num_classes=NUM_CLASSES), size=28, channels=1),
        _vision("alexnet", _alexnet, size=64),
        _vision("mobilenet_v1", lambda: paddle.vision.models.mobilenet_v1(scale=0.25, num_classes=NUM_CLASSES)),
        _vision("mobilenet_v3_large",
                lambda: paddle.vision.models.mobilenet_v3_large(scale=0.5, num_classes=NUM_CLASSES)),
        _vision("shufflenet_v2_swish", lambda: paddle.vision.models.shufflenet_v2_swish(num_classes=NUM_CLASSES)),
        _vision("googlenet", _googlenet, size=96, loss=sum_of_classification_losses(NUM_CLASSES), slow=True),
        # Inception v3's smallest input is 75x75.
        _vision("inception_v3", lambda: paddle.vision.models.inception_v3(num_classes=NUM_CLASSES), size=75,
                slow=True),
        # The ResNets with bottleneck blocks have no width option: full size, small images.
        _vision("resnet50", lambda: paddle.vision.models.resnet50(num_classes=NUM_CLASSES), slow=True),
        _vision("resnext50_32x4d", lambda: paddle.vision.models.resnext50_32x4d(num_classes=NUM_CLASSES), slow=True),
        _vision("wide_resnet50_2", lambda: paddle.vision.models.wide_resnet50_2(num_classes=NUM_CLASSES), slow=True),
    ]
}


# -- text: paddle.nn.Transformer, LSTM, GRU and a GPT written like user code ------------------------------
VOCAB = 50


class TransformerSeq2Seq(nn.Layer):
    """Token and position embeddings around ``paddle.nn.Transformer``, with a causal target mask."""

    def __init__(self, vocab: int = VOCAB, d_model: int = 16, nhead: int = 2, max_len: int = 16) -> None:
        super().__init__()
        self.d_model = d_model
        self.src_embed = nn.Embedding(vocab, d_model)
        self.tgt_embed = nn.Embedding(vocab, d_model)
        self.pos_embed = nn.Embedding(max_len, d_model)
        self.transformer = nn.Transformer(d_model=d_model, nhead=nhead, num_encoder_layers=1,
                                          num_decoder_layers=1, dim_feedforward=32, dropout=0.0)
        self.out = nn.Linear(d_model, vocab)

    def embed(self, embedding: nn.Layer, ids: paddle.Tensor) -> paddle.Tensor:
        positions = paddle.arange(ids.shape[1], dtype="int64").unsqueeze(0)
        return embedding(ids) * math.sqrt(self.d_model) + self.pos_embed(positions)

    def forward(self, src: paddle.Tensor, tgt: paddle.Tensor) -> paddle.Tensor:
        tgt_len = tgt.shape[1]
        tgt_mask = self.transformer.generate_square_subsequent_mask(tgt_len)
        hidden = self.transformer(self.embed(self.src_embed, src), self.embed(self.tgt_embed, tgt),
                                  tgt_mask=tgt_mask)
        return self.out(hidden)


class RNNClassifier(nn.Layer):
    """Embedding, a 2-layer bidirectional LSTM or GRU, masked mean pooling plus last state, an MLP head."""

    def __init__(self, cell: str = "lstm", vocab: int = VOCAB, embed: int = 16, hidden: int = 16,
                 num_classes: int = 4) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab, embed, padding_idx=0)
        rnn_class = {"lstm": nn.LSTM, "gru": nn.GRU}[cell]
        self.rnn = rnn_class(embed, hidden, num_layers=2, direction="bidirect")
        self.norm = nn.LayerNorm(4 * hidden)
        self.fc1 = nn.Linear(4 * hidden, hidden)
        self.fc2 = nn.Linear(hidden, num_classes)

    def forward(self, ids: paddle.Tensor) -> paddle.Tensor:
        mask = (ids != 0).astype("float32").unsqueeze(-1)
        outputs, _ = self.rnn(self.embedding(ids))
        pooled = (outputs * mask).sum(axis=1) / mask.sum(axis=1).clip(min=1.0)
        features = paddle.concat([pooled, outputs[:, -1, :]], axis=-1)
        return self.fc2(paddle.tanh(self.fc1(self.norm(features))))


def token_ids(batch: int = 2, length: int = 8, seed: int = 0, pad_tail: bool = True) -> paddle.Tensor:
    ids = np.random.default_rng(seed).integers(1, VOCAB, (batch, length)).astype("int64")
    if pad_tail:
        ids[0, -2:] = 0  # some padding
    return paddle.to_tensor(ids)


# A GPT written the way people write one: a dict config, a list of blocks, a causal mask buffer, residuals,
# shapes read from ``x.shape``, heads split with reshape/transpose.
GPT_CONFIG = {"vocab_size": VOCAB, "block_size": 16, "n_layer": 2, "n_head": 2, "n_embd": 32, "dropout": 0.0,
              "bias": True}


class CausalSelfAttention(nn.Layer):
    def __init__(self, config: dict) -> None:
        super().__init__()
        assert config["n_embd"] % config["n_head"] == 0
        self.c_attn = nn.Linear(config["n_embd"], 3 * config["n_embd"], bias_attr=config["bias"])
        self.c_proj = nn.Linear(config["n_embd"], config["n_embd"], bias_attr=config["bias"])
        self.n_head = config["n_head"]
        self.n_embd = config["n_embd"]
        self.dropout = config["dropout"]
        size = config["block_size"]
        self.register_buffer("bias", paddle.tril(paddle.ones([size, size])).reshape([1, 1, size, size]))

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(3, axis=2)
        head_size = C // self.n_head
        q = q.reshape([B, T, self.n_head, head_size]).transpose([0, 2, 1, 3])
        k = k.reshape([B, T, self.n_head, head_size]).transpose([0, 2, 1, 3])
        v = v.reshape([B, T, self.n_head, head_size]).transpose([0, 2, 1, 3])
        att = (q @ k.transpose([0, 1, 3, 2])) * (1.0 / math.sqrt(head_size))
        causal = self.bias[:, :, :T, :T]
        att = paddle.where(causal == 0, paddle.full_like(att, float("-inf")), att)
        att = F.softmax(att, axis=-1)
        att = F.dropout(att, p=self.dropout, training=self.training)
        y = att @ v
        y = y.transpose([0, 2, 1, 3]).reshape([B, T, C])
        return F.dropout(self.c_proj(y), p=self.dropout, training=self.training)


class MLP(nn.Layer):
    def __init__(self, config: dict) -> None:
        super().__init__()
        self.c_fc = nn.Linear(config["n_embd"], 4 * config["n_embd"], bias_attr=config["bias"])
        self.c_proj = nn.Linear(4 * config["n_embd"], config["n_embd"], bias_attr=config["bias"])
        self.dropout = config["dropout"]

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        x = F.gelu(self.c_fc(x), approximate=True)
        return F.dropout(self.c_proj(x), p=self.dropout, training=self.training)


class Block(nn.Layer):
    def __init__(self, config: dict) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(config["n_embd"])
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config["n_embd"])
        self.mlp = MLP(config)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Layer):
    def __init__(self, config: dict) -> None:
        super().__init__()
        self.config = dict(config)
        self.wte = nn.Embedding(config["vocab_size"], config["n_embd"])
        self.wpe = nn.Embedding(config["block_size"], config["n_embd"])
        self.blocks = nn.LayerList([Block(config) for _ in range(config["n_layer"])])
        self.ln_f = nn.LayerNorm(config["n_embd"])
        self.lm_head = nn.Linear(config["n_embd"], config["vocab_size"], bias_attr=False)

    def forward(self, idx: paddle.Tensor, targets: paddle.Tensor | None = None) -> dict:
        B, T = idx.shape
        assert T <= self.config["block_size"], f"sequence of {T} tokens, block size {self.config['block_size']}"
        pos = paddle.arange(0, T, dtype="int64")
        x = self.wte(idx) + self.wpe(pos)
        x = F.dropout(x, p=self.config["dropout"], training=self.training)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        result = {"logits": logits}
        if targets is not None:
            result["loss"] = F.cross_entropy(logits.reshape([-1, logits.shape[-1]]), targets.reshape([-1]))
        return result


def _gpt_inputs() -> tuple:
    ids = randint(0, VOCAB, (2, 9), seed=3)
    return ids[:, :-1], ids[:, 1:]


TEXT = {
    spec.name: spec for spec in [
        ModelSpec("transformer", seeded(TransformerSeq2Seq),
                  lambda: (token_ids(2, 7, seed=1, pad_tail=False), token_ids(2, 6, seed=2, pad_tail=False)),
                  mean_square_loss),
        ModelSpec("lstm", seeded(lambda: RNNClassifier("lstm")), lambda: (token_ids(2, 8),),
                  classification_loss(4)),
        ModelSpec("gru", seeded(lambda: RNNClassifier("gru")), lambda: (token_ids(2, 8),),
                  classification_loss(4)),
        ModelSpec("gpt", seeded(lambda: GPT(GPT_CONFIG)), _gpt_inputs, lambda out, inputs: out["loss"]),
    ]
}


# -- special: a custom PyLayer, a data-dependent branch -----------------------------------------------------
class ClippedScale(PyLayer):
    """``y = scale * x`` whose backward lets gradients through only where ``|x| < 1`` (not autograd's)."""

    @staticmethod
    def forward(ctx: Any, x: paddle.Tensor, scale: float) -> paddle.Tensor:
        ctx.save_for_backward(x)
        ctx.scale = scale
        return x * scale

    @staticmethod
    def backward(ctx: Any, grad: paddle.Tensor) -> paddle.Tensor:
        (x,) = ctx.saved_tensor()
        return grad * ctx.scale * (x.abs() < 1.0).astype(grad.dtype)


class PyLayerMLP(nn.Layer):
    def __init__(self, d_in: int = 8, hidden: int = 16, d_out: int = 4) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.norm = nn.LayerNorm(hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, d_out)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        h = F.relu(self.norm(self.fc1(x)))
        h = ClippedScale.apply(self.fc2(h), 0.5)
        h = paddle.tanh(h) + 0.1 * h
        return self.fc3(h * 2.0 - 1.0)


class DataDependentBranch(nn.Layer):
    """The branch taken depends on the values of the input: one graph break is unavoidable."""

    def __init__(self, d_in: int = 8, hidden: int = 16, d_out: int = 4) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(d_in, hidden), nn.LayerNorm(hidden), nn.ReLU(),
                                     nn.Linear(hidden, hidden), nn.LayerNorm(hidden), nn.ReLU())
        self.positive = nn.Linear(hidden, hidden)
        self.negative = nn.Linear(hidden, hidden)
        self.head = nn.Linear(hidden, d_out)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        h = self.encoder(x)
        h = h * 2.0 + 1.0
        h = paddle.tanh(h) - h.mean(axis=-1, keepdim=True)
        if x.mean() > 0:
            h = F.gelu(self.positive(h)) * 0.5 + h
            h = paddle.tanh(h) - 1.0
        else:
            h = F.silu(self.negative(h)) * 2.0 - h
            h = paddle.sigmoid(h) + 1.0
        h = h * h + 1.0
        h = paddle.tanh(h) * 3.0
        return self.head(h - h.mean(axis=0, keepdim=True))


def _features(sign: float, seed: int = 0) -> tuple:
    x = np.random.default_rng(seed).standard_normal((4, 8)).astype("float32")
    return (paddle.to_tensor(sign * np.abs(x) + 0.1 * sign),)


SPECIAL = {
    spec.name: spec for spec in [
        ModelSpec("pylayer_mlp", seeded(PyLayerMLP), lambda: (randn(4, 8, seed=5) * 2.0,), mean_square_loss),
        ModelSpec("data_dependent_branch", seeded(DataDependentBranch), lambda: _features(1.0),
                  classification_loss(4), whole_graph=False),
    ]
}


def negative_features() -> tuple:
    """Inputs that make `DataDependentBranch` take its other branch."""
    return _features(-1.0, seed=1)


ZOO: dict[str, ModelSpec] = {**VISION, **TEXT, **SPECIAL}

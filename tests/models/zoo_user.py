"""Models written the way users write them (not from a model library), for the zoo.

Each exercises patterns that real user code leans on: a ViT (patch embedding, a cls token Parameter, learned
position embeddings, blocks with `nn.MultiHeadAttention` or hand-written attention), a UNet (skip connections
kept in a Python list, `paddle.concat`, `F.interpolate` and `Conv2DTranspose`), a BERT-style encoder (summed
embeddings, an attention mask built from the input ids, a pooler, dict outputs), a model fed a dict and a list
of tensors, one built from `nn.LayerDict` and `nn.ParameterList`, one with custom initialisation through
`ParamAttr` and initializers, one written with `F.*` calls and `x.shape[...]` arithmetic; a LLaMA-style decoder,
attention code ported from another framework, running statistics kept by hand, greedy decoding, a top-1 MoE,
a Conv1D audio model, a two-tower recommender, a GPT returning an HF-style ``ModelOutput``, an encoder with
PEFT-style LoRA adapters (their own ``__getattr__``), a ``finfo`` padding mask and ``hasattr`` lookups, and a
bare `nn.Sequential`.
"""
from __future__ import annotations

import collections
import dataclasses
import math
from typing import Any, NamedTuple

import paddle
import paddle.nn as nn
import paddle.nn.functional as F
from paddle.nn import initializer as init

from .zoo import ModelSpec, classification_loss, mean_square_loss, randint, randn, seeded

# -- ViT ------------------------------------------------------------------------------------------------------


class PatchEmbedding(nn.Layer):
    def __init__(self, image_size: int, patch: int, channels: int, dim: int) -> None:
        super().__init__()
        self.num_patches = (image_size // patch) ** 2
        self.proj = nn.Conv2D(channels, dim, kernel_size=patch, stride=patch)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        x = self.proj(x)  # [B, dim, H/p, W/p]
        return x.flatten(2).transpose([0, 2, 1])  # [B, patches, dim]


class HandWrittenAttention(nn.Layer):
    """Multi-head self-attention from `paddle.matmul`, `F.softmax` and reshapes."""

    def __init__(self, dim: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.heads = heads
        self.scale = (dim // heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)
        self.attn_drop = nn.Dropout(dropout)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        batch, tokens, dim = x.shape
        qkv = self.qkv(x).reshape([batch, tokens, 3, self.heads, dim // self.heads]).transpose([2, 0, 3, 1, 4])
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = F.softmax(paddle.matmul(q, k, transpose_y=True) * self.scale, axis=-1)
        attn = self.attn_drop(attn)
        out = paddle.matmul(attn, v).transpose([0, 2, 1, 3]).reshape([batch, tokens, dim])
        return self.proj(out)


class LibraryAttention(nn.Layer):
    """`nn.MultiHeadAttention` used as self-attention."""

    def __init__(self, dim: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.attn = nn.MultiHeadAttention(dim, heads, dropout=dropout)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return self.attn(x, x, x)


class ViTBlock(nn.Layer):
    def __init__(self, dim: int, heads: int, mlp_ratio: int, dropout: float, attention: type[nn.Layer]) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, epsilon=1e-6)
        self.attn = attention(dim, heads, dropout)
        self.norm2 = nn.LayerNorm(dim, epsilon=1e-6)
        self.mlp = nn.Sequential(nn.Linear(dim, dim * mlp_ratio), nn.GELU(), nn.Dropout(dropout),
                                 nn.Linear(dim * mlp_ratio, dim), nn.Dropout(dropout))

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class ViT(nn.Layer):
    def __init__(self, attention: type[nn.Layer] = HandWrittenAttention, image_size: int = 16, patch: int = 4,
                 channels: int = 3, dim: int = 32, depth: int = 2, heads: int = 4, mlp_ratio: int = 2,
                 num_classes: int = 10, dropout: float = 0.0) -> None:
        super().__init__()
        self.patch_embed = PatchEmbedding(image_size, patch, channels, dim)
        self.cls_token = self.create_parameter([1, 1, dim], default_initializer=init.TruncatedNormal(std=0.02))
        self.pos_embed = self.create_parameter([1, self.patch_embed.num_patches + 1, dim],
                                               default_initializer=init.TruncatedNormal(std=0.02))
        self.pos_drop = nn.Dropout(dropout)
        self.blocks = nn.LayerList([ViTBlock(dim, heads, mlp_ratio, dropout, attention) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim, epsilon=1e-6)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, images: paddle.Tensor) -> paddle.Tensor:
        x = self.patch_embed(images)
        cls = self.cls_token.expand([x.shape[0], -1, -1])
        x = paddle.concat([cls, x], axis=1)
        x = self.pos_drop(x + self.pos_embed)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x)[:, 0])


# -- UNet -----------------------------------------------------------------------------------------------------


def conv_bn_relu(c_in: int, c_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2D(c_in, c_out, 3, padding=1, bias_attr=False), nn.BatchNorm2D(c_out), nn.ReLU(),
                         nn.Conv2D(c_out, c_out, 3, padding=1, bias_attr=False), nn.BatchNorm2D(c_out), nn.ReLU())


class UNet(nn.Layer):
    """Encoder features kept in a list and popped on the way up; even levels upsample with
    `Conv2DTranspose`, odd ones with bilinear `F.interpolate` to the skip's size."""

    def __init__(self, channels: int = 3, classes: int = 2, widths: tuple[int, ...] = (8, 16, 32)) -> None:
        super().__init__()
        self.down = nn.LayerList()
        c_in = channels
        for width in widths:
            self.down.append(conv_bn_relu(c_in, width))
            c_in = width
        self.bottleneck = conv_bn_relu(widths[-1], widths[-1] * 2)
        self.up = nn.LayerList()
        self.up_conv = nn.LayerList()
        c_in = widths[-1] * 2
        for level, width in enumerate(reversed(widths)):
            if level % 2 == 0:
                self.up.append(nn.Conv2DTranspose(c_in, width, kernel_size=2, stride=2))
            else:
                self.up.append(nn.Conv2D(c_in, width, kernel_size=1))
            self.up_conv.append(conv_bn_relu(width * 2, width))
            c_in = width
        self.out = nn.Conv2D(widths[0], classes, kernel_size=1)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        skips = []
        for block in self.down:
            x = block(x)
            skips.append(x)
            x = F.max_pool2d(x, kernel_size=2, stride=2)
        x = self.bottleneck(x)
        for up, conv in zip(self.up, self.up_conv):
            skip = skips.pop()
            if isinstance(up, nn.Conv2DTranspose):
                x = up(x)
            else:
                x = up(F.interpolate(x, size=skip.shape[2:], mode="bilinear", align_corners=False))
            x = conv(paddle.concat([skip, x], axis=1))
        return self.out(x)


def segmentation_loss(logits: paddle.Tensor, inputs: tuple) -> paddle.Tensor:
    """Per-pixel cross entropy against fixed labels of the image's size."""
    batch, _, height, width = logits.shape
    labels = randint(0, logits.shape[1], (batch, height, width, 1), seed=11)
    return F.cross_entropy(logits.transpose([0, 2, 3, 1]), labels)


# -- BERT-style encoder -------------------------------------------------------------------------------------
BERT_CONFIG = {"vocab_size": 60, "hidden_size": 32, "num_layers": 2, "num_heads": 4, "intermediate_size": 64,
               "max_position": 32, "type_vocab_size": 2, "dropout": 0.0, "pad_token_id": 0}


class BertEmbeddings(nn.Layer):
    def __init__(self, config: dict) -> None:
        super().__init__()
        self.word = nn.Embedding(config["vocab_size"], config["hidden_size"], padding_idx=config["pad_token_id"])
        self.position = nn.Embedding(config["max_position"], config["hidden_size"])
        self.token_type = nn.Embedding(config["type_vocab_size"], config["hidden_size"])
        self.norm = nn.LayerNorm(config["hidden_size"])
        self.dropout = nn.Dropout(config["dropout"])

    def forward(self, input_ids: paddle.Tensor, token_type_ids: paddle.Tensor | None = None) -> paddle.Tensor:
        seq_len = input_ids.shape[1]
        position_ids = paddle.arange(seq_len, dtype="int64").unsqueeze(0).expand_as(input_ids)
        if token_type_ids is None:
            token_type_ids = paddle.zeros_like(input_ids)
        summed = self.word(input_ids) + self.position(position_ids) + self.token_type(token_type_ids)
        return self.dropout(self.norm(summed))


class BertEncoder(nn.Layer):
    def __init__(self, config: dict) -> None:
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config)
        layer = nn.TransformerEncoderLayer(config["hidden_size"], config["num_heads"], config["intermediate_size"],
                                           dropout=config["dropout"], activation="gelu")
        self.encoder = nn.TransformerEncoder(layer, config["num_layers"])
        self.pooler = nn.Linear(config["hidden_size"], config["hidden_size"])
        self.classifier = nn.Linear(config["hidden_size"], 3)

    def forward(self, input_ids: paddle.Tensor, token_type_ids: paddle.Tensor | None = None) -> dict:
        # [B, 1, 1, T]: 0 where a token is attended to, a large negative number on padding.
        pad = (input_ids == self.config["pad_token_id"]).astype("float32")
        attention_mask = (pad * -1e4).unsqueeze([1, 2])
        hidden = self.encoder(self.embeddings(input_ids, token_type_ids), src_mask=attention_mask)
        pooled = paddle.tanh(self.pooler(hidden[:, 0]))
        return {"last_hidden_state": hidden, "pooler_output": pooled, "logits": self.classifier(pooled)}


def bert_inputs(batch: int = 2, length: int = 8, seed: int = 4) -> tuple:
    ids = randint(1, BERT_CONFIG["vocab_size"], (batch, length), seed=seed)
    ids[0, -3:] = 0  # padding
    token_types = paddle.concat([paddle.zeros([batch, length // 2], "int64"),
                                 paddle.ones([batch, length - length // 2], "int64")], axis=1)
    return ids, token_types


def bert_loss(output: dict, inputs: tuple) -> paddle.Tensor:
    labels = randint(0, 3, (output["logits"].shape[0],), seed=9)
    return F.cross_entropy(output["logits"], labels) + (output["last_hidden_state"] ** 2).mean() * 0.1


# -- structured inputs, LayerDict / ParameterList, custom init, functional style -----------------------------


class MultiModal(nn.Layer):
    """Takes a dict ``{"image": ..., "tokens": ..., "extras": [tensor, ...]}`` and returns a tuple."""

    def __init__(self, vocab: int = 30, dim: int = 16, num_extras: int = 2) -> None:
        super().__init__()
        self.image = nn.Sequential(nn.Conv2D(3, dim, 3, stride=2, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2D(1),
                                   nn.Flatten())
        self.tokens = nn.Embedding(vocab, dim)
        self.extras = nn.LayerList([nn.Linear(4, dim) for _ in range(num_extras)])
        self.fuse = nn.Linear(dim * (2 + num_extras), dim)
        self.head = nn.Linear(dim, 5)

    def forward(self, batch: dict) -> tuple:
        features = [self.image(batch["image"]), self.tokens(batch["tokens"]).mean(axis=1)]
        for layer, extra in zip(self.extras, batch["extras"]):
            features.append(F.relu(layer(extra)))
        fused = F.gelu(self.fuse(paddle.concat(features, axis=-1)))
        return self.head(fused), fused


def multimodal_inputs(batch: int = 2) -> tuple:
    return ({"image": randn(batch, 3, 8, 8, seed=1), "tokens": randint(0, 30, (batch, 6), seed=2),
             "extras": [randn(batch, 4, seed=3), randn(batch, 4, seed=4)]},)


class Experts(nn.Layer):
    """Named branches in an `nn.LayerDict`, per-branch scales in an `nn.ParameterList`."""

    def __init__(self, dim: int = 16, num_classes: int = 4) -> None:
        super().__init__()
        self.stem = nn.Linear(8, dim)
        self.branches = nn.LayerDict({
            "mlp": nn.Sequential(nn.Linear(dim, dim), nn.Tanh()),
            "norm": nn.LayerNorm(dim),
            "gate": nn.Sequential(nn.Linear(dim, dim), nn.Sigmoid()),
        })
        self.scales = nn.ParameterList(
            [self.create_parameter([1], default_initializer=init.Constant(1.0 + i)) for i in range(len(self.branches))])
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        h = F.relu(self.stem(x))
        total = paddle.zeros_like(h)
        for (name, branch), scale in zip(self.branches.items(), self.scales):
            out = branch(h)
            total = total + (out * h if name == "gate" else out) * scale
        return self.head(total + self.branches["norm"](h))


class CustomInit(nn.Layer):
    """Weights set through `ParamAttr` with named initializers, and re-initialised by a loop over sublayers
    the way `model.apply(init_fn)` code does."""

    def __init__(self) -> None:
        super().__init__()
        kaiming = paddle.ParamAttr(initializer=init.KaimingNormal())
        self.conv = nn.Conv2D(3, 8, 3, padding=1, weight_attr=kaiming,
                              bias_attr=paddle.ParamAttr(initializer=init.Constant(0.1)))
        self.bn = nn.BatchNorm2D(8, weight_attr=paddle.ParamAttr(initializer=init.Constant(1.0)),
                                 bias_attr=paddle.ParamAttr(initializer=init.Constant(0.0)))
        self.fc1 = nn.Linear(8, 16, weight_attr=paddle.ParamAttr(initializer=init.XavierUniform()),
                             bias_attr=paddle.ParamAttr(initializer=init.Normal(std=0.01), learning_rate=2.0))
        self.fc2 = nn.Linear(16, 10, weight_attr=paddle.ParamAttr(initializer=init.TruncatedNormal(std=0.02),
                                                                  regularizer=paddle.regularizer.L2Decay(1e-4)))
        self.apply(self.reinit_linear)

    @staticmethod
    def reinit_linear(layer: nn.Layer) -> None:
        if isinstance(layer, nn.Linear) and layer.weight.shape[1] == 10:
            init.Orthogonal()(layer.weight)
            init.Constant(0.05)(layer.bias)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        x = F.relu(self.bn(self.conv(x)))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc2(F.silu(self.fc1(x)))


class Functional(nn.Layer):
    """Parameters created by hand and used through `F.*`, shapes computed from ``x.shape[...]``."""

    def __init__(self, channels: int = 3, width: int = 8, num_classes: int = 10) -> None:
        super().__init__()
        self.conv_w = self.create_parameter([width, channels, 3, 3], default_initializer=init.KaimingUniform())
        self.conv_b = self.create_parameter([width], is_bias=True)
        self.norm_w = self.create_parameter([width], default_initializer=init.Constant(1.0))
        self.norm_b = self.create_parameter([width], is_bias=True)
        self.fc_w = self.create_parameter([width * 4, num_classes], default_initializer=init.XavierNormal())
        self.fc_b = self.create_parameter([num_classes], is_bias=True)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        batch, channels, height, width = x.shape
        x = F.pad(x, [1, 1, 1, 1], mode="reflect")
        x = F.conv2d(x, self.conv_w, self.conv_b, stride=1, padding=0)
        x = F.avg_pool2d(x, kernel_size=2) if height % 2 == 0 else x
        x = x.transpose([0, 2, 3, 1])
        x = F.layer_norm(x, x.shape[-1:], self.norm_w, self.norm_b)
        x = F.leaky_relu(x, 0.1).transpose([0, 3, 1, 2])
        half = x.shape[-1] // 2
        quadrants = [x[:, :, :half, :half], x[:, :, :half, half:], x[:, :, half:, :half], x[:, :, half:, half:]]
        pooled = paddle.concat([q.mean(axis=[2, 3]) for q in quadrants], axis=-1)
        pooled = F.normalize(pooled, axis=-1) * math.sqrt(pooled.shape[-1])
        return F.linear(pooled.reshape([batch, -1]), self.fc_w, self.fc_b)


# -- decoder LM in today's style, torch-style code, running statistics, decoding, MoE, audio, recsys ---------
class RMSNorm(nn.Layer):
    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = self.create_parameter([dim], default_initializer=init.Constant(1.0))

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return x * paddle.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x: paddle.Tensor) -> paddle.Tensor:
    x1, x2 = x.chunk(2, axis=-1)
    return paddle.concat([-x2, x1], axis=-1)


class DecoderLM(nn.Layer):
    """A LLaMA-style decoder: RMSNorm, rotary position embedding from a non-persistable buffer, einsum
    attention with ``masked_fill`` of a causal mask and an optional padding mask, SwiGLU, tied embeddings,
    the loss computed in forward when labels are given, a dict out."""

    def __init__(self, vocab: int = 40, dim: int = 32, heads: int = 4, layers: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.embed = nn.Embedding(vocab, dim)
        head_dim = dim // heads
        inv_freq = 1.0 / (10000 ** (paddle.arange(0, head_dim, 2, dtype="float32") / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistable=False)
        self.qkv = nn.LayerList([nn.Linear(dim, 3 * dim, bias_attr=False) for _ in range(layers)])
        self.o = nn.LayerList([nn.Linear(dim, dim, bias_attr=False) for _ in range(layers)])
        self.gate_up = nn.LayerList([nn.Linear(dim, 4 * dim, bias_attr=False) for _ in range(layers)])
        self.down = nn.LayerList([nn.Linear(2 * dim, dim, bias_attr=False) for _ in range(layers)])
        self.norms = nn.LayerList([RMSNorm(dim) for _ in range(2 * layers + 1)])

    def rotary(self, length: int) -> tuple[paddle.Tensor, paddle.Tensor]:
        freqs = paddle.outer(paddle.arange(length, dtype="float32"), self.inv_freq)
        emb = paddle.concat([freqs, freqs], axis=-1)
        return emb.cos()[None, :, None, :], emb.sin()[None, :, None, :]

    def forward(self, ids: paddle.Tensor, labels: paddle.Tensor | None = None,
                attention_mask: paddle.Tensor | None = None) -> dict:
        batch, length = ids.shape
        h = self.embed(ids)
        cos, sin = self.rotary(length)
        allowed = paddle.tril(paddle.ones([length, length], dtype="bool"))
        if attention_mask is not None:
            allowed = allowed & attention_mask[:, None, None, :].astype("bool")
        for i in range(len(self.qkv)):
            q, k, v = self.qkv[i](self.norms[2 * i](h)).reshape([batch, length, 3, self.heads, -1]).unbind(axis=2)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            scores = paddle.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(q.shape[-1])
            scores = scores.masked_fill(~allowed, float("-inf"))
            attended = paddle.einsum("bhqk,bkhd->bqhd", F.softmax(scores, axis=-1), v).reshape([0, 0, -1])
            h = h + self.o[i](attended)
            gate, up = self.gate_up[i](self.norms[2 * i + 1](h)).chunk(2, axis=-1)
            h = h + self.down[i](F.silu(gate) * up)
        logits = paddle.matmul(self.norms[-1](h), self.embed.weight, transpose_y=True)
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = F.cross_entropy(logits[:, :-1].reshape([-1, logits.shape[-1]]), labels[:, 1:].reshape([-1]))
        return out


def decoder_inputs(batch: int = 2, length: int = 7, seed: int = 6) -> tuple:
    ids = randint(1, 40, (batch, length), seed=seed)
    mask = paddle.ones([batch, length], "int64")
    mask[0, -2:] = 0
    return ids, ids, mask


class AttentionOut(NamedTuple):
    logits: paddle.Tensor
    tokens: list


class TorchStyleAttention(nn.Layer):
    """Code ported from another framework: ``x.view``, ``unbind``, ``x.ndim`` and an f-string assert,
    ``paddle.is_tensor``, a ``**kwargs`` forward, a NamedTuple out holding a list."""

    def __init__(self, dim: int = 16, heads: int = 2, num_classes: int = 3) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)
        self.cls = nn.Linear(dim, num_classes)

    def forward(self, x: paddle.Tensor, mask: paddle.Tensor | None = None, **kwargs: Any) -> AttentionOut:
        assert x.ndim == 3 and paddle.is_tensor(x), f"expected [B, T, C], got {x.shape}"
        batch, tokens, channels = x.shape
        qkv = self.qkv(x).view([batch, tokens, 3, self.heads, channels // self.heads])
        q, k, v = qkv.transpose([2, 0, 3, 1, 4]).unbind(0)
        bias = 0.0 if mask is None else (1.0 - mask[:, None, None, :].astype(q.dtype)) * -1e9
        attn = F.softmax(q @ k.transpose([0, 1, 3, 2]) / math.sqrt(q.shape[-1]) + bias, axis=-1)
        y = self.proj((attn @ v).transpose([0, 2, 1, 3]).reshape([batch, tokens, channels]))
        if kwargs.get("return_tokens", True):
            return AttentionOut(self.cls(y.mean(1)), [y[:, i] for i in range(min(tokens, 3))])
        return AttentionOut(self.cls(y.mean(1)), [])


def torch_style_inputs(batch: int = 2) -> tuple:
    mask = paddle.ones([batch, 5], "int64")
    mask[-1, -1] = 0
    return randn(batch, 5, 16, seed=batch), mask


class RunningFeatures(nn.Layer):
    """Running statistics kept by hand: an ``@paddle.no_grad()`` method updating one buffer with ``set_value``,
    another buffer and a step counter rebound (``self.x = ...``), all in train mode only."""

    def __init__(self, dim: int = 8, num_classes: int = 4) -> None:
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.head = nn.Linear(dim, num_classes)
        self.register_buffer("mean", paddle.zeros([dim]))
        self.register_buffer("sq_mean", paddle.ones([dim]))
        self.register_buffer("steps", paddle.zeros([1]), persistable=False)

    @paddle.no_grad()
    def track(self, h: paddle.Tensor) -> None:
        self.mean.set_value(self.mean * 0.9 + h.mean(0) * 0.1)
        self.sq_mean = self.sq_mean * 0.9 + (h * h).mean(0) * 0.1
        self.steps = self.steps + 1

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        h = F.relu(self.fc(x))
        if self.training:
            self.track(h)
        std = (self.sq_mean - self.mean ** 2).clip(min=1e-5).sqrt()
        return self.head((h - self.mean) / std)


class GreedyDecoder(nn.Layer):
    """A fixed number of decoding steps, each feeding back the argmax token (values depend on data, shapes
    and control flow do not)."""

    def __init__(self, vocab: int = 20, dim: int = 16, steps: int = 4) -> None:
        super().__init__()
        self.steps = steps
        self.embed = nn.Embedding(vocab, dim)
        self.cell = nn.GRUCell(dim, dim)
        self.out = nn.Linear(dim, vocab)

    def forward(self, start: paddle.Tensor) -> tuple:
        hidden = paddle.zeros([start.shape[0], self.cell.hidden_size])
        token, all_logits, tokens = start, [], []
        for _ in range(self.steps):
            hidden, _ = self.cell(self.embed(token), hidden)
            logits = self.out(hidden)
            token = logits.argmax(-1)
            all_logits.append(logits)
            tokens.append(token)
        return paddle.stack(all_logits, 1), paddle.stack(tokens, 1)


class TopOneMoE(nn.Layer):
    """Top-1 gating: experts' weights gathered by the chosen index, applied with ``bmm``."""

    def __init__(self, experts: int = 4, dim: int = 8) -> None:
        super().__init__()
        self.gate = nn.Linear(dim, experts)
        self.weights = self.create_parameter([experts, dim, dim], default_initializer=init.XavierUniform())
        self.head = nn.Linear(dim, 3)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        top, index = paddle.topk(F.softmax(self.gate(x), -1), 1, axis=-1)
        expert = paddle.gather(self.weights, index.squeeze(-1))
        return self.head(paddle.bmm(x.unsqueeze(1), expert).squeeze(1) * top)


class AudioConv1D(nn.Layer):
    """Conv1D blocks with GroupNorm and a residual where the channels allow (``x.shape[1]`` decides)."""

    def __init__(self, channels: int = 4, width: int = 8, num_classes: int = 2) -> None:
        super().__init__()
        self.convs = nn.LayerList([nn.Conv1D(channels if i == 0 else width, width, 5, padding=2) for i in range(3)])
        self.norm = nn.GroupNorm(2, width)
        self.fc = nn.Linear(width, num_classes)

    def forward(self, wave: paddle.Tensor) -> paddle.Tensor:
        x = wave
        for conv in self.convs:
            y = F.gelu(self.norm(conv(x)))
            x = y + x if x.shape[1] == y.shape[1] else y
        x = F.pad(x, [1, 1], data_format="NCL")
        return self.fc(F.adaptive_avg_pool1d(x, 1).squeeze(-1))


class TwoTower(nn.Layer):
    """A recommender: a user id and a list of item-id tensors, one embedding table, a sigmoid score."""

    def __init__(self, vocab: int = 30, dim: int = 8) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.fc = nn.Linear(dim * 2, 1)

    def forward(self, user: paddle.Tensor, items: list) -> paddle.Tensor:
        history = paddle.stack([self.embed(item) for item in items], 1).sum(1)
        return F.sigmoid(self.fc(paddle.concat([self.embed(user), history], -1))).squeeze(-1)


def two_tower_inputs(batch: int = 2) -> tuple:
    return randint(0, 30, (batch,), seed=batch), [randint(0, 30, (batch,), seed=batch + i) for i in range(3)]


# -- HF/PaddleNLP-style structured outputs --------------------------------------------------------------------
class ModelOutput(collections.OrderedDict):
    """A minimal copy of the ``ModelOutput`` of HF transformers / PaddleNLP: a dataclass that is also an
    ``OrderedDict`` of its fields that are not None (in field order), read by attribute, key or index, with
    item and attribute assignment kept in sync and the mapping methods that would desync them refused."""

    def __post_init__(self) -> None:
        class_fields = dataclasses.fields(self)
        for field in class_fields:  # lists become tuples
            value = getattr(self, field.name)
            if isinstance(value, list):
                setattr(self, field.name, tuple(value))
        if not all(field.default is None for field in class_fields[1:]):
            raise ValueError(f"{self.__class__.__name__} should not have more than one required field.")
        first_field = getattr(self, class_fields[0].name)
        other_fields_are_none = all(getattr(self, field.name) is None for field in class_fields[1:])
        if other_fields_are_none and not paddle.is_tensor(first_field):
            # The first field may hold all of them: a dict or an iterable of (name, value) pairs.
            if isinstance(first_field, dict):
                iterator = first_field.items()
                first_field_iterator = True
            else:
                try:
                    iterator = iter(first_field)
                    first_field_iterator = True
                except TypeError:
                    first_field_iterator = False
            if first_field_iterator:
                for element in iterator:
                    if not isinstance(element, (list, tuple)) or not len(element) == 2 or not isinstance(element[0],
                                                                                                         str):
                        break
                    setattr(self, element[0], element[1])
                    if element[1] is not None:
                        self[element[0]] = element[1]
            elif first_field is not None:
                self[class_fields[0].name] = first_field
        else:
            for field in class_fields:
                value = getattr(self, field.name)
                if value is not None:
                    self[field.name] = value

    def __delitem__(self, *args: Any, **kwargs: Any) -> None:
        raise Exception(f"You cannot use ``__delitem__`` on a {self.__class__.__name__} instance.")

    def setdefault(self, *args: Any, **kwargs: Any) -> None:
        raise Exception(f"You cannot use ``setdefault`` on a {self.__class__.__name__} instance.")

    def pop(self, *args: Any, **kwargs: Any) -> None:
        raise Exception(f"You cannot use ``pop`` on a {self.__class__.__name__} instance.")

    def update(self, *args: Any, **kwargs: Any) -> None:
        raise Exception(f"You cannot use ``update`` on a {self.__class__.__name__} instance.")

    def __getitem__(self, k: Any) -> Any:
        if isinstance(k, str):
            inner_dict = dict(self.items())
            return inner_dict[k]
        return self.to_tuple()[k]

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self.keys() and value is not None:
            super().__setitem__(name, value)
        super().__setattr__(name, value)

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value)
        super().__setattr__(key, value)

    def to_tuple(self) -> tuple:
        return tuple(self[k] for k in self.keys())


@dataclasses.dataclass
class CausalLMOutput(ModelOutput):
    loss: paddle.Tensor | None = None
    logits: paddle.Tensor = None
    hidden_states: tuple[paddle.Tensor, ...] | None = None


class GPTBlock(nn.Layer):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.scale = 1.0 / math.sqrt(dim // heads)
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, h: paddle.Tensor, causal: paddle.Tensor) -> paddle.Tensor:
        q, k, v = (part.reshape([0, 0, self.heads, -1]).transpose([0, 2, 1, 3])
                   for part in self.qkv(self.norm1(h)).chunk(3, axis=-1))
        scores = q @ k.transpose([0, 1, 3, 2]) * self.scale
        attended = (F.softmax(scores + causal, axis=-1) @ v).transpose([0, 2, 1, 3]).reshape([0, 0, -1])
        h = h + self.proj(attended)
        return h + self.mlp(self.norm2(h))


class GPTWithModelOutput(nn.Layer):
    """A GPT-style decoder returning a `CausalLMOutput` (loss when labels are given, every block's hidden
    states), as HF/PaddleNLP models do."""

    def __init__(self, vocab: int = 40, dim: int = 32, heads: int = 4, layers: int = 2, length: int = 16) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.position = nn.Embedding(length, dim)
        self.blocks = nn.LayerList([GPTBlock(dim, heads) for _ in range(layers)])
        self.norm = nn.LayerNorm(dim)

    def forward(self, ids: paddle.Tensor, labels: paddle.Tensor | None = None) -> CausalLMOutput:
        length = ids.shape[1]
        h = self.embed(ids) + self.position(paddle.arange(length))
        causal = paddle.triu(paddle.full([length, length], float("-inf")), diagonal=1)
        hidden_states = (h,)
        for block in self.blocks:
            h = block(h, causal)
            hidden_states = hidden_states + (h,)
        logits = paddle.matmul(self.norm(h), self.embed.weight, transpose_y=True)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits[:, :-1].reshape([-1, logits.shape[-1]]), labels[:, 1:].reshape([-1]))
        return CausalLMOutput(loss=loss, logits=logits, hidden_states=hidden_states)


def gpt_inputs(batch: int = 2, length: int = 7, seed: int = 12) -> tuple:
    ids = randint(1, 40, (batch, length), seed=seed)
    return ids, ids


def model_output_loss(output: CausalLMOutput, inputs: tuple) -> paddle.Tensor:
    """Reads the output by attribute, key and index, as training code does."""
    return output.loss + output["logits"].mean() * 0.1 + output[2][-1].pow(2).mean() * 0.01


# -- a LoRA-adapted encoder ---------------------------------------------------------------------------------------
class LoRAAdapter(nn.Layer):
    """A PEFT-style adapter around a frozen linear layer: attributes it lacks (``weight``, ``bias``) are the
    wrapped layer's, through its own ``__getattr__`` asking ``super().__getattr__`` first."""

    def __init__(self, base: nn.Linear, rank: int = 2, alpha: float = 4.0) -> None:
        super().__init__()
        self.base = base
        self.base.weight.stop_gradient = True
        self.lora_a = nn.Linear(base.weight.shape[0], rank, bias_attr=False)
        self.lora_b = nn.Linear(rank, base.weight.shape[1], bias_attr=False,
                                weight_attr=paddle.ParamAttr(initializer=init.Constant(0.05)))
        self.scaling = alpha / rank

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self.base, name)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return self.base(x) + self.lora_b(self.lora_a(x)) * self.scaling


class LoRAEncoder(nn.Layer):
    """Attention whose projections are adapted, a padding mask filled with ``paddle.finfo(dtype).min``,
    optional parts looked up with ``hasattr``/``getattr(self, name, None)``, and the registry of adapted
    layers kept on the class and read through ``type(self)``."""

    adapted: dict = {}

    def __init__(self, vocab: int = 30, dim: int = 16, heads: int = 2, num_classes: int = 3) -> None:
        super().__init__()
        self.heads = heads
        self.embed = nn.Embedding(vocab, dim)
        self.q = LoRAAdapter(nn.Linear(dim, dim))
        self.v = LoRAAdapter(nn.Linear(dim, dim))
        self.k = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)
        type(self).adapted[id(self)] = ["q", "v"]

    def split(self, x: paddle.Tensor) -> paddle.Tensor:
        batch, tokens, dim = x.shape
        return x.reshape([batch, tokens, self.heads, dim // self.heads]).transpose([0, 2, 1, 3])

    def forward(self, ids: paddle.Tensor) -> paddle.Tensor:
        h = self.embed(ids)
        q, k, v = self.split(self.q(h)), self.split(self.k(h)), self.split(self.v(h))
        scores = q @ k.transpose([0, 1, 3, 2]) / math.sqrt(q.shape[-1])
        pad = (ids == 0)[:, None, None, :]
        scores = scores.masked_fill(pad, paddle.finfo(scores.dtype).min)
        out = (F.softmax(scores, axis=-1) @ v).transpose([0, 2, 1, 3]).reshape(h.shape)
        if hasattr(self, "out_proj"):
            out = self.out_proj(out)
        dropout = getattr(self, "dropout", None)
        if dropout is not None:
            out = dropout(out)
        h = self.norm(h + out + self.q.bias * 0.0)
        n_adapted = len(type(self).adapted.get(id(self), []))
        return self.head(h.mean(1)) * (1.0 + 0.0 * n_adapted)


def lora_inputs(batch: int = 2, seed: int = 14) -> tuple:
    ids = randint(1, 30, (batch, 6), seed=seed)
    ids[0, -2:] = 0  # padding
    return (ids,)


def image_batch(batch: int = 2, size: int = 16, seed: int = 0) -> tuple:
    return (randn(batch, 3, size, size, seed=seed),)


def _spec(name: str, builder: Any, inputs: Any, loss: Any, other_batch: Any) -> ModelSpec:
    return ModelSpec(name, seeded(builder), inputs, loss, other_batch=other_batch)


USER = {
    spec.name: spec for spec in [
        _spec("vit_hand_attention", ViT, image_batch, classification_loss(10), lambda: image_batch(3, seed=1)),
        _spec("vit_multihead_attention", lambda: ViT(LibraryAttention), image_batch, classification_loss(10),
              lambda: image_batch(3, seed=1)),
        _spec("unet", UNet, image_batch, segmentation_loss, lambda: image_batch(3, seed=1)),
        _spec("bert", lambda: BertEncoder(BERT_CONFIG), bert_inputs, bert_loss, lambda: bert_inputs(3, seed=5)),
        _spec("dict_list_inputs", MultiModal, multimodal_inputs, mean_square_loss, lambda: multimodal_inputs(3)),
        _spec("layerdict_parameterlist", Experts, lambda: (randn(4, 8, seed=2),), classification_loss(4),
              lambda: (randn(5, 8, seed=3),)),
        _spec("custom_init", CustomInit, image_batch, classification_loss(10), lambda: image_batch(3, seed=1)),
        _spec("functional", Functional, image_batch, classification_loss(10), lambda: image_batch(3, seed=1)),
        _spec("decoder_lm", DecoderLM, decoder_inputs, lambda out, inputs: out["loss"] + out["logits"].mean(),
              lambda: decoder_inputs(3, seed=8)),
        _spec("torch_style_attention", TorchStyleAttention, torch_style_inputs, mean_square_loss,
              lambda: torch_style_inputs(3)),
        _spec("running_features", RunningFeatures, lambda: (randn(4, 8, seed=1),), classification_loss(4),
              lambda: (randn(5, 8, seed=2),)),
        _spec("greedy_decoder", GreedyDecoder, lambda: (randint(0, 20, (2,), seed=1),), mean_square_loss,
              lambda: (randint(0, 20, (3,), seed=2),)),
        _spec("top1_moe", TopOneMoE, lambda: (randn(4, 8, seed=3),), classification_loss(3),
              lambda: (randn(5, 8, seed=4),)),
        _spec("audio_conv1d", AudioConv1D, lambda: (randn(2, 4, 16, seed=5),), classification_loss(2),
              lambda: (randn(3, 4, 16, seed=6),)),
        _spec("two_tower", TwoTower, two_tower_inputs, mean_square_loss, lambda: two_tower_inputs(3)),
        _spec("gpt_model_output", GPTWithModelOutput, gpt_inputs, model_output_loss, lambda: gpt_inputs(3, seed=13)),
        _spec("lora_encoder", LoRAEncoder, lora_inputs, classification_loss(3), lambda: lora_inputs(3, seed=15)),
        # An ``nn.Sequential`` translated as the model itself (its forward is Paddle's code).
        _spec("sequential_mlp", lambda: nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.LayerNorm(32), nn.Dropout(0.1),
                                                      nn.Linear(32, 32), nn.Hardswish(), nn.Linear(32, 4)),
              lambda: (randn(4, 8, seed=7),), classification_loss(4), lambda: (randn(6, 8, seed=8),)),
    ]
}

"""Models written the way users write them (not from a model library), for the zoo.

Each exercises patterns that real user code leans on: a ViT (patch embedding, a cls token Parameter, learned
position embeddings, blocks with `nn.MultiHeadAttention` or hand-written attention), a UNet (skip connections
kept in a Python list, `paddle.concat`, `F.interpolate` and `Conv2DTranspose`), a BERT-style encoder (summed
embeddings, an attention mask built from the input ids, a pooler, dict outputs), a model fed a dict and a list
of tensors, one built from `nn.LayerDict` and `nn.ParameterList`, one with custom initialisation through
`ParamAttr` and initializers, and one written with `F.*` calls and `x.shape[...]` arithmetic.
"""
from __future__ import annotations

import math
from typing import Any

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
    ]
}

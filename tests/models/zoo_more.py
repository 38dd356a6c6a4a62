"""More models written like user code (issue 8): paddle.nn layers with their less common options (attention
masks and caches, incremental decoding, RNNs with sequence lengths, 1D/3D and transposed convolutions, pooling
with masks, normalisations, label smoothing, soft labels and ignored indices) and user-code styles (dataclass
configs, ``**kwargs`` forwarding, ``super()`` chains, properties, class constants, forward hooks, in-place
activations, ``paddle.no_grad`` inside forward).

Each entry is a `ModelSpec` checked by `harness.check_whole_model`: none of these models depends on tensor data
in its control flow, so every forward must be one graph, with eager's outputs, gradients and Adam steps.
"""
from __future__ import annotations

import collections
import dataclasses
from typing import Any

import paddle
import paddle.nn as nn
import paddle.nn.functional as F

from .zoo import ModelSpec, classification_loss, mean_square_loss, randint, randn, seeded

# -- attention with masks, and with caches --------------------------------------------------------------------


class MaskedAttention(nn.Layer):
    """`nn.MultiHeadAttention` as cross-attention with a boolean key-padding mask, then as self-attention with
    an additive causal mask and ``need_weights`` (it returns the weights too)."""

    def __init__(self, dim: int = 16, heads: int = 4) -> None:
        super().__init__()
        self.cross = nn.MultiHeadAttention(dim, heads)
        self.self_attn = nn.MultiHeadAttention(dim, heads, need_weights=True)
        self.head = nn.Linear(dim, 3)

    def forward(self, x: paddle.Tensor, memory: paddle.Tensor, memory_lengths: paddle.Tensor) -> Any:
        batch, length = x.shape[0], x.shape[1]
        positions = paddle.arange(memory.shape[1]).unsqueeze(0)
        keep = (positions < memory_lengths.unsqueeze(1)).unsqueeze(1).unsqueeze(1)  # [batch, 1, 1, mem_len]
        x = x + self.cross(x, memory, memory, attn_mask=keep)
        causal = paddle.triu(paddle.full([length, length], float("-inf")), diagonal=1)
        out, weights = self.self_attn(x, attn_mask=causal)
        return self.head(out.mean(axis=1)), weights


def masked_attention_inputs(batch: int = 2, seed: int = 0) -> tuple:
    lengths = paddle.to_tensor([5, 3, 4][:batch], dtype="int64")
    return randn(batch, 4, 16, seed=seed), randn(batch, 5, 16, seed=seed + 1), lengths


class CachedAttention(nn.Layer):
    """Incremental self-attention: `MultiHeadAttention.gen_cache` for an empty `Cache` grown step by step, and a
    `StaticCache` of projected memory keys and values reused at every step."""

    def __init__(self, dim: int = 16, heads: int = 4) -> None:
        super().__init__()
        self.self_attn = nn.MultiHeadAttention(dim, heads)
        self.cross = nn.MultiHeadAttention(dim, heads)
        self.head = nn.Linear(dim, 3)

    def forward(self, x: paddle.Tensor, memory: paddle.Tensor) -> paddle.Tensor:
        cache = self.self_attn.gen_cache(x, type=nn.MultiHeadAttention.Cache)
        static = self.cross.gen_cache(memory, memory, type=nn.MultiHeadAttention.StaticCache)
        outputs = []
        for step in range(x.shape[1]):
            token = x[:, step:step + 1, :]
            out, cache = self.self_attn(token, token, token, None, cache)
            out, static = self.cross(out, memory, memory, None, static)
            outputs.append(out)
        return self.head(paddle.concat(outputs, axis=1).mean(axis=1))


class IncrementalDecoder(nn.Layer):
    """`nn.TransformerDecoder` decoding token by token with its cache (``gen_cache``), against a memory."""

    def __init__(self, vocab: int = 20, dim: int = 16, steps: int = 3) -> None:
        super().__init__()
        self.steps = steps
        self.embed = nn.Embedding(vocab, dim)
        layer = nn.TransformerDecoderLayer(dim, 4, 32, dropout=0.0, normalize_before=True)
        self.decoder = nn.TransformerDecoder(layer, 2, norm=nn.LayerNorm(dim))
        self.out = nn.Linear(dim, vocab)
        # A key projection's bias shifts every score of a query alike: softmax cancels it, its gradient is
        # rounding noise, which Adam scales up to full steps (eager's noise and the program's differ).
        for attention in [sub for sub in self.decoder.sublayers() if isinstance(sub, nn.MultiHeadAttention)]:
            attention.k_proj.bias.stop_gradient = True

    def forward(self, start: paddle.Tensor, memory: paddle.Tensor) -> paddle.Tensor:
        cache = self.decoder.gen_cache(memory)
        token = self.embed(start).unsqueeze(1)
        logits = []
        for _ in range(self.steps):
            hidden, cache = self.decoder(token, memory, None, None, cache)
            step_logits = self.out(hidden[:, -1])
            logits.append(step_logits)
            token = self.embed(step_logits.argmax(-1)).unsqueeze(1)
        return paddle.stack(logits, axis=1)


def decoder_inputs(batch: int = 2, seed: int = 0) -> tuple:
    return randint(0, 20, (batch,), seed=seed), randn(batch, 5, 16, seed=seed + 1)


# -- embeddings, containers -------------------------------------------------------------------------------------


class ContainerNet(nn.Layer):
    """Embedding with ``padding_idx``, an `nn.Sequential` built from an `OrderedDict`, an `nn.LayerList` zipped
    with an `nn.LayerDict`'s values, and ``enumerate`` over the list."""

    def __init__(self, vocab: int = 30, dim: int = 16) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim, padding_idx=0)
        self.stem = nn.Sequential(collections.OrderedDict([("fc", nn.Linear(dim, dim)), ("act", nn.GELU())]))
        self.blocks = nn.LayerList([nn.Linear(dim, dim) for _ in range(3)])
        self.norms = nn.LayerDict({f"norm{i}": nn.LayerNorm(dim) for i in range(3)})
        self.head = nn.Linear(dim, 4)

    def forward(self, ids: paddle.Tensor) -> paddle.Tensor:
        x = self.stem(self.embed(ids))
        for index, (block, norm) in enumerate(zip(self.blocks, self.norms.values())):
            x = norm(x + block(x) * (index + 1))
        x = x + self.stem.fc(x)
        mask = (ids != 0).astype(x.dtype).unsqueeze(-1)
        return self.head((x * mask).sum(axis=1) / mask.sum(axis=1))


def padded_ids(batch: int = 2, seed: int = 0) -> tuple:
    ids = randint(1, 30, (batch, 6), seed=seed)
    ids[:, 4:] = 0
    return (ids,)


# -- recurrent layers with sequence lengths ---------------------------------------------------------------------


class RecurrentNet(nn.Layer):
    """A `BiRNN` of two `SimpleRNNCell`, a `SimpleRNN` and a `LSTM`, each given ``sequence_length``."""

    def __init__(self, dim: int = 8, hidden: int = 12) -> None:
        super().__init__()
        self.birnn = nn.BiRNN(nn.SimpleRNNCell(dim, hidden), nn.SimpleRNNCell(dim, hidden))
        self.rnn = nn.SimpleRNN(2 * hidden, hidden, activation="relu")
        self.lstm = nn.LSTM(hidden, hidden, direction="bidirect")
        self.head = nn.Linear(2 * hidden, 3)

    def forward(self, x: paddle.Tensor, lengths: paddle.Tensor) -> paddle.Tensor:
        out, _ = self.birnn(x, sequence_length=lengths)
        out, _ = self.rnn(out, sequence_length=lengths)
        out, (h, c) = self.lstm(out, sequence_length=lengths)
        return self.head(out.sum(axis=1)) + h.sum()


def recurrent_inputs(batch: int = 2, seed: int = 0) -> tuple:
    return randn(batch, 5, 8, seed=seed), paddle.to_tensor([5, 3, 4][:batch], dtype="int64")


# -- convolutions, pooling, resampling, normalisation ---------------------------------------------------------------


class Volumetric(nn.Layer):
    """Conv3D, BatchNorm3D, MaxPool3D with its mask and MaxUnPool3D, Conv3DTranspose, InstanceNorm3D."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv3D(2, 4, 3, padding=1)
        self.bn = nn.BatchNorm3D(4)
        self.pool = nn.MaxPool3D(2, return_mask=True)
        self.unpool = nn.MaxUnPool3D(2)
        self.up = nn.Conv3DTranspose(4, 4, 2, stride=2)
        self.norm = nn.InstanceNorm3D(4)
        self.head = nn.Linear(4, 3)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        x = F.relu(self.bn(self.conv(x)))
        pooled, mask = self.pool(x)
        x = self.unpool(pooled, mask) + self.up(pooled)
        return self.head(self.norm(x).mean(axis=[2, 3, 4]))


class Sequence1D(nn.Layer):
    """Conv1D, BatchNorm1D, max_pool1d with its mask, max_unpool1d, Conv1DTranspose, InstanceNorm1D and
    adaptive pooling with a mask."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1D(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm1D(8)
        self.up = nn.Conv1DTranspose(8, 8, 4, stride=2, padding=1)
        self.norm = nn.InstanceNorm1D(8)
        self.fc_bn = nn.BatchNorm1D(8)
        self.head = nn.Linear(8, 3)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        x = F.relu(self.bn(self.conv(x)))
        pooled, indices = F.max_pool1d(x, 2, return_mask=True)
        x = F.max_unpool1d(pooled, indices, 2) + self.up(pooled)
        x = self.norm(x)
        features, _ = F.adaptive_max_pool1d(x, 1, return_mask=True)
        return self.head(self.fc_bn(features.squeeze(-1)))


class Resampling(nn.Layer):
    """Conv2DTranspose (with ``output_size``), max_pool2d with its mask and MaxUnPool2D, interpolate in three
    modes, pixel_shuffle / pixel_unshuffle, GroupNorm, InstanceNorm2D and LayerNorm over channels."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2D(3, 8, 3, padding=1)
        self.group_norm = nn.GroupNorm(2, 8)
        self.unpool = nn.MaxUnPool2D(2)
        self.up = nn.Conv2DTranspose(8, 8, 3, stride=2, padding=1)
        self.shuffle = nn.PixelShuffle(2)
        self.instance_norm = nn.InstanceNorm2D(2)
        self.layer_norm = nn.LayerNorm(8)
        self.head = nn.Linear(8, 4)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        x = F.relu(self.group_norm(self.conv(x)))
        height, width = x.shape[2], x.shape[3]
        pooled, mask = F.max_pool2d(x, 2, return_mask=True)
        x = self.unpool(pooled, mask) + self.up(pooled, output_size=[height, width])
        x = x + F.interpolate(pooled, scale_factor=2, mode="nearest")
        x = x + F.interpolate(pooled, size=[height, width], mode="bilinear", align_corners=True)
        x = x + F.interpolate(pooled, size=[height, width], mode="bicubic", align_corners=False)
        x = self.instance_norm(self.shuffle(x))  # [N, 2, 2H, 2W]
        x = F.pixel_unshuffle(x, 2)  # back to [N, 8, H, W]
        x = self.layer_norm(x.transpose([0, 2, 3, 1]))
        return self.head(x.mean(axis=[1, 2]))


# -- losses -------------------------------------------------------------------------------------------------------


class LossVariants(nn.Layer):
    """Returns a scalar loss from cross entropy with label smoothing, with ``ignore_index``, with soft labels
    (and ``F.label_smooth`` of one-hot labels), and `nn.CrossEntropyLoss` with class weights."""

    def __init__(self, dim: int = 8, classes: int = 5) -> None:
        super().__init__()
        self.classes = classes
        self.fc = nn.Linear(dim, classes)
        self.weighted = nn.CrossEntropyLoss(weight=paddle.linspace(0.5, 1.5, classes), reduction="sum")

    def forward(self, x: paddle.Tensor, labels: paddle.Tensor) -> paddle.Tensor:
        logits = self.fc(x)
        smoothed = F.cross_entropy(logits, labels, label_smoothing=0.1)
        ignored = F.cross_entropy(logits, paddle.where(labels != 1, labels, paddle.full_like(labels, -100)),
                                  ignore_index=-100)
        soft = F.label_smooth(F.one_hot(labels, self.classes), epsilon=0.2)
        soft_loss = F.cross_entropy(logits, soft, soft_label=True)
        return smoothed + ignored + soft_loss + 0.1 * self.weighted(logits, labels)


def loss_inputs(batch: int = 6, seed: int = 0) -> tuple:
    return randn(batch, 8, seed=seed), randint(0, 5, (batch,), seed=seed + 1)


def the_output(output: Any, inputs: tuple) -> paddle.Tensor:
    return output


# -- user-code styles ------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class BlockConfig:
    dim: int = 16
    hidden_ratio: int = 2
    activation: str = "gelu"
    use_bias: bool = True
    eps: float = 1e-5


class BaseBlock(nn.Layer):
    """The root of a ``super()`` chain: a class constant, a property and a ``**kwargs``-taking forward."""

    SCALE = 0.5

    def __init__(self, config: BlockConfig) -> None:
        super().__init__()
        self.config = config
        self.norm = nn.LayerNorm(config.dim, epsilon=config.eps)

    @property
    def hidden(self) -> int:
        return self.config.dim * self.config.hidden_ratio

    def forward(self, x: paddle.Tensor, **kwargs: Any) -> paddle.Tensor:
        return self.norm(x) * self.SCALE


class FeedForwardBlock(BaseBlock):
    ACTIVATIONS = {"gelu": F.gelu, "relu": F.relu}

    def __init__(self, config: BlockConfig) -> None:
        super().__init__(config)
        self.up = nn.Linear(config.dim, self.hidden, bias_attr=config.use_bias)
        self.down = nn.Linear(self.hidden, config.dim)

    def forward(self, x: paddle.Tensor, residual_scale: float = 1.0, **kwargs: Any) -> paddle.Tensor:
        h = super().forward(x, **kwargs)
        h = self.down(self.ACTIVATIONS[self.config.activation](self.up(h)))
        return x * residual_scale + h


class GatedBlock(FeedForwardBlock):
    def forward(self, x: paddle.Tensor, gate: paddle.Tensor | None = None, **kwargs: Any) -> paddle.Tensor:
        out = super().forward(x, **kwargs)
        if gate is not None:
            out = out * F.sigmoid(gate)
        return out


class StyledModel(nn.Layer):
    """Dataclass config, ``**kwargs`` forwarded through a three-level ``super()`` chain, properties, class
    constants, in-place activations, a registered buffer, ``paddle.where`` masks, einsum, ``paddle.no_grad`` in
    forward and forward pre/post hooks."""

    def __init__(self, config: BlockConfig | None = None) -> None:
        super().__init__()
        self.config = config or BlockConfig()
        self.blocks = nn.LayerList([GatedBlock(self.config), FeedForwardBlock(self.config)])
        self.proj = nn.Linear(self.config.dim, self.config.dim)
        self.register_buffer("scale", paddle.linspace(0.5, 1.5, self.config.dim))
        self.register_buffer("seen", paddle.zeros([1]), persistable=False)
        self.head = nn.Linear(self.config.dim, 3)
        self.proj.register_forward_pre_hook(self._scale_input)
        self.head.register_forward_post_hook(self._clip_output)

    @staticmethod
    def _scale_input(layer: nn.Layer, inputs: tuple) -> tuple:
        return (inputs[0] * 0.9,)

    @staticmethod
    def _clip_output(layer: nn.Layer, inputs: tuple, output: paddle.Tensor) -> paddle.Tensor:
        return paddle.clip(output, -5.0, 5.0)

    def forward(self, x: paddle.Tensor, mask: paddle.Tensor, **kwargs: Any) -> paddle.Tensor:
        options = {"residual_scale": 0.8, **kwargs}
        x = self.blocks[0](x, gate=x, **options)
        x = self.blocks[1](x, **options)
        h = self.proj(x) * self.scale
        h.add_(x)
        F.relu_(h)
        h = paddle.where(mask.unsqueeze(-1), h, paddle.zeros_like(h))
        scores = paddle.einsum("bld,bmd->blm", h, x)
        h = h + paddle.einsum("blm,bmd->bld", F.softmax(scores, axis=-1), x)
        with paddle.no_grad():
            reference = h.mean()
            self.seen.add_(paddle.ones([1]))
        h = h - reference
        return self.head(h.sum(axis=1))


def styled_inputs(batch: int = 2, seed: int = 0) -> tuple:
    mask = paddle.to_tensor([[True] * 4 + [False] * 2] * batch)
    return randn(batch, 6, 16, seed=seed), mask


# -- the table ---------------------------------------------------------------------------------------------------------


def _spec(name: str, builder: Any, inputs: Any, loss: Any, other_batch: Any, slow: bool = False) -> ModelSpec:
    return ModelSpec(name, seeded(builder), inputs, loss, other_batch=other_batch, slow=slow)


def _first_output_loss(classes: int) -> Any:
    single = classification_loss(classes)
    return lambda output, inputs: single(output[0], inputs) + (output[1] * output[1]).mean()


MORE = {
    spec.name: spec for spec in [
        _spec("masked_attention", MaskedAttention, masked_attention_inputs, _first_output_loss(3),
              lambda: masked_attention_inputs(3, seed=5)),
        _spec("cached_attention", CachedAttention, lambda: (randn(2, 3, 16, seed=1), randn(2, 4, 16, seed=2)),
              classification_loss(3), lambda: (randn(3, 3, 16, seed=3), randn(3, 4, 16, seed=4))),
        _spec("incremental_decoder", IncrementalDecoder, decoder_inputs, mean_square_loss,
              lambda: decoder_inputs(3, seed=2)),
        _spec("containers_padding_idx", ContainerNet, padded_ids, classification_loss(4), lambda: padded_ids(3, 1)),
        _spec("recurrent_sequence_length", RecurrentNet, recurrent_inputs, classification_loss(3),
              lambda: recurrent_inputs(3, seed=1)),
        _spec("volumetric", Volumetric, lambda: (randn(2, 2, 4, 4, 4, seed=1),), classification_loss(3),
              lambda: (randn(3, 2, 4, 4, 4, seed=2),)),
        _spec("sequence_1d", Sequence1D, lambda: (randn(2, 3, 8, seed=1),), classification_loss(3),
              lambda: (randn(3, 3, 8, seed=2),)),
        _spec("resampling", Resampling, lambda: (randn(2, 3, 8, 8, seed=1),), classification_loss(4),
              lambda: (randn(3, 3, 8, 8, seed=2),)),
        _spec("loss_variants", LossVariants, loss_inputs, the_output, lambda: loss_inputs(7, seed=3)),
        _spec("user_styles", StyledModel, styled_inputs, classification_loss(3), lambda: styled_inputs(3, seed=1)),
    ]
}


# -- a second batch ------------------------------------------------------------------------------------------------


class KwargsHooked(nn.Layer):
    """Forward hooks registered ``with_kwargs=True`` (they see and may replace the keyword arguments), a hook
    prepended before another, a sublayer subclassing `nn.Linear` that calls ``super().forward`` and a method
    decorated with ``paddle.no_grad()``."""

    def __init__(self) -> None:
        super().__init__()
        self.block = ScaledLinear(8, 8)
        self.head = nn.Linear(8, 3)
        self.block.register_forward_pre_hook(self._pre, with_kwargs=True)
        self.block.register_forward_post_hook(self._post, with_kwargs=True)
        self.head.register_forward_post_hook(lambda layer, inputs, output: output * 0.5)
        self.head.register_forward_post_hook(lambda layer, inputs, output: output + 1.0, prepend=True)

    @staticmethod
    def _pre(layer: nn.Layer, args: tuple, kwargs: dict) -> tuple:
        return (args[0] * 2.0,), {**kwargs, "scale": kwargs.get("scale", 1.0) * 0.5}

    @staticmethod
    def _post(layer: nn.Layer, args: tuple, kwargs: dict, output: paddle.Tensor) -> paddle.Tensor:
        return output + kwargs["scale"]

    @paddle.no_grad()
    def statistics(self, x: paddle.Tensor) -> paddle.Tensor:
        return x.mean(axis=0, keepdim=True)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        h = self.block(x, scale=3.0)
        return self.head(h - self.statistics(h))


class ScaledLinear(nn.Linear):
    def forward(self, x: paddle.Tensor, scale: float = 1.0) -> paddle.Tensor:
        return super().forward(x) * scale


class EncoderWithPadding(nn.Layer):
    """`nn.TransformerEncoder` with a key-padding mask built from lengths and a causal mask,
    `F.scaled_dot_product_attention`, `masked_fill` and `topk` (a named tuple)."""

    def __init__(self, dim: int = 16) -> None:
        super().__init__()
        layer = nn.TransformerEncoderLayer(dim, 4, 32, dropout=0.0, activation="gelu")
        self.encoder = nn.TransformerEncoder(layer, 2)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.head = nn.Linear(dim, 3)

    def forward(self, x: paddle.Tensor, lengths: paddle.Tensor) -> paddle.Tensor:
        length = x.shape[1]
        padding = paddle.arange(length).unsqueeze(0) >= lengths.unsqueeze(1)  # True where padded
        mask = paddle.where(padding, paddle.full([], float("-inf")), paddle.zeros([])).unsqueeze(1).unsqueeze(1)
        causal = paddle.triu(paddle.full([length, length], float("-inf")), diagonal=1)
        x = self.encoder(x, src_mask=mask + causal)
        q, k, v = self.qkv(x).unsqueeze(2).chunk(3, axis=-1)  # [batch, length, heads=1, dim]
        x = x + F.scaled_dot_product_attention(q, k, v, is_causal=True).squeeze(2)
        x = x.masked_fill(padding.unsqueeze(-1), 0.0)
        top = x.topk(2, axis=1)
        return self.head(top.values.sum(axis=1) + x.sum(axis=1))


class RecurrentVariants(nn.Layer):
    """GRU with initial states and ``sequence_length``, an `nn.RNN` over an `LSTMCell`, `BiRNN` of `GRUCell`."""

    def __init__(self, dim: int = 6, hidden: int = 8) -> None:
        super().__init__()
        self.gru = nn.GRU(dim, hidden, num_layers=2, time_major=False)
        self.cell_rnn = nn.RNN(nn.LSTMCell(hidden, hidden))
        self.birnn = nn.BiRNN(nn.GRUCell(hidden, hidden), nn.GRUCell(hidden, hidden))
        self.head = nn.Linear(2 * hidden, 3)

    def forward(self, x: paddle.Tensor, lengths: paddle.Tensor, h0: paddle.Tensor) -> paddle.Tensor:
        out, h = self.gru(x, h0, sequence_length=lengths)
        out, (h, c) = self.cell_rnn(out, sequence_length=lengths)
        out, _ = self.birnn(out + h.unsqueeze(1), sequence_length=lengths)
        return self.head(out.mean(axis=1))


def recurrent_variant_inputs(batch: int = 2, seed: int = 0) -> tuple:
    lengths = paddle.to_tensor([5, 2, 4][:batch], dtype="int64")
    return randn(batch, 5, 6, seed=seed), lengths, randn(2, batch, 8, seed=seed + 1)


class ImageOps(nn.Layer):
    """Conv with ``padding='same'``, dilation and groups, depthwise separable convs, adaptive pooling, unfold /
    fold, grid_sample of an affine grid and a channel shuffle by reshape/transpose."""

    def __init__(self) -> None:
        super().__init__()
        self.same = nn.Conv2D(4, 8, 3, padding="same", dilation=2)
        self.depthwise = nn.Conv2D(8, 8, 3, padding=1, groups=8)
        self.pointwise = nn.Conv2D(8, 8, 1)
        self.pool = nn.AdaptiveAvgPool2D((2, 2))
        self.theta = self.create_parameter([1, 2, 3], default_initializer=nn.initializer.Assign(
            paddle.to_tensor([[[0.9, 0.1, 0.0], [-0.1, 0.9, 0.0]]])))
        self.head = nn.Linear(8 * 4 + 8 * 9, 3)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        x = F.relu(self.same(x))
        batch, channels, height, width = x.shape
        x = x.reshape([batch, 2, channels // 2, height, width]).transpose([0, 2, 1, 3, 4]).reshape(
            [batch, channels, height, width])
        x = self.pointwise(self.depthwise(x))
        grid = F.affine_grid(self.theta.expand([batch, 2, 3]), [batch, channels, height, width],
                             align_corners=False)
        x = x + F.grid_sample(x, grid, align_corners=False)
        patches = F.unfold(x, kernel_sizes=3, strides=2)  # [batch, channels * 9, blocks]
        folded = F.fold(patches, output_sizes=[height - (height + 1) % 2, width - (width + 1) % 2],
                        kernel_sizes=3, strides=2)
        features = paddle.concat([self.pool(x).flatten(1), patches.mean(axis=-1)], axis=1)
        return self.head(features) + folded.mean()


MORE.update({
    spec.name: spec for spec in [
        _spec("kwargs_hooks", KwargsHooked, lambda: (randn(4, 8, seed=1),), classification_loss(3),
              lambda: (randn(5, 8, seed=2),)),
        _spec("encoder_padding_masks", EncoderWithPadding, lambda: masked_attention_inputs(2)[::2],
              classification_loss(3), lambda: masked_attention_inputs(3, seed=4)[::2]),
        _spec("recurrent_variants", RecurrentVariants, recurrent_variant_inputs, classification_loss(3),
              lambda: recurrent_variant_inputs(3, seed=2)),
        _spec("image_ops", ImageOps, lambda: (randn(2, 4, 7, 7, seed=1),), classification_loss(3),
              lambda: (randn(3, 4, 7, 7, seed=2),)),
    ]
})

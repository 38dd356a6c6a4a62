"""A third batch of models written the way popular repositories write them (issue 27): a ViT with hand-written
stochastic depth (``paddle.rand`` in training), a UNet with padded skip connections, a BERT-like encoder
returning a dict, a VAE drawing ``paddle.randn_like``, mixture-of-experts with top-k gating, weight tying,
``paddle.nn.utils`` reparametrisations with `nn.ParameterList` / `nn.LayerDict`, and user-code styles
(``functools.partial`` activations, an activation registry, ``@property`` submodules, ``super().forward``
chains, dataclass configs and enums).

Models that draw random numbers in forward are marked ``random``: the harness seeds Paddle alike before the
eager call and the translated one, and a translation must draw the same numbers as eager.
"""
from __future__ import annotations

import dataclasses
import enum
import functools
from typing import Any

import numpy as np
import paddle
import paddle.nn as nn
import paddle.nn.functional as F

from .zoo import ModelSpec, classification_loss, mean_square_loss, randint, randn, seeded

# -- ViT with stochastic depth ------------------------------------------------------------------------------------


def drop_path(x: paddle.Tensor, drop_prob: float = 0.0, training: bool = False) -> paddle.Tensor:
    """Stochastic depth per sample, as timm / PaddleClas write it (a batch dimension read with paddle.shape)."""
    if drop_prob == 0.0 or not training:
        return x
    keep_prob = paddle.to_tensor(1 - drop_prob, dtype=x.dtype)
    shape = (paddle.shape(x)[0],) + (1,) * (x.ndim - 1)
    random_tensor = keep_prob + paddle.rand(shape, dtype=x.dtype)
    random_tensor = paddle.floor(random_tensor)
    return x.divide(keep_prob) * random_tensor


class DropPath(nn.Layer):
    def __init__(self, drop_prob: float = 0.0) -> None:
        super().__init__()
        self.drop_prob = drop_prob

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return drop_path(x, self.drop_prob, self.training)


class Identity(nn.Layer):
    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return x


class Mlp(nn.Layer):
    def __init__(self, dim: int, hidden: int, act_layer: type[nn.Layer] = nn.GELU) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = act_layer()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class ClasAttention(nn.Layer):
    def __init__(self, dim: int, num_heads: int = 4, qkv_bias: bool = True) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.scale = (dim // num_heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3, bias_attr=qkv_bias)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        N, C = x.shape[1:]
        qkv = self.qkv(x).reshape((-1, N, 3, self.num_heads, C // self.num_heads)).transpose((2, 0, 3, 1, 4))
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = (q.matmul(k.transpose((0, 1, 3, 2)))) * self.scale
        attn = F.softmax(attn, axis=-1)
        x = (attn.matmul(v)).transpose((0, 2, 1, 3)).reshape((-1, N, C))
        return self.proj(x)


class ViTBlock(nn.Layer):
    def __init__(self, dim: int, num_heads: int, mlp_ratio: float, drop_path: float) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, epsilon=1e-6)
        self.attn = ClasAttention(dim, num_heads)
        self.drop_path = DropPath(drop_path) if drop_path > 0.0 else Identity()
        self.norm2 = nn.LayerNorm(dim, epsilon=1e-6)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        x = x + self.drop_path(self.attn(self.norm1(x)))
        return x + self.drop_path(self.mlp(self.norm2(x)))


class PatchEmbed(nn.Layer):
    def __init__(self, img_size: int = 16, patch_size: int = 4, in_chans: int = 3, embed_dim: int = 32) -> None:
        super().__init__()
        self.num_patches = (img_size // patch_size) ** 2
        self.proj = nn.Conv2D(in_chans, embed_dim, kernel_size=patch_size, stride=patch_size)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return self.proj(x).flatten(2).transpose((0, 2, 1))


class VisionTransformer(nn.Layer):
    """PaddleClas-style: cls token expanded by ``paddle.shape(x)[0]``, a learned position embedding made by
    ``create_parameter``, pre-norm blocks with linearly growing drop-path rates."""

    def __init__(self, img_size: int = 16, patch_size: int = 4, embed_dim: int = 32, depth: int = 3,
                 num_heads: int = 4, mlp_ratio: float = 2.0, drop_path_rate: float = 0.3,
                 class_num: int = 5) -> None:
        super().__init__()
        self.patch_embed = PatchEmbed(img_size, patch_size, 3, embed_dim)
        num_patches = self.patch_embed.num_patches
        self.pos_embed = self.create_parameter(shape=(1, num_patches + 1, embed_dim),
                                               default_initializer=nn.initializer.TruncatedNormal(std=0.02))
        self.add_parameter("pos_embed", self.pos_embed)
        self.cls_token = self.create_parameter(shape=(1, 1, embed_dim),
                                               default_initializer=nn.initializer.Constant(0.0))
        self.add_parameter("cls_token", self.cls_token)
        dpr = np.linspace(0, drop_path_rate, depth)
        self.blocks = nn.LayerList([ViTBlock(embed_dim, num_heads, mlp_ratio, dpr[i]) for i in range(depth)])
        self.norm = nn.LayerNorm(embed_dim, epsilon=1e-6)
        self.head = nn.Linear(embed_dim, class_num)

    def forward_features(self, x: paddle.Tensor) -> paddle.Tensor:
        B = paddle.shape(x)[0]
        x = self.patch_embed(x)
        cls_tokens = self.cls_token.expand((B, -1, -1))
        x = paddle.concat((cls_tokens, x), axis=1)
        x = x + self.pos_embed
        for blk in self.blocks:
            x = blk(x)
        x = self.norm(x)
        return x[:, 0]

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return self.head(self.forward_features(x))


# -- UNet -----------------------------------------------------------------------------------------------------------


class DoubleConv(nn.Sequential):
    def __init__(self, in_channels: int, out_channels: int, mid_channels: int | None = None) -> None:
        mid_channels = mid_channels or out_channels
        super().__init__(
            nn.Conv2D(in_channels, mid_channels, 3, padding=1, bias_attr=False), nn.BatchNorm2D(mid_channels),
            nn.ReLU(),
            nn.Conv2D(mid_channels, out_channels, 3, padding=1, bias_attr=False), nn.BatchNorm2D(out_channels),
            nn.ReLU())


class Down(nn.Sequential):
    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__(nn.MaxPool2D(2, stride=2), DoubleConv(in_channels, out_channels))


class Up(nn.Layer):
    """Upsampling then a skip connection; an odd-sized skip is matched by padding the upsampled map."""

    def __init__(self, in_channels: int, out_channels: int, bilinear: bool = True) -> None:
        super().__init__()
        self.bilinear = bilinear
        if bilinear:
            self.conv = DoubleConv(in_channels, out_channels, in_channels // 2)
        else:
            self.up = nn.Conv2DTranspose(in_channels, in_channels // 2, kernel_size=2, stride=2)
            self.conv = DoubleConv(in_channels, out_channels)

    def forward(self, x1: paddle.Tensor, x2: paddle.Tensor) -> paddle.Tensor:
        if self.bilinear:
            x1 = F.interpolate(x1, scale_factor=2, mode="bilinear", align_corners=True)
        else:
            x1 = self.up(x1)
        diff_y = x2.shape[2] - x1.shape[2]
        diff_x = x2.shape[3] - x1.shape[3]
        x1 = F.pad(x1, [diff_x // 2, diff_x - diff_x // 2, diff_y // 2, diff_y - diff_y // 2])
        return self.conv(paddle.concat([x2, x1], axis=1))


class UNet(nn.Layer):
    def __init__(self, n_channels: int = 3, n_classes: int = 2, bilinear: bool = False) -> None:
        super().__init__()
        factor = 2 if bilinear else 1
        self.inc = DoubleConv(n_channels, 8)
        self.down1 = Down(8, 16)
        self.down2 = Down(16, 32 // factor)
        self.up1 = Up(32, 16 // factor, bilinear)
        self.up2 = Up(16, 8, bilinear)
        self.outc = nn.Conv2D(8, n_classes, kernel_size=1)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        x1 = self.inc(x)
        x2 = self.down1(x1)
        x3 = self.down2(x2)
        x = self.up1(x3, x2)
        x = self.up2(x, x1)
        return self.outc(x)


def segmentation_loss(logits: paddle.Tensor, inputs: tuple) -> paddle.Tensor:
    labels = randint(0, logits.shape[1], (logits.shape[0], logits.shape[2], logits.shape[3]), seed=11)
    return F.cross_entropy(logits.transpose([0, 2, 3, 1]), labels.unsqueeze(-1))


# -- BERT-like encoder -------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class BertConfig:
    vocab_size: int = 40
    hidden_size: int = 32
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    intermediate_size: int = 64
    max_position_embeddings: int = 16
    type_vocab_size: int = 2
    pad_token_id: int = 0
    layer_norm_eps: float = 1e-12
    hidden_act: str = "gelu"
    num_labels: int = 3


class BertEmbeddings(nn.Layer):
    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.layer_norm = nn.LayerNorm(config.hidden_size, epsilon=config.layer_norm_eps)
        self.dropout = nn.Dropout(0.0)

    def forward(self, input_ids: paddle.Tensor, token_type_ids: paddle.Tensor | None = None,
                position_ids: paddle.Tensor | None = None) -> paddle.Tensor:
        if position_ids is None:
            ones = paddle.ones_like(input_ids, dtype="int64")
            seq_length = paddle.cumsum(ones, axis=-1)
            position_ids = seq_length - ones
            position_ids.stop_gradient = True
        if token_type_ids is None:
            token_type_ids = paddle.zeros_like(input_ids, dtype="int64")
        embeddings = (self.word_embeddings(input_ids) + self.position_embeddings(position_ids)
                      + self.token_type_embeddings(token_type_ids))
        return self.dropout(self.layer_norm(embeddings))


class BertSelfAttention(nn.Layer):
    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.num_attention_heads = config.num_attention_heads
        self.attention_head_size = config.hidden_size // config.num_attention_heads
        self.all_head_size = self.num_attention_heads * self.attention_head_size
        self.query = nn.Linear(config.hidden_size, self.all_head_size)
        self.key = nn.Linear(config.hidden_size, self.all_head_size)
        self.value = nn.Linear(config.hidden_size, self.all_head_size)

    def transpose_for_scores(self, x: paddle.Tensor) -> paddle.Tensor:
        new_x_shape = x.shape[:-1] + [self.num_attention_heads, self.attention_head_size]
        return x.reshape(new_x_shape).transpose([0, 2, 1, 3])

    def forward(self, hidden_states: paddle.Tensor, attention_mask: paddle.Tensor | None = None,
                output_attentions: bool = False) -> tuple:
        query_layer = self.transpose_for_scores(self.query(hidden_states))
        key_layer = self.transpose_for_scores(self.key(hidden_states))
        value_layer = self.transpose_for_scores(self.value(hidden_states))
        attention_scores = paddle.matmul(query_layer, key_layer, transpose_y=True)
        attention_scores = attention_scores / (self.attention_head_size ** 0.5)
        if attention_mask is not None:
            attention_scores = attention_scores + attention_mask
        attention_probs = F.softmax(attention_scores, axis=-1)
        context_layer = paddle.matmul(attention_probs, value_layer).transpose([0, 2, 1, 3])
        context_layer = context_layer.reshape(context_layer.shape[:-2] + [self.all_head_size])
        return (context_layer, attention_probs) if output_attentions else (context_layer,)


ACT2FN = {"gelu": nn.GELU, "relu": nn.ReLU, "tanh": nn.Tanh}


class BertLayer(nn.Layer):
    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.attention = BertSelfAttention(config)
        self.attention_output = nn.Linear(config.hidden_size, config.hidden_size)
        self.attention_norm = nn.LayerNorm(config.hidden_size, epsilon=config.layer_norm_eps)
        self.intermediate = nn.Linear(config.hidden_size, config.intermediate_size)
        self.act = ACT2FN[config.hidden_act]()
        self.output = nn.Linear(config.intermediate_size, config.hidden_size)
        self.output_norm = nn.LayerNorm(config.hidden_size, epsilon=config.layer_norm_eps)

    def forward(self, hidden_states: paddle.Tensor, attention_mask: paddle.Tensor | None = None,
                **kwargs: Any) -> tuple:
        self_outputs = self.attention(hidden_states, attention_mask, **kwargs)
        attention_output = self.attention_norm(self.attention_output(self_outputs[0]) + hidden_states)
        layer_output = self.output_norm(self.output(self.act(self.intermediate(attention_output)))
                                        + attention_output)
        return (layer_output,) + self_outputs[1:]


class BertModel(nn.Layer):
    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config)
        self.layers = nn.LayerList([BertLayer(config) for _ in range(config.num_hidden_layers)])
        self.pooler = nn.Linear(config.hidden_size, config.hidden_size)

    def get_extended_attention_mask(self, input_ids: paddle.Tensor, dtype: Any) -> paddle.Tensor:
        mask = (input_ids != self.config.pad_token_id).unsqueeze(1).unsqueeze(2).cast(dtype)
        return (1.0 - mask) * -10000.0

    def forward(self, input_ids: paddle.Tensor, token_type_ids: paddle.Tensor | None = None,
                attention_mask: paddle.Tensor | None = None, output_hidden_states: bool = False,
                output_attentions: bool = False, return_dict: bool = True) -> Any:
        if attention_mask is None:
            attention_mask = self.get_extended_attention_mask(input_ids, self.pooler.weight.dtype)
        hidden_states = self.embeddings(input_ids, token_type_ids=token_type_ids)
        all_hidden_states = () if output_hidden_states else None
        all_attentions = () if output_attentions else None
        for layer in self.layers:
            if output_hidden_states:
                all_hidden_states = all_hidden_states + (hidden_states,)
            layer_outputs = layer(hidden_states, attention_mask, output_attentions=output_attentions)
            hidden_states = layer_outputs[0]
            if output_attentions:
                all_attentions = all_attentions + (layer_outputs[1],)
        pooled_output = paddle.tanh(self.pooler(hidden_states[:, 0]))
        if not return_dict:
            return (hidden_states, pooled_output)
        return {"last_hidden_state": hidden_states, "pooler_output": pooled_output,
                "hidden_states": all_hidden_states, "attentions": all_attentions}


class BertForSequenceClassification(nn.Layer):
    def __init__(self, config: BertConfig | None = None) -> None:
        super().__init__()
        config = config or BertConfig()
        self.num_labels = config.num_labels
        self.bert = BertModel(config)
        self.dropout = nn.Dropout(0.0)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)

    def forward(self, input_ids: paddle.Tensor, labels: paddle.Tensor | None = None, **kwargs: Any) -> dict:
        outputs = self.bert(input_ids, **kwargs)
        logits = self.classifier(self.dropout(outputs["pooler_output"]))
        result = {"logits": logits, "hidden_states": outputs["hidden_states"],
                  "attentions": outputs["attentions"]}
        if labels is not None:
            result["loss"] = F.cross_entropy(logits.reshape([-1, self.num_labels]), labels.reshape([-1]))
        return result


class BertCaller(nn.Layer):
    """How a training script calls it: token types, labels and output flags as keyword arguments."""

    def __init__(self) -> None:
        super().__init__()
        self.model = BertForSequenceClassification()

    def forward(self, input_ids: paddle.Tensor, token_type_ids: paddle.Tensor, labels: paddle.Tensor) -> dict:
        batch = {"input_ids": input_ids, "token_type_ids": token_type_ids, "labels": labels}
        return self.model(**batch, output_hidden_states=True, output_attentions=True)


def bert_inputs(batch: int = 2, length: int = 7, seed: int = 4) -> tuple:
    ids = randint(1, 40, (batch, length), seed=seed)
    ids[:, length - 2:] = 0
    token_types = paddle.concat([paddle.zeros([batch, 3], "int64"), paddle.ones([batch, length - 3], "int64")], 1)
    return ids, token_types, randint(0, 3, (batch,), seed=seed + 1)


def bert_loss(output: dict, inputs: tuple) -> paddle.Tensor:
    return output["loss"] + 0.1 * paddle.add_n([h.mean() for h in output["hidden_states"]]) + \
        0.1 * output["attentions"][-1].square().mean()


# -- VAE -------------------------------------------------------------------------------------------------------------


class VAE(nn.Layer):
    """The pytorch/examples VAE: reparameterisation by ``randn_like`` in training, the mean in eval."""

    def __init__(self, features: int = 20, hidden: int = 16, latent: int = 4) -> None:
        super().__init__()
        self.fc1 = nn.Linear(features, hidden)
        self.fc21 = nn.Linear(hidden, latent)
        self.fc22 = nn.Linear(hidden, latent)
        self.fc3 = nn.Linear(latent, hidden)
        self.fc4 = nn.Linear(hidden, features)

    def encode(self, x: paddle.Tensor) -> tuple[paddle.Tensor, paddle.Tensor]:
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu: paddle.Tensor, logvar: paddle.Tensor) -> paddle.Tensor:
        if not self.training:
            return mu
        std = paddle.exp(0.5 * logvar)
        eps = paddle.randn_like(std)
        return mu + eps * std

    def decode(self, z: paddle.Tensor) -> paddle.Tensor:
        return F.sigmoid(self.fc4(F.relu(self.fc3(z))))

    def forward(self, x: paddle.Tensor) -> tuple:
        mu, logvar = self.encode(x.reshape([-1, 20]))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


def vae_loss(output: tuple, inputs: tuple) -> paddle.Tensor:
    recon_x, mu, logvar = output
    bce = F.binary_cross_entropy(recon_x, inputs[0].reshape([-1, 20]), reduction="sum")
    kld = -0.5 * paddle.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return bce + kld


def vae_inputs(batch: int = 4, seed: int = 2) -> tuple:
    return (paddle.to_tensor(np.random.default_rng(seed).uniform(size=(batch, 20)).astype("float32")),)


# -- mixture of experts --------------------------------------------------------------------------------------------


class Expert(nn.Layer):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(dim, hidden)
        self.w2 = nn.Linear(hidden, dim)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return self.w2(F.silu(self.w1(x)))


class TopKMoE(nn.Layer):
    """Top-k gating: ``paddle.topk`` of the router's softmax, renormalised weights, a combine matrix made both by
    one-hot dispatch and by ``put_along_axis`` (checked equal through the output), every expert run densely and
    weighted, and a load-balancing auxiliary loss."""

    def __init__(self, dim: int = 16, num_experts: int = 4, top_k: int = 2, num_classes: int = 3) -> None:
        super().__init__()
        self.num_experts = num_experts
        self.top_k = top_k
        self.gate = nn.Linear(dim, num_experts, bias_attr=False)
        self.experts = nn.LayerList([Expert(dim, 2 * dim) for _ in range(num_experts)])
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x: paddle.Tensor) -> tuple:
        batch, length, dim = x.shape
        tokens = x.reshape([-1, dim])
        probs = F.softmax(self.gate(tokens), axis=-1)
        top_weights, top_indices = paddle.topk(probs, k=self.top_k, axis=-1)
        top_weights = top_weights / top_weights.sum(axis=-1, keepdim=True)
        one_hot = F.one_hot(top_indices, num_classes=self.num_experts)  # [tokens, k, experts]
        combine = (one_hot * top_weights.unsqueeze(-1)).sum(axis=1)
        scattered = paddle.put_along_axis(paddle.zeros_like(probs), top_indices, top_weights, axis=1)
        combine = 0.5 * (combine + scattered)
        expert_outputs = paddle.stack([expert(tokens) for expert in self.experts], axis=1)  # [tokens, E, dim]
        mixed = (combine.unsqueeze(-1) * expert_outputs).sum(axis=1)
        gathered = paddle.take_along_axis(probs, top_indices, axis=1)
        density = one_hot.sum(axis=1).astype("float32").mean(axis=0)
        aux_loss = (density * probs.mean(axis=0)).sum() * self.num_experts + gathered.mean()
        out = (tokens + mixed).reshape([batch, length, dim])
        return self.head(out.mean(axis=1)), aux_loss


def moe_loss(output: tuple, inputs: tuple) -> paddle.Tensor:
    return classification_loss(3)(output[0], inputs) + 0.01 * output[1]


# -- weight tying ----------------------------------------------------------------------------------------------------


class TiedLM(nn.Layer):
    """The output projection reuses the embedding matrix: ``matmul(h, embed.weight, transpose_y=True)``."""

    def __init__(self, vocab: int = 30, dim: int = 16) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.block = nn.TransformerEncoderLayer(dim, 2, 32, dropout=0.0, normalize_before=True)
        self.norm = nn.LayerNorm(dim)
        self.bias = self.create_parameter([vocab], is_bias=True)

    def forward(self, ids: paddle.Tensor, labels: paddle.Tensor) -> paddle.Tensor:
        h = self.norm(self.block(self.embed(ids)))
        logits = paddle.matmul(h, self.embed.weight, transpose_y=True) + self.bias
        return F.cross_entropy(logits.reshape([-1, logits.shape[-1]]), labels.reshape([-1]))


def tied_inputs(batch: int = 2, seed: int = 3) -> tuple:
    return randint(0, 30, (batch, 5), seed=seed), randint(0, 30, (batch, 5), seed=seed + 1)


def the_output(output: Any, inputs: tuple) -> paddle.Tensor:
    return output


# -- paddle.nn.utils reparametrisations, parameter and layer containers ---------------------------------------------------


class Reparametrised(nn.Layer):
    """``weight_norm`` on a Linear and a Conv, ``spectral_norm`` on a Linear (its power iteration updates buffers
    in training), an `nn.ParameterList` of per-stage scales and an `nn.LayerDict` of heads chosen by name."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.utils.weight_norm(nn.Conv2D(3, 6, 3, padding=1))
        self.fc = nn.utils.weight_norm(nn.Linear(6, 8), dim=0)
        self.spectral = nn.utils.spectral_norm(nn.Linear(8, 8), n_power_iterations=2)
        self.scales = nn.ParameterList([
            self.create_parameter([8], default_initializer=nn.initializer.Constant(1.0 + 0.1 * i))
            for i in range(2)])
        self.heads = nn.LayerDict({"main": nn.Linear(8, 4), "aux": nn.Linear(8, 4)})

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        h = F.relu(self.conv(x)).mean(axis=[2, 3])
        h = F.relu(self.fc(h)) * self.scales[0]
        h = self.spectral(h) * self.scales[1]
        out = 0
        for name, head in self.heads.items():
            out = out + (1.0 if name == "main" else 0.5) * head(h)
        for scale in self.scales:
            out = out + scale.mean()
        return out


# -- user-code styles ----------------------------------------------------------------------------------------------------


class Activation(enum.Enum):
    GELU = "gelu"
    SILU = "silu"
    LEAKY = "leaky"


class NormKind(enum.IntEnum):
    LAYER = 1
    RMS = 2


ACTIVATION_REGISTRY: dict[str, type[nn.Layer]] = {}


def register_activation(name: str) -> Any:
    def wrap(cls: type[nn.Layer]) -> type[nn.Layer]:
        ACTIVATION_REGISTRY[name] = cls
        return cls
    return wrap


@register_activation("squared_relu")
class SquaredReLU(nn.Layer):
    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return F.relu(x) ** 2


@register_activation("quick_gelu")
class QuickGELU(nn.Layer):
    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return x * F.sigmoid(1.702 * x)


FUNCTIONAL_ACTIVATIONS = {
    Activation.GELU: functools.partial(F.gelu, approximate=True),
    Activation.SILU: F.silu,
    Activation.LEAKY: functools.partial(F.leaky_relu, negative_slope=0.2),
}


@dataclasses.dataclass(frozen=True)
class StyleConfig:
    dim: int = 16
    depth: int = 3
    activation: Activation = Activation.GELU
    block_activation: str = "squared_relu"
    norm: NormKind = NormKind.RMS
    layer_scale: float | None = 0.5
    extra: dict = dataclasses.field(default_factory=lambda: {"head_bias": True})


class RMSNorm(nn.Layer):
    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = self.create_parameter([dim], default_initializer=nn.initializer.Constant(1.0))

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return x * paddle.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


NORMS = {NormKind.LAYER: nn.LayerNorm, NormKind.RMS: RMSNorm}


class BaseMLP(nn.Layer):
    def __init__(self, config: StyleConfig) -> None:
        super().__init__()
        self.config = config
        self._layers = nn.LayerDict({"fc_in": nn.Linear(config.dim, 2 * config.dim),
                                     "fc_out": nn.Linear(2 * config.dim, config.dim)})
        self.act_fn = FUNCTIONAL_ACTIVATIONS[config.activation]

    @property
    def fc_in(self) -> nn.Layer:
        return self._layers["fc_in"]

    @property
    def fc_out(self) -> nn.Layer:
        return self._layers["fc_out"]

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return self.fc_out(self.act_fn(self.fc_in(x)))


class ScaledMLP(BaseMLP):
    def __init__(self, config: StyleConfig) -> None:
        super().__init__(config)
        self.block_act = ACTIVATION_REGISTRY[config.block_activation]()

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        out = super().forward(x)
        if self.config.layer_scale is not None:
            out = out * self.config.layer_scale
        return self.block_act(out)


class ResidualMLP(ScaledMLP):
    def __init__(self, config: StyleConfig) -> None:
        super().__init__(config)
        self.norm = NORMS[config.norm](config.dim)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return x + super().forward(self.norm(x))


class StyleNet(nn.Layer):
    """Enum-keyed tables of ``functools.partial`` activations and norm classes, a registry of activation
    classes filled by a decorator, ``@property`` submodules, a three-level ``super().forward`` chain and a frozen
    dataclass config with an enum field."""

    def __init__(self, config: StyleConfig | None = None) -> None:
        super().__init__()
        self.config = config or StyleConfig()
        self.blocks = nn.LayerList([ResidualMLP(self.config) for _ in range(self.config.depth)])
        self.head = nn.Linear(self.config.dim, 3, bias_attr=self.config.extra["head_bias"])

    @property
    def last_block(self) -> ResidualMLP:
        return self.blocks[-1]

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        for block in self.blocks[:-1]:
            x = block(x)
        x = self.last_block(x)
        if self.config.norm is NormKind.RMS and self.config.activation == Activation.GELU:
            x = x * 0.5
        act = FUNCTIONAL_ACTIVATIONS[Activation(self.config.activation.value)]
        return self.head(act(x).mean(axis=1))


# -- rotary attention with a lazily grown cache ----------------------------------------------------------------------


class RotaryEmbedding(nn.Layer):
    """LLaMA-style: the cos/sin tables are rebuilt (attributes rebound in forward) when a longer sequence comes."""

    def __init__(self, dim: int, max_position_embeddings: int = 4, base: int = 10000) -> None:
        super().__init__()
        self.dim = dim
        inv_freq = 1.0 / (base ** (paddle.arange(0, dim, 2, dtype="float32") / dim))
        self.register_buffer("inv_freq", inv_freq, persistable=False)
        self._set_cos_sin_cache(max_position_embeddings)

    def _set_cos_sin_cache(self, seq_len: int) -> None:
        self.max_seq_len_cached = seq_len
        t = paddle.arange(seq_len, dtype="float32")
        freqs = paddle.einsum("i,j->ij", t, self.inv_freq)
        emb = paddle.concat([freqs, freqs], axis=-1)
        self.cos_cached = emb.cos()[None, :, None, :]
        self.sin_cached = emb.sin()[None, :, None, :]

    def forward(self, x: paddle.Tensor, seq_len: int) -> tuple:
        if seq_len > self.max_seq_len_cached:
            self._set_cos_sin_cache(seq_len)
        return self.cos_cached[:, :seq_len, :, :], self.sin_cached[:, :seq_len, :, :]


def rotate_half(x: paddle.Tensor) -> paddle.Tensor:
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return paddle.concat([-x2, x1], axis=-1)


class RotaryAttention(nn.Layer):
    """Causal self-attention with rotary embeddings; keeps the last attention map (``self.last_attn``, for
    visualisation) and counts its calls, as research code does."""

    def __init__(self, dim: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.o_proj = nn.Linear(dim, dim)
        self.rotary = RotaryEmbedding(self.head_dim)
        self.last_attn: paddle.Tensor | None = None
        self.calls = 0

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        batch, length, _ = x.shape
        q, k, v = self.qkv(x).reshape([batch, length, 3, self.heads, self.head_dim]).unbind(2)
        cos, sin = self.rotary(v, seq_len=length)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        scores = paddle.matmul(q.transpose([0, 2, 1, 3]), k.transpose([0, 2, 1, 3]), transpose_y=True)
        scores = scores / self.head_dim ** 0.5
        causal = paddle.triu(paddle.ones([length, length], dtype="bool"), 1)
        attn = F.softmax(scores.masked_fill(causal, float("-inf")), axis=-1)
        self.last_attn = attn.detach()
        self.calls += 1
        out = paddle.matmul(attn, v.transpose([0, 2, 1, 3])).transpose([0, 2, 1, 3]).reshape([batch, length, -1])
        return self.o_proj(out)


# -- the table ---------------------------------------------------------------------------------------------------------


def _spec(name: str, builder: Any, inputs: Any, loss: Any, other_batch: Any = None, slow: bool = False,
          random: bool = False) -> ModelSpec:
    return ModelSpec(name, seeded(builder), inputs, loss, other_batch=other_batch, slow=slow, random=random)


def _image(batch: int, size: int, seed: int) -> tuple:
    return (randn(batch, 3, size, size, seed=seed),)


THIRD = {
    spec.name: spec for spec in [
        _spec("vit_drop_path", VisionTransformer, lambda: _image(2, 16, 1), classification_loss(5),
              lambda: _image(3, 16, 2), random=True),
        _spec("unet_transposed", UNet, lambda: _image(2, 10, 1), segmentation_loss, lambda: _image(3, 10, 2)),
        _spec("unet_bilinear", lambda: UNet(bilinear=True), lambda: _image(2, 11, 1), segmentation_loss,
              lambda: _image(3, 11, 2)),
        _spec("bert_classifier", BertCaller, bert_inputs, bert_loss, lambda: bert_inputs(3, seed=7)),
        _spec("vae", VAE, vae_inputs, vae_loss, lambda: vae_inputs(5, seed=3), random=True),
        _spec("topk_moe", TopKMoE, lambda: (randn(2, 5, 16, seed=1),), moe_loss, lambda: (randn(3, 5, 16, seed=2),)),
        _spec("tied_lm", TiedLM, tied_inputs, the_output, lambda: tied_inputs(3, seed=5)),
        _spec("reparametrised", Reparametrised, lambda: _image(2, 6, 1), classification_loss(4),
              lambda: _image(3, 6, 2)),
        _spec("user_styles_registry", StyleNet, lambda: (randn(2, 4, 16, seed=1),), classification_loss(3),
              lambda: (randn(3, 4, 16, seed=2),)),
    ]
}

"""Translating a user `paddle.nn.Layer`: outputs, gradients, optimizer steps, train/eval."""
from __future__ import annotations

import copy

import numpy as np
import paddle
import paddle.nn.functional as F
import pytest

import sot
from sot.eval_frame_ext import cache_entries

from conftest import assert_same


class Block(paddle.nn.Layer):
    """Parameters made with create_parameter, a Python float attribute, several ops in forward."""

    def __init__(self, d_in: int = 6, d_hidden: int = 8, d_out: int = 5) -> None:
        super().__init__()
        self.w1 = self.create_parameter([d_in, d_hidden])
        self.b1 = self.create_parameter([d_hidden], is_bias=True)
        self.w2 = self.create_parameter([d_hidden, d_out])
        self.scale = 0.5

    def forward(self, x):
        h = F.linear(x, self.w1, self.b1)
        h = F.relu(h)
        logits = paddle.matmul(h, self.w2) * self.scale
        return F.softmax(logits, axis=-1), logits


class DropoutBlock(paddle.nn.Layer):
    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        self.w = self.create_parameter([16, 16], default_initializer=paddle.nn.initializer.Assign(
            np.eye(16, dtype="float32")))
        self.p = p

    def forward(self, x):
        h = paddle.matmul(x, self.w) + 0
        return F.dropout(h, self.p, training=self.training)


def _x(*shape: int, seed: int = 0, stop_gradient: bool = True) -> paddle.Tensor:
    value = paddle.to_tensor(np.random.default_rng(seed).standard_normal(shape).astype("float32"))
    value.stop_gradient = stop_gradient
    return value


def _pair():
    paddle.seed(123)
    layer = Block()
    return layer, copy.deepcopy(layer)


def _assert_params_equal(a: paddle.nn.Layer, b: paddle.nn.Layer) -> None:
    for (name_a, pa), (name_b, pb) in zip(a.named_parameters(), b.named_parameters()):
        assert name_a == name_b
        np.testing.assert_allclose(pa.numpy(), pb.numpy(), rtol=1e-5, atol=1e-6)


def test_outputs_match_eager(compile_all):
    layer, eager = _pair()
    fast = sot.symbolic_translate(layer)
    x = _x(4, 6)
    for _ in range(3):
        assert_same(fast(x), eager(x))
    stats = sot.stats()
    assert stats.translate_count == 1 and stats.compiled_graphs == 1 and stats.fallbacks == 0, stats


def test_outputs_match_eager_default_min_graph_size():
    layer, eager = _pair()
    fast = sot.symbolic_translate(layer)
    x = _x(4, 6)
    assert_same(fast(x), eager(x))
    assert_same(fast(x), eager(x))
    assert sot.stats().fallbacks == 0


def test_gradients_match_eager(compile_all):
    layer, eager = _pair()
    fast = sot.symbolic_translate(layer)
    x_fast, x_eager = _x(4, 6, stop_gradient=False), _x(4, 6, stop_gradient=False)
    target = _x(4, 5, seed=3)

    probs, logits = fast(x_fast)
    loss = ((probs - target) ** 2).mean() + logits.mean()
    e_probs, e_logits = eager(x_eager)
    e_loss = ((e_probs - target) ** 2).mean() + e_logits.mean()
    assert_same(loss, e_loss)
    loss.backward()
    e_loss.backward()

    np.testing.assert_allclose(x_fast.grad.numpy(), x_eager.grad.numpy(), rtol=1e-5, atol=1e-6)
    for (name, p), (_, ep) in zip(layer.named_parameters(), eager.named_parameters()):
        assert p.grad is not None, name
        np.testing.assert_allclose(p.grad.numpy(), ep.grad.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
    assert sot.stats().compiled_graphs == 1


def test_optimizer_step_does_not_retranslate(compile_all):
    layer, eager = _pair()
    fast = sot.symbolic_translate(layer)
    opt = paddle.optimizer.SGD(learning_rate=0.1, parameters=layer.parameters())
    e_opt = paddle.optimizer.SGD(learning_rate=0.1, parameters=eager.parameters())
    x = _x(4, 6)
    target = _x(4, 5, seed=3)
    first = fast(x)[0].numpy()
    for _ in range(3):
        probs, logits = fast(x)
        e_probs, e_logits = eager(x)
        assert_same((probs, logits), (e_probs, e_logits))
        loss = ((probs - target) ** 2).sum() + logits.sum()
        e_loss = ((e_probs - target) ** 2).sum() + e_logits.sum()
        loss.backward()
        e_loss.backward()
        opt.step()
        e_opt.step()
        opt.clear_grad()
        e_opt.clear_grad()
        _assert_params_equal(layer, eager)
    # the outputs follow the updated parameters
    final = fast(x)
    assert_same(final, eager(x))
    assert not np.allclose(final[0].numpy(), first)
    stats = sot.stats()
    assert stats.translate_count == 1, stats
    assert stats.compiled_graphs == 1, stats


def test_validation_under_no_grad_then_training(compile_all):
    layer, eager = _pair()
    fast = sot.symbolic_translate(layer)
    x = _x(4, 6)
    with paddle.no_grad():
        val = fast(x)
        e_val = eager(x)
    assert_same(val, e_val)
    probs, logits = fast(x)
    e_probs, e_logits = eager(x)
    assert_same((probs, logits), (e_probs, e_logits))
    (probs.sum() + logits.mean()).backward()
    (e_probs.sum() + e_logits.mean()).backward()
    for (name, p), (_, ep) in zip(layer.named_parameters(), eager.named_parameters()):
        assert p.grad is not None, name
        np.testing.assert_allclose(p.grad.numpy(), ep.grad.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)


def test_set_value_on_parameter_is_seen(compile_all):
    layer, _ = _pair()
    fast = sot.symbolic_translate(layer)
    x = _x(4, 6)
    fast(x)
    layer.w2.set_value(paddle.zeros_like(layer.w2))
    probs, logits = fast(x)
    np.testing.assert_allclose(logits.numpy(), 0.0)
    np.testing.assert_allclose(probs.numpy(), 1.0 / 5, rtol=1e-6)
    assert sot.stats().translate_count == 1


def test_python_attribute_change_is_guarded(compile_all):
    x = _x(4, 6)
    for _ in range(20):  # repeated: a lost guard may depend on memory reuse inside the simulation
        sot.reset()
        layer, eager = _pair()
        fast = sot.symbolic_translate(layer)
        assert_same(fast(x), eager(x))
        layer.scale = 2.0
        eager.scale = 2.0
        assert_same(fast(x), eager(x))
        assert sot.stats().translate_count == 2


def test_guards_cover_python_attributes(compile_all):
    for _ in range(20):
        sot.reset()
        layer, _ = _pair()
        report = str(sot.explain(layer, _x(4, 6)))
        assert "self.scale" in report, report


def test_forward_hooks_run(compile_all):
    layer, eager = _pair()
    for target in (layer, eager):
        target.register_forward_pre_hook(lambda lyr, inputs: (inputs[0] * 2,))
        target.register_forward_post_hook(lambda lyr, inputs, output: (output[0], output[1] + 100))
    fast = sot.symbolic_translate(layer)
    x = _x(4, 6)
    assert_same(fast(x), eager(x))
    assert_same(fast(x), eager(x))


def test_translated_layer_delegates(compile_all):
    layer, _ = _pair()
    fast = sot.symbolic_translate(layer)
    assert len(fast.parameters()) == 3
    assert fast.scale == 0.5
    assert isinstance(fast.state_dict(), dict)


def test_train_eval_switch_with_dropout(compile_all):
    paddle.seed(7)
    layer = DropoutBlock(p=0.5)
    fast = sot.symbolic_translate(layer)
    x = paddle.ones([64, 16])

    layer.eval()
    out_eval = fast(x)
    assert_same(out_eval, layer(x))
    np.testing.assert_allclose(out_eval.numpy(), 1.0)

    layer.train()
    out_train = fast(x).numpy()
    # upscale_in_train: each value is dropped (0) or scaled by 1 / (1 - p)
    assert set(np.unique(out_train)).issubset({0.0, 2.0}), np.unique(out_train)
    dropped = float((out_train == 0).mean())
    assert 0.3 < dropped < 0.7, dropped

    layer.eval()
    assert_same(fast(x), layer(x))
    layer.train()
    again = fast(x).numpy()
    assert set(np.unique(again)).issubset({0.0, 2.0})
    stats = sot.stats()
    assert stats.translate_count == 2, stats  # one entry per mode, both reused


def test_eval_via_translated_layer_object(compile_all):
    layer = DropoutBlock(p=0.9)
    fast = sot.symbolic_translate(layer)
    x = paddle.ones([8, 16])
    fast.eval()
    assert not layer.training
    assert_same(fast(x), layer(x))
    np.testing.assert_allclose(fast(x).numpy(), 1.0)
    fast.train()
    assert layer.training
    assert float((fast(x) == 0).astype("float32").mean()) > 0.5


def test_forward_hooks_are_simulated(compile_all):
    import paddle.nn.functional as F  # noqa: F401

    lin = paddle.nn.Linear(4, 4)
    calls = []

    def pre(layer, inputs):
        calls.append("pre")
        return (inputs[0] * 2,)

    def post(layer, inputs, output):
        return output + 1

    lin.register_forward_pre_hook(pre)
    handle = lin.register_forward_post_hook(post)

    def f(x):
        return lin(x).sum()

    x = paddle.randn([2, 4])
    fast = sot.symbolic_translate(f)
    assert_same(fast(x), f(x))
    assert_same(fast(x), f(x))
    assert calls == ["pre"] * 4  # eager and translated both ran the hook, once per call
    handle.remove()  # a removed hook misses the guard and retranslates
    assert_same(fast(x), f(x))
    stats = sot.stats()
    assert stats.fallbacks == 0 and stats.translate_count == 2 and stats.cache_hits == 1, stats


class _Blocks(paddle.nn.Layer):
    def __init__(self, container: paddle.nn.Layer) -> None:
        super().__init__()
        self.blocks = container

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        for block in self.blocks:
            x = block(x)
        return x + self.blocks[-1](x) * len(self.blocks)


@pytest.mark.parametrize("kind", ["LayerList", "Sequential"])
def test_members_added_to_a_container_after_translation_are_seen(compile_all, kind):
    """The container keeps its identity, but iterating, indexing by -1 and len() now mean something else."""
    paddle.seed(1)
    layers = [paddle.nn.Linear(4, 4) for _ in range(2)]
    model = _Blocks(paddle.nn.LayerList(layers) if kind == "LayerList" else paddle.nn.Sequential(*layers))
    translated = sot.symbolic_translate(model)
    x = paddle.randn([2, 4])
    assert_same(translated(x), model(x))
    model.blocks.append(paddle.nn.Linear(4, 4))
    assert_same(translated(x), model(x))
    assert sot.stats().translate_count == 2


def test_layer_dict_with_other_keys_is_retranslated(compile_all):
    class Heads(paddle.nn.Layer):
        def __init__(self) -> None:
            super().__init__()
            self.heads = paddle.nn.LayerDict({"a": paddle.nn.Linear(4, 2), "b": paddle.nn.Linear(4, 2)})

        def forward(self, x: paddle.Tensor) -> list:
            return [self.heads[name](x) for name in self.heads]

    model = Heads()
    translated = sot.symbolic_translate(model)
    x = paddle.randn([3, 4])
    assert_same(translated(x), model(x))
    model.heads["c"] = paddle.nn.Linear(4, 2)
    out = translated(x)
    assert len(out) == 3
    assert_same(out, model(x))


def test_deep_layer_trees_are_guarded_through_their_member_dicts(compile_all):
    """Sublayers of Sequential/LayerList are reached by dict lookups in the guard, not ``__getitem__``."""
    model = _Blocks(paddle.nn.Sequential(*[paddle.nn.Linear(4, 4) for _ in range(3)]))
    translated = sot.symbolic_translate(model)
    translated(paddle.randn([2, 4]))

    (guard, _), = cache_entries(type(model).forward.__code__)
    assert "._sub_layers['2']" in guard.guard.source
    assert "__getitem__" not in guard.guard.source and "[__c" not in guard.guard.source


class ConfiguredBlock(paddle.nn.Layer):
    """Built-in layers whose forward reads plain configuration (a dropout rate, a stride, an epsilon)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = paddle.nn.Linear(8, 8)
        self.drop = paddle.nn.Dropout(0.0)
        self.conv = paddle.nn.Conv1D(1, 2, 3, stride=1)
        self.norm = paddle.nn.LayerNorm(8)

    def forward(self, x):
        h = self.norm(self.drop(self.fc(x)))
        return self.conv(h.unsqueeze(1)) * 2.0


def test_configuration_of_a_builtin_layer_changed_after_translation_is_seen(compile_all):
    """A compiled ``layer`` statement bakes the layer's configuration into the program: a dropout rate
    scheduled during training, a stride or an epsilon changed later must give a new program (they reused
    the old one, silently), and going back reuses the first entry."""
    paddle.seed(3)
    layer = ConfiguredBlock()
    fast = sot.symbolic_translate(layer)
    x = _x(4, 8)
    for _ in range(3):
        assert_same(fast(x), layer(x))
    assert sot.stats().translate_count == 1  # unchanged configuration: cache hits

    layer.drop.p = 1.0  # everything dropped: deterministic
    out = fast(x)
    assert_same(out, layer(x))
    assert sot.stats().translate_count == 2

    layer.drop.p = 0.0
    layer.conv._stride = [2]
    assert_same(fast(x), layer(x))
    assert tuple(fast(x).shape) == (4, 2, 3)
    layer.norm._epsilon = 1e-3
    assert_same(fast(x), layer(x))
    translations = sot.stats().translate_count
    assert translations == 4

    layer.conv._stride = [1]
    layer.norm._epsilon = 1e-5
    assert_same(fast(x), layer(x))
    assert sot.stats().translate_count == translations  # the first entry again
    assert sot.stats().graph_breaks == 0 and sot.stats().fallbacks == 0


class StringConfiguredBlock(paddle.nn.Layer):
    """Built-in layers configured by strings: a data format (which ``BatchNorm1D``'s first forward rewrites
    from 'NCL' to 'NCHW'), an interpolation mode, a padding mode."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = paddle.nn.BatchNorm1D(4, data_format="NCL")
        self.conv = paddle.nn.Conv2D(4, 4, 3, padding=1, padding_mode="reflect")
        self.up = paddle.nn.Upsample(scale_factor=2, mode="bilinear")

    def forward(self, x):
        h = self.norm(x)  # [N, 4, 6]
        return self.up(self.conv(h.reshape([-1, 4, 2, 3])))


def test_string_configuration_changed_after_translation_is_seen(compile_all):
    """A mode or padding mode changed after translation must give a new program (it reused the one traced
    with the old string: a wrong result); the data format BatchNorm1D's forward rewrites on its first call
    is no change (the second call hits the cache); going back reuses the first entry."""
    paddle.seed(4)
    layer = StringConfiguredBlock()
    layer.eval()
    fast = sot.symbolic_translate(layer)
    x = _x(2, 4, 6)
    for _ in range(3):
        assert_same(fast(x), layer(x))
    assert sot.stats().translate_count == 1

    layer.up.mode = "nearest"
    assert_same(fast(x), layer(x))
    assert sot.stats().translate_count == 2
    layer.conv._padding_mode = "circular"
    assert_same(fast(x), layer(x))
    assert sot.stats().translate_count == 3

    layer.up.mode = "bilinear"
    layer.conv._padding_mode = "reflect"
    assert_same(fast(x), layer(x))
    assert sot.stats().translate_count == 3  # the first entry again
    assert sot.stats().graph_breaks == 0 and sot.stats().fallbacks == 0


def test_a_batchnorm1d_model_hits_the_cache_from_its_second_call(compile_all):
    """The rewrite of ``_data_format`` by the first forward happens before the guard is made (the
    statement's meta inference runs the forward), for every layer of alike ones too (the meta memo does
    not stand in for a forward that rewrites its layer: the second and third layers would keep 'NCL')."""
    layer = paddle.nn.Sequential(paddle.nn.BatchNorm1D(3, data_format="NCL"), paddle.nn.ReLU(),
                                 paddle.nn.BatchNorm1D(3, data_format="NCL"), paddle.nn.BatchNorm1D(3),
                                 paddle.nn.BatchNorm1D(3, data_format="NLC"))

    def model(x):
        return layer(x) * 2

    fast = sot.symbolic_translate(model)
    for _ in range(4):
        x = _x(2, 3, 3)
        assert_same(fast(x), model(x))
    assert sot.stats().translate_count == 1 and sot.stats().cache_hits == 3


def test_a_list_configuration_changed_in_place_is_seen(compile_all):
    """The guard compares with a copy of a list attribute, not the list itself."""
    layer = ConfiguredBlock()
    fast = sot.symbolic_translate(layer)
    x = _x(4, 8)
    assert_same(fast(x), layer(x))
    layer.conv._stride[0] = 2
    assert_same(fast(x), layer(x))
    assert sot.stats().translate_count == 2


class _NoGradForward(paddle.nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.fc = paddle.nn.Linear(4, 4)

    @paddle.no_grad()
    def forward(self, x):
        return F.relu(self.fc(x)) * 2


@pytest.mark.parametrize("make", [
    lambda: paddle.nn.Sequential(paddle.nn.Linear(4, 8), paddle.nn.Tanh(), paddle.nn.Linear(8, 4)),
    _NoGradForward,
], ids=["sequential", "decorated_forward"])
def test_a_layer_whose_forward_is_library_code_is_translated(make, compile_all):
    """``nn.Sequential``'s forward (or a decorator's wrapper) is Paddle's code, never translated itself: the
    translated layer is called from a frame of sot's that is, so the model is still one compiled graph."""
    paddle.seed(8)
    model = make()
    eager = copy.deepcopy(model)
    fast = sot.symbolic_translate(model)
    x = paddle.to_tensor(np.random.default_rng(0).standard_normal((3, 4)).astype("float32"))
    for _ in range(2):
        out, expected = fast(x), eager(x)
        assert_same(out, expected)
        if not expected.stop_gradient:
            out.sum().backward()
            expected.sum().backward()
            for p, e in zip(model.parameters(), eager.parameters()):
                np.testing.assert_allclose(p.grad.numpy(), e.grad.numpy(), rtol=1e-6)
    stats = sot.stats()
    assert stats.translate_count == 1 and stats.compiled_graphs == 1 and stats.cache_hits == 1, stats
    assert stats.graph_breaks == 0 and stats.fallbacks == 0, stats


def test_translated_layer_has_the_signature_of_the_layer():
    """``inspect.signature`` of a translated layer is the layer's (it raised ValueError: a C-called object),
    as it is the function's for a translated function, method, partial or callable object."""
    import functools
    import inspect

    class Scaled(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.fc = paddle.nn.Linear(4, 4)

        def forward(self, x, scale=2.0):
            return self.fc(x) * scale

    def fn(x, y=2, *, k=3):
        return x * y + k

    layer = Scaled()
    for target in (layer, paddle.nn.Linear(2, 2), layer.forward, fn, functools.partial(fn, y=3), lambda u, v=1: u):
        assert inspect.signature(sot.symbolic_translate(target)) == inspect.signature(target), target
    assert str(inspect.signature(sot.symbolic_translate(layer.forward))) == "(x, scale=2.0)"

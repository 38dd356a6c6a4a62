"""Model code that used to break the graph (or fall back) at every call: Paddle's weight re-parametrization
hooks (``weight_norm``, ``spectral_norm``), gradient hooks registered in forward, ``stop_gradient`` set in
forward, grad mode switches, layer mode switches (``eval()``/``train()``, ``self.training``) in forward,
activation recomputation (``paddle.distributed.fleet.utils.recompute``). Each model is checked like
the zoo's: eager parity of outputs, gradients (and what the hooks saw), side effects, the translation counts,
and a cache hit on later calls.
"""
from __future__ import annotations

import logging
import logging.handlers

import numpy as np
import paddle
import paddle.nn as nn
import paddle.nn.functional as F
import pytest
from paddle.distributed.fleet.utils import recompute

import sot

from conftest import assert_counts

from .harness import assert_close, assert_grads_equal, check_whole_model, make_pair
from .zoo import ModelSpec, classification_loss, randn, seeded


class WeightNormed(nn.Layer):
    """A conv and a linear layer under ``weight_norm`` (their weights recomputed from g and v by a forward
    pre-hook that rebinds ``weight`` on the layer at every call)."""

    def __init__(self, channels: int = 3, width: int = 4, num_classes: int = 5) -> None:
        super().__init__()
        self.conv = nn.utils.weight_norm(nn.Conv2D(channels, width, 3, padding=1))
        self.fc = nn.utils.weight_norm(nn.Linear(width, num_classes), dim=1)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        h = F.relu(self.conv(x))
        return self.fc(h.mean(axis=[2, 3]))


class SpectralNormed(nn.Layer):
    """``spectral_norm`` on two linear layers: in training the hook also runs a power iteration that updates
    the ``weight_u``/``weight_v`` buffers in place under ``no_grad``; in eval mode it only reads them."""

    def __init__(self, dim: int = 8, num_classes: int = 4) -> None:
        super().__init__()
        self.fc1 = nn.utils.spectral_norm(nn.Linear(dim, 16), dim=1)
        self.fc2 = nn.utils.spectral_norm(nn.Linear(16, num_classes), n_power_iterations=2, dim=1)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return self.fc2(paddle.tanh(self.fc1(x)))


def image_batch(batch: int = 2, seed: int = 0) -> tuple:
    return (randn(batch, 3, 6, 6, seed=seed),)


WEIGHT_NORM = ModelSpec("weight_norm", seeded(WeightNormed), image_batch, classification_loss(5),
                        other_batch=lambda: image_batch(3, seed=1))
SPECTRAL_NORM = ModelSpec("spectral_norm", seeded(SpectralNormed), lambda: (randn(4, 8, seed=2),),
                          classification_loss(4), other_batch=lambda: (randn(5, 8, seed=3),))


def assert_layer_tensors_equal(model: nn.Layer, eager: nn.Layer) -> None:
    """Every tensor attribute of every sublayer (the rebound ``weight``, the power-iteration buffers, which
    are not all in the state dict) is eager's."""
    for (name, layer), (_, e_layer) in zip(model.named_sublayers(include_self=True),
                                           eager.named_sublayers(include_self=True), strict=True):
        for attr, value in vars(e_layer).items():
            if isinstance(value, paddle.Tensor):
                np.testing.assert_allclose(getattr(layer, attr).numpy(), value.numpy(), rtol=1e-5, atol=1e-6,
                                           err_msg=f"{name}.{attr}")
        for attr, value in e_layer._buffers.items():
            np.testing.assert_allclose(layer._buffers[attr].numpy(), value.numpy(), rtol=1e-5, atol=1e-6,
                                       err_msg=f"{name}.{attr} (buffer)")


def test_weight_norm_model_is_one_graph() -> None:
    check_whole_model(WEIGHT_NORM)


def test_spectral_norm_model_is_one_graph() -> None:
    check_whole_model(SPECTRAL_NORM)


def test_spectral_norm_updates_its_buffers_like_eager() -> None:
    model, eager = make_pair(SPECTRAL_NORM)
    fast = sot.symbolic_translate(model)
    (x,) = SPECTRAL_NORM.inputs()
    for _ in range(3):
        assert_close(fast(x), eager(x), "output")
        assert_layer_tensors_equal(model, eager)
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


def test_removing_weight_norm_misses_the_cache() -> None:
    """After ``remove_weight_norm`` the layer has a plain ``weight`` parameter again and no hook: the cached
    translation (which recomputed the weight from g and v) must not be reused."""
    model, eager = make_pair(WEIGHT_NORM)
    fast = sot.symbolic_translate(model)
    (x,) = WEIGHT_NORM.inputs()
    assert_close(fast(x), eager(x), "output with weight norm")
    assert_layer_tensors_equal(model, eager)
    for net in (model, eager):
        nn.utils.remove_weight_norm(net.conv)
        nn.utils.remove_weight_norm(net.fc)
    before = sot.stats().translate_count
    for _ in range(2):
        out, e_out = fast(x), eager(x)
        assert_close(out, e_out, "output after remove_weight_norm")
    assert sot.stats().translate_count == before + 1
    loss, e_loss = WEIGHT_NORM.loss(out, (x,)), WEIGHT_NORM.loss(e_out, (x,))
    loss.backward()
    e_loss.backward()
    assert_grads_equal(model, eager)
    assert sot.stats().graph_breaks == 0 and sot.stats().fallbacks == 0


class _Hooked(nn.Layer):
    """Two linear layers, and what the gradient hooks forward registers saw."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 4)
        self.seen: list[tuple[str, float]] = []


class InputHooks(_Hooked):
    """Gradient hooks registered in forward on an input (recording what it sees) and on a parameter (scaling
    its gradient; one more hook at every call, as in eager)."""

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        x.register_hook(lambda grad: self.seen.append(("x", float(grad.abs().sum()))))
        self.fc1.weight.register_hook(lambda grad: grad * 0.5)
        h = F.gelu(self.fc1(x))
        return self.fc2(h * h + h)


class IntermediateHook(_Hooked):
    """A hook on a tensor computed in forward: it records the gradient and replaces it."""

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        h = F.gelu(self.fc1(x))

        def hook(grad: paddle.Tensor) -> paddle.Tensor:
            self.seen.append(("h", float(grad.abs().sum())))
            return grad * 3.0

        h.register_hook(hook)
        x.register_hook(lambda grad: self.seen.append(("x", float(grad.abs().sum()))))
        return self.fc2(h * h + h)


def run_hooked(model_class: type, calls: int = 3) -> tuple[nn.Layer, nn.Layer]:
    """Forward and backward ``calls`` times on both copies (a fresh input requiring gradients each time);
    outputs, gradients (input and parameters) and the hooks' records compared after each."""
    model, eager = make_pair(ModelSpec(model_class.__name__, seeded(model_class), lambda: (), lambda o, i: o))
    fast = sot.symbolic_translate(model)
    with sot.config.patch(min_graph_size=0):
        for call in range(calls):
            x, e_x = randn(4, 8, seed=call), randn(4, 8, seed=call)
            x.stop_gradient = e_x.stop_gradient = False
            out, e_out = fast(x), eager(e_x)
            assert_close(out, e_out, f"output of call {call}")
            (out * out).sum().backward()
            (e_out * e_out).sum().backward()
            np.testing.assert_allclose(x.grad.numpy(), e_x.grad.numpy(), rtol=1e-5, atol=1e-6)
            assert_grads_equal(model, eager)
            assert [name for name, _ in model.seen] == [name for name, _ in eager.seen]
            np.testing.assert_allclose([v for _, v in model.seen], [v for _, v in eager.seen], rtol=1e-5)
    return model, eager


def test_gradient_hooks_on_inputs_and_parameters_are_one_graph() -> None:
    """Registering a hook on a tensor from outside the frame is replayed after the program: the gradient
    reaching that tensor in backward is the program's either way."""
    model, _ = run_hooked(InputHooks)
    assert len(model.seen) == 3
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)
    assert sot.stats().cache_hits == 2


def test_a_gradient_hook_on_an_intermediate_breaks_once() -> None:
    """A tensor computed in forward is inside the program, where no Python hook sees its gradient: the graph
    breaks there, once per translation (later calls reuse it), and the hook fires as in eager."""
    model, _ = run_hooked(IntermediateHook)
    assert [name for name, _ in model.seen] == ["h", "x"] * 3
    stats = sot.stats()
    assert (stats.graph_breaks, stats.fallbacks, stats.translate_count) == (1, 0, 2), stats
    sot.reset()
    x = randn(4, 8)
    x.stop_gradient = False
    assert "gradient hook on a tensor computed in the frame" in str(sot.explain(model, x))


def test_a_hooked_input_changed_in_place_afterwards_breaks_there() -> None:
    """Eager's hook, registered before the change, sees the gradient of the changed tensor; replayed after
    the program it would be registered after the change: the change runs natively instead."""
    seen: list[list[float]] = []

    def f(x: paddle.Tensor) -> paddle.Tensor:
        x.register_hook(lambda grad: seen.append(grad.numpy().tolist()) or grad * 10)
        x.add_(paddle.ones_like(x))
        return (x * x).sum()

    results = []
    for fn in (f, sot.symbolic_translate(f)):
        seen.clear()
        leaf = paddle.to_tensor([1.0, 2.0], stop_gradient=False)
        fn(leaf * 1).backward()
        results.append((leaf.grad.numpy().tolist(), list(seen)))
    assert results[0] == results[1] == ([40.0, 60.0], [[4.0, 6.0]])
    assert sot.stats().graph_breaks == 1 and sot.stats().fallbacks == 0


class KeptHookHandle(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 4)
        self.seen: list[tuple[str, float]] = []

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        handle = x.register_hook(lambda grad: self.seen.append(("x", float(grad.sum()))))
        y = self.fc(x)
        handle.remove()  # removed before backward: the hook never fires
        x.register_hook(lambda grad: self.seen.append(("again", float(grad.sum()))))
        return y


def test_a_kept_hook_handle_is_the_real_one() -> None:
    model, _ = run_hooked(KeptHookHandle)
    assert [name for name, _ in model.seen] == ["again"] * 3
    assert sot.stats().fallbacks == 0


class StopGradients(nn.Layer):
    """Every way forward cuts or asks for gradients: ``stop_gradient`` set on an input (making it require
    gradients, before any op reads it), on a tensor it computed (after an op read it: that op keeps its
    gradient path), to the value it already has, ``detach()`` and a ``no_grad`` block."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x: paddle.Tensor, y: paddle.Tensor) -> tuple:
        x.stop_gradient = False
        y.stop_gradient = True  # (already)
        h = F.gelu(self.fc1(x))
        early = h * 2.0
        h.stop_gradient = True
        h.stop_gradient = True
        late = h * 3.0
        d = self.fc1(y).detach()
        with paddle.no_grad():
            frozen = self.fc2(d)
        out = self.fc2(early + late + d) + frozen
        return out, h, late


class GradModes(nn.Layer):
    """Gradient mode switched in forward every way Paddle offers: a ``no_grad`` decorator, a
    ``set_grad_enabled`` block with an ``enable_grad`` block inside, and ``set_grad_enabled`` as statements."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(8, 8)
        self.fc2 = nn.Linear(8, 4)

    @paddle.no_grad()
    def frozen(self, h: paddle.Tensor) -> paddle.Tensor:
        return self.fc1(h) * 2.0

    def forward(self, x: paddle.Tensor) -> tuple:
        h = F.relu(self.fc1(x))
        with paddle.set_grad_enabled(False):
            u = self.fc1(h)
            with paddle.enable_grad():
                v = self.fc1(h)
        paddle.set_grad_enabled(False)
        w = self.fc1(u)
        paddle.set_grad_enabled(True)
        return self.fc2(h + self.frozen(h) + u + v + w), u, v, w


def test_grad_modes_switched_in_forward_are_one_graph(compile_all: None) -> None:
    model, eager = make_pair(ModelSpec("grad_modes", seeded(GradModes), lambda: (), lambda o, i: o))
    fast = sot.symbolic_translate(model)
    for call in range(3):
        x = randn(4, 8, seed=call)
        out, e_out = fast(x), eager(x)
        assert_close(out, e_out, "outputs (stop_gradient flags included)")
        assert paddle.is_grad_enabled()
        out[0].sum().backward()
        e_out[0].sum().backward()
        assert_grads_equal(model, eager)
        model.clear_gradients()
        eager.clear_gradients()
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


def test_grad_mode_left_switched_off_by_forward() -> None:
    def f(x: paddle.Tensor, w: paddle.Tensor) -> paddle.Tensor:
        paddle.set_grad_enabled(False)
        return x * w

    try:
        for fn in (f, sot.symbolic_translate(f)):
            w = paddle.ones([3])
            w.stop_gradient = False
            out = fn(randn(3), w)
            assert out.stop_gradient and not paddle.is_grad_enabled()
            paddle.set_grad_enabled(True)
    finally:
        paddle.set_grad_enabled(True)
    assert sot.stats().graph_breaks == 0 and sot.stats().fallbacks == 0


def test_stop_gradient_set_in_forward_is_one_graph() -> None:
    model, eager = make_pair(ModelSpec("stop_gradients", seeded(StopGradients), lambda: (), lambda o, i: o))
    fast = sot.symbolic_translate(model)
    with sot.config.patch(min_graph_size=0):
        for call in range(3):
            inputs = [randn(4, 8, seed=call), randn(4, 8, seed=call + 10)]
            e_inputs = [randn(4, 8, seed=call), randn(4, 8, seed=call + 10)]
            out, e_out = fast(*inputs), eager(*e_inputs)
            assert_close(out, e_out, f"outputs of call {call}")  # (stop_gradient flags compared too)
            assert [t.stop_gradient for t in inputs] == [t.stop_gradient for t in e_inputs] == [False, True]
            out[0].sum().backward()
            e_out[0].sum().backward()
            np.testing.assert_allclose(inputs[0].grad.numpy(), e_inputs[0].grad.numpy(), rtol=1e-5, atol=1e-6)
            assert inputs[1].grad is None and e_inputs[1].grad is None
            assert_grads_equal(model, eager)
            model.clear_gradients()
            eager.clear_gradients()
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


def test_an_input_made_to_require_grad_is_no_other_input() -> None:
    """``f(a, a)``: the second argument is the tensor the first line made require gradients; a translation
    made for two distinct tensors (the second one simulated with its own flag) must not be reused."""

    def f(x: paddle.Tensor, y: paddle.Tensor) -> paddle.Tensor:
        x.stop_gradient = False
        return (x * y).sum()

    translated = sot.symbolic_translate(f)
    for same in (False, True, True):
        a = randn(3, seed=1)
        b = a if same else randn(3, seed=2)
        e_a = randn(3, seed=1)
        e_b = e_a if same else randn(3, seed=2)
        out, e_out = translated(a, b), f(e_a, e_b)
        assert_close(out, e_out, "output")
        out.backward()
        e_out.backward()
        np.testing.assert_allclose(a.grad.numpy(), e_a.grad.numpy(), rtol=1e-5, atol=1e-6)
    assert sot.stats().translate_count == 2 and sot.stats().graph_breaks == 0


def test_a_detached_tensor_made_to_require_grad_breaks_once() -> None:
    """``x = x.detach(); x.stop_gradient = False`` makes a new leaf whose ``.grad`` backward fills: the graph
    breaks there (once), with eager's gradients."""

    def f(x: paddle.Tensor, w: paddle.Tensor) -> tuple:
        leaf = (x * 2.0).detach()
        leaf.stop_gradient = False
        return (leaf * w).sum(), leaf

    translated = sot.symbolic_translate(f)
    for call in range(3):
        w, e_w = randn(3, seed=3), randn(3, seed=3)
        w.stop_gradient = e_w.stop_gradient = False
        (out, leaf), (e_out, e_leaf) = translated(randn(3, seed=call), w), f(randn(3, seed=call), e_w)
        assert_close(out, e_out, "output")
        out.backward()
        e_out.backward()
        np.testing.assert_allclose(leaf.grad.numpy(), e_leaf.grad.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(w.grad.numpy(), e_w.grad.numpy(), rtol=1e-5, atol=1e-6)
    stats = sot.stats()
    assert (stats.graph_breaks, stats.fallbacks, stats.translate_count) == (1, 0, 2), stats


class ModeSwitches(nn.Layer):
    """Forward switches a block (dropout with a real rate, a batch norm) to eval mode for one pass and back,
    reads ``self.training`` and flips it twice; the block's mode decides dropout and the statistics used."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.block = nn.Sequential(nn.Dropout(0.5), nn.BatchNorm1D(8, data_format="NC"), nn.Linear(8, 8))
        self.head = nn.Linear(8, 4)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        was_training = self.block.training
        self.block.eval()
        h = self.block(F.relu(self.fc(x)))
        self.block.train(was_training)
        self.training = not self.training
        self.training = not self.training
        scale = 2.0 if self.training else 3.0
        return self.head(h) * scale


def test_layer_mode_switches_in_forward_are_one_graph(compile_all: None) -> None:
    model, eager = make_pair(ModelSpec("mode_switches", seeded(ModeSwitches), lambda: (), lambda o, i: o))
    for net in (model, eager):  # (BatchNorm1D rewrites its data format at its first call: done eagerly here)
        net.eval()
        net(randn(4, 8))
    fast = sot.symbolic_translate(model)
    from paddle.base import framework

    for mode in ("train", "train", "eval", "eval", "train"):
        for net in (model, eager):
            getattr(net, mode)()
        x = randn(4, 8, seed=1)
        out, e_out = fast(x), eager(x)
        assert_close(out, e_out, f"output in {mode} mode")
        assert [layer.training for layer in model.sublayers(include_self=True)] == \
            [layer.training for layer in eager.sublayers(include_self=True)]
        assert framework._dygraph_tracer()._train_mode is (mode == "train")
        out.sum().backward()
        e_out.sum().backward()
        assert_grads_equal(model, eager)
        model.clear_gradients()
        eager.clear_gradients()
    # One translation per mode of the model (its flags are guarded at the frame's start).
    stats = sot.stats()
    assert (stats.translate_count, stats.graph_breaks, stats.fallbacks, stats.cache_hits) == (2, 0, 0, 3), stats
    assert stats.compiled_graphs == 2


class EvalOnly(nn.Layer):
    """Forward leaves its dropout in eval mode: the next call starts in another mode (a guard miss)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.drop = nn.Dropout(0.9)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        first = self.drop(self.fc(x))  # in the mode the call started in
        self.drop.eval()
        return first.sum() + self.drop(self.fc(x))


def test_a_mode_left_switched_misses_the_cache_once(compile_all: None) -> None:
    paddle.seed(5)
    model = EvalOnly()
    eager = EvalOnly()
    eager.set_state_dict(model.state_dict())
    fast = sot.symbolic_translate(model)
    for call in range(3):
        x = randn(4, 8, seed=call)
        if call == 0:  # in train mode, dropout draws a random mask: only the shape is compared
            out = fast(x)
            eager(x)
            assert out.shape == [4, 8]
        else:
            assert_close(fast(x), eager(x), f"call {call}")
        assert model.drop.training is False and eager.drop.training is False
    stats = sot.stats()
    # The first call started in train mode, the later ones in eval mode: one translation each.
    assert (stats.translate_count, stats.graph_breaks, stats.fallbacks, stats.cache_hits) == (2, 0, 0, 1), stats


def test_eval_after_a_sublayer_is_assigned_in_forward_reaches_it() -> None:
    """``self.extra = layer; self.eval()``: the real tree does not hold ``extra`` before the store is replayed,
    so the switch runs natively (a break), and ``extra`` is switched as in eager."""
    outside = nn.Linear(2, 2)

    class Assigns(nn.Layer):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(2, 2)

        def forward(self, x: paddle.Tensor) -> paddle.Tensor:
            self.extra = outside
            self.eval()
            return self.fc(x)

    model = Assigns()
    sot.symbolic_translate(model)(paddle.ones([2, 2]))
    assert outside.training is False and model.training is False


class Recomputed(nn.Layer):
    """Transformer-style blocks run through ``recompute``: the first on the raw input (which requires no
    gradient: with the reentrant implementation its parameters then get none, as in eager), the others on
    hidden states."""

    def __init__(self, reentrant: bool) -> None:
        super().__init__()
        self.embed = nn.Linear(8, 16)
        self.blocks = nn.LayerList([nn.Sequential(nn.LayerNorm(16), nn.Linear(16, 16), nn.GELU()) for _ in range(3)])
        self.first = nn.Linear(8, 16)
        self.head = nn.Linear(16, 4)
        self.reentrant = reentrant

    def block(self, index: int, h: paddle.Tensor, scale: float) -> paddle.Tensor:
        return h + self.blocks[index](h) * scale

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        raw = recompute(self.first, x, use_reentrant=self.reentrant)
        h = self.embed(x) + raw
        for index in range(len(self.blocks)):
            h = recompute(self.block, index, h, 0.5, use_reentrant=self.reentrant)
        return self.head(h)


@pytest.mark.parametrize("reentrant", [True, False])
def test_recompute_in_forward_is_one_graph(reentrant: bool) -> None:
    import importlib

    spec = ModelSpec(f"recompute_{reentrant}", seeded(lambda: Recomputed(reentrant)), lambda: (randn(4, 8, seed=1),),
                     classification_loss(4), other_batch=lambda: (randn(5, 8, seed=2),))
    logger = importlib.import_module("paddle.distributed.fleet.recompute.recompute").logger
    records = logging.handlers.BufferingHandler(capacity=1000)  # (library code: not translated when it logs)
    logger.addHandler(records)
    try:
        model, eager = make_pair(spec)
        (x,) = spec.inputs()
        spec.loss(eager(x), (x,)).backward()
        # (eager's warning for the block whose input needs no gradient, and its gradients: none when reentrant)
        eager_warnings = [record.getMessage() for record in records.buffer]
        assert len(eager_warnings) == 1
        assert (eager.first.weight.grad is None) is reentrant
        eager.clear_gradients()
        records.buffer.clear()
        check_whole_model(spec)
        # Replayed after each translated call, as eager logs it in each (the eager twin's calls log too).
        assert records.buffer and {record.getMessage() for record in records.buffer} == set(eager_warnings)
    finally:
        logger.removeHandler(records)


def test_recompute_of_an_output_a_plain_call_leaves_without_grad_breaks_once() -> None:
    """The reentrant implementation (a PyLayer) marks every tensor output as requiring gradients, an integer
    ``argmax`` too: not what the graph would give, so the call runs natively, once per translation."""
    fc = nn.Linear(4, 4)

    def f(x: paddle.Tensor) -> tuple:
        h = x * 2.0
        return recompute(lambda t: (fc(t), paddle.argmax(t, axis=1)), h)

    translated = sot.symbolic_translate(f)
    for call in range(3):
        x, e_x = randn(2, 4, seed=call), randn(2, 4, seed=call)
        x.stop_gradient = e_x.stop_gradient = False
        out, e_out = translated(x), f(e_x)
        assert_close(out, e_out, "outputs (stop_gradient flags included)")
        out[0].sum().backward()
        e_out[0].sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), e_x.grad.numpy(), rtol=1e-5, atol=1e-6)
        if call == 0:
            # f, the resume function after the break, and the lambda the native recompute calls
            translations = sot.stats().translate_count
    stats = sot.stats()
    assert (stats.graph_breaks, stats.fallbacks, stats.translate_count) == (1, 0, translations), stats

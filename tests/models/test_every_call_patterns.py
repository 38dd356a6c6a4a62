"""Model code that used to break the graph (or fall back) at every call: Paddle's weight re-parametrization
hooks (``weight_norm``, ``spectral_norm``), gradient hooks registered in forward. Each model is checked like
the zoo's: eager parity of outputs, gradients (and what the hooks saw), side effects, the translation counts,
and a cache hit on later calls.
"""
from __future__ import annotations

import numpy as np
import paddle
import paddle.nn as nn
import paddle.nn.functional as F

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


class InputHooks(nn.Layer):
    """Gradient hooks registered in forward on an input (recording what it sees) and on a parameter (scaling
    its gradient; one more hook at every call, as in eager)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 4)
        self.seen: list[tuple[str, float]] = []

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        x.register_hook(lambda grad: self.seen.append(("x", float(grad.abs().sum()))))
        self.fc1.weight.register_hook(lambda grad: grad * 0.5)
        h = F.gelu(self.fc1(x))
        return self.fc2(h * h + h)


class IntermediateHook(nn.Layer):
    """A hook on a tensor computed in forward: it records the gradient and replaces it."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 4)
        self.seen: list[tuple[str, float]] = []

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

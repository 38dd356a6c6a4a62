"""Functions decorated with Paddle's grad-mode switches (``@paddle.no_grad()``, ``@paddle.enable_grad()``),
executor/variables/context.py `ModeDecoratedFunctionVariable`: the decorated function is inlined inside a
simulated grad-mode block, as ``@paddle.amp.auto_cast(...)`` ones are (test_amp.py), instead of the library
wrapper breaking the graph (an EMA ``update`` or a ``measure`` helper in a model's forward)."""
from __future__ import annotations

import numpy as np
import paddle

import sot
from conftest import assert_same


def _t(seed: int = 0, stop_gradient: bool = False) -> paddle.Tensor:
    tensor = paddle.to_tensor(np.random.RandomState(seed).uniform(-1, 1, (3, 4)).astype("float32"))
    tensor.stop_gradient = stop_gradient
    return tensor


@paddle.no_grad()
def scale_of(y):
    return y.abs().max() + 1


def uses_a_no_grad_helper(x):
    y = paddle.tanh(x * 3)
    return y / scale_of(y), paddle.is_grad_enabled()


class WithNoGradMethod(paddle.nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.fc = paddle.nn.Linear(4, 4)
        self.register_buffer("running", paddle.zeros([4]))

    @paddle.no_grad()
    def track(self, y):
        paddle.assign(self.running * 0.9 + y.mean(0) * 0.1, output=self.running)
        return y.std()

    def forward(self, x):
        y = self.fc(x)
        return y * self.track(y) + self.running


@paddle.enable_grad()
def with_grad(x):
    return x * x


def enable_grad_inside_no_grad(x):
    with paddle.no_grad():
        frozen = x * 2
        tracked = with_grad(x)
    return frozen + tracked


def _grads_match(fn, make_args) -> None:
    """Outputs (``stop_gradient`` included) and the gradients of the arguments equal eager's, twice."""
    fast = sot.symbolic_translate(fn)
    for _ in range(2):
        args, e_args = make_args(), make_args()
        out, expected = fast(*args), fn(*e_args)
        assert_same(out, expected)
        first, e_first = (out[0], expected[0]) if isinstance(out, tuple) else (out, expected)
        first.sum().backward()
        e_first.sum().backward()
        for a, e in zip(args, e_args):
            np.testing.assert_allclose(a.grad.numpy(), e.grad.numpy(), rtol=1e-6)


def test_a_no_grad_decorated_function_is_inlined_without_gradients(compile_all):
    _grads_match(uses_a_no_grad_helper, lambda: (_t(),))
    stats = sot.stats()
    assert stats.translate_count == 1 and stats.graph_breaks == 0 and stats.fallbacks == 0, stats


def test_enable_grad_decorated_function_inside_a_no_grad_block(compile_all):
    _grads_match(enable_grad_inside_no_grad, lambda: (_t(),))
    stats = sot.stats()
    assert stats.translate_count == 1 and stats.graph_breaks == 0 and stats.fallbacks == 0, stats


def test_a_no_grad_method_updating_a_buffer_in_a_forward(compile_all):
    paddle.seed(0)
    model = WithNoGradMethod()
    eager = WithNoGradMethod()
    eager.set_state_dict(model.state_dict())
    fast = sot.symbolic_translate(model)
    for call in range(3):
        x = _t(call)
        out, expected = fast(x), eager(x)
        assert_same(out, expected)
        assert_same(model.running, eager.running)
        out.sum().backward()
        expected.sum().backward()
        np.testing.assert_allclose(model.fc.weight.grad.numpy(), eager.fc.weight.grad.numpy(), rtol=1e-5)
        model.clear_gradients()
        eager.clear_gradients()
    stats = sot.stats()
    assert stats.graph_breaks == 0 and stats.fallbacks == 0, stats


observed: list[bool] = []


@paddle.no_grad()
def breaks_inside(y):
    z = y * 2
    sot.psdb.breakgraph()
    observed.append(paddle.is_grad_enabled())
    return z + 1


def calls_breaking_helper(x):
    return breaks_inside(x * 3) * x


def test_a_break_inside_a_no_grad_decorated_function_runs_it_without_gradients(compile_all):
    observed.clear()
    _grads_match(calls_breaking_helper, lambda: (_t(),))
    assert observed == [False] * 4  # two eager calls and two translated ones
    assert sot.stats().fallbacks == 0 and paddle.is_grad_enabled()


@paddle.no_grad()
def raises_inside(y):
    if y.shape[0] == 3:
        raise KeyError("leaving a no_grad function by an exception")
    return y


def catches_from_no_grad(x):
    try:
        raises_inside(x)
    except KeyError:
        pass
    return x * 2, paddle.is_grad_enabled()


def test_an_exception_leaving_a_no_grad_function_restores_grad_mode(parity, compile_all):
    parity(catches_from_no_grad, _t())
    assert sot.stats().fallbacks == 0 and paddle.is_grad_enabled()


@paddle.no_grad()
def no_grad_generator(y):
    yield y * 2
    yield paddle.is_grad_enabled()


def consumes_a_no_grad_generator(x):
    return list(no_grad_generator(x))


def test_a_no_grad_generator_is_left_to_its_own_wrapper(parity, compile_all):
    parity(consumes_a_no_grad_generator, _t())

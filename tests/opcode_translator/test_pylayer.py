"""`MyPyLayer.apply(...)` in translated code: one ``pylayer`` SIR statement compiled with ``static_pylayer``.

Every case runs eagerly and translated (with ``min_graph_size=0`` so even small graphs compile), compares
outputs (values and ``stop_gradient``) and the gradients of inputs and parameters, asserts no graph break
or fallback happened and that the compiled SIR holds exactly one ``pylayer`` statement per ``apply``.
A PyLayer that cannot be made static must be a clean graph break, with eager results and gradients.
"""
from __future__ import annotations

import copy
from typing import Any, Callable

import numpy as np
import paddle
import pytest
from paddle.autograd import PyLayer

import sot
from sot.symbolic.infer_meta import infer_meta
from sot.symbolic.pylayer import pylayer_target
from sot.symbolic.sir import MetaInfo

from conftest import assert_same


# -- PyLayers -----------------------------------------------------------------------------------------------
class Tanh(PyLayer):
    @staticmethod
    def forward(ctx, x):
        y = paddle.tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, dy):
        (y,) = ctx.saved_tensor()
        return dy * (1 - paddle.square(y))


class MulAdd(PyLayer):
    """Several inputs and outputs, a Python attribute on ctx, a keyword argument with a default."""

    @staticmethod
    def forward(ctx, x, y, scale=1.0):
        ctx.save_for_backward(x, y)
        ctx.scale = scale
        return x * y * scale, x + 2 * y

    @staticmethod
    def backward(ctx, g_prod, g_sum):
        x, y = ctx.saved_tensor()
        return g_prod * y * ctx.scale + g_sum, g_prod * x * ctx.scale + 2 * g_sum


class Weighted(PyLayer):
    """A deliberately "wrong" backward (factors 3 and 5): gradients must come from it, not from autodiff."""

    @staticmethod
    def forward(ctx, x, y):
        return x * y

    @staticmethod
    def backward(ctx, g):
        return g * 3, g * 5


class Options(PyLayer):
    """Non-tensor arguments steer Python control flow in forward and backward."""

    @staticmethod
    def forward(ctx, x, power, mode, clip=None):
        ctx.power = power
        ctx.mode = mode
        ctx.save_for_backward(x)
        y = x ** power if mode == "pow" else x * power
        if clip is not None:
            y = paddle.clip(y, -clip, clip)
        return y

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensor()
        if ctx.mode == "pow":
            return g * ctx.power * x ** (ctx.power - 1)
        return g * ctx.power


class Mixed(PyLayer):
    """Three inputs; backward returns None for the middle one (which does not require a gradient)."""

    @staticmethod
    def forward(ctx, x, y, z):
        ctx.save_for_backward(y)
        return x * y + z * 2

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensor()
        return g * y, None, g * 2


class ShortBackward(PyLayer):
    """Backward leaves out the trailing gradient of an input that does not require one (eager allows it)."""

    @staticmethod
    def forward(ctx, x, y):
        return x * y

    @staticmethod
    def backward(ctx, g):
        return g * 4


class NonDiff(PyLayer):
    @staticmethod
    def forward(ctx, x):
        mask = (x > 0).astype(x.dtype)
        y = x * 3
        ctx.mark_non_differentiable(mask)
        return mask, y

    @staticmethod
    def backward(ctx, g_mask, g_y):
        return g_mask * 100 + g_y * 3


class TensorOnCtx(PyLayer):
    """Tensors kept as plain ctx attributes (not through save_for_backward)."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.x = x
        ctx.pair = [w, 2.0]
        return paddle.matmul(x, w)

    @staticmethod
    def backward(ctx, g):
        x, (w, two) = ctx.x, ctx.pair
        return paddle.matmul(g, w, transpose_y=True), paddle.matmul(x, g, transpose_x=True) * two / 2


class Constant(PyLayer):
    """An output that does not depend on the input still requires a gradient (it is a PyLayer output)."""

    @staticmethod
    def forward(ctx, x):
        return paddle.ones_like(x) * 2

    @staticmethod
    def backward(ctx, g):
        return g * 7


class OnceDiff(PyLayer):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return paddle.exp(x)

    @staticmethod
    @paddle.autograd.py_layer.once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensor()
        return g * paddle.exp(x)


class NumpyForward(PyLayer):
    """Reads tensor data as a Python value in forward: cannot be static."""

    @staticmethod
    def forward(ctx, x):
        ctx.shift = float(x.numpy().mean())
        return x - ctx.shift

    @staticmethod
    def backward(ctx, g):
        return g * 2


class NumpyBackward(PyLayer):
    """Forward is static-able, backward is not: the whole apply must break, not compile a partial program."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 2

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensor()
        return g * float(x.numpy().max())


class NoMaterialize(PyLayer):
    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, g1, g2):
        grad = g1 * 2 if g1 is not None else 0
        return grad + (g2 * 3 if g2 is not None else 0)


class TensorList(PyLayer):
    """Tensors inside a list argument: eager counts the list as one input slot."""

    @staticmethod
    def forward(ctx, xs):
        return xs[0] * xs[1]

    @staticmethod
    def backward(ctx, g):
        return g


tanh_alias = Tanh.apply


@pytest.fixture(autouse=True)
def no_eager_replay(monkeypatch):
    """A compiled program that fails at run time (or while building its backward) silently replays its SIR
    eagerly; here that would hide a broken static PyLayer, so every replay fails the test."""
    import sot.symbolic.compile as compile_module

    replays = []
    original = compile_module.run_sir

    @sot.skip_function  # runs while programs are built, inside translated code
    def run_sir(sir, inputs, located=False):
        if located:
            replays.append(sir.name)
        return original(sir, inputs, located)

    monkeypatch.setattr(compile_module, "run_sir", run_sir)
    yield
    assert not replays, f"compiled programs replayed eagerly: {replays}"


# -- harness ------------------------------------------------------------------------------------------------
def _t(*shape: int, seed: int = 0, stop_gradient: bool = False) -> paddle.Tensor:
    value = paddle.to_tensor(np.random.default_rng(seed).standard_normal(shape).astype("float32"))
    value.stop_gradient = stop_gradient
    return value


def _flat_tensors(value: Any) -> list[paddle.Tensor]:
    if isinstance(value, paddle.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _flat_tensors(item)]
    if isinstance(value, dict):
        return [t for item in value.values() for t in _flat_tensors(item)]
    return []


def _clear(tensors: list[paddle.Tensor]) -> None:
    for tensor in tensors:
        tensor.clear_gradient(set_to_zero=False)


def _backward(out: Any) -> None:
    """A loss weighting each differentiable output differently, so a swapped gradient shows up."""
    terms = []
    for index, tensor in enumerate(_flat_tensors(out)):
        if not tensor.stop_gradient and tensor.dtype == paddle.float32:
            terms.append((tensor * (index + 1.5)).sum())
    if terms:
        paddle.add_n(terms).backward()


def _grads(tensors: list[paddle.Tensor]) -> list[Any]:
    return [None if t.grad is None else t.grad.numpy().copy() for t in tensors]


def _assert_grads(actual: list[Any], expected: list[Any]) -> None:
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert (a is None) == (e is None), f"gradient presence differs: {a} vs {e}"
        if e is not None:
            np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)


def _pylayer_count(report: Any) -> int:
    return sum(1 for t in report.graphs for s in t.sir.statements if s.kind == "pylayer")


def check_pylayer(fn: Callable[..., Any], make_args: Callable[[], tuple], n_apply: int,
                  params: Callable[[Any], list[paddle.Tensor]] = lambda args: []) -> Any:
    """Eager vs translated: outputs, gradients, no break/fallback, ``n_apply`` pylayer statements."""
    args = make_args()
    _clear(params(args))
    expected = fn(*args)
    _backward(expected)
    watched = [a for a in args if isinstance(a, paddle.Tensor)] + params(args)
    expected_grads = _grads(watched)

    fast = sot.symbolic_translate(fn)
    with sot.config.patch(min_graph_size=0):
        for attempt in range(2):  # the second call hits the cache
            args = make_args()
            _clear(params(args))
            sot.reset()
            report = sot.explain(fast, *args)
            stats = sot.stats()
            assert stats.graph_breaks == 0 and stats.fallbacks == 0, str(report)
            assert _pylayer_count(report) == n_apply, str(report)
            assert_same(report.result, expected)
            _backward(report.result)
            watched = [a for a in args if isinstance(a, paddle.Tensor)] + params(args)
            _assert_grads(_grads(watched), expected_grads)
            args = make_args()
            _clear(params(args))
            out = fast(*args)
            assert sot.stats().cache_hits >= 1
            assert_same(out, expected)
            _backward(out)
            watched = [a for a in args if isinstance(a, paddle.Tensor)] + params(args)
            _assert_grads(_grads(watched), expected_grads)
    return report


# -- the matrix ---------------------------------------------------------------------------------------------
def f_tanh(x):
    return Tanh.apply(x * 2) + 1


def f_multi(x, y):
    prod, total = MulAdd.apply(x, y, scale=0.5)
    return prod, total * 2


def f_kwargs(x, y):
    return MulAdd.apply(x=x, y=y, scale=3.0)


def f_kwargs_swapped(x, y):
    # Eager PyLayer pairs backward's gradients with input tensors in call order (y first here).
    return Weighted.apply(y=y, x=x) + Weighted.apply(x, y)


def f_options(x):
    a = Options.apply(x, 2, "pow")
    b = Options.apply(x, 3.0, mode="scale", clip=1.5)
    return a, b


def f_mixed(x, y, z):
    return Mixed.apply(x, y, z)


def f_short(x, y):
    return ShortBackward.apply(x, y)


def f_nondiff(x):
    mask, y = NonDiff.apply(x)
    return mask, y, mask * y


def f_tensor_ctx(x, w):
    return TensorOnCtx.apply(x, w).tanh()


def f_twice(x):
    h = Tanh.apply(x)
    h = Tanh.apply(h * 3)
    return h.mean()


def f_two_classes(x, y):
    prod, total = MulAdd.apply(x, y)
    return Tanh.apply(prod) * total


def f_alias(x):
    return tanh_alias(x) * 2


def f_constant(x):
    return Constant.apply(x) + x


def f_once(x):
    return OnceDiff.apply(x)


def f_one_of_two(x, y):
    prod, _ = MulAdd.apply(x, y, scale=2.0)  # the unused output gets a zero gradient in backward
    return prod


def f_no_grad(x):
    with paddle.no_grad():
        y = Tanh.apply(x)
    return y * 2, y


CASES = [
    ("tanh", f_tanh, lambda: (_t(3, 4),), 1),
    ("multi_in_out_ctx_attr", f_multi, lambda: (_t(3, 4), _t(3, 4, seed=1)), 1),
    ("kwargs", f_kwargs, lambda: (_t(2, 5), _t(2, 5, seed=1)), 1),
    ("kwargs_call_order", f_kwargs_swapped, lambda: (_t(4), _t(4, seed=1)), 2),
    ("non_tensor_args", f_options, lambda: (_t(3, 3),), 2),
    ("mixed_stop_gradient", f_mixed, lambda: (_t(3), _t(3, seed=1, stop_gradient=True), _t(3, seed=2)), 1),
    ("short_backward", f_short, lambda: (_t(3), _t(3, seed=1, stop_gradient=True)), 1),
    ("mark_non_differentiable", f_nondiff, lambda: (_t(2, 3),), 1),
    ("tensors_on_ctx", f_tensor_ctx, lambda: (_t(2, 3), _t(3, 4, seed=1)), 1),
    ("twice_in_one_graph", f_twice, lambda: (_t(5),), 2),
    ("two_classes", f_two_classes, lambda: (_t(3), _t(3, seed=1)), 2),
    ("bound_apply_alias", f_alias, lambda: (_t(3),), 1),
    ("output_independent_of_input", f_constant, lambda: (_t(3),), 1),
    ("once_differentiable", f_once, lambda: (_t(3),), 1),
    ("unused_output", f_one_of_two, lambda: (_t(3), _t(3, seed=1)), 1),
    ("no_input_requires_grad", f_tanh, lambda: (_t(3, stop_gradient=True),), 1),
    ("under_no_grad", f_no_grad, lambda: (_t(3),), 1),
]


@pytest.mark.parametrize("name,fn,make_args,n_apply", CASES, ids=[c[0] for c in CASES])
def test_pylayer_matrix(name, fn, make_args, n_apply):
    check_pylayer(fn, make_args, n_apply)


def test_sir_statement():
    with sot.config.patch(min_graph_size=0):
        report = sot.explain(sot.symbolic_translate(f_multi), _t(3, 4), _t(3, 4, seed=1))
    (stmt,) = [s for t in report.graphs for s in t.sir.statements if s.kind == "pylayer"]
    assert stmt.name == "MulAdd.apply"
    assert stmt.kwargs == {"scale": 0.5}
    assert "pylayer MulAdd.apply(" in str(report)


def test_target_is_stable():
    assert pylayer_target(MulAdd, ("scale",)) is pylayer_target(MulAdd, ("scale",))
    assert pylayer_target(MulAdd, ()) is not pylayer_target(MulAdd, ("scale",))
    assert pylayer_target(MulAdd, ()) is not pylayer_target(Tanh, ())


def test_infer_meta_in_throwaway_program():
    target = pylayer_target(NonDiff)
    grad = MetaInfo((2, 3), paddle.float32, False)
    assert infer_meta(target, (grad,), {}) == (MetaInfo((2, 3), paddle.float32, True), grad)
    target = pylayer_target(MulAdd, ("scale",))
    no_grad = MetaInfo((4,), paddle.float32, True)
    assert infer_meta(target, (no_grad, no_grad), {"scale": 2.0}) == (no_grad, no_grad)
    assert infer_meta(target, (no_grad, MetaInfo((4,), paddle.float32, False)), {"scale": 2.0}) == (
        MetaInfo((4,), paddle.float32, False), MetaInfo((4,), paddle.float32, False))
    assert paddle.in_dynamic_mode()


def test_guards_retranslate_on_new_constant_and_shape():
    def fn(x, scale):
        return MulAdd.apply(x, x * 2, scale=scale)

    fast = sot.symbolic_translate(fn)
    with sot.config.patch(min_graph_size=0, dynamic_shape=False):
        for scale, shape in [(1.0, (3,)), (2.0, (3,)), (2.0, (2, 2)), (1.0, (3,))]:
            x = _t(*shape)
            x_eager = _t(*shape)
            out, expected = fast(x, scale), fn(x_eager, scale)
            assert_same(out, expected)
            _backward(out)
            _backward(expected)
            _assert_grads(_grads([x]), _grads([x_eager]))
    assert sot.stats().graph_breaks == 0 and sot.stats().fallbacks == 0


def test_eager_replay_of_small_graph():
    """Below min_graph_size the SIR is replayed eagerly: the statement runs Paddle's own PyLayer."""
    x, x_eager = _t(3), _t(3)
    out = sot.symbolic_translate(f_tanh)(x)
    expected = f_tanh(x_eager)
    assert_same(out, expected)
    out.sum().backward()
    expected.sum().backward()
    _assert_grads(_grads([x]), _grads([x_eager]))


# -- a PyLayer inside a Layer, trained ----------------------------------------------------------------------
class ScaledLinear(PyLayer):
    @staticmethod
    def forward(ctx, x, w, b, alpha=1.0):
        ctx.save_for_backward(x, w)
        ctx.alpha = alpha
        return (paddle.matmul(x, w) + b) * alpha

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensor()
        g = g * ctx.alpha
        return paddle.matmul(g, w, transpose_y=True), paddle.matmul(x, g, transpose_x=True), g.sum(0)


class PyLayerNet(paddle.nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.w1 = self.create_parameter([6, 8])
        self.b1 = self.create_parameter([8], is_bias=True)
        self.w2 = self.create_parameter([8, 3])
        self.b2 = self.create_parameter([3], is_bias=True)

    def forward(self, x):
        h = ScaledLinear.apply(x, self.w1, self.b1, alpha=0.5)
        h = Tanh.apply(h)  # a PyLayer used twice in one graph (ScaledLinear) plus another one
        return ScaledLinear.apply(h, self.w2, self.b2)


def test_pylayer_in_layer_matrix():
    paddle.seed(7)
    layer = PyLayerNet()
    # x requires a gradient: eager PyLayer rejects one returned for an input that does not require it
    report = check_pylayer(layer, lambda: (_t(4, 6),), 3, params=lambda args: list(layer.parameters()))
    assert report.graphs


def test_pylayer_in_layer_trained_with_sgd():
    paddle.seed(11)
    eager_layer = PyLayerNet()
    sot_layer = copy.deepcopy(eager_layer)
    fast = sot.symbolic_translate(sot_layer)
    eager_opt = paddle.optimizer.SGD(0.1, parameters=eager_layer.parameters())
    sot_opt = paddle.optimizer.SGD(0.1, parameters=sot_layer.parameters())
    with sot.config.patch(min_graph_size=0):
        for step in range(3):
            x = _t(4, 6, seed=step)
            target = _t(4, 3, seed=100 + step, stop_gradient=True)
            for model, opt in ((eager_layer, eager_opt), (fast, sot_opt)):
                loss = ((model(x) - target) ** 2).mean()
                loss.backward()
                opt.step()
                opt.clear_grad()
    for (name_a, a), (name_b, b) in zip(eager_layer.named_parameters(), sot_layer.named_parameters()):
        assert name_a == name_b
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
    stats = sot.stats()
    assert stats.graph_breaks == 0 and stats.fallbacks == 0 and stats.compiled_graphs >= 1


def test_pylayer_in_layer_inference():
    paddle.seed(5)
    layer = PyLayerNet()
    layer.eval()
    x = _t(4, 6, stop_gradient=True)
    fast = sot.symbolic_translate(layer, training=False)
    with sot.config.patch(min_graph_size=0):
        for _ in range(2):
            out = fast(x)
            assert_same(out, layer(x))
    stats = sot.stats()
    assert stats.graph_breaks == 0 and stats.fallbacks == 0 and stats.compiled_graphs == 1


# -- what cannot be static: a clean graph break -------------------------------------------------------------
def f_numpy_forward(x):
    y = x * 2
    return NumpyForward.apply(y) + 1


def f_numpy_backward(x):
    return NumpyBackward.apply(x * 2) + 1


def f_no_materialize(x):
    a, b = NoMaterialize.apply(x)
    return a + 1


def f_tensor_list(x, y):
    return TensorList.apply([x, y]) * 2


class Identity(PyLayer):
    """Returns its input: eager PyLayer makes it an in-place output."""

    @staticmethod
    def forward(ctx, t):
        return t

    @staticmethod
    def backward(ctx, g):
        return g * 7


def f_returns_input(x):
    return Identity.apply(x * 1) * 2


def f_grad_for_stop_gradient_input(x, y):
    return Weighted.apply(x, y)  # backward returns a gradient for y: eager raises


BREAK_CASES = [
    ("grad_for_stop_gradient_input", f_grad_for_stop_gradient_input,
     lambda: (_t(3), _t(3, seed=1, stop_gradient=True))),
    ("numpy_in_forward", f_numpy_forward, lambda: (_t(3, 4),)),
    ("numpy_in_backward", f_numpy_backward, lambda: (_t(3, 4),)),
    ("set_materialize_grads_false", f_no_materialize, lambda: (_t(3),)),
    ("tensors_in_list_argument", f_tensor_list, lambda: (_t(3), _t(3, seed=1))),
    ("forward_returns_input", f_returns_input, lambda: (_t(3),)),
]


def _run(fn: Callable[..., Any], args: tuple) -> tuple[Any, list[Any] | None, type | None]:
    """Output and gradients of ``fn``, or the type of the exception raised (by the call or backward)."""
    try:
        out = fn(*args)
        _backward(out)
    except Exception as exc:
        return None, None, type(exc)
    return out, _grads(list(args)), None


@pytest.mark.parametrize("name,fn,make_args", BREAK_CASES, ids=[c[0] for c in BREAK_CASES])
def test_not_static_is_a_graph_break(name, fn, make_args):
    expected, expected_grads, expected_error = _run(fn, make_args())
    fast = sot.symbolic_translate(fn)
    with sot.config.patch(min_graph_size=0):
        reports = []
        for _ in range(2):  # the second call runs from the cache
            args = make_args()
            try:
                reports.append(sot.explain(fast, *args))
            except Exception as exc:
                assert type(exc) is expected_error
                continue
            out = reports[-1].result
            try:
                _backward(out)
            except Exception as exc:
                assert type(exc) is expected_error
                continue
            assert expected_error is None
            assert_same(out, expected)
            _assert_grads(_grads(list(args)), expected_grads)
    assert sot.stats().graph_breaks >= 1
    text = str(reports[0])
    assert "graph break" in text and ".apply" in text, text
    assert _pylayer_count(reports[0]) == 0

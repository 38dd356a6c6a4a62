"""`sot.export`: a wholly captured call saved with ``paddle.jit.save``; ``paddle.jit.load`` of it gives eager's
outputs with only the example tensors as inputs (parameters and buffers are baked in). A call that breaks
the graph or falls back is refused with an error naming each break and its ``file:line``."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import Any

import numpy as np
import paddle
import pytest
from paddle.autograd import PyLayer

import sot
from conftest import line_of
from sot.export import ExportError
from sot.symbolic.compile import compiled_programs

TOL = dict(rtol=1e-5, atol=1e-5)


def _as_list(value: Any) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def check_loaded(path: str, inputs: tuple, expected: Any) -> None:
    loaded = paddle.jit.load(path)
    got = _as_list(loaded(*inputs))
    expected = _as_list(expected)
    assert len(got) == len(expected)
    for actual, want in zip(got, expected):
        assert list(actual.shape) == list(want.shape)
        np.testing.assert_allclose(actual.numpy(), want.numpy(), **TOL)


# -- models --------------------------------------------------------------------------------------------------
def two_outputs(x: paddle.Tensor, y: paddle.Tensor) -> tuple:
    h = paddle.tanh(paddle.matmul(x, y)) * 2.0
    return h - x.mean(), x + 1  # ``x + 1`` is a scale op: Paddle's save would drop its bias without care


class Direct(paddle.nn.Layer):
    """Parameters and a buffer used directly by the forward: they are inputs of sot's SIR."""

    def __init__(self) -> None:
        super().__init__()
        self.w = self.create_parameter([4, 3])
        self.b = self.create_parameter([3], is_bias=True)
        self.register_buffer("shift", paddle.full([3], 0.25))

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return paddle.nn.functional.gelu(paddle.matmul(x, self.w) + self.b) - self.shift


class ConvNet(paddle.nn.Layer):
    """Built-in sublayers (SIR ``layer`` statements): Conv2D, BatchNorm2D (eval), Linear, BatchNorm1D."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = paddle.nn.Conv2D(3, 4, 3, padding=1)
        self.bn = paddle.nn.BatchNorm2D(4)
        self.fc = paddle.nn.Linear(4 * 6 * 6, 8)
        self.bn1 = paddle.nn.BatchNorm1D(8)
        self.head = paddle.nn.Linear(8, 5)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        h = paddle.nn.functional.relu(self.bn(self.conv(x)))
        h = self.bn1(self.fc(paddle.flatten(h, 1)))
        return self.head(paddle.nn.functional.relu(h))


def conv_net() -> ConvNet:
    paddle.seed(7)
    net = ConvNet()
    # Non-trivial running statistics, so eval-mode batch norm really uses the saved buffers.
    net.bn._mean.set_value(paddle.rand([4]) - 0.5)
    net.bn._variance.set_value(paddle.rand([4]) + 0.5)
    net.bn1._mean.set_value(paddle.rand([8]))
    net.bn1._variance.set_value(paddle.rand([8]) + 0.5)
    net.eval()
    return net


class ScaledTanh(PyLayer):
    @staticmethod
    def forward(ctx: Any, x: paddle.Tensor, w: paddle.Tensor) -> paddle.Tensor:
        y = paddle.tanh(x) * w
        ctx.save_for_backward(x, w)
        return y

    @staticmethod
    def backward(ctx: Any, dy: paddle.Tensor) -> tuple:
        x, w = ctx.saved_tensor()
        t = paddle.tanh(x)
        return dy * w * (1 - t * t), (dy * t).sum(axis=0)


class PyLayerNet(paddle.nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = paddle.nn.Linear(6, 8)
        self.w = self.create_parameter([8], default_initializer=paddle.nn.initializer.Uniform(0.5, 1.5))
        self.fc2 = paddle.nn.Linear(8, 3)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        h = ScaledTanh.apply(self.fc1(x), self.w)  # the parameter goes into the PyLayer as an input
        return self.fc2(h) * 0.5


PRINT_LINE = 'print("y is"'


def with_print(x: paddle.Tensor) -> paddle.Tensor:
    y = paddle.exp(x) * 2
    print("y is", y.shape)
    return y + 1


def with_fallback(x: paddle.Tensor) -> paddle.Tensor:
    sot.psdb.fallback()
    return x * 2


# -- tests ---------------------------------------------------------------------------------------------------
def test_function(tmp_path: Any) -> None:
    x, y = paddle.randn([3, 3]), paddle.randn([3, 3])
    path = str(tmp_path / "fn")
    info = sot.export(two_outputs, x, y, path=path)
    assert info.num_outputs == 2 and len(info.input_spec) == 2
    assert len(info.sir) >= 5
    check_loaded(path, (x, y), two_outputs(x, y))
    # Other inputs of the same shape: a real program, not recorded values.
    a, b = paddle.randn([3, 3]), paddle.randn([3, 3])
    check_loaded(path, (a, b), two_outputs(a, b))


def test_function_small_graph_and_passthrough_outputs(tmp_path: Any) -> None:
    """Graphs below ``min_graph_size`` are exported too; inputs and repeated values can be returned."""

    def small(x: paddle.Tensor) -> tuple:
        y = x * 3
        return y, y, x, 7  # the int is a constant of the graph, not an output

    x = paddle.randn([2, 5])
    path = str(tmp_path / "small")
    info = sot.export(small, x, path=path)
    assert info.num_outputs == 3
    check_loaded(path, (x,), (x * 3, x * 3, x))


def test_unused_and_non_tensor_arguments(tmp_path: Any) -> None:
    """Every tensor argument is an input of the saved model, even one the graph does not read; a Python
    number argument is a constant of the graph."""

    def scaled(x: paddle.Tensor, unused: paddle.Tensor, factor: float) -> paddle.Tensor:
        return paddle.tanh(x) * factor

    x, other = paddle.randn([4]), paddle.randn([2, 2])
    path = str(tmp_path / "unused")
    info = sot.export(scaled, x, other, 3.0, path=path)
    assert [list(spec.shape) for spec in info.input_spec] == [[4], [2, 2]]
    check_loaded(path, (x, other), scaled(x, other, 3.0))


def test_layer_parameters_are_baked_in(tmp_path: Any) -> None:
    paddle.seed(3)
    layer = Direct()
    x = paddle.randn([5, 4])
    expected = layer(x)
    path = str(tmp_path / "direct")
    info = sot.export(layer, x, path=path)
    assert len(info.input_spec) == 1  # the parameters are not feeds
    assert set(info.baked) == {layer.w.name, layer.b.name, layer.shift.name}
    # Changing the live layer afterwards must not change the saved model: its weights were saved.
    for p in layer.parameters():
        p.set_value(paddle.zeros_like(p))
    check_loaded(path, (x,), expected)


class TwoTowers(paddle.nn.Layer):
    """Results of gradient graphs cut by a ``detach()``: one program per part (sot/symbolic/gradient_parts.py)."""

    def __init__(self) -> None:
        super().__init__()
        self.left, self.right = paddle.nn.Linear(2, 2), paddle.nn.Linear(2, 3)

    def forward(self, x: paddle.Tensor, y: paddle.Tensor) -> tuple:
        h = self.left(x).tanh()
        return h.sum(), self.right(h.detach() + y).exp()


def test_a_graph_run_as_separate_gradient_parts_is_exported_whole(tmp_path: Any) -> None:
    paddle.seed(4)
    layer = TwoTowers()
    x, y = paddle.randn([3, 2]), paddle.randn([3, 2])
    path = str(tmp_path / "towers")
    sot.export(layer, x, y, path=path)
    sot.reset()
    with sot.config.patch(min_graph_size=0):
        assert len(compiled_programs(sot.explain(layer, x, y).graphs[0].program)) == 2
    check_loaded(path, (x, y), layer(x, y))


def test_layer_with_builtin_sublayers_and_batchnorm_eval(tmp_path: Any) -> None:
    net = conv_net()
    x = paddle.randn([2, 3, 6, 6])
    path = str(tmp_path / "conv")
    fast = sot.symbolic_translate(net)  # a translated layer is accepted as well
    fast(x)
    fast(x)  # cached: export still translates its own call and leaves this cache alone
    info = sot.export(fast, x, path=path)
    assert [s.kind for s in info.sir.statements].count("layer") == 5
    check_loaded(path, (x,), net(x))
    x2 = paddle.randn([2, 3, 6, 6])
    check_loaded(path, (x2,), net(x2))
    assert net.bn.training is False and net.training is False  # export did not change the mode


def test_loaded_model_is_standalone(tmp_path: Any) -> None:
    """``paddle.jit.load`` in a fresh process (no sot, no model class) gives eager's output."""
    net = conv_net()
    x = paddle.randn([2, 3, 6, 6])
    path = str(tmp_path / "conv")
    sot.export(net, x, path=path)
    np.save(tmp_path / "x.npy", x.numpy())
    np.save(tmp_path / "expected.npy", net(x).numpy())
    script = textwrap.dedent(f"""
        import numpy as np, paddle
        loaded = paddle.jit.load({path!r})
        out = loaded(paddle.to_tensor(np.load({str(tmp_path / 'x.npy')!r})))
        np.testing.assert_allclose(out.numpy(), np.load({str(tmp_path / 'expected.npy')!r}), rtol=1e-5, atol=1e-5)
        print("standalone ok")
    """)
    env = dict(os.environ, GLOG_minloglevel="2")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "standalone ok" in done.stdout


def test_pylayer_model(tmp_path: Any) -> None:
    paddle.seed(11)
    net = PyLayerNet()
    net.eval()
    x = paddle.randn([4, 6])
    path = str(tmp_path / "pylayer")
    info = sot.export(net, x, path=path)
    assert [s.kind for s in info.sir.statements].count("pylayer") == 1
    assert net.w.name in info.baked
    check_loaded(path, (x,), net(x))
    program = str(paddle.jit.load(path).program())
    assert "pylayer" in program


def test_a_model_returning_a_model_output(tmp_path: Any) -> None:
    """The saved model returns the items of the ``ModelOutput`` (its tensors, in order), flattened."""
    from models.zoo import seeded
    from models.zoo_user import GPTWithModelOutput, gpt_inputs

    model = seeded(GPTWithModelOutput)()
    model.eval()
    ids, labels = gpt_inputs()
    expected = model(ids, labels)
    path = str(tmp_path / "gpt")
    info = sot.export(model, ids, labels, path=path)
    assert info.num_outputs == 2 + len(expected.hidden_states)  # loss, logits, every hidden state
    check_loaded(path, (ids, labels), (expected.loss, expected.logits, *expected.hidden_states))


def test_graph_break_is_refused_with_its_line(tmp_path: Any, capsys: Any) -> None:
    x = paddle.randn([3])
    path = str(tmp_path / "broken")
    with pytest.raises(ExportError) as info:
        sot.export(with_print, x, path=path)
    assert isinstance(info.value, sot.SotError)
    message = str(info.value)
    where = f"{__file__}:{line_of(with_print, PRINT_LINE)}"
    assert "graph break" in message and where in message and "print" in message
    assert len(info.value.problems) == 1 and info.value.problems[0].location == where
    assert not os.path.exists(path + ".json") and not os.path.exists(path + ".pdmodel")
    assert sot.export.ExportError is ExportError


def test_fallback_is_refused(tmp_path: Any) -> None:
    with pytest.raises(sot.SotError, match="fallback") as info:
        sot.export(with_fallback, paddle.randn([3]), path=str(tmp_path / "fb"))
    assert f"{__file__}:" in str(info.value)


def test_no_tensor_op_is_refused(tmp_path: Any) -> None:
    def identity(x: paddle.Tensor) -> paddle.Tensor:
        return x

    with pytest.raises(ExportError, match="no tensor operation"):
        sot.export(identity, paddle.randn([3]), path=str(tmp_path / "id"))


def scaled_by_a_negative_zero(x):
    return x * -0.0 + 1


def test_a_negative_zero_constant_is_refused(tmp_path: Any) -> None:
    """A static program turns a -0.0 constant into 0.0 (sot/symbolic/zero_sign.py): the saved model would
    compute ``1 / (x * -0.0)`` with the other sign, so the export refuses; a 0.0 constant is exported."""
    with pytest.raises(ExportError, match="float zero"):
        sot.export(scaled_by_a_negative_zero, paddle.ones([2]), path=str(tmp_path / "negative"))
    sot.export(lambda x: x * 0.0 + 1, paddle.ones([2]), path=str(tmp_path / "positive"))

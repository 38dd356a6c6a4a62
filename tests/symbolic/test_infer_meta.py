"""Meta inference of built-in layers: placeholders for their parameters, and the memo keyed by signature.

The metas (shape, dtype, stop_gradient) inferred for a ``layer`` statement must equal what eager Paddle
gives, whatever the layer's state; alike layers share one inference, and any change of what the forward
reads must miss the memo.
"""
from __future__ import annotations

import copy
from typing import Any, Callable

import paddle
import pytest

import sot
from sot.opcode_translator.executor import function_graph
from sot.symbolic.infer_meta import infer_meta
from sot.symbolic.layer_signature import layer_signature, layer_state
from sot.symbolic.sir import MetaInfo, layer_call


def _meta(tensor: paddle.Tensor) -> MetaInfo:
    return MetaInfo(tuple(tensor.shape), tensor.dtype, bool(tensor.stop_gradient))


def _flat(out: Any) -> list[Any]:
    """The leaves of a layer's output (a tensor, or nested tuples and lists of them: an LSTM's)."""
    if isinstance(out, (list, tuple)):
        return [leaf for item in out for leaf in _flat(item)]
    return [out]


def _eager_meta(layer: paddle.nn.Layer, inputs: list[paddle.Tensor]) -> list[MetaInfo]:
    """What eager Paddle gives, on a copy (a forward may update the layer's state: batch norm statistics)."""
    return [_meta(t) for t in _flat(copy.deepcopy(layer)(*inputs))]


def _inferred_meta(layer: paddle.nn.Layer, inputs: list[paddle.Tensor]) -> list[MetaInfo]:
    return _flat(infer_meta(layer_call(layer), tuple(_meta(t) for t in inputs), {}, to_static=True))


def _frozen(layer: paddle.nn.Layer) -> paddle.nn.Layer:
    for p in layer.parameters():
        p.stop_gradient = True
    return layer


def _eval(layer: paddle.nn.Layer) -> paddle.nn.Layer:
    layer.eval()
    return layer


def _image(stop_gradient: bool = True, dtype: str = "float32") -> paddle.Tensor:
    x = paddle.rand([2, 3, 8, 8]).astype(dtype)
    x.stop_gradient = stop_gradient
    return x


def _seq() -> paddle.Tensor:
    return paddle.rand([2, 5, 4])


LAYERS: dict[str, tuple[Callable[[], paddle.nn.Layer], Callable[[], list[paddle.Tensor]]]] = {
    "conv": (lambda: paddle.nn.Conv2D(3, 4, 3, stride=2), lambda: [_image()]),
    "conv frozen": (lambda: _frozen(paddle.nn.Conv2D(3, 4, 3)), lambda: [_image()]),
    "conv frozen, input needs grad": (lambda: _frozen(paddle.nn.Conv2D(3, 4, 3)), lambda: [_image(False)]),
    "conv float64": (lambda: paddle.nn.Conv2D(3, 4, 3).to(dtype="float64"), lambda: [_image(dtype="float64")]),
    "batch norm train": (lambda: paddle.nn.BatchNorm2D(3), lambda: [_image()]),
    "batch norm eval": (lambda: _eval(paddle.nn.BatchNorm2D(3)), lambda: [_image()]),
    "batch norm global stats": (lambda: paddle.nn.BatchNorm2D(3, use_global_stats=True), lambda: [_image()]),
    "batch norm frozen": (lambda: _frozen(paddle.nn.BatchNorm2D(3)), lambda: [_image()]),
    "dropout": (lambda: paddle.nn.Dropout(0.3), lambda: [_image(False)]),
    "dropout eval": (lambda: _eval(paddle.nn.Dropout(0.3)), lambda: [_image(False)]),
    "linear": (lambda: paddle.nn.Linear(8, 5), lambda: [_image()]),
    "embedding": (lambda: paddle.nn.Embedding(10, 4), lambda: [paddle.to_tensor([[1, 2], [3, 9]])]),
    "layer norm": (lambda: paddle.nn.LayerNorm(4), lambda: [_seq()]),
    "lstm": (lambda: paddle.nn.LSTM(4, 6), lambda: [_seq()]),
    "multi-head attention": (lambda: paddle.nn.MultiHeadAttention(4, 2), lambda: [_seq(), _seq(), _seq()]),
    "gru, bidirectional": (lambda: paddle.nn.GRU(4, 6, direction="bidirect"), lambda: [_seq()]),
    "transformer encoder layer": (lambda: paddle.nn.TransformerEncoderLayer(4, 2, 8), lambda: [_seq()]),
    "conv transpose": (lambda: paddle.nn.Conv2DTranspose(3, 4, 3, stride=2), lambda: [_image()]),
    "group norm": (lambda: paddle.nn.GroupNorm(1, 3), lambda: [_image()]),
    "instance norm": (lambda: paddle.nn.InstanceNorm2D(3), lambda: [_image()]),
    "prelu": (lambda: paddle.nn.PReLU(3), lambda: [_image()]),
    "spectral norm": (lambda: paddle.nn.SpectralNorm([4, 6]), lambda: [paddle.rand([4, 6])]),
}


@pytest.mark.parametrize("case", list(LAYERS))
def test_inferred_metas_equal_eager(case: str) -> None:
    make_layer, make_inputs = LAYERS[case]
    layer, inputs = make_layer(), make_inputs()
    assert _inferred_meta(layer, inputs) == _eager_meta(layer, inputs)


def test_meta_inference_leaves_the_parameters_and_recorder_as_they_were() -> None:
    from paddle.jit.dy2static.parameter_recorder import _global_parameter_recorder

    layer = paddle.nn.Conv2D(3, 4, 3)
    weight, bias = layer.weight, layer.bias
    before = dict(_global_parameter_recorder.tensor2value)
    _inferred_meta(layer, [_image()])
    assert layer.weight is weight and layer.bias is bias
    assert not layer.weight.stop_gradient
    assert _global_parameter_recorder.tensor2value == before


# -- the signature --------------------------------------------------------------------------------------------
def test_alike_layers_share_a_signature() -> None:
    a, b = paddle.nn.Conv2D(3, 4, 3), paddle.nn.Conv2D(3, 4, 3)
    assert layer_signature(a) is not None
    assert layer_signature(a) == layer_signature(b)
    assert layer_signature(paddle.nn.Sequential(a, paddle.nn.ReLU())) == \
        layer_signature(paddle.nn.Sequential(b, paddle.nn.ReLU()))


@pytest.mark.parametrize("make", [lambda: paddle.nn.LSTM(4, 6, num_layers=2),
                                  lambda: paddle.nn.TransformerEncoderLayer(4, 2, 8)], ids=["lstm", "transformer"])
def test_layers_keeping_paddle_functions_share_a_signature(make: Callable[[], paddle.nn.Layer]) -> None:
    """An RNN cell keeps its ``forward`` as a bound method and its activations, a transformer layer its
    activation: Paddle's own functions, described by identity."""
    assert layer_signature(make()) is not None
    assert layer_signature(make()) == layer_signature(make())


def test_a_user_function_kept_by_a_layer_is_not_described() -> None:
    layer = paddle.nn.TransformerEncoderLayer(4, 2, 8)
    layer.activation = lambda x: x * 2
    assert layer_signature(layer) is None


def _replace_weight(layer: paddle.nn.Layer) -> None:
    layer.weight = layer.create_parameter([4, 3, 5, 5])


def _set_training(layer: paddle.nn.Layer) -> None:
    layer.eval()


def _freeze(layer: paddle.nn.Layer) -> None:
    layer.weight.stop_gradient = True


def _restride(layer: paddle.nn.Layer) -> None:
    layer._stride = [2, 2]


def _cast(layer: paddle.nn.Layer) -> None:
    layer.to(dtype="float64")


def _drop_bias(layer: paddle.nn.Layer) -> None:
    layer.bias = None


CHANGES = {"replaced weight": _replace_weight, "training flag": _set_training, "frozen weight": _freeze,
           "stride": _restride, "dtype": _cast, "no bias": _drop_bias}


@pytest.mark.parametrize("change", list(CHANGES))
def test_a_change_of_what_forward_reads_changes_the_signature(change: str) -> None:
    layer = paddle.nn.Conv2D(3, 4, 3)
    before = layer_signature(layer)
    CHANGES[change](layer)
    assert layer_signature(layer) is not None
    assert layer_signature(layer) != before


def test_dropout_rate_and_global_stats_are_in_the_signature() -> None:
    assert layer_signature(paddle.nn.Dropout(0.1)) != layer_signature(paddle.nn.Dropout(0.2))
    assert layer_signature(paddle.nn.BatchNorm2D(3)) != \
        layer_signature(paddle.nn.BatchNorm2D(3, use_global_stats=True))


def test_a_layer_holding_what_cannot_be_described_has_no_signature() -> None:
    layer = paddle.nn.Linear(2, 2)
    layer.register_forward_post_hook(lambda layer, inputs, output: output * 2)
    assert layer_signature(layer) is None
    plain = paddle.nn.Linear(2, 2)
    plain.extra = object()
    assert layer_signature(plain) is None


def test_the_state_of_a_layer_without_signature_tells_a_changed_parameter() -> None:
    layer = paddle.nn.Linear(2, 2)
    layer.register_forward_post_hook(lambda layer, inputs, output: output * 2)
    before = layer_state(layer)
    assert layer_state(layer) == before
    layer.weight.stop_gradient = True
    assert layer_state(layer) != before


def test_a_shared_sublayer_is_part_of_the_signature() -> None:
    shared = paddle.nn.Linear(2, 2)
    assert layer_signature(paddle.nn.Sequential(shared, shared)) != \
        layer_signature(paddle.nn.Sequential(paddle.nn.Linear(2, 2), paddle.nn.Linear(2, 2)))


# -- the memo, through translation ----------------------------------------------------------------------------
class Tower(paddle.nn.Layer):
    def __init__(self, n: int = 4) -> None:
        super().__init__()
        self.blocks = paddle.nn.LayerList([paddle.nn.Linear(6, 6) for _ in range(n)])

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        for block in self.blocks:
            x = paddle.tanh(block(x)) + 1.0
        return x


@pytest.fixture
def layer_inferences(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The ``layer`` statements whose metas are inferred (not found in the memo)."""
    calls: list[Any] = []
    original = function_graph.infer_meta

    def counting(call: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("to_static"):
            calls.append(call)
        return original(call, *args, **kwargs)

    monkeypatch.setattr(function_graph, "infer_meta", counting)
    return calls


def test_alike_layers_are_inferred_once(layer_inferences: list[Any]) -> None:
    net = Tower()
    x = paddle.rand([3, 6])
    x.stop_gradient = False  # (else the first block's input meta differs from the others')
    with sot.config.patch(min_graph_size=0):
        out = sot.symbolic_translate(net)(x)
    assert len(layer_inferences) == 1
    ref = net(x)
    assert out.shape == ref.shape and out.stop_gradient == ref.stop_gradient


def test_a_frozen_layer_among_alike_ones_gets_its_own_stop_gradient(layer_inferences: list[Any]) -> None:
    """The memo must not hand a trainable layer's output meta (needs grad) to a frozen one."""
    trainable, frozen = paddle.nn.Linear(6, 6), _frozen(paddle.nn.Linear(6, 6))

    def f(x: paddle.Tensor) -> tuple[paddle.Tensor, paddle.Tensor]:
        a = trainable(x) * 2.0 + 1.0
        b = frozen(x) * 2.0 + 1.0
        return a, b

    x = paddle.rand([3, 6])
    with sot.config.patch(min_graph_size=0):
        a, b = sot.symbolic_translate(f)(x)
    assert len(layer_inferences) == 2
    assert (a.stop_gradient, b.stop_gradient) == (False, True)


def test_a_layer_changed_between_translations_is_inferred_again(layer_inferences: list[Any]) -> None:
    """A replaced weight of another shape changes the output shape: the second translation (the weight's
    identity is guarded) must not reuse the first one's metas."""
    layer = paddle.nn.Linear(6, 6)

    def f(x: paddle.Tensor) -> paddle.Tensor:
        return layer(x) * 2.0 + 1.0

    translated = sot.symbolic_translate(f)
    x = paddle.rand([3, 6])
    with sot.config.patch(min_graph_size=0):
        assert translated(x).shape == [3, 6]
        layer.weight = layer.create_parameter([6, 2])
        layer.bias = layer.create_parameter([2], is_bias=True)
        out = translated(x)
    assert out.shape == [3, 2]
    assert len(layer_inferences) == 2


def _doubled(layer: paddle.nn.Layer, inputs: Any, output: paddle.Tensor) -> paddle.Tensor:
    return output * 2


@pytest.mark.parametrize("hooked", [False, True], ids=["by signature", "by identity and state"])
def test_a_shape_read_after_a_replaced_weight_is_the_new_one(hooked: bool) -> None:
    """The output's shape, read as a Python int by the frame, comes from the inferred meta: a retranslation
    after ``layer.weight`` was replaced must not reuse the old meta (it used to, for the layer's identity
    was the whole key)."""
    layer = paddle.nn.Linear(6, 6)
    if hooked:
        layer.register_forward_post_hook(_doubled)

    def f(x: paddle.Tensor) -> paddle.Tensor:
        y = layer(x)
        return y * 2.0 + y.shape[1]

    translated = sot.symbolic_translate(f)
    x = paddle.rand([3, 6])
    with sot.config.patch(min_graph_size=0):
        translated(x)
        layer.weight = layer.create_parameter([6, 2])
        layer.bias = layer.create_parameter([2], is_bias=True)
        out = translated(x)
    ref = f(x)
    assert out.shape == ref.shape == [3, 2]
    assert float((out - ref).abs().max()) == 0.0

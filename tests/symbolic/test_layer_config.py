"""`layer_config`: the plain configuration of a built-in layer that its guard and its program's key hold.

Which attributes a class hides behind a data descriptor is cached per class; the cache must give what
``inspect.getattr_static`` gives for each name, on Paddle's layers and on user subclasses."""
from __future__ import annotations

import inspect
from typing import Any, Callable

import paddle
import pytest

from sot.symbolic.layer_signature import _is_config_value, _names_paddles_code_may_read, _NOT_CONFIG, layer_config


def _reference_config(layer: paddle.nn.Layer) -> list[tuple[str, Any]]:
    """`layer_config` spelled out without the per-class cache."""
    return [(name, value) for name, value in layer.__dict__.items()
            if name not in _NOT_CONFIG and name.isidentifier() and _is_config_value(value)
            and not hasattr(inspect.getattr_static(type(layer), name, None), "__set__")
            and name in _names_paddles_code_may_read(type(layer))]


LAYERS: dict[str, Callable[[], paddle.nn.Layer]] = {
    "conv2d": lambda: paddle.nn.Conv2D(3, 4, 3, stride=2, padding=1),
    "conv1d_transpose": lambda: paddle.nn.Conv1DTranspose(2, 3, 3),
    "batch_norm": lambda: paddle.nn.BatchNorm2D(4, momentum=0.8),
    "layer_norm": lambda: paddle.nn.LayerNorm(8, epsilon=1e-3),
    "dropout": lambda: paddle.nn.Dropout(0.3),
    "max_pool": lambda: paddle.nn.MaxPool2D(2, 2),
    "lstm": lambda: paddle.nn.LSTM(4, 8, num_layers=2),
    "encoder_layer": lambda: paddle.nn.TransformerEncoderLayer(8, 2, 16),
    "embedding": lambda: paddle.nn.Embedding(10, 4, padding_idx=0),
}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_layer_config_equals_the_uncached_lookup(name: str) -> None:
    layer = LAYERS[name]()
    for sub in layer.sublayers(include_self=True):
        for _ in range(2):  # the second time from the cache
            assert layer_config(sub) == _reference_config(sub)


class _Scaled(paddle.nn.Linear):
    """A user subclass whose class hides one instance attribute behind a property (a data descriptor) and
    shadows another with a plain class attribute (not a data descriptor: the instance value wins)."""

    def __init__(self) -> None:
        super().__init__(2, 2)
        self.__dict__["scale"] = 2.0   # hidden: ``self.scale`` reads the property
        self.__dict__["factor"] = 3.0  # visible: ``self.factor`` is the instance value

    @property
    def scale(self) -> float:
        return 1.0

    @scale.setter
    def scale(self, value: float) -> None:
        pass

    factor = 0.5

    def extra_repr(self) -> str:  # (code naming ``factor``: a forward could read it)
        return f"factor={self.factor}"


def test_an_attribute_hidden_by_a_data_descriptor_is_left_out() -> None:
    for _ in range(2):
        config = dict(layer_config(_Scaled()))
        assert "scale" not in config
        assert config["factor"] == 3.0
    assert layer_config(_Scaled()) == _reference_config(_Scaled())


def test_the_cache_is_per_class() -> None:
    """A name hidden in one class is not hidden in its base (which has no such descriptor)."""
    base = paddle.nn.Linear(2, 2)
    base.__dict__["scale"] = 2.0
    assert dict(layer_config(_Scaled())).get("scale") is None
    assert dict(layer_config(base))["scale"] == 2.0


class _Logged(paddle.nn.Linear):
    """A user subclass wrapping the call: its ``__call__`` keeps a log and a counter no code of the forward
    names; a helper method names ``offset``."""

    def __init__(self) -> None:
        super().__init__(2, 2)
        self.calls = 0
        self.tag = "logged"
        self.offset = 1.0

    def __call__(self, x):
        self.calls += 1
        return super().__call__(x)

    def shifted(self, x):
        return x + self.offset


def test_a_subclass_attribute_no_code_of_the_forward_names_is_left_out() -> None:
    config = dict(layer_config(_Logged()))
    assert "calls" not in config and "tag" not in config
    assert config["offset"] == 1.0  # (named by a method the forward might call)
    assert config["_dtype"] == "float32"  # (Linear's own)

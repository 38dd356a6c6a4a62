"""``obj.prop = value`` / ``del obj.prop`` through a property's Python setter/deleter: the setter is inlined
(was a graph break): its tensor work lands in the graph, its own stores are replayed after it, its errors are
the user's."""
from __future__ import annotations

import numpy as np
import paddle

import sot

from conftest import assert_counts, assert_same, raised


def _t(*shape: int, seed: int = 0) -> paddle.Tensor:
    rng = np.random.default_rng(seed)
    return paddle.to_tensor(rng.standard_normal(shape).astype("float32"))


class Temperature:
    def __init__(self, value=1.0):
        self._value = value
        self.sets = 0

    @property
    def value(self):
        return self._value

    @value.setter
    def value(self, new):
        if isinstance(new, (int, float)) and new <= 0:
            raise ValueError(f"temperature must be positive, got {new}")
        self._value = new
        self.sets += 1

    @value.deleter
    def value(self):
        del self._value

    @property
    def read_only(self):
        return 1


def set_constant(t, x):
    t.value = 2.0
    return x / t.value


def set_tensor(t, x):
    t.value = x * 3  # the setter stores a tensor computed in the graph
    return t.value + 1


def state(t):
    return {k: (v.numpy().tolist() if isinstance(v, paddle.Tensor) else v) for k, v in sorted(vars(t).items())}


def check(fn, x):
    fast = sot.symbolic_translate(fn)
    for _ in range(2):
        eager_t, fast_t = Temperature(), Temperature()
        expected = fn(eager_t, x)
        assert_same(fast(fast_t, x), expected)
        assert state(fast_t) == state(eager_t)


def test_a_property_setter_is_inlined(compile_all):
    check(set_constant, _t(3))
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)
    assert sot.stats().cache_hits == 1


def test_a_setter_storing_a_tensor(compile_all):
    check(set_tensor, _t(3))
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


def delete(t, x):
    del t.value
    return x + hasattr(t, "_value")


def test_a_property_deleter_is_inlined(compile_all):
    check(delete, _t(3))
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


class Built:
    def __init__(self, v):
        self.temp = Temperature()
        self.temp.value = v


def built_in_frame(x):
    b = Built(4.0)
    return x * b.temp.value, b.temp.sets


def test_a_setter_on_an_object_made_in_the_frame(compile_all):
    x = _t(3)
    expected = built_in_frame(x)
    fast = sot.symbolic_translate(built_in_frame)
    for _ in range(2):
        assert_same(fast(x), expected)
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


def set_invalid(t, x):
    y = x + 1
    t.value = -1.0
    return y


def test_the_setters_error_is_the_users():
    x = _t(3)
    eager_t, fast_t = Temperature(), Temperature()
    expected = raised(set_invalid, eager_t, x)
    actual = raised(sot.symbolic_translate(set_invalid), fast_t, x)
    assert type(actual) is ValueError and str(actual) == str(expected)
    assert state(fast_t) == state(eager_t)


def set_read_only(t, x):
    t.read_only = 3
    return x


def test_a_property_without_setter_raises_as_eager():
    x = _t(3)
    expected = raised(set_read_only, Temperature(), x)
    actual = raised(sot.symbolic_translate(set_read_only), Temperature(), x)
    assert type(actual) is type(expected) and str(actual) == str(expected)


class _ScaledLayer(paddle.nn.Layer):
    """A layer whose ``scale`` is a property with a setter counting its calls."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = paddle.nn.Linear(3, 3)
        self.sets = 0
        self._scale = 1.0

    @property
    def scale(self):
        return self._scale

    @scale.setter
    def scale(self, value):
        self.sets += 1
        self._scale = value

    def forward(self, x):
        self.scale = 0.5 if x.shape[0] > 1 else 2.0
        return self.lin(x) * self.scale


def test_a_layer_property_setter_runs_as_layer_setattr_runs_it_without_a_break() -> None:
    """``Layer.__setattr__`` runs a property's setter, then, for a value it files in none of its tables, the
    plain store, which runs the setter again: twice per assignment, as eager (it was a graph break)."""
    paddle.seed(1)
    eager_layer = _ScaledLayer()
    paddle.seed(1)
    layer = _ScaledLayer()
    translated = sot.symbolic_translate(layer)
    with sot.config.patch(min_graph_size=0):
        for rows in (2, 2, 1):
            x = paddle.ones([rows, 3])
            np.testing.assert_allclose(translated(x).numpy(), eager_layer(x).numpy(), rtol=1e-6)
    assert layer.sets == eager_layer.sets == 6
    assert layer.scale == eager_layer.scale == 2.0
    assert sot.stats().graph_breaks == 0 and sot.stats().fallbacks == 0

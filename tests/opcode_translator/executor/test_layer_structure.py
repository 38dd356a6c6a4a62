"""Reading a layer's tree in translated code: ``named_children()``, ``parameters()``, ``state_dict()``...,
iterating a ``ParameterList`` and reading a parameter's ``name``. Results equal eager; no break or fallback;
a change of the tree between calls (a sublayer added, a parameter replaced, a hook) is seen."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import paddle
import paddle.nn as nn

import sot


def _tensor(*shape: int, seed: int = 0) -> paddle.Tensor:
    return paddle.to_tensor(np.random.default_rng(seed).standard_normal(shape).astype("float32"))


def _picture(value: Any) -> Any:
    if isinstance(value, paddle.Tensor):
        return ("tensor", value.dtype, tuple(value.shape), value.stop_gradient, value.numpy().round(5).tolist())
    if isinstance(value, nn.Layer):
        return ("layer", id(value))
    if isinstance(value, dict):
        return (type(value).__name__, [(k, _picture(v)) for k, v in value.items()])
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [_picture(v) for v in value])
    return (type(value).__name__, value)


def _check(fn: Callable[..., Any], *args: Any, breaks: int | None = 0, fallbacks: int | None = 0) -> Any:
    fast = sot.symbolic_translate(fn)
    for _ in range(2):
        assert _picture(fast(*args)) == _picture(fn(*args))
    stats = sot.stats()
    assert fallbacks is None or stats.fallbacks == fallbacks, stats
    assert breaks is None or stats.graph_breaks == breaks, stats
    return stats


class Tree(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(3, 3)
        self.blocks = nn.LayerList([nn.Linear(3, 3), nn.Sequential(nn.Linear(3, 3), nn.ReLU())])
        self.shared = self.first  # the same layer under a second name: listed once
        self.register_buffer("offset", paddle.full([3], 0.5))
        self.register_buffer("scratch", paddle.zeros([3]), persistable=False)
        self.ws = nn.ParameterList([self.create_parameter([3, 3]) for _ in range(2)])


def _tree(seed: int = 4) -> Tree:
    paddle.seed(seed)
    return Tree()


def structure(layer, x):
    names = [name for name, _ in layer.named_children()]
    for child in layer.children():
        if isinstance(child, nn.Linear):
            x = child(x)
    total = sum(p.sum() for p in layer.parameters())
    named = [(name, p.shape) for name, p in layer.named_parameters(prefix="model")]
    subs = [type(sub).__name__ for sub in layer.sublayers(include_self=True)]
    deep = [name for name, _ in layer.named_sublayers()]
    buffers = [b * 2 for b in layer.buffers()]
    named_buffers = dict(layer.named_buffers())
    state = layer.state_dict()
    modules = [type(m).__name__ for m in layer.modules()] + [name for name, _ in layer.named_modules()]
    picked = layer.get_sublayer("blocks.1.0")(x) + layer.get_parameter("ws.0").sum() + layer.get_buffer("offset")
    return x, names, total, named, subs, deep, buffers, named_buffers, list(state), state["first.weight"] * 1, \
        len(layer.parameters(include_sublayers=False)), modules, picked


def test_tree_reading_methods_match_eager(compile_all):
    _check(structure, _tree(), _tensor(2, 3))


def test_named_children_loop_and_a_parameter_list(compile_all):
    def fn(layer, x):
        for name, child in layer.named_children():
            if isinstance(child, nn.Linear):
                x = child(x)
        for w in layer.ws:
            x = x @ w
        return x + layer.ws[1].sum() + len(layer.ws), layer.ws[0]

    _check(fn, _tree(), _tensor(2, 3))


def test_a_sublayer_added_between_calls_is_seen(compile_all):
    def fn(layer, x):
        for child in layer.children():
            if isinstance(child, nn.Linear):
                x = child(x)
        return x, [name for name, _ in layer.named_parameters()]

    eager, translated = _tree(), _tree()
    fast = sot.symbolic_translate(fn)
    x = _tensor(2, 3)
    assert _picture(fast(translated, x)[1]) == _picture(fn(eager, x)[1])
    for layer in (eager, translated):
        paddle.seed(9)
        layer.extra = nn.Linear(3, 3)
    expected, actual = fn(eager, x), fast(translated, x)
    assert actual[1] == expected[1]
    np.testing.assert_allclose(actual[0].numpy(), expected[0].numpy(), rtol=1e-5)


def test_a_replaced_parameter_is_read_fresh(compile_all):
    def fn(layer, x):
        return sum((p * 1).sum() for p in layer.parameters()) + x, layer.state_dict()["first.bias"] + 0

    layer = _tree()
    fast = sot.symbolic_translate(fn)
    x = _tensor(1)
    assert _picture(fast(layer, x)) == _picture(fn(layer, x))
    layer.first.bias = layer.create_parameter([3], default_initializer=nn.initializer.Constant(3.0))
    assert _picture(fast(layer, x)) == _picture(fn(layer, x))


def test_state_dict_with_a_hook_runs_it(compile_all):
    """A state_dict hook (any user code) runs natively: a break there; the OrderedDict it gives is read in the
    resume function."""
    layer = _tree()
    layer.first.register_state_dict_hook(lambda destination: destination.update(marker=paddle.ones([1])))

    def fn(layer, x):
        return x * 2, list(layer.state_dict())

    _check(fn, layer, _tensor(3), breaks=None)


def test_generator_kept_across_a_break(compile_all):
    """The generator is made again for the resume function (which runs eagerly: a generator handed to a frame
    is not iterated in simulation yet)."""

    def fn(layer, x):
        children = layer.named_children()
        print("break")
        return x + 1, [name for name, _ in children]

    _check(fn, _tree(), _tensor(3), breaks=None, fallbacks=None)


def test_parameter_name_is_read_and_guarded(compile_all):
    def fn(layer, x):
        return x * 2, layer.first.weight.name, isinstance(layer.ws[0].name, str)

    layer = _tree()
    fast = sot.symbolic_translate(fn)
    x = _tensor(3)
    assert _picture(fast(layer, x)) == _picture(fn(layer, x))
    layer.first.weight.name = "renamed_weight"
    assert _picture(fast(layer, x)) == _picture(fn(layer, x))
    assert sot.stats().fallbacks == 0


def test_name_of_a_computed_tensor_is_eager(compile_all):
    def fn(x):
        y = x * 2
        return y, y.name.startswith("generated") or True

    _check(fn, _tensor(3), breaks=None)


def test_get_sublayer_of_a_missing_name_raises_the_eager_error(compile_all):
    def fn(layer, x):
        try:
            layer.get_sublayer("blocks.7")
        except AttributeError as exc:
            return x * 2, str(exc)
        return x

    _check(fn, _tree(), _tensor(3), breaks=None)


class _Leaf(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.w = self.create_parameter([2])


class _Root(nn.Layer):
    """Only user layers (a built-in layer on the path of a parameter is guarded by identity)."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = _Leaf(), _Leaf()


def test_another_instance_of_the_same_architecture_reuses_the_translation(compile_all):
    def fn(layer, x):
        return sum(p.sum() for p in layer.parameters()) + x, [name for name, _ in layer.named_sublayers()]

    fast = sot.symbolic_translate(fn)
    x = _tensor(1)
    for seed in (1, 2, 3):
        paddle.seed(seed)
        layer = _Root()
        assert _picture(fast(layer, x)) == _picture(fn(layer, x))
    assert sot.stats().translate_count == 1, sot.stats()


def test_unsharing_a_sublayer_changes_what_is_listed(compile_all):
    """``shared`` is ``first`` (listed once); made a layer of its own, it is listed too."""

    def fn(layer, x):
        return x + len(layer.parameters()), [name for name, _ in layer.named_children()]

    eager, translated = _tree(), _tree()
    fast = sot.symbolic_translate(fn)
    x = _tensor(1)
    assert _picture(fast(translated, x)) == _picture(fn(eager, x))
    for layer in (eager, translated):
        paddle.seed(5)
        layer.shared = nn.Linear(3, 3)
    assert _picture(fast(translated, x)) == _picture(fn(eager, x))


def test_persistable_flag_of_parameters_buffers_and_results(compile_all):
    def fn(layer, x):
        y = x * 2
        return y, layer.first.weight.persistable, layer.offset.persistable, x.persistable, y.persistable

    _check(fn, _tree(), _tensor(3))

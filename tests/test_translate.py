"""`symbolic_translate`'s results (sot/translate.py) as objects, and called from translated code.

A translated function is a `TranslatedFunction`: called in C, it adds no frame of sot's to a traceback, and
it stands in for the function (name, signature, method binding, pickling, copies). Called from code that is
itself translated, a translated function, method or layer is simulated inline: the caller's graph holds it
(one graph, no break), unless the two were translated with different ``training`` flags."""
from __future__ import annotations

import copy
import inspect
import pickle

import numpy as np
import paddle
import paddle.nn.functional as F
import pytest

import sot
from sot.translate import TranslatedFunction

from conftest import assert_counts, assert_same, raised, traceback_frames


def _t(*shape: int, seed: int = 0, stop_gradient: bool = True) -> paddle.Tensor:
    value = paddle.to_tensor(np.random.default_rng(seed).standard_normal(shape).astype("float32"))
    value.stop_gradient = stop_gradient
    return value


def _grads(*tensors: paddle.Tensor) -> list:
    return [t.grad.numpy().copy() for t in tensors]


def _assert_same_grads(actual: list, expected: list) -> None:
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)


# -- the object `symbolic_translate` returns for a function --------------------------------------------------
def scaled_relu(x, scale=2.0):
    """Module-level, translated under another name: pickles by value."""
    return F.relu(x) * scale


@sot.symbolic_translate
def module_level_translated(x):
    return x + 1


def _raises_value_error(x):
    y = x * 2
    raise ValueError(f"bad {y.shape}")


def test_a_raise_in_a_translated_function_has_no_frame_of_sot():
    exc = raised(sot.symbolic_translate(_raises_value_error), _t(2))
    assert type(exc) is ValueError and str(exc) == str(raised(_raises_value_error, _t(2)))
    frames = traceback_frames(exc, with_file=True)
    assert not [frame for frame in frames if "/sot/" in frame[0]], frames
    assert frames[-1][1] == "_raises_value_error"


def test_a_failing_program_reruns_the_frame_without_a_frame_of_sot(compile_all):
    def gather_rows(x, index):
        y = x * 2
        return paddle.gather(y, index)

    fast = sot.symbolic_translate(gather_rows)
    fast(_t(3, 2), paddle.to_tensor([0, 2]))  # compiled; the next call's kernel fails in the program
    exc = raised(fast, _t(3, 2), paddle.to_tensor([0, 7]))
    expected = raised(gather_rows, _t(3, 2), paddle.to_tensor([0, 7]))
    assert type(exc) is type(expected) and str(exc) == str(expected)
    frames = traceback_frames(exc, with_file=True)
    assert not [frame for frame in frames if "/sot/" in frame[0]], frames


def test_translated_function_stands_in_for_the_function():
    fast = sot.symbolic_translate(scaled_relu)
    assert isinstance(fast, TranslatedFunction)
    assert fast.__name__ == "scaled_relu" and fast.__qualname__ == "scaled_relu"
    assert fast.__doc__ == scaled_relu.__doc__ and fast.__module__ == __name__
    assert fast.__wrapped__ is scaled_relu and fast.__sot_translated__ is scaled_relu
    assert inspect.signature(fast) == inspect.signature(scaled_relu)
    assert repr(fast) == f"sot.symbolic_translate({scaled_relu!r})"
    assert copy.copy(fast) is fast and copy.deepcopy(fast) is fast
    assert_same(fast(_t(3), scale=3.0), scaled_relu(_t(3), scale=3.0))


def test_translated_function_pickles_by_name_or_by_value():
    assert pickle.loads(pickle.dumps(module_level_translated)) is module_level_translated
    fast = sot.symbolic_translate(scaled_relu, training=False)
    again = pickle.loads(pickle.dumps(fast))
    assert isinstance(again, TranslatedFunction) and again is not fast
    assert again.__sot_translated__ is scaled_relu and again._sot_training is False
    assert_same(again(_t(4)), scaled_relu(_t(4)))


class Affine:
    def __init__(self, scale: float) -> None:
        self.scale = scale

    @sot.symbolic_translate
    def apply(self, x, shift=0.0):
        """Scaled and shifted."""
        return x * self.scale + shift


def test_a_translated_method_binds_like_a_function(compile_all):
    obj = Affine(3.0)
    x = _t(2, 3)
    assert isinstance(Affine.apply, TranslatedFunction)
    assert obj.apply.__self__ is obj and obj.apply.__func__ is Affine.apply
    assert list(inspect.signature(obj.apply).parameters) == ["x", "shift"]
    assert_same(obj.apply(x, shift=1.0), x * 3.0 + 1.0)
    assert_same(Affine.apply(obj, x, shift=1.0), x * 3.0 + 1.0)  # (the same entry)
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


def test_skip_function_on_a_translated_function_skips_its_original():
    def doubled(x):
        return x * 2

    fast = sot.skip_function(sot.symbolic_translate(doubled))
    assert_same(fast(_t(3)), _t(3) * 2)
    assert sot.stats().translate_count == 0


# -- called from translated code: simulated inline -----------------------------------------------------------
@sot.symbolic_translate
def _inner(x, w):
    return paddle.matmul(x, w).tanh()


def _outer(x, w):
    h = _inner(x, w)
    return (h * h).sum() + _inner(h, w).mean()


def test_a_translated_function_called_from_translated_code_is_in_the_callers_graph(compile_all):
    inputs = lambda: (_t(2, 3), _t(3, 3, seed=1, stop_gradient=False))  # noqa: E731
    x, w = inputs()
    expected = _outer(x, w)  # (eager, but for _inner's own translation)
    expected.backward()
    sot.reset()
    fast = sot.symbolic_translate(_outer)
    for _ in range(2):
        x2, w2 = inputs()
        out = fast(x2, w2)
        out.backward()
        assert_same(out, expected)
        _assert_same_grads(_grads(w2), _grads(w))
    # One frame (the inner one is not translated on its own), one graph, no break; the second call hits.
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)
    assert sot.stats().cache_hits == 1


class Block(paddle.nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.fc = paddle.nn.Linear(4, 4)

    def forward(self, x):
        return F.gelu(self.fc(x)) + x


def test_translated_layers_called_from_a_translated_step_are_in_its_graph(compile_all):
    paddle.seed(3)
    block, linear = Block(), paddle.nn.Linear(4, 2)
    fast_block, fast_linear = sot.symbolic_translate(block), sot.symbolic_translate(linear)

    def step(x):
        return fast_linear(fast_block(x)).square().mean()

    def eager_step(x):
        return linear(block(x)).square().mean()

    expected = eager_step(_t(3, 4))
    expected.backward()
    eager_grads = _grads(*block.parameters(), *linear.parameters())
    for p in [*block.parameters(), *linear.parameters()]:
        p.clear_gradient()
    out = sot.symbolic_translate(step)(_t(3, 4))
    out.backward()
    assert_same(out, expected)
    _assert_same_grads(_grads(*block.parameters(), *linear.parameters()), eager_grads)
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


class Model:
    def __init__(self) -> None:
        self.w = _t(3, 3, seed=2)

    @sot.symbolic_translate
    def head(self, x):
        return paddle.matmul(x, self.w).sigmoid()

    def forward(self, x):
        return self.head(x) + self.head(x * 2)


def test_a_translated_method_called_from_translated_code_is_in_the_callers_graph(compile_all):
    model = Model()
    x = _t(2, 3)
    expected = model.forward(x)
    sot.reset()
    assert_same(sot.symbolic_translate(model.forward)(x), expected)
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)
    model.w = _t(3, 3, seed=5)  # a tensor attribute the inlined method reads: read fresh
    assert_same(sot.symbolic_translate(model.forward)(x), model.forward(x))


def test_a_recursive_translated_function_unrolls_in_one_graph(compile_all):
    @sot.symbolic_translate
    def halve(n, x):
        return x if n == 0 else halve(n - 1, x / 2)

    def outer(x):
        return halve(3, x) + 1

    assert_same(sot.symbolic_translate(outer)(_t(4)), _t(4) / 8 + 1)
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


def _triple(x):
    return x * 3


@pytest.mark.parametrize("inner_training, outer_training", [(False, True), (True, False)])
def test_another_training_flag_keeps_the_call_native(inner_training, outer_training, compile_all):
    inner = sot.symbolic_translate(_triple, training=inner_training)

    def outer(x):
        return inner(x) + 1

    x = _t(2, 2, stop_gradient=False)
    out = sot.symbolic_translate(outer, training=outer_training)(x)
    assert_same(out, x * 3 + 1)
    assert sot.stats().graph_breaks == 1
    # The break's reason names both flags.
    sot.reset()
    report = sot.explain(sot.symbolic_translate(outer, training=outer_training), x)
    assert f"is translated with training={inner_training}, its caller with training={outer_training}" in str(report)


def test_one_frame_under_both_flags_asks_which_is_installed(compile_all):
    inner = sot.symbolic_translate(_triple)  # training

    def outer(x):
        return inner(x) - 1

    x = _t(2, 2)
    assert_same(sot.symbolic_translate(outer)(x), x * 3 - 1)
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)
    # The same code under training=False: the cached entry (inner inlined) must not be reused.
    assert_same(sot.symbolic_translate(outer, training=False)(x), x * 3 - 1)
    assert sot.stats().graph_breaks == 1
    assert_same(sot.symbolic_translate(outer)(x), x * 3 - 1)  # the first entry again: a hit
    assert sot.stats().graph_breaks == 1


def test_a_translated_function_called_eagerly_is_translated_on_its_own(compile_all):
    x, w = _t(2, 3), _t(3, 3, seed=1)
    assert_same(_inner(x, w), paddle.matmul(x, w).tanh())
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


class InferenceHead:
    def __init__(self) -> None:
        self.k = 3.0

    @sot.symbolic_translate(training=False)
    def head(self, x):
        return x + self.k

    def forward(self, x):
        y = x * 2
        return self.head(y) * 2 + InferenceHead.head(self, y)


def test_a_method_translated_with_another_flag_breaks_at_its_call(compile_all):
    obj, x = InferenceHead(), _t(3, 4)
    fast = sot.symbolic_translate(obj.forward)
    for _ in range(2):
        assert_same(fast(x), (x * 2 + 3.0) * 3)
    assert sot.stats().fallbacks == 0 and sot.stats().graph_breaks == 2
    sot.reset()
    report = str(sot.explain(obj.forward, x))
    assert report.count("InferenceHead.head is translated with training=False, its caller with training=True") == 2


def _times2(x):
    return x * 2


def _times3(x):
    return x * 3


def test_another_translation_in_the_same_place_is_a_guard_miss(compile_all):
    """The entry guards which translation it inlined (by identity): another one passed, or bound to the global,
    is its own original."""
    def apply(x, fn):
        return fn(x) + 1

    fast, x = sot.symbolic_translate(apply), _t(3)
    double, triple = sot.symbolic_translate(_times2), sot.symbolic_translate(_times3)
    assert_same(fast(x, double), x * 2 + 1)
    assert_same(fast(x, triple), x * 3 + 1)
    assert_same(fast(x, double), x * 2 + 1)  # (the first entry again)
    assert_counts(translate_count=2, graph_breaks=0, fallbacks=0, compiled_graphs=2)
    # The same function translated with the other flag is another translation too: a miss, then the break.
    assert_same(fast(x, sot.symbolic_translate(_times2, training=False)), x * 2 + 1)
    assert sot.stats().graph_breaks == 1


class Decorated:
    k = 3.0

    @staticmethod
    @sot.symbolic_translate
    def static_inside(x):
        return x * 2

    @sot.symbolic_translate
    @staticmethod
    def static_outside(x):
        return x * 4

    @classmethod
    @sot.symbolic_translate
    def class_inside(cls, x):
        return x * cls.k

    @sot.symbolic_translate
    @classmethod
    def class_outside(cls, x):
        return x + cls.k

    def forward(self, x):
        return self.static_inside(x) + self.static_outside(x) + self.class_inside(x) + Decorated.class_outside(x)


def test_static_and_class_methods_with_symbolic_translate_on_either_side(compile_all):
    obj, x = Decorated(), _t(2, 2)
    expected = x * 2 + x * 4 + x * 3.0 + (x + 3.0)
    assert isinstance(Decorated.__dict__["static_outside"], staticmethod)
    assert isinstance(Decorated.__dict__["class_outside"], classmethod)
    assert_same(obj.static_outside(x), x * 4)  # (called from eager code: each translated on its own)
    assert_same(obj.class_outside(x), x + 3.0)
    assert_same(Decorated.class_inside(x), x * 3.0)
    sot.reset()
    fast = sot.symbolic_translate(obj.forward)
    for _ in range(2):
        assert_same(fast(x), expected)
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


def test_a_translated_layers_attributes_and_methods_are_read_off_its_layer(compile_all):
    """What a `TranslatedLayer` delegates to its layer (``parameters()``, ``eval()``, ``bias``) is simulated as
    read off the layer: no fallback ("cannot break the graph at LOAD_METHOD"), no break."""
    paddle.seed(4)
    dropout_net, linear = paddle.nn.Sequential(paddle.nn.Linear(3, 3), paddle.nn.Dropout(0.5)), paddle.nn.Linear(3, 3)
    fast_net, fast_linear = sot.symbolic_translate(dropout_net), sot.symbolic_translate(linear)

    def step(x):
        fast_net.eval()  # (dropout off: deterministic)
        n = len(fast_net.parameters())
        out = fast_net(x) * n + fast_linear.bias
        fast_net.train()
        return out

    x = _t(2, 3)
    dropout_net.eval()
    expected = dropout_net(x) * 2 + linear.bias
    dropout_net.train()
    for _ in range(2):
        assert_same(sot.symbolic_translate(step)(x), expected)
        assert dropout_net.training
    assert sot.stats().fallbacks == 0 and sot.stats().graph_breaks == 0


def test_a_forward_replaced_on_a_builtin_layer_is_simulated(compile_all):
    """``lin.forward = patched`` on a built-in layer: eager's call runs ``patched`` every time (its side effects,
    the globals it reads). The layer is then no single ``layer`` statement (whose program would have run
    ``patched`` once, while it was built), also when the replacement comes after a translation."""
    paddle.seed(5)
    lin, calls, scale = paddle.nn.Linear(4, 4), [], [3.0]
    original = lin.forward

    def patched(x):
        calls.append(1)
        return original(x) * scale[0]

    def f(x):
        return lin(x).sum()

    x, fast = _t(2, 4), sot.symbolic_translate(f)
    assert_same(fast(x), lin(x).sum())  # (translated with Linear's own forward)
    lin.forward = patched
    for value in (3.0, 10.0):
        scale[0] = value
        calls.clear()
        expected = f(x)
        assert_same(fast(x), expected)
        assert len(calls) == 2  # (eager's call, then the translated one)
    sot.reset()
    assert_same(fast(x), f(x))  # (a new translation after reset: no crash)

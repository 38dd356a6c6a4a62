"""A loop whose body breaks the graph (sot/opcode_translator/loop.py): its body function is translated a
bounded number of times, whatever the number of items.

The body function receives each item as an argument. Its guards must check what the body depends on (the
item's type and meta), not which item it is: a list also kept for after the loop has a variable for each of
its items, one of which is the item (``xs[k] is t``), and that identity must not be guarded while the body
never reads the list's items. Every test compares results and printed output with eager Paddle and checks
that the translation counts with few and with many items are the same.
"""
from __future__ import annotations

import contextlib
import dis
import io
import sys

import numpy as np
import paddle
import pytest

import sot

from conftest import assert_same, counts


def _tensor(seed: int, *shape: int, stop_gradient: bool = True) -> paddle.Tensor:
    value = paddle.to_tensor(np.random.default_rng(seed).standard_normal(shape or (3,)).astype("float32"))
    value.stop_gradient = stop_gradient
    return value


def _counts_over(fn, make_args, sizes=(5, 9), calls: int = 2) -> list[dict[str, int]]:
    """The translation counters of ``fn`` called ``calls`` times on the arguments ``make_args(n)``, for each
    number of items ``n`` (a fresh cache each time), after checking results and output against eager."""
    found = []
    for n in sizes:
        sot.reset()
        args = make_args(n)
        with contextlib.redirect_stdout(io.StringIO()) as eager_output:
            expected = fn(*args)
        fast = sot.symbolic_translate(fn)
        for _ in range(calls):
            with contextlib.redirect_stdout(io.StringIO()) as output:
                assert_same(fast(*args), expected)
            assert output.getvalue() == eager_output.getvalue()
        found.append(counts())
    return found


def _bounded(found: list[dict[str, int]]) -> None:
    assert all(entry == found[0] for entry in found), found
    assert found[0]["fallbacks"] == 0, found


# -- lists of tensors -----------------------------------------------------------------------------------------
def tensors_kept(x, xs):
    for t in xs:
        x = x * 2 + t
        print("item")
    return x, len(xs), xs


def tensors_not_kept(x, xs):
    for t in xs:
        x = x * 2 + t
        print("item")
    return x


def tensors_item_live_after_break(x, xs):
    for t in xs:
        x = x + t
        print("item")
        x = x * t
    return x, xs


def tensors_enumerated(x, xs):
    for i, t in enumerate(xs):
        x = x * 2 + t
        print("item", i)
    return x, xs


@pytest.mark.parametrize("fn", [tensors_kept, tensors_not_kept, tensors_item_live_after_break,
                                tensors_enumerated])
def test_loop_over_tensors(compile_all, capsys, fn):
    found = _counts_over(fn, lambda n: (_tensor(0), [_tensor(i + 1) for i in range(n)]))
    _bounded(found)
    # the frame, the body function, its resume after the print, the code after the loop
    assert found[0]["translate_count"] == 4, found


def tensor_dict_kept(x, d):
    for key, t in d.items():
        x = x * 2 + t
        print(key)
    return x, d


def test_loop_over_the_items_of_a_dict_of_tensors(compile_all, capsys):
    found = _counts_over(tensor_dict_kept, lambda n: (_tensor(0), {f"k{i}": _tensor(i + 1) for i in range(n)}))
    _bounded(found)


def nested_lists_kept(x, rows):
    for row in rows:
        x = x * 2 + row[0] - row[1]
        print("row")
    return x, rows


def test_loop_over_lists_of_tensors(compile_all, capsys):
    found = _counts_over(nested_lists_kept, lambda n: (_tensor(0), [[_tensor(i), _tensor(i + 50)]
                                                                   for i in range(n)]))
    _bounded(found)


# -- lists of ints and of user objects ------------------------------------------------------------------------
def ints_kept(x, ns):
    for n in ns:
        x = x * n + isinstance(n, int)
        print("n")
    return x, ns


def test_loop_over_ints(compile_all, capsys):
    # The first item is specialised, the second makes the int a symbolic input: later items reuse that.
    found = _counts_over(ints_kept, lambda n: (_tensor(0), list(range(2, 2 + n))))
    _bounded(found)


class Affine:
    def __init__(self, seed: int) -> None:
        self.w = _tensor(seed)
        self.b = _tensor(seed + 100)
        self.scale = 0.5  # the same value in every object: a guard on it holds for all


def objects_kept(x, objs):
    for obj in objs:
        x = (x * obj.w + obj.b) * obj.scale
        print("obj")
    return x, objs


def test_loop_over_user_objects(compile_all, capsys):
    found = _counts_over(objects_kept, lambda n: (_tensor(0), [Affine(i) for i in range(n)]))
    _bounded(found)


class ScaledAffine:
    def __init__(self, seed: int, scale: float) -> None:
        self.w = _tensor(seed)
        self.scale = scale


def objects_with_their_own_scale(x, objs):
    for obj in objs:
        x = x * obj.w * obj.scale
        print("obj")
    return x


def test_loop_over_objects_whose_floats_differ(compile_all, capsys):
    # A float operand of ``x * s`` seen with a second value becomes a program input (a 0-D tensor cast to x's
    # dtype, as eager computes): the body function translates twice (the first value baked, then any value),
    # whatever the number of items and of distinct values; results are eager's.
    found = _counts_over(objects_with_their_own_scale,
                         lambda n: (_tensor(0), [ScaledAffine(i, 0.5 + i / 8) for i in range(n)]), sizes=(6, 11))
    _bounded(found)
    # the frame, 2 body functions, the resume function after the print, the code after the loop
    assert found[0]["translate_count"] == 5, found


class ScaledDropout:
    def __init__(self, seed: int, p: float) -> None:
        self.w = _tensor(seed)
        self.p = p


def objects_with_their_own_rate(x, objs):
    for obj in objs:
        x = paddle.nn.functional.dropout(x * obj.w, p=obj.p, training=False)
        print("obj")
    return x


def test_loop_over_objects_whose_op_attributes_differ(compile_all, capsys):
    # A float the callee reads as a Python value (Paddle's dropout checks the rate's range, and its op takes
    # it as an attribute) is baked into the program and guarded by value: the body function
    # translates once per distinct value, up to the cache limit (later values run the body eagerly, hitting
    # the entries of the values met first). Whatever the number of items, the same translations.
    with sot.config.patch(cache_limit=4):
        found = _counts_over(objects_with_their_own_rate,
                             lambda n: (_tensor(0), [ScaledDropout(i, 0.05 + i / 100) for i in range(n)]), sizes=(6, 11))
    _bounded(found)
    # the frame, 4 body functions (the limit), the resume function after the print, the code after the loop
    assert found[0]["translate_count"] == 7, found


# -- lists of layers ------------------------------------------------------------------------------------------
# A built-in layer called as one ``layer`` statement is guarded by identity (its program holds the layer); a
# body function called with each layer sees another one at every call. Once its path held a second layer of
# the class, the layer's forward is simulated there (its parameters program inputs), and one entry serves
# every layer of the class (dynamic_shape.is_varying_layer).
class Stack(paddle.nn.Layer):
    def __init__(self, make, n: int) -> None:
        super().__init__()
        self.layers = paddle.nn.LayerList([make(i) for i in range(n)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
            print("layer")
        return x


class StackKept(Stack):
    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
            print("layer")
        return x, len(self.layers), self.layers[0](x)


class Block(paddle.nn.Layer):
    """A user layer: guarded by class; the built-in layers it calls are reached through it."""

    def __init__(self, i: int) -> None:
        super().__init__()
        self.fc = paddle.nn.Linear(4, 4)
        self.norm = paddle.nn.LayerNorm(4)

    def forward(self, x):
        return paddle.nn.functional.relu(self.norm(self.fc(x))) + x


LAYERS = {
    "linear": (lambda i: paddle.nn.Linear(4, 4), [2, 4]),
    "conv": (lambda i: paddle.nn.Conv2D(4, 4, 3, padding=1), [1, 4, 5, 5]),
    "layer_norm": (lambda i: paddle.nn.LayerNorm(4), [2, 4]),
    "batch_norm_eval": (lambda i: paddle.nn.BatchNorm2D(4), [2, 4, 3, 3]),
    # (training: Paddle's forward warns at every call, simulated as a warning issued after the graph)
    "batch_norm_train": (lambda i: paddle.nn.BatchNorm2D(4), [2, 4, 3, 3]),
    "gelu": (lambda i: paddle.nn.GELU(), [2, 4]),
    "user_block": (Block, [2, 4]),
}


@pytest.mark.parametrize("stack", [Stack, StackKept])
@pytest.mark.parametrize("kind", list(LAYERS))
def test_loop_over_layers(compile_all, capsys, kind, stack):
    make, shape = LAYERS[kind]
    found = []
    for n in (5, 9):
        sot.reset()
        paddle.seed(n)
        net = stack(make, n)
        if kind == "batch_norm_eval":
            net.eval()
        x = paddle.to_tensor(np.random.default_rng(n).standard_normal(shape).astype("float32"))
        fast = sot.symbolic_translate(net)
        for _ in range(2):
            expected = net(x)
            leaves = lambda out: out if isinstance(out, paddle.Tensor) else out[0] + out[2]
            leaves(expected).sum().backward()
            eager_grads = [p.grad.numpy().copy() for p in net.parameters() if p.grad is not None]
            net.clear_gradients()
            out = fast(x)
            assert_same(out, expected)
            leaves(out).sum().backward()
            grads = [p.grad.numpy().copy() for p in net.parameters() if p.grad is not None]
            net.clear_gradients()
            assert len(grads) == len(eager_grads)
            for got, want in zip(grads, eager_grads):
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        found.append(counts())
    _bounded(found)


def call_layer(layer, x):
    y = layer(x)
    print("called")
    return y * 2


def test_one_function_called_with_many_layers(compile_all, capsys):
    layers = [paddle.nn.Linear(4, 4) for _ in range(6)]
    x = _tensor(0, 2, 4)
    fast = sot.symbolic_translate(call_layer)
    for layer in layers:
        assert_same(fast(layer, x), call_layer(layer, x))
    # the function with the first layer, once more for the second (its layer is then simulated), and its
    # resume function: every later layer hits the cache.
    assert counts()["translate_count"] == 3, counts()
    # Another class at that path is another entry (guarded by class).
    conv_like = paddle.nn.Linear(4, 4, bias_attr=False)  # (no bias: its forward reads None)
    assert_same(fast(conv_like, x), call_layer(conv_like, x))


# -- a graph break inside a comprehension or an inner loop ----------------------------------------------------
# 3.10/3.11 make a comprehension a function of its own, called with the iterator it begins; 3.12+ inline it
# (PEP 709), its variables saved on the stack and put back after it by a hidden handler and stores. Either way
# a break inside it is a graph break of the frame: the comprehension runs natively (3.10/3.11: its function,
# which the hook runs natively; 3.12+: its loop, around a body function that runs natively), the code before
# and after it stays compiled, with the same counters on every version.
def break_in_list_comprehension(x):
    ys = [x * i for i in range(3) if print(i) is None]
    return ys


def break_in_dict_comprehension(x, xs):
    return {i: t * 2 for i, t in enumerate(xs) if print(i) is None}


def break_in_set_comprehension(x):
    return len({i for i in range(3) if print(i) is None}) * x


def break_in_nested_comprehension(x, xs):
    return [[t * j for j in range(2) if print(j) is None] for t in xs]


def break_in_comprehension_in_an_expression(x, xs):
    return sum([t * 2 for t in xs if print("t") is None]) + x * 3


def comprehension_variable_shadows_a_local(x):
    t = x + 1
    ys = [t * 2 for t in [x, x * 3] if print("t") is None]
    return ys, t * 5  # (3.12+: ``t`` is put back after the comprehension)


def comprehension_variables_shadow_two_locals(x, xs):
    t, j = x + 1, 7
    ys = {i: t * j for i, t, j in zip(range(3), xs, [2, 3]) if print("t") is None}
    # (3.12+: the stack holds the saved variables as ``j, i, t``, the last saved one first; ``i`` was unbound)
    return ys, t * 5, j


@pytest.mark.parametrize("fn", [break_in_list_comprehension, break_in_dict_comprehension,
                                break_in_set_comprehension, break_in_nested_comprehension,
                                break_in_comprehension_in_an_expression, comprehension_variable_shadows_a_local,
                                comprehension_variables_shadow_two_locals])
def test_a_break_inside_a_comprehension_is_a_graph_break(compile_all, capsys, fn):
    x = _tensor(0)
    args = (x,) if fn.__code__.co_argcount == 1 else (x, [_tensor(1), _tensor(2)])
    expected = fn(*args)
    eager_output = capsys.readouterr().out
    fast = sot.symbolic_translate(fn)
    for _ in range(2):
        assert_same(fast(*args), expected)
        assert capsys.readouterr().out == eager_output
    # the frame (its code before the comprehension, then the comprehension natively) and its resume function
    assert counts()["translate_count"] == 2 and counts()["graph_breaks"] == 1, counts()
    assert counts()["fallbacks"] == 0, counts()


def raises_in_comprehension(x):
    return [x * (10 // i) for i in (2, 1, 0) if print(i) is None]


def test_an_exception_inside_a_comprehension_that_breaks(compile_all, capsys):
    with pytest.raises(ZeroDivisionError):
        raises_in_comprehension(_tensor(0))
    fast = sot.symbolic_translate(raises_in_comprehension)
    for _ in range(2):
        with pytest.raises(ZeroDivisionError):
            fast(_tensor(0))


def closure_over_comprehension_variable(x):
    fs = [lambda: t * 2 for t in [x, x * 3] if print("t") is None]
    return [f() for f in fs]


def closures_over_comprehension_and_frame_variables(x, xs):
    k = x + 1  # a cell of the frame (the lambdas capture it): the one cell the code after sees
    fs = [lambda: t * k for t in xs if print("t") is None]
    k = k * 2
    return [f() for f in fs], k


def closure_called_in_comprehension(x, xs):
    return [(lambda y: y * t)(x) for t in xs if print("t") is None]


def nested_comprehensions_with_closures(x, xs):
    return [[lambda: t * j for j in range(2) if print(j) is None] for t in xs]


def called_closures(out):  # (the lambdas made by `nested_comprehensions_with_closures`)
    return [[f() for f in row] for row in out]


@pytest.mark.parametrize("fn", [closure_over_comprehension_variable, closures_over_comprehension_and_frame_variables,
                                closure_called_in_comprehension, nested_comprehensions_with_closures])
def test_a_break_inside_a_comprehension_whose_variable_a_closure_captures(compile_all, capsys, fn):
    # Every closure shares the comprehension's one cell (all see its last value). On 3.10/3.11 that is the
    # cell of the comprehension's own function, which runs natively; 3.12+ make it in the frame before the
    # loop, and the generated code makes it once for the comprehension's run and gives it, with the frame's
    # cells, to the body function of every item: a graph break as on 3.10/3.11, no fallback.
    args = (_tensor(0),) if fn.__code__.co_argcount == 1 else (_tensor(0), [_tensor(1), _tensor(2), _tensor(3)])
    expected = fn(*args)
    eager_output = capsys.readouterr().out
    fast = sot.symbolic_translate(fn)
    for _ in range(2):
        out = fast(*args)
        if fn is nested_comprehensions_with_closures:
            assert_same(called_closures(out), called_closures(expected))
        else:
            assert_same(out, expected)
        assert capsys.readouterr().out == eager_output
        # the frame (its code before the comprehension, then the comprehension natively) and its resume
        # function (and a lambda called by the comprehension, an ordinary frame of its own); the second call
        # hits them all
        found = counts()
        translations = 3 if fn is closure_called_in_comprehension else 2
        assert (found["translate_count"], found["graph_breaks"], found["fallbacks"]) == (translations, 1, 0), found
    sot.reset()
    capsys.readouterr()
    report = sot.explain(fn, *args)
    assert [t.failure.reason for t in report.fallbacks] == [] and len(report.breaks) == 1, str(report)


def closures_without_a_break(x):
    getters = [lambda: x * i for i in range(3)]
    scaled = [(lambda y: y * i)(x) for i in range(3)]
    return [g() for g in getters], scaled


def test_comprehensions_making_closures_over_their_variable_are_translated(compile_all):
    # 3.12+: MAKE_CELL, LOAD_CLOSURE and STORE_DEREF of the inlined comprehension's variable are simulated
    x = _tensor(0)
    expected = closures_without_a_break(x)
    fast = sot.symbolic_translate(closures_without_a_break)
    for _ in range(2):
        assert_same(fast(x), expected)
    assert counts() == {"translate_count": 1, "graph_breaks": 0, "fallbacks": 0, "compiled_graphs": 1}, counts()


def loop_closures_share_a_frame_cell(x, xs):
    fs = []
    for t in xs:
        x = x + t
        fs.append(lambda: t * 2)  # ``t`` is a cell of the frame: every lambda sees its last value
        print("t")
    return x, [f() for f in fs]


def loop_body_reads_a_frame_cell(x, xs):
    scale = x * 0 + 2

    def times(y):
        return y * scale

    for t in xs:
        x = times(x) + t
        print("t")
        scale = scale + 1  # (the body writes the frame's cell: ``times`` sees it at the next item)
    return x, times(x)


@pytest.mark.parametrize("fn", [loop_closures_share_a_frame_cell, loop_body_reads_a_frame_cell])
def test_a_loop_whose_body_uses_a_cell_of_the_frame(compile_all, capsys, fn):
    # The body function receives the frame's cells in its closure (as a resume function does): the one cell
    # per variable eager code has, whatever the number of items.
    found = _counts_over(fn, lambda n: (_tensor(0), [_tensor(i + 1) for i in range(n)]))
    _bounded(found)


def comprehension_in_loop(x, xs):
    for t in xs:
        x = x + t
        ys = [t * i for i in range(2) if print(i) is None]
        x = x * 2 + ys[1]
    return x


def inner_loop_breaks(x, rows):
    for row in rows:
        x = x * 2
        for t in row:
            x = x + t
            print("t")
        x = x - 1
    return x


@pytest.mark.parametrize("fn", [comprehension_in_loop, inner_loop_breaks])
def test_a_break_inside_an_inner_loop(compile_all, capsys, fn):
    # The outer loop runs natively around its body function; in that function, the inner loop (under whose
    # iterator the outer loop's stands in) runs natively around a body function of its own.
    found = _counts_over(fn, lambda n: (_tensor(0), [[_tensor(i), _tensor(i + 50)] for i in range(n)])
                         if fn is inner_loop_breaks else (_tensor(0), [_tensor(i) for i in range(n)]))
    _bounded(found)


def long_body(x, xs):
    """A loop body long enough (over 255 code units) for its ``FOR_ITER`` to carry an ``EXTENDED_ARG``, as a
    training loop's body with its logging often is."""
    log = {"sum": [], "max": [], "min": [], "mean": []}
    for t in xs:
        h = x * 2 + t
        h = paddle.tanh(h) + paddle.sin(h) * 0.5 - paddle.cos(h) * 0.25
        h = paddle.clip(h, -2.0, 2.0) + paddle.abs(h).sqrt() * 0.1
        h = h * 0.5 + paddle.exp(-h * h)
        print("item")
        log["sum"].append(h.sum())
        log["max"].append(h.max())
        log["min"].append(h.min())
        log["mean"].append(h.mean())
        y = paddle.stack([h.sum(), h.max(), h.min(), h.mean()])
        x = x + y.mean() * 0.01 - h * 0.001 + paddle.where(h > 0, h, paddle.zeros_like(h)) * 0.001
        x = x + paddle.nn.functional.relu(h - 1.0) * 0.001 + paddle.nn.functional.sigmoid(h) * 0.001
        x = x + paddle.nn.functional.softmax(h, axis=-1) * 0.001 + paddle.logsumexp(h) * 0.001
        x = x + paddle.nn.functional.gelu(h) * 0.001 + paddle.nn.functional.silu(h) * 0.001
        x = x + paddle.nn.functional.softplus(h) * 0.001 + paddle.nn.functional.tanhshrink(h) * 0.001
        x = paddle.clip(x, -10.0, 10.0) + paddle.nn.functional.hardswish(x) * 0.001
        x = x + paddle.nn.functional.leaky_relu(h, 0.1) * 0.001 + paddle.nn.functional.elu(h) * 0.001
        x = x + paddle.nn.functional.mish(h) * 0.001 + paddle.nn.functional.log_sigmoid(h) * 0.001
    return x, log


def test_a_break_in_a_loop_whose_head_carries_an_extended_arg(compile_all, capsys):
    instructions = list(dis.get_instructions(long_body))
    heads = [at for at, instr in enumerate(instructions) if instr.opname == "FOR_ITER"]
    assert any(instructions[at - 1].opname == "EXTENDED_ARG" for at in heads)  # (the case under test)
    found = _counts_over(long_body, lambda n: (_tensor(0), [_tensor(i) for i in range(n)]))
    _bounded(found)

"""Eager replay of a SIR through generated Python (`sot.symbolic.replay`): same results as `run_sir`, same
argument rebuilding, exceptions located at the user's line, used by translated code on cache hits."""
from __future__ import annotations

import contextlib
import io
import traceback

import numpy as np
import paddle
import pytest

import sot
from sot.errors import SourceLocation
from sot.symbolic.replay import compile_replay
from sot.symbolic.sir import MetaInfo, Statement, StatementIR, Symbol, run_sir


def _sir(statements: list[Statement], inputs: list[Symbol], outputs: list[Symbol]) -> StatementIR:
    metas = {s: MetaInfo((2, 3), paddle.float32, True) for s in inputs}
    return StatementIR("test", inputs, statements, outputs, metas)


S = [Symbol(f"var_{i}") for i in range(8)]


def _assert_same(left: list, right: list) -> None:
    assert len(left) == len(right)
    for a, b in zip(left, right):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
        assert a.stop_gradient == b.stop_gradient


def test_replay_matches_run_sir_for_every_statement_kind() -> None:
    layer = paddle.nn.Linear(3, 3)
    statements = [
        Statement("api", "add", paddle.add, (S[0], S[1]), {}, S[2]),
        Statement("method", "reshape", "reshape", (S[2], [3, 2]), {}, S[3]),
        Statement("api", "concat", paddle.concat, ([S[3], S[3]],), {"axis": 0}, S[4]),
        Statement("api", "split", paddle.split, (S[4], 2), {"axis": 0}, (S[5], S[6])),
        Statement("layer", "linear", layer, (S[0],), {}, S[7]),
    ]
    sir = _sir(statements, S[:2], [S[5], S[6], S[7]])
    inputs = [paddle.randn([2, 3]), paddle.randn([2, 3])]
    _assert_same(compile_replay(sir)(inputs), run_sir(sir, inputs))


def test_statement_recorded_under_no_grad_runs_under_no_grad() -> None:
    sir = _sir([Statement("api", "multiply", paddle.multiply, (S[0], S[0]), {}, S[1], no_grad=True),
                Statement("api", "multiply", paddle.multiply, (S[0], S[0]), {}, S[2])], [S[0]], [S[1], S[2]])
    x = paddle.randn([2, 3])
    x.stop_gradient = False
    no_grad_out, grad_out = compile_replay(sir)([x])
    assert no_grad_out.stop_gradient and not grad_out.stop_gradient


def test_argument_containers_are_rebuilt_on_every_call() -> None:
    seen: list[int] = []

    def appends(values: list, extra: dict) -> paddle.Tensor:
        seen.append(len(values))
        values.append(values[0])  # a callee mutating its argument must not change the next call
        extra["k"] = 1
        return paddle.add_n(values)

    sir = _sir([Statement("api", "appends", appends, ([S[0]], {"a": S[0]}), {}, S[1])], [S[0]], [S[1]])
    replay = compile_replay(sir)
    for _ in range(3):
        replay([paddle.ones([2, 3])])
    assert seen == [1, 1, 1]


def test_keyword_names_that_are_not_identifiers_and_nested_outputs() -> None:
    def kw(x: paddle.Tensor, **kwargs: object) -> tuple:
        return x + kwargs["not an identifier"], [x * 2, 7]

    sir = _sir([Statement("api", "kw", kw, (S[0],), {"not an identifier": 3}, (S[1], [S[2], None]))],
               [S[0]], [S[1], S[2]])
    x = paddle.ones([2, 3])
    _assert_same(compile_replay(sir)([x]), [x + 3, x * 2])


def test_constants_keep_their_identity() -> None:
    marker = object()

    def check(x: paddle.Tensor, token: object) -> paddle.Tensor:
        assert token is marker
        return x

    sir = _sir([Statement("api", "check", check, (S[0], marker), {}, S[1])], [S[0]], [S[1]])
    compile_replay(sir)([paddle.ones([2, 3])])


def test_a_failing_statement_is_raised_at_its_user_line_and_runs_once() -> None:
    calls: list[int] = []

    def fails(x: paddle.Tensor) -> paddle.Tensor:
        calls.append(1)
        raise IndexError("index 7 is out of bounds")

    location = SourceLocation("user_model.py", 42)
    sir = _sir([Statement("api", "ok", paddle.tanh, (S[0],), {}, S[1]),
                Statement("api", "fails", fails, (S[1],), {}, S[2], location=location, function="forward")],
               [S[0]], [S[2]])
    with pytest.raises(IndexError, match="out of bounds") as info:
        compile_replay(sir)([paddle.ones([2, 3])])
    frames = [(f.filename, f.lineno, f.name) for f in traceback.extract_tb(info.value.__traceback__)]
    assert ("user_model.py", 42, "forward") in frames
    assert calls == [1]


def small_graph_then_break(x: paddle.Tensor, w: paddle.Tensor) -> paddle.Tensor:
    y = paddle.tanh(x * w)
    z = paddle.concat([y, x], axis=-1)
    print("break")
    return z.sum(axis=-1)


def test_translated_small_graph_is_replayed_with_eager_results_and_gradients() -> None:
    sot.reset()
    x, w = paddle.randn([4, 3]), paddle.randn([3])
    w.stop_gradient = False
    expected = small_graph_then_break(x, w)
    expected.sum().backward()
    expected_grad = w.grad.numpy().copy()
    w.clear_gradient()
    fn = sot.symbolic_translate(small_graph_then_break)
    with contextlib.redirect_stdout(io.StringIO()), sot.config.patch(min_graph_size=100):
        for _ in range(3):
            out = fn(x, w)
            np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-6)
            out.sum().backward()
            np.testing.assert_allclose(w.grad.numpy(), expected_grad, rtol=1e-6)
            w.clear_gradient()
    stats = sot.stats()
    assert stats.graph_breaks == 1 and stats.fallbacks == 0 and stats.compiled_graphs == 0


def test_replay_of_a_frame_named_like_a_lambda() -> None:
    """Code names such as ``<lambda>`` or ``<listcomp>`` are not identifiers: the replay function's name is
    made one (it was a SyntaxError, so every such frame with a small graph fell back)."""
    sir = StatementIR("<lambda>", [S[0], S[1]], [Statement("api", "add", paddle.add, (S[0], S[1]), {}, S[2])],
                      [S[2]], {s: MetaInfo((2, 3), paddle.float32, True) for s in S[:2]})
    inputs = [paddle.ones([2, 3]), paddle.ones([2, 3])]
    _assert_same(compile_replay(sir)(inputs), run_sir(sir, inputs))

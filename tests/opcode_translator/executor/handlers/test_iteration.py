"""A ``for`` loop over an iterator the simulation cannot step (a ``paddle.io.DataLoader``, an ``enumerate`` or
generator object made outside, a numpy array) runs natively around a translated loop body function: the
frame is never a fallback, the body's graphs are compiled, and the iterator is stepped by real code exactly
as often as in eager code (handlers/iteration.py, `NativeLoopBreak`)."""
from __future__ import annotations

import sys
from typing import Any, Iterator

import numpy as np
import paddle
import pytest

import sot


class _Rows(paddle.io.Dataset):
    def __init__(self, count: int = 10) -> None:
        self.rows = np.arange(count * 2, dtype="float32").reshape(count, 2)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> np.ndarray:
        return self.rows[index]


def _loader() -> paddle.io.DataLoader:
    return paddle.io.DataLoader(_Rows(), batch_size=3, shuffle=False)


def _numbers(n: int) -> Iterator[int]:
    for i in range(n):
        print("made", i)
        yield i


def _both(fn: Any, make_args: Any, capsys: Any) -> tuple[Any, Any]:
    """``fn`` run eagerly then translated, each on arguments of its own; their results and printed lines."""
    expected = fn(*make_args())
    printed = capsys.readouterr().out
    got = sot.symbolic_translate(fn)(*make_args())
    assert capsys.readouterr().out == printed
    return expected, got


def _same(a: Any, b: Any) -> None:
    if isinstance(a, paddle.Tensor):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    else:
        assert a == b


def test_a_training_loop_over_enumerate_of_a_data_loader_is_no_fallback(capsys, compile_all):
    def train(loader, w):
        total = w * 0
        seen = []
        for i, batch in enumerate(loader):
            total = total + (batch * w).sum(axis=0) * (i + 1)
            print("batch", i, batch.shape)
            seen.append(i)
        return total, seen

    expected, got = _both(train, lambda: (_loader(), paddle.ones([2])), capsys)
    _same(expected, got)
    stats = sot.stats()
    assert stats.fallbacks == 0 and stats.graph_breaks >= 1, stats


def test_a_loop_over_a_data_loader_itself_runs_natively(capsys, compile_all):
    def train(loader, w):
        out = w
        for batch in loader:
            out = out * 0.5 + batch.mean()
            print("mean", float(batch.mean()))
        return out

    expected, got = _both(train, lambda: (_loader(), paddle.ones([2])), capsys)
    _same(expected, got)
    assert sot.stats().fallbacks == 0, sot.stats()


def test_break_and_return_inside_a_native_loop_leave_the_iterator_as_eager_code_does(capsys):
    def first_big(gen, w, limit):
        for value in gen:
            print("got", value)
            if value == limit:
                return w * value
            if value > limit:
                break
        return w

    for limit in (2, 10):
        gens = []

        def make():
            gens.append(_numbers(5))
            return gens[-1], paddle.ones([2]), limit

        expected, got = _both(first_big, make, capsys)
        _same(expected, got)
        # What is left of each generator is the same: the native loop took exactly the items eager code took.
        assert list(gens[0]) == list(gens[1])
        capsys.readouterr()
    assert sot.stats().fallbacks == 0, sot.stats()


def test_live_values_flow_through_several_iterations_of_the_body(capsys, compile_all):
    def run(rows, w):
        acc, count, last = w, 0, None
        for row in rows:  # a numpy array: iterated by C code
            acc = acc + paddle.to_tensor(row) * w
            count += 1
            last = row.tolist()
            print(count, last)
        return acc, count, last

    expected, got = _both(run, lambda: (np.arange(8, dtype="float32").reshape(4, 2), paddle.ones([2])), capsys)
    _same(expected, got)
    assert sot.stats().fallbacks == 0, sot.stats()


def test_nested_loops_over_a_range_and_a_data_loader(capsys, compile_all):
    def epochs(loader, w):
        out = []
        for epoch in range(2):
            total = w * 0
            for batch in loader:
                total = total + batch.sum()
            print("epoch", epoch, float(total.sum()))
            out.append(total)
        return out

    expected, got = _both(epochs, lambda: (_loader(), paddle.ones([2])), capsys)
    _same(expected, got)
    assert sot.stats().fallbacks == 0, sot.stats()


def test_iterating_an_opaque_object_outside_a_loop_runs_natively(capsys):
    def consume(gen, w):
        first = next(gen)
        rest = list(gen)
        return w * first, rest

    expected, got = _both(consume, lambda: (_numbers(4), paddle.ones([2])), capsys)
    _same(expected, got)
    assert sot.stats().fallbacks == 0, sot.stats()


def test_a_comprehension_over_a_generator_object(capsys):
    def squares(gen, w):
        return [w * v for v in gen]

    expected, got = _both(squares, lambda: (_numbers(3), paddle.ones([2])), capsys)
    _same(expected, got)
    assert sot.stats().fallbacks == 0, sot.stats()


def test_a_loop_over_a_generator_object_inside_try_is_correct(capsys):
    """A body function cannot be left by an exception: the iterator is made at a break and the loop runs in
    the resume function (which falls back), never a wrong result."""
    def guarded(gen, w):
        try:
            for v in gen:
                w = w + v
                print(v)
        except ValueError:
            pass
        return w

    expected, got = _both(guarded, lambda: (_numbers(3), paddle.ones([2])), capsys)
    _same(expected, got)
    assert sot.stats().graph_breaks >= 1, sot.stats()


@pytest.mark.skipif(sys.version_info < (3, 12), reason="3.12+ inline comprehensions into the frame")
def test_an_inlined_comprehension_over_a_generator_object_with_a_break_in_its_body(capsys):
    def listed(gen, w):
        return [float((w * v).sum()) for v in gen]

    expected, got = _both(listed, lambda: (_numbers(3), paddle.ones([2])), capsys)
    _same(expected, got)
    assert sot.stats().fallbacks == 0, sot.stats()


def _rows_summed(x):
    out = []
    for row in x:
        out.append(row.sum())
    return paddle.stack(out)


def _rows_of_a_computed_tensor(x):
    y = x * 2 + 1
    out = []
    for row in y:
        out.append(row.sum() * 3)
    return paddle.stack(out)


@pytest.mark.parametrize("fn", [_rows_summed, _rows_of_a_computed_tensor])
def test_a_loop_over_a_tensor_whose_first_dimension_became_dynamic(fn, compile_all):
    """The second batch size makes the first dimension symbolic; a loop over the rows needs its value: an
    input's is pinned again (a translation per size, as the first), a computed tensor's breaks the graph
    there. (The whole frame fell back, and ran eagerly for good.)"""
    translated = sot.symbolic_translate(fn)
    for rows in (2, 3, 4, 3):
        x = paddle.arange(rows * 2, dtype="float32").reshape([rows, 2])
        np.testing.assert_array_equal(translated(x).numpy(), fn(x).numpy())
    assert sot.stats().fallbacks == 0
    assert sot.stats().graph_breaks == (0 if fn is _rows_summed else 1)


_QKV = paddle.nn.Linear(8, 24)


def _attention_of_unpacked_heads(x):
    b, s, d = x.shape
    q, k, v = _QKV(x).reshape([b, s, 3, 2, 4]).transpose([2, 0, 3, 1, 4])
    return ((q @ k.transpose([0, 1, 3, 2])).softmax(-1) @ v).transpose([0, 2, 1, 3]).reshape([b, s, d]) * 2 + 1


def _rows_of_a_static_first_axis(x):
    t = _QKV(x).reshape([0, 0, 3, 8]).transpose([2, 0, 1, 3])
    out = t[0] * 0
    for u in t:
        out = out + u * 2
    return out + len(t)


@pytest.mark.parametrize("fn", [_attention_of_unpacked_heads, _rows_of_a_static_first_axis])
def test_unpacking_a_static_first_axis_of_a_tensor_with_dynamic_dimensions(fn, compile_all):
    """``q, k, v = qkv`` of a ``[3, -1, 2, -1, 4]`` tensor: only the first dimension is needed, and it is a
    number; the dynamic batch and length stay dynamic (the frame fell back: "cannot break the graph at
    UNPACK_SEQUENCE")."""
    translated = sot.symbolic_translate(fn)
    for batch, length in ((2, 5), (3, 5), (2, 7), (4, 6)):
        x = paddle.randn([batch, length, 8])
        np.testing.assert_allclose(translated(x).numpy(), fn(x).numpy(), rtol=1e-5, atol=1e-6)
    stats = sot.stats()
    assert (stats.graph_breaks, stats.fallbacks) == (0, 0), stats
    assert stats.translate_count <= 3 and stats.cache_hits >= 1, stats

"""What numpy does in C that the simulation does not model runs natively at a graph break, never as a fallback
of the frame: methods of a ``np.random.Generator`` (Cython functions: attribute.py), subscripts of arrays
(basic.py), and operations making a new array, which folding would have turned into one constant shared by
every call (callable.py). A varying array passed to a Paddle API breaks instead of being baked in
(function_graph.py)."""
from __future__ import annotations

import numpy as np
import paddle
import pytest

import sot


def _same(a, b) -> None:
    if isinstance(a, paddle.Tensor):
        a, b = a.numpy(), b.numpy()
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
        return
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert type(a) is type(b)


def test_generator_methods_draw_as_eagerly_and_leave_the_same_state(compile_all):
    def draw(rng, w):
        a = rng.standard_normal((3, 2)).astype("float32")
        b = rng.integers(0, 5, size=(3,))
        c = rng.random()
        return paddle.to_tensor(a) * w, b, c

    fast = sot.symbolic_translate(draw)
    eager_rng, sot_rng = np.random.default_rng(7), np.random.default_rng(7)
    w = paddle.ones([2])
    for _ in range(3):  # new numbers at every call: nothing drawn is baked into the translation
        _same(draw(eager_rng, w), fast(sot_rng, w))
    assert eager_rng.random() == sot_rng.random()  # the generators' states too
    stats = sot.stats()
    assert stats.fallbacks == 0 and stats.graph_breaks >= 3, stats


def test_a_generator_made_in_the_frame(compile_all):
    def make(seed, w):
        rng = np.random.default_rng(seed)
        return w * float(rng.standard_normal()), rng.integers(0, 10, (2, 2))

    fast = sot.symbolic_translate(make)
    for seed in (0, 1, 0):
        _same(make(seed, paddle.ones([2])), fast(seed, paddle.ones([2])))
    assert sot.stats().fallbacks == 0, sot.stats()


def test_slices_of_an_array_in_a_loop(compile_all):
    def batches(x, w):
        out = w * 0
        for i in range(0, len(x), 4):
            out = out + paddle.to_tensor(x[i:i + 4]).sum(axis=0) * w
        return out

    fast = sot.symbolic_translate(batches)
    counts = []
    for start in (0, 100, 7, 50):  # other contents: the slices are made natively, never baked in
        x = np.arange(start, start + 24, dtype="float32").reshape(12, 2)
        _same(batches(x, paddle.ones([2])), fast(x, paddle.ones([2])))
        counts.append(sot.stats().translate_count)
    assert counts[-1] == counts[1], counts  # (the second call learns which values vary)
    assert sot.stats().fallbacks == 0, sot.stats()


def test_item_assignment_and_deletion_of_an_array_run_natively():
    def change(arr, w):
        arr[0] = 5
        arr[1:3] = arr[3:5]
        return w * float(arr.sum())

    fast = sot.symbolic_translate(change)
    a, b = np.arange(6.0), np.arange(6.0)
    _same(change(a, paddle.ones([1])), fast(b, paddle.ones([1])))
    _same(a, b)

    def delete(arr):
        del arr[0]

    with pytest.raises(ValueError) as eager:
        delete(np.arange(3))
    with pytest.raises(ValueError) as translated:
        sot.symbolic_translate(delete)(np.arange(3))
    assert str(translated.value) == str(eager.value)
    assert sot.stats().fallbacks == 0, sot.stats()


def test_an_array_made_by_an_operator_is_a_new_object_at_each_call(capsys):
    """``a * 2`` of an input array was folded into one constant array: a call changing it in place (natively,
    at a break) changed what the next call started from (it printed 7s)."""
    def fn(a):
        b = a * 2
        print(b.tolist())
        b.fill(7)
        return b, a > 0.5

    fast = sot.symbolic_translate(fn)
    a = np.ones(3)
    for _ in range(3):
        expected = fn(a)
        printed = capsys.readouterr().out
        _same(expected, fast(a))
        assert capsys.readouterr().out == printed == "[2.0, 2.0, 2.0]\n"
    assert sot.stats().fallbacks == 0, sot.stats()


def test_an_array_with_new_contents_at_each_call_passed_to_to_tensor_is_not_translated_again_each_time():
    def fn(arr, w):
        return paddle.to_tensor(arr) * w

    fast = sot.symbolic_translate(fn)
    w = paddle.ones([3])
    for value in range(8):
        arr = np.full([3], value, "float32")
        _same(fn(arr, w), fast(arr, w))
    stats = sot.stats()
    assert stats.translate_count <= 3 and stats.fallbacks == 0, stats

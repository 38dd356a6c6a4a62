"""A ``with`` over a manager written in C (a file, a lock) is entered natively at a graph break and its real
``__exit__`` handed to the resume function running the block (context.py `enter_context`): no fallback, and
the block's effects, its exit on an exception and what it returns are eager's."""
from __future__ import annotations

import threading

import numpy as np
import paddle

import sot


def _write(path, w):
    y = w * 2
    with open(path, "w") as f:
        f.write(f"{float(y.sum()):.3f}\n")
        z = y + 1
    return z, f.closed


def test_a_file_written_in_a_with_block(tmp_path):
    w = paddle.ones([2])
    expected, closed = _write(tmp_path / "eager.txt", w)
    got, sot_closed = sot.symbolic_translate(_write)(tmp_path / "sot.txt", w)
    np.testing.assert_array_equal(expected.numpy(), got.numpy())
    assert closed and sot_closed
    assert (tmp_path / "eager.txt").read_text() == (tmp_path / "sot.txt").read_text() == "4.000\n"
    assert sot.stats().fallbacks == 0, sot.stats()


def test_a_lock_is_held_in_its_block_only(capsys):
    def locked(lock, w):
        y = w * 3
        with lock:
            y = y + 1
            print("inside", lock.locked())
        return y, lock.locked()

    lock = threading.Lock()
    expected = locked(lock, paddle.ones([2]))
    got = sot.symbolic_translate(locked)(lock, paddle.ones([2]))
    np.testing.assert_array_equal(expected[0].numpy(), got[0].numpy())
    assert expected[1] is got[1] is False
    assert capsys.readouterr().out == "inside True\ninside True\n"
    assert sot.stats().fallbacks == 0, sot.stats()


def test_an_exception_in_the_block_closes_the_file(tmp_path):
    path = tmp_path / "data.txt"
    path.write_text("x")

    def failing(w):
        try:
            with open(path) as f:
                raise KeyError("x")
        except KeyError:
            return w, f.closed

    assert failing(1)[1] is True
    assert sot.symbolic_translate(failing)(paddle.ones([1]))[1] is True
    assert sot.stats().fallbacks == 0, sot.stats()

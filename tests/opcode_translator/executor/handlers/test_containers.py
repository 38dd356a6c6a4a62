"""``LIST_EXTEND`` on the list a star-argument call is building, when a break inside the call making the
star argument hands that list to a resume function (``evaluate(model, *make_data())``): simulated as a change
of a list from outside (handlers/containers.py), no fallback."""
from __future__ import annotations

import numpy as np
import paddle

import sot


def _make(n):
    print("make", n)  # a graph break inside the call making the star argument
    return n, n + 1


def _use(a, b, c):
    return a * b + c


def test_a_break_while_a_star_argument_list_is_built(capsys):
    def fn(w, n):
        return _use(w, *_make(n))

    expected = fn(paddle.ones([2]), 3)
    fast = sot.symbolic_translate(fn)
    for _ in range(2):
        np.testing.assert_array_equal(fast(paddle.ones([2]), 3).numpy(), expected.numpy())
    assert capsys.readouterr().out == "make 3\n" * 3
    assert sot.stats().fallbacks == 0, sot.stats()

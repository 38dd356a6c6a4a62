"""One object reached as an item of a container and by another path (`FunctionGraph.reached_again`).

A list, tuple or dict from the frame gets a variable for each item at once; an item that is an object the
translation already knows shares its variable. The guard checks that both paths still reach one object only
once the simulation reads that item (`ItemsReadTracked`): a container the frame only passes on must not pin
which of its items another argument is, and one it reads must (a change through one path is seen through
the other). Results, in-place changes and list contents are compared with eager Paddle.
"""
from __future__ import annotations

import numpy as np
import paddle

import sot

from conftest import assert_same, counts


def _tensors(n: int, seed: int = 0) -> list[paddle.Tensor]:
    rng = np.random.default_rng(seed)
    return [paddle.to_tensor(rng.standard_normal(3).astype("float32")) for _ in range(n)]


def _run_both(fn, make_args, calls):
    """``fn`` eagerly and translated on fresh copies of the same arguments, call by call (``make_args(i)``
    for the i-th call): results and the arguments afterwards (changed in place) must be the same."""
    fast = sot.symbolic_translate(fn)
    for i in range(calls):
        eager_args, sot_args = make_args(i), make_args(i)
        expected = fn(*eager_args)
        assert_same(fast(*sot_args), expected)
        assert_same(list(sot_args), list(eager_args))


# -- a container only passed on: its items' identities are not guarded --------------------------------------
def passes_list_on(xs, t):
    print("break")
    return t * 2, xs


def passes_list_on_item_first(t, xs):
    print("break")
    return t * 2, xs


def test_a_list_passed_on_does_not_pin_which_item_an_argument_is(compile_all, capsys):
    xs = _tensors(4)
    for fn, order in ((passes_list_on, lambda t: (xs, t)), (passes_list_on_item_first, lambda t: (t, xs))):
        sot.reset()
        fast = sot.symbolic_translate(fn)
        for t in [*xs, _tensors(1, seed=9)[0]]:
            assert_same(fast(*order(t)), fn(*order(t)))
        # the frame and its resume function, once each: every other call hits the cache
        assert counts()["translate_count"] == 2, counts()


# -- a container whose item is read: the identity is guarded ------------------------------------------------
def add_then_read_first(xs, t):
    t.add_(paddle.ones_like(t))
    return xs[0] * 1


def add_then_read_first_item_first(t, xs):
    t.add_(paddle.ones_like(t))
    return xs[0] * 1


def test_reading_the_item_guards_that_it_is_the_argument(compile_all):
    def make_args(i, item_first=False):
        xs = _tensors(3, seed=i)
        t = xs[0] if i % 2 == 0 else _tensors(1, seed=10 + i)[0]  # the same tensor, then another
        return (t, xs) if item_first else (xs, t)

    _run_both(add_then_read_first, make_args, calls=4)
    assert counts()["translate_count"] == 2, counts()
    sot.reset()
    _run_both(add_then_read_first_item_first, lambda i: make_args(i, item_first=True), calls=4)
    assert counts()["translate_count"] == 2, counts()


def reads_other_item(xs, t):
    t.add_(paddle.ones_like(t))
    return xs[1] * 1


def test_reading_another_item_does_not_pin_the_argument(compile_all):
    # ``t`` is xs[0], xs[2], then a tensor of no list: xs[1] is never ``t``, one translation serves all
    # (``t`` changed in place is guarded to share no memory with ``xs[1]``).
    def make_args(i):
        xs = _tensors(3, seed=i)
        return xs, (xs[0], xs[2], _tensors(1, seed=20)[0])[i % 3]

    _run_both(reads_other_item, make_args, calls=3)
    assert counts()["translate_count"] == 1, counts()


def appends_to_row(rows, row):
    row.append(len(rows))
    return rows, len(rows[0])


def test_a_list_item_changed_through_the_argument(compile_all):
    def make_args(i):
        rows = [[0], [1, 1]]
        return rows, (rows[0] if i % 2 == 0 else [5])

    _run_both(appends_to_row, make_args, calls=4)


def add_then_read_key(d, t):
    t.add_(paddle.ones_like(t))
    return d["a"] * 1, d


def test_a_dict_item_changed_through_the_argument(compile_all):
    def make_args(i):
        a, b = _tensors(2, seed=i)
        return {"a": a, "b": b}, (a if i % 2 == 0 else b)

    _run_both(add_then_read_key, make_args, calls=4)


# -- loops whose body breaks the graph ------------------------------------------------------------------------
def scale_items_in_place(xs):
    for t in xs:
        t.scale_(2.0)
        print("item")
    return xs


def test_a_loop_changing_its_items_in_place(compile_all, capsys):
    _run_both(scale_items_in_place, lambda i: (_tensors(5, seed=i),), calls=2)


def reads_first_item_in_loop(x, xs):
    for t in xs:
        x = x + xs[0] * t
        print("item")
    return x, xs


def test_a_loop_reading_an_item_of_its_list(compile_all, capsys):
    # Item 0 is ``xs[0]`` (guarded), later items are not: two translations of the body, whatever the length.
    found = []
    for n in (4, 8):
        sot.reset()
        _run_both(reads_first_item_in_loop, lambda i: (_tensors(1, seed=99)[0], _tensors(n, seed=i)), calls=2)
        found.append(counts())
    assert found[0] == found[1] and found[0]["fallbacks"] == 0, found

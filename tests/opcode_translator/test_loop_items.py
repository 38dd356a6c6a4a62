"""A loop whose body breaks the graph (sot/opcode_translator/loop.py): its body function is translated a
bounded number of times, whatever the number of items.

The body function receives each item as an argument. Its guards must check what the body depends on (the
item's type and meta), not which item it is: a list also kept for after the loop has a variable for each of
its items, one of which is the item (``xs[k] is t``), and that identity must not be guarded while the body
never reads the list's items. Every test compares results and printed output with eager Paddle and checks
that the translation counts with few and with many items are the same.
"""
from __future__ import annotations

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
        expected = fn(*args)
        fast = sot.symbolic_translate(fn)
        for _ in range(calls):
            assert_same(fast(*args), expected)
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

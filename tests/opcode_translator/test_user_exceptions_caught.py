"""Exceptions the simulation raises for the user's code (``next`` of an exhausted iterator, unpacking the
wrong number of values, a missing name or sublayer) are caught by the user's own ``try``/``except`` in the
simulated frame, as eagerly: the handler runs in the graph (they used to end the simulation: a fallback
of the whole frame at every call)."""
from __future__ import annotations

from typing import Any

import paddle
import pytest

import sot
from tests.conftest import assert_same


def sum_until_exhausted(xs):
    it = iter(xs)
    total = next(it)
    while True:
        try:
            total = total + next(it)
        except StopIteration:
            break
    return total * 2


def unpack_or_default(x, pair):
    try:
        a, b = pair
    except ValueError as error:
        a, b = x, x
        message = str(error)
    else:
        message = ""
    return a + b, message


def star_unpack_or_default(x, items):
    try:
        first, second, *rest = items
    except ValueError as error:
        return x * 0, str(error)
    return first + second, len(rest)


def missing_name(x):
    try:
        return x * UNDEFINED_SCALE  # noqa: F821
    except NameError as error:
        return x * 2, error.name


def missing_sublayer(layers, x):
    try:
        return layers["missing"](x)
    except KeyError:
        return layers["known"](x) * 2


CASES: dict[str, tuple[Any, Any]] = {
    "next() of an exhausted iterator": (sum_until_exhausted,
                                        lambda: ([paddle.full([2], float(i)) for i in range(3)],)),
    "too many values to unpack": (unpack_or_default, lambda: (paddle.ones([2]), (1, 2, 3))),
    "not enough values to unpack": (unpack_or_default, lambda: (paddle.ones([2]), (1,))),
    "not enough values for a starred target": (star_unpack_or_default, lambda: (paddle.ones([2]), [paddle.ones([2])])),
    "a name not defined": (missing_name, lambda: (paddle.ones([2]),)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_users_handler_catches_it_in_the_graph(case: str) -> None:
    fn, make_args = CASES[case]
    translated = sot.symbolic_translate(fn)
    for _ in range(2):
        assert_same(translated(*make_args()), fn(*make_args()))
    assert sot.stats().fallbacks == 0 and sot.stats().graph_breaks == 0
    assert sot.stats().translate_count == 1


def test_a_missing_key_of_a_layer_dict() -> None:
    paddle.seed(0)
    layers = paddle.nn.LayerDict({"known": paddle.nn.Linear(2, 2)})
    x = paddle.ones([1, 2])
    assert_same(sot.symbolic_translate(missing_sublayer)(layers, x), missing_sublayer(layers, x))
    assert sot.stats().fallbacks == 0 and sot.stats().graph_breaks == 0


def test_uncaught_it_still_raises_the_users_error() -> None:
    with pytest.raises(StopIteration):
        sot.symbolic_translate(lambda xs: next(iter(xs)))([])
    with pytest.raises(ValueError, match="too many values to unpack"):
        sot.symbolic_translate(lambda pair: [a + b for a, b in [pair]])((1, 2, 3))

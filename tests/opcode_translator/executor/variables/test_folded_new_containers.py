"""A container made by a folded call of a str/bytes/number method (``s.split(",")``) is the frame's own: the
frame may change it as it likes, without falling back (it was taken for a list from outside the frame, which
could not be written back), and every call gets its own list, as in eager."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import paddle
import pytest

import sot

from conftest import assert_counts, check_same_exception


def split_and_extend(x: paddle.Tensor, spec: str) -> tuple[paddle.Tensor, list[str]]:
    parts = spec.split(",")
    parts.append("tail")
    parts[0] = parts[0].upper()
    return x * len(parts), parts


def lines_sorted_in_place(x: paddle.Tensor, text: str) -> tuple[paddle.Tensor, list[str]]:
    lines = text.splitlines()
    lines.sort(reverse=True)
    del lines[-1]
    return x + len(lines), lines


def bytes_parts_popped(x: paddle.Tensor, data: bytes) -> tuple[paddle.Tensor, list[bytes]]:
    parts = data.split(b"-")
    last = parts.pop()
    return x - len(last), parts


def split_on_the_type(x: paddle.Tensor, spec: str) -> tuple[paddle.Tensor, list[str]]:
    parts = str.split(spec, ":")
    parts.insert(0, "head")
    return x / len(parts), parts


CASES: list[tuple[Callable[..., Any], Any]] = [
    (split_and_extend, "a,b,c"),
    (lines_sorted_in_place, "one\ntwo\nthree"),
    (bytes_parts_popped, b"xy-z-uvw"),
    (split_on_the_type, "k:v"),
]


@pytest.mark.parametrize("fn,text", CASES, ids=[fn.__name__ for fn, _ in CASES])
def test_a_container_made_by_a_folded_method_is_changed_in_the_frame(fn: Callable[..., Any], text: Any) -> None:
    translated = sot.symbolic_translate(fn)
    seen = []
    for _ in range(3):
        x = paddle.arange(4, dtype="float32")
        got, got_parts = translated(x, text)
        want, want_parts = fn(x, text)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        assert got_parts == want_parts
        assert all(got_parts is not earlier for earlier in seen)  # a new list at every call, as eager's
        seen.append(got_parts)
        got_parts.append("changed by the caller")  # (must not reach the next call's list)
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=0)


def pop_from_a_config_list(x: paddle.Tensor, config: dict) -> paddle.Tensor:
    names = config["names"]  # a list from outside the frame, reached by a path: changed and written back
    names.pop()
    return x * len(names)


def test_a_list_from_outside_the_frame_is_still_changed_in_place() -> None:
    config, eager_config = {"names": ["a", "b", "c"]}, {"names": ["a", "b", "c"]}
    x = paddle.ones([2])
    got = sot.symbolic_translate(pop_from_a_config_list)(x, config)
    want = pop_from_a_config_list(x, eager_config)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert config == eager_config == {"names": ["a", "b"]}


def split_a_number(x: paddle.Tensor, value: Any) -> paddle.Tensor:
    parts = str.split(value, ",")  # a TypeError for an int, raised from this line
    return x * len(parts)


def test_a_method_taken_from_the_type_raises_as_eager_for_a_wrong_operand() -> None:
    exc = check_same_exception(split_a_number, lambda: (paddle.ones([2]), 12), "str.split(value")
    assert isinstance(exc, TypeError)

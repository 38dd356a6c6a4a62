"""Looking a value up in sot's dispatch tables (builtins, pure functions, queries) never runs the user's
code: it ran a user ``__hash__`` (a counter it keeps went up 10 times in two calls; a frozen dataclass's
``__hash__`` ran before its fields were set, an internal error in the fallback reasons)."""
from __future__ import annotations

import dataclasses

import numpy as np
import paddle

import sot


class CountedKey:
    hashed = 0

    def __init__(self, name: str) -> None:
        self.name = name

    def __hash__(self) -> int:
        CountedKey.hashed += 1
        return hash(self.name)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CountedKey) and other.name == self.name


@dataclasses.dataclass(frozen=True)
class Point:
    idx: int


def test_translating_never_hashes_the_users_objects() -> None:
    def use(key, x):
        return x * len(key.name.upper())

    key = CountedKey("ab")
    x = paddle.ones([2])
    translated = sot.symbolic_translate(use)
    with sot.config.patch(min_graph_size=0):
        for _ in range(2):
            np.testing.assert_array_equal(translated(key, x).numpy(), use(key, x).numpy())
    assert CountedKey.hashed == 0


def test_a_frozen_dataclass_made_in_the_frame_is_simulated() -> None:
    def make(x, i):
        point = Point(i)
        return x + point.idx, point

    translated = sot.symbolic_translate(make)
    x = paddle.ones([2])
    with sot.config.patch(min_graph_size=0, strict_mode=True):
        out, point = translated(x, 3)
    assert point == Point(3)
    np.testing.assert_array_equal(out.numpy(), (x + 3).numpy())

"""``sorted``/``min``/``max``/``list.sort`` over keys that hold tensors after items that decide the order
(``sorted(d.items())`` of a dict of tensors, ``min((len(k), k, v) ...)``) are simulated: tuples compare item
by item, so the tensors are never compared (the frame fell back: the keys' values were read whole). When
the earlier items tie and a tensor would be compared, the call runs natively, as eagerly."""
from __future__ import annotations

import paddle

import sot
from conftest import assert_counts, assert_same, raised


def _by_name(inputs: dict) -> tuple:
    d = {name: value * 1.5 for name, value in inputs.items()}  # (computed: no value known to compare)
    pairs = sorted(d.items(), reverse=True)
    last = max(d.items(), key=lambda item: item[0])
    listed = list(d.items())
    listed.sort()
    shortest = min((len(name), name, value) for name, value in d.items())
    return [value * 2 for _, value in pairs], last, [name for name, _ in listed], shortest


def _tensors() -> dict:
    return {"bb": paddle.ones([2]), "a": paddle.zeros([2]), "c": paddle.full([2], 3.0)}


def test_keys_holding_tensors_after_the_deciding_items_are_ordered_in_the_graph() -> None:
    translated = sot.symbolic_translate(_by_name)
    with sot.config.patch(min_graph_size=0):
        for _ in range(2):
            assert_same(translated(_tensors()), _by_name(_tensors()))
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


def _tied(x: paddle.Tensor, y: paddle.Tensor) -> list:
    return sorted([("same", x), ("same", y)])


def test_a_tie_that_compares_the_tensors_runs_natively_with_eagers_outcome() -> None:
    x, y = paddle.ones([2]), paddle.zeros([2])
    expected = raised(_tied, x, y)  # two-element tensors as Python bools
    with sot.config.patch(min_graph_size=0):
        actual = raised(sot.symbolic_translate(_tied), x, y)
    assert type(actual) is type(expected) and str(actual) == str(expected)
    assert_counts(translate_count=1, graph_breaks=1, fallbacks=0, compiled_graphs=0)
    one, other = paddle.ones([1]), paddle.zeros([1])  # one-element tensors compare
    with sot.config.patch(min_graph_size=0):
        assert_same(sot.symbolic_translate(_tied)(one, other), _tied(one, other))

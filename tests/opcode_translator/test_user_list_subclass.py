"""Instances of user ``list`` subclasses (variables/user_sequence.py): HuggingFace's ``LogitsProcessorList``
pattern, a list of callables whose ``__call__`` loops over its own items. Simulated as a user object whose
items are a simulated list: one graph, no fallback; received ones are guarded by class and length and
written back when changed; ones made in the frame are rebuilt with their final items and attributes."""
from __future__ import annotations

import numpy as np
import paddle
import pytest

import sot
from sot import psdb

from conftest import assert_counts, assert_same, raised


def _t(*shape: int, seed: int = 0) -> paddle.Tensor:
    rng = np.random.default_rng(seed)
    return paddle.to_tensor(rng.standard_normal(shape).astype("float32"))


class Scale:
    def __init__(self, k: float) -> None:
        self.k = k

    def __call__(self, ids, scores):
        return scores * self.k + ids


class Shift:
    def __call__(self, ids, scores):
        return scores - ids.mean()


class ProcessorList(list):
    """As transformers' LogitsProcessorList: a list whose call applies each item in turn."""

    def __call__(self, ids, scores):
        for processor in self:
            scores = processor(ids, scores)
        return scores


class Named(ProcessorList):
    def __init__(self, items, name):
        super().__init__(items)
        self.name = name

    def add(self, item):
        self.append(item)
        return len(self)


class Reversed(list):
    def __getitem__(self, index):  # a Python __getitem__ wins over list's
        return list.__getitem__(self, -1 - index)


def state(value):
    if isinstance(value, list):
        return (type(value).__name__, [state(v) for v in value], sorted(vars(value).items()) if hasattr(value, "__dict__") else None)
    if isinstance(value, (Scale, Shift)):
        return (type(value).__name__, vars(value))
    return value


def run_logits(procs, ids, scores):
    return procs(ids, scores)


def test_processor_list_call_is_one_graph(compile_all):
    procs = ProcessorList([Scale(2.0), Shift(), Scale(0.5)])
    ids, scores = _t(4), _t(4, seed=1)
    expected = run_logits(procs, ids, scores)
    fast = sot.symbolic_translate(run_logits)
    for _ in range(2):
        assert_same(fast(procs, ids, scores), expected)
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)
    assert sot.stats().cache_hits == 1
    # Another list of the same structure: a hit; a longer one: a miss (its length is guarded).
    other = ProcessorList([Scale(2.0), Shift(), Scale(0.5)])
    assert_same(fast(other, ids, scores), expected)
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)
    longer = ProcessorList([Scale(2.0), Shift(), Scale(0.5), Shift()])
    assert_same(fast(longer, ids, scores), run_logits(longer, ids, scores))
    assert_counts(translate_count=2, graph_breaks=0, fallbacks=0, compiled_graphs=2)


def test_processor_list_as_layer_attribute(compile_all):
    class Head(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.linear = paddle.nn.Linear(4, 4)
            self.procs = ProcessorList([Scale(3.0), Shift()])

        def forward(self, x):
            return self.procs(x, self.linear(x))

    paddle.seed(0)
    head = Head()
    x = _t(2, 4)
    expected = head(x)
    fast = sot.symbolic_translate(head)
    for _ in range(2):
        assert_same(fast(x), expected)
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


def uses_protocol(procs, x):
    n = len(procs)
    first = procs[0]
    last = procs[-1]
    total = x
    if procs and first in procs:
        total = total + n
    head = procs[:2]  # list.__getitem__ with a slice: a plain list
    joined = procs + [last]  # list.__add__: a plain list
    return total, type(head).__name__, len(joined), first is last, isinstance(procs, list)


def test_protocol_len_index_slice_contains_add(compile_all):
    procs = ProcessorList([Scale(2.0), Shift()])
    x = _t(3)
    expected = uses_protocol(procs, x)
    fast = sot.symbolic_translate(uses_protocol)
    for _ in range(2):
        assert_same(fast(procs, x), expected)
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


def mutates(procs, x):
    procs.append(Scale(4.0))
    procs += [Shift()]
    removed = procs.pop(0)
    procs.insert(0, Scale(1.5))
    procs[1] = Scale(-1.0)
    return procs(x, x * 2), removed.k


@pytest.mark.parametrize("calls", [2])
def test_changes_are_written_back_to_the_received_list(compile_all, calls):
    x = _t(3)
    fast = sot.symbolic_translate(mutates)
    for _ in range(calls):
        eager_procs = ProcessorList([Scale(2.0), Shift()])
        fast_procs = ProcessorList([Scale(2.0), Shift()])
        expected = mutates(eager_procs, x)
        out = fast(fast_procs, x)
        assert_same(out, expected)
        assert type(fast_procs) is ProcessorList
        assert state(fast_procs) == state(eager_procs)
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


def builds(x):
    procs = Named([Scale(2.0)], "head")
    size = procs.add(Shift())
    procs.tag = size
    return procs, procs(x, x)


def test_built_in_the_frame_with_python_init_and_attributes(compile_all):
    x = _t(3)
    expected = builds(x)
    fast = sot.symbolic_translate(builds)
    for _ in range(2):
        out = fast(x)
        assert type(out[0]) is Named
        assert state(out[0]) == state(expected[0])
        assert_same(out[1], expected[1])
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


def builds_plain(x):
    procs = ProcessorList()
    procs.extend([Scale(2.0), Shift()])
    return procs(x, x), len(procs)


def test_built_with_lists_own_init(compile_all):
    x = _t(3)
    expected = builds_plain(x)
    fast = sot.symbolic_translate(builds_plain)
    for _ in range(2):
        assert_same(fast(x), expected)
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


def python_getitem(seq, x):
    return x * seq[0] + seq[1], list(seq)


def test_a_python_getitem_wins(compile_all):
    seq = Reversed([1.0, 2.0, 3.0])
    x = _t(3)
    expected = python_getitem(seq, x)
    fast = sot.symbolic_translate(python_getitem)
    for _ in range(2):
        assert_same(fast(seq, x), expected)
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


class Breaking:
    def __call__(self, ids, scores):
        psdb.breakgraph()
        return scores + 1


def test_an_item_that_breaks_the_graph_breaks_only(compile_all):
    procs = ProcessorList([Scale(2.0), Breaking(), Shift()])
    ids, scores = _t(4), _t(4, seed=1)
    expected = run_logits(procs, ids, scores)
    fast = sot.symbolic_translate(run_logits)
    for _ in range(2):
        assert_same(fast(procs, ids, scores), expected)
    assert sot.stats().fallbacks == 0
    assert sot.stats().graph_breaks >= 1


def out_of_range(procs, x):
    return procs[5](x, x)


def test_index_error_as_eager(compile_all):
    procs = ProcessorList([Scale(2.0)])
    x = _t(3)
    expected = raised(out_of_range, procs, x)
    actual = raised(sot.symbolic_translate(out_of_range), procs, x)
    assert type(actual) is type(expected) and str(actual) == str(expected)


def pop_empty(procs, x):
    procs.pop()
    return x


def test_pop_from_empty_as_eager(compile_all):
    expected = raised(pop_empty, ProcessorList(), _t(3))
    received = ProcessorList()
    actual = raised(sot.symbolic_translate(pop_empty), received, _t(3))
    assert type(actual) is type(expected) and str(actual) == str(expected)
    assert received == []


def as_text(x, seq):
    seq.append(3)
    return x + 1, str(seq), seq == [1, 3]


def test_folding_sees_the_simulated_items(compile_all):
    """``str()`` of a list subclass instance the frame changed runs natively after the write-back (folded on
    the real object, it printed the old items)."""
    x = _t(3)
    for _ in range(2):
        eager_seq, fast_seq = Plain([1]), Plain([1])
        assert_same(sot.symbolic_translate(as_text)(x, fast_seq), as_text(x, eager_seq))
        assert fast_seq == eager_seq == [1, 3]
    assert sot.stats().fallbacks == 0


class Plain(list):
    pass


def text_only(x, seq):
    return x + 1, str(seq)


def test_folded_items_are_guarded(compile_all):
    x = _t(3)
    fast = sot.symbolic_translate(text_only)
    for items in ([1, 2], [1, 2], [5, 6]):
        assert_same(fast(x, Plain(items)), text_only(x, Plain(items)))
    assert_counts(translate_count=2, graph_breaks=0, fallbacks=0, compiled_graphs=2)


class Record(dict):
    pass


def dict_text(x, rec):
    rec["b"] = 2
    return x + 1, str(rec)


def test_folding_sees_the_simulated_items_of_a_dict_subclass(compile_all):
    x = _t(3)
    eager_rec, fast_rec = Record(a=1), Record(a=1)
    assert_same(sot.symbolic_translate(dict_text)(x, fast_rec), dict_text(x, eager_rec))
    assert fast_rec == eager_rec


class HFProcessorList(list):
    """transformers' LogitsProcessorList.__call__, as written there: each processor's signature decides how
    it is called (``inspect.signature`` is folded: the function's identity is guarded)."""

    def __call__(self, input_ids, scores, **kwargs):
        import inspect

        for processor in self:
            function_args = inspect.signature(processor.__call__).parameters
            if len(function_args) > 2:
                scores = processor(input_ids, scores, **kwargs)
            else:
                scores = processor(input_ids, scores)
        return scores


class WithExtra:
    def __call__(self, ids, scores, cur_len=0):
        return scores + cur_len


def generate_step(procs, ids, scores):
    return paddle.nn.functional.softmax(procs(ids, scores, cur_len=2), -1)


def test_transformers_logits_processor_list_is_one_graph(compile_all):
    procs = HFProcessorList([Scale(0.5), WithExtra(), Shift()])
    ids, scores = _t(4), _t(4, seed=1)
    expected = generate_step(procs, ids, scores)
    fast = sot.symbolic_translate(generate_step)
    for _ in range(3):
        assert_same(fast(procs, ids, scores), expected)
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)
    # Another processor class at a position: a guard miss, translated again.
    other = HFProcessorList([WithExtra(), Scale(0.5), Shift()])
    assert_same(fast(other, ids, scores), generate_step(other, ids, scores))
    assert_counts(translate_count=2, graph_breaks=0, fallbacks=0, compiled_graphs=2)

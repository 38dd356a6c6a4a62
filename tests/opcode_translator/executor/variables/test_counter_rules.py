"""``collections.Counter`` in translated code (counter_rules.py): built, counted, read and combined without
graph breaks, with the eager results, iteration order, errors and changes to a Counter passed in."""
from __future__ import annotations

import collections
from collections import Counter

import paddle
import pytest

import sot
from _conformance import T, check


def _words() -> tuple:
    return (T(3), ["b", "a", "b", "c", "a", "b"])


def build_from_list(x, words):
    c = Counter(words)
    return x * c["b"], list(c.items()), c


def build_from_str_dict_kwargs(x):
    a, b, c = Counter("abracadabra"), Counter({"r": 2, "z": 0, "y": -1}), Counter(a=3, q=1)
    d = collections.Counter({"a": 1}, b=2)  # (reached through the module too)
    return x + len(a), a, b, c, d, list(a), list(b.values())


def build_from_counter_and_generator(x, words):
    first = Counter(words)
    second = Counter(first)
    third = Counter(w * 2 for w in words if w != "c")
    return x * third["bb"], second, third, second is first


def count_with_missing_keys(x, words):
    c = Counter()
    for w in words:
        c[w] += 1
    c["never"] -= 0
    absent = c["absent"]
    del c["not there"]
    del c["a"]
    return x * absent + c["b"], c, "absent" in c, len(c)


def most_common_and_total(x, words):
    c = Counter(words)
    c.update(["z", "z", "z", "z"])
    top = c.most_common(2)
    everything = c.most_common()
    return x * c.total() + top[0][1], top, everything, c.most_common(0)


def update_and_subtract(x, words):
    c = Counter(words)
    c.update("ab")
    c.update({"a": 10, "new": -2})
    c.update(None, b=5)
    c.subtract(["a", "zz"])
    c.subtract({"b": 100})
    c.subtract(c=1)
    c.update()
    c.update(w for w in "abcabc" if c[w] < 1)  # (each element is counted before the next one is made)
    return x * c["a"], c, list(c.keys())


def elements_in_order(x, words):
    c = Counter(words)
    c["neg"] = -3
    c["zero"] = 0
    listed = list(c.elements())
    it = c.elements()
    first = next(it)
    return x + len(listed), listed, first, sorted(c.elements()), list(it)


def arithmetic(x, words):
    c = Counter(words)
    d = Counter(a=5, b=-1, e=2, c=1)
    return (x * len(c + d), c + d, c - d, d - c, c & d, c | d, d | c, +d, -d, c + Counter(), +Counter(a=0))


def comparisons(x, words):
    c = Counter(words)
    same = Counter(dict(reversed(list(c.items()))))
    with_zero = Counter(c)
    with_zero["zero"] = 0
    return (x * (c == same), c == same, c != same, c == with_zero, c <= with_zero, c < with_zero,
            c >= Counter(a=1), c > c, c == dict(c), c == {"b": 3}, c != 3)


def in_place_operators(x, words):
    c = Counter(words)
    alias = c
    c += Counter(a=-5, z=2)
    c -= Counter(b=1)
    c |= Counter(b=9, y=1)
    c &= Counter(b=4, y=1, z=1, c=7)
    c += {"w": 1}
    c -= c.copy()
    d = Counter(words)
    d += d
    return x + len(c), c, alias is c, d


def copy_and_dict_methods(x, words):
    c = Counter(words)
    d = c.copy()
    d["b"] = 0
    popped = d.pop("a")
    d.setdefault("n", 4)
    got = (c.get("missing"), c.get("b"), c.get("q", 7))
    d.clear()
    return x * popped, c, d, got, dict(c), sorted(c), type(d) is Counter, isinstance(c, dict)


def mutate_argument(x, c):
    c["a"] += 1
    c["new"] += 2
    c.update("aab")
    del c["b"]
    c.subtract(z=1)
    return x * c["a"], c.most_common(1)


def mutate_argument_in_place(x, c):
    c += Counter(a=1, q=-4)
    return x + c["a"]


def iterate_argument(x, c):
    total = x * 0
    for key, count in c.items():
        total = total + x * count
    return total, list(c), [k for k in c if c[k] > 1]


def counters_made_by_a_defaultdict(x, words):
    by_letter = collections.defaultdict(Counter)  # (Counter as the factory: called on each missing key)
    for w in words:
        by_letter[w[0]][w] += 1
    kinds = isinstance(by_letter["b"], Counter), isinstance(by_letter["b"], dict), isinstance(words, Counter)
    return x * len(by_letter), by_letter, kinds, {k: v.most_common(1) for k, v in by_letter.items()}


CASES = [
    (build_from_list, _words),
    (build_from_str_dict_kwargs, lambda: (T(3),)),
    (build_from_counter_and_generator, _words),
    (count_with_missing_keys, _words),
    (most_common_and_total, _words),
    (update_and_subtract, _words),
    (elements_in_order, _words),
    (arithmetic, _words),
    (comparisons, _words),
    (in_place_operators, _words),
    (copy_and_dict_methods, _words),
    (mutate_argument, lambda: (T(3), Counter({"b": 2, "a": 1, "c": 0}))),
    (mutate_argument_in_place, lambda: (T(3), Counter({"q": 3, "a": -1, "b": 2}))),
    (iterate_argument, lambda: (T(3), Counter("mississippi"))),
    (counters_made_by_a_defaultdict, lambda: (T(2), ["ab", "ac", "ab", "bz"])),
]


@pytest.mark.parametrize("fn,make", CASES, ids=[fn.__name__ for fn, _ in CASES])
def test_counter_like_eager_without_breaks(fn, make, compile_all) -> None:
    check(fn, make, breaks=0, fallbacks=0)


def test_counter_argument_guards_its_keys_and_counts(compile_all) -> None:
    """The same Counter again is a cache hit; other counts or other keys are not (the folded ``most_common``
    depends on them), and give their own result."""
    def read(x, c):
        return x * c["a"] + c.total(), c.most_common(1)

    fast = sot.symbolic_translate(read)
    hits = []
    for counts in ({"a": 1, "b": 2}, {"a": 1, "b": 2}, {"a": 5, "b": 2}, {"a": 1, "c": 2}, {"a": 1, "b": 2}):
        before = sot.stats().cache_hits
        got, expected = fast(T(2), Counter(counts)), read(T(2), Counter(counts))
        assert got[1] == expected[1] and paddle.allclose(got[0], expected[0]), counts
        hits.append(sot.stats().cache_hits - before)
    assert hits[:4] == [0, 1, 0, 0] and hits[4] == 1, hits
    stats = sot.stats()
    assert stats.graph_breaks == 0 and stats.fallbacks == 0, stats


def counts_of_item_values(x):
    c = Counter()
    for value in x:
        c[round(value.item(), 1) > 0] += 1  # (.item() reads a tensor's value: a graph break)
    c.update([int(v > 0) for v in x.numpy().tolist()])
    return x * c[True], c, c.most_common()


def counts_holding_tensors(x):
    c = Counter()
    c["s"] += x.sum()  # a count that is a tensor: counting stays in the graph
    c.update({"s": x.mean(), "t": x.max()})
    doubled = c["s"] * 2
    return doubled, c.most_common()  # (ordering tensors reads their values: a graph break)


def update_meets_a_tensor_element(x, c):
    c.update(["a", "a", x])  # (the tensor is a key: counted natively, after what was simulated is undone)
    c["b"] += 1
    return x + c["a"], sorted(c.values())


def subtract_meets_a_tensor_element(x):
    c = Counter("ab")
    c.subtract(["a", "a", x])
    return x + c["a"], c["b"]


def test_counter_of_tensor_values_is_right_with_breaks(compile_all) -> None:
    stats = check(counts_of_item_values, lambda: (T(4),), breaks=None, fallbacks=0)
    assert stats.graph_breaks >= 1
    sot.reset()
    stats = check(counts_holding_tensors, lambda: (T(4),), breaks=None, fallbacks=0)
    assert stats.graph_breaks >= 1


@pytest.mark.parametrize("fn,make", [(update_meets_a_tensor_element, lambda: (T(2), Counter("ab"))),
                                     (subtract_meets_a_tensor_element, lambda: (T(2),))],
                         ids=["update", "subtract"])
def test_counting_a_tensor_element_is_undone_and_run_natively(fn, make, compile_all) -> None:
    stats = check(fn, make, breaks=None, fallbacks=None, stable=False)
    assert stats.graph_breaks >= 1


def wrong_calls(which, words):
    c = Counter(words)
    if which == 0:
        return Counter(words, words)
    if which == 1:
        return Counter(5)
    if which == 2:
        return c + {"a": 1}
    if which == 3:
        return Counter.fromkeys("ab")
    if which == 4:
        return Counter([[1], [2]])
    if which == 5:
        return c.update(words, words)
    if which == 6:
        return c.most_common("x")
    if which == 7:
        c += [1]
    return c - 1


@pytest.mark.parametrize("which", range(9))
def test_counter_errors_are_the_eager_ones(which, compile_all) -> None:
    check(wrong_calls, lambda: (which, ["a", "b", "a"]), calls=1, breaks=None, fallbacks=None)


def counts_of_tensors_passed_through(x, c):
    for t in x:
        c[t] += 1  # (the keys are tensors: the Counter stays a real object, changed natively)
    return x + 1, len(c), c


def test_counter_of_tensor_keys_is_right_without_fallback(compile_all) -> None:
    stats = check(counts_of_tensors_passed_through, lambda: (T(2), Counter()), breaks=None, fallbacks=None,
                  stable=False)
    assert stats.fallbacks == 0, stats


def test_counter_escaping_elements_iterator_is_rebuilt(compile_all) -> None:
    def make(x, words):
        c = Counter(words)
        return x + 1, c.elements()

    fast = sot.symbolic_translate(make)
    got, expected = fast(*_words()), make(*_words())
    assert list(got[1]) == list(expected[1])
    assert sot.stats().fallbacks == 0


def test_ordered_dict_and_defaultdict_still_merge_like_dicts(compile_all) -> None:
    """The operator hook only takes Counters: ``|`` of other dicts is the dict merge."""
    def merge(x, d):
        od = collections.OrderedDict(d)
        return x + 1, od | {"z": 1}, dict(d) | {"a": 0}

    check(merge, lambda: (T(2), {"a": 1, "b": 2}), breaks=0)


def test_counter_results_keep_gradients(compile_all) -> None:
    def weighted(x, words):
        c = Counter(words)
        return (x * c["b"] + x * c["missing"]).sum()

    x_eager, x_fast = T(3, stop_gradient=False), T(3, stop_gradient=False)
    weighted(x_eager, ["b", "b"]).backward()
    sot.symbolic_translate(weighted)(x_fast, ["b", "b"]).backward()
    assert paddle.allclose(x_eager.grad, x_fast.grad)
    assert sot.stats().graph_breaks == 0

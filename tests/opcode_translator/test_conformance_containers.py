"""Conformance: tuples, lists, dicts, sets, range/enumerate/zip, comprehensions and builtins over them.

Each row is run eagerly and translated (twice per input set) by `_conformance.check`; results, mutations of
the arguments and exceptions must equal eager, with no fallback and no graph break.
"""
from __future__ import annotations

import collections
import functools
import operator
import itertools

import paddle
import pytest

from _conformance import T, args, case, check, table_tests


def xs(n: int = 3):
    return lambda: ([T(2, 3, seed=i) for i in range(n)],)


# -- tuples ------------------------------------------------------------------------------------------------------
def tuple_ops(x, y):
    t = (x, y, 3)
    u = (*t, x * 2)
    return u[0] + u[3], len(u), (1, 3, 3).count(3), (1, 3).index(3), t[1:], (1, 2) < (1, 3), tuple([x, y])


def tuple_of_tensors_argument(pair):
    a, b = pair
    return paddle.add(*pair) * a - b, len(pair), pair[::-1]


def tuple_hash_and_compare(n):
    key = (n, "k")
    return key == (n, "k"), hash(key) == hash((n, "k")), key < (n, "z")


# -- lists -------------------------------------------------------------------------------------------------------
def list_methods(x, y):
    lst = [x]
    lst.append(y)
    lst.extend([x + y, x - y])
    lst.insert(0, y * 2)
    last = lst.pop()
    first = lst.pop(0)
    lst.reverse()
    n = [1, 3, 3].count(3)
    copy = lst.copy()
    copy.clear()
    return lst, last, first, n, copy, len(lst)


def list_of_python_values(n):
    lst = [3, 1, 2, n]
    lst.sort()
    lst.remove(1)
    idx = lst.index(3)
    lst2 = sorted(lst, reverse=True)
    return lst, idx, lst2, lst + [0], lst * 2, min(lst), max(lst), sum(lst), 2 in lst, lst[-1]


def list_argument_mutations(x, lst):
    lst.append(x * 2)
    lst[0] = lst[0] + 1
    lst.pop(1)
    return len(lst)


def list_of_tensors_stacked(tensors):
    s = paddle.stack(tensors)
    c = paddle.concat(tensors, axis=0)
    total = tensors[0]
    for t in tensors[1:]:
        total = total + t
    return s, c, total, paddle.add_n(tensors)


def list_equality_and_truth(x, lst):
    empty = []
    if lst:
        x = x + len(lst)
    if not empty:
        x = x * 2
    return x, lst == [1, 2], [1, [2]] == [1, [2]], bool(lst)


def nested_lists(x):
    grid = [[x, x + 1], [x + 2, x + 3]]
    grid[1][0] = grid[0][1] * 2
    flat = [v for row in grid for v in row]
    return grid, paddle.stack(flat).sum(0)


def list_constructor_from_iterables(x, n):
    return list(range(n)), list("ab"), list((x, x)), list({"k": 1}), list(x.shape), list(map(lambda v: v * 2, [1, 2]))


# -- dicts -------------------------------------------------------------------------------------------------------
def dict_methods(x, y):
    d = {"x": x}
    d["y"] = y
    d.update({"z": x + y}, w=1)
    d.setdefault("v", x * 3)
    got = d.get("missing", 7)
    popped = d.pop("w")
    keys = list(d.keys())
    vals = list(d.values())
    items = list(d.items())
    return d, got, popped, keys, vals[0] + vals[1], len(items)


def dict_argument_mutations(x, d):
    d["new"] = x * 2
    d["count"] += 1
    del d["gone"]
    d.pop("also", None)
    return sorted(d)


def dict_iteration_order(d):
    out = []
    for key in d:
        out.append(key)
    for key, value in d.items():
        out.append(value * 2 if isinstance(value, paddle.Tensor) else key)
    return out


def dict_comprehension_and_constructor(x, names):
    d = {name: x * i for i, name in enumerate(names)}
    e = dict(zip(names, range(len(names))))
    f = dict(a=1, b=x)
    g = dict([("k", x), ("v", 2)])
    return d, e, f, g


def dict_with_int_and_bool_keys(x):
    d = {0: x, 1: x + 1, True: x * 3, 2.5: 1}
    return d[0] + d[1], d[2.5], sorted(k for k in d if isinstance(k, int))


def dict_copy_is_independent(d, x):
    c = d.copy()
    c["a"] = x
    return c, d


def dict_copy_and_clear(x):
    d = {"a": x, "b": x * 2}
    d2 = dict(d)
    d.clear()
    return d, d2


# -- sets ------------------------------------------------------------------------------------------------------
def set_ops(x, n):
    s = {1, 2, n}
    s.add(5)
    s.discard(2)
    t = s | {7}
    u = s & {1, 5, 9}
    v = s - {1}
    return x * len(s), sorted(t), sorted(u), sorted(v), 5 in s, {1, 2} == {2, 1}


# -- range, enumerate, zip, reversed, map, filter ------------------------------------------------------------------
def range_forms(x, n):
    total = x
    for i in range(n):
        total = total + i
    for i in range(1, n, 2):
        total = total * 1.5 + i
    r = range(10)
    return total, list(r[2:5]), len(range(0, n, 3)), 3 in r, r[-1], list(reversed(range(n)))


def enumerate_and_zip(tensors, names):
    out = {}
    for i, (name, t) in enumerate(zip(names, tensors)):
        out[name] = t * i
    for i, t in enumerate(tensors, start=10):
        out[f"s{i}"] = t + i
    return out, list(zip(names, [1, 2, 3]))


def reversed_and_sorted(tensors, nums):
    acc = []
    for t in reversed(tensors):
        acc.append(t * 2)
    return acc, sorted(nums), list(reversed(nums)), sorted(nums, reverse=True)


def _double(v):
    return v * 2


def _is_odd(v):
    return v % 2 == 1


def map_and_filter(x, nums):
    doubled = list(map(_double, nums))
    odd = list(filter(_is_odd, nums))
    scaled = list(map(_double, [x, x + 1]))
    return doubled, odd, scaled, list(map(str, nums))


def any_all_min_max_sum(x, nums):
    return any(n > 3 for n in nums), all([n > 0 for n in nums]), min(nums), max(nums), \
        sum(nums, 10), x * sum(nums), sum([x, x * 2])


# -- comprehensions ----------------------------------------------------------------------------------------------
def comprehensions(x, n):
    a = [x * i for i in range(n)]
    b = {i: x + i for i in range(n) if i % 2 == 0}
    c = {i % 3 for i in range(n)}
    d = sum(x * i for i in range(n))
    e = [[i * j for j in range(2)] for i in range(n)]
    return a, b, sorted(c), d, e


def comprehension_over_tensor_list(tensors):
    return [t.mean() for t in tensors], paddle.stack([t * 2 for t in tensors if t.shape[0] > 1])


def comprehension_with_closure_and_condition(x, scale):
    values = [x * scale + i for i in range(3) if i != 1]
    return paddle.concat(values)


def generator_consumed_by_builtins(x, n):
    gen = (x * i for i in range(n))
    return list(gen), tuple(i * i for i in range(n)), max(i for i in range(n))


def user_generator_function(x):
    def gen(t, k):
        for i in range(k):
            yield t * i

    return list(gen(x, 3))


CASES = [
    case(tuple_ops, lambda: (T(3), T(3, seed=1))),
    case(tuple_of_tensors_argument, lambda: ((T(3), T(3, seed=1)),)),
    case(tuple_hash_and_compare, args(3), args(9)),
    case(list_methods, lambda: (T(3), T(3, seed=1))),
    case(list_of_python_values, args(7), args(-1)),
    case(list_argument_mutations, lambda: (T(3), [T(3, seed=1), 5, "z"])),
    case(list_of_tensors_stacked, xs(3), xs(4)),
    case(list_equality_and_truth, lambda: (T(3), [1, 2]), lambda: (T(3), [])),
    case(nested_lists, lambda: (T(3),)),
    case(list_constructor_from_iterables, lambda: (T(2, 3), 3), lambda: (T(2, 3), 5)),
    case(dict_methods, lambda: (T(3), T(3, seed=1))),
    case(dict_argument_mutations, lambda: (T(3), {"count": 1, "gone": 2, "also": 3, "keep": T(2)})),
    case(dict_iteration_order, lambda: ({"b": T(3), "a": 1, "c": T(2, seed=1)},)),
    case(dict_comprehension_and_constructor, lambda: (T(3), ["p", "q", "r"]), lambda: (T(3), ["p"])),
    case(dict_with_int_and_bool_keys, lambda: (T(3),)),
    case(dict_copy_is_independent, lambda: ({"a": 1, "b": T(2)}, T(2, seed=1))),
    case(dict_copy_and_clear, lambda: (T(3),)),
    case(set_ops, lambda: (T(3), 3), lambda: (T(3), 5)),
    case(range_forms, lambda: (T(3), 4), lambda: (T(3), 6)),
    case(enumerate_and_zip, lambda: ([T(2), T(2, seed=1), T(2, seed=2)], ["a", "b", "c"])),
    case(reversed_and_sorted, lambda: ([T(2), T(2, seed=1)], [3, 1, 2])),
    case(map_and_filter, lambda: (T(3), [1, 2, 3, 4])),
    case(any_all_min_max_sum, lambda: (T(3), [1, 5, 2]), lambda: (T(3), [4, 6])),
    case(comprehensions, lambda: (T(3), 4), lambda: (T(3), 2)),
    case(comprehension_over_tensor_list, xs(3)),
    case(comprehension_with_closure_and_condition, lambda: (T(3), 2.0)),
    case(generator_consumed_by_builtins, lambda: (T(3), 3)),
    case(user_generator_function, lambda: (T(3),)),
]


test_conformance, test_conformance_default_graph_size = table_tests(CASES)


# -- errors raised by container operations must be the eager ones ----------------------------------------------
def list_index_out_of_range(x, lst):
    return lst[5] + x


def dict_missing_key(x, d):
    return d["missing"] * x


def tuple_unpack_wrong_length(x):
    a, b = (x, x, x)
    return a + b


def pop_from_empty_list(x):
    return [].pop() + x


ERROR_CASES = [
    case(list_index_out_of_range, lambda: (T(3), [1, 2])),
    case(dict_missing_key, lambda: (T(3), {"a": 1})),
    case(tuple_unpack_wrong_length, lambda: (T(3),)),
    case(pop_from_empty_list, lambda: (T(3),)),
]


@pytest.mark.parametrize("c", ERROR_CASES, ids=[c.id for c in ERROR_CASES])
def test_errors_are_the_eager_ones(c, compile_all):
    check(c.fn, *c.makers, breaks=None, fallbacks=None, stable=False)


def test_container_argument_with_changed_length_and_contents(compile_all):
    """The same code object called with lists of different lengths and element kinds: guards must notice."""

    def fn(items):
        total = 0
        for item in items:
            total = total + item * 2
        return total

    check(fn, lambda: ([T(3), T(3, seed=1)],), lambda: ([T(3)] * 3,), lambda: ([1, 2],), lambda: ([T(3), 4],))


def test_dict_argument_with_changed_keys(compile_all):
    def fn(d):
        return {k: v + 1 for k, v in d.items()}

    check(fn, lambda: ({"a": T(3)},), lambda: ({"a": T(3), "b": T(3, seed=1)},), lambda: ({"b": T(3)},))


# -- reduced failures (known bugs: see tests/known_bugs.txt) ---------------------------------------------------
def test_key_in_a_dict_holding_a_computed_tensor(compile_all):
    """Fixed (kept as a regression test); was: Unexpected fallback: ``"x" in d`` when ``d`` holds a tensor computed in the frame ("the data of a computed
    tensor is not known during simulation"); membership only needs the keys."""

    def fn(x):
        d = {"x": x, "y": x + 1}
        return "x" in d, "q" not in d

    check(fn, lambda: (T(3),))


def test_tuple_concatenation_with_a_computed_tensor(compile_all):
    """Fixed (kept as a regression test); was: Unexpected fallback: ``t + (x * 2,)`` ("the data of a computed tensor
    is not known during simulation"); ``(*t, x * 2)`` works."""

    def fn(x, y):
        t = (x, y)
        u = t + (x * 2,)
        return u[0] + u[2], len(u)

    check(fn, lambda: (T(3), T(3, seed=1)))


def test_tuple_as_a_dict_key(compile_all):
    """Fixed (kept as a regression test); was: Unexpected fallback: a tuple of constants as a dict key ("dict key TupleVariable(...) is not a Python
    constant", "dict lookup with TupleVariable is not supported yet")."""

    def fn(x, n):
        table = {(n, "k"): x * 2, (0, "k"): x}
        return table[(n, "k")] + table[(0, "k")]

    check(fn, lambda: (T(3), 3), lambda: (T(3), 4))


def test_tuple_keys_of_a_dict_argument_read_back(compile_all):
    """A dict from outside with (nested) tuple keys: lookup, membership, keys unpacked, popitem, get, pop and the
    mutated dict written back."""

    def fn(x, d):
        first, (second, third) = list(d)[0]
        k, v = d.popitem()
        d[(5, ("z",))] = x * 3
        found = (1, ("a", 2)) in d, (9,) in d, (5, ("z",)) not in d
        return d[(1, ("a", 2))] + first, second, third, k, v, d.get((9,)), d.pop((5, ("z",))), found

    check(fn, lambda: (T(3), {(1, ("a", 2)): T(3, seed=1), (7,): 4}))


_Point = collections.namedtuple("_Point", ["a", "b"])


def test_namedtuple_created_and_read(compile_all):
    """Fixed (kept as a regression test); was: Unexpected breaks and fallback: creating a namedtuple instance breaks
    ("creating an instance of _Point runs natively", "call of tuple.__new__ runs natively"), then reading ``p.a``
    falls back ("attribute _Point.a is a _tuplegetter descriptor: not simulated yet")."""

    def fn(x):
        p = _Point(x, x * 2)
        return p.a + p.b, p[1]

    check(fn, lambda: (T(3),))


def test_list_sort_and_sorted_with_a_key_lambda(compile_all):
    """Fixed (kept as a regression test); was: Unexpected fallback: ``items.sort(key=...)`` ("list.sort() with
    arguments is not supported yet") and ``sorted(nums, key=lambda ...)`` ("the value of
    NestedFunctionVariable(<lambda>) is not known")."""

    def fn(x, items):
        items.sort(key=lambda p: p[1])
        return x * items[0][0], sorted([3, 1, 2], key=lambda v: -v)

    check(fn, lambda: (T(3), [(1, "b"), (2, "a"), (0, "c")]))


def test_lambda_passed_to_map_filter_and_max(compile_all):
    """Fixed (kept as a regression test); was: Unexpected fallback: a lambda made in the frame passed to a
    builtin (map, filter, max(key=)): "the value of NestedFunctionVariable(<lambda>) is not known during
    simulation" (filter asked the function's value to tell ``filter(None, ...)`` apart)."""

    def fn(x, nums):
        doubled = list(map(lambda v: v * 2, nums))
        odd = list(filter(lambda v: v % 2, nums))
        scaled = list(map(lambda t: t * 3, [x, x + 1]))
        return doubled, odd, scaled, max(nums, key=lambda v: -v)

    check(fn, lambda: (T(3), [1, 2, 3, 4]))


def test_filter_with_none_and_with_a_closure_over_a_tensor(compile_all):
    """``filter(None, ...)`` keeps the true items (the None may come from an argument); a nested function
    reading a tensor of the frame decides per item."""

    def fn(x, nums, predicate):
        def positive(v):
            return bool(v > 0) and x.shape[0] == 3

        return list(filter(predicate, nums)), list(filter(positive, nums)), x + 1

    check(fn, lambda: (T(3), [0, 1, -2, 3, 0], None))


def test_functools_reduce_with_a_lambda(compile_all):
    """Fixed (kept as a regression test); was: Unexpected break and fallback: ``functools.reduce`` is not simulated
    ("call of reduce runs natively"), and at that break the lambda made in the frame cannot be handed over
    ("returning the function <lambda> created inside the translated frame is not supported yet": the whole frame
    falls back)."""

    def fn(tensors):
        return functools.reduce(lambda a, b: a + b, tensors), functools.reduce(operator.mul, [1, 2, 3], 1)

    check(fn, lambda: ([T(3), T(3, seed=1), T(3, seed=2)],))


def test_comprehension_in_a_frame_that_falls_back(compile_all):
    """Fixed (kept as a regression test); was an unexpected second fallback: when a frame falls back, its list
    comprehension (a separate code object on 3.11) was translated alone and fell back too ("stepping ObjectVariable(list_iterator .0) is not supported
    (only iterators made during simulation)")."""
    from sot import psdb

    def fn(tensors):
        psdb.fallback()
        return [t * 2 for t in tensors]

    check(fn, lambda: ([T(3), T(3, seed=1)],), fallbacks=1)


def test_dict_fromkeys_and_frozenset_do_not_break(compile_all):
    """Fixed (kept as a regression test); was: Unexpected graph breaks: ``dict.fromkeys(names, 0)`` ("C code with unknown effects") and ``frozenset(...)``
    ("creating an instance of frozenset runs natively"), both pure."""

    def fn(x, names):
        d = dict.fromkeys(names, 0)
        f = frozenset(names)
        return x * len(d), "a" in f

    check(fn, lambda: (T(3), ["a", "b"]))


def test_dict_fromkeys_shares_one_value_object(compile_all):
    """``dict.fromkeys`` maps every key to the same object: mutating it through one key shows through all; the
    default value is None; tuple keys work too."""

    def fn(x, names):
        shared = dict.fromkeys(names, [])
        shared[names[0]].append(x * 2)
        plain = dict.fromkeys("ab")
        pairs = dict.fromkeys([(1, "a"), (2, "b")], x)
        return shared, plain, pairs[(2, "b")] + 1, frozenset(), frozenset(names) | {"z"}

    check(fn, lambda: (T(3), ["a", "b", "c"]))


def test_ordered_dict_and_defaultdict(compile_all):
    """Fixed (kept as a regression test); was: Unexpected break and fallback: ``collections.OrderedDict()`` is
    created natively (break) and then "item assignment on ObjectVariable(OrderedDict) is not supported yet"
    (fallback); defaultdict likewise."""

    def fn(x):
        od = collections.OrderedDict()
        od["b"] = x
        od["a"] = x + 1
        dd = collections.defaultdict(list)
        dd["k"].append(x * 2)
        return list(od.keys()), od["a"], dd["k"][0]

    check(fn, lambda: (T(3),))


def test_dict_popitem(compile_all):
    """Fixed (kept as a regression test); was: Unexpected fallback: ``d.popitem()`` ("dict.popitem() is not
    supported yet")."""

    def fn(x):
        d = {"a": x, "b": x * 2}
        k, v = d.popitem()
        return k, v, d

    check(fn, lambda: (T(3),))


def test_dict_popitem_of_an_empty_dict_raises_the_eager_error(compile_all):
    """Popping until empty raises the eager KeyError (same message) on the last call."""

    def fn(x, d):
        d.popitem()
        return x + 1, d.popitem()

    # (a frame whose simulation raises runs eagerly to raise the real error: one fallback for the second inputs)
    check(fn, lambda: (T(3), {"a": 1, "b": 2}), lambda: (T(3), {"a": 1}), fallbacks=None)


def test_itertools_product_and_chain(compile_all):
    """Fixed (kept as a regression test); was: Unexpected break and fallback: ``itertools.product`` is created
    natively, then "iterating over ObjectVariable(product) is not supported yet"."""

    def fn(x):
        pairs = list(itertools.product([1, 2], ["a"]))
        chained = list(itertools.chain([x], [x + 1]))
        return pairs, paddle.stack(chained)

    check(fn, lambda: (T(3),))


def test_str_join_of_a_generator_expression(compile_all):
    """Fixed (kept as a regression test); was: Unexpected fallback: ``"x".join(str(d) for d in x.shape)`` ("the
    value of IteratorVariable(generator
    <genexpr>) is not known during simulation"): a generator handed to a builtin should be consumed during
    simulation, as ``list(...)`` and ``sum(...)`` already are."""

    def fn(x):
        return "x".join(str(d) for d in x.shape), x * 2

    check(fn, lambda: (T(3, 4),))


def test_iterators_consumed_by_str_join_and_set_union(compile_all):
    """Generators, map and filter objects handed to ``str.join``/``bytes.join``/``set.union`` are consumed
    during simulation; a generator left half-consumed by ``next`` gives only its rest."""

    def fn(x, names):
        rest = (n.upper() for n in names)
        first = next(rest)
        joined = "-".join(rest)
        mapped = ",".join(map(str, x.shape))
        raw = b"".join(n.encode() for n in names)
        merged = {"z"}.union(n for n in names if n != "b")
        return first, joined, mapped, raw, sorted(merged), x * len(joined)

    check(fn, lambda: (T(3, 2), ["a", "b", "c"]))


def test_yield_from_in_a_user_generator(compile_all):
    """Fixed (kept as a regression test); was: Unexpected fallback: a generator using ``yield from`` ("opcode SEND
    is not supported yet")."""

    def fn(x):
        def gen():
            yield from [x, x + 1]
            yield x * 2

        return list(gen())

    check(fn, lambda: (T(3),))


def test_dict_views_are_live_views_of_their_own_type(compile_all):
    """``d.keys()``/``values()``/``items()`` were lists: returned, they had the wrong type, and iterated after
    the dict changed, they missed the change."""

    def fn(x, received):
        d = {"a": x, "b": 2}
        keys, values, items = d.keys(), d.values(), d.items()
        d["c"] = x * 2  # (a view sees it)
        od = collections.OrderedDict(z=x)
        # (views holding tensors: their type and content are compared, not the views, whose ``==`` would)
        return (keys, type(values), list(values), type(items), list(items), list(keys), len(values), "c" in keys,
                "q" in keys, keys == {"a", "b", "c"}, keys & {"a", "z"}, [k for k, _ in items], od.keys(),
                type(od.items()), received.keys(), type(received.values()))

    check(fn, lambda: (T(3), {"r": 1, "s": 2}))


def test_membership_in_views_holding_tensors_compares_as_eager(compile_all):
    """``t in d.values()`` / ``(k, t) in d.items()`` with tensors: the operator was recorded on the view as a
    tensor op, whose run crashed the process (a segmentation fault)."""

    def fn(x, d):
        d["c"] = x * 2
        computed = d["c"]
        return (x in d.values(), computed in d.values(), ("c", computed) in d.items(), ("z", x) in d.items(),
                ("b", 1) in d.items(), ("a",) in d.items(), ("a", x) in d.items())

    inputs = T(3)
    # (a scan compares the tensors it passes with ``==``, whose truth breaks the graph as ``bool`` does)
    check(fn, lambda: (inputs, {"a": inputs, "b": 1}), lambda: (T(3), {"a": T(3, seed=1), "b": 1}), breaks=None)


def test_subscripting_a_dict_view_is_the_eager_error(compile_all):
    def fn(x):
        return {"a": x}.keys()[0]

    check(fn, lambda: (T(3),), fallbacks=None)


def test_dict_methods_called_through_the_class(compile_all):
    """``dict.__getitem__(d, k)``, ``dict.keys(d)``... (as library code writes them to skip a subclass's own
    methods) broke the graph."""

    def fn(x, d):
        od = collections.OrderedDict(a=x)
        dict.__setitem__(d, "c", x * 2)
        return (dict.__getitem__(d, "a") + 1, dict.keys(d), dict.get(d, "b", 3), len(dict.items(d)),
                dict.__contains__(d, "a"), dict.__len__(d), collections.OrderedDict.__getitem__(od, "a"),
                list(dict.__iter__(d)), collections.OrderedDict.keys(od))

    check(fn, lambda: (T(3), {"a": T(3, seed=1)}))

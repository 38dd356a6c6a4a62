"""Python side effects of translated code (issue 4): replayed after the graph, in program order, exactly once.

Each test runs the function eagerly on one copy of the state and translated on another copy, then compares
the results AND the state (lists, dicts, objects, globals) structurally. The exact `sot.stats()` counters
show the effects were replayed after a compiled graph (``fallbacks == 0``) rather than by running the frame
eagerly. Unless a test says otherwise, ``min_graph_size=0`` (`compile_all`) so the graphs really compile.
"""
from __future__ import annotations

import types

import numpy as np
import paddle
import pytest

import sot
from sot import psdb

from conftest import assert_counts, assert_same


def _t(*shape: int, seed: int = 0) -> paddle.Tensor:
    rng = np.random.default_rng(seed + 7 * len(shape) + sum(shape))
    return paddle.to_tensor((np.abs(rng.standard_normal(shape)) + 0.1).astype("float32"))


def state_of(value):
    """A structural snapshot comparable with `assert_same`: user objects become ('obj', type, vars)."""
    if isinstance(value, (list, tuple)):
        return type(value)(state_of(v) for v in value)
    if isinstance(value, dict):  # key order matters (``d.pop(k); d[k] = v`` moves ``k`` to the end)
        return ("dict", [(k, state_of(v)) for k, v in value.items()])
    if isinstance(value, (types.SimpleNamespace, Obj)):
        return ("obj", type(value).__name__, {k: state_of(v) for k, v in sorted(vars(value).items())})
    return value


class Obj:
    def __init__(self, **attrs):
        self.__dict__.update(attrs)


def effect_parity(fn, make_args, calls: int = 2):
    """Run ``fn`` eagerly and translated, each call on new copies of the arguments (``make_args()``: same
    guards, so the later calls are cache hits); compare results and the states the calls left behind."""
    fast = sot.symbolic_translate(fn)
    outs = []
    for _ in range(calls):
        eager_args, fast_args = make_args(), make_args()
        expected = fn(*eager_args)
        out = fast(*fast_args)
        assert_same(state_of(out), state_of(expected))
        assert_same(state_of(list(fast_args)), state_of(list(eager_args)))
        outs.append((out, fast_args))
    return outs


# -- lists ----------------------------------------------------------------------------------------------------
X = _t(3)
Y = _t(3, seed=1)


def list_append(x, lst):
    lst.append(x + 1)
    return x * 2


def list_extend(x, lst):
    lst.extend([x + 1, 7, "s"])
    return x * 2


def list_insert(x, lst):
    lst.insert(1, x + 1)
    lst.insert(0, "head")
    return x * 2


def list_pop(x, lst):
    last = lst.pop()
    first = lst.pop(0)
    return last * 2 + first


def list_remove(x, lst):
    lst.remove(2)
    return x + len(lst)


def list_clear(x, lst):
    lst.clear()
    return x * 2


def list_setitem(x, lst):
    lst[0] = x + 1
    lst[-1] = "last"
    lst[1:2] = [x * 3, x * 4]
    return x * 2


def list_delitem(x, lst):
    del lst[0]
    del lst[1:]
    return x * 2


LIST_CASES = {
    list_append: lambda: (X, [Y, 1]),
    list_extend: lambda: (X, [Y, 1]),
    list_insert: lambda: (X, [Y, 1]),
    list_pop: lambda: (X, [Y, 1, X * 3]),
    list_remove: lambda: (X, [1, 2, 3, 2]),
    list_clear: lambda: (X, [Y, 1]),
    list_setitem: lambda: (X, [Y, 1, 2]),
    list_delitem: lambda: (X, [Y, 1, 2, 3]),
}


@pytest.mark.parametrize("fn", list(LIST_CASES), ids=lambda fn: fn.__name__)
def test_list_mutation_of_an_argument(compile_all, fn):
    # the very list objects passed in are compared with eager's after each call: mutated in place
    effect_parity(fn, LIST_CASES[fn])
    # one translation, one graph, effects replayed after it; the second call hits the cache
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)
    assert sot.stats().cache_hits >= 1


def list_grows_on_each_call(x, lst):
    lst.append(x * len(lst))
    return len(lst)


def test_list_mutation_repeated_on_each_call(compile_all):
    """The same list passed again: one more append per call (each new length is a new guard)."""
    fast = sot.symbolic_translate(list_grows_on_each_call)
    eager_list, fast_list = [], []
    for expected_len in (1, 2, 3):
        assert fast(X, fast_list) == list_grows_on_each_call(X, eager_list) == expected_len
        assert_same(fast_list, eager_list)
    # the length of the list is guarded: 3 different lengths, 3 translations (1 op each: x * len)
    assert_counts(translate_count=3, graph_breaks=0, fallbacks=0, compiled_graphs=3)


# -- dicts ----------------------------------------------------------------------------------------------------
def dict_setitem(x, d):
    d["new"] = x + 1
    d["a"] = d["a"] * 2
    return x * 2


def dict_pop(x, d):
    a = d.pop("a")
    missing = d.pop("missing", 5)
    return a + missing


def dict_update(x, d):
    d.update({"b": x * 3, "a": 0})
    return x * 2


def dict_update_kwargs(x, d):
    d.update(c=x + 1)
    return x * 2


def dict_setdefault(x, d):
    existing = d.setdefault("a", x)
    created = d.setdefault("z", x * 5)
    return existing + created


def dict_delitem(x, d):
    del d["a"]
    return x * 2


DICT_CASES = [dict_setitem, dict_pop, dict_update, dict_update_kwargs, dict_setdefault, dict_delitem]


@pytest.mark.parametrize("fn", DICT_CASES, ids=lambda fn: fn.__name__)
def test_dict_mutation_of_an_argument(compile_all, fn):
    effect_parity(fn, lambda: (X, {"a": Y, "k": 1}))
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


# -- attributes ----------------------------------------------------------------------------------------------
def attr_set_and_del(x, obj):
    obj.value = x + 1
    obj.count = obj.count + 1
    del obj.tmp
    return x * 2


def nested_attr_set(x, a):
    a.b.c = x * 2
    a.b.d = "set"
    del a.b.e
    return x + 1


def test_attribute_set_and_del_on_user_object(compile_all):
    effect_parity(attr_set_and_del, lambda: (X, Obj(count=0, tmp="gone")))
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


def test_attribute_set_on_nested_object(compile_all):
    effect_parity(nested_attr_set, lambda: (X, Obj(b=Obj(c=None, e=1))))
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


def counter_bump(x, obj):
    obj.count = obj.count + 1
    obj.total = obj.total + x
    return x * obj.count


def test_second_call_repeats_effects_exactly_once_more(compile_all):
    fast = sot.symbolic_translate(counter_bump)
    eager_obj, obj = Obj(count=0, total=X * 0), Obj(count=0, total=X * 0)
    for expected_count in (1, 2, 3):
        assert_same(fast(X, obj), counter_bump(X, eager_obj))
        assert obj.count == expected_count
        assert_same(state_of(obj), state_of(eager_obj))
    # `obj.count` is a Python int read by the frame: each new value is a new guard, so a new translation
    # (and a new graph: `x * count` has the count as a constant)
    assert_counts(translate_count=3, graph_breaks=0, fallbacks=0, compiled_graphs=3)


def tensor_attr_bump(x, obj):
    obj.total = obj.total + x
    obj.history.append(x * 2)
    return obj.total * 1


def test_cache_hit_applies_effects_once_more(compile_all):
    """Effects whose guards do not change: the second and third calls are cache hits, effects once each."""
    fast = sot.symbolic_translate(tensor_attr_bump)
    eager_obj = Obj(total=X * 0, history=[])
    obj = Obj(total=X * 0, history=[])
    for n in (1, 2):
        obj.history, eager_obj.history = [], []  # same length each call: the guard on the list holds
        assert_same(fast(X, obj), tensor_attr_bump(X, eager_obj))
        assert_same(state_of(obj), state_of(eager_obj))
        np.testing.assert_allclose(obj.total.numpy(), (X * n).numpy(), rtol=1e-6)
        assert len(obj.history) == 1
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)
    assert sot.stats().cache_hits >= 1


# -- globals --------------------------------------------------------------------------------------------------
G_VALUE = None
G_COUNT = 0


def global_set(x):
    global G_VALUE, G_COUNT
    G_VALUE = x + 1
    G_COUNT = G_COUNT + 1
    return G_VALUE * 2  # read back within the same frame


def global_del(x):
    global G_TEMP
    del G_TEMP
    return x * 2


def global_del_then_read(x):
    global G_TEMP
    del G_TEMP
    return G_TEMP  # NameError, like eager


@pytest.fixture
def restore_globals():
    saved = dict(globals())
    yield
    for name in [n for n in globals() if n not in saved]:
        del globals()[name]
    globals().update(saved)


def test_global_set_and_read_back(compile_all, restore_globals):
    global G_VALUE, G_COUNT
    G_COUNT = 0
    expected = global_set(X)
    eager_value, eager_count = G_VALUE, G_COUNT
    G_VALUE, G_COUNT = None, 0
    fast = sot.symbolic_translate(global_set)
    assert_same(fast(X), expected)
    assert_same(G_VALUE, eager_value)
    assert G_COUNT == eager_count == 1
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)
    fast(X)  # G_COUNT is now 1: a guard on it fails, one more translation; the effects once more
    assert G_COUNT == 2
    assert_same(G_VALUE, eager_value)


def test_global_del(compile_all, restore_globals):
    globals()["G_TEMP"] = 5
    expected = global_del(X)
    assert "G_TEMP" not in globals()
    globals()["G_TEMP"] = 5
    fast = sot.symbolic_translate(global_del)
    assert_same(fast(X), expected)
    assert "G_TEMP" not in globals()
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


def test_global_del_then_read_raises_name_error(compile_all, restore_globals):
    globals()["G_TEMP"] = 5
    with pytest.raises(NameError):
        sot.symbolic_translate(global_del_then_read)(X)
    assert "G_TEMP" not in globals()  # deleted exactly once (the frame ran eagerly and raised)


# -- aliasing and reading back ------------------------------------------------------------------------------
def mutate_through_two_names(x, a, b):
    a.append(x + 1)
    b.append(x * 2)
    return len(a), len(b), a[-1] + b[0]


def test_same_list_aliased_through_two_arguments(compile_all):
    def make():
        shared = [X]
        return X, shared, shared

    outs = effect_parity(mutate_through_two_names, make)
    for _, args in outs:
        assert args[1] is args[2] and len(args[1]) == 3
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


def mutate_through_local_alias(x, lst):
    other = lst
    lst.append(x + 1)
    other.append(len(lst))
    return other[-2] * 2, len(other)


def test_same_list_aliased_through_a_local(compile_all):
    effect_parity(mutate_through_local_alias, lambda: (X, [Y]))
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


def alias_identity_plain(x, lst):
    other = lst
    local = [1]
    local_alias = local
    other.append(2)
    return other is lst, local is local_alias, local is [1], x + 1


def test_identity_of_aliased_lists(compile_all):
    # `is` is identity, whatever the content: one list reached through two names is the same object.
    outs = effect_parity(alias_identity_plain, lambda: (X, [0]))
    for out, _ in outs:
        assert out[:3] == (True, True, False)
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


def attr_read_back(x, obj):
    obj.x = x * 2
    return obj.x + 1


def read_before_store(x, obj):
    old = obj.x
    obj.x = 5
    return old, obj.x


def list_read_before_store(x, lst):
    first = lst[0]
    lst[0] = x * 2
    return first, lst[0] + 1


def dict_read_before_store(x, d):
    old = d["a"]
    d["a"] = x * 3
    return old, d["a"]


def test_read_back_after_store_in_the_same_frame(compile_all):
    effect_parity(attr_read_back, lambda: (X, Obj(x=None)))
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


@pytest.mark.parametrize("fn, make", [
    (read_before_store, lambda: (X, Obj(x=Y))),
    (list_read_before_store, lambda: (X, [Y, 1])),
    (dict_read_before_store, lambda: (X, {"a": Y})),
], ids=["attr", "list", "dict"])
def test_value_read_before_a_store_is_the_old_one(compile_all, fn, make):
    outs = effect_parity(fn, make)
    for out, args in outs:
        assert out[0] is Y  # the input tensor itself, not the value stored afterwards
    stats = sot.stats()
    assert stats.translate_count == 1 and stats.fallbacks == 0 and stats.graph_breaks == 0, stats


# -- effects meeting graph breaks, fallbacks and inlining ---------------------------------------------------
def effects_then_print(x, lst, obj):
    lst.append(x + 1)
    obj.n = obj.n + 1
    print("items:", len(lst), "n:", obj.n)  # native: must observe both effects, exactly once
    lst.append(obj.n)
    return lst[-2] * 2


@pytest.mark.parametrize("min_graph_size, graphs", [(0, 2), (10, 0)])
def test_effects_visible_to_the_native_instruction_of_a_break(capsys, min_graph_size, graphs):
    # min_graph_size=10 (default): the 1-op prefix is replayed eagerly, the effects the same way
    with sot.config.patch(min_graph_size=min_graph_size):
        fast = sot.symbolic_translate(effects_then_print)
        for _ in range(2):
            eager_lst, eager_obj = [X], Obj(n=0)
            expected = effects_then_print(X, eager_lst, eager_obj)
            eager_out = capsys.readouterr().out
            assert eager_out == "items: 2 n: 1\n"
            lst, obj = [X], Obj(n=0)
            assert_same(fast(X, lst, obj), expected)
            assert capsys.readouterr().out == eager_out
            assert_same(state_of([lst, obj]), state_of([eager_lst, eager_obj]))
    assert_counts(translate_count=2, graph_breaks=1, fallbacks=0, compiled_graphs=graphs)


def read_before_store_then_break(x, obj, lst):
    old = obj.x
    first = lst[0]
    obj.x = x * 2
    lst[0] = "replaced"
    psdb.breakgraph()
    return old, first, obj.x + 1, lst[0]


def test_values_read_before_stores_survive_a_break(compile_all):
    outs = effect_parity(read_before_store_then_break, lambda: (X, Obj(x=Y), [Y]))
    for out, _ in outs:
        assert out[0] is Y and out[1] is Y
    assert_counts(translate_count=2, graph_breaks=1, fallbacks=0, compiled_graphs=2)


def new_objects_stored_then_break(x, obj):
    new = [x]
    y = x * 2
    obj.items = new
    obj.t = y
    psdb.breakgraph()
    new.append(y + 1)  # the list stored in obj.items before the break, grown after it
    return new, y


def test_objects_stored_before_a_break_are_the_ones_the_resume_function_sees(compile_all):
    outs = effect_parity(new_objects_stored_then_break, lambda: (X, Obj()))
    for (new, y), (_, obj) in outs:
        assert obj.items is new and len(new) == 2
        assert obj.t is y
    assert_counts(translate_count=2, graph_breaks=1, fallbacks=0, compiled_graphs=2)


def new_list_stored_and_returned(x, obj):
    new = [x + 1]
    obj.a = new
    return new


def test_new_list_stored_and_returned_is_one_object(compile_all):
    outs = effect_parity(new_list_stored_and_returned, lambda: (X, Obj()))
    for out, (_, obj) in outs:
        assert out is obj.a
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


def effects_around_a_tensor_if(x, lst, obj):
    obj.seen = True
    lst.append(x * 2)
    if lst[-1].sum() > 0:
        lst.append("pos")
    else:
        lst.append("neg")
    obj.after = len(lst)
    return lst[-2] + 1


def test_effects_before_and_after_a_tensor_if(compile_all):
    effect_parity(effects_around_a_tensor_if, lambda: (X, [], Obj()))
    assert_counts(translate_count=2, graph_breaks=1, fallbacks=0, compiled_graphs=2)


def effects_then_fallback(x, lst, obj):
    lst.append(x + 1)
    obj.n = obj.n + 1
    psdb.fallback()
    lst.append(x * 2)
    return x * 3


def test_effects_in_a_frame_that_falls_back_apply_once(compile_all):
    effect_parity(effects_then_fallback, lambda: (X, [], Obj(n=0)))
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=1, compiled_graphs=0)


def effects_then_loop_break(x, lst):
    lst.append(x + 1)
    for i in range(2):
        lst.append(i)
        psdb.breakgraph()
    return len(lst)


def test_effects_before_a_loop_whose_body_breaks(compile_all):
    # The effects before the loop are replayed once before the native loop; the body's own effects happen in
    # the body function (each iteration exactly once).
    effect_parity(effects_then_loop_break, lambda: (X, []))
    stats = sot.stats()
    assert stats.fallbacks == 0 and stats.graph_breaks >= 2, stats


def _record(lst, obj, t):
    lst.append(t)
    obj.last = t
    return t * 2


def calls_recording_helper(x, lst, obj):
    y = _record(lst, obj, x + 1)
    return y + len(lst)


def test_effects_inside_an_inlined_function(compile_all):
    effect_parity(calls_recording_helper, lambda: (X, [], Obj()))
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


def _record_and_break(lst, t):
    lst.append(t)
    psdb.breakgraph()
    lst.append(t * 2)
    return t + 1


def calls_breaking_recorder(x, lst):
    lst.append("before")
    y = _record_and_break(lst, x * 3)
    lst.append("after")
    return y


def test_inlined_call_rolled_back_applies_effects_once(compile_all):
    """The inlined call breaks: its simulated append is undone, the call runs natively (translated by the
    hook) and appends for real; the caller's own effects before the call are applied once."""
    outs = effect_parity(calls_breaking_recorder, lambda: (X, []))
    for _, args in outs:
        assert len(args[1]) == 4
    # caller (break at the call; prefix: x * 3), callee (break at breakgraph; no op before it), callee
    # resume (t * 2, t + 1), caller resume (no op)
    assert_counts(translate_count=4, graph_breaks=2, fallbacks=0, compiled_graphs=2)


def make_counter():
    count = 0

    def bump(x):
        nonlocal count
        count += 1
        return x * count

    def read():
        return count

    return bump, read


def test_closure_cell_store(compile_all):
    """Issue 4 lists closure cells among the replayed side effects: no fallback for `nonlocal` stores."""
    eager_bump, eager_read = make_counter()
    bump, read = make_counter()
    fast = sot.symbolic_translate(bump)
    for expected in (1, 2):
        assert_same(fast(X), eager_bump(X))
        assert read() == eager_read() == expected
    assert sot.stats().fallbacks == 0, sot.stats()


def store_then_mutate_old_value(x, obj):
    old = obj.items  # reached through obj.items, which is replaced below
    obj.items = []
    old.append(x + 1)
    obj.items.append("new")
    return len(old)


def test_mutating_a_container_whose_path_was_reassigned(compile_all):
    outs = effect_parity(store_then_mutate_old_value, lambda: (X, Obj(items=[Y])))
    for _, (_, obj) in outs:
        assert obj.items == ["new"]
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


def mutate_through_attribute_alias(x, lst, holder):
    lst.append(x + 1)
    holder.lst.append(x * 2)  # the same list, reached through another path
    return len(holder.lst), len(lst)


def test_same_list_reached_through_an_attribute(compile_all):
    def make():
        shared = [Y]
        return X, shared, Obj(lst=shared)

    outs = effect_parity(mutate_through_attribute_alias, make)
    for _, (_, lst, holder) in outs:
        assert holder.lst is lst and len(lst) == 3
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


def attr_alias_read(x, obj, holder):
    obj.n = x * 2
    return holder.obj.n + 1


def test_attribute_store_read_back_through_another_path(compile_all):
    def make():
        obj = Obj(n=None)
        return X, obj, Obj(obj=obj)

    effect_parity(attr_alias_read, make)
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


def new_list_stored_twice(x, obj):
    new = []
    obj.a = new
    obj.b = new
    new.append(x + 1)
    return x * 2


def test_new_list_stored_in_two_attributes_stays_one_object(compile_all):
    outs = effect_parity(new_list_stored_twice, lambda: (X, Obj()))
    for _, (_, obj) in outs:
        assert obj.a is obj.b and len(obj.a) == 1
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


def alias_identity_in_frame(x, lst):
    other = lst
    other.append(x + 1)
    return other is lst, len(lst)


def test_identity_of_aliased_list_holding_a_computed_tensor(compile_all):
    # `is` between two names of one list: decided by identity, never by the (unknown) tensor data.
    effect_parity(alias_identity_in_frame, lambda: (X, []))
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


def returns_mutated_argument(x, lst, obj):
    lst.append(x + 1)
    obj.t = x * 2
    return lst, obj.t, obj


def test_mutated_argument_returned_keeps_identity(compile_all):
    outs = effect_parity(returns_mutated_argument, lambda: (X, [Y], Obj()))
    for out, (_, lst, obj) in outs:
        assert out[0] is lst and out[2] is obj and out[1] is obj.t
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


def dict_reinsert(x, d):
    a = d.pop("a")
    d["a"] = a * 2
    d["first"] = x
    return list(d)


def test_dict_key_order_after_mutations(compile_all):
    outs = effect_parity(dict_reinsert, lambda: (X, {"a": Y, "first": 1, "b": 2}))
    for out, (_, d) in outs:
        assert list(d) == ["first", "b", "a"] == out
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


G_LIST: list = []


def global_list_append(x):
    G_LIST.append(x + 1)
    return len(G_LIST)


def test_global_list_mutation(compile_all, restore_globals):
    global G_LIST
    G_LIST = []
    assert global_list_append(X) == 1
    eager = G_LIST
    G_LIST = []
    fast = sot.symbolic_translate(global_list_append)
    assert fast(X) == 1
    assert_same(G_LIST, eager)
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


def global_store_then_break(x):
    global G_VALUE
    G_VALUE = x + 1
    psdb.breakgraph()
    return G_VALUE * 2


def test_global_store_visible_after_a_break(compile_all, restore_globals):
    global G_VALUE
    expected = global_store_then_break(X)
    eager_value = G_VALUE
    G_VALUE = None
    fast = sot.symbolic_translate(global_store_then_break)
    for _ in range(2):
        assert_same(fast(X), expected)
        assert_same(G_VALUE, eager_value)
    assert_counts(translate_count=2, graph_breaks=1, fallbacks=0, compiled_graphs=2)


def effects_then_user_error(x, lst, obj):
    lst.append(x + 1)
    obj.n = obj.n + 1
    return lst[5]  # IndexError, after the effects


def test_effects_before_a_user_error_apply_once(compile_all):
    fast = sot.symbolic_translate(effects_then_user_error)
    eager_lst, eager_obj = [], Obj(n=0)
    with pytest.raises(IndexError):
        effects_then_user_error(X, eager_lst, eager_obj)
    for _ in range(2):
        lst, obj = [], Obj(n=0)
        with pytest.raises(IndexError):
            fast(X, lst, obj)
        assert_same(state_of([lst, obj]), state_of([eager_lst, eager_obj]))
    stats = sot.stats()
    assert stats.fallbacks == 1 and stats.translate_count == 1 and stats.compiled_graphs == 0, stats


def del_then_read(x, obj):
    del obj.a
    return obj.a


def test_attribute_read_after_del_raises_like_eager(compile_all):
    with pytest.raises(AttributeError):
        del_then_read(X, Obj(a=1))
    obj = Obj(a=1)
    with pytest.raises(AttributeError):
        sot.symbolic_translate(del_then_read)(X, obj)
    assert not hasattr(obj, "a")


def _helper_falls_back(lst, t):
    lst.append(t)
    psdb.fallback()
    return t * 2


def calls_falling_back_helper(x, lst):
    lst.append("before")
    y = _helper_falls_back(lst, x + 1)
    lst.append("after")
    return y


def test_effects_with_an_inlined_function_that_falls_back(compile_all):
    outs = effect_parity(calls_falling_back_helper, lambda: (X, []))
    for _, (_, lst) in outs:
        assert len(lst) == 3
    assert sot.stats().fallbacks >= 1, sot.stats()


def test_default_min_graph_size_effects_without_compiled_graph():
    """Default ``min_graph_size``: nothing compiled, the frame runs natively; effects still exactly once."""
    effect_parity(attr_set_and_del, lambda: (X, Obj(count=0, tmp="gone")))
    effect_parity(list_insert, lambda: (X, [Y, 1]))
    assert_counts(translate_count=2, graph_breaks=0, fallbacks=0, compiled_graphs=0)

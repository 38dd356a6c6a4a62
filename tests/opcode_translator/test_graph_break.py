"""Graph breaks (issue 4): compile the prefix, run the breaking instruction natively, resume in a new function.

Every test compares the translated function with eager Paddle (results, printed output, gradients, raised
errors) and checks the exact `sot.stats()` counters. Most run with ``min_graph_size=0`` (the `compile_all`
fixture) so that every non-empty subgraph really is a compiled program; a few keep the default
``min_graph_size`` so that small prefixes are replayed eagerly instead.

How the counters add up, for a frame ``f`` with one break and ``min_graph_size=0``:
  * translating ``f`` counts one translation and one graph break, and compiles the prefix (if it has ops);
  * the resume function of the path taken is a new code object, translated by the hook on its first call:
    one more translation, and one more compiled graph if it has ops;
  * a path never taken is never translated.
"""
from __future__ import annotations

import contextlib

import math
import textwrap

import numpy as np
import paddle
import pytest

import sot
from sot import psdb

from conftest import COUNTERS, assert_counts, assert_same, counts, line_of


def _t(*shape: int, seed: int = 0, sign: float = 1.0, stop_gradient: bool = True) -> paddle.Tensor:
    rng = np.random.default_rng(seed + 31 * len(shape) + sum(shape))
    value = paddle.to_tensor((sign * np.abs(rng.standard_normal(shape)) + 0.1 * sign).astype("float32"))
    value.stop_gradient = stop_gradient
    return value


def pos(*shape: int, seed: int = 0) -> paddle.Tensor:
    """A tensor whose every element (so also its sum and mean) is > 0."""
    return _t(*shape, seed=seed, sign=1.0)


def neg(*shape: int, seed: int = 0) -> paddle.Tensor:
    """A tensor whose every element is < 0."""
    return _t(*shape, seed=seed, sign=-1.0)


def parity(fn, *args, calls: int = 2):
    """Eager result vs translated result, ``calls`` times (first call translates, then cache hits)."""
    expected = fn(*args)
    fast = sot.symbolic_translate(fn)
    out = None
    for _ in range(calls):
        out = fast(*args)
        assert_same(out, expected)
    return out


# -- tensor-valued control flow ---------------------------------------------------------------------------
def tensor_if(x):
    y = x * 2 + 1
    if y.mean() > 0:
        z = y * 3
    else:
        z = y - 4
    return z + x


def test_tensor_if_one_break_two_graphs_per_path(compile_all):
    fast = sot.symbolic_translate(tensor_if)
    p, n = pos(3, 4), neg(3, 4)
    for _ in range(2):
        assert_same(fast(p), tensor_if(p))
    # f: 1 break + compiled prefix; the true branch's resume function: 1 compiled graph. Nothing else.
    assert_counts(translate_count=2, graph_breaks=1, fallbacks=0, compiled_graphs=2)

    # The other branch: the prefix entry is reused; only the false branch's resume function is translated.
    for _ in range(2):
        assert_same(fast(n), tensor_if(n))
    assert_counts(translate_count=3, graph_breaks=1, fallbacks=0, compiled_graphs=3)

    # Both branches now cached: nothing new whatever the input.
    for arg in (p, n, pos(3, 4, seed=7), neg(3, 4, seed=7)):
        assert_same(fast(arg), tensor_if(arg))
    assert_counts(translate_count=3, graph_breaks=1, fallbacks=0, compiled_graphs=3)


def test_tensor_if_retranslation_breaks_once_more(compile_all):
    """One break per translation of the frame: a guard miss on ``f`` re-translates it (one more break)."""
    with sot.config.patch(dynamic_shape=False):
        fast = sot.symbolic_translate(tensor_if)
        assert_same(fast(pos(3, 4)), tensor_if(pos(3, 4)))
        assert_counts(translate_count=2, graph_breaks=1, fallbacks=0, compiled_graphs=2)
        assert_same(fast(pos(5, 2)), tensor_if(pos(5, 2)))  # new shape: f and its resume function again
        assert_counts(translate_count=4, graph_breaks=2, fallbacks=0, compiled_graphs=4)


def test_tensor_if_default_min_graph_size_replays_prefix_eagerly():
    """Default ``min_graph_size`` (10): the 4-op prefix and the 2-op branches are too small to compile.

    Every piece runs eagerly, so the entry runs the original code (native.py). The break is at the jump on
    every version (3.13's bool conversion before it included): two resume functions, and the branch first
    taken later still calls its resume function, translated then."""
    fast = sot.symbolic_translate(tensor_if)
    p, n = pos(3, 4), neg(3, 4)
    for arg in (p, p, n, n):
        assert_same(fast(arg), tensor_if(arg))
    assert any(path.from_jump for path in sot.eval_frame_ext.cache_entries(
        tensor_if.__code__)[0][0].native_plan.paths)
    assert_counts(translate_count=3, graph_breaks=1, fallbacks=0, compiled_graphs=0)
    assert [code for _, code in sot.eval_frame_ext.cache_entries(tensor_if.__code__)] == [tensor_if.__code__]


def big_prefix_if(x):
    y = x
    for _ in range(6):  # unrolled: 12 ops before the break
        y = y * 1.5 + 0.25
    if y.sum() > 0:
        return y + 1
    return y - 1


def test_default_min_graph_size_compiles_only_big_enough_graphs():
    fast = sot.symbolic_translate(big_prefix_if)
    p = pos(2, 3)
    for _ in range(2):
        assert_same(fast(p), big_prefix_if(p))
    # The 14-op prefix (12 + sum + comparison) is compiled; the 1-op resume function runs natively.
    assert_counts(translate_count=2, graph_breaks=1, fallbacks=0, compiled_graphs=1)


def tensor_while(x):
    y = x * 1.0
    while y.sum() < 10:
        y = y + 1
    return y * 2


def test_tensor_while_condition(compile_all):
    """Every evaluation of the condition is a break, but no frame may fall back."""
    x = paddle.ones([2])  # sum 2 -> 4 -> 6 -> 8 -> 10: four iterations
    parity(tensor_while, x, calls=1)
    first = sot.stats()
    assert first.fallbacks == 0, first
    assert first.graph_breaks >= 1, first
    parity(tensor_while, x, calls=1)  # same input again: everything comes from the cache
    assert counts() == {name: getattr(first, name) for name in COUNTERS}, sot.stats()


def counted_while(x, n):
    i = 0
    while i < n:
        x = x + 1
        if float(x.sum()) < -1:  # a break in every iteration, with a new float and a new ``i`` each time
            print("negative")
        i += 1
    return x


def test_a_while_loop_breaking_in_every_iteration_translates_a_bounded_number_of_times(compile_all):
    """The break met again in the resume function (the next iteration) resumes in the same resume function,
    not in a new one built from it: its entries stop at the cache limit, then it runs natively (before, each
    iteration translated a new code object: 3000 iterations took minutes)."""
    x = paddle.ones([1])
    with pytest.warns(RuntimeWarning, match="reached the cache limit"):
        assert_same(sot.symbolic_translate(counted_while)(x, 300), counted_while(x, 300))
    first = sot.stats()
    assert first.fallbacks == 0 and first.translate_count <= sot.config.cache_limit + 3, first
    assert_same(sot.symbolic_translate(counted_while)(x, 500), counted_while(x, 500))
    assert sot.stats().translate_count <= first.translate_count + 2, sot.stats()


def and_(x, y):
    return (x.sum() > 0) and (y * 2)


def or_(x, y):
    return (x.sum() > 0) or (y * 2)


@pytest.mark.parametrize("first, graphs", [("pos", 2), ("neg", 1)])
def test_tensor_and(compile_all, first, graphs):
    # Taken `and`: the resume function computes y * 2 (one more graph); short-circuit: it returns the
    # condition tensor itself (no op, no graph).
    x = pos(3) if first == "pos" else neg(3)
    parity(and_, x, pos(3, seed=1))
    assert_counts(translate_count=2, graph_breaks=1, fallbacks=0, compiled_graphs=graphs)


@pytest.mark.parametrize("first, graphs", [("pos", 1), ("neg", 2)])
def test_tensor_or(compile_all, first, graphs):
    x = pos(3) if first == "pos" else neg(3)
    parity(or_, x, pos(3, seed=1))
    assert_counts(translate_count=2, graph_breaks=1, fallbacks=0, compiled_graphs=graphs)


def not_and_ternary(x):
    flag = not (x.mean() > 0)
    y = x - 1 if flag else x + 1
    return y, flag


def test_tensor_not_then_python_ternary(compile_all):
    # `not tensor` breaks; afterwards `flag` is a Python bool, so the ternary is resolved while simulating.
    for arg in (pos(3), neg(3)):
        parity(not_and_ternary, arg)
    # f once (1 break, 2-op prefix), then one resume function per value of `flag` (guarded constant).
    assert_counts(translate_count=3, graph_breaks=1, fallbacks=0, compiled_graphs=3)


def tensor_ternary(x):
    y = x * 3
    return y + 1 if y.mean() > 0 else y - 1


def test_tensor_ternary_both_paths(compile_all):
    fast = sot.symbolic_translate(tensor_ternary)
    for arg in (pos(4), pos(4), neg(4), neg(4)):
        assert_same(fast(arg), tensor_ternary(arg))
    assert_counts(translate_count=3, graph_breaks=1, fallbacks=0, compiled_graphs=3)


# Compiled from source, not imported: pytest's assertion rewriting must not touch this `assert` (it would
# replace the plain assert bytecode and the message by its own).
exec(compile(textwrap.dedent("""
    def tensor_assert(x):
        y = x + 1
        assert y.sum() > 0, "y must be positive"
        return y * 2
"""), __file__, "exec"))


def test_tensor_assert_true(compile_all):
    parity(tensor_assert, pos(3))  # noqa: F821
    assert_counts(translate_count=2, graph_breaks=1, fallbacks=0, compiled_graphs=2)


def test_tensor_assert_false_raises_like_eager(compile_all):
    x = neg(3) * 5
    with pytest.raises(AssertionError) as eager:
        tensor_assert(x)  # noqa: F821
    fast = sot.symbolic_translate(tensor_assert)  # noqa: F821
    for _ in range(2):
        with pytest.raises(AssertionError) as translated:
            fast(x)
        assert str(translated.value) == str(eager.value) == "y must be positive"
    stats = sot.stats()
    assert stats.graph_breaks == 1 and stats.compiled_graphs == 1, stats  # the prefix (3 ops)
    # The raising path's resume function runs natively (like any frame whose user code raises).
    assert stats.translate_count == 2 and stats.fallbacks <= 1, stats


# -- unsupported calls -------------------------------------------------------------------------------------
def prints_tensor(x):
    y = x * 2
    print("y =", y)
    return y + 1


def test_print_tensor_stdout_equals_eager(compile_all, capsys):
    x = pos(2, 3)
    expected = prints_tensor(x)
    eager_out = capsys.readouterr().out
    assert "y =" in eager_out and "Tensor" in eager_out
    fast = sot.symbolic_translate(prints_tensor)
    for _ in range(2):
        assert_same(fast(x), expected)
        assert capsys.readouterr().out == eager_out  # printed exactly once per call, same text
    assert_counts(translate_count=2, graph_breaks=1, fallbacks=0, compiled_graphs=2)


def print_keywords(x):
    y = x + 1
    print("a", y, sep="-", end="!\n")
    return y * 2


def test_print_with_keyword_arguments(compile_all, capsys):
    x = pos(2)
    expected = print_keywords(x)
    eager_out = capsys.readouterr().out
    assert eager_out.startswith("a-Tensor") and eager_out.endswith("!\n")
    fast = sot.symbolic_translate(print_keywords)
    for _ in range(2):
        assert_same(fast(x), expected)
        assert capsys.readouterr().out == eager_out
    assert_counts(translate_count=2, graph_breaks=1, fallbacks=0, compiled_graphs=2)


def _combine(a, b):
    return a * 2 if b is None else a


def pending_user_call(x):
    y = x + 1
    return _combine(y, print(y))  # NULL, _combine and y are on the stack when print breaks


def pending_paddle_call(x):
    y = x + 1
    return paddle.add(y, paddle.to_tensor(y.numpy()))


def test_break_with_pending_outer_user_call(compile_all, capsys):
    x = pos(2)
    expected = pending_user_call(x)
    eager_out = capsys.readouterr().out
    fast = sot.symbolic_translate(pending_user_call)
    for _ in range(2):
        assert_same(fast(x), expected)
        assert capsys.readouterr().out == eager_out
    assert_counts(translate_count=2, graph_breaks=1, fallbacks=0, compiled_graphs=2)


def test_break_with_pending_outer_paddle_call(compile_all):
    parity(pending_paddle_call, pos(2, 2))
    assert_counts(translate_count=2, graph_breaks=1, fallbacks=0, compiled_graphs=2)


def uses_numpy(x):
    y = x * 2
    arr = y.numpy()
    return y + 1, arr.shape, arr.dtype == np.float32


def uses_numpy_only(x):
    y = x * 2
    return y.numpy()


def uses_item(x):
    y = x.sum() * 2
    s = y.item()
    return x * s, s


def uses_tolist(x):
    y = x * 2
    values = y.tolist()
    return values, len(values), y + 1


@pytest.mark.parametrize("fn", [uses_numpy, uses_tolist, uses_item])
def test_leaving_the_graph_breaks(compile_all, fn):
    # .numpy() / .tolist() / .item() need the value: prefix compiled, the call native, the rest resumed.
    parity(fn, pos(3))
    assert_counts(translate_count=2, graph_breaks=1, fallbacks=0, compiled_graphs=2)


def test_numpy_of_a_dead_tensor_breaks(compile_all):
    # The tensor whose .numpy() is called is not used afterwards; it must still be a graph output.
    x = pos(3)
    expected = uses_numpy_only(x)
    fast = sot.symbolic_translate(uses_numpy_only)
    for _ in range(2):
        out = fast(x)
        assert isinstance(out, np.ndarray) and out.dtype == expected.dtype
        np.testing.assert_allclose(out, expected, rtol=1e-6)
    # prefix compiled; the resume function only returns the array (no op, no graph)
    assert_counts(translate_count=2, graph_breaks=1, fallbacks=0, compiled_graphs=1)


def unknown_c_function(x):
    y = x * 2
    arr = np.asarray(y)
    return y + 1, arr.shape


def isfinite_of_float(x):
    y = x.sum() * 2
    ok = math.isfinite(float(y))
    return ok, y + 1


def test_unknown_c_function_taking_a_tensor(compile_all):
    parity(unknown_c_function, pos(2, 3))
    assert_counts(translate_count=2, graph_breaks=1, fallbacks=0, compiled_graphs=2)


def test_float_of_tensor_breaks(compile_all):
    parity(isfinite_of_float, pos(3))
    assert_counts(translate_count=2, graph_breaks=1, fallbacks=0, compiled_graphs=2)


def forced_break(x):
    y = x + 1
    psdb.breakgraph()
    return y * 2


def test_psdb_breakgraph(compile_all):
    parity(forced_break, pos(3))
    assert_counts(translate_count=2, graph_breaks=1, fallbacks=0, compiled_graphs=2)


# -- breaks inside inlined calls --------------------------------------------------------------------------
def _breaking_helper(t):
    u = t * 2
    psdb.breakgraph()
    return u + 1


def calls_breaking_helper(x):
    y = x - 1
    z = _breaking_helper(y)
    return z * 3


def test_break_inside_inlined_function(compile_all):
    parity(calls_breaking_helper, pos(3))
    # The break surfaces at the call site in the outer frame: outer prefix (y = x - 1) compiled, the call
    # runs natively and the helper is translated by the hook (its own prefix + resume function), then the
    # outer resume function (z * 3). 4 translations, 2 breaks (outer at the call, helper at breakgraph),
    # 4 graphs.
    assert_counts(translate_count=4, graph_breaks=2, fallbacks=0, compiled_graphs=4)


def _level3(t):
    a = t + 3
    psdb.breakgraph()
    return a * 3


def _level2(t):
    b = t + 2
    psdb.breakgraph()
    return _level3(b) * 2


def _level1(t):
    c = t + 1
    psdb.breakgraph()
    return _level2(c) + 10  # not `+ 1`: an SIR equal to the prefix's would reuse its compiled program


def deep(x):
    y = x * 1.5
    return _level1(y) - 1


def test_deep_nesting_three_breaking_levels(compile_all):
    parity(deep, pos(2, 2))
    # Translations: deep, _level1, _level1@resume, _level2, _level2@resume, _level3, _level3@resume, then the
    # resume functions after each native call: _level2 (after _level3), _level1 (after _level2), deep.
    # Breaks: deep (at the call), _level1 twice (breakgraph, call of _level2), _level2 twice, _level3 once.
    # Graphs: 4 prefixes with ops (y, c, b, a) and 4 continuations with ops (a*3, *2, +1, -1); the resume
    # functions that only call the next level have no op before their break.
    assert_counts(translate_count=10, graph_breaks=6, fallbacks=0, compiled_graphs=8)


def _scaled_breaking(t, scale=1.0):
    u = t * scale
    psdb.breakgraph()
    return u + 1


def calls_with_keyword_argument(x):
    y = x - 1
    return _scaled_breaking(y, scale=2.0) * 3  # the break surfaces at a CALL preceded by KW_NAMES


class _Scaler:
    def __init__(self, k):
        self.k = k

    def apply(self, t):
        u = t * self.k
        psdb.breakgraph()
        return u + 1


def calls_breaking_method(x, scaler):
    return scaler.apply(x - 1) * 3


@pytest.mark.parametrize("fn, extra", [(calls_with_keyword_argument, ()), (calls_breaking_method, (_Scaler(2.0),))],
                         ids=["keyword-call", "method-call"])
def test_break_inside_inlined_call_with_keywords_or_method(compile_all, fn, extra):
    parity(fn, pos(3), *extra)
    # outer prefix, callee prefix, callee resume, outer resume: one graph each
    assert_counts(translate_count=4, graph_breaks=2, fallbacks=0, compiled_graphs=4)


def star_args_print(x):
    y = x + 1
    items = [y, "s"]
    print(*items, sep="|")  # CALL_FUNCTION_EX
    return y * 2


def test_break_at_star_args_call(compile_all, capsys):
    x = pos(2)
    expected = star_args_print(x)
    eager_out = capsys.readouterr().out
    fast = sot.symbolic_translate(star_args_print)
    for _ in range(2):
        assert_same(fast(x), expected)
        assert capsys.readouterr().out == eager_out
    assert_counts(translate_count=2, graph_breaks=1, fallbacks=0, compiled_graphs=2)


def varargs_break(x, *rest, **options):
    y = x + rest[0]
    psdb.breakgraph()
    return y * options["k"], rest, options


def keyword_only_break(x, *, scale=2.0):
    y = x * scale
    psdb.breakgraph()
    return y + scale


def test_break_in_frames_with_varargs_and_keyword_only_arguments(compile_all):
    x = pos(2)
    expected = varargs_break(x, 1.0, 2.0, k=3.0)
    fast = sot.symbolic_translate(varargs_break)
    for _ in range(2):
        assert_same(fast(x, 1.0, 2.0, k=3.0), expected)
    assert_counts(translate_count=2, graph_breaks=1, fallbacks=0, compiled_graphs=2)

    sot.reset()
    fast = sot.symbolic_translate(keyword_only_break)
    for _ in range(2):
        assert_same(fast(x, scale=3.0), keyword_only_break(x, scale=3.0))
    assert_counts(translate_count=2, graph_breaks=1, fallbacks=0, compiled_graphs=2)


def break_in_try(x):
    y = x + 1
    try:
        psdb.breakgraph()
        z = y * 2
    except ValueError:
        z = y
    return z


def test_break_inside_try_block(compile_all):
    parity(break_in_try, pos(3))
    assert_counts(translate_count=2, graph_breaks=1, fallbacks=0, compiled_graphs=2)


# -- state across the break --------------------------------------------------------------------------------
def list_mutated_around_break(x, items):
    items.append(x + 1)
    psdb.breakgraph()
    items.append(x * 2)
    return items[0] + items[1], len(items)


def test_break_between_two_mutations_of_the_same_list(compile_all, capsys):
    x = pos(3)
    fast = sot.symbolic_translate(list_mutated_around_break)
    for _ in range(2):  # second call: cache hits, each mutation applied exactly once more
        eager_items, items = [x], [x]
        expected = list_mutated_around_break(x, eager_items)
        assert_same(fast(x, items), expected)
        assert_same(items, eager_items)
        assert len(items) == 3 and items[0] is x
    assert_counts(translate_count=2, graph_breaks=1, fallbacks=0, compiled_graphs=2)


def list_printed_between_mutations(items):
    items.append(len(items))
    print("between:", items)  # the native print must see the first append, and only it
    items.append(len(items) * 10)
    return items


def test_print_sees_the_first_mutation_only(compile_all, capsys):
    expected = list_printed_between_mutations(["a"])
    eager_out = capsys.readouterr().out
    assert eager_out == "between: ['a', 1]\n"
    fast = sot.symbolic_translate(list_printed_between_mutations)
    for _ in range(2):
        items = ["a"]
        out = fast(items)
        assert out is items and items == expected
        assert capsys.readouterr().out == eager_out
    assert_counts(translate_count=2, graph_breaks=1, fallbacks=0, compiled_graphs=0)


def local_list_aliased_across_break(x):
    a = [x]
    b = a
    a.append(x + 1)
    psdb.breakgraph()
    b.append(x * 2)
    return a, b


def test_local_list_aliased_across_break_keeps_identity(compile_all):
    x = pos(2)
    expected = local_list_aliased_across_break(x)
    fast = sot.symbolic_translate(local_list_aliased_across_break)
    for _ in range(2):
        a, b = fast(x)
        assert a is b  # one list, reached through two names on both sides of the break
        assert_same([a, b], list(expected))
        assert len(a) == 3
    assert_counts(translate_count=2, graph_breaks=1, fallbacks=0, compiled_graphs=2)


def cell_live_after_break(x):
    scale = x * 2

    def inner(t):
        return t * scale

    y = inner(x)
    psdb.breakgraph()
    return y + scale  # the cell variable is read after the break; `inner` is dead


def nested_function_live_after_break(x):
    scale = x * 2

    def inner(t):
        return t * scale

    psdb.breakgraph()
    scale = scale + 1  # `inner` must see the new value: it shares the cell with the resumed code
    return inner(x)


def test_cell_variable_live_after_break(compile_all):
    parity(cell_live_after_break, pos(3))
    assert_counts(translate_count=2, graph_breaks=1, fallbacks=0, compiled_graphs=2)


def test_nested_function_and_its_cell_live_after_break(compile_all):
    # A function created in the frame and still used after the break is rebuilt with the frame's real cell,
    # which the resume function receives as its closure: one break, no fallback (it used to fall back).
    parity(nested_function_live_after_break, pos(3))
    assert_counts(translate_count=2, graph_breaks=1, fallbacks=0, compiled_graphs=2)


# -- outputs restored after a break ------------------------------------------------------------------------
class Box:
    def __init__(self, value, tag):
        self.value = value
        self.tag = tag


def returns_everything(x, y, box):
    a = x + 1
    n = x.shape[0] * 2
    box.value = a  # a user object (from outside: creating one is a break of its own), updated before the break
    psdb.breakgraph()
    b = a * y
    box.tag = "after"
    nested = {"pair": (a, [b, a]), "n": n, "s": "text", "none": None, "f": 1.5}
    return nested, box, (n, n + 1), [x.shape, b.dtype, b.shape[-1] + 0.5]


def test_return_values_of_every_kind_after_break(compile_all):
    x, y = pos(3, 2), pos(3, 2, seed=1)
    eager_box = Box(None, "before")
    eager = returns_everything(x, y, eager_box)
    fast = sot.symbolic_translate(returns_everything)
    for _ in range(2):
        box = Box(None, "before")
        nested, out_box, numbers, meta = fast(x, y, box)
        assert_same(nested, eager[0])
        assert nested["pair"][0] is nested["pair"][1][1]  # `a` twice: one tensor object
        assert out_box is box and box.tag == "after"
        assert_same(box.value, eager_box.value)
        assert box.value is nested["pair"][0]
        assert_same(numbers, eager[2])
        assert meta == eager[3]
    # guards on `box` are by type: a fresh Box per call hits the cache
    assert_counts(translate_count=2, graph_breaks=1, fallbacks=0, compiled_graphs=2)


def same_tensor_twice(x):
    y = x * 2
    psdb.breakgraph()
    z = y + 1
    return z, z, y


def test_same_tensor_returned_twice_keeps_identity(compile_all):
    x = pos(3)
    fast = sot.symbolic_translate(same_tensor_twice)
    expected = same_tensor_twice(x)
    for _ in range(2):
        out = fast(x)
        assert_same(out, expected)
        assert out[0] is out[1]
    assert_counts(translate_count=2, graph_breaks=1, fallbacks=0, compiled_graphs=2)


def input_returned_after_break(x, w):
    y = w * 2
    psdb.breakgraph()
    return x, y + 1, x


def input_returned_alone(x):
    psdb.breakgraph()
    return x


def test_input_tensor_returned_unchanged_keeps_identity(compile_all):
    x, w = pos(3), pos(3, seed=2)
    fast = sot.symbolic_translate(input_returned_after_break)
    expected = input_returned_after_break(x, w)
    for _ in range(2):
        out = fast(x, w)
        assert_same(out, expected)
        assert out[0] is x and out[2] is x
    assert_counts(translate_count=2, graph_breaks=1, fallbacks=0, compiled_graphs=2)

    sot.reset()
    alone = sot.symbolic_translate(input_returned_alone)
    for _ in range(2):
        assert alone(x) is x
    assert_counts(translate_count=2, graph_breaks=1, fallbacks=0, compiled_graphs=0)


# -- psdb checks, strict mode, logging ---------------------------------------------------------------------
def test_check_no_breakgraph_raises_on_break(compile_all):
    def checked(x):
        y = x + 1
        if y.sum() > 0:
            return y
        return -y

    psdb.check_no_breakgraph(checked)
    with pytest.raises(sot.BreakGraphCheckError):
        sot.symbolic_translate(checked)(pos(3))


def test_check_no_breakgraph_silent_without_break(compile_all):
    def clean(x):
        return x * 2 + 1

    psdb.check_no_breakgraph(clean)
    parity(clean, pos(3))
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


def strict_breaker(x):
    y = x + 1
    if y.sum() > 0:  # strict-break
        return y
    return -y


def test_strict_mode_turns_break_into_unsupported_error(compile_all):
    with sot.config.patch(strict_mode=True):
        with pytest.raises(sot.UnsupportedError) as info:
            sot.symbolic_translate(strict_breaker)(pos(3))
    message = str(info.value)
    assert "tensor" in message and "bool" in message, message  # the reason
    assert f"{__file__}:{line_of(strict_breaker, '# strict-break')}" in message, message


def test_log_level_1_reports_each_break(compile_all, capfd):
    capfd.readouterr()
    with sot.config.patch(log_level=1):
        parity(tensor_if, pos(3))
    err = capfd.readouterr().err
    break_lines = [line for line in err.splitlines() if "graph break" in line]
    assert len(break_lines) == 1, err
    line = break_lines[0]
    assert "tensor_if" in line and "bool" in line, line
    assert f"{__file__}:{line_of(tensor_if, 'if y.mean() > 0')}" in line, line


def test_log_level_1_reports_break_inside_inlined_call_at_user_line(compile_all, capfd):
    capfd.readouterr()
    with sot.config.patch(log_level=1):
        parity(calls_breaking_helper, pos(3))
    err = capfd.readouterr().err
    break_lines = [line for line in err.splitlines() if "graph break" in line]
    assert len(break_lines) == 2, err
    assert all("psdb.breakgraph()" in line for line in break_lines), err
    where = f"{__file__}:{line_of(_breaking_helper, 'psdb.breakgraph()')}"
    assert all(where in line for line in break_lines), err


# -- gradients through a split graph -----------------------------------------------------------------------
def split_loss(x, w):
    h = paddle.matmul(x, w)
    if h.mean() > 0:
        out = paddle.nn.functional.relu(h) * 2
    else:
        out = h * -1
    psdb.breakgraph()
    return (out * out).mean() + (w * w).sum() * 0.01


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_gradients_flow_through_a_split_graph(compile_all, sign):
    rng = np.random.default_rng(3)
    x_np = (sign * np.abs(rng.standard_normal([4, 3]))).astype("float32")
    w_np = np.abs(rng.standard_normal([3, 5])).astype("float32")

    def leaves():
        x, w = paddle.to_tensor(x_np), paddle.to_tensor(w_np)
        x.stop_gradient = False
        w.stop_gradient = False
        return x, w

    ex, ew = leaves()
    eager_loss = split_loss(ex, ew)
    eager_loss.backward()
    fast = sot.symbolic_translate(split_loss)
    for _ in range(2):
        x, w = leaves()
        loss = fast(x, w)
        assert_same(loss, eager_loss)
        loss.backward()
        np.testing.assert_allclose(x.grad.numpy(), ex.grad.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(w.grad.numpy(), ew.grad.numpy(), rtol=1e-5, atol=1e-6)
    # f (tensor if): prefix compiled; branch resume function: breaks at breakgraph, its prefix compiled;
    # then the loss resume function. 3 translations, 2 breaks, 3 graphs.
    assert_counts(translate_count=3, graph_breaks=2, fallbacks=0, compiled_graphs=3)


class _Block(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc = paddle.nn.Linear(3, 4)

    def forward(self, x):
        h = self.fc(x)
        if h.mean() > 0:
            return paddle.nn.functional.relu(h) * 2
        return h * 0.5


class _Net(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.block = _Block()
        self.head = paddle.nn.Linear(4, 2)

    def forward(self, x):
        return self.head(self.block(x + 1)).mean()


def test_parameter_gradients_through_a_layer_split_by_a_break(compile_all):
    """Inputs without gradient: every gradient comes from the parameters used before and after the break."""
    paddle.seed(11)
    model = _Net()
    eager_model = _Net()
    eager_model.set_state_dict(model.state_dict())
    x = pos(2, 3)
    eager_loss = eager_model(x)
    eager_loss.backward()
    fast = sot.symbolic_translate(model)
    loss = fast(x)
    assert_same(loss, eager_loss)  # also compares stop_gradient (False: the loss depends on parameters)
    loss.backward()
    for (name, param), eager_param in zip(model.named_parameters(), eager_model.parameters()):
        assert param.grad is not None, f"{name}: no gradient"
        np.testing.assert_allclose(param.grad.numpy(), eager_param.grad.numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=name)
    # _Net.forward breaks at the call of self.block (the break inside _Block.forward surfaces there),
    # _Block.forward breaks at its `if`; resume functions: the branch of _Block, the rest of _Net.
    assert_counts(translate_count=4, graph_breaks=2, fallbacks=0, compiled_graphs=4)


def test_failing_python_assert_raises_assertion_error_in_strict_mode(compile_all):
    # A failing assert is the user's own error: even strict mode must raise it, not UnsupportedError.
    exec(compile(textwrap.dedent("""
        def checked(x, n):
            y = x + 1
            assert n > 0, "n must be positive"
            return y
    """), __file__, "exec"), globals())
    with pytest.raises(AssertionError, match="n must be positive"):
        checked(pos(2), -1)  # noqa: F821
    with sot.config.patch(strict_mode=True):
        with pytest.raises(AssertionError, match="n must be positive"):
            sot.symbolic_translate(checked)(pos(2), -1)  # noqa: F821


# -- known limitations: current behaviour; issue 4 wants better ---------------------------------------------
def break_in_for_body(x):
    y = x + 1
    for i in range(3):
        y = y * 2 + i
        psdb.breakgraph()
    return y - 1


def test_break_inside_for_loop_keeps_graphs_around_the_loop(compile_all):
    # The loop runs natively around a translated body function: no fallback.
    parity(break_in_for_body, pos(3))
    stats = sot.stats()
    assert stats.fallbacks == 0 and stats.graph_breaks >= 2, stats


def break_in_tensor_loop(x, ys):
    y = x + 1
    for t in ys:
        y = y * 2 + t
        psdb.breakgraph()
    return y - 1


def test_break_inside_loop_over_tensors_translates_the_body_once(compile_all):
    ys = [pos(3, seed=i) for i in range(4)]
    parity(break_in_tensor_loop, pos(3), ys)
    # the frame (prefix + native loop), the body function, the body's resume after the break, and the code
    # after the loop: each translated once; later iterations and the second call hit the cache.
    assert_counts(translate_count=4, graph_breaks=2, fallbacks=0, compiled_graphs=3)


def break_in_with_block(x):
    y = x * 3
    with paddle.no_grad():
        z = y * 2
        psdb.breakgraph()
        z2 = y + 1  # still under no_grad after the break: stop_gradient like eager
    w = z2 * y  # grad enabled again
    return z, z2, w


def test_break_inside_with_block(compile_all):
    # One break: the resume function simulates the end of the block (its generated code leaves the real
    # no_grad block before its graph); grad mode inside and after the block, results and stop_gradient exact.
    x = _t(3, stop_gradient=False)
    expected = break_in_with_block(x)
    assert [t.stop_gradient for t in expected] == [True, True, False]
    fast = sot.symbolic_translate(break_in_with_block)
    for _ in range(2):
        out = fast(x)
        assert_same(out, expected)
        assert paddle.is_grad_enabled()
    assert_counts(translate_count=2, graph_breaks=1, fallbacks=0, compiled_graphs=2)


def raise_through_library_manager(x, manager):
    with manager():  # a library manager: entered natively, at a break
        y = x * 2
        raise KeyError(float(y.sum()))


@pytest.mark.parametrize("manager", [contextlib.nullcontext, contextlib.ExitStack,
                                     lambda: contextlib.suppress(ValueError)])
def test_an_exception_leaving_the_frame_through_a_natively_entered_with_block(compile_all, manager):
    # (3.10: the entry switched to the original code ran SETUP_WITH natively, then called the resume function
    # inside the block from a trampoline: the resume function's exception reached that block's handler too,
    # with the stack gone: a segfault in WITH_EXCEPT_START)
    fast = sot.symbolic_translate(raise_through_library_manager)
    for _ in range(4):
        with pytest.raises(KeyError) as info:
            fast(pos(3), manager)
        with pytest.raises(KeyError) as expected:
            raise_through_library_manager(pos(3), manager)
        assert info.value.args == expected.value.args
    assert counts()["fallbacks"] == 0, counts()


grad_modes_seen: list[bool] = []


@sot.skip_function
def record_grad_mode() -> None:
    grad_modes_seen.append(paddle.is_grad_enabled())


def native_call_in_no_grad_block(x):
    with paddle.no_grad():
        y = x * 2
        record_grad_mode()  # a graph break: runs natively, inside the block
        z = y + 1
    return z


def test_native_call_at_a_break_inside_a_no_grad_block_runs_without_grad(compile_all):
    x = _t(3, stop_gradient=False)
    grad_modes_seen.clear()
    expected = native_call_in_no_grad_block(x)
    assert grad_modes_seen == [False]
    fast = sot.symbolic_translate(native_call_in_no_grad_block)
    for _ in range(2):
        grad_modes_seen.clear()
        assert_same(fast(x), expected)
        assert grad_modes_seen == [False]
    assert paddle.is_grad_enabled()
    assert sot.stats().fallbacks == 0


@sot.skip_function
def fail_natively() -> None:
    raise ValueError("raised by a native call inside the block")


def raise_at_break_in_no_grad_block(x):
    with paddle.no_grad():
        y = x * 2
        fail_natively()
    return y


def _grad_mode_in_and_after_handler(fn, x):
    try:
        fn(x)
    except ValueError:
        inside = paddle.is_grad_enabled()
    return inside, paddle.is_grad_enabled()


def test_an_exception_at_a_break_inside_a_no_grad_block_leaves_grad_mode_restored(compile_all):
    fast = sot.symbolic_translate(raise_at_break_in_no_grad_block)
    for _ in range(2):
        assert _grad_mode_in_and_after_handler(fast, _t(3))[1] is True
    assert paddle.is_grad_enabled()


def test_an_exception_at_a_break_inside_a_no_grad_block_exits_it_before_the_handler(compile_all):
    # The generated code leaves the block entered at the break when an exception escapes it, before the
    # caller's ``except`` clause runs (as the ``with`` statement would).
    expected = _grad_mode_in_and_after_handler(raise_at_break_in_no_grad_block, _t(3))
    fast = sot.symbolic_translate(raise_at_break_in_no_grad_block)
    assert _grad_mode_in_and_after_handler(fast, _t(3)) == expected


def test_the_resumed_block_end_is_guarded_on_the_mode_it_restores(compile_all):
    # The same break met inside an outer no_grad: the block's end restores no_grad, not grad mode.
    x = _t(3, stop_gradient=False)
    fast = sot.symbolic_translate(break_in_with_block)
    for outer in (contextlib.nullcontext, paddle.no_grad, contextlib.nullcontext):
        with outer():
            expected = break_in_with_block(x)
            assert_same(fast(x), expected)
            assert_same(fast(x), expected)
    assert paddle.is_grad_enabled()
    assert sot.stats().fallbacks == 0 and sot.stats().translate_count == 4


def raise_after_break_in_block(x):
    try:
        with paddle.no_grad():
            y = x * 2
            psdb.breakgraph()
            if y.shape[0] == 3:
                raise ValueError("leaves the block resumed after the break")
    except ValueError:
        y = x + 1
    return y, paddle.is_grad_enabled()


def test_an_exception_leaving_a_resumed_block_restores_grad_mode(parity, compile_all):
    parity(raise_after_break_in_block, _t(3, stop_gradient=False))
    assert paddle.is_grad_enabled()


def raise_in_resumed_block(x):
    with paddle.no_grad():
        y = x * 2
        psdb.breakgraph()
        z = y + 1
        fail_natively()  # a second break, inside the block the first one resumed in
    return z


def test_an_exception_in_a_resumed_block_exits_it_before_the_handler(compile_all):
    expected = _grad_mode_in_and_after_handler(raise_in_resumed_block, _t(3))
    assert expected == (True, True)
    fast = sot.symbolic_translate(raise_in_resumed_block)
    for _ in range(2):
        assert _grad_mode_in_and_after_handler(fast, _t(3)) == expected
    assert sot.stats().fallbacks == 0


def failing_op_after_break_in_block(x, index):
    with paddle.no_grad():
        y = x * 2
        psdb.breakgraph()
        try:
            z = paddle.gather(y, index)  # only the kernel checks the index
        except Exception:
            z = x * 3  # inside the block: no gradient
    return z, z.sum() * x


def test_a_failing_graph_after_a_resumed_block_end_reruns_inside_the_block(compile_all):
    # The resume function's generated code leaves the block before its graph; when the graph fails, its
    # original code reruns natively from inside the block (opened again).
    x = _t(4, stop_gradient=False)
    fast = sot.symbolic_translate(failing_op_after_break_in_block)
    for index in ([1, 2], [1, 2], [7], [7]):
        expected = failing_op_after_break_in_block(x, paddle.to_tensor(index))
        assert_same(fast(x, paddle.to_tensor(index)), expected)
        assert paddle.is_grad_enabled()
    assert sot.stats().fallbacks == 0


# -- super() without arguments after a break ------------------------------------------------------------------
class _Base:
    def scale(self, x):
        return x * 3


class _AfterBreak(_Base):
    """``super()`` finds its class in the ``__class__`` cell and its instance in the frame's first local: a
    resume function's first locals are the stack it receives, so it must pass both explicitly."""

    def scale(self, x):
        y = x + 1
        psdb.breakgraph()
        return super().scale(y)

    def scale_with_self_in_a_closure(self, x):
        y = x + 1
        psdb.breakgraph()
        get = lambda: self  # noqa: E731  (``self`` is a cell: ``super()`` reads the cell's content)
        return super().scale(y) + get().bias

    def scale_in_a_loop(self, x):
        for _ in range(2):
            x = x + 1
            psdb.breakgraph()
            x = super().scale(x)
        return x

    bias = 0.5


@pytest.mark.parametrize("method", ["scale", "scale_with_self_in_a_closure", "scale_in_a_loop"])
def test_super_without_arguments_after_a_break_is_the_instance_s(method):
    x = pos(3)
    expected = getattr(_AfterBreak(), method)(x)
    translated = sot.symbolic_translate(getattr(_AfterBreak(), method))
    assert_same(translated(x), expected)
    assert_same(translated(x), expected)
    assert sot.stats().fallbacks == 0


class _NoPositionalParameter(_Base):
    """``super()`` in a function without positional parameters raises ``RuntimeError`` in eager."""

    def scale(*args):
        y = args[1] + 1
        psdb.breakgraph()
        return super().scale(y)  # (a resume function's first local is the stack it receives: not an instance)

    def scale_without_break(*args):
        return super().scale(args[1])

    def scale_in_a_nested_function(self, x):
        def nested():
            return super().scale(x)

        return nested()


@pytest.mark.parametrize("method", ["scale", "scale_without_break", "scale_in_a_nested_function"])
def test_super_without_arguments_in_a_function_without_positional_parameters_is_the_eager_error(method):
    x = pos(3)
    with pytest.raises(RuntimeError) as eager:
        getattr(_NoPositionalParameter(), method)(x)
    for _ in range(2):
        with pytest.raises(RuntimeError) as translated:
            sot.symbolic_translate(getattr(_NoPositionalParameter(), method))(x)
        assert str(translated.value) == str(eager.value)


def test_a_loop_with_a_break_reading_a_free_variable():
    """The loop's body function gets the frame's closure: a free variable read in it is not a local to pass."""
    scale = pos(3, seed=4)

    def outer(x):
        def inner(x):
            for _ in range(2):
                x = x * scale
                psdb.breakgraph()
                x = x + scale
            return x

        return inner

    fn = outer(None)
    x = pos(3)
    expected = fn(x)
    translated = sot.symbolic_translate(fn)
    assert_same(translated(x), expected)
    assert_same(translated(x), expected)
    assert sot.stats().fallbacks == 0


class _SuperBase:
    def __init__(self, k):
        self.k = k

    def scaled(self, x):
        if x.sum() > 0:  # the break is inside the callee: the caller's pending ``super().scaled`` is rebuilt
            return x + self.k
        return x - self.k


class _SuperDerived(_SuperBase):
    def scaled(self, x):
        return super().scaled(x * 2) * 3

    def stores(self, x):
        object.__setattr__(self, "total", float(x.sum()))
        super().__setattr__("positive", bool(x.numpy().sum() > 0))
        return self.total, self.positive


def _super_method_across_a_break(x):
    made_here = _SuperDerived(2)
    return made_here.scaled(x), made_here.stores(x), made_here.k


@pytest.mark.parametrize("make", [pos, neg])
def test_super_method_pending_on_the_stack_across_a_break(compile_all, make):
    """``super().f(...)`` with a break inside ``f`` (or in its arguments): the bound method found past the
    instance, pending on the caller's stack, is bound again with ``types.MethodType`` (no fallback)."""
    x = make(3, 4)
    parity(_super_method_across_a_break, x, calls=3)
    assert sot.stats().fallbacks == 0
    assert sot.stats().graph_breaks > 0


# -- an iterator partly consumed before a break lives on after it -------------------------------------------
def _rows_taken_then_break(x):
    rows = iter(x)
    first = next(rows)
    if first.sum() > 0:
        print("first row positive")
    second = next(rows)
    return first, second, [row * 2 for row in rows]


def _list_iterator_across_changes(x):
    items = [x, x + 1, x + 2, x + 3]
    it = iter(items)
    first = next(it)
    print(first.sum().item() > 0)
    items.append(x * 9)
    second = next(it)
    items.pop(0)
    print("again")
    return first, second, list(it), items


def _callers_list_grown_then_consumed(items):
    items.append(items[0] * 3)
    items.append(items[0] * 4)
    it = iter(items)
    taken = [next(it) for _ in range(4)]  # past the caller's length: rebuilt after the list's replay
    print(taken[0].sum().item() > 0)
    return taken, list(it)


def _exhausted_stays_exhausted(x):
    items = [x]
    it = iter(items)
    taken = list(it)
    print(x.sum().item() > 0)
    items.append(x)
    return taken, list(it)


def _tuple_iterator_across_a_break(x):
    it = iter((x, x * 2, x * 3))
    next(it)
    print(x.numpy().sum() > 0)
    return list(it)


def _take_and_break(it, x):
    value = next(it)
    if x.sum() > 0:
        return value * x
    return value - x


def _iterator_passed_to_a_breaking_callee(x):
    it = iter([x, x + 1, x + 2])
    next(it)
    return _take_and_break(it, x), list(it)


@pytest.mark.parametrize("fn", [_rows_taken_then_break, _list_iterator_across_changes, _exhausted_stays_exhausted,
                                _tuple_iterator_across_a_break, _iterator_passed_to_a_breaking_callee])
def test_a_partly_consumed_iterator_across_a_break(compile_all, fn):
    """``iter()`` of a list, tuple or tensor that the frame took items from before a break is made again at
    the break as the same iterator at the same index (`runtime.iterator_at`), instead of a fallback."""
    from _conformance import T, check

    check(fn, lambda: (T(3, 4),), lambda: (-T(3, 4),), calls=2, breaks=None, fallbacks=0)
    assert sot.stats().graph_breaks > 0


def test_a_partly_consumed_iterator_over_a_callers_list_grown_in_the_frame(compile_all):
    from _conformance import T, check

    check(_callers_list_grown_then_consumed, lambda: ([T(2, 2), -T(2, 2), T(2, 2) * 3],), calls=2, breaks=None,
          fallbacks=0)


def _enumerate_taken_then_break(x, ys):
    it = enumerate(ys)
    i, a = next(it)
    if x.sum() > 0:
        x = x + 1
    for j, b in it:
        x = x + j * b
    return x + i * a


def _enumerate_with_start_taken_then_break(x, ys):
    it = enumerate(ys, 3)
    next(it)
    if x.sum() > 0:
        x = x + 1
    return x, list(it), list(it)


def _zip_taken_then_break(x, ys, zs):
    it = zip(ys, zs)
    a, b = next(it)
    if x.sum() > 0:
        x = x + 1
    for c, d in it:
        x = x + c * d
    return x + a * b, list(it)


def _zip_ended_by_its_shorter_source_then_break(x, ys, zs):
    it = zip(ys, zs)  # (ended by ``zs``: ``ys``' iterator gave one item more, as CPython's)
    taken = list(it)
    if x.sum() > 0:
        x = x + 1
    return x, taken, list(it), list(zip(ys, ys))


def _range_iterator_and_zip_with_a_range_taken_then_break(x, ys):
    numbers = iter(range(1, 9, 2))
    next(numbers)
    pairs = zip(ys, range(3))
    next(pairs)
    if x.sum() > 0:
        x = x + 1
    return x, list(numbers), list(pairs)


@pytest.mark.parametrize("fn, make", [
    (_range_iterator_and_zip_with_a_range_taken_then_break,
     lambda T, s: (s * T(2, 3), [T(2, 3) * v for v in range(4)])),
    (_enumerate_taken_then_break, lambda T, s: (s * T(2, 3), [T(2, 3) * v for v in range(4)])),
    (_enumerate_with_start_taken_then_break, lambda T, s: (s * T(2, 3), (4, 5, 6))),
    (_zip_taken_then_break, lambda T, s: (s * T(2, 3), [1.0, 2.0, 3.0], (T(2, 3), T(2, 3) * 2, T(2, 3) * 3))),
    (_zip_ended_by_its_shorter_source_then_break, lambda T, s: (s * T(2, 3), [1, 2, 3], [4])),
])
def test_a_partly_consumed_enumerate_or_zip_across_a_break(compile_all, fn, make):
    """``enumerate``/``zip`` of lists, tuples, tensors or ranges (and ``iter()`` of a range) the frame took items from before a break are made again
    at the break over their sources each at its own index, ``enumerate`` counting on (`runtime.enumerate_at`,
    `runtime.zip_at`), instead of a fallback."""
    from _conformance import T, check

    check(fn, lambda: make(T, 1.0), lambda: make(T, -1.0), calls=2, breaks=None, fallbacks=0)
    assert sot.stats().graph_breaks > 0


class _Base:
    scale = 3


def _class_made_by_three_argument_type(x):
    y = x * 2
    made = type("Made", (_Base,), {"offset": 2, "shifted": lambda self, t: t + self.offset})
    obj = made()
    return obj.shifted(y) * obj.scale, made.__name__, made.__mro__[1] is _Base, isinstance(obj, _Base)


def test_three_argument_type_runs_at_a_break(compile_all):
    """``type(name, bases, namespace)`` makes a class, which the simulation does not model: the call runs
    natively at a graph break and the frame goes on with the real class, instead of a fallback of the frame.
    (Not ``stable``: the resume function guards on the class, a new one at each call.)"""
    from _conformance import T, check

    check(_class_made_by_three_argument_type, lambda: (T(3, 4),), calls=3, breaks=None, fallbacks=0, stable=False)
    assert sot.stats().graph_breaks > 0


# -- a dict display or ``**`` merge pending on the stack at a break ------------------------------------------
def _double_star_literal_with_a_break(x):
    def scaled(a, **kw):
        return a * kw["s"] + kw["t"] + kw.get("u", 0)

    extra = {"u": 2}
    return (scaled(x, **{"s": float(x.mean()), "t": x.sum()}, **extra),
            scaled(x, s=1, **{"t": x.numpy().sum()}))


def _dict_display_with_a_break(x):
    base = {"a": 1}
    return {**base, "b": float(x.sum()), **{"c": x * 2}, "d": x.numpy().shape}


@pytest.mark.parametrize("fn", [_double_star_literal_with_a_break, _dict_display_with_a_break])
def test_a_dict_being_built_resumes_after_a_break(compile_all, fn):
    """The dict a ``**`` call or a dict display builds is on the stack at a break inside it: the resume function
    gets it as a parameter (a real dict) and goes on merging into it (DICT_MERGE/DICT_UPDATE/MAP_ADD store into
    it as into any real dict), instead of falling back."""
    from _conformance import T, check

    check(fn, lambda: (T(3, 4),), lambda: (-T(3, 4),), calls=2, breaks=None, fallbacks=0)
    assert sot.stats().graph_breaks > 0


def _enumerate_with_start_keyword(x):
    seen = []
    for i, row in enumerate(x, start=5):
        if row.sum() > 0:
            seen.append(i)
        print(i)
    return seen


def test_enumerate_with_a_start_keyword_across_a_break(compile_all):
    """``enumerate(x, start=5)`` is made again as ``enumerate(x, 5)`` for a loop broken inside: a keyword
    ``start`` left it without a rebuild, and the frame fell back."""
    from _conformance import T, check

    check(_enumerate_with_start_keyword, lambda: (T(3, 4),), lambda: (-T(3, 4),), calls=2, breaks=None,
          fallbacks=0)
    assert sot.stats().graph_breaks > 0

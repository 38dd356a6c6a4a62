"""Guards of functions reached from the frame (executor/variables/function.py, `UserFunctionVariable`).

A function is guarded by what inlining it depends on (its code, globals, how many defaults, which keyword
defaults), while the default values and closure contents it reads are guarded where used: so a function made
anew for each call reuses the translation, and any difference that changes the result misses the cache.
"""
from __future__ import annotations

import types

import numpy as np
import paddle

import sot
from conftest import assert_same


def _t() -> paddle.Tensor:
    return paddle.to_tensor(np.arange(3, dtype="float32"))


def _apply(x, f):
    return f(x) + 1


def _make_scaler(k):
    def scale(t):
        return t * k

    return scale


def _make_with_default(d):
    def scale(t, k=d):
        return t * k

    return scale


def test_a_closure_made_per_call_reuses_the_translation_and_its_cell_content_is_guarded(compile_all):
    fast = sot.symbolic_translate(_apply)
    for k in (2, 2, 2):
        assert_same(fast(_t(), _make_scaler(k)), _apply(_t(), _make_scaler(k)))
    assert sot.stats().translate_count == 1
    assert_same(fast(_t(), _make_scaler(5)), _apply(_t(), _make_scaler(5)))  # another content: must miss
    assert sot.stats().translate_count == 2
    assert sot.stats().fallbacks == 0 and sot.stats().graph_breaks == 0


def test_a_lambda_of_another_code_misses(compile_all):
    fast = sot.symbolic_translate(_apply)
    for _ in range(2):
        assert_same(fast(_t(), lambda t: t * 10), _apply(_t(), lambda t: t * 10))
    assert sot.stats().translate_count == 1
    assert_same(fast(_t(), lambda t: t - 10), _apply(_t(), lambda t: t - 10))
    assert sot.stats().translate_count == 2


def test_a_changed_default_value_misses(compile_all):
    fast = sot.symbolic_translate(_apply)
    for d in (3, 3, 4, 3):
        assert_same(fast(_t(), _make_with_default(d)), _apply(_t(), _make_with_default(d)))
    assert sot.stats().translate_count == 2


def test_a_changed_number_of_defaults_misses(compile_all):
    def call_with_one(x, f):
        return f(x)

    def two(t, k=2.0):
        return t * k

    fast = sot.symbolic_translate(call_with_one)
    assert_same(fast(_t(), two), call_with_one(_t(), two))
    no_default = types.FunctionType(two.__code__, two.__globals__, "two")
    expected_error = None
    try:
        call_with_one(_t(), no_default)
    except TypeError as exc:
        expected_error = str(exc)
    try:
        fast(_t(), no_default)
    except TypeError as exc:
        assert str(exc) == expected_error
    else:
        raise AssertionError("the translation made for a function with a default was reused without it")


def test_other_globals_miss(compile_all):
    source = "def read(t):\n    return t * SCALE\n"
    namespaces = [{"SCALE": 2.0}, {"SCALE": 7.0}]
    functions = []
    code = compile(source, "<made>", "exec")
    for namespace in namespaces:
        exec(code, namespace)  # one code object, two globals
        functions.append(namespace["read"])
    assert functions[0].__code__ is functions[1].__code__
    fast = sot.symbolic_translate(_apply)
    for f in functions:
        assert_same(fast(_t(), f), _apply(_t(), f))


def test_a_reassigned_code_misses(compile_all):
    def f(t):
        return t * 2

    fast = sot.symbolic_translate(_apply)
    assert_same(fast(_t(), f), _apply(_t(), f))
    f.__code__ = (lambda t: t * 3).__code__
    assert_same(fast(_t(), f), _apply(_t(), f))


def _is_scale(x, f):
    return x * 2 if f is _GLOBAL_SCALE else x * 3


_GLOBAL_SCALE = _make_scaler(2)


def test_identity_used_in_the_frame_is_still_guarded_by_identity(compile_all):
    fast = sot.symbolic_translate(_is_scale)
    twin = types.FunctionType(_GLOBAL_SCALE.__code__, _GLOBAL_SCALE.__globals__, "scale", None,
                              _GLOBAL_SCALE.__closure__)
    for f in (_GLOBAL_SCALE, twin, _GLOBAL_SCALE):
        assert_same(fast(_t(), f), _is_scale(_t(), f))


def _count_calls(x, f):
    f.calls = getattr(f, "calls", 0) + 1
    return f(x)


def test_an_attribute_stored_on_a_function_made_per_call_lands_on_that_function(compile_all):
    fast = sot.symbolic_translate(_count_calls)
    for k in (2, 2):
        eager_f, fast_f = _make_scaler(k), _make_scaler(k)
        assert_same(fast(_t(), fast_f), _count_calls(_t(), eager_f))
        assert fast_f.calls == eager_f.calls == 1


def _make_counter_pair(shared):
    count = 0

    def bump(t):
        nonlocal count
        count += 1
        return t

    def read(t):
        return t * count

    if shared:
        return bump, read
    other = _make_counter_pair(True)  # a pair of the same code, whose cells are not ``bump``'s
    return bump, other[1]


def _bump_then_read(x, bump, read):
    bump(x)
    return read(x)


def test_shared_and_distinct_closure_cells_are_not_confused(compile_all):
    fast = sot.symbolic_translate(_bump_then_read)
    for shared in (True, False, True, False):
        assert_same(fast(_t(), *_make_counter_pair(shared)), _bump_then_read(_t(), *_make_counter_pair(shared)))
    assert sot.stats().fallbacks == 0


def test_a_closure_made_per_call_writing_its_cell_reuses_the_translation(compile_all):
    """A ``nonlocal`` write does not pin the function's identity: the graph guards instead that the cells
    simulated as distinct still are (``bump`` and ``read`` of one pair share one cell, of two pairs not)."""
    fast = sot.symbolic_translate(_bump_then_read)
    for shared in (True, True, False, False):
        eager_pair, fast_pair = _make_counter_pair(shared), _make_counter_pair(shared)
        assert_same(fast(_t(), *fast_pair), _bump_then_read(_t(), *eager_pair))
        assert_same(fast_pair[1](_t()), eager_pair[1](_t()))  # (the write reached the real cell)
    assert sot.stats().translate_count == 2 and sot.stats().fallbacks == 0


def _make_pair(k):
    def times(t):
        return t * k

    def plus(t):
        return t + k

    return times, plus


def _use_pair(x, times, plus):
    return times(x) + plus(x)


def test_two_closures_sharing_a_cell_are_guarded_to_still_share_it(compile_all):
    fast = sot.symbolic_translate(_use_pair)
    for _ in range(2):
        assert_same(fast(_t(), *_make_pair(2)), _use_pair(_t(), *_make_pair(2)))
    assert sot.stats().translate_count == 1
    mixed = (_make_pair(2)[0], _make_pair(3)[1])  # same codes, two cells: ``plus`` must read its own
    assert_same(fast(_t(), *mixed), _use_pair(_t(), *mixed))


def _make_fact():
    def fact(n):
        return 1 if n <= 1 else n * fact(n - 1)

    return fact


def _call_fact(x, fact):
    return x * fact(4)


def test_a_recursive_closure_made_per_call_reuses_the_translation(compile_all):
    fast = sot.symbolic_translate(_call_fact)
    for _ in range(3):
        assert_same(fast(_t(), _make_fact()), _call_fact(_t(), _make_fact()))
    assert sot.stats().translate_count == 1


def test_a_closure_of_the_same_code_that_is_not_recursive_misses(compile_all):
    def cell(value):
        return (lambda: value).__closure__[0]

    code = _make_fact().__code__
    other = types.FunctionType(code, globals(), "fact", None, (cell(lambda n: 100),))
    not_recursive = types.FunctionType(code, globals(), "fact", None, (cell(other),))
    fast = sot.symbolic_translate(_call_fact)
    for fact in (_make_fact(), not_recursive):  # 24, then 4 * (3 * 100)
        assert_same(fast(_t(), fact), _call_fact(_t(), fact))


def test_a_nested_recursive_function_in_a_small_frame_is_translated_once():
    """With the default ``min_graph_size`` the frame runs eagerly and each recursive call of the nested
    ``fact`` is a frame of its own, whose closure holds the ``fact`` of the current call."""

    def fn(x):
        def fact(n):
            return 1 if n <= 1 else n * fact(n - 1)

        return x * fact(4)

    fast = sot.symbolic_translate(fn)
    assert_same(fast(_t()), fn(_t()))
    first = sot.stats().translate_count
    for _ in range(3):
        assert_same(fast(_t()), fn(_t()))
    assert sot.stats().translate_count == first and sot.stats().fallbacks == 0

"""Closures and cells of the translated frame across graph breaks (resume.py, transform.py, variables/function.py).

A function defined in the frame and still alive at a graph break is rebuilt by the generated code with the
frame's real cells, which the resume function then receives as its closure: every function, the native
instruction at the break and the code after it share one cell per variable, as in eager code. A function
made anew at each call is guarded by its code, not its identity, so the second call hits the cache.
"""
from __future__ import annotations

import paddle
import pytest

import sot

from _conformance import T, check


def test_nonlocal_counter_written_before_at_and_after_the_break(compile_all):
    """The cell is written by the simulation before the break, by the frame after it and by the closure on
    both sides: one cell, so every read sees the last write."""

    def fn(x):
        n = 0

        def bump():
            nonlocal n
            n += 1
            return n

        bump()
        y = x * 2
        print("break", n)
        bump()
        n = n + 10
        return y * bump(), n

    check(fn, lambda: (T(3),), breaks=1)


def test_argument_captured_by_a_closure_and_rebound_after_the_break(compile_all):
    def fn(x, k):
        def scale(t):
            return t * k

        y = scale(x)
        print("break")
        k = k + 1
        return scale(y), k

    check(fn, lambda: (T(3), 2), lambda: (T(3), 5), breaks=2)


def test_break_at_the_call_of_a_closure_writing_a_cell(compile_all):
    """The break is inside the closure, so its call runs natively at the break: the writes it made in the
    simulation are undone first, and the native call writes the real cell the resume function reads."""

    def fn(x):
        total = 0

        def record(t):
            nonlocal total
            total += 1
            print("inside", total)
            return t * total

        y = record(x)
        return y + total

    check(fn, lambda: (T(3),), breaks=None)


def test_two_closures_sharing_a_cell_across_a_break(compile_all):
    def fn(x):
        state = {"calls": 0}

        def inc():
            state["calls"] += 1

        def read():
            return state["calls"]

        inc()
        print("break")
        inc()
        return x * read(), state

    check(fn, lambda: (T(3),), breaks=1)


def test_closure_returned_after_a_break_keeps_the_frame_cell(compile_all):
    def fn(x):
        scale = 2

        def apply(t):
            return t * scale

        print("break")
        scale = 3
        return apply(x), apply

    fast = sot.symbolic_translate(fn)
    for _ in range(2):
        result, apply = fast(T(3))
        expected, eager_apply = fn(T(3))
        assert result.numpy().tolist() == expected.numpy().tolist()
        assert apply(paddle.ones([1])).numpy().tolist() == eager_apply(paddle.ones([1])).numpy().tolist()
        assert apply.__closure__[0].cell_contents == 3


def test_exception_raised_through_a_closure_after_a_break(compile_all):
    def fn(x, fail):
        log = []

        def check_value(t):
            log.append("checked")
            if fail:
                raise ValueError("bad value")
            return t

        print("break")
        try:
            y = check_value(x * 2)
        except ValueError:
            log.append("handled")
            y = x
        return y, log

    check(fn, lambda: (T(3), False), lambda: (T(3), True), breaks=None, fallbacks=None, stable=False)


def test_function_made_per_call_is_guarded_by_its_code_not_its_identity(compile_all):
    """A lambda made anew for each call reuses the translation; another code, other defaults or a closure
    that does not share the frame's cell is a different function and never uses it."""

    def call_with(x, f):
        return f(x) + 1

    fast = sot.symbolic_translate(call_with)
    for _ in range(3):
        assert fast(paddle.ones([2]), lambda t: t * 10).numpy().tolist() == [11.0, 11.0]
    translations = sot.stats().translate_count
    assert translations == 1
    assert fast(paddle.ones([2]), lambda t: t * 20).numpy().tolist() == [21.0, 21.0]
    assert fast(paddle.ones([2]), lambda t, k=3: t * k).numpy().tolist() == [4.0, 4.0]
    assert fast(paddle.ones([2]), lambda t, k=4: t * k).numpy().tolist() == [5.0, 5.0]

    def make(k):
        return lambda t: t * k

    assert fast(paddle.ones([2]), make(5)).numpy().tolist() == [6.0, 6.0]
    assert fast(paddle.ones([2]), make(6)).numpy().tolist() == [7.0, 7.0]


def test_function_compared_by_identity_stays_guarded_by_identity(compile_all):
    """Once the simulation used the object itself (``is``), another function of the same code is not
    the same answer."""
    registry = []

    def fn(x, f):
        if registry and f is registry[0]:
            return x + 1
        return x - 1

    fast = sot.symbolic_translate(fn)
    first = lambda t: t  # noqa: E731
    registry.append(first)
    assert fast(paddle.ones([1]), first).numpy().tolist() == [2.0]
    for _ in range(2):
        other = lambda t: t  # noqa: E731
        assert fast(paddle.ones([1]), other).numpy().tolist() == fn(paddle.ones([1]), other).numpy().tolist()


def test_closure_cell_sharing_with_the_frame_is_guarded(compile_all):
    """A function received by a frame and sharing the frame's own cell is simulated as sharing it (a write
    through the frame is read through the function); a function of the same code whose cell is another one
    must not reuse that translation, and the other way round."""

    def outer(value):
        box = value

        def get():
            return box

        def fn(x, f):
            nonlocal box
            box = box + 1
            return x * f()

        return fn, get

    for shared in (True, True, False, False, True):
        results = []
        for translate in (False, True):
            fn, get = outer(1)
            _, other_get = outer(1)
            run = sot.symbolic_translate(fn) if translate else fn
            results.append(run(paddle.ones([1]), get if shared else other_get).numpy().tolist())
        assert results[1] == results[0], shared


def test_closures_made_by_a_comprehension_and_by_the_frame_across_a_break(compile_all):
    """3.12+ inline comprehensions: their cell (``i``) is made again in the body, so it is rebuilt as a new
    cell shared by the lambdas, while the frame's own cell (``k``) is the one the resume function receives."""

    def fn(x):
        getters = [lambda: i for i in range(3)]
        k = 1

        def get_k():
            return k

        print("break")
        k = 5
        return x * get_k(), [get() for get in getters]

    check(fn, lambda: (T(3),), breaks=1)


class Box:
    def __init__(self):
        self.a = None


def test_argument_captured_by_a_closure_keeps_its_first_value_for_effects_and_results(compile_all):
    """Fuzz seed 35: ``obj.a = n`` then ``n = 1`` (``n`` is a cell: a nested function captures it) and a
    break. The replayed store reads the argument's value at the frame's start, not the cell the generated code
    has already given its new content."""

    def fn(x, n, obj):
        def get():
            return n

        obj.a = n
        first = n
        n = 1
        print("break")
        return x * get(), first, obj.a

    def returned_closure_first(x, n):
        def get():
            return n

        original = n
        n = n + 1
        return get, original, x * n

    check(fn, lambda: (T(3), 0, Box()), lambda: (T(3), 4, Box()), breaks=None)
    fast = sot.symbolic_translate(returned_closure_first)
    for n in (0, 5, 5):
        get, original, _ = fast(T(3), n)
        assert (get(), original) == (n + 1, n)


def test_cell_empty_at_the_break_is_empty_in_the_resume_function(compile_all):
    """A cell not assigned yet (or deleted) when the break happens is an empty cell after it: the closure
    reads the later assignment, and reading it before raises the eager NameError."""

    def assigned_after_the_break(x):
        def get():
            return late

        print("break")
        late = 3
        return x * get()

    def deleted_before_the_break(x, n):
        def get():
            return n

        del n
        print("break")
        try:
            get()
        except NameError as error:
            message = str(error)
        n = 2
        return x * get(), message

    check(assigned_after_the_break, lambda: (T(3),), breaks=1)
    check(deleted_before_the_break, lambda: (T(3), 5), breaks=None, fallbacks=None)


def test_closure_over_arguments_made_after_a_break(compile_all):
    """Fuzz seed 6 (3.13 segfault): the arguments are cells, and the closure capturing them is made in the
    resume function. 3.13 pushes a cell with ``LOAD_FAST`` of its slot, which `bytecode` decodes as a plain
    local: rebuilt around the frame's cells as free variables, it became an unbound local (a NULL in the
    closure tuple)."""

    def fn(x, w, s):
        positive = int(x.sum() > 0)  # a graph break (a tensor made a Python int)

        def pick(k):  # (no tensor op after the break: the resume function runs as the original code)
            return (x if k else w), s * k

        return positive, pick(0), pick(2)

    check(fn, lambda: (T(3), T(3) * 2, 1.5), breaks=1)


# 3.12+ (PEP 709): ``i`` below is both a cell of the frame (``get`` captures it) and the variable of an inlined
# comprehension whose lambdas capture it, a new cell at each run of the comprehension: one slot holds either
# cell in turn (the comprehension saves the frame's cell with LOAD_FAST_AND_CLEAR, puts it back with
# STORE_FAST). On 3.10/3.11 they are two variables. Each function breaks inside, before or after the
# comprehension, and then rebinds the frame's ``i``, which ``get`` must see.
def frame_cell_shadowed_break_in_a_condition(x):
    i = 5
    get = lambda: i  # noqa: E731
    getters = [lambda: i for i in range(1) if print("break") is None]
    i = 7
    return x * get(), [g() for g in getters]


def frame_cell_shadowed_break_in_an_item(x):
    i = 5
    get = lambda: x * i  # noqa: E731
    getters = [(print("break"), lambda: x * i)[1] for i in range(2)]
    i = 7
    return get(), [g() for g in getters]


def frame_cell_shadowed_by_a_dict_comprehension(x):
    i = 5
    get = lambda: x * i  # noqa: E731
    getters = {i: (lambda: x * i) for i in range(2) if print("break") is None}
    i = 7
    return get(), {k: g() for k, g in getters.items()}, i


def frame_cell_unbound_before_the_comprehension(x):
    get = lambda: i  # noqa: E731
    getters = [lambda: i for i in range(2) if print("break") is None]
    i = 7
    return x * get(), [g() for g in getters]


def frame_cell_shadowed_break_before(x):
    i = 5
    get = lambda: i  # noqa: E731
    print("break")
    getters = [lambda: i for i in range(2)]
    i = 7
    return x * get(), [g() for g in getters], i


def frame_cell_shadowed_break_after(x):
    i = 5
    get = lambda: i  # noqa: E731
    getters = [lambda: i for i in range(2)]
    print("break")
    i = 7
    return x * get(), [g() for g in getters]


def frame_cell_rebound_by_a_handler_after_the_comprehension(x):
    i = 5
    get = lambda: i  # noqa: E731
    try:
        getters = [print(i) or (lambda: 1 / (i - 1)) for i in range(3) if 1 / (i - 1)]
    except ZeroDivisionError:
        i = 9
    return x * get(), i


@pytest.mark.parametrize("fn", [frame_cell_shadowed_break_in_a_condition, frame_cell_shadowed_break_in_an_item,
                                frame_cell_shadowed_by_a_dict_comprehension,
                                frame_cell_unbound_before_the_comprehension, frame_cell_shadowed_break_before,
                                frame_cell_shadowed_break_after,
                                frame_cell_rebound_by_a_handler_after_the_comprehension])
def test_frame_cell_shadowed_by_a_comprehension_variable_across_a_break(fn, compile_all):
    """The frame's cell is the one the code after the break (or the comprehension's natively run body) sees:
    was a segfault (a NULL put back into the cell's slot), or the value of before the break (a new cell)."""
    check(fn, lambda: (T(3),), breaks=None)

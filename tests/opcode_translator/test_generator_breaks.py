"""A generator whose body breaks the graph while a call consumes it (``sum(float(t) for t in ts)``,
``any(x.item() > 0 for x in xs)``): nothing was taken from it before that call, so the generator is made
again (its function called with the same arguments) and the consuming call runs natively on it: one graph
break instead of a fallback of the whole frame. Effects of its body happen once, as in eager."""
from __future__ import annotations

import numpy as np
import paddle
import pytest

import sot

from conftest import assert_counts, assert_same, raised


def _t(*shape: int, seed: int = 0, value: float | None = None) -> paddle.Tensor:
    if value is not None:
        return paddle.to_tensor(value, dtype="float32")
    rng = np.random.default_rng(seed)
    return paddle.to_tensor(rng.standard_normal(shape).astype("float32"))


def total(x, ts):
    y = x * 2
    s = sum(float(t) for t in ts)
    return y + s


def any_positive(x, xs):
    y = x + 1
    if any(t.item() > 0 for t in xs):
        return y * 2
    return y - 1


def scaled(ts, k):
    for t in ts:
        yield float(t) * k


def from_generator_function(x, ts):
    return x + max(scaled(ts, 3))


SCALARS = [_t(value=1.5), _t(value=-2.0), _t(value=0.25)]


@pytest.mark.parametrize("fn", [total, any_positive, from_generator_function], ids=lambda f: f.__name__)
def test_one_break_instead_of_a_fallback(compile_all, fn):
    x = _t(3)
    expected = fn(x, SCALARS)
    fast = sot.symbolic_translate(fn)
    for _ in range(2):
        assert_same(fast(x, SCALARS), expected)
    stats = sot.stats()
    assert stats.fallbacks == 0 and stats.graph_breaks == 1
    assert stats.cache_hits >= 1


def test_any_takes_the_other_branch(compile_all):
    x = _t(3)
    negatives = [_t(value=-1.0), _t(value=-3.0)]
    fast = sot.symbolic_translate(any_positive)
    assert_same(fast(x, negatives), any_positive(x, negatives))
    assert_same(fast(x, SCALARS), any_positive(x, SCALARS))
    assert sot.stats().fallbacks == 0


def logged(x, ts, log):
    y = x * 3
    s = sum(log.append(i) or float(t) for i, t in enumerate(ts))
    log.append("end")
    return y + s


def test_effects_of_the_body_happen_once(compile_all):
    x = _t(3)
    fast = sot.symbolic_translate(logged)
    for _ in range(2):
        eager_log, fast_log = [], []
        expected = logged(x, SCALARS, eager_log)
        assert_same(fast(x, SCALARS, fast_log), expected)
        assert fast_log == eager_log == [0, 1, 2, "end"]
    assert sot.stats().fallbacks == 0


def partly_taken(x, ts):
    gen = (float(t) for t in ts)
    first = next(iter([1.0]))  # (no item of ``gen`` taken here)
    return x + sum(gen) + first


def test_a_named_generator_made_before(compile_all):
    x = _t(3)
    expected = partly_taken(x, SCALARS)
    fast = sot.symbolic_translate(partly_taken)
    for _ in range(2):
        assert_same(fast(x, SCALARS), expected)
    assert sot.stats().fallbacks == 0


def started(x, ts):
    gen = (t * 2 for t in ts)
    head = next(gen)  # an item taken in simulation: the generator cannot be made again
    return head + sum(float(t) for t in gen)


def test_a_started_generator_still_runs_correctly(compile_all):
    x = _t(3)
    expected = started(x, SCALARS)
    assert_same(sot.symbolic_translate(started)(x, SCALARS), expected)


def failing(ts):
    for t in ts:
        if float(t) < 0:
            raise ValueError(f"negative: {float(t)}")
        yield float(t)


def uses_failing(x, ts):
    return x + sum(failing(ts))


def test_the_bodys_error_is_eagers():
    x = _t(3)
    expected = raised(uses_failing, x, SCALARS)
    actual = raised(sot.symbolic_translate(uses_failing), x, SCALARS)
    assert type(actual) is ValueError and str(actual) == str(expected)


# -- a generator left unfinished is closed when dropped (its finally / GeneratorExit handler runs) -----------
_log: list = []


def _with_cleanup(t):
    try:
        for i in range(3):
            yield t * i
    finally:
        _log.append("cleanup")


def _sees_generator_exit(t):
    try:
        yield t
        yield t * 2
    except GeneratorExit:
        _log.append("exit seen")
        raise


def first_two(x):
    y = x * 2 + 1
    out = []
    for v in _with_cleanup(y):
        out.append(v)
        if len(out) == 2:
            break
    _log.append("after loop")
    return out[0] + out[1] * 2


def returns_from_the_loop(x):
    y = x * 2 + 1
    for v in _with_cleanup(y):
        _log.append("in loop")
        return v + 1


def raises_out_of_the_loop(x):
    y = x * 2 + 1
    try:
        for v in _with_cleanup(y):
            {}["missing"]
    except KeyError:
        _log.append("caught")
    return y


def breaks_at_the_first(x):
    y = x * 2 + 1
    for v in _sees_generator_exit(y):
        break
    _log.append("after loop")
    return v


def held_by_a_local(x):
    y = x * 2 + 1
    gen = _with_cleanup(y)
    first = next(gen)
    _log.append("after next")
    return first


@pytest.mark.parametrize("fn", [first_two, returns_from_the_loop, raises_out_of_the_loop, breaks_at_the_first],
                         ids=lambda fn: fn.__name__)
def test_a_loops_generator_is_closed_when_the_loop_drops_it(compile_all, fn):
    """A ``for`` loop over a generator it made (``for v in gen(t)``) holds its only reference: leaving the
    loop early (a break, a return, an exception) drops it, and CPython closes it there, running its
    ``finally`` (or GeneratorExit handler) before the code after the loop. The simulation never closed it."""
    from _conformance import T, check

    check(fn, lambda: (T(3),), state=lambda: list(_log), reset=_log.clear)


def dropped_before_a_break(x):
    y = x * 2 + 1
    gen = _with_cleanup(y)
    first = next(gen)
    del gen
    print("break")
    _log.append("after the break")
    return first


@pytest.mark.parametrize("fn", [held_by_a_local, dropped_before_a_break], ids=lambda fn: fn.__name__)
def test_a_generator_left_paused_elsewhere_falls_back(compile_all, fn):
    """Held by a local (or anything else but its loop), the generator is closed when its last reference goes,
    a point the simulation does not follow: the frame falls back (right answer, visible in the stats), also
    when the translation ends at a graph break."""
    from _conformance import T, check

    check(fn, lambda: (T(3),), state=lambda: list(_log), reset=_log.clear, breaks=None, fallbacks=None,
          stable=False)
    assert sot.stats().fallbacks >= 1

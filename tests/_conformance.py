"""Harness of the conformance suites (``test_conformance_*.py``): ordinary Python functions over tensors, each
run eagerly and through `sot.symbolic_translate` with fresh arguments, several times and with changed inputs,
comparing everything a user can observe.

What is compared, per call:
  * the returned value (tensors by dtype, shape, stop_gradient and values) or the raised exception (type and
    message);
  * what was printed;
  * the arguments after the call (so in-place mutations of lists, dicts, user objects and tensors count);
  * an optional ``state()`` read after the call (globals, closures).
And, over the whole run, the `sot.stats()` counters the construct must give: no fallback by default, the
expected number of graph breaks, and no re-translation when the same inputs are passed again.
"""
from __future__ import annotations

import contextlib
import dataclasses
import io
import types
from typing import Any, Callable, Sequence

import numpy as np
import paddle
import pytest

import sot

ArgMaker = Callable[[], tuple]


def T(*shape: int, seed: int = 0, dtype: str = "float32", stop_gradient: bool = True,
      positive: bool = False) -> paddle.Tensor:
    """A deterministic tensor: the same ``(shape, seed, dtype)`` always gives the same values."""
    rng = np.random.default_rng(1000 * seed + 7 * len(shape) + sum(shape))
    if dtype.startswith("int"):
        data = rng.integers(1 if positive else -9, 10, size=shape).astype(dtype)
    elif dtype == "bool":
        data = rng.integers(0, 2, size=shape).astype(bool)
    else:
        data = rng.standard_normal(shape)
        data = (np.abs(data) + 0.1 if positive else data).astype(dtype)
    value = paddle.to_tensor(data)
    value.stop_gradient = stop_gradient
    return value


# -- observable state ---------------------------------------------------------------------------------------
_OPAQUE = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.ModuleType, type)


def observe(value: Any, _seen: frozenset = frozenset()) -> Any:
    """A comparable picture of ``value``: tensors by meta and values, containers and user objects recursively."""
    if id(value) in _seen:
        return ("<cycle>",)
    seen = _seen | {id(value)}
    if isinstance(value, paddle.Tensor):
        return ("tensor", str(value.dtype), tuple(value.shape), bool(value.stop_gradient), value.numpy())
    if isinstance(value, paddle.nn.Layer):
        return ("layer", type(value).__name__, observe(dict(value.state_dict()), seen))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [observe(v, seen) for v in value])
    if isinstance(value, dict):
        return (type(value).__name__, [(observe(k, seen), observe(v, seen)) for k, v in value.items()])
    if isinstance(value, (set, frozenset)):
        # In iteration order: it follows from the set's hash table, which the translated code must lay out as
        # the eager one does (the same elements added in another order can iterate otherwise).
        return (type(value).__name__, [observe(v, seen) for v in value])
    if isinstance(value, types.FunctionType):  # a maker may build a new (equal) function for each run
        return ("function", value.__qualname__)
    if isinstance(value, types.MethodType):  # a new object at each access: compared by function and receiver
        return ("method", value.__func__.__qualname__, observe(value.__self__, seen))
    if isinstance(value, _OPAQUE) or value is None:
        return value
    if hasattr(value, "__dict__") and type(value).__module__ not in ("builtins",):
        return ("object", type(value).__name__, observe(dict(vars(value)), seen))
    return (type(value).__name__, value)


def assert_observed_same(actual: Any, expected: Any, where: str, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    if isinstance(expected, np.ndarray):
        assert isinstance(actual, np.ndarray), f"{where}: {actual!r} is not an array"
        assert actual.dtype == expected.dtype and actual.shape == expected.shape, \
            f"{where}: {actual!r} != {expected!r}"
        if expected.dtype.kind in "fc":
            np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, err_msg=where)
        else:
            np.testing.assert_array_equal(actual, expected, err_msg=where)
    elif isinstance(expected, (list, tuple)):
        assert isinstance(actual, type(expected)) and len(actual) == len(expected), \
            f"{where}: {actual!r} != {expected!r}"
        for index, (a, e) in enumerate(zip(actual, expected)):
            assert_observed_same(a, e, f"{where}[{index}]", rtol, atol)
    elif isinstance(expected, float) and isinstance(actual, float):
        assert np.isclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True), f"{where}: {actual} != {expected}"
    else:
        assert type(actual) is type(expected) and actual == expected, f"{where}: {actual!r} != {expected!r}"


@dataclasses.dataclass
class Outcome:
    returned: Any
    raised: tuple[str, str] | None
    printed: str
    arguments: Any
    state: Any


def run(fn: Callable[..., Any], args: tuple, kwargs: dict, state: Callable[[], Any] | None) -> Outcome:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        try:
            returned, raised = observe(fn(*args, **kwargs)), None
        except Exception as exc:  # noqa: BLE001 - any user exception is part of the behaviour
            returned, raised = None, (type(exc).__name__, str(exc))
    return Outcome(returned, raised, printed.getvalue(), observe((args, kwargs)),
                   observe(state()) if state else None)


def assert_outcomes_same(actual: Outcome, expected: Outcome, where: str) -> None:
    assert actual.raised == expected.raised, f"{where}: raised {actual.raised}, eager raised {expected.raised}"
    assert actual.printed == expected.printed, f"{where}: printed {actual.printed!r}, eager {expected.printed!r}"
    assert_observed_same(actual.returned, expected.returned, f"{where}: result")
    assert_observed_same(actual.arguments, expected.arguments, f"{where}: arguments after the call")
    assert_observed_same(actual.state, expected.state, f"{where}: state after the call")


def check(fn: Callable[..., Any], *makers: ArgMaker, calls: int = 2, breaks: int | None = 0,
          fallbacks: int | None = 0, state: Callable[[], Any] | None = None, reset: Callable[[], None] | None = None,
          stable: bool = True, kwargs: Callable[[], dict] | None = None) -> Any:
    """Run ``fn`` eagerly and translated on the arguments of each maker, ``calls`` times each, and compare.

    ``makers`` build fresh arguments (the same values each time) so that mutations by one run are not seen by
    the next. ``reset()`` restores globals before every run; ``state()`` reads them after it. ``breaks`` is the
    exact number of graph breaks over the whole run and ``fallbacks`` the exact number of fallbacks (``None``:
    not checked). ``stable``: calling again with equal inputs must hit the cache (translate nothing new).
    """
    fast = sot.symbolic_translate(fn)
    for number, make in enumerate(makers or (tuple,)):
        for call in range(calls):
            where = f"{fn.__name__} inputs #{number} call {call + 1}"
            if reset:
                reset()
            expected = run(fn, make(), kwargs() if kwargs else {}, state)
            if reset:
                reset()
            before = sot.stats().translate_count
            actual = run(fast, make(), kwargs() if kwargs else {}, state)
            assert_outcomes_same(actual, expected, where)
            if stable and call > 0:
                assert sot.stats().translate_count == before, f"{where}: equal inputs translated again: {sot.stats()}"
    stats = sot.stats()
    assert fallbacks is None or stats.fallbacks == fallbacks, \
        f"{fn.__name__}: {stats.fallbacks} fallbacks, expected {fallbacks}: {stats}"
    if breaks is not None:
        assert stats.graph_breaks == breaks, f"{fn.__name__}: {stats.graph_breaks} breaks, expected {breaks}: {stats}"
    return stats


def args(*values: Any) -> ArgMaker:
    """A maker for immutable arguments (numbers, strings, tuples of them): no copy is needed."""
    return lambda: values


@dataclasses.dataclass
class Case:
    """One row of a conformance table: ``fn`` checked on each maker, with the expected counters."""

    fn: Callable[..., Any]
    makers: Sequence[ArgMaker]
    breaks: int | None = 0
    fallbacks: int = 0
    stable: bool = True

    @property
    def id(self) -> str:
        return self.fn.__name__


def case(fn: Callable[..., Any], *makers: ArgMaker, breaks: int | None = 0, fallbacks: int = 0,
         stable: bool = True) -> Case:
    return Case(fn, makers, breaks, fallbacks, stable)


def check_case(c: Case) -> None:
    check(c.fn, *c.makers, breaks=c.breaks, fallbacks=c.fallbacks, stable=c.stable)


def table_tests(cases: Sequence[Case]) -> tuple[Callable[..., None], Callable[..., None]]:
    """The two tests every family file runs over its table: each row with every graph compiled
    (``compile_all``), and with the default ``min_graph_size`` (small graphs replayed eagerly). Bound to
    module names by the caller, which pytest uses as the test names."""
    ids = [c.id for c in cases]

    @pytest.mark.parametrize("c", cases, ids=ids)
    def compiled(c: Case, compile_all: Any) -> None:
        check_case(c)

    @pytest.mark.parametrize("c", cases, ids=ids)
    def default_graph_size(c: Case) -> None:
        """The same rows with the default ``min_graph_size``: small graphs replayed eagerly instead of compiled."""
        check_case(c)

    return compiled, default_graph_size

"""Bugs found by the differential fuzzer, each reduced to a minimal program (the fuzz seed that found it is
named in the docstring). They fail until the bug is fixed."""
from __future__ import annotations

import contextlib
import io
import sys
import traceback
from typing import Any, Callable

import numpy as np
import paddle
import pytest

import sot
from _conformance import check
from sot import psdb


def _outcome(fn: Callable[..., Any], args: tuple) -> tuple[Any, Any, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            result: Any = fn(*args)
            error = None
        except Exception as exc:  # noqa: BLE001
            result, error = None, (type(exc).__name__, str(exc))
    return result, error, out.getvalue()


def _same(a: Any, b: Any) -> bool:
    if isinstance(b, paddle.Tensor):
        return isinstance(a, paddle.Tensor) and a.shape == b.shape and a.stop_gradient == b.stop_gradient \
            and np.allclose(a.numpy(), b.numpy())
    if isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(b, dict):
        return type(a) is type(b) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in b)
    if isinstance(b, Plain):
        return type(a) is type(b) and _same(vars(a), vars(b))
    return type(a) is type(b) and a == b


def assert_parity(fn: Callable[..., Any], make_args: Callable[[], tuple], min_graph_size: int,
                  calls: int = 2) -> None:
    """Eager vs translated (``calls`` times, fresh arguments each time): result, exception, printed output
    and the arguments after the call (mutations) must be the same (`_conformance.check`)."""
    with sot.config.patch(min_graph_size=min_graph_size):
        check(fn, make_args, calls=calls, breaks=None, fallbacks=None, stable=False)


def assert_translated_like_eager(observe: Callable[[Callable[..., Any]], Any], fn: Callable[..., Any],
                                 min_graph_size: int = 0, calls: int = 1) -> None:
    """What ``observe(f)`` sees of a call of ``f`` (its error's location, a backward's outcome...) is the
    same for ``fn`` translated, at each of ``calls`` calls, as for ``fn`` run eagerly."""
    expected = observe(fn)
    with sot.config.patch(min_graph_size=min_graph_size):
        translated = sot.symbolic_translate(fn)
        for call in range(calls):
            assert observe(translated) == expected, f"translated call {call + 1}"


def _innermost_frame(fn: Callable[..., Any], *args: Any) -> tuple[str, int | None]:
    """(function name, line) of the innermost traceback entry in this file of the error ``fn`` raises."""
    try:
        fn(*args)
    except Exception as exc:  # noqa: BLE001
        entries = [e for e in traceback.extract_tb(exc.__traceback__) if e.filename == __file__]
        return (entries[-1].name, entries[-1].lineno) if entries else ("<none>", None)
    raise AssertionError("did not raise")


# -- lost side effects -------------------------------------------------------------------------------------
def iadd_argument_list(x, lst):
    lst += [1]
    return x + 1


def test_inplace_add_to_an_argument_list_is_written_back() -> None:
    """Seeds 22, 64, 318, 402, 802, 820, 824, 2248: ``lst += [...]`` on a list argument is lost when the frame
    is compiled (``lst`` stays ``[6, 5]``)."""
    assert_parity(iadd_argument_list, lambda: (paddle.ones([2]), [6, 5]), min_graph_size=0)


def iadd_argument_list_and_return_it(x, lst):
    lst += lst
    psdb.breakgraph()
    return lst


def test_inplace_add_keeps_the_identity_of_the_list() -> None:
    """Seed 937: after ``lst += lst`` the name still refers to the argument; translated, the returned list is
    a new one (and the argument is unchanged)."""
    lst = [1, 2]
    with sot.config.patch(min_graph_size=10):
        result = sot.symbolic_translate(iadd_argument_list_and_return_it)(paddle.ones([2]), lst)
    assert result is lst and lst == [1, 2, 1, 2], (result, lst)


def iadd_argument_list_then_break(x, lst):
    lst += [1]
    print("p")
    return x


def test_inplace_add_to_an_argument_list_before_a_graph_break_is_written_back() -> None:
    """Seeds 243, 543, 669, 3135: the same before a graph break (default min_graph_size)."""
    assert_parity(iadd_argument_list_then_break, lambda: (paddle.ones([2]), [6, 5]), min_graph_size=10)


def append_to_three_lists_and_a_dict(x, a, b, c, d):
    a.append(1)
    b.append(2)
    c.append(3)
    d["k"] = 4
    return x * 2


def test_appended_lists_and_dict_write_back_do_not_share_temporaries() -> None:
    """Seeds 4, 14, 67, 83, 130, 160, 278 (flaky): a list only appended to is replayed by
    ``extend_list(lst, <added items>)`` where the added items are a temporary ListVariable; the code generator
    caches built containers by ``id(var)`` and the temporary dies right away, so the next temporary (of the
    next list, or the DictVariable of a dict write-back) can get the same id and reuse the first one's
    items: ``c`` silently receives ``[1]``, or ``write_back_dict(d, <a list>)`` raises ``TypeError: cannot
    convert dictionary update sequence element #0 to a sequence``. Address reuse is not deterministic, so
    the translation is repeated (it fails in about 1 attempt in 8)."""
    with sot.config.patch(min_graph_size=0):
        for attempt in range(120):
            sot.reset()
            padding = [object() for _ in range(attempt % 7)]  # vary the allocator state
            a, b, c, d = [], [], [], {"z": 0}
            try:
                sot.symbolic_translate(append_to_three_lists_and_a_dict)(paddle.ones([2]), a, b, c, d)
            except TypeError as exc:
                raise AssertionError(f"attempt {attempt}: {exc}") from exc
            assert (a, b, c, d) == ([1], [2], [3], {"z": 0, "k": 4}), (attempt, a, b, c, d)
            del padding


# -- gradients -------------------------------------------------------------------------------------------
def concat_with_parameter(x, w):
    return paddle.concat([x, w]).sum()


def stack_with_parameter(y, w):
    return paddle.sum(paddle.stack([paddle.tanh(y), paddle.tanh(w)]), axis=0)


def _parameter() -> paddle.Tensor:
    w = paddle.ones([2])
    w.stop_gradient = False
    return w


def test_concat_of_a_list_holding_a_differentiable_tensor_is_differentiable() -> None:
    """Seed 88: ops taking a *list* of tensors (concat, stack) get ``stop_gradient=True`` in a compiled
    graph when one of the tensors requires grad; eagerly it is False and ``backward()`` reaches ``w``."""
    x = paddle.ones([2])
    w_eager, w_sot = _parameter(), _parameter()
    expected = concat_with_parameter(x, w_eager)
    expected.backward()
    with sot.config.patch(min_graph_size=0):
        out = sot.symbolic_translate(concat_with_parameter)(x, w_sot)
    assert out.stop_gradient == expected.stop_gradient
    out.backward()
    assert w_sot.grad is not None and np.allclose(w_sot.grad.numpy(), w_eager.grad.numpy())


def test_stack_of_a_list_holding_a_differentiable_tensor_is_differentiable() -> None:
    """Seed 88 (as found): ``paddle.sum(paddle.stack([tanh(y), tanh(w)]), axis=0)``."""
    assert_parity(stack_with_parameter, lambda: (paddle.ones([2]), _parameter()), min_graph_size=0)


# -- exception messages and locations ---------------------------------------------------------------------
def remove_missing_in_try(x, lst):
    try:
        lst.remove(0)
    except Exception as exc:
        print("caught", type(exc).__name__, exc)
    return x


def test_list_remove_of_a_missing_value_has_the_eager_message() -> None:
    """Seed 264: prints ``0 is not in list`` (the message of list.index) instead of
    ``list.remove(x): x not in list``."""
    assert_parity(remove_missing_in_try, lambda: (paddle.ones([2]), [1, 2]), min_graph_size=0)


class Plain:
    def __init__(self, a):
        self.a = a


def del_missing_attribute_of_new_object(x):
    obj = Plain(2)
    del obj.extra
    return x * 2


def test_exception_of_a_replayed_attribute_deletion_points_at_its_line() -> None:
    """Seed 126: ``del obj.extra`` on an object built in the frame raises at the return line (the deletion is
    replayed after the graph with the line of the return)."""
    assert_translated_like_eager(lambda f: _innermost_frame(f, paddle.ones([2])), del_missing_attribute_of_new_object)


def index_error_before_break(x, i):
    y = x[i]
    print("p")
    return y


def test_exception_of_a_small_graph_before_a_break_points_at_its_line() -> None:
    """Seed 175: a graph smaller than min_graph_size is replayed eagerly at the break; its kernel error is
    raised with the line of the break (``print``) instead of the line of the op (and without the replay's
    location)."""
    assert_translated_like_eager(lambda f: _innermost_frame(f, paddle.ones([5]), -6), index_error_before_break,
                                 min_graph_size=10)


# -- in-place ops and autograd ------------------------------------------------------------------------------
def inplace_after_use_across_a_break(x, y, w):
    w = w - paddle.dot(w, y)
    print("p")
    y.add_(x)  # y was saved for the backward of dot
    return w


def _backward_outcome(fn: Callable[..., Any]) -> Any:
    """The gradient of ``w``, or what ``backward()`` raised (type and message)."""
    x, y = paddle.to_tensor([1.0, -2.0, 3.0]), paddle.to_tensor([0.5, 1.0, -1.0])
    w = paddle.to_tensor([1.0, 2.0, 3.0])
    w.stop_gradient = False
    with contextlib.redirect_stdout(io.StringIO()):
        out = fn(x, y, w)
    try:
        out.sum().backward()
    except Exception as exc:  # noqa: BLE001
        return ("raised", type(exc).__name__, str(exc))
    return ("grad", w.grad.numpy().tolist())


def test_inplace_change_of_a_saved_tensor_after_a_break_is_detected_in_backward() -> None:
    """Seed 650: eagerly, ``backward()`` refuses with a RuntimeError (``Tensor ... has been modified by an
    inplace operation``). Translated, it computed the gradient with the *modified* ``y``; then it refused with
    eager's message but as an OSError (a gradient hook checks the versions, and Paddle wraps any Python
    exception a hook raises). The hook now throws Paddle's own error from C++ (`sot.symbolic.version_check`):
    the same type, message and location."""
    assert _backward_outcome(inplace_after_use_across_a_break)[:2] == ("raised", "RuntimeError")
    assert_translated_like_eager(_backward_outcome, inplace_after_use_across_a_break, calls=2)


def exp_across_a_break(w):
    y = paddle.exp(w)  # the backward of exp reads its output
    print("p")
    return y


def _backward_after_changing_the_output_in_place(fn: Callable[..., Any]) -> BaseException | None:
    """What ``backward()`` raises after the caller changed the output of ``fn`` in place (None: it did not)."""
    w = paddle.to_tensor([1.0, -2.0, 3.0])
    w.stop_gradient = False
    with contextlib.redirect_stdout(io.StringIO()):
        out = fn(w)
    out.add_(paddle.ones([3]))
    try:
        out.sum().backward()
    except Exception as exc:  # noqa: BLE001
        return exc
    return None


def test_inplace_change_of_a_saved_output_never_gives_a_silent_gradient() -> None:
    """The output the program's backward reads, changed in place by the caller: eager refuses, so must the
    translated function, with eager's message."""
    with sot.config.patch(min_graph_size=0):
        for fn in (exp_across_a_break, sot.symbolic_translate(exp_across_a_break)):
            assert "has been modified by an inplace operation" in str(_backward_after_changing_the_output_in_place(fn))


def test_inplace_change_of_a_saved_output_raises_the_eager_exception_type() -> None:
    """Seed 2333 (``min_graph_size=0``; like seed 650 for a saved output): eager raises RuntimeError,
    translated raised an OSError with eager's message (see the test above for seed 650)."""
    def outcome(fn: Callable[..., Any]) -> tuple[str, str]:
        exc = _backward_after_changing_the_output_in_place(fn)
        return type(exc).__name__, str(exc)

    assert outcome(exp_across_a_break)[0] == "RuntimeError"
    assert_translated_like_eager(outcome, exp_across_a_break, calls=2)


def product_with_a_saved_input_across_a_break(x, y, w):
    z = w * y  # the backward reads y
    print("p")
    return z, z, w * x


def test_outputs_watched_for_in_place_changes_keep_their_values_gradients_and_identity() -> None:
    """Outputs of a program whose backward reads an input: bit for bit the eager values (-0.0, inf, nan),
    the same gradients, and an output returned twice is still one tensor."""
    def run(fn: Callable[..., Any]) -> tuple:
        x = paddle.to_tensor([-0.0, float("inf"), float("nan"), 2.0])
        y = paddle.to_tensor([1.0, 1.0, 1.0, -0.0])
        w = paddle.to_tensor([-0.0, 3.0, 1.0, 5.0])
        w.stop_gradient = False
        with contextlib.redirect_stdout(io.StringIO()):
            a, b, c = fn(x, y, w)
        (a.sum() + c.sum()).backward()
        bits = [t.numpy().view(np.uint32).tolist() for t in (a, c, w.grad)]
        return bits, a is b, a.stop_gradient, c.stop_gradient

    assert_translated_like_eager(run, product_with_a_saved_input_across_a_break)


# -- effects deferred past the code that should observe or catch them -------------------------------------
def delete_missing_attribute_in_try(x):
    try:
        obj = Plain(1)
        del obj.extra
    except AttributeError:
        pass
    return x + 1


def test_exception_of_a_deferred_effect_is_caught_by_the_enclosing_try() -> None:
    """Seed 908: ``del obj.extra`` inside ``try/except AttributeError`` is replayed after the graph, outside
    the ``try``: the AttributeError escapes to the caller instead of being caught."""
    assert_parity(delete_missing_attribute_in_try, lambda: (paddle.ones([2]),), min_graph_size=0)


def store_in_finally_after_a_failing_setitem(w, d):
    try:
        w[0] = 1.0  # in-place write to a leaf that requires grad: ValueError
    finally:
        d["a"] = 0
    return w


def test_finally_block_effects_survive_an_exception() -> None:
    """Seed 1145: the dict store of the ``finally`` block is lost when the ``try`` body raises (eagerly the
    caller sees ``d == {'a': 0}`` and the ValueError; translated ``d`` keeps ``{'a': 4}``)."""
    for min_graph_size in (0, 10):
        assert_parity(store_in_finally_after_a_failing_setitem, lambda: (_parameter(), {"a": 4}),
                      min_graph_size=min_graph_size)


def _make_counter_closure(n):
    acc = n

    def bump(k):
        nonlocal acc
        acc += k

    def read_after_bump(x):
        bump(4)
        return acc, x * 2

    return read_after_bump


def test_nonlocal_store_by_an_inlined_closure_is_seen_by_the_translated_frame() -> None:
    """Seed 1916: the translated frame ``read_after_bump`` reads the cell ``acc`` after the inlined ``bump``
    assigned it through ``nonlocal``: it reads the stale value (5 instead of 9)."""
    x = paddle.ones([2])
    expected = _make_counter_closure(5)(x)[0]
    with sot.config.patch(min_graph_size=0):
        got = sot.symbolic_translate(_make_counter_closure(5))(x)[0]
    assert got == expected == 9, got


# -- guards -------------------------------------------------------------------------------------------------
def sorted_dict_items(x, d):
    return x.sum(), sorted(d.items())


def print_sorted_dict_items(x, d):
    print(sorted(d.items()))
    return x.sum()


def test_sorted_dict_items_are_guarded_by_value() -> None:
    """Seed 1554: ``sorted(d.items())`` is folded to a constant without a guard on the values: a second call
    with ``{'a': -3}`` returns (or prints) the items of the first call, ``[('a', 5)]``."""
    with sot.config.patch(min_graph_size=0):
        translated = sot.symbolic_translate(sorted_dict_items)
        for d in ({"a": 5}, {"a": -3}):
            assert translated(paddle.ones([2]), d)[1] == sorted(d.items())


def test_printed_sorted_dict_items_are_guarded_by_value() -> None:
    """Seed 1554 (as found, default min_graph_size): the same through ``print``."""
    translated = sot.symbolic_translate(print_sorted_dict_items)
    for d in ({"a": 5}, {"a": -3}):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            translated(paddle.ones([2]), d)
        assert out.getvalue() == f"{sorted(d.items())}\n"


def append_tensor_to_argument_list(y, tl):
    tl.append(y * 1)
    return 1


def test_appending_to_a_list_then_calling_with_a_shorter_list() -> None:
    """Seeds 1744, 1966: compiled for a list of 3 tensors, the call with an empty list hits the cache entry
    and raises ``IndexError: list index out of range`` (no length guard, but items read by index)."""
    with sot.config.patch(min_graph_size=0):
        translated = sot.symbolic_translate(append_tensor_to_argument_list)
        for n in (3, 0):
            tl = [paddle.ones([2]) for _ in range(n)]
            assert translated(paddle.ones([2]), tl) == 1
            assert len(tl) == n + 1


COPY_TARGET: dict = {}


def update_a_global_dict_from_an_argument(x, d):
    COPY_TARGET.update(d)
    return x + 1


def copy_an_argument_dict(x, d):
    return x + 1, dict(d)


@pytest.mark.parametrize("fn", [update_a_global_dict_from_an_argument, copy_an_argument_dict])
def test_every_key_of_a_dict_read_whole_is_guarded(fn) -> None:
    """Seed 3000: ``GDICT.update(d)`` (and ``dict(d)``) read every key of ``d`` without guarding them: a
    call with a dict that has one more key hit the entry and lost that key."""
    def outcome(f: Callable[..., Any], d: dict) -> Any:
        COPY_TARGET.clear()
        result = f(paddle.ones([2]), dict(d))
        return dict(COPY_TARGET), result[1] if isinstance(result, tuple) else None

    with sot.config.patch(min_graph_size=0):
        translated = sot.symbolic_translate(fn)
        for d in ({"a": -1, "c": 1}, {"a": -1, "c": 1}, {"a": 5, "b": 1, "c": -2}, {"c": 3}):
            assert outcome(translated, d) == outcome(fn, d), d


# -- builtins ----------------------------------------------------------------------------------------------
def max_of_empty_list_in_try(x, lst):
    try:
        max(lst)
    except Exception as exc:
        print(type(exc).__name__, exc)
    return x


def test_max_of_an_empty_list_has_the_eager_error() -> None:
    """Seeds 1984, 2320, 3023: ``max([])`` raises ``TypeError: max expected at least 1 argument, got 0``
    instead of ``ValueError: max() arg is an empty sequence`` (simulated as ``max(*items)``)."""
    assert_parity(max_of_empty_list_in_try, lambda: (paddle.ones([2]), []), min_graph_size=0)


def read_then_setattr_then_break(x, box, n):
    old = box.a
    setattr(box, "a", n)
    print("p")
    return old


def test_value_read_before_setattr_keeps_its_value_across_a_break() -> None:
    """Seed 3333: ``old = box.a`` read before ``setattr(box, 'a', n)`` is rebuilt from ``box.a`` after the
    break, so it returns the new value (7 instead of 3). (``box.a = n`` is handled; the builtin is not.)"""
    for min_graph_size in (0, 10):
        assert_parity(read_then_setattr_then_break, lambda: (paddle.ones([2]), Plain(3), 7),
                      min_graph_size=min_graph_size)


# -- folded containers and operators on containers -----------------------------------------------------------
def compare_and_format_argument_list(x, lst):
    return x.sum(), lst == [3, 1], str(lst)


def test_a_list_folded_into_a_constant_is_guarded_by_its_items() -> None:
    """Reading a whole argument list (``==``, ``str()``) guarded only its length: a second call with a list
    of the same length but other items returned the first call's result."""
    with sot.config.patch(min_graph_size=0):
        translated = sot.symbolic_translate(compare_and_format_argument_list)
        for lst in ([3, 1], [9, 7]):
            assert translated(paddle.ones([2]), lst)[1:] == (lst == [3, 1], str(lst))


def repeat_and_merge_in_place(x, lst, d):
    alias = lst
    lst *= 2
    d |= {"k": 1}
    return x + 1, alias is lst


def test_inplace_repeat_and_merge_change_the_argument_containers() -> None:
    """``lst *= 2`` and ``d |= {...}`` mutate the very containers (written back, names still aliases)."""
    assert_parity(repeat_and_merge_in_place, lambda: (paddle.ones([2]), [1, 2], {"a": 0}), min_graph_size=0)


class Accumulator:
    def __init__(self) -> None:
        self.total = 0

    def __iadd__(self, other):
        self.total += other
        return self


def inplace_add_to_an_object(x, acc):
    acc += 5
    return x * 2


def test_inplace_operator_of_an_object_runs_at_every_call() -> None:
    """An in-place operator of a user object (``__iadd__``) was folded: it ran once, during the simulation,
    on the object of the first call, and never again."""
    translated = sot.symbolic_translate(inplace_add_to_an_object)
    with sot.config.patch(min_graph_size=0):
        for _ in range(3):
            acc = Accumulator()
            translated(paddle.ones([2]), acc)
            assert acc.total == 5


# -- aliasing ------------------------------------------------------------------------------------------------
def append_to_one_read_the_other(x, a, b):
    a.append(1)
    return x + len(b)


def test_a_list_passed_twice_and_two_lists_do_not_share_a_translation() -> None:
    """One list passed as both arguments is one simulated list (``b`` sees the append), but the guard did
    not check that: two distinct lists reused that translation (and the reverse order failed the same way,
    no guard that they were distinct)."""
    translated = sot.symbolic_translate(append_to_one_read_the_other)
    with sot.config.patch(min_graph_size=0):
        for aliased in (True, False, True, False):
            a = [1]
            b = a if aliased else [1]
            expected = 3.0 if aliased else 2.0
            assert translated(paddle.ones([1]), a, b).item() == expected, aliased


def store_through_one_read_through_the_other(x, o, p):
    o.a = 7
    return x + p.a


def test_an_attribute_stored_through_one_path_is_read_through_another_only_when_aliased() -> None:
    """``p.a`` after ``o.a = 7`` is read from the simulated store only if ``p is o``: guarded now."""
    translated = sot.symbolic_translate(store_through_one_read_through_the_other)
    with sot.config.patch(min_graph_size=0):
        for aliased in (True, False, True):
            o = Plain(1)
            p = o if aliased else Plain(1)
            assert translated(paddle.ones([1]), o, p).item() == (8.0 if aliased else 2.0), aliased


def compare_identity_of_arguments(x, a, b):
    return x + 1, a is b, b


def test_identity_of_two_list_arguments_is_guarded() -> None:
    """``a is b`` of two lists (and rebuilding ``b``, which is ``a``'s variable when aliased) must not be
    reused for arguments that alias differently."""
    translated = sot.symbolic_translate(compare_identity_of_arguments)
    with sot.config.patch(min_graph_size=0):
        for aliased in (False, True, False, True):
            a = [1]
            b = a if aliased else [2]
            _, same, returned = translated(paddle.ones([1]), a, b)
            assert same is aliased and returned is b, aliased


def count_in_argument_list(x, lst):
    return x + lst.count(3)


def test_count_of_an_empty_list_is_guarded_by_its_length() -> None:
    """Seed 3462: ``[].count(3)`` guarded no item (there are none) and not the length either: a later call
    with ``[3, 2]`` reused the answer 0."""
    translated = sot.symbolic_translate(count_in_argument_list)
    with sot.config.patch(min_graph_size=0):
        for lst in ([], [3, 2], []):
            assert translated(paddle.ones([1]), lst).item() == 1.0 + lst.count(3), lst


STORES = 0


def store_a_global_then_fail_in_the_graph(x):
    global STORES
    STORES += 1
    y = paddle.ones([1])
    return x + y[-2]


def test_global_stored_before_a_failing_graph_op_is_kept() -> None:
    """Seed 4256: eagerly ``STORES`` is incremented before ``y[-2]`` raises IndexError; translated, the store
    is replayed after the graph, which raised first: the store is lost."""
    global STORES
    for min_graph_size in (0, 10):
        STORES = 0
        with sot.config.patch(min_graph_size=min_graph_size):
            try:
                sot.symbolic_translate(store_a_global_then_fail_in_the_graph)(paddle.ones([1]))
            except Exception:  # noqa: BLE001 - eager raises too
                pass
        assert STORES == 1, (min_graph_size, STORES)


def set_then_hasattr(x, box):
    box.extra = 3
    return x + 1, hasattr(box, "extra"), getattr(box, "extra", None)


def hasattr_of_an_argument(x, box):
    return x + 1, hasattr(box, "extra"), getattr(box, "extra", 0)


def test_hasattr_sees_an_attribute_stored_earlier_in_the_frame() -> None:
    """Seed 549: ``hasattr(obj, 'extra')`` after ``obj.extra = 3`` asked the real object, where the store
    is only replayed after the graph: False instead of True."""
    assert_parity(set_then_hasattr, lambda: (paddle.ones([2]), Plain(1)), min_graph_size=0)


def test_hasattr_of_a_plain_object_is_guarded() -> None:
    """A plain instance is guarded by type: whether it has the attribute must be guarded too."""
    translated = sot.symbolic_translate(hasattr_of_an_argument)
    with sot.config.patch(min_graph_size=0):
        for has in (False, True, False):
            box = Plain(1)
            if has:
                box.extra = 5
            assert translated(paddle.ones([2]), box)[1:] == (has, 5 if has else 0), has


STORED = None


def subtract_from_a_detached_copy(x, y, w):
    global STORED
    paddle.tanh(y - w)
    STORED = (-1.93 * x) + paddle.tanh(y)  # a graph output whose backward keeps the program's scope busy
    v = (y.detach() - paddle.tanh(x)).detach()
    v -= x + x
    print("p")
    return 1


def test_a_compiled_program_never_writes_into_its_input() -> None:
    """Seed 3927: every other call wrote ``v``'s final value into the caller's ``y``: the program runner
    builds a new interpreter for each new scope, and Paddle's in-place pass was only switched off for the
    first one."""
    translated = sot.symbolic_translate(subtract_from_a_detached_copy)
    with sot.config.patch(min_graph_size=10), contextlib.redirect_stdout(io.StringIO()):
        for call in range(4):
            y = paddle.to_tensor([1.0, 2.0])
            w = paddle.to_tensor([0.1, 0.1])
            w.stop_gradient = False
            translated(paddle.to_tensor([0.5, 0.5]), y, w)
            assert y.numpy().tolist() == [1.0, 2.0], (call, y.numpy())


def reads_its_own_frame(t):
    sys._getframe(0)  # the translation of this frame falls back
    return t + 1


def steps_an_iterator_to_its_end(t):
    it = iter([1])
    next(it)
    try:
        next(it)  # the simulation falls back here (user code raised StopIteration)
    except StopIteration:
        pass
    return t + 1


def delete_then_call_in_finally(helper, x, obj):
    try:
        del obj.extra
    finally:
        x = helper(x)
    return x


@pytest.mark.parametrize("helper", [reads_its_own_frame, steps_an_iterator_to_its_end])
def test_a_fallback_inside_finally_keeps_the_traceback_of_the_exception_in_flight(helper) -> None:
    """Seed 477: the traceback of the AttributeError re-raised after ``finally`` lost the user's frame.
    The helper called in the ``finally`` block falls back; Python chains the translator's FallbackError to
    the exception being handled (the user's AttributeError), and dropping the failure's tracebacks walked
    that chain and cleared the user's traceback too."""
    assert_translated_like_eager(lambda f: _innermost_frame(f, helper, paddle.ones([2]), Plain(1)),
                                 delete_then_call_in_finally, calls=2)


def breaks_the_graph(t):
    eval("1")  # a graph break: the rest of the frame resumes in a new function
    return t + 1


def test_a_graph_break_inside_finally_keeps_the_line_of_the_exception_in_flight() -> None:
    """Fixed (kept as a regression test); was: Found with seed 477's reduction (known bug): the caller breaks
    its graph at the call in ``finally`` and the resume function re-raises the AttributeError after the
    ``finally`` block: its traceback then points at the line of the call in ``finally`` instead of ``del
    obj.extra`` (3.11+; 3.10 passes). The AttributeError was raised by the simulation, so it carries no entry
    of the user's frame, and the generated code raises it from the line of the break; eager ``RERAISE`` keeps
    the entry of the line that raised it first."""
    assert_translated_like_eager(lambda f: _innermost_frame(f, breaks_the_graph, paddle.ones([2]), Plain(1)),
                                 delete_then_call_in_finally)


# -- symbolic ints -------------------------------------------------------------------------------------------
def divide_by_a_derived_int(x, n, m):
    return x + n // (m - 2), n % (m - 2)


def divide_by_a_first_item_or_zero(x, n, m):
    v = m[0] if m else 0
    return x + 1, n // v


def test_a_symbolic_int_divided_by_zero_raises_without_an_internal_error() -> None:
    """Seed 834: ``n // v8`` with ``n`` a symbolic int and ``v8 == 0`` raised ZeroDivisionError inside the
    translator (an internal error, then a fallback) instead of being the user's exception; and a symbolic
    divisor that is 0 at a later call must not reuse the entry compiled for a non-zero one."""
    from .harness import watch_internal_errors

    cases = {divide_by_a_derived_int: [(7, 5), (9, 6), (7, 2), (5, 4), (3, 2), (-8, 7)],
             divide_by_a_first_item_or_zero: [(7, [2]), (9, [2]), (7, []), (5, [3]), (-4, [])]}
    with sot.config.patch(min_graph_size=0), watch_internal_errors() as internal:
        for fn, calls in cases.items():
            translated = sot.symbolic_translate(fn)
            for n, m in calls:
                expected = _outcome(fn, (paddle.ones([2]), n, m))
                got = _outcome(translated, (paddle.ones([2]), n, m))
                assert got[1] == expected[1] and _same(got[0], expected[0]), (fn.__name__, n, m, got, expected)
    assert internal.messages == []


def overwrites_an_item_of_a_computed_tensor(w, n):
    w = w * 3
    w[0] = n - 0.25  # (eager: no gradient reaches w[0] through the overwritten item)
    return w ** 2


def test_the_gradient_through_an_item_set_in_a_compiled_graph_skips_the_overwritten_item() -> None:
    """Seed 65 (after main's in-place ops met s13h3's closures alive across breaks, which made the frame
    translated instead of falling back): ``t[0] = v`` on a tensor computed in the frame is compiled as the
    out-of-place setitem, and the gradient of ``w`` then flows through the overwritten item as if it were
    kept ([106.5, ...] instead of [0, ...])."""
    def grad_of_w(fn) -> np.ndarray:
        w = paddle.to_tensor([-0.066, -1.833, -1.058], stop_gradient=False)
        fn(w, 18).sum().backward()
        return w.grad.numpy()

    expected = grad_of_w(overwrites_an_item_of_a_computed_tensor)
    with sot.config.patch(min_graph_size=0):
        translated = sot.symbolic_translate(overwrites_an_item_of_a_computed_tensor)
        np.testing.assert_allclose(grad_of_w(translated), expected)


def divide_then_change_the_quotient_in_place(x, y, w):
    w = w.cumsum(0) / y  # eager's divide keeps its output for the backward
    w.add_(x)
    return w


def multiply_then_change_a_factor_in_place(x, y, w):
    v = w * 2
    z = v * y  # eager's multiply keeps its inputs
    v.add_(x)
    return z + v


def change_a_plain_factor_in_place(x, y, w):
    z = (w * 2) * y  # multiply keeps y, which requires no grad itself (seed 12988)
    y.add_(x)
    return z + y


def change_a_sum_in_place_then_exp(x, y, w):
    v = w * 2 + y  # add keeps nothing: changing its output is fine
    v.add_(x)
    return paddle.exp(v)


@pytest.mark.parametrize("fn, eager_refuses", [(divide_then_change_the_quotient_in_place, True),
                                               (multiply_then_change_a_factor_in_place, True),
                                               (change_a_plain_factor_in_place, True),
                                               (change_a_sum_in_place_then_exp, False)])
def test_an_in_place_change_of_a_tensor_an_op_of_the_graph_saved_is_refused_by_backward(fn, eager_refuses) -> None:
    """Seed 2428 (``min_graph_size=0``): ``w.add_(x)`` on the output of a division compiled in the same graph.
    Eager's ``backward()`` refuses (the divide node kept its output); the compiled program recorded the
    out-of-place add and computed a gradient silently. Such a frame now runs natively; an in-place change of
    a tensor no op kept still compiles."""
    def run(f: Callable[..., Any], size: int) -> Any:
        x, y = paddle.arange(1.0, size + 1), paddle.arange(2.0, size + 2)
        w = paddle.to_tensor(np.linspace(-2, 3, size).astype("float32"), stop_gradient=False)
        out = f(x, y, w)
        try:
            out.sum().backward()
        except RuntimeError as exc:
            return "refused", "modified by an inplace operation" in str(exc)
        return np.round(out.numpy(), 4).tolist(), np.round(w.grad.numpy(), 4).tolist()

    assert (run(fn, 3)[0] == "refused") == eager_refuses
    with sot.config.patch(min_graph_size=0):
        translated = sot.symbolic_translate(fn)
        for size in (3, 3, 5, 4):  # (then with a dynamic dimension)
            assert run(translated, size) == run(fn, size), size
    assert sot.stats().fallbacks == (2 if eager_refuses else 0)


def scaled_by_an_int_argument(x, n):
    return x * n, n * x, x * (2 - n)


def test_a_product_by_a_symbolic_int_has_eager_zeros() -> None:
    """Seed 12188 (``min_graph_size=0``): eager multiplies a tensor by a Python int with ``scale(x, n,
    bias=0.0)``, so ``-0.0 * 2`` and ``1.7 * 0`` are both 0.0. Once the int varies between calls it is a
    symbolic int, a tensor of the program, and the tensor product gave -0.0 for both."""
    def bits(values: tuple) -> list:
        return [np.signbit(t.numpy()).tolist() + t.numpy().tolist() for t in values]

    with sot.config.patch(min_graph_size=0):
        translated = sot.symbolic_translate(scaled_by_an_int_argument)
        for n in (5, 3, 2, 0, -1):
            x = paddle.to_tensor([1.7, -0.0, -1.4, 0.0])
            assert bits(translated(x, n)) == bits(scaled_by_an_int_argument(x, n)), n


def read_an_item_at_an_int_argument(x, y, n):
    x = x + 1
    return x, float(y[n])


def write_an_item_at_an_int_argument(x, n):
    x = x * 2
    x[n] = 7.0
    return x


@pytest.mark.parametrize("fn", [read_an_item_at_an_int_argument, write_an_item_at_an_int_argument])
def test_an_item_index_from_an_int_argument_out_of_range_raises_index_error(fn) -> None:
    """Seed 12316 (``min_graph_size=0``): ``y[n]`` with ``n`` varying between calls (a symbolic int, an
    input of the program); at ``n == 5`` on 5 items eager raises IndexError, the static program read outside
    the tensor (an uninitialized result: ``float()`` of it raised AssertionError). The index is guarded to
    stay in range: a call out of range translates again and raises as eager does."""
    def make_args(n: int) -> tuple:
        tensors = (paddle.ones([5]), paddle.arange(5.0)) if fn is read_an_item_at_an_int_argument \
            else (paddle.arange(5.0),)
        return (*tensors, n)

    with sot.config.patch(min_graph_size=0):
        translated = sot.symbolic_translate(fn)
        for n in (3, 3, 2, 5, -5, 4, -6, 1):
            got, expected = _outcome(translated, make_args(n)), _outcome(fn, make_args(n))
            assert got[1] == expected[1] and _same(got[0], expected[0]), (n, got, expected)


def length_of_a_set_made_at_a_break(x, s, lst, d):
    acc = d.get("c", 3)

    def bump():
        nonlocal acc

    n = len(set(lst))  # (``set(...)`` breaks the graph: the resumed function receives the set)
    print("p", n)
    return x, paddle.to_tensor(s)


def test_the_length_of_a_set_a_resumed_function_receives_is_guarded() -> None:
    """Seed 12336: the function resumed after ``set(lst)`` folded ``len`` of the set it received without a
    guard on the set; called again with another list (after a cache miss of the outer function), it
    printed the old length."""
    calls = [(-1.22, [], {"c": 3}), (-1.22, [], {"c": 3}), (0.0, [4], {"c": -1}), (-1.22, [], {"c": 3}),
             (0.5, [1, 2, 2], {})]
    with sot.config.patch(min_graph_size=0):
        translated = sot.symbolic_translate(length_of_a_set_made_at_a_break)
        for s, lst, d in calls:
            args = (paddle.ones([2]), s, lst, d)
            assert _outcome(translated, args)[2] == _outcome(length_of_a_set_made_at_a_break, args)[2], lst


def keep_a_factor_then_change_it_after_a_break(x, y, w):
    w = w - (-1 * y)
    unused = ((w * y) * y[1].item()).sum()  # multiply keeps y; ``item()`` breaks the graph
    y[0] = 0.0
    return w[1]


def test_a_factor_changed_after_a_break_only_matters_to_the_backward_through_its_op() -> None:
    """Seed 13877 (``min_graph_size=10``): ``y`` kept by ``w * y``, then changed in place after a break;
    eager's backward from ``w[1]`` never reaches that multiply and computes the gradient. The compiled
    program's version check (a hook on each output) refused: the hook of ``w`` watched every tensor the
    program's backward keeps, and the hook of the unused product ran too, with no gradient."""
    def run(fn: Callable[..., Any]) -> Any:
        y = paddle.to_tensor([2.0, 3.0, 4.0])
        w = paddle.to_tensor([1.0, -2.0, 3.0], stop_gradient=False)
        out = fn(paddle.ones([3]), y, w)
        try:
            out.sum().backward()
        except Exception as exc:  # noqa: BLE001
            return type(exc).__name__
        return w.grad.numpy().tolist()

    expected = run(keep_a_factor_then_change_it_after_a_break)
    with sot.config.patch(min_graph_size=0):
        translated = sot.symbolic_translate(keep_a_factor_then_change_it_after_a_break)
        assert run(translated) == expected == [0.0, 1.0, 0.0]
        assert run(translated) == expected


def build_a_set_of_two_ints(x, n, m):
    return x + 1, list({n, m}), {n, m}


def test_a_set_built_in_the_frame_iterates_in_eager_order() -> None:
    """Seeds 15744, 15858: ``{-3, 5}`` (two ints whose hashes collide in a small table) was simulated as a
    Python set holding the same values, and rebuilt after the graph with ``BUILD_SET`` from that set's
    iteration order: another insertion order, so the rebuilt set iterated ``[-3, 5]`` where the eager one
    iterates ``[5, -3]``. The simulated set is now a real set made by the frame's own operations, and the
    rebuilt one a copy of its very table (see tests/opcode_translator/executor/variables/test_set_layout.py)."""
    with sot.config.patch(min_graph_size=0):
        translated = sot.symbolic_translate(build_a_set_of_two_ints)
        for n, m in ((-3, 5), (5, -3)):
            expected = build_a_set_of_two_ints(paddle.ones([1]), n, m)[1:]
            got = translated(paddle.ones([1]), n, m)[1:]
            assert (got[0], list(got[1])) == (expected[0], list(expected[1])), (n, m)


def sum_of_a_leaf_after_an_inplace_change_and_a_break(x, y, w):
    y -= w.sum()  # (a new tensor: Paddle's Tensor has no ``__isub__``) y now depends on w
    print("break")
    return y.mean(), w.sum(), y * 1


def test_the_gradient_through_a_graph_reading_an_input_changed_in_place_before_a_break() -> None:
    """Seed 81530 (Python 3.10 and 3.11): ``y -= w.sum()`` before a graph break, then a graph whose outputs
    are ``y.mean()``, ``w.sum()`` and ``y * 1``. Eagerly ``backward()`` gives ``w`` its gradient ([-3] * 3);
    translated, the backward of the second graph failed (``SotError: cannot compute the gradient of graph ...:
    the program computing it failed``, from the product program of `CompiledProgram.input_gradients`).
    Nothing is changed in place (``-=`` rebinds ``y``): the second graph, run with a recomputing backward (``w``
    is a leaf), has outputs in two interleaved groups (0 and 2 from ``y``, 1 from ``w``), whose gradients were
    handed to the product program in the order of the groups, which pairs them with the outputs by index (the
    gradient of ``y * 1`` went to ``w.sum()``: shapes [3] and []). The break only made ``y`` and ``w`` two
    inputs. See test_outputs_of_interleaved_groups_get_their_own_gradients in
    tests/symbolic/test_higher_order_gradients.py (with outputs of one shape it was a wrong gradient)."""
    def run(fn: Callable[..., Any]) -> Any:
        x = paddle.to_tensor([1.0, 0.0, 1.0])
        y = paddle.to_tensor([-1.5, -1.0, -2.0])
        w = paddle.to_tensor([-1.5, 0.5, 0.5], stop_gradient=False)
        with contextlib.redirect_stdout(io.StringIO()):
            outs = fn(x, y, w)
        try:
            (outs[0].sum() + outs[1].sum() + outs[2].sum()).backward()
        except Exception as exc:  # noqa: BLE001
            return type(exc).__name__
        return w.grad.numpy().tolist()

    expected = run(sum_of_a_leaf_after_an_inplace_change_and_a_break)
    assert expected == [-3.0, -3.0, -3.0]
    with sot.config.patch(min_graph_size=0):
        translated = sot.symbolic_translate(sum_of_a_leaf_after_an_inplace_change_and_a_break)
        assert run(translated) == expected
        assert run(translated) == expected


def reversed_after_append(x, tl):
    tl.append(x)
    out = []
    for t in reversed(tl):
        psdb.breakgraph()
        out.append(t + 1)
    return out


def enumerate_reversed_after_append(x, tl):
    tl.append(x)
    out = []
    for i, t in enumerate(reversed(tl)):
        psdb.breakgraph()
        out.append(t * i)
    return out


def reversed_made_before_append(x, tl):
    it = reversed(tl)
    tl.append(x)
    out = []
    for t in it:
        psdb.breakgraph()
        out.append(t + 1)
    return out


def reversed_of_a_local_list_then_append(x, tl):
    local = [x, x * 2]
    it = reversed(local)
    local.append(x * 3)
    out = []
    for t in it:
        psdb.breakgraph()
        out.append(t + 1)
    return out


@pytest.mark.parametrize("fn", [reversed_after_append, enumerate_reversed_after_append, reversed_made_before_append,
                                reversed_of_a_local_list_then_append])
@pytest.mark.parametrize("length", [0, 2])
def test_an_iterator_remade_at_a_loop_break_sees_the_content_it_was_made_on(fn, length) -> None:
    """Seed 101871: ``tl.append(w); for e in reversed(tl): <graph break>`` with ``tl`` empty never ran the body.
    At the break the loop's iterator is made again by the generated code, which did so before replaying the
    side effects: ``reversed`` snapshots the length of the list, so it saw ``tl`` without the appended item.
    An iterator is now made again before the effects or after, as its containers changed after or before it
    was made (neither point is right for a list made in the frame and changed after: that frame runs natively)."""
    assert_parity(fn, lambda: (paddle.ones([2]), [paddle.full([2], float(i + 2)) for i in range(length)]),
                  min_graph_size=0)


def return_reversed_after_append(x, tl):
    tl.append(x)
    return reversed(tl), x + 1


def test_a_returned_iterator_sees_the_content_it_was_made_on() -> None:
    """As above (seed 101871), for an iterator the translated frame returns inside a tuple: it was made before
    the append was replayed on the caller's list."""
    def observe(fn: Callable[..., Any]) -> Any:
        tl = [paddle.full([2], 5.0)]
        it, y = fn(paddle.ones([2]), tl)
        return [t.numpy().tolist() for t in it], y.numpy().tolist(), len(tl)

    assert_translated_like_eager(observe, return_reversed_after_append, min_graph_size=0, calls=2)


def set_items_under_no_grad(w, t, tl):
    y = w * 2
    with paddle.no_grad():
        t[:] = y
        tl[0][1:] = y[1:] if tl else y
    return t * 3


def test_item_assignment_of_a_differentiable_value_under_no_grad_makes_the_tensor_require_grad() -> None:
    """Seed 103780: eager's ``t[:] = y`` under ``paddle.no_grad()``, ``y`` requiring grad, makes ``t`` require
    grad (a new leaf: a later backward fills ``t.grad``); the compiled set_value statement left ``t`` as it
    was. (Only ``__setitem__`` does this: ``add_``, ``copy_``, ``paddle.assign(..., output=t)`` do not.)"""
    def observe(fn: Callable[..., Any]) -> Any:
        w = _parameter()
        t, tl = paddle.zeros([2]), [paddle.zeros([2])]
        out = fn(w, t, tl)
        out.sum().backward()
        return (out.stop_gradient, t.stop_gradient, tl[0].stop_gradient, t.numpy().tolist(), tl[0].numpy().tolist(),
                None if t.grad is None else t.grad.numpy().tolist(), None if w.grad is None else w.grad.numpy().tolist())

    assert_translated_like_eager(observe, set_items_under_no_grad, min_graph_size=0, calls=2)


def scale_by_an_int_then_step_under_no_grad(x, w, n):
    y = w * n
    with paddle.no_grad():
        w.subtract_(x)
    return y


def test_a_product_by_a_symbolic_int_keeps_nothing_for_its_backward() -> None:
    """Seed 121378: once ``n`` was seen with a second value (a symbolic int), ``w * n`` was a product by a
    tensor, whose backward keeps ``w``: the step ``w.subtract_(x)`` under no_grad then made backward refuse
    ("modified by an inplace operation"), where eager's ``scale(w, n)`` keeps nothing. It is now that scale."""
    def outcome(fn: Callable[..., Any], n: int) -> Any:
        w = _parameter()
        try:
            fn(paddle.ones([2]), w, n).sum().backward()
        except Exception as exc:  # noqa: BLE001
            return type(exc).__name__
        return w.grad.numpy().tolist()

    with sot.config.patch(min_graph_size=0):
        translated = sot.symbolic_translate(scale_by_an_int_then_step_under_no_grad)
        for n in (2, 3, 4, -1):
            assert outcome(translated, n) == outcome(scale_by_an_int_then_step_under_no_grad, n), n


def divide_by_a_number_then_step_under_no_grad(x, w):
    y = w / 2
    with paddle.no_grad():
        w.subtract_(x)
    return y


def divide_by_a_filled_tensor_then_step_under_no_grad(x, w):
    y = w / paddle.full([], 2.0)
    with paddle.no_grad():
        w.subtract_(x)
    return y


def divide_by_a_tensor_then_step_under_no_grad(x, w):
    y = w / x
    with paddle.no_grad():
        w.subtract_(x)
    return y


def divide_a_float64_by_a_number_then_step_under_no_grad(x, w):
    w = w.astype("float64")
    y = w / 2.5
    with paddle.no_grad():
        w.subtract_(x.astype("float64"))
    return y


@pytest.mark.parametrize("fn", [divide_by_a_number_then_step_under_no_grad,
                                divide_a_float64_by_a_number_then_step_under_no_grad,
                                divide_by_a_filled_tensor_then_step_under_no_grad,
                                divide_by_a_tensor_then_step_under_no_grad],
                         ids=["number", "float64-number", "filled-tensor", "tensor"])
def test_a_division_by_a_number_keeps_nothing_for_its_backward(fn: Callable[..., Any]) -> None:
    """Found next to seed 121378: eager's ``w / 2`` is ``div_scale`` (DivScaleGradNode), which keeps nothing of
    ``w``; the program divides by a filled tensor (eager's rounding, `sir._divide_as_eager`) with a divide whose
    backward op lists ``w``, so an in-place step of ``w`` under no_grad before ``backward()`` made the
    translated backward refuse where eager computes. A division by a tensor (a user's filled one included)
    keeps ``w`` in eager: the translated backward must still refuse there."""
    def observe(f: Callable[..., Any]) -> Any:
        w = _parameter()
        try:
            f(paddle.ones([2]) * 3, w).sum().backward()
        except Exception as exc:  # noqa: BLE001
            return type(exc).__name__
        return w.grad.numpy().tolist()

    assert_translated_like_eager(observe, fn, min_graph_size=0)


def write_through_a_reshaped_view_after_a_break(y, s):
    t = y.reshape([-1, 1]).squeeze(-1)
    psdb.breakgraph()
    t[0] = s
    return t


def test_a_view_made_with_a_dynamic_dimension_is_still_a_view_of_its_base() -> None:
    """Seed 122592: translated again for another length (a dynamic dimension), ``reshape``/``squeeze`` of an
    input could not be probed, so the view left the program as a tensor of its own, and ``t[0] = s`` after the
    break no longer reached ``y``. The probe now gives a dynamic dimension a size."""
    def observe(fn: Callable[..., Any]) -> Any:
        return [(lambda y: (fn(y, -0.0), str(y.numpy().tolist()))[1])(paddle.arange(n, dtype="float32") + 1)
                for n in (4, 2, 3)]

    assert_translated_like_eager(observe, write_through_a_reshaped_view_after_a_break, min_graph_size=0, calls=2)


@contextlib.contextmanager
def _swallowing_value_errors() -> Any:
    try:
        yield
    except ValueError:
        pass


def failing_leaf_add_in_a_while_loop(w, t):
    i = 0
    while i < 2:
        i += 1
        with _swallowing_value_errors():
            w.add_(t)  # (eager changes the leaf's data, then raises ValueError)
    return w


def failing_leaf_add_in_a_try_in_a_while_loop(w, t):
    i = 0
    while i < 3:
        i += 1
        try:
            w.add_(t)
        except ValueError:
            w = w * 1 if i == 2 else w
    return w


@pytest.mark.parametrize("fn", [failing_leaf_add_in_a_while_loop, failing_leaf_add_in_a_try_in_a_while_loop],
                         ids=["with", "try"])
def test_a_failing_in_place_op_on_a_leaf_changes_it_at_every_iteration(fn: Callable[..., Any]) -> None:
    """Seed 122287: eager's ``w.add_(t)`` on a leaf requiring grad writes the data, then raises (swallowed);
    translated, the op runs natively and its exception is raised again at the instruction by a function entering
    the frame there (`resume.build_raising_code`), which raised it from inside the body: the ``while`` loop
    coming back to the instruction raised the first iteration's exception again instead of calling ``add_``."""
    def observe(f: Callable[..., Any]) -> Any:
        w = _parameter()
        out = f(w, paddle.ones([2]))
        return w.numpy().tolist(), out.numpy().tolist()

    assert_translated_like_eager(observe, fn, min_graph_size=10)


def maximum_of_a_changed_tensor_then_step(x, w):
    w = w - paddle.tanh(x)
    z = paddle.maximum(x, w)
    with paddle.no_grad():
        w.subtract_(z)
    return w


def test_a_backward_not_reaching_the_op_that_kept_a_changed_output_is_not_refused() -> None:
    """Seed 122624 (known bug): ``maximum`` keeps ``w`` (a program output, changed in place after the break),
    but ``backward()`` of ``w`` alone never reaches ``maximum``: eager computes, the translated backward refuses
    ("modified by an inplace operation")."""
    def observe(fn: Callable[..., Any]) -> Any:
        w = _parameter()
        try:
            fn(paddle.to_tensor([1.0, -1.0]), w).sum().backward()
        except Exception as exc:  # noqa: BLE001
            return type(exc).__name__
        return w.grad.numpy().tolist()

    assert_translated_like_eager(observe, maximum_of_a_changed_tensor_then_step, min_graph_size=0)


# -- ops giving one output per index of a dynamic dimension; lists of tensors handed to an op -------------
def stack_the_doubled_items(y):
    return paddle.stack([c * 2 for c in y.unbind()])


def stack_the_items_of_a_product(y):
    return paddle.stack((y * 2).unbind())


def first_column_plus_one(y):
    return paddle.unstack(y, axis=-1)[0] + 1


@pytest.mark.parametrize("fn, shapes, breaks", [
    (stack_the_doubled_items, [[3], [5], [7], [5]], 0),
    (stack_the_items_of_a_product, [[3], [5], [7], [5]], 1),
    (first_column_plus_one, [[2, 3], [2, 5], [2, 7]], 0),
], ids=["input", "computed", "unstack"])
def test_unbinding_a_dynamic_dimension_pins_it(fn: Callable[..., Any], shapes: list[list[int]],
                                               breaks: int) -> None:
    """Seed 140000: translated again for a second length (a dynamic dimension), ``y.unbind()`` was inferred on
    a -1 dimension and Paddle's static op aborted the process (``std::length_error``: a vector of -1 outputs).
    The dimension an op makes one output per index of is now pinned (an input's: its value guarded, so each
    length gets its entry) or breaks the graph (a computed tensor's: the op runs natively)."""
    def observe(f: Callable[..., Any]) -> Any:
        return [np.round(f(paddle.arange(int(np.prod(s)), dtype="float32").reshape(s)).numpy(), 4).tolist()
                for s in shapes]

    assert_translated_like_eager(observe, fn, min_graph_size=0)
    assert sot.stats().graph_breaks == breaks


def stack_the_tensors_of_a_list(tl):
    return paddle.stack(tl)


def concat_the_tensors_of_a_list(tl):
    return paddle.concat(tl)


@pytest.mark.parametrize("fn", [stack_the_tensors_of_a_list, concat_the_tensors_of_a_list])
def test_a_list_of_tensors_handed_to_an_op_is_guarded_by_its_length(fn: Callable[..., Any]) -> None:
    """Found next to seed 140000: a list argument passed whole to ``paddle.stack``/``concat`` guarded each of
    its items but not its length, so a call with a longer list hit the entry made for the shorter one and
    returned its stack of the first items only (a wrong answer)."""
    def observe(f: Callable[..., Any]) -> Any:
        return [f([paddle.full([2], float(i)) for i in range(n)]).numpy().tolist() for n in (3, 5, 3, 2)]

    assert_translated_like_eager(observe, fn, min_graph_size=0)
    assert sot.stats().translate_count == 3  # (one entry per length)


def unbind_after_a_slice_assignment(y, w):
    y[1:] = (y + w)[1:]
    with paddle.no_grad():
        w.add_(paddle.stack([c * 2 for c in y.unbind()]) * 0.1)
    return w


def test_unbinding_a_dynamic_dimension_of_an_input_changed_in_place_breaks_the_graph() -> None:
    """Seed 140000 again: ``y`` changed in place is a symbol the program computes from its -1 input, so
    pinning the input's dimension left the op on -1 there (the process aborted building the program); the
    graph breaks instead (the op runs natively)."""
    def observe(f: Callable[..., Any]) -> Any:
        results = []
        for n in (3, 3, 5, 3):
            y, w = paddle.arange(n, dtype="float32"), paddle.ones([n])
            w.stop_gradient = False
            results.append((f(y, w).numpy().tolist(), y.numpy().tolist()))
        return results

    assert_translated_like_eager(observe, unbind_after_a_slice_assignment, min_graph_size=0)


# -- gradient requirement of outputs from inputs their op gives no gradient ------------------------------
def _unordered_parameter() -> paddle.Tensor:
    return paddle.to_tensor([0.5, -1.0, 2.0], stop_gradient=False)


def gather_by_the_order_of_another(x, w):
    return paddle.gather(x, paddle.argsort(w, descending=True))


def index_by_the_order_of_another(x, w):
    return x[paddle.argsort(w)]


def clip_below_the_minimum_of_another(x, w):
    return paddle.clip(x, min=w.min())


@pytest.mark.parametrize("fn", [gather_by_the_order_of_another, index_by_the_order_of_another,
                                clip_below_the_minimum_of_another])
def test_an_input_the_backward_gives_no_gradient_does_not_make_the_output_require_grad(
        fn: Callable[..., Any]) -> None:
    """Seed 140192: eager's ``argsort`` of ``w`` (requiring grad) gives indices requiring grad, yet
    ``gather(x, indices)`` does not require grad (its backward gives the index no gradient); the translated
    output did (every input counted). Only the inputs the op's backward gives a gradient to count now (PIR's
    input grad semantics), for ``clip``'s bound and ``expand_as``'s target as well."""
    def observe(f: Callable[..., Any]) -> Any:
        out = f(paddle.to_tensor([1.0, -2.0, 3.0]), _unordered_parameter())
        return out.numpy().tolist(), out.stop_gradient

    assert_translated_like_eager(observe, fn, min_graph_size=0)


def top_index(w):
    return paddle.topk(w, 1)[1]


def test_a_program_returning_integer_indices_requiring_grad_is_compiled() -> None:
    """Found next to seed 140192: eager's ``topk`` indices of a tensor requiring grad require grad too; the
    probe of what eager autograd refuses differentiated them, and Paddle's ``topk_grad`` crashed the process
    (segmentation fault). Integer outputs are left out of the probe (they never get a gradient)."""
    def observe(f: Callable[..., Any]) -> Any:
        out = f(_unordered_parameter())
        return out.numpy().tolist(), out.stop_gradient

    assert_translated_like_eager(observe, top_index, min_graph_size=0)
    assert sot.stats().compiled_graphs == 1


def float_of_a_product_then_step(x, y, w):
    t = w - y[1]
    value = float(paddle.dot(x, w))  # (a graph break: the program's product is read natively)
    with paddle.no_grad():
        w.add_(y * 0.1)
    return t, value


def test_a_backward_not_reaching_a_product_read_at_a_break_is_not_refused() -> None:
    """Seed 142014 (known bug): ``dot`` keeps ``w`` for its backward, but ``backward()`` of ``t`` (``w - y[1]``)
    never reaches it; eager computes after ``w`` is stepped in place, the translated backward refuses ("modified
    by an inplace operation") when the product is read with ``float()`` at the graph break (not when the break
    is ``psdb.breakgraph()`` with the product kept in a variable)."""
    def observe(fn: Callable[..., Any]) -> Any:
        w = paddle.to_tensor([0.1, 0.2, 0.3], stop_gradient=False)
        t, _ = fn(paddle.to_tensor([1.0, 2.0, 3.0]), paddle.to_tensor([0.5, 1.0, -1.0]), w)
        try:
            t.sum().backward()
        except Exception as exc:  # noqa: BLE001
            return type(exc).__name__
        return w.grad.numpy().tolist()

    assert_translated_like_eager(observe, float_of_a_product_then_step, min_graph_size=0)


def square_five_times(x, n):
    for _ in range(5):
        n *= n
    return x + 1, n + n


def test_a_symbolic_int_leaving_int64_is_a_python_int_again() -> None:
    """Seed 131624: ``n`` seen with a second value is a symbolic int, computed in the program as an int64;
    ``n *= n`` five times from 4 is 2 ** 64, which wrapped around to 0 there (Python's int grows). An operation
    whose value leaves int64 is folded on the pinned values now, and the entry made with a symbolic result is
    guarded by the result fitting int64 (a later call leaving it translates again)."""
    def observe(fn: Callable[..., Any]) -> Any:
        return [fn(paddle.ones([2]), n)[1] for n in (3, -1, 4, 2, 5, 3)]

    assert_translated_like_eager(observe, square_five_times, min_graph_size=0)


def top_outer_product_minus_a_norm_then_change(x, y, w):
    v = paddle.topk(paddle.matmul(w.unsqueeze(1), x.unsqueeze(0)).sum(0), k=1)[0].expand_as(y) \
        - paddle.concat([y, y])[:w.shape[0]].norm()
    print("brk")  # (a graph break)
    y.subtract_(x[::-1])
    return v.max()


def test_a_backward_not_reading_a_tensor_changed_after_a_break_is_not_refused() -> None:
    """Seed 142925 (known bug): eager's backward of ``v`` reads nothing of ``y`` (concat and slice keep no
    buffer, the norm keeps the slice), so changing ``y`` in place after the break does not matter to it; the
    translated backward refuses ("modified by an inplace operation"), with min_graph_size 0 or 10."""
    def observe(fn: Callable[..., Any]) -> Any:
        w = paddle.to_tensor([-0.928, -0.507, -1.282], stop_gradient=False)
        out = fn(paddle.to_tensor([-0.191, 1.231, -0.689]), paddle.to_tensor([1.896, -0.0, 1.864]), w)
        try:
            out.backward()
        except Exception as exc:  # noqa: BLE001
            return type(exc).__name__
        return np.round(w.grad.numpy(), 4).tolist()

    assert_translated_like_eager(observe, top_outer_product_minus_a_norm_then_change, min_graph_size=0)


def _bool_operand_outcome(fn: Callable[..., Any], tensor: paddle.Tensor) -> Any:
    """dtype, values and signs of zeros of ``fn(tensor)``, or the type of its exception."""
    try:
        out = fn(tensor)
    except Exception as exc:  # noqa: BLE001
        return type(exc).__name__
    values = out.numpy()
    signs = np.signbit(values).tolist() if values.dtype.kind == "f" else None
    return str(out.dtype), repr(values.tolist()), signs


BOOL_OPERAND_FORMS = {
    "x * b": lambda x, b: x * b, "b * x": lambda x, b: b * x, "x - b": lambda x, b: x - b,
    "x + b": lambda x, b: x + b, "x / b": lambda x, b: x / b, "b / x": lambda x, b: b / x,
    "x ** b": lambda x, b: x ** b, "x // b": lambda x, b: x // b, "x *= b": lambda x, b: operator_imul(x, b),
    "x * np.bool_(b)": lambda x, b: x * np.bool_(b), "x - np.bool_(b)": lambda x, b: x - np.bool_(b),
}


def operator_imul(x: Any, b: Any) -> Any:
    x *= b
    return x


@pytest.mark.parametrize("form", sorted(BOOL_OPERAND_FORMS))
@pytest.mark.parametrize("dtype", ["float32", "int32", "bool"])
def test_a_python_bool_operand_of_tensor_arithmetic_is_a_bool_tensor_as_in_eager(form: str, dtype: str) -> None:
    """Seed 200500: ``xs * (xs.shape[0] == 1)``: eager Paddle makes a Python bool operand a 0-D bool tensor
    (an elementwise product: -0.0 for a negative ``x`` times False), the program took it as the number 0
    (a ``scale``: 0.0). Also ``bool_tensor + True`` was an int64 tensor (eager: bool) and ``bool_tensor - True``
    computed where eager raises; with a numpy bool (eager: TypeError) the program computed."""
    values = {"float32": [-1.5, -0.0, 2.0], "int32": [1, 0, 3], "bool": [True, False, True]}[dtype]

    def observe(fn: Callable[..., Any]) -> Any:
        return [_bool_operand_outcome(lambda t: fn(t, flag), paddle.to_tensor(np.array(values, dtype=dtype)))
                for flag in (False, True)]

    def apply(x, b):
        return BOOL_OPERAND_FORMS[form](x, b)

    assert_translated_like_eager(observe, apply, min_graph_size=0)


def _floor_divide_in_place(t: Any, c: Any) -> Any:
    t //= c
    return t


FLOOR_DIVISION_FORMS = {
    "t // 2": lambda t, n: t // 2, "t // -2.5": lambda t, n: t // -2.5, "3 // t": lambda t, n: 3 // t,
    "t // n": lambda t, n: t // n, "t // True": lambda t, n: t // True, "t //= 2": lambda t, n: _floor_divide_in_place(t, 2),
    "numel // 2": lambda t, n: t.numel() // 2, "t % 2": lambda t, n: t % 2,
}


@pytest.mark.parametrize("form", sorted(FLOOR_DIVISION_FORMS))
@pytest.mark.parametrize("dtype", ["float32", "int64"])
@pytest.mark.parametrize("shape", [[], [3]])
def test_a_floor_division_of_a_0d_tensor_by_a_number_is_1d_as_in_eager(form: str, dtype: str, shape: list) -> None:
    """Probing the shapes tier (``x.numel() // 2``): eager Paddle's ``//`` fills a Python number as a [1]
    tensor, so ``t // 2`` of a 0-D ``t`` is a [1] tensor; the program's was 0-D (later ops then broadcast to
    other shapes than eager's)."""
    def observe(fn: Callable[..., Any]) -> Any:
        found = []
        for n in (2, 3, -4):  # (n a symbolic int from the second call on)
            out = fn(paddle.full(shape, 7, dtype), n)
            found.append((out.shape, str(out.dtype), out.numpy().tolist()))
        return found

    def apply(t, n):
        return FLOOR_DIVISION_FORMS[form](t, n)

    assert_translated_like_eager(observe, apply, min_graph_size=0)

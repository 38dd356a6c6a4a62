"""Python semantics around tensors that a hunt for wrong answers found simulated otherwise than eager Python:
each test runs the idiom eagerly and translated (`_conformance.check`) and compares everything observable."""
from __future__ import annotations

import sys
import warnings

import pytest

import sot

from _conformance import T, check


@pytest.mark.skipif(sys.version_info < (3, 11), reason="BaseException.add_note is new in 3.11")
def test_c_method_of_an_exception_made_in_the_frame_acts_on_the_frames_exception(compile_all):
    """``e.add_note(...)`` runs natively at a graph break. The generated code makes the exception anew for each
    run (`runtime.fresh_exception`), so the method must be read off that exception, not be the method bound to
    the one the simulation saw (baked into the code: the note went to it, shared by every run, and the raised
    exception had none)."""

    def fn(x):
        try:
            e = ValueError("bad")
            e.add_note(f"shape {x.shape}")
            raise e
        except ValueError as err:
            return err.__notes__, x * 2

    check(fn, lambda: (T(3),), calls=3, breaks=None)



# -- the frame's own variables: locals(), vars(), dir(), eval/exec without namespaces ----------------------
def locals_before_and_after_a_break(x, k=1):
    a = 2
    before = sorted(locals())
    y = x * a
    print("break")
    b = 3
    return before, sorted(locals()), y, b


def format_with_the_locals(x):
    name = "scale"
    a = 2
    y = x * a
    return "{name}={a}".format(**locals()), y


def locals_listing_cells_and_free_variables(x, c0):
    a = 2
    b = x * 3
    add = lambda: a + c0  # noqa: E731
    return list(locals()), add(), b


def the_frames_locals_dict_is_updated_in_place(x, c0):
    a = 1
    read = lambda: c0  # noqa: E731
    first = locals()
    y = x * 2
    del a
    second = locals()
    second["added"] = 5
    z = 3
    third = locals()
    return list(first), first is second, second is third, list(third), y, z, read()


def a_local_read_only_by_locals_after_a_break(x):
    a = 1
    y = x * 2
    print("break")
    return sorted(locals()), dir(), sorted(vars()), y


def locals_in_a_loop_with_a_break(x):
    out = []
    for i in range(3):
        y = x * i
        print(i)
        out.append(sorted(locals()))
    return out, y


def locals_in_a_while_loop_with_a_break(x):
    i = 0
    seen = []
    while i < 3:
        i += 1
        print(i)
        seen.append(list(locals()))
    return seen


def locals_in_nested_loops_broken_by_a_tensor_branch(x):
    out = []
    for i in range(2):
        for j in range(2):
            if x.sum() > 0:
                out.append(list(locals()))
    return out


def eval_of_the_frames_variables(x):
    a = 2
    y = x * a
    return eval("a + len(y)"), y


def eval_in_a_helper(t):
    q = 3
    return eval("q * 2") + t


def eval_in_an_inlined_function(x):
    return eval_in_a_helper(x * 2)


def exec_after_a_break(x):
    a = 5
    y = x * 2
    print("break")
    exec("print(a, len(y))")
    return y


@pytest.mark.parametrize("fn, makers", [
    (locals_before_and_after_a_break, [lambda: (T(3),)]),
    (format_with_the_locals, [lambda: (T(3),)]),
    (locals_listing_cells_and_free_variables, [lambda: (T(3), 4)]),
    (the_frames_locals_dict_is_updated_in_place, [lambda: (T(3), 4)]),
    (a_local_read_only_by_locals_after_a_break, [lambda: (T(3),)]),
    (locals_in_a_loop_with_a_break, [lambda: (T(3),)]),
    (locals_in_a_while_loop_with_a_break, [lambda: (T(3),)]),
    (locals_in_nested_loops_broken_by_a_tensor_branch, [lambda: (T(3),), lambda: (-T(3).abs(),)]),
    (eval_of_the_frames_variables, [lambda: (T(3),), lambda: (T(4),)]),
    (eval_in_an_inlined_function, [lambda: (T(3),)]),
    (exec_after_a_break, [lambda: (T(3),)]),
], ids=lambda value: getattr(value, "__name__", ""))
def test_the_frames_variables_are_the_users_not_the_generated_codes(compile_all, fn, makers):
    """``locals()``, ``vars()`` and ``dir()`` are simulated from the frame's variables (the generated code's
    frame has temporaries and not the values the simulation computed; a resume function's has the stack it
    received), with every variable live where one of them is called (`liveness.FRAME_READERS`); a resume
    function run natively lists the same (its stack arguments deleted, its parameters in the user's order:
    `liveness.in_frame_order`). ``eval`` and
    ``exec`` without namespaces make the translated frame fall back, or an inlined function run natively."""
    check(fn, *makers, breaks=None, fallbacks=None, stable=False)  # (values here, not caching)


class _ExitRecorder:
    """Records what ``__exit__`` receives; suppresses a KeyError."""

    def __init__(self, log):
        self.log = log

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        self.log.append((kind.__name__ if kind else None, tb is not None))
        return kind is KeyError


def exit_sees_the_traceback(x, log):
    with _ExitRecorder(log):
        y = x * 2
        {}["missing"]
    with _ExitRecorder(log):
        z = y + 1
    return z, log


def exit_sees_the_traceback_after_a_break(x, log):
    with _ExitRecorder(log):
        y = x * 2
        print("break")
        {}["missing"]
    return y, log


@pytest.mark.parametrize("fn", [exit_sees_the_traceback, exit_sees_the_traceback_after_a_break],
                         ids=lambda fn: fn.__name__)
def test_exit_of_a_with_block_left_by_an_exception_gets_a_traceback(compile_all, fn):
    """An exception raised during simulation has no traceback of the user's frame: ``__exit__`` got None for
    it (eager passes the traceback). It now gets a variable that makes the frame fall back when read (then
    ``__exit__``'s own frame is translated at the next calls: not ``stable``)."""
    check(fn, lambda: (T(3), []), breaks=None, fallbacks=None, stable=False)


# -- known bug (tests/known_bugs.txt) -----------------------------------------------------------------------
def _warn_after_a_break():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        print("break")
        warnings.warn("deprecated", DeprecationWarning, stacklevel=2)
    return [(w.lineno, w.filename) for w in caught]


def warns_for_its_caller(x):
    y = x * 2
    where = _warn_after_a_break()
    return where, y


def test_warning_for_the_caller_after_a_break_in_the_warning_function(compile_all):
    """``warnings.warn(stacklevel=2)`` names the caller's line. After a graph break in the warning function,
    its rest runs in a resume function called by the function's own generated code: one frame up is that
    frame (the function's own line), not the caller."""
    check(warns_for_its_caller, lambda: (T(3),), breaks=None, fallbacks=None, stable=False)


# -- attribute reads that a class redirects --------------------------------------------------------------------
class _TenfoldW:
    """Reads its ``w`` ten times larger, logging every read of a name that is not a dunder."""

    def __init__(self, w, log):
        self.w = w
        self.log = log

    def __getattribute__(self, name):
        value = super().__getattribute__(name)
        if not name.startswith("__"):
            object.__getattribute__(self, "log").append(name)
        return value * 10 if name == "w" else value

    def scaled(self, x):
        return x * self.w


class _HidesOneName:
    def __init__(self):
        self.hidden = 1.0  # (never seen: the override raises for it)

    def __getattribute__(self, name):
        if name == "hidden":
            raise AttributeError(name)
        return object.__getattribute__(self, name)

    def __getattr__(self, name):
        return 5.0


def reads_through_a_user_getattribute(x, obj):
    obj.w = obj.w + 1.0  # (stored in the frame, read back through the override)
    return obj.scaled(x) * obj.w, obj.log


def getattribute_raising_hands_over_to_getattr(x, obj):
    return x * obj.hidden, hasattr(obj, "other"), getattr(obj, "other", None)


@pytest.mark.parametrize("fn, make", [
    (reads_through_a_user_getattribute, lambda: (T(3), _TenfoldW(1.0, []))),
    (getattribute_raising_hands_over_to_getattr, lambda: (T(3), _HidesOneName())),
], ids=["tenfold", "then_getattr"])
def test_a_user_getattribute_runs_at_every_read(compile_all, fn, make):
    """A class overriding ``__getattribute__`` in Python: the simulation read the instance dict past it (the
    first call's ``o.w`` was the stored 1.0, not 10.0), and its guard re-read ``o.w`` through it (never equal
    to what was guarded: translated again at each call). The override is inlined at every read (its log has
    eager's entries, none from the guard at a cache hit), an AttributeError it raises goes to ``__getattr__``,
    and what it reads through ``object.__getattribute__`` is guarded past it."""
    check(fn, make, calls=3)


class _MetaWithProperty(type):
    @property
    def scale(cls):
        return 7.0


class _ModelUnderMeta(metaclass=_MetaWithProperty):
    scale = 3.0


def reads_a_metaclass_property(x, cls):
    return x * cls.scale, cls.__name__, cls.__doc__


def test_a_metaclass_data_descriptor_wins_over_the_class_attribute(compile_all):
    """``type.__getattribute__``: a data descriptor of the metaclass (a ``@property``) comes before the class's
    own attribute of that name; the class attribute was read (3.0 instead of 7.0)."""
    check(reads_a_metaclass_property, lambda: (T(3), _ModelUnderMeta), calls=3)


# -- a bug hunt's findings: lazy consumers, exception context, ``**`` keys, finalizers ----------------------
_log: list = []


def _checked(i):
    _log.append(i)
    return i > 1


def _counting(n):
    for i in range(n):
        _log.append(("made", i))
        yield i


def lazy_consumers_stop_early(x, n):
    y = x * 2 + 1
    found = any(_checked(i) for i in range(n))
    every = all(_checked(i) < 1 for i in [0, 5, 6])
    try:
        a, b = _counting(n)
    except ValueError as error:
        message = str(error)
    return y, found, every, message


def membership_in_a_generator(x, n):
    return x * 2 + 1, 1 in _counting(n), 9 in _counting(n)


@pytest.mark.parametrize("fn", [lazy_consumers_stop_early, membership_in_a_generator], ids=lambda fn: fn.__name__)
def test_any_all_in_and_unpacking_stop_at_the_item_that_decides(compile_all, fn):
    """``any``/``all`` read every item of a generator before testing the first (its later items' side
    effects happened); ``a, b = gen()`` ran the generator to its end (CPython steps once past the targets);
    ``1 in gen()`` made the frame fall back. Each stops where CPython does."""
    check(fn, lambda: (T(3), 5), state=lambda: list(_log), reset=_log.clear)


def context_of_a_raise_in_a_handler(x, k):
    y = x * 2 + 1
    seen = []
    try:
        try:
            {}[k]
        except KeyError:
            raise ValueError("wrapped")
    except ValueError as error:
        seen.append((repr(error.__context__), error.__suppress_context__, error.__cause__))
    try:
        try:
            {}[k]
        except KeyError:
            raise ValueError("wrapped") from None
    except ValueError as error:
        seen.append((repr(error.__context__), error.__suppress_context__, error.__cause__))
    try:
        try:
            {}[k]
        except KeyError:
            try:
                [][1]
            except IndexError:
                pass
            raise  # (a re-raise keeps the context it had: None)
    except KeyError as error:
        seen.append(repr(error.__context__))
    return y, seen


def test_an_exception_raised_while_one_is_handled_has_it_as_context(compile_all):
    """The simulation set ``__cause__`` only: an exception raised in an ``except`` block had no
    ``__context__`` (eager: the exception handled), and ``raise ... from`` left ``__suppress_context__``
    False."""
    check(context_of_a_raise_in_a_handler, lambda: (T(3), "q"))


def _keywords(**kwargs):
    return kwargs


def keywords_that_are_not_strings(x):
    y = x * 2 + 1
    try:
        _keywords(**{1: 2})
    except TypeError as error:
        return y, str(error)
    return y, "accepted"


def test_double_star_keys_must_be_strings(compile_all):
    """``f(**{1: 2})`` was accepted during simulation: CPython's call raises ``TypeError('keywords must be
    strings')``, which the user's handler catches."""
    check(keywords_that_are_not_strings, lambda: (T(3),))


class _Handle:
    def __init__(self, n):
        self.n = n
        _log.append(f"open {n}")

    def __del__(self):
        _log.append("close")


def makes_a_finalized_object(x):
    y = x * 2 + 1
    handle = _Handle(2)
    return y * handle.n


def test_an_instance_with_a_del_is_made_natively(compile_all):
    """An instance made in the frame is simulated over a stand-in built by ``object.__new__`` whose
    ``__init__`` never runs: a class with a ``__del__`` ran it on that half-built stand-in when the translation
    dropped it (an extra "close" before "open"). Such an instance is made natively at a graph break."""
    import gc

    def state():
        gc.collect()
        return list(_log)

    check(makes_a_finalized_object, lambda: (T(3),), breaks=1, state=state, reset=_log.clear)


# -- the traceback of an exception raised in the frame ---------------------------------------------------------
def reads_the_traceback_in_its_handler(x):
    try:
        y = x * 2
        raise ValueError("a")
    except ValueError as e:
        tb = e.__traceback__
        return tb is not None, type(tb).__name__, tb.tb_lineno - tb.tb_frame.f_code.co_firstlineno, y


def _raises_key_error(x):
    raise KeyError("k")


def counts_the_traceback_entries_of_a_callees_raise(x):
    y = x + 1
    try:
        _raises_key_error(x)
    except KeyError as e:
        n, tb = 0, e.__traceback__
        while tb is not None:
            n, tb = n + 1, tb.tb_next
    return n, y * 2


def hands_the_exception_to_a_helper_reading_its_traceback(x):
    def describe(err):
        return getattr(err, "__traceback__") is not None

    y = x * 2
    try:
        raise RuntimeError("r")
    except RuntimeError as e:
        seen = describe(e)
    return seen, y


def reads_the_traceback_after_the_handler(x):
    try:
        y = x * 2
        raise ValueError("a")
    except ValueError as e:
        kept = e
    return kept.__traceback__ is not None, y + 1


def an_exception_never_raised_has_no_traceback(x):
    return ValueError("x").__traceback__ is None, x * 2


@pytest.mark.parametrize("fn, breaks, fallbacks, stable", [
    (reads_the_traceback_in_its_handler, 1, 0, True),
    (counts_the_traceback_entries_of_a_callees_raise, 1, None, True),  # (the callee raising runs eagerly)
    # (the helper, run natively after the break, is translated per exception object: its guard holds it)
    (hands_the_exception_to_a_helper_reading_its_traceback, 1, 0, False),
    (reads_the_traceback_after_the_handler, 0, 1, True),
    (an_exception_never_raised_has_no_traceback, 0, 0, True),
], ids=lambda v: getattr(v, "__name__", str(v)))
def test_the_traceback_of_an_exception_raised_in_the_frame_is_eagers(compile_all, fn, breaks, fallbacks, stable):
    """An exception the simulation raises is never raised for real: its ``__traceback__`` was None (eager: the
    traceback of the raise). Read natively: inside its handler the frame runs natively from the raise
    (`_translate_raise_in_flight`); kept past its handler, the frame falls back."""
    check(fn, lambda: (T(3),), breaks=breaks, fallbacks=fallbacks, stable=stable)


# -- C containers changed in place between calls (a deque, a bytearray) ---------------------------------------
import array as _array  # noqa: E402
import collections as _collections  # noqa: E402

_RECENT = _collections.deque([1, 2], maxlen=5)
_BUFFER = bytearray(b"ab")
_CODES = _array.array("i", [1, 2])


def scales_by_the_length_of_a_global_deque(x):
    return x * len(_RECENT)


def scales_by_membership_in_a_global_deque(x):
    return x * (2 if 3 in _RECENT else 3)


def scales_by_the_truth_of_a_global_deque(x):
    return x * (2 if _RECENT else 3)


def reads_a_global_bytearray(x):
    return x * len(_BUFFER), bytes(_BUFFER)


def reads_a_global_array(x):
    return x * len(_CODES), 7 in _CODES


@pytest.mark.parametrize("fn", [scales_by_the_length_of_a_global_deque, scales_by_membership_in_a_global_deque,
                                scales_by_the_truth_of_a_global_deque, reads_a_global_bytearray,
                                reads_a_global_array])
def test_what_is_read_of_a_c_container_changed_between_calls_is_guarded(compile_all, fn):
    """A deque, bytearray or array.array is a plain object guarded by identity: ``len(dq)``, ``3 in dq``,
    ``bytes(buf)`` were folded with that guard only, and a call after ``dq.append(...)`` reused the old answer.
    Its length (or a copy of its contents) is guarded too."""
    contents = iter([([1, 2], b"ab", [1, 2]), ([1, 2, 3, 1], b"abc", [1, 2, 7]), ([], b"", [5])])

    def reset():
        _RECENT.clear()
        _RECENT.extend(current[0])
        _BUFFER[:] = current[1]
        _CODES[:] = _array.array("i", current[2])

    for current in contents:
        check(fn, lambda: (T(3),), calls=1, reset=reset, stable=False)


# -- the exceptions the simulation raises for the user's code, as the interpreter makes them ---------------------
class _Point:
    def __init__(self):
        self.a = 1


class _Lazy:
    def __getattr__(self, name):
        raise AttributeError(name)


class _Derived(_Point):
    def missing_on_base(self):
        return super().b


def _caught(thunk_name):
    def fn(x):
        y = x * 2
        pair = (1, 2)
        try:
            if thunk_name == "tuple index":
                pair[5]
            elif thunk_name == "unpack an int":
                a, b = 5
            elif thunk_name == "starred unpack of None":
                a, *b = None
            elif thunk_name == "star of an int in a list display":
                [*5]
            elif thunk_name == "slice assigned an int":
                items = [1, 2]
                items[0:1] = 5
            elif thunk_name == "a user getattr raising":
                _Lazy().b
            elif thunk_name == "missing on super":
                _Derived().missing_on_base()
            elif thunk_name == "missing attribute":
                _Point().b
            elif thunk_name == "missing class attribute":
                _Point.b
            elif thunk_name == "getattr of a module":
                getattr(sys, "no_such_name")
        except Exception as err:  # noqa: BLE001
            return type(err).__name__, str(err), getattr(err, "name", "-"), type(getattr(err, "obj", None)).__name__, y
        return "no error", y

    fn.__name__ = thunk_name.replace(" ", "_")
    return fn


@pytest.mark.parametrize("what", ["tuple index", "unpack an int", "starred unpack of None",
                                  "star of an int in a list display", "slice assigned an int",
                                  "a user getattr raising", "missing on super", "missing attribute",
                                  "missing class attribute", "getattr of a module"])
def test_simulated_exceptions_are_the_interpreters(compile_all, what):
    """A tuple indexed out of range said "list index out of range"; ``a, b = 5`` said "'int' object is not
    iterable" (the interpreter: "cannot unpack non-iterable int object"; ``[*5]``: "Value after * must be an
    iterable, not int"); an AttributeError had no ``name``
    and ``obj`` (3.10+ set them)."""
    check(_caught(what), lambda: (T(3),))


# -- containers changed while a loop iterates them ---------------------------------------------------------------
def appends_to_the_list_it_iterates(x):
    outs = [x]
    for t in outs:
        if len(outs) < 4:
            outs.append(t + 1)
    return outs


def pops_from_the_list_it_iterates(x):
    items = [1, 2, 3, 4, 5]
    seen = []
    for v in items:
        seen.append(v)
        items.pop(0)
    return seen, items, x * 2


def enumerates_and_zips_growing_lists(x):
    grown = [x]
    for i, t in enumerate(grown):
        if i < 3:
            grown.append(t * 2)
    a, b, pairs = [1, 2], [3, 4, 5], []
    for p, q in zip(a, b):
        a.append(p)
        pairs.append((p, q))
    return grown, pairs


def adds_to_the_dict_it_iterates(x):
    d = {"a": 1, "b": 2}
    y = x * 2
    try:
        for k in d:
            d[k + "x"] = 1
    except RuntimeError as e:
        return str(e), d, y
    return "no error", d, y


def changes_a_dict_after_making_its_iterator(x):
    d = {"a": 1}
    it = iter(d)
    d["b"] = 2
    try:
        next(it)
    except RuntimeError as e:
        return str(e), x * 2
    return "no error", x * 2


def pops_in_a_comprehension_over_the_dict(x):
    d = {"a": 1, "b": 2}
    try:
        return [d.pop(k) for k in d], x * 2
    except RuntimeError as e:
        return str(e), d, x * 2


def reads_values_changed_during_the_loop(x):
    d = {"a": 1, "b": 2, "c": 3}
    out = []
    for k, v in d.items():
        out.append((k, v))
        if k == "a":
            d["b"] = 20
    for v in d.values():
        d["c"] = 30
        out.append(v)
    return out, x * 2


def adds_to_the_set_it_iterates(x):
    s = {1, 2}
    try:
        for v in s:
            s.add(v + 10)
    except RuntimeError as e:
        return str(e), x * 2
    return "no error", x * 2


def swaps_set_elements_while_iterating(x):
    s = {1, 2, 3}
    try:
        for v in s:
            s.discard(v)
            s.add(v + 100)
    except RuntimeError as e:
        return str(e), x * 2
    return sorted(s), x * 2


class _UserList(list):
    pass


def appends_to_a_user_list_it_iterates(x):
    items = _UserList([1, 2])
    for v in items:
        if v < 4:
            items.append(v + 2)
    return list(items), x * len(items)


def changes_a_list_iterated_in_reverse(x):
    items = [1, 2, 3, 4]
    seen = []
    for v in reversed(items):
        seen.append(v)
        items.append(9)
        if len(seen) == 2:
            del items[:4]
    return seen, items, x * 2


def adds_to_a_dict_iterated_in_reverse(x):
    d = {"a": 1}
    try:
        for k in reversed(d):
            d[k + "1"] = 1
    except RuntimeError as e:
        return str(e), x * 2
    return "no error", x * 2


def adds_to_an_ordered_dict_it_iterates(x):
    import collections

    d = collections.OrderedDict(a=1, b=2)
    try:
        for k in d:
            d[k + "1"] = 1
    except RuntimeError as e:
        return str(e), x * 2
    return "no error", x * 2


@pytest.mark.parametrize("fn, fallbacks", [
    (appends_to_a_user_list_it_iterates, 0), (changes_a_list_iterated_in_reverse, 0),
    (adds_to_a_dict_iterated_in_reverse, 0),
    (adds_to_an_ordered_dict_it_iterates, 1),  # (its own iterator reacts otherwise: runs eagerly)
    (appends_to_the_list_it_iterates, 0), (pops_from_the_list_it_iterates, 0), (enumerates_and_zips_growing_lists, 0),
    (adds_to_the_dict_it_iterates, 0), (changes_a_dict_after_making_its_iterator, 0),
    (pops_in_a_comprehension_over_the_dict, 0), (reads_values_changed_during_the_loop, 0),
    (adds_to_the_set_it_iterates, 0),
    (swaps_set_elements_while_iterating, 1),  # (what CPython does then depends on its table: runs eagerly)
], ids=lambda v: getattr(v, "__name__", str(v)))
def test_a_container_changed_while_iterated_is_stepped_as_cpython_steps_it(compile_all, fn, fallbacks):
    """A loop over a list, dict or set iterated a copy of its items taken at the first step: items appended in
    the loop were never reached, removed ones still were, a dict or set changing size did not raise
    ``RuntimeError``, and a dict's values were the old ones. A list is now stepped by index, a dict or set
    checks its size at every step."""
    check(fn, lambda: (T(3),), fallbacks=fallbacks)
# -- a list's iterator reads the list by index at each step, as CPython's ---------------------------------
def _worklist(x):
    todo = [x]
    seen = []
    for t in todo:  # items appended while the loop runs are visited
        seen.append(t * 2)
        if len(todo) < 4:
            todo.append(t + 1)
    return seen


def _next_then_append(x):
    items = [x, x + 1]
    it = iter(items)
    first = next(it)
    items.append(x * 3)
    return first, list(it)


def _next_then_pop_front(x):
    items = [x, x + 1, x + 2]
    it = iter(items)
    first = next(it)
    items.pop(0)  # the iterator's index now points past the old second item
    return first, list(it)


def _exhausted_then_append(x):
    items = [x]
    it = iter(items)
    taken = list(it)
    items.append(x + 1)  # an exhausted list iterator stays exhausted
    return taken, list(it)


def _external_worklist(items):
    for t in items:
        if len(items) < 4:
            items.append(t * 2)
    return items


@pytest.mark.parametrize("fn", [_worklist, _next_then_append, _next_then_pop_front, _exhausted_then_append])
def test_a_list_changed_while_iterated(compile_all, fn):
    """The simulated list iterator took a snapshot of the items at its first ``next``: an item appended while
    a ``for`` loop ran (a worklist) was never visited, one removed was still produced."""
    check(fn, lambda: (T(3),), calls=2)


def test_an_argument_list_grown_while_iterated(compile_all):
    check(_external_worklist, lambda: ([T(3), T(2, 3)],), calls=2)


def _reversed_then_front_insert(x):
    items = [x, x + 1]
    seen = []
    for t in reversed(items):  # an index counting down into the list as it is at each step
        seen.append(t)
        if len(items) < 4:
            items.insert(0, t * 2)
    return seen


def _reversed_made_then_append(x):
    items = [x, x + 1]
    backwards = reversed(items)  # starts from the last index when made: the appended item is not seen
    items.append(x * 5)
    return list(backwards)


def _reversed_made_then_pop(x):
    items = [x, x + 1, x + 2]
    backwards = reversed(items)  # its first index is past the end now: nothing at all
    items.pop()
    return list(backwards)


@pytest.mark.parametrize("fn", [_reversed_then_front_insert, _reversed_made_then_append, _reversed_made_then_pop])
def test_reversed_over_a_list_changed_while_iterated(compile_all, fn):
    """``reversed(lst)`` read a snapshot of the items at its first ``next``; CPython's starts at the index of
    the last item when it was made and reads the list live."""
    check(fn, lambda: (T(3),), calls=2)


# -- an exception handed to a helper: guarded by its type and what is read of it, not its identity ----------
def _describe_with_traceback(err):
    tb = err.__traceback__
    return type(err).__name__, err.args[0], tb is not None


def _describe_whole(err):
    return str(err), repr(err), f"{err}", "%s" % (err,)


def _describe_attributes(err):
    return type(err).__name__, err.args, err.__cause__ is None, getattr(err, "code", None), \
        isinstance(err, KeyError), err.__traceback__.tb_lineno > 0


def _raise_and_describe(describe):
    def fn(x, message, kind):
        try:
            error = kind(message)
            if kind is OSError:
                error.code = len(message)
            raise error
        except (ValueError, KeyError, OSError) as err:
            seen = describe(err)
        return seen, x + 1
    fn.__name__ = f"raise_and_{describe.__name__.lstrip('_')}"
    return fn


@pytest.mark.parametrize("describe", [_describe_with_traceback, _describe_whole, _describe_attributes])
def test_a_caught_exception_handed_to_a_helper_is_not_guarded_by_identity(compile_all, describe):
    """The helper (translated after the break the traceback read makes, or inlined) gets a new exception at each
    call: its identity guard missed every time, translating the helper again until the cache limit. Its type
    and what the translation read of it (each read guarded by its own path; a use of the whole value, as
    ``str(err)``, still pins it) are what must match."""
    fn = _raise_and_describe(describe)
    check(fn, lambda: (T(3), "bad", ValueError), lambda: (T(3), "worse", ValueError),
          lambda: (T(3), "key", KeyError), lambda: (T(3), "io", OSError), calls=3, breaks=None,
          fallbacks=None, stable=describe is not _describe_whole)
    sot.reset()
    fast = sot.symbolic_translate(fn)
    for _ in range(6):
        assert fast(T(3), "bad", ValueError)[0] == fn(T(3), "bad", ValueError)[0]
    if describe is not _describe_whole:  # (``str(err)`` reads the exception whole: its identity stays guarded)
        assert sot.stats().translate_count <= 2, sot.stats()


# -- dict(pairs) / d.update(pairs): each element checked as CPython does ----------------------------------
def _dict_of_pairs(x, pairs):
    try:
        made = dict(pairs)
    except (TypeError, ValueError) as err:
        made = (type(err).__name__, str(err))
    return made, x * 2


def _update_with_pairs(x, pairs):
    d = {"a": 1}
    try:
        d.update(pairs, z=3)
    except (TypeError, ValueError) as err:
        return d, type(err).__name__, str(err), x * 2
    return d, x * 2


@pytest.mark.parametrize("fn", [_dict_of_pairs, _update_with_pairs])
@pytest.mark.parametrize("pairs", [[1], [(1, 2, 3)], [("k", 1), None], [("k", 1), [5]], ["ab"], [("k", 1), ["j", 2]],
                                   ((1, 2),)], ids=repr)
def test_dict_from_pairs_checks_each_element_as_eager(compile_all, fn, pairs):
    """An element that is not a sequence is eager's ``TypeError: cannot convert dictionary update sequence
    element #i to a sequence`` (it was the ``'int' object is not iterable`` of unpacking it), one of another
    length eager's ValueError; ``d.update`` keeps the pairs before the bad one, as eagerly. The error is caught
    in the frame: it is simulated, not a fallback."""
    check(fn, lambda: (T(3), list(pairs) if isinstance(pairs, list) else pairs), calls=2, breaks=0, fallbacks=0)


def test_dict_from_a_non_pair_raises_eagers_error_uncaught(compile_all):
    def fn(x, pairs):
        return dict(pairs), x + 1

    for pairs, kind, message in (([1], TypeError, "cannot convert dictionary update sequence element #0 to a "
                                   "sequence"),
                                  ([(1, 2), (1, 2, 3)], ValueError, "dictionary update sequence element #1 has "
                                   "length 3; 2 is required")):
        with pytest.raises(kind) as eager:
            fn(T(3), pairs)
        with pytest.raises(kind) as translated:
            sot.symbolic_translate(fn)(T(3), pairs)
        assert str(translated.value) == str(eager.value) == message

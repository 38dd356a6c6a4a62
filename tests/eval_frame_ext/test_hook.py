"""Tests of the PEP 523 eval-frame hook (sot.eval_frame_ext), tested like a C library.

Callbacks here are small Python functions: they either return the original
code (identity translation: run in a shadow frame on the miss that adds
it, as the frame itself on a hit) or a replacement code
compiled from another function or built with the ``bytecode`` package.

The same tests run on every Python version the hook supports (3.10-3.13).
Where the ``sot`` package itself refuses to import (it needs 3.11 for now),
the hook's wrapper package is loaded from its files without ``sot`` or its
executor (hook_loader.py); run them there with (see scripts/make_venvs.sh):

    .venv-3.X/bin/python -m pytest tests/eval_frame_ext -p no:cacheprovider --noconftest
"""

import gc
import os
import sys
import threading
import traceback

import pytest
from hook_loader import efx  # sot.eval_frame_ext, on every supported Python

SKIP = efx.SKIP
callback_installed = efx.callback_installed

#: 3.10 frames do not know their function: the closure passed to callbacks and
#: guards is a tuple of the same cells, not the function's __closure__ itself.
CLOSURE_IS_FUNCTION_CLOSURE = sys.version_info >= (3, 11)


def same_closure(seen, fn):
    expected = fn.__closure__
    if CLOSURE_IS_FUNCTION_CLOSURE or seen is None or expected is None:
        return seen is expected
    return type(seen) is tuple and len(seen) == len(expected) and all(a is b for a, b in zip(seen, expected))


def always(*_):
    return True


@pytest.fixture(autouse=True)
def clean_hook():
    efx.set_callback(None)
    efx.reset_cache()
    yield
    efx.set_callback(None)
    efx.reset_cache()
    assert not efx._ext._hook_installed()


class Recorder:
    """A callback translating the codes in `table` ({code: (guard, new_code)})."""

    def __init__(self, table=None, default=None):
        self.table = dict(table or {})
        self.default = default
        self.calls = []  # (code, globals, builtins, closure, args)

    def __call__(self, code, globals_, builtins, closure, args):
        self.calls.append((code, globals_, builtins, closure, args))
        return self.table.get(code, self.default)

    def codes(self):
        return [c[0] for c in self.calls]

    def calls_for(self, fn):
        return [c for c in self.calls if c[0] is fn.__code__]


def identity(fn, guard=always):
    return {fn.__code__: (guard, fn.__code__)}


# ---------------------------------------------------------------------------
# basics


def add(a, b=2):
    return a + b


def test_identity_translation_and_stats():
    rec = Recorder(identity(add))
    hits0 = efx.hit_count()
    with callback_installed(rec) as cb:
        assert cb is rec
        assert efx.get_callback() is rec
        assert efx._ext._hook_installed()
        assert add(1) == 3
        assert add(3) == 5
        assert add(4, 5) == 9
    assert efx.get_callback() is None
    assert len(rec.calls_for(add)) == 1
    code, g, b, closure, args = rec.calls_for(add)[0]
    assert g is globals()
    assert b is __builtins__ or b is getattr(__builtins__, "__dict__", None)
    assert closure is None
    assert args == (1, 2)
    assert efx.hit_count() - hits0 == 2
    assert efx.cache_size(add.__code__) == 1
    [(guard, new_code)] = efx.cache_entries(add.__code__)
    assert guard is always and new_code is add.__code__
    assert not efx.is_skipped(add.__code__)


def test_introspection_of_unknown_code_and_type_errors():
    def never_called(x):
        return x

    code = never_called.__code__
    assert efx.cache_size(code) == 0
    assert efx.cache_entries(code) == []
    assert efx.is_skipped(code) is False
    for fn in (efx.cache_size, efx.cache_entries, efx.is_skipped):
        with pytest.raises(TypeError):
            fn(never_called)
    with pytest.raises(TypeError):
        efx.set_callback(42)
    assert repr(SKIP) == "SKIP"


def test_guard_receives_globals_closure_and_args():
    k = 10

    def inner(x, y):
        return x + y + k

    seen = []

    def guard(g, closure, *args):
        seen.append((g, closure, args))
        return True

    rec = Recorder(identity(inner, guard))
    with callback_installed(rec):
        assert inner(1, 2) == 13
        assert inner(3, y=4) == 17
    assert len(seen) == 1
    g, closure, args = seen[0]
    assert g is globals()
    assert same_closure(closure, inner)
    assert args == (3, 4)


# ---------------------------------------------------------------------------
# replacement codes: arguments are copied by name


def orig_ab(a, b):
    return a + b


def repl_compiled():
    tmp = 7
    if tmp is None:  # never true: only makes a and b locals (slots tmp, a, b)
        a = b = None
    return a * 100 + b + tmp  # noqa: F821


def repl_swapped(b, a):
    return a * 100 + b


def bytecode_repl():
    from bytecode import Bytecode, CompilerFlags, Instr

    if sys.version_info >= (3, 11):
        from bytecode import BinaryOp

        prologue = [Instr("RESUME", 0)]
        mul, add_ = Instr("BINARY_OP", BinaryOp.MULTIPLY), Instr("BINARY_OP", BinaryOp.ADD)
        add2 = Instr("BINARY_OP", BinaryOp.ADD)
    else:
        prologue = []
        mul, add_, add2 = Instr("BINARY_MULTIPLY"), Instr("BINARY_ADD"), Instr("BINARY_ADD")
    bc = Bytecode(
        prologue
        + [
            Instr("LOAD_CONST", 7),
            Instr("STORE_FAST", "tmp"),
            Instr("LOAD_FAST", "b"),
            Instr("LOAD_FAST", "a"),
            Instr("LOAD_CONST", 1000),
            mul,
            add_,
            Instr("LOAD_FAST", "tmp"),
            add2,
            Instr("RETURN_VALUE"),
        ]
    )
    bc.name = "bytecode_repl"
    bc.filename = __file__
    bc.argcount = 0
    bc.flags = CompilerFlags.OPTIMIZED | CompilerFlags.NEWLOCALS
    code = bc.to_code()
    assert code.co_varnames == ("tmp", "b", "a")
    return code


def test_replacement_copies_arguments_by_name():
    assert repl_compiled.__code__.co_varnames == ("tmp", "a", "b")
    for new_code, expected in [
        (repl_compiled.__code__, 1 * 100 + 2 + 7),
        (repl_swapped.__code__, 1 * 100 + 2),
        (bytecode_repl(), 1 * 1000 + 2 + 7),
    ]:
        efx.reset_cache()
        rec = Recorder({orig_ab.__code__: (always, new_code)})
        with callback_installed(rec):
            assert orig_ab(1, 2) == expected  # miss: runs new code at once
            assert orig_ab(1, b=2) == expected  # hit
        assert orig_ab(1, 2) == 3
        assert len(rec.calls_for(orig_ab)) == 1


def sig(p, /, q, r=3, *args, s, t=5, **kw):
    return (p, q, r, args, s, t, kw)


def sig_repl(kw, t, s, args, r, q, p):
    return ("repl", p, q, r, args, s, t, kw)


def test_signature_kinds_positional_only_kwonly_defaults_varargs_varkw():
    seen = []

    def guard(g, c, *a):
        seen.append(a)
        return True

    rec = Recorder(identity(sig, guard))
    with callback_installed(rec):
        assert sig(1, 2, s=4) == (1, 2, 3, (), 4, 5, {})
        assert sig(1, 2, 30, 40, 50, s=4, t=6, z=7) == (1, 2, 30, (40, 50), 4, 6, {"z": 7})
    assert rec.calls_for(sig)[0][4] == (1, 2, 3, 4, 5, (), {})
    assert seen == [(1, 2, 30, 4, 6, (40, 50), {"z": 7})]

    efx.reset_cache()
    rec = Recorder({sig.__code__: (always, sig_repl.__code__)})
    with callback_installed(rec):
        assert sig(1, 2, 30, 40, s=4, u=9) == ("repl", 1, 2, 30, (40,), 4, 5, {"u": 9})
        assert sig(1, q=2, s=4) == ("repl", 1, 2, 3, (), 4, 5, {})


def arg_cell(a, b):
    g = lambda: a + 1  # noqa: E731  (a is an argument and a cell)
    return g() + b


def arg_cell_repl(a, b):
    g = lambda: a * 100  # noqa: E731
    return g() + b


def arg_cell_repl_plain(b, a):
    return a * 1000 + b


def test_argument_that_is_also_a_cell():
    assert "a" in arg_cell.__code__.co_cellvars
    for new_code, expected in [
        (arg_cell.__code__, (1 + 1) + 2),
        (arg_cell_repl.__code__, 100 + 2),
        (arg_cell_repl_plain.__code__, 1000 + 2),
    ]:
        efx.reset_cache()
        rec = Recorder({arg_cell.__code__: (always, new_code)})
        with callback_installed(rec):
            assert arg_cell(1, 2) == expected
            assert arg_cell(1, 2) == expected
        # The callback saw the plain value, not a cell.
        assert rec.calls_for(arg_cell)[0][4] == (1, 2)


def repl_cell_not_arg():
    if False:  # never true: only makes a and b locals of this code
        a = b = None
    g = lambda: a * 10  # noqa: E731  (a is a cell here, not an argument)
    return g() + b


def repl_cell_and_closure_arg(b, a):
    def g():
        return a + b  # both arguments are cells here

    return g() * 1000


def test_plain_argument_copied_into_a_cell_of_the_new_code():
    assert "a" in repl_cell_not_arg.__code__.co_cellvars
    assert set(repl_cell_and_closure_arg.__code__.co_cellvars) == {"a", "b"}
    for new_code, expected in [
        (repl_cell_not_arg.__code__, 1 * 10 + 2),
        (repl_cell_and_closure_arg.__code__, (1 + 2) * 1000),
    ]:
        efx.reset_cache()
        rec = Recorder({orig_ab.__code__: (always, new_code)})
        with callback_installed(rec):
            assert orig_ab(1, 2) == expected
            assert orig_ab(1, 2) == expected
        assert rec.calls_for(orig_ab)[0][4] == (1, 2)


def make_closure(k):
    def clo(x):
        return x + k

    return clo


def make_closure_repl(k):
    def clo_repl(x):
        return (x + k) * 100

    return clo_repl


def make_other_freevar(other):
    def clo(x):
        return x + other

    return clo


def test_closures_two_cells_values_same_code():
    c1, c2 = make_closure(1), make_closure(10)
    assert c1.__code__ is c2.__code__
    repl = make_closure_repl(None).__code__
    assert repl.co_freevars == c1.__code__.co_freevars == ("k",)
    rec = Recorder({c1.__code__: (always, repl)})
    with callback_installed(rec):
        assert c1(1) == 200
        assert c2(1) == 1100
        assert c1(2) == 300
    assert len(rec.calls) == 1
    assert same_closure(rec.calls[0][3], c1)
    assert efx.cache_size(c1.__code__) == 1


def test_identity_closures():
    c1, c2 = make_closure(1), make_closure(10)
    rec = Recorder(identity(c1))
    with callback_installed(rec):
        assert [c1(1), c2(1), c1(5), c2(5)] == [2, 11, 6, 15]


def test_freevars_mismatch_is_value_error():
    c1 = make_closure(1)
    wrong = make_other_freevar(1).__code__
    rec = Recorder({c1.__code__: (always, wrong)})
    with callback_installed(rec):
        with pytest.raises(ValueError, match="co_freevars"):
            c1(1)
    # no free variables in the original, some in the new code
    rec = Recorder({add.__code__: (always, make_closure_repl(0).__code__)})
    with callback_installed(rec):
        with pytest.raises(ValueError, match="free variables"):
            add(1)
    assert efx.cache_size(c1.__code__) == 0 and efx.cache_size(add.__code__) == 0



def test_replace_entry_code_switches_an_entry_both_ways():
    """An entry's code can be replaced after the fact (the translator's switch to running the original
    natively, and back to a replacement); the guard stays, other entries are untouched."""
    c1 = make_closure(1)
    repl = make_closure_repl(0).__code__  # same free variable name (k)
    guard = lambda g, c, x: x < 100  # noqa: E731
    rec = Recorder({c1.__code__: (guard, repl)})
    with callback_installed(rec):
        assert c1(2) == 300
        assert efx.replace_entry_code(c1.__code__, guard, c1.__code__) is True
        hits = efx.hit_count()
        assert c1(2) == 3  # the original, natively, behind the same guard
        assert efx.hit_count() - hits == 1
        assert efx.cache_entries(c1.__code__) == [(guard, c1.__code__)]
        assert efx.replace_entry_code(c1.__code__, guard, repl) is True
        assert c1(2) == 300
        assert c1(500) == 50100  # the guard fails: the callback's answer is a second entry
    assert len(rec.calls_for(c1)) == 2
    assert efx.replace_entry_code(c1.__code__, always, repl) is False  # no entry with that guard
    assert efx.replace_entry_code(add.__code__, always, add.__code__) is False  # a code never seen
    with pytest.raises(ValueError, match="co_freevars"):
        efx.replace_entry_code(c1.__code__, guard, make_other_freevar(1).__code__)
    with pytest.raises(TypeError):
        efx.replace_entry_code(c1.__code__, guard, "not code")
    efx.reset_cache()
    assert efx.replace_entry_code(c1.__code__, guard, c1.__code__) is False


def switch_target(x):
    return ("original", x)


def switch_replacement(x):
    efx.replace_entry_code(switch_target.__code__, always, switch_target.__code__)
    return ("replacement", x)


def test_replace_entry_code_from_inside_the_running_code():
    """Replacing the entry while its code runs: that call finishes with the code it started."""
    rec = Recorder({switch_target.__code__: (always, switch_replacement.__code__)})
    with callback_installed(rec):
        assert switch_target(1) == ("replacement", 1)
        assert switch_target(2) == ("original", 2)
        assert switch_target(3) == ("original", 3)
    assert len(rec.calls_for(switch_target)) == 1


def test_replace_entry_code_keeps_refcounts():
    c1 = make_closure(1)
    repl = make_closure_repl(0).__code__
    guard = lambda g, c, x: True  # noqa: E731
    rec = Recorder({c1.__code__: (guard, repl)})
    with callback_installed(rec):
        c1(1)
        # (the code objects are shared with other tests: garbage of a test before this one may still refer to
        # them, and be collected during the loop)
        gc.collect()
        before = [sys.getrefcount(o) for o in (repl, c1.__code__, guard)]
        for _ in range(1000):
            efx.replace_entry_code(c1.__code__, guard, c1.__code__)
            c1(1)
            efx.replace_entry_code(c1.__code__, guard, repl)
            c1(1)
        after = [sys.getrefcount(o) for o in (repl, c1.__code__, guard)]
    assert before == after


def gen_fn(n):
    yield n


def test_bad_callback_results_are_type_or_value_errors():
    for result, exc in [
        (42, TypeError),
        ((always,), TypeError),
        ((always, add.__code__, "1"), TypeError),
        ((always, add.__code__, 1, 2), TypeError),
        ((always, "not code"), TypeError),
        ((1, add.__code__), TypeError),
        ((always, gen_fn.__code__), ValueError),
        ((always, compile("1", "<m>", "exec")), ValueError),
    ]:
        rec = Recorder({add.__code__: result})
        with callback_installed(rec):
            with pytest.raises(exc):
                add(1)
        assert efx.cache_size(add.__code__) == 0


# ---------------------------------------------------------------------------
# guards, cache order, SKIP/None, errors


def typed(x):
    return x


def typed_int(x):
    return ("int", x)


def typed_str(x):
    return ("str", x)


def test_guards_select_between_entries_and_mru_order():
    def is_int(g, c, x):
        return type(x) is int

    def is_str(g, c, x):
        return type(x) is str

    def cb(code, g, b, c, args):
        if code is not typed.__code__:
            return None
        if type(args[0]) is int:
            return (is_int, typed_int.__code__)
        return (is_str, typed_str.__code__)

    calls = []

    def counting(*a):
        calls.append(a[0])
        return cb(*a)

    hits0 = efx.hit_count()
    with callback_installed(counting):
        assert typed(1) == ("int", 1)
        assert typed("a") == ("str", "a")
        assert [g for g, _ in efx.cache_entries(typed.__code__)] == [is_str, is_int]
        assert typed(2) == ("int", 2)
        assert [g for g, _ in efx.cache_entries(typed.__code__)] == [is_int, is_str]
        assert typed("b") == ("str", "b")
        assert typed(3) == ("int", 3)
        assert [c for _, c in efx.cache_entries(typed.__code__)] == [typed_int.__code__, typed_str.__code__]
    assert calls.count(typed.__code__) == 2
    assert efx.cache_size(typed.__code__) == 2
    assert efx.hit_count() - hits0 == 3


def test_guard_raising_is_a_miss():
    def bad_guard(g, c, *a):
        raise RuntimeError("guard failed")

    rec = Recorder({add.__code__: (bad_guard, add.__code__)})
    with callback_installed(rec):
        assert add(1) == 3
        assert add(2) == 4
        assert add(3) == 5
    assert len(rec.calls_for(add)) == 3
    assert efx.cache_size(add.__code__) == 3
    assert sys.exc_info() == (None, None, None)


def test_falsy_guard_results():
    results = iter([0, None, [], "", False])

    def guard(g, c, *a):
        return next(results)

    rec = Recorder({add.__code__: (guard, add.__code__)})
    with callback_installed(rec):
        for i in range(3):
            assert add(i) == i + 2
    # first call: callback; 2nd: guard 0 -> miss; 3rd: guards None, [] -> miss
    assert len(rec.calls_for(add)) == 3


def test_skip_and_none():
    rec = Recorder(default=None)
    rec.table[add.__code__] = SKIP
    with callback_installed(rec):
        assert add(1) == 3
        assert add(2) == 4
        assert typed(5) == 5
        assert typed(6) == 6
    assert len(rec.calls_for(add)) == 1
    assert efx.is_skipped(add.__code__)
    assert len(rec.calls_for(typed)) == 2  # None caches nothing
    assert not efx.is_skipped(typed.__code__)
    assert efx.cache_size(typed.__code__) == 0
    efx.reset_cache()
    assert not efx.is_skipped(add.__code__)
    with callback_installed(rec):
        add(1)
    assert len(rec.calls_for(add)) == 2


def test_callback_raising_propagates():
    class Oops(Exception):
        pass

    def cb(code, *rest):
        if code is add.__code__:
            raise Oops("from callback")
        return None

    with callback_installed(cb):
        with pytest.raises(Oops, match="from callback"):
            add(1)
        with pytest.raises(Oops):
            add(2)
        assert typed(1) == 1
    assert efx.cache_size(add.__code__) == 0


def test_reset_cache():
    rec = Recorder(identity(add))
    with callback_installed(rec):
        add(1)
        add(1)
        assert efx.cache_size(add.__code__) == 1
        efx.reset_cache()
        assert efx.cache_size(add.__code__) == 0
        assert efx.cache_entries(add.__code__) == []
        add(1)
        assert efx.cache_size(add.__code__) == 1
    assert len(rec.calls_for(add)) == 2


def test_reset_cache_from_inside_callback_and_guard():
    def guard(g, c, *a):
        efx.reset_cache()
        return False

    def cb(code, *rest):
        if code is add.__code__:
            efx.reset_cache()
            return (guard, add.__code__)
        return None

    with callback_installed(cb):
        for i in range(5):
            assert add(i) == i + 2
    assert efx.cache_size(add.__code__) == 1


def helper_called_by_callback(x):
    return x * 2


def test_hook_disabled_while_callback_runs():
    seen = []

    def cb(code, g, b, c, args):
        seen.append(code)
        # Python calls made here are never intercepted, even of the code
        # being translated itself.
        helper_called_by_callback(3)
        add(1)
        if code is add.__code__:
            return (always, add.__code__)
        return None

    with callback_installed(cb):
        assert add(5) == 7
        assert add(6) == 8
    assert helper_called_by_callback.__code__ not in seen
    assert seen.count(add.__code__) == 1


def test_guard_calls_are_not_intercepted():
    seen = []

    def guard(g, c, *a):
        return helper_called_by_callback(1) == 2

    def cb(code, *rest):
        seen.append(code)
        return (guard, add.__code__) if code is add.__code__ else None

    with callback_installed(cb):
        for i in range(3):
            add(i)
    assert guard.__code__ not in seen
    assert helper_called_by_callback.__code__ not in seen


def test_callback_installed_nests_and_restores():
    def cb_a(*a):
        return None

    def cb_b(*a):
        return None

    with callback_installed(cb_a):
        assert efx.get_callback() is cb_a
        with callback_installed(cb_b):
            assert efx.get_callback() is cb_b
        assert efx.get_callback() is cb_a
        with pytest.raises(KeyError):
            with callback_installed(cb_b):
                raise KeyError
        assert efx.get_callback() is cb_a
    assert efx.get_callback() is None
    assert efx.set_callback(cb_a) is None
    assert efx.set_callback(cb_b) is cb_a
    assert efx.set_callback(None) is cb_b


def test_removing_last_callback_restores_default_eval():
    rec = Recorder()
    assert not efx._ext._hook_installed()
    efx.set_callback(rec)
    assert efx._ext._hook_installed()
    add(1)
    efx.set_callback(None)
    assert not efx._ext._hook_installed()
    n = len(rec.calls)
    add(1)
    typed(2)
    assert len(rec.calls) == n


# ---------------------------------------------------------------------------
# exceptions, tracebacks and escaping frame objects


def raiser(x):
    y = x + 1
    raise ValueError("bad value %d" % y)  # RAISER_LINE


RAISER_LINE = raiser.__code__.co_firstlineno + 2


def test_exception_in_shadow_code_keeps_type_message_and_traceback():
    rec = Recorder(identity(raiser))
    with callback_installed(rec):
        for _ in range(2):  # miss, then hit
            with pytest.raises(ValueError, match="bad value 2") as info:
                raiser(1)
            tb = traceback.extract_tb(info.value.__traceback__)
            assert tb[-1].name == "raiser"
            assert tb[-1].lineno == RAISER_LINE
            assert "RAISER_LINE" in tb[-1].line
            frame = info.tb.tb_next.tb_frame if info.tb.tb_next else None
            assert frame is not None and frame.f_locals == {"x": 1, "y": 2}
            del info, frame


def get_frame(x):
    local = x * 2  # noqa: F841
    return sys._getframe()


def test_frame_object_escaping_the_shadow_frame():
    rec = Recorder(identity(get_frame))
    frames = []
    with callback_installed(rec):
        for i in range(3):
            frames.append(get_frame(i))
    me = sys._getframe()
    gc.collect()
    for i, f in enumerate(frames):
        assert f.f_code is get_frame.__code__
        assert f.f_lineno == get_frame.__code__.co_firstlineno + 2
        assert f.f_locals == {"x": i, "local": 2 * i}
        assert f.f_back is me
        assert f.f_globals is globals()
        f.clear()
    del frames
    gc.collect()


def test_traceback_kept_alive_after_the_call():
    rec = Recorder(identity(raiser))
    kept = []
    with callback_installed(rec):
        for i in range(3):
            try:
                raiser(i)
            except ValueError as e:
                kept.append(e)
    gc.collect()
    for i, e in enumerate(kept):
        tb = e.__traceback__
        while tb.tb_next is not None:
            tb = tb.tb_next
        f = tb.tb_frame
        assert f.f_code is raiser.__code__
        assert f.f_lineno == RAISER_LINE
        assert f.f_locals == {"x": i, "y": i + 1}
        assert f.f_back is not None and f.f_back.f_code is test_traceback_kept_alive_after_the_call.__code__
        assert traceback.format_exception(e)[-1] == "ValueError: bad value %d\n" % (i + 1)


def rec_depth(n):
    if n == 0:
        return 0
    return 1 + rec_depth(n - 1)


def test_recursion_400_deep():
    assert sys.getrecursionlimit() >= 1000
    rec = Recorder(identity(rec_depth))
    hits0 = efx.hit_count()
    with callback_installed(rec):
        assert rec_depth(400) == 400
        assert rec_depth(400) == 400
    assert len(rec.calls_for(rec_depth)) == 1
    assert efx.hit_count() - hits0 == 400 + 401


def test_deep_recursion_error_propagates():
    def forever(n):
        return forever(n + 1)

    rec = Recorder(identity(forever))
    with callback_installed(rec):
        with pytest.raises(RecursionError):
            forever(0)
    with callback_installed(rec):  # and the interpreter is still fine
        assert rec_depth(50) == 50


def chain(k, fn, x):
    if k == 0:
        return fn(x)
    return chain(k - 1, fn, x)


def make_big_frame_function(nlocals):
    """A function whose frame is larger than a 16 KiB data-stack chunk."""
    body = "".join("    v%d = x + %d\n" % (i, i) for i in range(nlocals))
    ns = {}
    exec("def big(x):\n%s    return v0 + v%d\n" % (body, nlocals - 1), ns)
    return ns["big"]


def test_shadow_frames_at_every_data_stack_offset():
    # Frames of chains of every depth up to 300 put the shadow frames (and the
    # original frames released by the hook) at every offset of the thread's
    # data stack, across chunk boundaries (3.12+ keeps frames in chunks), with
    # frames of ordinary and of larger-than-a-chunk size.
    big = make_big_frame_function(2500)
    rec = Recorder({**identity(chain), **identity(add), **identity(big), **identity(rec_depth)})
    hits0 = efx.hit_count()
    with callback_installed(rec):
        for _ in range(2):
            for k in range(300):
                assert chain(k, add, k) == k + 2
                if k % 7 == 0:
                    assert chain(k, big, 1) == 1 + 1 + 2499
        gc.collect()
        start = rss_bytes()
        for _ in range(3):
            for k in range(0, 300, 3):
                assert chain(k, big, 1) == 2501
                assert chain(k, rec_depth, 20) == 20
        grown = rss_bytes() - start
    assert grown < 4 * 1024 * 1024, grown
    # one miss per function; everything else was served from the cache
    assert [len(rec.calls_for(f)) for f in (chain, add, big, rec_depth)] == [1, 1, 1, 1]
    assert efx.hit_count() - hits0 > 2 * 300 * 150
    assert rec_depth(10) == 10


def test_callback_raising_in_a_loop_releases_the_frames():
    class Oops(Exception):
        pass

    arg = object()

    def cb(code, *rest):
        if code is leak_target.__code__:
            raise Oops
        return None

    def burst(n):
        for _ in range(n):
            try:
                leak_target(arg, 1)
            except Oops:
                pass

    with callback_installed(cb):
        burst(1000)
        gc.collect()
        refs = sys.getrefcount(arg)
        start = rss_bytes()
        burst(50_000)
        gc.collect()
        grown = rss_bytes() - start
        # The frames are still usable at any depth afterwards.
        assert chain(200, add, 1) == 3
    assert sys.getrefcount(arg) == refs
    assert grown < 4 * 1024 * 1024, grown


def no_args_sets_global():
    global EXEC_RESULT
    EXEC_RESULT = 42  # noqa: F841


def test_exec_of_a_function_code_with_a_locals_mapping():
    global EXEC_RESULT
    EXEC_RESULT = None
    rec = Recorder(identity(no_args_sets_global))
    hits0 = efx.hit_count()
    with callback_installed(rec):
        exec(no_args_sets_global.__code__, globals())
        assert EXEC_RESULT == 42
        EXEC_RESULT = None
        exec(no_args_sets_global.__code__, globals(), {})
        assert EXEC_RESULT == 42
    assert len(rec.calls_for(no_args_sets_global)) == 1
    assert efx.hit_count() - hits0 == 1


# ---------------------------------------------------------------------------
# frames that are never intercepted


async def coro_fn(x):
    return x + 1


def test_generators_and_coroutines_run_untouched():
    def agen_user():
        async def agen():
            yield 1

        return agen

    rec = Recorder(default=None)
    with callback_installed(rec):
        assert list(gen_fn(3)) == [3]
        c = coro_fn(5)
        with pytest.raises(StopIteration) as info:
            c.send(None)
        assert info.value.value == 6
        ag = agen_user()()
        assert ag.__anext__ is not None
    codes = rec.codes()
    assert gen_fn.__code__ not in codes
    assert coro_fn.__code__ not in codes
    assert not any(c.co_name == "agen" for c in codes)
    assert any(c.co_name == "agen_user" for c in codes)


def class_maker():
    class Local:
        z = helper_called_by_callback(2)

    return Local


def test_module_and_class_bodies_never_reach_callback():
    rec = Recorder(default=None)
    src = "x = 1\ndef h():\n    return 2\nclass K:\n    y = h()\n"
    ns = {}
    with callback_installed(rec):
        exec(compile(src, "<test-module>", "exec"), ns)
        assert class_maker().z == 4
    names = [c.co_name for c in rec.codes()]
    assert "h" in names and "class_maker" in names and "helper_called_by_callback" in names
    assert "<module>" not in names and "K" not in names and "Local" not in names
    for c in rec.codes():
        assert c.co_flags & 0x1  # CO_OPTIMIZED


# ---------------------------------------------------------------------------
# tracing and threads


def traced_fn(a):
    b = a + 1
    return b * 2


def test_settrace_active_while_hooked_frames_run():
    events = []

    def tracer(frame, event, arg):
        if frame.f_code is traced_fn.__code__:
            events.append((event, frame.f_lineno))
            return tracer
        return None

    rec = Recorder(identity(traced_fn))
    with callback_installed(rec):
        traced_fn(0)  # miss
        sys.settrace(tracer)
        try:
            assert traced_fn(1) == 4  # hit
            assert traced_fn(2) == 6
        finally:
            sys.settrace(None)
    assert [e for e, _ in events].count("call") == 2
    assert [e for e, _ in events].count("return") == 2
    assert ("line", traced_fn.__code__.co_firstlineno + 1) in events


def doubled(a):
    return a * 2


def tripled(a):
    return a * 3


@pytest.mark.parametrize("install", [sys.settrace, sys.setprofile], ids=["settrace", "setprofile"])
def test_a_traced_or_profiled_thread_runs_its_frames_as_written(install):
    """With a trace or profile function set (a debugger, a profiler, coverage), frames are neither given to
    the callback nor replaced by their cached code, and the tool's own callback is never intercepted."""
    tool_calls = []

    def tool(frame, event, arg):
        tool_calls.append(event)
        return None

    rec = Recorder({doubled.__code__: (always, tripled.__code__)})
    with callback_installed(rec):
        assert doubled(1) == 3  # translated and cached
        install(tool)
        try:
            assert doubled(2) == 4  # the cached entry is not used
            assert doubled(3) == 6
        finally:
            install(None)
        assert doubled(4) == 12  # and is used again once the tool is gone
    assert tool_calls, "the tool saw nothing"
    assert rec.codes() == [doubled.__code__], "the callback saw frames of the traced thread"


@pytest.mark.skipif(sys.version_info < (3, 12), reason="sys.monitoring is new in 3.12")
def test_frames_run_as_written_while_a_sys_monitoring_tool_listens():
    """cProfile (3.12+) and coverage's sysmon core use sys.monitoring instead of a profile function."""
    monitoring = sys.monitoring
    tool = monitoring.DEBUGGER_ID
    starts = []
    rec = Recorder({doubled.__code__: (always, tripled.__code__)})
    with callback_installed(rec):
        assert doubled(1) == 3
        monitoring.use_tool_id(tool, "sot-test")
        try:
            monitoring.register_callback(tool, monitoring.events.PY_START,
                                         lambda code, offset: starts.append(code.co_name))
            monitoring.set_events(tool, monitoring.events.PY_START)
            assert doubled(2) == 4
        finally:
            monitoring.set_events(tool, 0)
            monitoring.register_callback(tool, monitoring.events.PY_START, None)
            monitoring.free_tool_id(tool)
        assert doubled(3) == 9
    assert "doubled" in starts
    assert rec.codes() == [doubled.__code__]


def test_a_callback_without_stack_left_lets_the_frame_run_as_written():
    """A RecursionError out of the callback means the stack is full (near the user's recursion limit), not
    that the frame is wrong: the frame runs as written instead of failing where eager code would not."""
    def out_of_stack(*args):
        raise RecursionError("maximum recursion depth exceeded")

    with callback_installed(out_of_stack):
        assert doubled(5) == 10
    assert efx.cache_size(doubled.__code__) == 0


def test_a_guard_without_stack_left_lets_the_frame_run_as_written():
    """Such a guard is neither a hit nor a miss: no new translation is asked for."""
    full = [False]

    def guard(*args):
        if full[0]:
            raise RecursionError("maximum recursion depth exceeded")
        return True

    rec = Recorder({doubled.__code__: (guard, tripled.__code__)})
    with callback_installed(rec):
        assert doubled(1) == 3
        full[0] = True
        assert doubled(2) == 4
        full[0] = False
        assert doubled(3) == 9
    assert rec.codes() == [doubled.__code__]


def _nest(depth, fn, *args):
    return fn(*args) if depth <= 0 else _nest(depth - 1, fn, *args)


def _run_with_frames_left(left, fn, *args):
    """``fn(*args)`` called when about ``left`` frames are left before the recursion limit."""
    lo, hi = 0, sys.getrecursionlimit()  # the deepest nesting that works here, found by trying
    while hi - lo > 1:
        mid = (lo + hi) // 2
        try:
            _nest(mid, int)
            lo = mid
        except RecursionError:
            hi = mid
    return _nest(lo - left, fn, *args)


def test_an_entry_needing_more_frames_than_are_left_lets_the_frame_run_as_written():
    """``(guard, code, frames)``: the new code may do in one frame what the original does in several (an
    inlined recursion), or need frames the original does not. When fewer frames are left, the frame runs as
    written (the entry stays, and no new translation is asked for): RecursionError comes where it comes
    eagerly."""
    rec = Recorder({doubled.__code__: (always, tripled.__code__, 50)})
    with callback_installed(rec):
        assert _run_with_frames_left(20, doubled, 1) == 2  # translated just now, not run
        assert efx.cache_size(doubled.__code__) == 1
        assert _run_with_frames_left(200, doubled, 1) == 3
        assert _run_with_frames_left(20, doubled, 2) == 4
        assert _run_with_frames_left(200, doubled, 3) == 9
    assert len(rec.calls_for(doubled)) == 1


def threaded_fn(x):
    return x * 3


def test_other_thread_is_not_hooked():
    idents = []

    class ThreadRecorder(Recorder):
        def __call__(self, *a):
            idents.append(threading.get_ident())
            return super().__call__(*a)

    rec = ThreadRecorder(identity(threaded_fn))
    seen_in_thread = []
    results = []

    def worker():
        seen_in_thread.append(efx.get_callback())
        results.append([threaded_fn(i) for i in range(1000)])

    with callback_installed(rec):
        t = threading.Thread(target=worker)
        t.start()
        t.join()
        assert threaded_fn(2) == 6
    assert seen_in_thread == [None]
    assert results == [[3 * i for i in range(1000)]]
    assert len(rec.calls_for(threaded_fn)) == 1
    assert "worker" not in [code.co_name for code in rec.codes()]
    assert set(idents) == {threading.get_ident()}


def test_thread_callbacks_are_independent_and_released_at_thread_exit():
    rec_t = Recorder(identity(threaded_fn))
    out = []

    def worker():
        efx.set_callback(rec_t)  # never removed: thread exit must release it
        out.append(threaded_fn(1) + threaded_fn(2))

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert out == [9]
    assert len(rec_t.calls_for(threaded_fn)) == 1
    assert efx.get_callback() is None
    for _ in range(100):
        if not efx._ext._hook_installed():
            break
        threading.Event().wait(0.01)
    assert not efx._ext._hook_installed()
    assert sys.getrefcount(rec_t) == 2


# ---------------------------------------------------------------------------
# leaks


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def leak_target(a, b, *rest, k=None, **kw):
    inner = lambda: a  # noqa: E731  (a is a cell)
    return inner() if b else rest


def test_refcounts_stable_over_many_calls():
    arg_a, arg_b, arg_k = object(), object(), object()
    guard = lambda g, c, *args: True  # noqa: E731
    code = leak_target.__code__
    # SKIP for everything else (the inner lambda): a Recorder keeps the
    # closures it is shown, which would hold references to arg_a.
    rec = Recorder({code: (guard, code)}, default=SKIP)
    c1 = make_closure(1)
    crec = make_closure_repl(None).__code__
    rec.table[c1.__code__] = (guard, crec)
    with callback_installed(rec):
        leak_target(arg_a, arg_b, k=arg_k)
        c1(1)
        rec.calls.clear()
        before = [sys.getrefcount(o) for o in (arg_a, arg_b, arg_k, guard, code, crec, c1)]
        for _ in range(100_000):
            leak_target(arg_a, arg_b, k=arg_k)
            c1(1)
        after = [sys.getrefcount(o) for o in (arg_a, arg_b, arg_k, guard, code, crec, c1)]
    assert before == after
    # and in the miss path (callback returning None)
    rec2 = Recorder(default=None)
    with callback_installed(rec2):
        before = [sys.getrefcount(o) for o in (arg_a, arg_b, arg_k)]
        for _ in range(1000):
            leak_target(arg_a, arg_b, k=arg_k)
        rec2.calls.clear()
        after = [sys.getrefcount(o) for o in (arg_a, arg_b, arg_k)]
    assert before == after


def test_rss_growth_small():
    guard = lambda g, c, *args: True  # noqa: E731
    rec = Recorder({leak_target.__code__: (guard, leak_target.__code__)}, default=SKIP)
    rec.table[raiser.__code__] = (guard, raiser.__code__)
    rec.table[get_frame.__code__] = (guard, get_frame.__code__)

    def burst(n):
        for i in range(n):
            leak_target(i, i, 1, 2, k=3, z=4)
            if i % 4 == 0:
                try:
                    raiser(i)
                except ValueError:
                    pass
                get_frame(i)

    with callback_installed(rec):
        burst(10_000)
        rec.calls.clear()
        gc.collect()
        start = rss_bytes()
        burst(100_000)
        gc.collect()
        grown = rss_bytes() - start
    assert grown < 4 * 1024 * 1024, grown


def test_cache_entries_released_with_code():
    import weakref

    class Guard:
        def __call__(self, *a):
            return True

    guard = Guard()
    ref = weakref.ref(guard)
    ns = {}
    exec("def tmp_fn(x):\n    return x + 1\n", ns)
    fn = ns.pop("tmp_fn")
    rec = Recorder({fn.__code__: (guard, fn.__code__)})
    del guard
    with callback_installed(rec):
        assert fn(1) == 2 and fn(2) == 3
    rec.table.clear()
    rec.calls.clear()
    assert ref() is not None
    del fn, ns
    gc.collect()
    assert ref() is None

"""The constructs whose bytecode differs between Python 3.10, 3.11, 3.12 and 3.13 (issue 7).

Each function is written once and runs on every supported version; the comments name the instructions it
exercises on each. Every test checks eager parity and that nothing fell back (or exactly how it broke).
"""
from __future__ import annotations

import sys

import numpy as np
import paddle
import pytest

import sot
from sot import psdb
from sot.opcode_translator import pyversion

from conftest import assert_same


def _x(*shape: int, seed: int = 0) -> paddle.Tensor:
    rng = np.random.default_rng(seed + sum(shape))
    return paddle.to_tensor((np.abs(rng.standard_normal(shape)) + 0.5).astype("float32"))


def run(fn, *args, breaks: int = 0, calls: int = 2):
    """Eager vs translated (``calls`` times); no fallback, ``breaks`` graph breaks in the first call."""
    expected = fn(*args)
    fast = sot.symbolic_translate(fn)
    for _ in range(calls):
        assert_same(fast(*args), expected)
    stats = sot.stats()
    assert stats.fallbacks == 0, stats
    assert stats.graph_breaks == breaks, stats
    return stats


# -- calls -------------------------------------------------------------------------------------------------
def method_and_keyword_calls(x):
    # 3.10 LOAD_METHOD/CALL_METHOD, CALL_FUNCTION_KW; 3.11 PRECALL/CALL + KW_NAMES; 3.12 LOAD_ATTR method bit;
    # 3.13 NULL above the callable, CALL_KW
    y = paddle.add(x, x)
    z = y.sum(axis=0, keepdim=True)
    w = paddle.concat([x, y], axis=0)
    return z, w.reshape([-1]), paddle.nn.functional.relu(x - 1.0)


def star_calls(x, shape):
    # CALL_FUNCTION_EX (with a NULL slot from 3.11, above the callable on 3.13); 3.12+ INTRINSIC_LIST_TO_TUPLE
    parts = [x, x * 2]
    a = paddle.concat(*[parts], 1)
    b = paddle.reshape(x, [*shape])
    return a, b, max(*shape)


def test_method_and_keyword_calls(compile_all):
    run(method_and_keyword_calls, _x(2, 3))


def test_star_calls(compile_all):
    run(star_calls, _x(2, 3), (3, 2))


# -- operators and comparisons -----------------------------------------------------------------------------
def operators(x, n):
    # 3.10 BINARY_*/INPLACE_*; 3.11+ BINARY_OP; 3.12+ INTRINSIC_UNARY_POSITIVE; 3.13 COMPARE_OP bool bit
    y = x * 2 - 1
    y += x
    y = y / 2 @ paddle.ones([3, 3]) if n > 1 else y
    k = +n
    k **= 2
    k //= 3
    chained = 0 < n < 10  # 3.10 DUP_TOP/ROT_THREE; 3.11+ SWAP/COPY
    return -y, +y, y % 3, k, chained, not n, n << 2 | 1 ^ 3 & 7


def test_operators(compile_all):
    run(operators, _x(2, 3), 4)


# -- functions, closures, defaults ------------------------------------------------------------------------
def closures_and_defaults(x):
    # 3.10 MAKE_FUNCTION pops a qualname; 3.13 MAKE_FUNCTION + SET_FUNCTION_ATTRIBUTE, closure cells loaded
    # with LOAD_FAST; 3.11+ MAKE_CELL/COPY_FREE_VARS (3.10: the frame makes the cells)
    scale = 2.0

    def affine(t, shift=1.0, *, power=1):
        return (t * scale + shift) ** power

    def nested():
        return affine(x, power=2)

    return affine(x), affine(x, 3.0), nested(), (lambda t: t * scale)(x)


def argument_cell(x, n):
    # an argument captured by an inner function: 3.10 keeps it in a cell from the start (co_cell2arg)
    def add(t):
        return t + n

    return add(x) * n


def test_closures_and_defaults(compile_all):
    run(closures_and_defaults, _x(2, 3))


def test_argument_that_is_a_cell(compile_all):
    run(argument_cell, _x(3), 2)


# -- comprehensions (PEP 709: inlined on 3.12+, the frame must still be translated) ---------------------------
def comprehensions(x, xs):
    i = "outer"  # LOAD_FAST_AND_CLEAR saves and restores it around the inlined comprehension
    doubled = [t * 2 for t in xs]
    squares = [i * i for i in range(3)]
    picked = [t + x for i, t in enumerate(xs) if i % 2 == 0]
    return doubled, squares, picked, i


def comprehension_with_closure(x, xs):
    # the comprehension variable captured by a lambda: a cell inside the inlined comprehension on 3.12+
    fns = [lambda: t * x for t in xs]
    return [fn() for fn in fns]


def test_comprehensions_are_translated(compile_all):
    run(comprehensions, _x(3), [_x(3, seed=1), _x(3, seed=2), _x(3, seed=3)])


def test_comprehension_with_a_closure(compile_all):
    run(comprehension_with_closure, _x(3), [_x(3, seed=1), _x(3, seed=2)])


def comprehensions_around_a_break_in_a_loop(x, ys, names):
    # 3.12+: the comprehensions' variables are locals of this frame, saved by LOAD_FAST_AND_CLEAR (unbound at
    # the loop) and put back by STORE_FAST: no read of them, so the loop with a break runs natively around
    # its body function as on 3.10/3.11, where each comprehension is a function of its own
    for y in ys:
        x = x + y
        psdb.breakgraph()
        x = x * len([n for n in names if n])
    lengths = {k: len(k) for k in names}
    captured = [lambda: m for m in names]  # (m a cell inside the comprehension)
    return x, lengths, [f() for f in captured], [[a for a in range(b)] for b in range(3)]


def outer_value_of_a_comprehension_variable_across_a_loop_break(x, ys, names):
    n = x * 3  # read after the comprehensions, which put it back: passed to the loop body and after it
    for y in ys:
        x = x + y
        psdb.breakgraph()
        x = x * len([n for n in names])
    return x, [n * 2 for n in names], n


@pytest.mark.parametrize("fn", [comprehensions_around_a_break_in_a_loop,
                                outer_value_of_a_comprehension_variable_across_a_loop_break])
def test_comprehensions_around_a_break_in_a_loop(fn, compile_all):
    # the frame (before the loop; the native loop), the body function and its resume after the break, the
    # code after the loop: the same breaks on every version, and no fallback
    run(fn, _x(3), [_x(3, seed=1), _x(3, seed=2), _x(3, seed=3)], ["ab", "", "c"], breaks=2)


# -- strings -----------------------------------------------------------------------------------------------
def fstrings(x, n, name):
    # 3.10-3.12 FORMAT_VALUE; 3.13 CONVERT_VALUE/FORMAT_SIMPLE/FORMAT_WITH_SPEC; BUILD_STRING
    label = f"{name!r}:{n:>4}|{n / 3:.2f}|{name}"
    return x * len(label), label


def test_fstrings(compile_all):
    run(fstrings, _x(3), 7, "layer")


def fstring_of_tensor(x):
    y = x + 1
    text = f"{y.shape[0]} {y}"  # formatting a tensor reads its data: a graph break
    return y * 2, len(text) > 0


def test_fstring_of_tensor_breaks(compile_all):
    run(fstring_of_tensor, _x(3), breaks=1)


# -- slicing -------------------------------------------------------------------------------------------------
def slices(x, items):
    # 3.12+ BINARY_SLICE / STORE_SLICE; before: BUILD_SLICE + BINARY_SUBSCR / STORE_SUBSCR
    head = x[1:3]
    local = list(items)
    local[0:2] = [x, x]
    return head, x[::2], local[:2], items[1:]


def test_slices(compile_all):
    run(slices, _x(5), [1, 2, 3])


# -- control flow ------------------------------------------------------------------------------------------
def branches(x, flag, opt):
    # 3.10 absolute POP_JUMP_IF_*, JUMP_IF_*_OR_POP; 3.11 forward/backward variants; 3.12+ POP_JUMP_IF_NONE;
    # 3.13 TO_BOOL before every truth test
    y = x
    if flag and opt is not None:
        y = y + opt
    elif flag or opt:
        y = y - 1
    total = 0
    for k in range(3):  # 3.12 END_FOR; 3.13 END_FOR + POP_TOP skipped by an exhausted FOR_ITER
        total += k
    while total > 1:
        total -= 1
    return y * total if flag else y, opt is None


def test_branches(compile_all):
    run(branches, _x(3), True, 2.0)
    sot.reset()
    run(branches, _x(3), False, None)


def return_const(x, flag):
    # 3.12+ RETURN_CONST
    if flag:
        return None
    return x + 1


def test_return_const(compile_all):
    run(return_const, _x(3), False)
    sot.reset()
    run(return_const, _x(3), True)


def tensor_truth(x):
    y = x.sum()
    if y > 0:  # the jump breaks (3.13: after COMPARE_OP with the bool bit, whose conversion the jump does)
        return x * 2
    return x


def tensor_not(x):
    return not (x.sum() - x.sum())  # 3.13 TO_BOOL on a tensor breaks; earlier UNARY_NOT breaks


def test_tensor_truth_breaks(compile_all):
    run(tensor_truth, _x(3), breaks=1)


def test_tensor_not_breaks(compile_all):
    run(tensor_not, _x(3), breaks=1)


def if_compared(x):
    y = x * 2.0
    if y.sum() > 0:  # 3.13: COMPARE_OP with the bool bit, then the jump
        return y + 1.0
    return y - 1.0


def if_tensor(x):
    y = x * 2.0
    if (y > 0).all():  # 3.13: TO_BOOL, then the jump
        return y + 1.0
    return y - 1.0


def if_not_tensor(x):
    y = x * 2.0
    if not (y > 0).all():  # 3.13: TO_BOOL, then POP_JUMP_IF_TRUE
        return y - 1.0
    return y + 1.0


@pytest.mark.parametrize("fn", [if_compared, if_tensor, if_not_tensor])
@pytest.mark.parametrize("min_graph_size", [0, 10])
def test_each_branch_of_a_tensor_condition_is_translated_when_first_taken(fn, min_graph_size):
    """The jump on a tensor's truth breaks the graph on every version (3.13 included, whose bool conversion
    before the jump is the jump's): each of its two continuations has a resume function, translated when it
    first runs, also after the entry came to run the original code natively (every piece too small to
    compile: native.py). The counts are the same on every version."""
    positive, negative = _x(3), -_x(3)
    fast = sot.symbolic_translate(fn)
    with sot.config.patch(min_graph_size=min_graph_size):
        for _ in range(3):
            assert_same(fast(positive), fn(positive))
        first = sot.stats()
        for _ in range(3):
            assert_same(fast(negative), fn(negative))
        second = sot.stats()
    # the frame and the continuation taken; then the other continuation, once
    assert (first.translate_count, first.graph_breaks, first.fallbacks) == (2, 1, 0), first
    assert (second.translate_count, second.graph_breaks, second.fallbacks) == (3, 1, 0), second
    compiled = (first.compiled_graphs, second.compiled_graphs)
    assert compiled == ((2, 3) if min_graph_size == 0 else (0, 0)), compiled


class _AnnotatedError(Exception):
    pass


def store_on_builtin_objects(x, err, ns):
    # up to 3.12 SimpleNamespace and BaseException list the generic __setattr__ as their own slot wrapper
    err.code = 3
    ns.last = x * 2
    ns.calls = ns.calls + 1
    return x + err.code, ns.calls


def test_attribute_stores_on_a_namespace_and_an_exception_are_plain_stores(compile_all):
    import types

    x = _x(3)
    eager_ns, fast_ns = types.SimpleNamespace(calls=0), types.SimpleNamespace(calls=0)
    eager_err, fast_err = _AnnotatedError("e"), _AnnotatedError("e")
    expected = store_on_builtin_objects(x, eager_err, eager_ns)
    assert_same(sot.symbolic_translate(store_on_builtin_objects)(x, fast_err, fast_ns), expected)
    assert (fast_err.code, fast_ns.calls) == (eager_err.code, eager_ns.calls) == (3, 1)
    assert_same(fast_ns.last, eager_ns.last)
    stats = sot.stats()
    assert (stats.translate_count, stats.graph_breaks, stats.fallbacks) == (1, 0, 0), stats


# -- graph breaks with version-specific stack layouts -------------------------------------------------------
def break_under_pending_method_call(x):
    # the break happens with [NULL, paddle.add] (3.10-3.12) or [paddle.add, NULL] (3.13) on the stack;
    # 3.10 has no PUSH_NULL: the resume function gets a stand-in that calls the method like CALL_METHOD
    return paddle.clip(x, 0.0, float(x.max().numpy()) / 2)


def test_break_under_a_pending_method_call(compile_all):
    run(break_under_pending_method_call, _x(3), breaks=1)


def break_inside_try(x):
    # 3.10: the resume function re-enters the try block (SETUP_FINALLY in its prologue)
    y = x + 1
    try:
        psdb.breakgraph()
        z = y * 2
    except ValueError:
        z = y
    return z


def break_inside_with(x):
    y = x * 3
    with paddle.no_grad():
        z = y * 2
        psdb.breakgraph()
        z2 = y + 1
    return z, z2 * y


def test_break_inside_try_resumes_in_the_block(compile_all):
    run(break_inside_try, _x(3), breaks=1)


def test_break_inside_with_resumes_in_the_block(compile_all):
    x = _x(3)
    x.stop_gradient = False
    stats = run(break_inside_with, x, breaks=1)  # (the resume function simulates the block's end)
    assert stats.fallbacks == 0


def break_in_loop_with_exits(x, xs, stop_at):
    # a break inside a for body: the loop runs natively around a body function. 3.12+: the loop's exit is
    # past END_FOR (and POP_TOP on 3.13), a `return None` inside the body is RETURN_CONST; 3.10: ROT_TWO
    y = x + 1
    for i, t in enumerate(xs):
        y = y + t
        psdb.breakgraph()
        if i == stop_at:
            break
        if i > 5:
            return None
    return y * 2


def test_break_inside_loop_with_break_and_return(compile_all):
    xs = [_x(3, seed=1), _x(3, seed=2), _x(3, seed=3)]
    expected = break_in_loop_with_exits(_x(3), xs, 1)
    fast = sot.symbolic_translate(break_in_loop_with_exits)
    for _ in range(2):
        assert_same(fast(_x(3), xs, 1), expected)
    assert sot.stats().fallbacks == 0, sot.stats()
    assert_same(fast(_x(3), list(range(8)), 99), break_in_loop_with_exits(_x(3), list(range(8)), 99))


class _Base(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.linear = paddle.nn.Linear(3, 3)

    def forward(self, x):
        return self.linear(x) * 2


class _Derived(_Base):
    def forward(self, x):
        # 3.12+ LOAD_SUPER_ATTR (a method load); earlier: a call of super() then LOAD_METHOD/LOAD_ATTR
        return super().forward(x) + 1


def test_super_method_call_matches_eager(compile_all):
    paddle.seed(0)
    layer = _Derived()
    x = _x(2, 3)
    expected = layer(x)
    fast = sot.symbolic_translate(layer)
    for _ in range(2):
        assert_same(fast(x), expected)
    assert sot.stats().fallbacks == 0 and sot.stats().graph_breaks == 0, sot.stats()


# -- the version facts themselves -------------------------------------------------------------------------
def test_running_version_is_supported():
    assert pyversion.PY == sys.version_info[:2]
    assert pyversion.PY in pyversion.SUPPORTED_PYTHONS
    assert sot.SUPPORTED_PYTHONS == ((3, 10), (3, 11), (3, 12), (3, 13))
    assert pyversion.unsupported_python_message() is None


@pytest.mark.parametrize("fn", [comprehensions, break_inside_try, break_under_pending_method_call])
def test_resume_code_at_every_offset_round_trips(fn):
    """The abstract bytecode matches dis instruction for instruction (resume functions rely on it)."""
    from sot.opcode_translator.resume import _abstract_instructions

    _, index = _abstract_instructions(fn.__code__)
    assert index


def _other_interpreter(version: str) -> str | None:
    import glob
    import os

    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    found = sorted(glob.glob(os.path.join(root, "versions", f"{version}.*", "bin", "python")))
    return found[-1] if found else None


@pytest.mark.parametrize("version", ["3.9", "3.14"])
def test_unsupported_python_gets_a_clear_import_error(version):
    import os
    import subprocess

    python = _other_interpreter(version)
    if python is None:
        pytest.skip(f"no Python {version} installed under pyenv")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.run([python, "-c", "import sot"], cwd=root, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": root})
    assert proc.returncode != 0
    assert "ImportError: sot supports CPython 3.10, 3.11, 3.12, 3.13" in proc.stderr, proc.stderr


# -- exceptions (3.10: routed through the simulated block stack; 3.11+: through the exception table) ----------
class _Manager:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, exc_type, exc, tb):
        self.log.append(exc_type.__name__ if exc_type else "exit")
        return exc_type is KeyError  # swallows KeyError only


def caught_exceptions(x, key):
    table = {"a": 1}
    try:
        y = x * table[key]
    except KeyError:
        y = x - 1
    finally:
        y = y + 1
    try:
        try:
            z = table[key] * 2
        except (ValueError, TypeError) as err:
            z = str(err)
    except KeyError as err:
        z = len(err.args)
    log = []
    with _Manager(log):
        w = x * 3
        log.append(table[key])
    return y, z, w, log


def test_exceptions_routed_to_handlers(compile_all):
    run(caught_exceptions, _x(3), "a")
    sot.reset()
    run(caught_exceptions, _x(3), "missing")


def uncaught(x, key):
    table = {"a": 1}
    try:
        return x * table[key]
    except ValueError:
        return x


def test_uncaught_exception_is_the_eager_one(compile_all):
    fast = sot.symbolic_translate(uncaught)
    with pytest.raises(KeyError, match="missing"):
        fast(_x(3), "missing")


def many_locals_across_a_break(x):
    # The resume function's arguments (two stack values, then the live locals sorted by name) move b14 to
    # local index 16: on 3.13 `b13 + b14` is a LOAD_FAST_LOAD_FAST whose second index no longer fits 4 bits.
    b00, b01, b02, b03, b04 = x + 0, x + 1, x + 2, x + 3, x + 4
    b05, b06, b07, b08, b09 = x + 5, x + 6, x + 7, x + 8, x + 9
    b10, b11, b12, b13, b14 = x + 10, x + 11, x + 12, x + 13, x + 14
    pair = (x, psdb.breakgraph())
    total = b00 + b01 + b02 + b03 + b04 + b05 + b06 + b07 + b08 + b09 + b10 + b11 + b12
    return total * (b13 + b14), pair[0]


def test_locals_keep_their_values_when_resume_arguments_renumber_them(compile_all):
    run(many_locals_across_a_break, _x(3), breaks=1)


def test_split_super_instructions():
    from bytecode import Instr

    items = [Instr("LOAD_FAST", "a"), Instr("NOP")]
    assert pyversion.split_super_instructions(items) is items
    if pyversion.PY >= (3, 13):
        split = pyversion.split_super_instructions([Instr("STORE_FAST_LOAD_FAST", ("a", "b"))])
        assert [(i.name, i.arg) for i in split] == [("STORE_FAST", "a"), ("LOAD_FAST", "b")]


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def __enter__(self) -> str:
        self.calls.append("enter")
        return "entered"

    def __exit__(self, *exc_info) -> None:
        self.calls.append("exit")


class _EnterOnly:
    def __enter__(self) -> None:
        raise AssertionError("3.10 looks both methods up before calling __enter__")


def test_a_with_entry_run_natively_without_its_block():
    """3.10's ``SETUP_WITH`` run in generated code (`runtime.enter_with`): what ``__enter__`` returned on top,
    the bound ``__exit__`` below; a missing method raises 3.10's ``AttributeError`` naming it, before
    ``__enter__`` runs."""
    from sot.opcode_translator.runtime import enter_with

    manager = _Recorder()
    entered, exit_ = enter_with(manager)
    assert (entered, manager.calls) == ("entered", ["enter"])
    exit_(None, None, None)
    assert manager.calls == ["enter", "exit"]
    with pytest.raises(AttributeError, match="^__enter__$"):
        enter_with(1)
    with pytest.raises(AttributeError, match="^__exit__$"):
        enter_with(_EnterOnly())


class _StaticManager:
    """``__enter__``/``__exit__`` staticmethods: called without the manager."""
    log: list = []

    @staticmethod
    def __enter__() -> str:
        print("entering")  # a graph break: the entry runs natively (3.10: `runtime.enter_with`)
        _StaticManager.log.append("enter")
        return "static"

    @staticmethod
    def __exit__(*exc_info) -> None:
        _StaticManager.log.append("exit")


class _ClassManager:
    """``__enter__``/``__exit__`` classmethods: called with the type."""
    log: list = []

    @classmethod
    def __enter__(cls) -> type:
        print("entering")
        cls.log.append("enter")
        return cls

    @classmethod
    def __exit__(cls, *exc_info) -> None:
        cls.log.append("exit")


class _ClassManagerChild(_ClassManager):
    log: list = []


class _Exiter:
    """A callable class attribute without ``__get__``: called as it is, without the manager."""

    def __call__(self, *exc_info) -> None:
        _StaticManager.log.append("callable exit")


class _InstanceAttributeManager(_Recorder):
    """An ``__enter__`` set on the instance is ignored: special methods are looked up on the type."""

    def __init__(self) -> None:
        super().__init__()
        self.__enter__ = lambda: "instance attribute"
        self.__exit__ = lambda *exc_info: self.calls.append("instance exit")


class _NoisyInstanceAttributeManager(_InstanceAttributeManager):
    def __enter__(self) -> str:
        print("entering")
        return super().__enter__()


class _CallableExitManager(_StaticManager):
    __exit__ = _Exiter()


@pytest.mark.parametrize("manager, entered, log", [
    (_StaticManager(), "static", ["enter", "exit"]),
    (_ClassManager(), _ClassManager, ["enter", "exit"]),
    (_ClassManagerChild(), _ClassManagerChild, ["enter", "exit"]),
    (_CallableExitManager(), "static", ["enter", "callable exit"]),
], ids=["staticmethod", "classmethod", "inherited classmethod", "callable attribute"])
def test_enter_with_binds_as_cpython_binds_special_methods(manager, entered, log):
    from sot.opcode_translator.runtime import enter_with

    type(manager).log.clear()
    got, exit_ = enter_with(manager)
    exit_(None, None, None)
    assert (got, type(manager).log) == (entered, log)
    with manager as eager_got:
        pass
    assert (eager_got, type(manager).log) == (entered, log * 2)


def test_enter_with_ignores_methods_set_on_the_instance():
    from sot.opcode_translator.runtime import enter_with

    manager = _InstanceAttributeManager()
    entered, exit_ = enter_with(manager)
    exit_(None, None, None)
    assert (entered, manager.calls) == ("entered", ["enter", "exit"])


def _break_in_a_manager_block(x, manager, log):
    with manager as entered:
        x = x + 1
        print("inside")  # a break inside the block: on 3.10 the resume enters the manager natively
        log.append(entered if isinstance(entered, str) else getattr(entered, "__name__", type(entered).__name__))
        x = x * 2
    return x - 1


@pytest.mark.parametrize("make", [_StaticManager, _ClassManager, _InstanceAttributeManager,
                                  _NoisyInstanceAttributeManager, _CallableExitManager])
def test_a_break_in_the_block_of_a_manager_with_unusual_methods(compile_all, capsys, make):
    """The block's methods are the type's, bound as their kind binds, in the simulation and in the resume
    function that enters the manager natively after the break (3.10: `runtime.enter_with`)."""
    log: list = []
    manager = make()
    methods_log = getattr(manager, "calls", None) if isinstance(manager, _Recorder) else type(manager).log
    methods_log.clear()
    expected = _break_in_a_manager_block(_x(3), manager, log)
    expected_logs, eager_out = (list(log), list(methods_log)), capsys.readouterr().out
    fast = sot.symbolic_translate(_break_in_a_manager_block)
    for _ in range(2):
        log.clear()
        methods_log.clear()
        assert_same(fast(_x(3), manager, log), expected)
        assert (list(log), list(methods_log)) == expected_logs
        assert capsys.readouterr().out == eager_out
    stats = sot.stats()
    if make is _CallableExitManager:
        return  # (a callable object as __exit__ is not simulated: the frame falls back, eager's answer)
    assert (stats.fallbacks, stats.graph_breaks >= 1) == (0, True), stats


def _break_in_a_handler(x, log):
    try:
        {}["missing"]
    except KeyError:
        print("handled")  # a break inside the except block
        log.append(sys.exc_info()[0].__name__)
        x = x + 1
    return x * 2


def _break_in_a_generator_manager(x, log):
    import contextlib

    @contextlib.contextmanager
    def logged():
        log.append("enter")
        yield
        log.append("exit")

    with logged():
        x = x + 1
        print("inside")  # a break inside the block
        x = x * 2
    return x - 1


@pytest.mark.parametrize("fn", [_break_in_a_handler, _break_in_a_generator_manager])
def test_breaks_in_handlers_and_generator_managers_resume_on_every_version(compile_all, capsys, fn):
    """No fallback on 3.10 either: a break in a handler of an exception the frame raised runs natively from the
    raising instruction; a break in a generator manager's block enters it natively (`emit_native_with_entry`)."""
    log: list = []
    expected = fn(_x(3), log)
    expected_log, log[:] = list(log), []
    fast = sot.symbolic_translate(fn)
    for _ in range(2):
        assert_same(fast(_x(3), log), expected)
        assert log == expected_log
        log.clear()
    stats = sot.stats()
    assert stats.fallbacks == 0, stats
    assert stats.graph_breaks >= 1, stats

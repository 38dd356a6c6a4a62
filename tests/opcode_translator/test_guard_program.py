"""The C guard program (GuardProgram): it must pass exactly when the Python ``and`` chain it is compiled from
passes, on every kind of change; layer trees and built-in layers must miss on every change that matters."""
from __future__ import annotations

import gc
import sys
import weakref

import numpy as np
import paddle
import pytest

import sot
from conftest import assert_same
from sot.eval_frame_ext import GUARD_OPCODES, GuardProgram, cache_entries


def _t(*shape, seed=0, dtype="float32"):
    return paddle.to_tensor(np.random.RandomState(seed).randn(*shape).astype(dtype))


def _guard_of(code):
    (guard, _), = cache_entries(code)
    return guard.guard


def _agree(guard, *args) -> bool:
    """The program (or the chain calling it) and the reference chain give the same answer; returns it."""
    fast, reference = bool(guard.check(*args)), bool(guard.reference(*args))
    assert fast == reference, (fast, reference, guard.source)
    return fast


def test_tensor_arguments_are_checked_by_the_program_without_python(compile_all):
    def f(a, b, c):
        return a + b * c

    xs = [_t(2, 3, seed=i) for i in range(3)]
    sot.symbolic_translate(f)(*xs)
    guard = _guard_of(f.__code__)
    assert guard.check is guard.program and not guard.python_terms  # one C call, no Python frame
    globals_ = f.__globals__
    assert _agree(guard, globals_, None, *xs)
    changes = {
        "dtype": _t(2, 3, dtype="float64"),
        "shape": _t(2, 4),
        "rank": _t(2, 3, 1),
        "stop_gradient": _t(2, 3).detach().requires_grad_() if hasattr(paddle.Tensor, "requires_grad_") else None,
        "not a tensor": np.ones([2, 3], "float32"),
        "None": None,
        "a float": 1.5,
    }
    grad = _t(2, 3)
    grad.stop_gradient = False
    changes["stop_gradient"] = grad
    for what, value in changes.items():
        for slot in range(3):
            args = list(xs)
            args[slot] = value
            assert not _agree(guard, globals_, None, *args), (what, slot)


def test_dynamic_dimensions_in_the_program(compile_all):
    def f(x):
        return x * 2

    fast = sot.symbolic_translate(f)
    for batch in (3, 5):
        fast(_t(batch, 4))
    guards = [g.guard for g, _ in cache_entries(f.__code__)]
    dynamic = next(g for g in guards if any(-1 in shape for _, _, shape in g.shape_checks))
    for batch, expected in ((7, True), (2, True), (1, False), (0, False)):
        assert _agree(dynamic, f.__globals__, None, _t(batch, 4)) is expected, batch
    assert not _agree(dynamic, f.__globals__, None, _t(7, 5))


def test_program_and_chain_agree_on_globals_closures_and_values(compile_all):
    scale = {"k": 2.0}

    def f(x, mode, n):
        if mode == "a" and n > 2:
            return x * scale["k"] + paddle.to_tensor(float(len(scale)))
        return x - 1

    x = _t(2)
    sot.symbolic_translate(f)(x, "a", 3)
    guard = _guard_of(f.__code__)
    closure = f.__closure__
    assert _agree(guard, f.__globals__, closure, x, "a", 3)
    assert not _agree(guard, f.__globals__, closure, x, "b", 3)
    assert not _agree(guard, f.__globals__, closure, x, "a", 1)
    scale["extra"] = 1
    assert not _agree(guard, f.__globals__, closure, x, "a", 3)


class _Block(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc = paddle.nn.Linear(4, 4)
        self.norm = paddle.nn.BatchNorm1D(4)
        self.act = paddle.nn.Sequential(paddle.nn.ReLU(), paddle.nn.Dropout(0.5))

    def forward(self, x):
        return self.act(self.norm(self.fc(x)))


class _Net(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.blocks = paddle.nn.LayerList([_Block() for _ in range(3)])
        self.head = paddle.nn.Linear(4, 2)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def _changes():
    """Each change of a layer tree that must make the cached translation miss (and still be exact)."""
    def replace_sublayer(net):
        net.blocks[1].fc = paddle.nn.Linear(4, 4)

    def replace_parameter(net):
        net.head.weight = paddle.create_parameter([4, 2], "float32")

    def replace_inner_parameter(net):
        net.blocks[2].norm.weight = paddle.create_parameter(
            [4], "float32", default_initializer=paddle.nn.initializer.Constant(3.0))

    def eval_one(net):
        net.blocks[0].act.eval()

    def eval_all(net):
        net.eval()

    def pre_hook(net):
        net.blocks[2].norm.register_forward_pre_hook(lambda layer, inputs: (inputs[0] * 0.5,))

    def post_hook(net):
        net.blocks[0].act[0].register_forward_post_hook(lambda layer, inputs, output: output + 1)

    def append_block(net):
        block = _Block()
        block.act[1].p = 0.0
        net.blocks.append(block)

    return [replace_sublayer, replace_parameter, replace_inner_parameter, eval_one, eval_all, pre_hook,
            post_hook, append_block]


@pytest.mark.parametrize("change", _changes(), ids=lambda c: c.__name__)
def test_layer_tree_changes_miss_and_stay_exact(compile_all, change):
    paddle.seed(1)
    net = _Net()
    net.eval()  # (dropout off: results comparable) ...
    net.train()  # ... then training, as a model usually is
    for block in net.blocks:
        block.act[1].p = 0.0  # dropout that drops nothing, so train mode stays deterministic
    fast = sot.symbolic_translate(net)
    x = _t(3, 4)
    assert_same(fast(x), net(x))
    assert_same(fast(x), net(x))
    before = sot.stats()
    assert before.cache_hits >= 1
    change(net)
    assert_same(fast(x), net(x))
    after = sot.stats()
    assert after.translate_count > before.translate_count, change.__name__


def test_layer_tree_guard_is_one_program_and_much_shorter_to_run(compile_all):
    net = _Net()
    sot.symbolic_translate(net)(_t(3, 4))
    guard = _guard_of(type(net).forward.__code__)
    assert guard.check is guard.program, guard.python_terms
    assert _agree(guard, type(net).forward.__globals__, None, net, _t(3, 4))


def test_program_keeps_no_object_alive_and_leaks_no_reference(compile_all):
    net = _Net()
    x = _t(3, 4)
    sot.symbolic_translate(net)(x)
    guard = _guard_of(type(net).forward.__code__)
    args = (type(net).forward.__globals__, None, net, x)
    counts = [sys.getrefcount(a) for a in args[2:]]
    inner = [sys.getrefcount(layer) for layer in net.sublayers()]
    for _ in range(200):
        assert guard.check(*args)
    assert [sys.getrefcount(a) for a in args[2:]] == counts
    assert [sys.getrefcount(layer) for layer in net.sublayers()] == inner
    for _ in range(200):  # failing paths release what they read too
        assert not guard.check(type(net).forward.__globals__, None, net, _t(3, 5))
    assert [sys.getrefcount(layer) for layer in net.sublayers()] == inner
    ref = weakref.ref(net)
    del net, args
    gc.collect()
    assert ref() is None  # the cache entry holds the layers weakly


class _Descriptor:
    """A data descriptor: wins over the instance dict."""

    def __get__(self, obj, owner=None):
        return "descriptor"

    def __set__(self, obj, value):
        raise AttributeError("read only")


class _Plain:
    def __init__(self):
        self.value = 1


class _WithGetattr:
    def __init__(self):
        self.here = 1

    def __getattr__(self, name):
        if name == "computed":
            return 2
        raise AttributeError(name)


def _program(checks, nargs=1):
    """A hand-made program over argument 0: ``checks`` are (op, a, b) with constants given as ("c", value)."""
    consts, code, work = [], [], 0

    def operand(x):
        if isinstance(x, tuple) and x[0] == "c":
            consts.append(x[1])
            return ("c", len(consts) - 1)
        return x

    raw = []
    for op, a, b in checks:
        a, b = operand(a), operand(b)
        dst = None
        if not op.startswith("TEST"):
            dst = work
            work += 1
        raw.append((op, dst, a, b))

    def reg(x):
        if x is None:
            return 0
        if isinstance(x, tuple):
            return nargs + x[1]
        if isinstance(x, str):  # "w3": a work register
            return nargs + len(consts) + int(x[1:])
        return x

    for op, dst, a, b in raw:
        code.append((GUARD_OPCODES[op], dst or 0, reg(a), reg(b), 0))
    return GuardProgram(nargs, tuple(consts), max(work, 1), code, [])


def test_attribute_reads_are_exact_on_every_kind_of_type():
    read_value = _program([("ATTR", 0, ("c", "value")), ("TEST_IS", "w0", ("c", 1))])
    obj = _Plain()
    assert read_value(obj)
    obj.value = 2
    assert not read_value(obj)
    del obj.value
    with pytest.raises(AttributeError):
        read_value(obj)
    _Plain.value = 1  # a class attribute, no instance value
    try:
        assert read_value(obj)
        _Plain.value = _Descriptor()  # a data descriptor wins over the instance dict (the type changed)
        obj.__dict__["value"] = 1
        assert not read_value(obj)
    finally:
        del _Plain.value
    assert read_value(obj)  # the instance dict again
    computed = _program([("ATTR", 0, ("c", "computed")), ("TEST_IS", "w0", ("c", 2))])
    here = _program([("ATTR", 0, ("c", "here")), ("TEST_IS", "w0", ("c", 1))])
    other = _WithGetattr()
    assert computed(other) and here(other)
    with pytest.raises(AttributeError):
        computed(_Plain())


def test_weak_identity_and_items():
    target = _Plain()
    ref = weakref.ref(target)
    same = _program([("TEST_IS_REF", 0, ("c", ref))])
    assert same(target) and not same(_Plain())
    del target
    gc.collect()
    assert same(None)  # a dead reference reads None, as calling it does (the chain says the same)
    item = _program([("ITEM", 0, ("c", "k")), ("TEST_IS", "w0", ("c", True))])
    assert item({"k": True}) and not item({"k": False}) and not item({})

    class Missing(dict):
        def __missing__(self, key):
            return True

    assert item(Missing())  # ``d[k]`` of a dict subclass with __missing__


def test_bad_programs_are_refused():
    with pytest.raises(ValueError):
        GuardProgram(1, (), 1, [(GUARD_OPCODES["ATTR"], 0, 5, 0, 0)], [])  # register out of range
    with pytest.raises(ValueError):
        GuardProgram(1, (1,), 1, [(GUARD_OPCODES["TEST_IS_REF"], 0, 0, 1, 0)], [])  # not a weakref
    with pytest.raises(ValueError):
        GuardProgram(1, (1,), 1, [(GUARD_OPCODES["ATTR"], 0, 0, 1, 0)], [])  # name not a str
    with pytest.raises(ValueError):  # a tensor check takes 5 arguments
        GuardProgram(1, (), 1, [(GUARD_OPCODES["TEST_TENSOR"], 0, 0, 0, 4)], [0, 0, 0, 0])
    with pytest.raises(TypeError):
        _program([("TEST", 0, None)])(1, 2)  # wrong number of arguments
    attrs = GUARD_OPCODES["TEST_ATTRS"]
    for spec in ((("a", 1, 3),), (("a", 1, True),), (("a", 1),), ((b"a", 1, 0),), [("a", 1, 0)], "abc"):
        with pytest.raises(ValueError):  # (name: str, want, how: 0, 1 or 2) triples in a tuple constant
            GuardProgram(1, (spec,), 1, [(attrs, 0, 0, 1, 0)], [])
    with pytest.raises(ValueError):
        GuardProgram(1, ((("a", 1, 0),),), 1, [(attrs, 0, 0, 0, 0)], [])  # the spec must be a constant
    program = GuardProgram(1, ((("a", 1, 0), ("b", None, 1), ("c", None, 2)),), 1, [(attrs, 0, 0, 1, 0)], [])

    class Holder:
        a, b, c = 1, None, ()

    assert program(Holder()) is True
    Holder.c = (1,)
    assert program(Holder()) is False


def test_grad_and_amp_state_are_read_by_the_program(compile_all):
    def f(x):
        return x * 2

    x = _t(2)
    sot.symbolic_translate(f)(x)
    guard = _guard_of(f.__code__)
    assert guard.check is guard.program  # the state check needs no Python call
    assert _agree(guard, f.__globals__, None, x)
    with paddle.no_grad():
        assert not _agree(guard, f.__globals__, None, x)
    tracer = paddle.base.framework._dygraph_tracer()
    saved = tracer._amp_level, tracer._amp_dtype
    try:  # (AMP switched on in the tracer itself: on a CPU build ``auto_cast`` turns it off again)
        for level in ("O1", "O2"):
            tracer._amp_level, tracer._amp_dtype = getattr(paddle.base.core.AmpLevel, level), "bfloat16"
            assert not _agree(guard, f.__globals__, None, x)
    finally:
        tracer._amp_level, tracer._amp_dtype = saved
    assert _agree(guard, f.__globals__, None, x)
    assert any("autograd_state()" in text for text in guard.readable)  # a miss is explained as before


def test_items_of_dicts_lists_and_others_compare_as_a_tuple_would():
    import collections

    same_keys = _program([("TEST_ITEMS_EQ", 0, ("c", ("a", "b")))])
    assert same_keys({"a": 1, "b": 2}) and not same_keys({"b": 2, "a": 1}) and not same_keys({"a": 1})
    assert not same_keys({"a": 1, "b": 2, "c": 3})
    ordered = collections.OrderedDict(a=1, b=2)
    assert same_keys(ordered)
    ordered.move_to_end("a")  # the OrderedDict's own order, not its dict's
    assert not same_keys(ordered)
    assert same_keys(["a", "b"]) and same_keys(("a", "b")) and not same_keys(["a"]) and same_keys(iter("ab"))

    class Reversed(dict):
        def __iter__(self):
            return reversed(list(super().__iter__()))

    assert same_keys(Reversed(b=1, a=2)) and not same_keys(Reversed(a=1, b=2))
    with pytest.raises(ValueError):
        GuardProgram(1, ("ab",), 1, [(GUARD_OPCODES["TEST_ITEMS_EQ"], 0, 0, 1, 0)], [])  # not a tuple


def test_container_members_are_checked_by_the_program(compile_all):
    net = _Net()
    sot.symbolic_translate(net)(_t(3, 4))
    guard = _guard_of(type(net).forward.__code__)
    assert any("tuple(" in e and "_sub_layers" in e for e in guard.exprs)
    args = (type(net).forward.__globals__, None, net, _t(3, 4))
    assert _agree(guard, *args)
    net.blocks._sub_layers.move_to_end("0")  # the blocks run in another order
    assert not _agree(guard, *args)


class _ScaledLinear(paddle.nn.Linear):
    def forward(self, x):
        return super().forward(x) * 2  # Paddle's own forward on this layer: one ``layer`` statement


@pytest.mark.parametrize("layer_kind", ["builtin", "subclass calling super().forward"])
def test_replaced_parameter_of_a_layer_in_a_program_misses(compile_all, layer_kind):
    layer = paddle.nn.Linear(4, 3) if layer_kind == "builtin" else _ScaledLinear(4, 3)

    def f(x):
        return layer(x) + 1

    fast = sot.symbolic_translate(f)
    x = _t(2, 4)
    assert_same(fast(x), f(x))
    assert_same(fast(x), f(x))
    layer.weight = paddle.create_parameter([4, 3], "float32",
                                           default_initializer=paddle.nn.initializer.Constant(0.5))
    assert_same(fast(x), f(x))  # not the program traced with the old weight
    layer.bias = None
    assert_same(fast(x), f(x))


# -- building guards ---------------------------------------------------------------------------------------
def _guard_from(*exprs, code=(lambda d: None).__code__, constants=()):
    """A guard over one argument ``d`` (``__a0``) made of these checks, constants bound as ``__c0``, ..."""
    from sot.opcode_translator.executor.guard import GuardBuilder

    builder = GuardBuilder(code)
    for value in constants:
        builder.constant(value)
    for expr in exprs:
        builder.add(expr)
    return builder.build()


def test_paths_that_read_alike_are_not_confused():
    """A path read once is kept for the checks after it: ``d[1]`` and ``d['1']`` (or ``d.a`` and
    ``d['a']``) are different paths, and spelling differences of one path are the same path."""
    # (paths are shared within one term and through the bindings, which stay for the terms after them)
    guard = _guard_from("__a0[1] == 2 and __a0['1'] == 3 and __a0 [ 1 ] == 2", "__v0 := __a0[1]",
                        "__v1 := __a0['1']", "type(__v0) is int", "type(__v1) is int", "__v1 == 3")
    assert guard.check is guard.program
    assert _agree(guard, {}, None, {1: 2, "1": 3})
    for bad in ({1: 3, "1": 3}, {1: 2, "1": 2}, {1: 2.0, "1": 3}, {1: 2, "1": 3.0}):
        assert not _agree(guard, {}, None, bad), bad

    class Both(dict):
        a = 1

    attr_or_item = _guard_from("__a0.a == 1 and __a0['a'] == 2")
    assert _agree(attr_or_item, {}, None, Both(a=2))
    assert not _agree(attr_or_item, {}, None, Both(a=1))


def test_terms_are_parsed_bindings_by_their_path_and_a_term_that_is_no_expression_is_none():
    import ast

    from sot.opcode_translator.executor.guard import _parse_term

    nodes = [_parse_term(e) for e in ["__a0.b", "__v0 := __a0['k']", "not an expression (", "__a0 == 'x\\ny'"]]
    assert isinstance(nodes[0], ast.Attribute) and isinstance(nodes[1], ast.Subscript) and nodes[2] is None
    assert isinstance(nodes[3], ast.Compare) and nodes[3].comparators[0].value == "x\ny"


def test_guard_explanations_are_spelled_out_only_when_asked(compile_all):
    layer = paddle.nn.Linear(4, 3)

    def f(x):
        return layer(x) + 1

    sot.symbolic_translate(f)(_t(2, 4))
    guard = _guard_of(f.__code__)
    assert not {"readable", "exprs", "reference"} & set(vars(guard))  # nothing made while translating
    text = "\n".join(guard.readable)
    # a parameter is named by its name, shape and dtype (its elements are not formatted)
    assert f"layer.weight is <EagerParamBase {layer.weight.name} shape=[4, 3] dtype=paddle.float32>" in text
    assert "containing" not in text
    assert guard.first_failure(f.__globals__, f.__closure__, (_t(2, 4),)) is None
    assert guard.first_failure(f.__globals__, f.__closure__, (_t(2, 5),)) == "x.shape == [2, 4]"


def test_explaining_a_guard_whose_object_is_gone():
    class Thing:
        pass

    thing = Thing()
    builder_guard = _guard_from("__a0 is __c0()", constants=[weakref.ref(thing)])
    assert _agree(builder_guard, {}, None, thing)
    del thing
    gc.collect()
    assert builder_guard.readable == ["d is <an object since deleted>"]


def _compiled(exprs, namespace, parse_all):
    from sot.opcode_translator.executor.guard import _ProgramCompiler

    compiler = _ProgramCompiler(["__globals", "__closure", "__a0", "__a1"], namespace, parse_all=parse_all)
    kept = [compiler.add(expr) for expr in exprs]
    return kept, compiler.code, compiler.consts, compiler.call_args, compiler.bindings


def test_terms_compiled_from_their_text_compile_as_parsed():
    """The simple forms (paths compared with constants, bindings, weak identities, ``not``) are compiled
    from their text without parsing; every term must give the very instructions, constants and bindings
    its parse gives, and a term the simple forms do not cover exactly (a keyword as an attribute, a string
    key with an escape or a quote, a negative or zero-padded index, an unbound name, a constant that is no
    weak reference) must still be compiled (or kept in Python) as parsed."""
    class Thing:
        pass

    thing = Thing()
    from sot.opcode_translator.executor.guard import attributes_match

    namespace = {"__c0": weakref.ref(thing), "__c1": int, "__c2": [3, 4], "__c3": thing, "__c4": "NCHW",
                 "__c5": attributes_match, "__c6": (("a", 1, 0), ("b", None, 1), ("c", None, 2)),
                 "__c7": (("a", 1, 5),), "__c8": len}
    exprs = [
        "type(__a0) is __c1", "__a0.training is True", "__v0 := __a0._sub_layers['fc']", "__v0 is __c0()",
        "__v0._parameters['weight'] is __c0()", "__v0._stride == __c2", "__v0._data_format != __c4",
        "__v0._groups == 1", "__v0._dtype is None", "__v0.x is not False", "not __v0._forward_pre_hooks",
        "type(__v0._parameters['bias']) is __c1", "__v1 := __v0._sub_layers['0']", "__v1.a[0][12] == 0",
        "__v2 := __globals['F']", "__v3 := __v2.relu", "__v3 is __c3()", "__closure[0].cell_contents == 0",
        "__v0.if == 1", "__v0['it\\'s'] == 1", "__v0['a\\nb'] is None", "__v0[-1] == 0", "__v0[007] == 0",
        "__v0.ﬁ == 1", "__v9.a == 1", "__v9 := __v0.nope.deeper", "__v0.a == __c99", "type(__v0) is __c1",
        "__v0 [ 1 ] == 2", "__a1 is __c3()", "__a0._sub_layers['fc']._groups == 1", "__a0.training is True",
        "len(__v0._forward_post_hooks) == 2", "__v0.a == 'x'", "__v4 := __a0", "__v4.b is False",
        "__c5(__v0, __c6)", "__c5(__a0._sub_layers['x'], __c6)", "__c5(__v0, __c7)", "__c8(__v0, __c6)",
    ]
    fast = _compiled(exprs, namespace, parse_all=False)
    parsed = _compiled(exprs, namespace, parse_all=True)
    assert fast[0] == parsed[0] and fast[1:] == parsed[1:]
    kept = dict(zip(exprs, fast[0]))
    assert kept["__v0.if == 1"] is False and kept["__v9.a == 1"] is False  # (no expression; unbound)
    assert kept["__v0[-1] == 0"] is False  # (a unary minus: kept in Python, as before)
    assert kept["__v0._stride == __c2"] and kept["__v0._parameters['weight'] is __c0()"]
    assert [op for op, *_ in fast[1]].count("TEST_ATTRS") == 2  # (a spec it cannot take is a plain call)


class _Configured:
    def __init__(self):
        self.rate, self.flag, self.none, self.hooks, self.stride = 0.5, True, None, {}, [1, 2]


def test_attribute_group_is_exactly_its_chain_of_checks_on_every_miss():
    """`GuardBuilder.attributes`: the attributes of one object checked as one instruction (``==``, ``is``,
    empty) must pass and fail exactly as the chain of its parts, in the program and in Python, on every
    change of every attribute, a missing attribute and values whose ``==`` is odd."""
    from sot.opcode_translator.executor.guard import (ATTR_EQ, ATTR_FALSY, ATTR_IS, AttributesCheck, GuardBuilder,
                                                      attributes_match)

    obj = _Configured()
    builder = GuardBuilder((lambda d: None).__code__)
    check = builder.attributes("__a0", [("rate", ATTR_EQ, 0.5), ("flag", ATTR_IS, True), ("none", ATTR_IS, None),
                                        ("hooks", ATTR_FALSY, None), ("stride", ATTR_EQ, [1, 2])])
    spec = builder.namespace[check[check.index(", ") + 2:-1]]
    assert isinstance(check, AttributesCheck) and [p.split(" == ")[0] for p in check.parts] == [
        "__a0.rate", "__a0.flag is True", "__a0.none is None", "not __a0.hooks", "__a0.stride"]
    assert builder.attributes("__a0", [("rate", ATTR_EQ, 0.5), ("flag", ATTR_IS, True), ("none", ATTR_IS, None),
                                       ("hooks", ATTR_FALSY, None), ("stride", ATTR_EQ, [1, 2])]) == check
    builder.add(check)
    guard = builder.build()
    assert guard.check is guard.program  # one instruction, no Python
    assert guard.exprs == list(check.parts)  # a miss is explained attribute by attribute

    def passes(check, *args) -> bool:
        try:
            return bool(check(*args))
        except Exception:  # (the hook takes an exception for a failure)
            return False

    def agree(value) -> bool:
        answers = [passes(guard.check, {}, None, value), passes(guard.reference, {}, None, value),
                   passes(attributes_match, value, spec),
                   guard.first_failure({}, None, (value,)) is None]  # (the chain of parts, one by one)
        assert len(set(answers)) == 1, (vars(value), answers)
        return answers[0]

    assert agree(obj)

    class Odd:
        def __init__(self, answer):
            self.answer = answer

        def __eq__(self, other):
            return self.answer

    yes, no = True, False
    changes = [("rate", 0.25, no), ("rate", 0.5000001, no), ("rate", "0.5", no), ("rate", None, no),
               ("rate", np.float64(0.5), yes), ("rate", np.array([0.5, 0.5]), no), ("rate", Odd(1), yes),
               ("rate", Odd(0), no), ("flag", False, no), ("flag", 1, no), ("flag", None, no),
               ("flag", np.bool_(True), no), ("none", 0, no), ("none", False, no), ("none", "", no),
               ("hooks", {1: None}, no), ("hooks", [0], no), ("hooks", 1, no), ("hooks", "x", no), ("hooks", {}, yes),
               ("hooks", [], yes), ("hooks", 0, yes), ("hooks", "", yes), ("stride", (1, 2), no),
               ("stride", [1, 2.0], yes), ("stride", [2, 1], no), ("stride", [1, 2, 3], no)]
    for name, value, expected in changes:
        changed = _Configured()
        setattr(changed, name, value)
        assert agree(changed) == expected, (name, value)
    missing = _Configured()
    del missing.stride
    assert not agree(missing)


def test_layer_attribute_groups_miss_on_training_hooks_and_configuration_of_any_layer(compile_all):
    """A layer's flag, empty hook dicts and configuration are one check per layer: a change of any one of
    them, at any depth of the tree, must miss (and give eager's answer)."""
    paddle.seed(2)
    net = _Net()
    for block in net.blocks:
        block.act[1].p = 0.0
    fast = sot.symbolic_translate(net)
    x = _t(3, 4)
    assert_same(fast(x), net(x))
    guard = _guard_of(type(net).forward.__code__)
    attrs = [e for e in guard._builder.exprs if type(e).__name__ == "AttributesCheck"]
    assert len(attrs) >= len(net.sublayers()) and any("_forward_pre_hooks" in p for a in attrs for p in a.parts)
    assert not any(e.endswith(".training is True") for e in guard._builder.exprs)  # (all in the groups)
    changes = [lambda n: setattr(n.blocks[1].norm, "_epsilon", 0.5),
               lambda n: n.blocks[0].act[0].eval(),
               lambda n: n.head.register_forward_post_hook(lambda layer, inputs, output: output * 3),
               lambda n: n.blocks[2].register_forward_pre_hook(lambda layer, inputs: (inputs[0] + 1,)),
               lambda n: setattr(n.blocks[2].act[1], "p", 1.0)]
    for change in changes:
        before = sot.stats().translate_count
        change(net)
        assert_same(fast(x), net(x))
        assert sot.stats().translate_count == before + 1

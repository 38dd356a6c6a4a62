"""Guards: one compiled, short-circuiting check per cache entry.

Each guarded variable contributes Python expressions over the guard function's parameters, which mirror
what the C hook passes: ``guard(globals, closure, *argument_slots)``. The expressions are joined with
``and`` into a single generated function, so the hot path is one Python call with no loops. Objects the
guard compares by identity are held by weak reference where possible, so a cache entry never keeps a user
object alive.
"""
from __future__ import annotations

import ast
import builtins
import copy
import dataclasses
import functools
import keyword
import re
import sys
import types
import weakref
from typing import Any, Callable, Iterable

import paddle

from ...eval_frame_ext import (GUARD_OPCODES, HEAPTYPE, GuardProgram, dtype_matches, tensor_matches, tensor_meta,
                               type_version)
from ...log import log

# Tensor guards read dtype and shape from the C++ tensor when that is safe (tensor_meta.py says when).
tensor_meta.install()


def argument_names(code: types.CodeType) -> tuple[str, ...]:
    """The names of the argument slots, in the order the hook passes them."""
    count = code.co_argcount + code.co_kwonlyargcount
    count += bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)  # *args, **kwargs
    return code.co_varnames[:count]


def describe_value(value: Any) -> str:
    """A short, recognisable spelling of a guarded constant."""
    if isinstance(value, type):
        return value.__qualname__
    if isinstance(value, types.ModuleType):
        return value.__name__
    if getattr(value, "__module__", "") == __name__.rsplit(".", 1)[0] + ".function_graph":
        # sot's own state query (autograd_state()) or check (apart_from_parameters_of_Linear(x))
        return value.__name__.lstrip("_") if hasattr(value, "__name__") else repr(value)
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType)):
        return f"{getattr(value, '__module__', None) or '?'}.{value.__qualname__}"
    if isinstance(value, paddle.nn.Layer):
        return f"<{type(value).__name__} layer at {id(value):#x}>"
    if isinstance(value, paddle.Tensor):
        # (not ``str``: it formats every element, only for the first line to be kept)
        return f"<{type(value).__name__} {value.name} shape={list(value.shape)} dtype={value.dtype}>"
    text = str(value) if type(value).__module__.startswith("paddle") else repr(value)
    text = text.splitlines()[0] if text else text
    return text if len(text) < 60 else text[:57] + "..."


# How `attributes_match` compares an attribute with what it wants (the C program's GP_ATTR_EQ, GP_ATTR_IS and
# GP_ATTR_FALSY, guard_program.c).
ATTR_EQ, ATTR_IS, ATTR_FALSY = 0, 1, 2


def attributes_match(obj: Any, spec: tuple[tuple[str, Any, int], ...]) -> bool:
    """``obj.<name> == want`` (`ATTR_EQ`), ``obj.<name> is want`` (`ATTR_IS`) or ``not obj.<name>``
    (`ATTR_FALSY`) for every (name, want, how) of ``spec``, in order: what the ``and`` chain of those checks
    gives (an exception propagates as from the chain). One check per object (a layer's configuration, training
    flag and hook dicts) instead of one per attribute; the C guard program runs it as one instruction."""
    for name, want, how in spec:
        value = getattr(obj, name)
        if how == ATTR_IS:
            if value is not want:
                return False
        elif how == ATTR_FALSY:
            if value:
                return False
        elif not value == want:
            return False
    return True


# -- class lookups ---------------------------------------------------------------------------------------
# The simulation looks things up on classes all the time (a dunder it inlines, a method, a class attribute,
# ``__init__``), mostly through ``inspect.getattr_static``, without a path the guard could re-read. A class
# lookup of a user class (a heap type) is guarded instead by the class's version tag (`type_version`, C):
# CPython changes it whenever an attribute of the class or of one of its bases is set or deleted, so one
# integer compare covers every lookup through that class. Consequences:
# - any class attribute change retranslates the frames that used the class, also changes the lookups did
#   not depend on (a class-level counter assigned on every call retranslates on every call);
# - so a class seen at `CLASS_VERSION_CHANGES_LIMIT` versions (by the translations made), or one the frame
#   itself assigns attributes of (then its version changes at every call), is guarded member by member
#   instead (`class_members_match`): every entry of the dicts of its MRO keeps its identity, except the
#   names that keep changing to plain data (an int, a str...) or that the frame assigns: a read of such a
#   name through a path (``Cls.n``, ``self.n``) is guarded by value as any attribute is; one through an
#   object with no path (``type(self).n``, `FunctionGraph.class_attribute_reads`) keeps the name in the
#   member checks, so such a counter still retranslates at each change (up to the cache limit);
# - 3.13+ stop giving a type a tag after about a thousand modifications (`type_version` is then 0): such a
#   class is guarded member by member too, never by a version that cannot change.
CLASS_VERSION_CHANGES_LIMIT = 3  # (below the cache limit, 8 by default: the member checks get their chance)
# Values that, when a name keeps changing to them, mark the name as volatile class data.
_PLAIN_DATA = (int, float, complex, str, bytes, bool, type(None))


@dataclasses.dataclass
class _ClassHistory:
    """What the guards built so far saw of one class: its last version tag, the identities of the entries
    of its MRO's dicts then (a fingerprint, only compared), how often the version changed, and the names
    whose value changed to plain data between two versions."""
    version: int
    fingerprint: dict[tuple[int, str], int]
    changes: int = 0
    volatile: set[str] = dataclasses.field(default_factory=set)


_CLASS_HISTORY: "weakref.WeakKeyDictionary[type, _ClassHistory]" = weakref.WeakKeyDictionary()


def _heap_mro(cls: type) -> list[type]:
    """The classes of ``cls``'s MRO that can change (built-in types cannot)."""
    return [klass for klass in cls.__mro__ if klass.__flags__ & HEAPTYPE]


def _fingerprint(cls: type) -> dict[tuple[int, str], int]:
    return {(index, name): id(value) for index, klass in enumerate(_heap_mro(cls))
            for name, value in list(vars(klass).items())}


def _class_history(cls: type, version: int) -> _ClassHistory:
    """The history of ``cls``, updated with what it is now."""
    history = _CLASS_HISTORY.get(cls)
    if history is None:
        history = _CLASS_HISTORY[cls] = _ClassHistory(version, _fingerprint(cls))
        return history
    if version != 0 and version == history.version:
        return history
    fingerprint = _fingerprint(cls)
    if version == 0 and fingerprint == history.fingerprint:
        return history
    heap = _heap_mro(cls)
    for key in fingerprint.keys() | history.fingerprint.keys():
        if fingerprint.get(key) != history.fingerprint.get(key):
            index, name = key
            value = vars(heap[index]).get(name) if index < len(heap) else None
            if isinstance(value, _PLAIN_DATA) and not (name.startswith("__") and name.endswith("__")):
                history.volatile.add(name)
    history.version, history.fingerprint = version, fingerprint
    history.changes += 1
    if history.changes == CLASS_VERSION_CHANGES_LIMIT:
        log(1, f"class {cls.__qualname__} changed {history.changes} times across translations (volatile "
               f"attributes: {sorted(history.volatile) or 'none'}): its lookups are guarded member by member")
    return history


def class_members_match(cls: Any, spec: tuple) -> bool:
    """Every class lookup through ``cls`` finds what it found when ``spec`` was made (`_members_spec`):
    the same MRO, and in the dict of each Python class of it the same names (but the excluded ones) bound
    to the same objects. The guard of a class whose version tag cannot be used (`class_lookup_checks`)."""
    mro_refs, tables, excluded = spec
    mro = cls.__mro__
    if len(mro) != len(mro_refs):
        return False
    for klass, ref in zip(mro, mro_refs):
        if klass is not ref():
            return False
    for (index, names, entries) in tables:
        members = vars(mro[index])
        if (members.keys() - excluded if excluded else members.keys()) != names:
            return False
        for name, want, held_weakly in entries:
            if members[name] is not (want() if held_weakly else want):
                return False
    return True


def _members_spec(cls: type, excluded: frozenset[str]) -> tuple:
    """What `class_members_match` compares with; the values held weakly when they allow it (a method's code
    may hold this very guard: a strong reference would be a cycle through the code's extra slot)."""
    mro_refs = tuple(weakref.ref(klass) for klass in cls.__mro__)
    tables = []
    for index, klass in enumerate(cls.__mro__):
        if not klass.__flags__ & HEAPTYPE:
            continue
        members = dict(vars(klass))
        entries = []
        for name, value in members.items():
            if name in excluded:
                continue
            try:
                entries.append((name, weakref.ref(value), True))
            except TypeError:
                entries.append((name, value, False))
        tables.append((index, frozenset(members.keys() - excluded), tuple(entries)))
    return mro_refs, tuple(tables), excluded


def class_lookup_checks(builder: "GuardBuilder", cls: type, reads: Iterable[str] = (),
                        stored: Iterable[str] = ()) -> list[str]:
    """Checks that a class lookup through ``cls`` finds what it found in this translation: its version tag,
    or member by member when the class changes too often or has no tag (see the notes above). The class is
    the one the guard checks the identity or type of an object against: it is reached as that constant (held
    weakly), so the check is made once per class, however many objects of it the guard checks. ``reads``: the
    names of class attributes the translation read (kept in the member checks even when volatile);
    ``stored``: the names the frame itself assigns on the class or a base, which change its version at every
    call (member by member at once, those names left out unless read). Nothing for a built-in type: it
    cannot change."""
    if not cls.__flags__ & HEAPTYPE:
        return []
    expr = f"{builder.keyed_constant(('class ref', id(cls)), lambda: weakref.ref(cls))}()"
    version = type_version(cls)
    history = _class_history(cls, version)
    stored = set(stored)
    if version != 0 and history.changes < CLASS_VERSION_CHANGES_LIMIT and not stored:
        return [f"{builder.constant(type_version)}({expr}) == {version}"]
    excluded = frozenset(history.volatile.union(stored).difference(reads))
    name = builder.keyed_constant(("class members", id(cls), excluded), lambda: _members_spec(cls, excluded))
    return [f"{builder.constant(class_members_match)}({expr}, {name})"]


class GuardBuilder:
    """Collects guard expressions for one translation and compiles them into a `Guard`."""

    GLOBALS = "__globals"
    CLOSURE = "__closure"

    def __init__(self, code: types.CodeType) -> None:
        # (not the code itself: a guard keeps its builder to explain misses, and the guard lives in the
        # code's extra slot, a cycle the collector cannot see)
        self.code_name = code.co_name
        self.freevars = code.co_freevars
        self.arg_names = argument_names(code)
        self._params = {name: f"__a{i}" for i, name in enumerate(self.arg_names)}
        self.namespace: dict[str, Any] = {}
        self._const_names: dict[Any, str] = {}  # id(value), or a key of a made constant
        self.exprs: list[str] = []  # checks, and ``name := path`` bindings
        self._bindings: dict[str, str] = {}
        self._bound_names: dict[int, str] = {}
        self._path_names: dict[str, str] = {}
        # (input path, expression, shape) of every tensor shape guard: compared with a missing call's
        # inputs to find dimensions that vary (dynamic_shape.py).
        self.shape_checks: list[tuple[str, str, tuple[int, ...]]] = []
        # (input path, expression, value) of every int value guard: the same, for ints that vary.
        self.int_checks: list[tuple[str, str, int]] = []
        # ... and of every finite float value guard, for floats that vary (`dynamic_shape.learn_floats_from_miss`)
        self.float_checks: list[tuple[str, str, float]] = []
        # (input path, expression, contents) of every numpy array whose values were folded: the same, for
        # arrays whose contents vary (their pure methods then run natively instead: dynamic_shape.py).
        self.array_checks: list[tuple[str, str, Any]] = []
        # (input path, expression, weak reference) of every built-in layer guarded by identity: the same, for
        # paths that hold another layer of the class at later calls.
        self.layer_checks: list[tuple[str, str, Any]] = []
        # The checks of the values of ints and floats -> whether each is of numbers guarded as data only (their
        # text formatted, their sum computed: `FunctionGraph.guarded_for_data_only`), which `Guard.widened` drops.
        self.number_checks: dict[str, bool] = {}
        self._seen: set[str] = set()
        self.tensor_arguments: set[str] = set()  # the arguments that are tensors (`Guard.reads_arguments`)

    # -- naming -----------------------------------------------------------------------------------------
    def argument(self, name: str) -> str:
        return self._params[name]

    def constant(self, value: Any) -> str:
        """Bind ``value`` in the guard's namespace (strongly); returns its name."""
        name = self._const_names.get(id(value))
        if name is None:
            name = f"__c{len(self.namespace)}"
            self.namespace[name] = value
            self._const_names[id(value)] = name
        return name

    def keyed_constant(self, key: tuple, make: Callable[[], Any]) -> str:
        """The constant made by ``make`` the first time ``key`` is asked for (a value made anew, e.g. a list
        or a weak reference, has no identity of its own to find it by as `constant` does)."""
        name = self._const_names.get(key)  # type: ignore[call-overload]
        if name is None:
            name = self.constant(make())
            self._const_names[key] = name  # type: ignore[index]
        return name

    def constant_list(self, items: tuple) -> str:
        """A list constant (e.g. a shape ``Tensor.shape`` is compared with), made once, not per call."""
        return self.keyed_constant(("list", tuple(items)), lambda: list(items))

    def attributes(self, expr: str, checks: list[tuple[str, int, Any]]) -> "AttributesCheck | None":
        """One check that each (name, how, want) of ``checks`` holds for the object at ``expr`` (see
        `attributes_match`; wants are held strongly, as constants are), explained as one check per attribute;
        None when there are none. The same checks of one path give the same check (kept once by `add`)."""
        if not checks:
            return None
        key = ("attributes", expr, tuple((name, how, type(want), repr(want)) for name, how, want in checks))
        spec_name = self.keyed_constant(key, lambda: tuple((sys.intern(name), want, how)
                                                           for name, how, want in checks))
        parts = []
        for name, how, want in checks:
            path = f"{expr}.{name}"
            if how == ATTR_FALSY:
                parts.append(f"not {path}")
            elif how == ATTR_IS:
                parts.append(f"{path} is {want!r}" if want is None or type(want) is bool
                             else f"{path} is {self.constant(want)}")
            else:
                parts.append(f"{path} == {self.constant(want)}")
        return AttributesCheck(f"{self.constant(attributes_match)}({expr}, {spec_name})", parts)

    def identity(self, expr: str, value: Any) -> str:
        """``expr is value``, holding ``value`` by weak reference when it allows one. Modules and builtin
        functions are held strongly (they live as long as the interpreter anyway): a plain ``is`` saves the
        weak reference's call on every check."""
        if isinstance(value, types.ModuleType) or (isinstance(value, types.BuiltinFunctionType) and isinstance(
                getattr(value, "__self__", None), (types.ModuleType, type(None)))):  # (not a bound method)
            return f"{expr} is {self.constant(value)}"
        try:
            ref = weakref.ref(value)
        except TypeError:
            return f"{expr} is {self.constant(value)}"
        return f"{expr} is {self.constant(ref)}()"

    def expr_of(self, var: Any) -> str:
        """The expression reaching ``var``; a compound path is bound to a local of the guard once, so a
        deep object (``self.blocks[3].fc``) is reached by one lookup per step, not one per check."""
        name = self._bound_names.get(id(var))
        if name is not None:
            return name
        expr = var.tracker.guard_expr(self)
        if expr.isidentifier():
            return expr
        # Variables reached by the same path (``self.n_head`` read in every block) share one binding, so
        # their checks are equal strings and kept once (`add`).
        name = self._path_names.get(expr)
        if name is None:
            name = f"__v{len(self._bindings)}"
            self._bindings[name] = expr
            self._path_names[expr] = name
            self.exprs.append(f"{name} := {expr}")  # a binding, in order among the checks
        self._bound_names[id(var)] = name
        return name

    def bind(self, path: str) -> str:
        """A local of the guard standing for ``path`` (bound once, in order among the checks): for paths
        that have no variable of their own, e.g. the inside of a built-in layer."""
        name = self._path_names.get(path)
        if name is None:
            name = f"__v{len(self._bindings)}"
            self._bindings[name] = path
            self._path_names[path] = name
            self.exprs.append(f"{name} := {path}")
        return name

    def expand(self, expr: str) -> str:
        """``expr`` with its bound locals replaced by the paths they stand for."""
        # (paths are chains of attribute and item accesses: no parentheses needed)
        return re.sub(r"__v\d+", lambda m: self.expand(self._bindings[m.group(0)]), expr)

    def note_number_checks(self, checks: list[str], data_only: bool) -> None:
        """``checks`` compare an int's or float's value; ``data_only`` as in `number_checks` (one use that
        decided something keeps a check shared by several variables)."""
        for check in checks:
            self.number_checks[check] = self.number_checks.get(check, True) and data_only

    # -- collecting -------------------------------------------------------------------------------------
    def add(self, expr: str) -> None:
        if expr not in self._seen:
            self._seen.add(expr)
            self.exprs.append(expr)

    add_raw = add

    def readable(self, expr: str) -> str:
        """``expr`` with parameter and constant names replaced by what a user would write."""
        expr = re.sub(r"(__c\d+)\(([^()]*\.dtype), (__c\d+)\)",  # dtype_matches(x.dtype, d): x.dtype == d
                      lambda m: f"{m.group(2)} == {m.group(3)}" if self.namespace.get(m.group(1)) is dtype_matches
                      else m.group(0), self.expand(expr))
        expr = re.sub(r"\._(?:sub_layers|parameters|buffers)\['(\w+)'\]", r".\1", expr)
        expr = re.sub(r"__a(\d+)", lambda m: self.arg_names[int(m.group(1))], expr)
        expr = re.sub(r"__globals\[('[^']*')\]", lambda m: m.group(1)[1:-1], expr)
        names = self.freevars
        expr = re.sub(r"__closure\[(\d+)\]\.cell_contents", lambda m: names[int(m.group(1))], expr)

        def const(match: re.Match) -> str:
            value = self.namespace[match.group(1)]
            if isinstance(value, weakref.ref) and match.group(2):  # an object held weakly: the object
                target = value()
                return "<an object since deleted>" if target is None else describe_value(target)
            return describe_value(value) + (match.group(2) or "")  # e.g. a query function, called

        return re.sub(r"(__c\d+)(\(\))?", const, expr)

    def build(self) -> "Guard":
        return Guard(self)

    def forget_build_state(self) -> None:
        """Drop the indexes that keep constants, bindings and checks unique while building (keyed by ids of
        values and variables, and by the ``repr`` of attribute values: ~0.1 MB for a vision model's guard).
        The built guard keeps its builder only to explain misses, which reads the checks, the bindings and
        the namespace."""
        self._const_names = {}
        self._seen = set()
        self._bound_names = {}
        self._path_names = {}


class CombinedCheck(str):
    """A check the guard function runs as one fast expression (the string itself, e.g. one C call) that
    stands for several plain ones (``parts``), which explain a miss and read well."""

    parts: tuple[str, ...]

    def __new__(cls, fast: str, parts: list[str]) -> "CombinedCheck":
        check = super().__new__(cls, fast)
        check.parts = tuple(parts)
        return check


class AttributesCheck(CombinedCheck):
    """`GuardBuilder.attributes`: checks of attributes of one object (so never of the arguments alone)."""


def _is_binding(expr: str) -> bool:
    return expr.startswith("__v") and " := " in expr


_ARGUMENT_CHECK = re.compile(r"^(type\(__a\d+\) is __c\d+|__a\d+ == __c\d+|__a\d+ is (None|True|False|Ellipsis)"
                             r"|__a\d+ not in \(0, 1\))$")


_TYPE_CHECK = re.compile(r"^type\(__a\d+\) is __c\d+$")
_ARGUMENT = re.compile(r"__a\d+")
_ARGUMENT_PART = re.compile(r"__a\d+\s*[.\[]")  # an attribute or item of an argument
_REACHED_THROUGH_INPUTS = re.compile(r"__v\d+|__globals|__closure")


def _on_arguments_only(expr: str) -> bool:
    """A check of the call's arguments themselves (their types, values, tensor metas), not of what is
    reached through the inputs (a layer's sublayers and parameters, globals, closure cells) nor of the
    process state (grad mode, AMP: Paddle's reads of it cost more than the argument checks together)."""
    return not _is_binding(expr) and not isinstance(expr, AttributesCheck) and bool(_ARGUMENT.search(expr)) \
        and not _ARGUMENT_PART.search(expr) and not _REACHED_THROUGH_INPUTS.search(expr)


def _ordered(exprs: list[str]) -> list[str]:
    """Argument type and value checks first: the cheapest, and the ones that tell apart the entries of one
    code object (``mode == 'm3'``), so a scan past failing entries stops early in each. They read only
    parameters and constants, so they can move ahead of the bindings."""
    early = [e for e in exprs if _ARGUMENT_CHECK.match(e)]
    return early + [e for e in exprs if not _ARGUMENT_CHECK.match(e)]


def _guard_source(params: str, exprs: list[str]) -> str:
    """One function returning one ``and`` chain: the cheapest short-circuiting form CPython has (no
    statement or jump per check beyond the chain's own). A binding ``__vN := path`` becomes the always true
    term ``(__vN := path) is __vN``, so a falsy value (0, an empty list) cannot end the chain."""
    terms = []
    for expr in exprs:
        if _is_binding(expr):
            name, path = expr.split(" := ", 1)
            terms.append(f"({name} := {path}) is {name}")
        else:
            terms.append(f"({expr})")
    body = "\n        and ".join(terms) if terms else "True"
    # (the hook takes the result's truth value, as ``if`` would)
    return f"def __sot_guard({params}):\n    return (\n        {body}\n    )\n"


class _NotCompilable(Exception):
    """An expression the C guard program cannot express: it stays in the Python chain."""


# An operand of a program instruction before the registers are numbered: ("a", i) an argument, ("c", i) a
# constant, ("w", i) a work register.
_Operand = tuple[str, int]
_OPS: dict[str, int] = GUARD_OPCODES
_COMPARE_OPS: dict[type, str] = {ast.Is: "IS", ast.IsNot: "IS_NOT", ast.Eq: "EQ", ast.NotEq: "NE", ast.In: "IN",
                                 ast.NotIn: "NOT_IN"}
_TOP_LEVEL_TESTS: dict[type, str] = {ast.Is: "TEST_IS", ast.IsNot: "TEST_IS_NOT"}
# builtins called with one argument that have an instruction of their own
_BUILTIN_OPS: dict[Any, str] = {type: "TYPE", len: "LEN"}


class _ProgramCompiler:
    """Compiles guard expressions into a `GuardProgram` (sot/eval_frame_ext/guard_program.c): one C call
    runs every check it can express (paths of attribute and item reads, ``is``/``==``/``in`` tests,
    ``type``/``len``, weak-reference identity, calls of constants such as ``tensor_matches``), each doing
    exactly what the Python expression does. The rest stays in the Python ``and`` chain (`Guard`)."""

    def __init__(self, params: list[str], namespace: dict[str, Any], parse_all: bool = False) -> None:
        self.params = {name: i for i, name in enumerate(params)}
        self.parse_all = parse_all  # (tests: compile every term from its parse, as the simple forms must match)
        self.namespace = namespace
        self.consts: list[Any] = []
        self._const_index: dict[Any, int] = {}
        self.bindings: dict[str, _Operand] = {}
        self.code: list[tuple[str, _Operand | None, _Operand, _Operand | None, int]] = []
        self.call_args: list[_Operand] = []
        self._kept = 0  # work registers below this hold bindings (and the paths to them)
        self._next = 0
        self._registers = 0  # work registers needed
        self._paths: dict[Any, _Operand] = {}  # a path read once (``__v0._sub_layers``) and kept, by `_path_key`
        self._term_paths: list[Any] = []  # the keys of the paths the current term added

    # -- operands ---------------------------------------------------------------------------------------
    def _const(self, value: Any, key: Any) -> _Operand:
        index = self._const_index.get(key)
        if index is None:
            index = self._const_index[key] = len(self.consts)
            self.consts.append(value)
        return ("c", index)

    def _namespace_const(self, name: str) -> _Operand:
        return self._const(self.namespace[name], ("name", name))

    def _work(self) -> _Operand:
        self._next += 1
        self._registers = max(self._registers, self._next)
        return ("w", self._next - 1)

    def _emit(self, op: str, a: _Operand, b: _Operand | None = None, count: int = 0) -> _Operand:
        dst = self._work() if not op.startswith("TEST") else None
        self.code.append((op, dst, a, b, count))
        return dst  # type: ignore[return-value]

    # -- expressions ------------------------------------------------------------------------------------
    def _value(self, node: ast.expr) -> _Operand:
        if isinstance(node, ast.Name):
            return self._name(node.id)
        if isinstance(node, ast.Constant):
            return self._const(node.value, ("literal", type(node.value), repr(node.value)))
        if isinstance(node, ast.Tuple) and all(isinstance(e, ast.Constant) for e in node.elts):
            value = tuple(e.value for e in node.elts)  # type: ignore[attr-defined]
            return self._const(value, ("literal", tuple, repr(value)))
        if isinstance(node, (ast.Attribute, ast.Subscript)) or (
                isinstance(node, ast.Call) and self._builtin_op(node) == "TYPE"):
            key = _path_key(node)  # a pure path: read once per program
            known = self._paths.get(key)
            if known is None:
                known = self._paths[key] = self._path(node)
                self._term_paths.append(key)
            return known
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE_OPS:
            left = self._value(node.left)
            return self._emit(_COMPARE_OPS[type(node.ops[0])], left, self._value(node.comparators[0]))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return self._emit("NOT", self._value(node.operand))
        raise _NotCompilable(ast.dump(node))

    def _name(self, name: str) -> _Operand:
        if name in self.params:
            return ("a", self.params[name])
        if name in self.bindings:
            return self.bindings[name]
        if name in self.namespace:
            return self._namespace_const(name)
        if name.startswith("__") or not hasattr(builtins, name):
            raise _NotCompilable(name)
        return self._const(getattr(builtins, name), ("builtin", name))

    def _path(self, node: ast.expr) -> _Operand:
        if isinstance(node, ast.Attribute):
            owner = self._value(node.value)
            return self._emit("ATTR", owner, self._const(sys.intern(node.attr), ("literal", str, repr(node.attr))))
        if isinstance(node, ast.Subscript):
            if isinstance(node.slice, ast.Slice):
                raise _NotCompilable("slice")
            owner = self._value(node.value)
            key = node.slice
            if isinstance(key, ast.Constant) and type(key.value) is str:
                # Interned, as the names of attributes and sublayers are: the lookup then matches by
                # identity instead of comparing the characters.
                interned = sys.intern(key.value)
                return self._emit("ITEM", owner, self._const(interned, ("interned", interned)))
            return self._emit("ITEM", owner, self._value(key))
        return self._emit("TYPE", self._value(node.args[0]))  # type: ignore[attr-defined]

    def _builtin_op(self, node: ast.Call) -> str | None:
        if (isinstance(node.func, ast.Name) and len(node.args) == 1 and not node.keywords
                and not isinstance(node.args[0], ast.Starred) and self._is_builtin_name(node.func.id)):
            return _BUILTIN_OPS.get(getattr(builtins, node.func.id, None))
        return None

    def _weakref_const(self, node: ast.expr) -> _Operand | None:
        """The constant of ``__cN()`` when ``__cN`` is a plain weak reference (calling it reads it)."""
        if (isinstance(node, ast.Call) and not node.args and not node.keywords and isinstance(node.func, ast.Name)
                and type(self.namespace.get(node.func.id)) is weakref.ref):
            return self._namespace_const(node.func.id)
        return None

    def _call(self, node: ast.Call) -> _Operand:
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            raise _NotCompilable("call with keywords or *args")
        builtin_op = self._builtin_op(node)
        if builtin_op is not None:
            return self._emit(builtin_op, self._value(node.args[0]))
        ref = self._weakref_const(node)
        if ref is not None:
            return self._emit("DEREF", ref)
        function = self._value(node.func)
        args = [self._value(a) for a in node.args]
        start = len(self.call_args)
        self.call_args.extend(args)
        return self._emit("CALL", function, ("n", start), len(args))

    # -- terms ------------------------------------------------------------------------------------------
    def add(self, expr: str) -> bool:
        """Compile one term of the chain (a check, or a binding ``__vN := path``); False (and nothing
        added) if it stays in Python."""
        state = (len(self.code), len(self.call_args), self._next)
        self._term_paths = []
        try:
            if self.parse_all or not self._add_simple(expr):
                node = _parse_term(expr)
                if node is None:
                    return False
                if _is_binding(expr):
                    self.bindings[expr.split(" := ", 1)[0]] = self._value(node)
                else:
                    self._test(node)
            if _is_binding(expr):
                self._kept = self._next  # the binding and the reads on its path are kept
            else:
                self._next = self._kept
                self._forget_term_paths()  # (their registers are reused by the next term)
            return True
        except _NotCompilable:
            del self.code[state[0]:], self.call_args[state[1]:]
            self._next = state[2]
            self._forget_term_paths()
            return False

    # -- the simple forms, compiled from the text ---------------------------------------------------------
    def _add_simple(self, expr: str) -> bool:
        """Compile ``expr`` without parsing it when it has one of the forms most terms have (`_SIMPLE_TERMS`:
        a model's guard is mostly paths of attribute and item reads compared with a constant, and parsing a
        term costs as much as compiling it); False, with nothing emitted, for any other form. Emits what
        compiling the parsed term emits (a test compiles both ways and compares)."""
        if " := " in expr:
            match = _SIMPLE_BINDING.fullmatch(expr)
            steps = _path_steps(match.group(2)) if match is not None else None
            if steps is None:
                return False
            self.bindings[match.group(1)] = self._simple_path(steps)  # type: ignore[union-attr]
            return True
        if expr.endswith("()"):
            match = _SIMPLE_IS_REF.fullmatch(expr)
            steps = _path_steps(match.group(1)) if match is not None else None
            if steps is None or type(self.namespace.get(match.group(2))) is not weakref.ref:  # type: ignore
                return False
            left = self._simple_path(steps)
            self._emit("TEST_IS_REF", left, self._namespace_const(match.group(2)))  # type: ignore[union-attr]
            return True
        if expr.startswith("not "):
            match = _SIMPLE_NOT.fullmatch(expr)
            steps = _path_steps(match.group(1)) if match is not None else None
            if steps is None:
                return False
            self._emit("TEST_NOT", self._simple_path(steps))
            return True
        if expr.endswith(")") and expr.startswith("__c"):
            match = _SIMPLE_ATTRIBUTES.fullmatch(expr)
            steps = _path_steps(match.group(2)) if match is not None else None
            if steps is None or not self._is_attributes_check(match.group(1), match.group(3)):  # type: ignore
                return False
            left = self._simple_path(steps)
            self._emit("TEST_ATTRS", left, self._namespace_const(match.group(3)))  # type: ignore[union-attr]
            return True
        match = _SIMPLE_COMPARE.fullmatch(expr)
        if match is None:
            return False
        of_type, path, op, operand = match.groups()
        steps = _path_steps(path)
        if steps is None or (of_type and not self._is_builtin_name("type")):
            return False
        left = self._simple_path(steps)
        if of_type:
            left = self._remembered(("type()", steps[-1][0]), lambda: self._emit("TYPE", left))
        right = self._simple_operand(operand)
        if op in ("is", "is not"):
            self._emit("TEST_IS" if op == "is" else "TEST_IS_NOT", left, right)
        else:
            self._emit("TEST", self._emit("EQ" if op == "==" else "NE", left, right))
        return True

    def _remembered(self, key: Any, read: Callable[[], _Operand]) -> _Operand:
        """The register of the path ``key``, read (by ``read``) only the first time (as `_value` does)."""
        known = self._paths.get(key)
        if known is None:
            known = self._paths[key] = read()
            self._term_paths.append(key)
        return known

    def _simple_path(self, steps: list[tuple[Any, str, Any]]) -> _Operand:
        """A path from `_path_steps`: its base (an argument or a binding), then each read, each kept by the
        key `_path_key` gives the parsed path (so a read is shared with parsed terms, as among them)."""
        operand = self._name(steps[0][2])
        paths = self._paths
        for key, kind, name in steps[1:]:
            known = paths.get(key)
            if known is None:
                if kind == ".":
                    arg = self._const(sys.intern(name), ("literal", str, repr(name)))
                    known = self._emit("ATTR", operand, arg)
                elif type(name) is str:
                    interned = sys.intern(name)
                    known = self._emit("ITEM", operand, self._const(interned, ("interned", interned)))
                else:
                    known = self._emit("ITEM", operand, self._const(name, ("literal", int, repr(name))))
                paths[key] = known
                self._term_paths.append(key)
            operand = known
        return operand

    def _simple_operand(self, text: str) -> _Operand:
        if text.startswith("__"):
            return self._name(text)
        value = _SIMPLE_LITERALS[text] if text in _SIMPLE_LITERALS else int(text)
        return self._const(value, ("literal", type(value), repr(value)))

    def _forget_term_paths(self) -> None:
        for key in self._term_paths:
            del self._paths[key]
        self._term_paths = []

    def _test(self, node: ast.expr) -> None:
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):  # (a and b) as a chain: a, then b
            for value in node.values:
                self._test(value)
        elif self._tensor_check(node):  # tensor_matches(x, ...): run directly, no call in between
            args = [self._value(a) for a in node.args]  # type: ignore[attr-defined]
            start = len(self.call_args)
            self.call_args.extend(args)
            self._emit("TEST_TENSOR", args[0], ("n", start), len(args))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) == 2
              and not node.keywords and isinstance(node.args[1], ast.Name)
              and self._is_attributes_check(node.func.id, node.args[1].id)):  # attributes_match(x, spec)
            self._emit("TEST_ATTRS", self._value(node.args[0]), self._namespace_const(node.args[1].id))
        elif self._type_version_check(node):  # type_version(cls) == tag: one instruction, no int made
            call = node.left  # type: ignore[attr-defined]
            tag = node.comparators[0].value  # type: ignore[attr-defined]
            self._emit("TEST_TYPE_VERSION", self._value(call.args[0]), self._const(tag, ("literal", int, repr(tag))))
        elif self._items_check(node):  # tuple(x._sub_layers) == ('0', '1'): compared without making the tuple
            items = self._value(node.left.args[0])  # type: ignore[attr-defined]
            self._emit("TEST_ITEMS_EQ", items, self._value(node.comparators[0]))  # type: ignore[attr-defined]
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _TOP_LEVEL_TESTS:
            left = self._value(node.left)
            ref = self._weakref_const(node.comparators[0]) if isinstance(node.ops[0], ast.Is) else None
            if ref is not None:
                self._emit("TEST_IS_REF", left, ref)
                return
            self._emit(_TOP_LEVEL_TESTS[type(node.ops[0])], left, self._value(node.comparators[0]))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            self._emit("TEST_NOT", self._value(node.operand))
        else:
            self._emit("TEST", self._value(node))

    def _is_attributes_check(self, function: str, spec: str) -> bool:
        """``function(x, spec)`` is `attributes_match` on a spec the program takes (`GuardBuilder.attributes`
        makes only such specs; anything else is called as it is)."""
        value = self.namespace.get(spec)
        return (self.namespace.get(function) is attributes_match and type(value) is tuple
                and all(type(item) is tuple and len(item) == 3 and type(item[0]) is str
                        and type(item[2]) is int and item[2] in (ATTR_EQ, ATTR_IS, ATTR_FALSY) for item in value))

    def _type_version_check(self, node: ast.expr) -> bool:
        """``type_version(x) == tag`` (`class_lookup_checks`), a nonzero tag as the program takes it."""
        return (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq)
                and isinstance(node.left, ast.Call) and isinstance(node.left.func, ast.Name)
                and len(node.left.args) == 1 and not node.left.keywords
                and not isinstance(node.left.args[0], ast.Starred)
                and self.namespace.get(node.left.func.id) is type_version
                and isinstance(node.comparators[0], ast.Constant) and type(node.comparators[0].value) is int
                and 0 < node.comparators[0].value <= 0xFFFFFFFF)

    def _tensor_check(self, node: ast.expr) -> bool:
        return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) == 5
                and not node.keywords and not any(isinstance(a, ast.Starred) for a in node.args)
                and self.namespace.get(node.func.id) is tensor_matches)

    def _items_check(self, node: ast.expr) -> bool:
        """``tuple(x) == (constants...)``"""
        return (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq)
                and isinstance(node.left, ast.Call) and isinstance(node.left.func, ast.Name)
                and node.left.func.id == "tuple" and self._is_builtin_name("tuple") and len(node.left.args) == 1
                and not node.left.keywords and not isinstance(node.left.args[0], ast.Starred)
                and (isinstance(node.comparators[0], ast.Tuple)
                     and all(isinstance(e, ast.Constant) for e in node.comparators[0].elts)
                     or isinstance(node.comparators[0], ast.Name)
                     and type(self.namespace.get(node.comparators[0].id)) is tuple))

    def _is_builtin_name(self, name: str) -> bool:
        """``name`` in a guard expression means the builtin of that name (nothing of the guard shadows it)."""
        return (name not in self.namespace and name not in self.params and name not in self.bindings
                and hasattr(builtins, name))

    def build(self) -> GuardProgram | None:
        if not self.code:
            return None
        nargs, nconsts = len(self.params), len(self.consts)
        work_size = max(self._registers, 1)

        def register(operand: _Operand | None) -> int:
            if operand is None:
                return 0
            kind, index = operand
            return {"a": index, "c": nargs + index, "w": nargs + nconsts + index, "n": index}[kind]

        code = [(_OPS[op], dst[1] if dst is not None else 0, register(a), register(b), count)
                for op, dst, a, b, count in self.code]
        return GuardProgram(nargs, tuple(self.consts), work_size, code, [register(a) for a in self.call_args])


# The simple forms of guard terms (`_ProgramCompiler._add_simple`): a path is an argument or a binding
# followed by attribute reads (ASCII names: the parser normalises other identifiers) and item reads with a
# plain string key or a non-negative int; an operand a constant of the guard or a literal.
_BASE = r"__[av][0-9]+|__globals|__closure"
_STEP = r"\.[A-Za-z_][A-Za-z0-9_]*|\['[^'\\\n]*'\]|\[(?:0|[1-9][0-9]*)\]"
_SIMPLE_PATH = rf"(?:{_BASE})(?:{_STEP})*"
_SIMPLE_BINDING = re.compile(rf"(__v[0-9]+) := ({_SIMPLE_PATH})")
_SIMPLE_COMPARE = re.compile(rf"(type\()?({_SIMPLE_PATH})(?(1)\)) (is not|is|==|!=) (__c[0-9]+|None|True|False|0|[1-9][0-9]*)")
_SIMPLE_IS_REF = re.compile(rf"({_SIMPLE_PATH}) is (__c[0-9]+)\(\)")  # a weakly held object
_SIMPLE_NOT = re.compile(rf"not ({_SIMPLE_PATH})")
_SIMPLE_ATTRIBUTES = re.compile(rf"(__c[0-9]+)\(({_SIMPLE_PATH}), (__c[0-9]+)\)")  # attributes_match(x, spec)
_SIMPLE_LITERALS: dict[str, Any] = {"None": None, "True": True, "False": False}
_BASE_RE = re.compile(_BASE)
_STEP_RE = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\['([^'\\\n]*)'\]|\[([0-9]+)\]")


def _path_steps(path: str) -> list[tuple[Any, str, Any]] | None:
    """A simple path (`_SIMPLE_PATH`) as (key of the path so far, kind, name): its base ``(name, "", name)``,
    then each read, ``"."`` with the attribute's name or ``"[]"`` with the key. None when an attribute name
    is a keyword (the term is then no expression)."""
    base = _BASE_RE.match(path).group(0)  # type: ignore[union-attr]
    steps: list[tuple[Any, str, Any]] = [(base, "", base)]
    key: Any = base
    for attr, item, index in _STEP_RE.findall(path, len(base)):
        if attr:
            if keyword.iskeyword(attr):
                return None
            key = (key, ".", attr)
            steps.append((key, ".", attr))
        else:
            name: Any = int(index) if index else item
            key = (key, "[]", ("literal", type(name), repr(name)))
            steps.append((key, "[]", name))
    return steps


def _path_key(node: ast.expr) -> Any:
    """A key equal for equal paths (``__v0._sub_layers['fc']``, ``type(__a1)``): cheaper than ``ast.dump``
    (a model's guard reads several hundred paths, each made of the shorter ones)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return (_path_key(node.value), ".", node.attr)
    if isinstance(node, ast.Subscript):
        return (_path_key(node.value), "[]", _path_key(node.slice))
    if isinstance(node, ast.Constant):
        return ("literal", type(node.value), repr(node.value))
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "type"
            and len(node.args) == 1 and not node.keywords):
        return ("type()", _path_key(node.args[0]))
    return ast.dump(node)


def _parse_term(expr: str) -> ast.expr | None:
    """The term parsed (a binding ``__vN := path``: its path), None when it is no Python expression."""
    try:
        return ast.parse(expr.split(" := ", 1)[1] if _is_binding(expr) else expr, mode="eval").body
    except SyntaxError:
        return None


def _binding_names(expr: str) -> set[str]:
    return set(re.findall(r"__v\d+", expr))


class Guard:
    """The compiled check of one cache entry, plus what is needed to explain a miss."""

    def __init__(self, builder: GuardBuilder) -> None:
        param_names = [builder.GLOBALS, builder.CLOSURE, *builder._params.values()]
        params = ", ".join(param_names)
        self.check, self.program, self.python_terms = _fast_check(builder, param_names, _ordered(builder.exprs))
        self._param_names = param_names
        # What explains a miss (`exprs`, `readable`) and the reference chain are made only when asked for:
        # most guards never explain anything, and a model's guard has hundreds of checks (resnet18: ~400,
        # ~70 ms to spell out, a few ms to compile as a chain), all made on the first call.
        self._builder = builder
        self._params = params
        self._namespace = builder.namespace
        self.shape_checks = [(path, builder.expand(expr), shape) for path, expr, shape in builder.shape_checks]
        self.int_checks = [(path, builder.expand(expr), value) for path, expr, value in builder.int_checks]
        self.float_checks = [(path, builder.expand(expr), value) for path, expr, value in builder.float_checks]
        self.array_checks = [(path, builder.expand(expr), value) for path, expr, value in builder.array_checks]
        self.layer_checks = [(path, builder.expand(expr), ref) for path, expr, ref in builder.layer_checks]
        builder.forget_build_state()

    def widened(self) -> "Guard | None":
        """This guard without the checks of the values of the numbers guarded as data only (their types are
        still checked), or None when it has none: what a frame without a graph runs natively under for every
        value of them (graph_free.py)."""
        dropped = {check for check, data_only in self._builder.number_checks.items() if data_only}
        dropped &= set(self._builder.exprs)
        if not dropped:
            return None
        builder = copy.copy(self._builder)
        builder.exprs = [expr for expr in self._builder.exprs if expr not in dropped]
        builder.namespace = dict(self._builder.namespace)
        builder.number_checks = {}
        builder.int_checks, builder.float_checks = [], []  # (values no longer checked: nothing to learn from)
        return Guard(builder)

    @functools.cached_property
    def relaxed_check(self) -> Callable[..., bool] | bool:
        """What an entry whose code is right for any inputs (it runs the original code: native.py) checks on
        the calls between two full checks: the checks of the arguments themselves (`_on_arguments_only`), so
        that a call with other inputs still misses at once; True when there are none. Changes reached through
        the inputs (a layer's tree, globals) and of the grad/AMP mode are seen by the next full check."""
        exprs = [expr for expr in _ordered(self._builder.exprs) if _on_arguments_only(expr)]
        return _fast_check(self._builder, self._param_names, exprs)[0] if exprs else True

    def reads_arguments(self, names: Iterable[str]) -> bool:
        """Whether a check (or a binding a check uses) reads one of the arguments ``names`` that is not a
        tensor (a tensor's checks are of its meta, which follows from the inputs of the code computing it)."""
        params = [self._builder._params[name] for name in names
                  if name in self._builder._params and name not in self._builder.tensor_arguments]
        if not params:
            return False
        pattern = re.compile(r"\b(?:" + "|".join(params) + r")\b")
        return any(pattern.search(expr) for expr in self._builder.exprs)

    def decides_on_arguments(self, names: Iterable[str]) -> bool:
        """Whether a check other than a type check or a data-only number check (`widened`) reads one of the
        arguments ``names`` that is not a tensor: whether what the entry did may depend on their values."""
        data_only = {check for check, data in self._builder.number_checks.items() if data}
        params = [self._builder._params[name] for name in names
                  if name in self._builder._params and name not in self._builder.tensor_arguments]
        if not params:
            return False
        pattern = re.compile(r"\b(?:" + "|".join(params) + r")\b")
        return any(pattern.search(expr) for expr in self._builder.exprs
                   if expr not in data_only and not _TYPE_CHECK.match(expr))

    @functools.cached_property
    def source(self) -> str:
        """The reference: every check as one Python ``and`` chain (what the checks mean)."""
        return _guard_source(self._params, _ordered(self._builder.exprs))

    @functools.cached_property
    def reference(self) -> Callable[..., bool]:
        """`source` compiled: what the fast `check` must agree with."""
        namespace = dict(self._builder.namespace)
        exec(compile(self.source, f"<sot guard of {self._builder.code_name}>", "exec"), namespace)
        return namespace["__sot_guard"]

    @functools.cached_property
    def _checks(self) -> list[str]:
        return [part for e in self._builder.exprs if not _is_binding(e)
                for part in (e.parts if isinstance(e, CombinedCheck) else (e,))]

    @functools.cached_property
    def exprs(self) -> list[str]:
        """Every check as a self-contained expression (bound locals spelled out), for explaining a miss."""
        return [self._builder.expand(e) for e in self._checks]

    @functools.cached_property
    def readable(self) -> list[str]:
        """Every check as a user would write it (argument and global names, constants described)."""
        return [self._builder.readable(e) for e in self._checks]

    def evaluate(self, expr: str, globals_: dict, closure: Any, args: tuple) -> Any:
        """The value of one guard expression (e.g. a tensor's path) for a new call."""
        fn = eval(f"lambda {self._params}: ({expr})", dict(self._namespace))
        return fn(globals_, closure, *args)

    def first_failure(self, globals_: dict, closure: Any, args: tuple) -> str | None:
        """The first guard (readable) that fails for these inputs, or None when all pass."""
        for expr, text in zip(self.exprs, self.readable):
            fn = eval(f"lambda {self._params}: ({expr})", dict(self._namespace))
            try:
                if not fn(globals_, closure, *args):
                    return text
            except Exception as exc:  # a missing global or attribute is a failure too
                return f"{text}  (raised {type(exc).__name__}: {exc})"
        return None

    def __str__(self) -> str:
        return "\n".join(self.readable) if self.readable else "True"


def _fast_check(builder: GuardBuilder, params: list[str], exprs: list[str]
                ) -> tuple[Callable[..., bool], GuardProgram | None, list[str]]:
    """The callable the hook runs: the C program alone when it expresses every check (no Python frame at
    all), else a Python chain that calls it first and then runs the terms it could not take (with the
    bindings those need). Returns (check, program, the terms left in Python)."""
    compiler = _ProgramCompiler(params, builder.namespace)
    rest = [expr for expr in exprs if not compiler.add(expr)]
    needed: set[str] = set()
    for expr in reversed(exprs):  # bindings the Python terms use, and the bindings those use
        if expr in rest or (_is_binding(expr) and expr.split(" := ", 1)[0] in needed):
            needed |= _binding_names(expr.split(" := ", 1)[1] if _is_binding(expr) else expr)
    rest_set = set(rest)
    python_terms = [e for e in exprs if (e in rest_set and not _is_binding(e))
                    or (_is_binding(e) and e.split(" := ", 1)[0] in needed)]
    program = compiler.build()
    if program is not None and not python_terms:
        return program, program, []
    namespace = dict(builder.namespace)
    terms = python_terms
    if program is not None:
        namespace["__sot_program"] = program
        terms = [f"__sot_program({', '.join(params)})", *python_terms]
    source = _guard_source(", ".join(params), terms)
    exec(compile(source, f"<sot guard of {builder.code_name}>", "exec"), namespace)
    return namespace["__sot_guard"], program, python_terms


def log_guard_misses(code: types.CodeType, guards: list["Guard"], globals_: dict, closure: Any,
                     args: tuple) -> None:
    """At ``SOT_LOG_LEVEL>=1``, say which guard of each existing entry rejected this call."""
    for index, guard in enumerate(guards):
        failure = guard.first_failure(globals_, closure, args)
        if failure is not None:
            log(1, f"cache miss in {code.co_name} ({code.co_filename}:{code.co_firstlineno}), "
                   f"entry {index}: guard failed: {failure}")

"""Guards: one compiled, short-circuiting check per cache entry.

Each guarded variable contributes Python expressions over the guard function's parameters, which mirror
what the C hook passes: ``guard(globals, closure, *argument_slots)``. The expressions are joined with
``and`` into a single generated function, so the hot path is one Python call with no loops. Objects the
guard compares by identity are held by weak reference where possible, so a cache entry never keeps a user
object alive.
"""
from __future__ import annotations

import re
import types
import weakref
from typing import Any, Callable

import paddle

from ...log import log


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
        return value.__name__.lstrip("_")  # sot's own state query: autograd_state()
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType)):
        return f"{getattr(value, '__module__', None) or '?'}.{value.__qualname__}"
    if isinstance(value, paddle.nn.Layer):
        return f"<{type(value).__name__} layer at {id(value):#x}>"
    text = str(value) if type(value).__module__.startswith("paddle") else repr(value)
    text = text.splitlines()[0] if text else text
    return text if len(text) < 60 else text[:57] + "..."


class GuardBuilder:
    """Collects guard expressions for one translation and compiles them into a `Guard`."""

    GLOBALS = "__globals"
    CLOSURE = "__closure"

    def __init__(self, code: types.CodeType) -> None:
        self.code = code
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
        # (input path, expression, contents) of every numpy array whose values were folded: the same, for
        # arrays whose contents vary (their pure methods then run natively instead: dynamic_shape.py).
        self.array_checks: list[tuple[str, str, Any]] = []
        self._seen: set[str] = set()

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

    def constant_list(self, items: tuple) -> str:
        """A list constant (e.g. a shape ``Tensor.shape`` is compared with), made once, not per call."""
        key = ("list", tuple(items))
        name = self._const_names.get(key)  # type: ignore[call-overload]
        if name is None:
            name = self.constant(list(items))
            self._const_names[key] = name  # type: ignore[index]
        return name

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

    def expand(self, expr: str) -> str:
        """``expr`` with its bound locals replaced by the paths they stand for."""
        # (paths are chains of attribute and item accesses: no parentheses needed)
        return re.sub(r"__v\d+", lambda m: self.expand(self._bindings[m.group(0)]), expr)

    # -- collecting -------------------------------------------------------------------------------------
    def add(self, expr: str) -> None:
        if expr not in self._seen:
            self._seen.add(expr)
            self.exprs.append(expr)

    add_raw = add

    def readable(self, expr: str) -> str:
        """``expr`` with parameter and constant names replaced by what a user would write."""
        expr = re.sub(r"\._(?:sub_layers|parameters|buffers)\['(\w+)'\]", r".\1", self.expand(expr))
        expr = re.sub(r"__a(\d+)", lambda m: self.arg_names[int(m.group(1))], expr)
        expr = re.sub(r"__globals\[('[^']*')\]", lambda m: m.group(1)[1:-1], expr)
        names = self.code.co_freevars
        expr = re.sub(r"__closure\[(\d+)\]\.cell_contents", lambda m: names[int(m.group(1))], expr)

        def const(match: re.Match) -> str:
            value = self.namespace[match.group(1)]
            if isinstance(value, weakref.ref) and match.group(2):  # an object held weakly: the object
                return describe_value(value())
            return describe_value(value) + (match.group(2) or "")  # e.g. a query function, called

        return re.sub(r"(__c\d+)(\(\))?", const, expr)

    def build(self) -> "Guard":
        return Guard(self)


class CombinedCheck(str):
    """A check the guard function runs as one fast expression (the string itself, e.g. one C call) that
    stands for several plain ones (``parts``), which explain a miss and read well."""

    parts: tuple[str, ...]

    def __new__(cls, fast: str, parts: list[str]) -> "CombinedCheck":
        check = super().__new__(cls, fast)
        check.parts = tuple(parts)
        return check


def _is_binding(expr: str) -> bool:
    return expr.startswith("__v") and " := " in expr


_ARGUMENT_CHECK = re.compile(r"^(type\(__a\d+\) is __c\d+|__a\d+ == __c\d+|__a\d+ is (None|True|False|Ellipsis)"
                             r"|__a\d+ not in \(0, 1\))$")


def _guard_source(params: str, exprs: list[str]) -> str:
    """One function returning one ``and`` chain: the cheapest short-circuiting form CPython has (no
    statement or jump per check beyond the chain's own). A binding ``__vN := path`` becomes the always true
    term ``(__vN := path) is __vN``, so a falsy value (0, an empty list) cannot end the chain."""
    # Argument type and value checks first: the cheapest, and the ones that tell apart the entries of one
    # code object (``mode == 'm3'``), so a scan past failing entries stops early in each. They read only
    # parameters and constants, so they can move ahead of the bindings.
    early = [e for e in exprs if _ARGUMENT_CHECK.match(e)]
    exprs = early + [e for e in exprs if not _ARGUMENT_CHECK.match(e)]
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


class Guard:
    """The compiled check of one cache entry, plus what is needed to explain a miss."""

    def __init__(self, builder: GuardBuilder) -> None:
        params = ", ".join([builder.GLOBALS, builder.CLOSURE, *builder._params.values()])
        self.source = _guard_source(params, builder.exprs)
        namespace = dict(builder.namespace)
        exec(compile(self.source, f"<sot guard of {builder.code.co_name}>", "exec"), namespace)
        self.check: Callable[..., bool] = namespace["__sot_guard"]
        checks = [part for e in builder.exprs if not _is_binding(e)
                  for part in (e.parts if isinstance(e, CombinedCheck) else (e,))]
        self.exprs = [builder.expand(e) for e in checks]  # self-contained, for explaining a miss
        self.readable = [builder.readable(e) for e in checks]
        self._params = params
        self._namespace = builder.namespace
        self.shape_checks = [(path, builder.expand(expr), shape) for path, expr, shape in builder.shape_checks]
        self.int_checks = [(path, builder.expand(expr), value) for path, expr, value in builder.int_checks]
        self.array_checks = [(path, builder.expand(expr), value) for path, expr, value in builder.array_checks]

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


def log_guard_misses(code: types.CodeType, guards: list["Guard"], globals_: dict, closure: Any,
                     args: tuple) -> None:
    """At ``SOT_LOG_LEVEL>=1``, say which guard of each existing entry rejected this call."""
    for index, guard in enumerate(guards):
        failure = guard.first_failure(globals_, closure, args)
        if failure is not None:
            log(1, f"cache miss in {code.co_name} ({code.co_filename}:{code.co_firstlineno}), "
                   f"entry {index}: guard failed: {failure}")

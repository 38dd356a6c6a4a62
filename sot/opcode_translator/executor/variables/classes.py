"""Classes defined inside a translated function (``LOAD_BUILD_CLASS``).

Creating a class has no tensor semantics: the class body is declarations (constants, functions,
decorators). The simulation runs ``builtins.__build_class__`` for real on the body, once, to get a class
it can reason about (its attributes, methods, instances), and the generated code builds the class again at
every call, exactly as the eager function does (a new class object per call).

Running the body during translation must not do anything the eager run would not see twice, so it is only
done when that is provably harmless:

* its bytecode writes nothing outside the new namespace (no global, attribute or item stores but the
  annotations of the class itself, no imports, no iteration that could consume a shared iterator);
* it runs no Python code other than the body itself, and calls no builtin function outside a short list
  of pure ones: a profile hook active while the class is built stops the first other call *before* it runs
  (metaclasses, ``__init_subclass__``, ``__set_name__``, decorators written in Python, calls in the body);
* the variables of the enclosing function it reads while running are Python values known now (guarded).

Otherwise the frame falls back (runs eagerly). The functions of the class read the enclosing function's
variables through the simulated cells (`class_cells`), so a method inlined later sees the simulated values.
"""
from __future__ import annotations

import builtins
import dis
import sys
import types
from typing import TYPE_CHECKING, Any

from ....errors import FallbackError, UserCodeError
from ...runtime import EMPTY_CELL
from ..tracker import DummyTracker, Tracker
from .base import VariableBase, VariableFactory
from .basic import ConstantVariable, ObjectVariable

if TYPE_CHECKING:
    from ...codegen import CodeGen
    from ..function_graph import FunctionGraph
    from .function import CellVariable, NestedFunctionVariable

# Opcodes whose effects reach outside the namespace being built (or consume shared state).
_ESCAPING_OPCODES = frozenset({
    "STORE_GLOBAL", "DELETE_GLOBAL", "STORE_ATTR", "DELETE_ATTR", "DELETE_SUBSCR", "IMPORT_NAME",
    "IMPORT_FROM", "IMPORT_STAR", "GET_ITER", "FOR_ITER", "GET_YIELD_FROM_ITER", "SEND", "YIELD_VALUE",
    "YIELD_FROM", "GET_AWAITABLE", "GET_AITER", "GET_ANEXT", "BEFORE_WITH", "SETUP_WITH", "BEFORE_ASYNC_WITH",
    "PRINT_EXPR", "RAISE_VARARGS",
})
# Reads of a variable of the enclosing function.
_CELL_READS = frozenset({"LOAD_DEREF", "LOAD_CLASSDEREF", "LOAD_FROM_DICT_OR_DEREF"})
_CELL_WRITES = frozenset({"STORE_DEREF", "DELETE_DEREF"})
# Builtin functions (C) a class body may call while it is built: pure, no effects outside their result.
_PURE_BUILTINS = frozenset({len, isinstance, issubclass, abs, min, max, sum, sorted, tuple, list, dict, set,
                            frozenset, range, repr, str, int, float, bool, hash, id, getattr, hasattr})
# Methods of builtin objects a class body may call (``@x.setter`` on a property).
_PURE_METHODS = frozenset({("property", "setter"), ("property", "getter"), ("property", "deleter")})


class _NotDeclarative(Exception):
    """The class body (or the creation of the class) would run code the simulation cannot repeat."""


def _check_body(code: types.CodeType) -> set[str]:
    """Reject bodies with effects outside the class; return the enclosing variables the body reads."""
    instructions = list(dis.get_instructions(code))
    reads: set[str] = set()
    for index, instr in enumerate(instructions):
        name = instr.opname
        if name in _ESCAPING_OPCODES:
            raise _NotDeclarative(f"the class body uses {name}")
        if name == "STORE_SUBSCR":  # only ``__annotations__[name] = annotation``
            before = instructions[index - 2:index]
            if not (len(before) == 2 and before[0].opname == "LOAD_NAME" and before[0].argval == "__annotations__"
                    and before[1].opname == "LOAD_CONST"):
                raise _NotDeclarative("the class body assigns an item")
        if name in _CELL_WRITES and instr.argval in code.co_freevars:
            raise _NotDeclarative(f"the class body assigns the enclosing variable {instr.argval!r}")
        if name in _CELL_READS and instr.argval in code.co_freevars:
            reads.add(instr.argval)
    return reads


class _CallFence:
    """A profile hook that stops the first call of anything but the class body and pure builtins,
    before it runs (raising in a 'call'/'c_call' event aborts that call)."""

    def __init__(self, body: types.CodeType) -> None:
        self.body = body
        self.stopped: str | None = None

    def __call__(self, frame: types.FrameType, event: str, arg: Any) -> None:
        if event == "call":
            if frame.f_code is self.body:
                return
            self.stopped = f"{getattr(frame.f_code, 'co_qualname', frame.f_code.co_name)}()"
            raise _NotDeclarative(f"creating the class runs {self.stopped}")
        if event == "c_call":
            if arg is builtins.__build_class__ or arg is sys.setprofile or _is_pure_call(arg):
                return
            self.stopped = f"{getattr(arg, '__qualname__', arg)!r}"
            raise _NotDeclarative(f"creating the class calls {self.stopped}")


def _is_pure_call(fn: Any) -> bool:
    try:
        if fn in _PURE_BUILTINS:
            return True
    except TypeError:
        return False
    owner = getattr(fn, "__self__", None)
    return (type(owner).__name__, getattr(fn, "__name__", "")) in _PURE_METHODS


_EMPTY = object()


def _placeholder_cell(content: Any) -> types.CellType:
    return types.CellType() if content is _EMPTY else types.CellType(content)


class _Placeholder:
    """The trace-time content of a cell whose value is only known symbolically (e.g. a tensor): the
    functions of the class read it through the simulated cell instead."""

    def __repr__(self) -> str:
        return "<value known during simulation only>"


class NewClassVariable(ObjectVariable):
    """A class created by the translated frame. ``value`` is the class built during translation; the
    generated code builds it again (`build_class`) with the same body, bases and enclosing values."""

    is_mutable_container = True  # built once per run of the generated code: every reference is that class

    def __init__(self, cls: type, parts: list[VariableBase], graph: "FunctionGraph") -> None:
        super().__init__(cls, graph, DummyTracker(tuple(parts)))
        self.parts = parts  # globals, code, name, cell contents, bases, keyword arguments

    def children(self) -> list[VariableBase]:
        return list(self.parts)

    def make_guards(self, builder: Any, expr: str) -> list[str]:
        return []  # made by the frame: nothing from outside to check

    def _reconstruct_computed(self, codegen: "CodeGen") -> None:
        from ...runtime import build_class

        codegen.call_helper(build_class, self.parts)

    def __repr__(self) -> str:
        return f"NewClassVariable({self.value.__qualname__})"


def build_class(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    """``__build_class__(body, name, *bases, **kwargs)`` during simulation (see the module docstring)."""
    from .container import DictVariable, TupleVariable
    from .function import NestedFunctionVariable

    if len(args) < 2 or not isinstance(args[0], NestedFunctionVariable):
        raise FallbackError("__build_class__ called with something other than a class body")
    body_var: NestedFunctionVariable = args[0]
    name_var, bases = args[1], args[2:]
    code = body_var.code
    try:
        reads = _check_body(code)
    except _NotDeclarative as exc:
        raise FallbackError(f"class {name_var.get_py_value()!r} is not simulated: {exc}") from None
    cells = body_var.freevar_cells()
    trace_cells: list[types.CellType] = []
    contents: list[VariableBase] = []
    for free in code.co_freevars:
        cell = cells[free]
        content = cell.content
        if content is None:
            value: Any = _EMPTY
            contents.append(ObjectVariable(EMPTY_CELL, graph, DummyTracker()))
        else:
            contents.append(content)
            if free in reads:
                if not isinstance(content, (ConstantVariable, ObjectVariable)):
                    raise FallbackError(f"the body of class {name_var.get_py_value()!r} reads {free!r}, whose "
                                        "value is only known symbolically")
                graph.add_guard(content)
                value = content.get_py_value()
            else:
                value = content.get_py_value() if isinstance(content, (ConstantVariable, ObjectVariable)) \
                    else _Placeholder()
        real_cell = _placeholder_cell(value)
        trace_cells.append(real_cell)
        graph.class_cells[id(real_cell)] = (real_cell, cell)
        cell.captured_by_class = True
    for var in [name_var, *bases, *kwargs.values()]:
        if not isinstance(var, (ConstantVariable, ObjectVariable)):
            raise FallbackError(f"class {name_var.get_py_value()!r}: a base or keyword that is not a Python value")
        graph.add_guard(var)
    globals_ = body_var.resolver().globals
    body = types.FunctionType(code, globals_, code.co_name, None, tuple(trace_cells) or None)
    name = name_var.get_py_value()
    real_bases = [base.get_py_value() for base in bases]
    real_kwargs = {key: value.get_py_value() for key, value in kwargs.items()}
    fence = _CallFence(code)
    previous = sys.getprofile()
    sys.setprofile(fence)
    try:
        cls = builtins.__build_class__(body, name, *real_bases, **real_kwargs)
    except _NotDeclarative as exc:
        raise FallbackError(f"class {name_var.get_py_value()!r} is not simulated: {exc}") from None
    except Exception as exc:
        if fence.stopped is not None:
            raise FallbackError(f"class {name_var.get_py_value()!r} is not simulated: creating it runs "
                                f"{fence.stopped}") from None
        raise UserCodeError(f"user code raised {type(exc).__name__}: {exc}", original=exc) from None
    finally:
        sys.setprofile(previous)
    parts = [ObjectVariable(globals_, graph, DummyTracker()), ObjectVariable(code, graph, DummyTracker()),
             name_var, TupleVariable(contents, graph, DummyTracker(tuple(contents))),
             TupleVariable(list(bases), graph, DummyTracker(tuple(bases))),
             DictVariable(dict(kwargs), graph, DummyTracker(tuple(kwargs.values())))]
    var = NewClassVariable(cls, parts, graph)
    graph.known_objects[id(cls)] = (cls, var)
    return var


class BuildClassVariable(ObjectVariable):
    """``builtins.__build_class__`` as ``LOAD_BUILD_CLASS`` pushes it."""

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        return build_class(self.graph, args, kwargs)


@VariableFactory.register(99)
def _new_class_rule(value: Any, graph: "FunctionGraph", tracker: Tracker) -> VariableBase | None:
    """A class the frame created, reached again (``type(obj)``, the ``__class__`` cell of its methods)."""
    if isinstance(value, type):
        known = graph.known_objects.get(id(value))
        if known is not None and known[0] is value and isinstance(known[1], NewClassVariable):
            return known[1]
    return None

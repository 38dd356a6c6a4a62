"""Functions and their calls: user functions are inlined into the current graph.

`UserFunctionVariable` is a real Python function reached from the frame; `NestedFunctionVariable` one made
by ``MAKE_FUNCTION`` during simulation (lambdas, nested defs, comprehensions); `BoundMethodVariable` pairs a
function with its ``self``. `CellVariable` models a closure cell shared between a function and the
functions it creates.
"""
from __future__ import annotations

import inspect
import types
from typing import TYPE_CHECKING, Any

import paddle

from ....errors import BreakGraphError, FallbackError, UserCodeError
from bytecode import CellVar, FreeVar

from ...pyversion import emit_load_closure
from ..tracker import ConstTracker, DummyTracker, GetAttrTracker, GetItemTracker, Tracker
from .base import VariableBase, VariableFactory
from .basic import ConstantVariable, ObjectVariable

if TYPE_CHECKING:
    from ...codegen import CodeGen
    from ..function_graph import FunctionGraph
    from ..guard import GuardBuilder

CO_VARARGS = 0x04
CO_VARKEYWORDS = 0x08
CO_GENERATOR = 0x20
CO_GENERATOR_LIKE = 0x20 | 0x80 | 0x100 | 0x200


class CellVariable(VariableBase):
    """A closure cell. ``external`` cells belong to real functions: writing them is a side effect."""

    def __init__(self, content: VariableBase | None, graph: "FunctionGraph", tracker: Tracker,
                 external: bool = False, source: VariableBase | None = None,
                 frame_name: str | None = None) -> None:
        super().__init__(graph, tracker)
        self.content = content
        self.external = external
        self.source = source  # rebuilds the real cell object (for external cells)
        # The translated frame's own cell of this name (``co_cellvars``): the generated code has the real one,
        # shared with the resume function after a graph break and with the closures rebuilt before it.
        self.frame_name = frame_name

    def load(self, name: str) -> VariableBase:
        if self.content is None:
            raise UserCodeError(f"user code raised NameError: free variable {name!r} referenced before assignment")
        return self.content

    captured_by_class = False  # a class built during simulation holds a snapshot of this cell
    path: VariableBase | None = None  # reaches the real cell in guards (external cells reached from the frame)
    _rebuilt: "CellRebuildVariable | None" = None

    def rebuilt(self) -> "CellRebuildVariable":
        """The real cell of this variable in generated code (one per run, shared by the closures)."""
        if self._rebuilt is None:
            self._rebuilt = CellRebuildVariable(self)
        return self._rebuilt

    def _reconstruct_computed(self, codegen: "CodeGen") -> None:
        """The cell itself, as a value: a 3.12+ inlined comprehension saves the frame's cell of its variable
        on the stack (``LOAD_FAST_AND_CLEAR`` of a cell variable), and puts it back after."""
        codegen.reconstruct(self.rebuilt())

    def store(self, name: str, value: VariableBase | None) -> None:
        if self.captured_by_class:
            raise FallbackError(f"assigning {name!r} after a class defined in the frame captured it")
        if self.external:
            if value is None:
                raise FallbackError(f"deleting closure variable {name!r} of an enclosing function is not "
                                    "supported yet")
            if self.source is None:
                raise FallbackError(f"assigning closure variable {name!r}: its cell cannot be reached")
            self.graph.side_effects.store_cell(self, value)
        else:  # (an external store is undone with the side-effect log)
            previous = self.content
            self.graph.side_effects.on_rollback(lambda: setattr(self, "content", previous))
        self.content = value


class CellRebuildVariable(VariableBase):
    """A closure cell in generated code: the real cell when it belongs to a real function (or the frame's
    free variables), else a new cell holding the simulated content (see `NestedFunctionVariable`)."""

    is_mutable_container = True

    def __init__(self, cell: CellVariable) -> None:
        super().__init__(cell.graph, DummyTracker())
        self.cell = cell

    def children(self) -> list[VariableBase]:
        if self.cell.external:
            return [self.cell.source] if self.cell.source is not None else []
        return [self.cell.content] if self.cell.content is not None else []

    def _reconstruct_computed(self, codegen: "CodeGen") -> None:
        from ...runtime import EMPTY_CELL, new_cell, set_cell

        cell = self.cell
        if cell.external:
            if cell.source is None:
                raise FallbackError("a closure cell of a function outside the frame cannot be reached")
            codegen.reconstruct(cell.source)
            return
        content = cell.content if cell.content is not None else ObjectVariable(EMPTY_CELL, self.graph,
                                                                               DummyTracker())
        if cell.frame_name is not None:
            # The generated code's own cell (it keeps the original's cells): given the simulated content, it
            # is the one cell the rebuilt closures, the native instruction and the resume function share.
            codegen.load_callable_const(set_cell)
            emit_load_closure(codegen.emit, CellVar(cell.frame_name))
            codegen.reconstruct(content)
            codegen.call(2)
            return
        codegen.call_helper(new_cell, [content])


class FrameCellVariable(VariableBase):
    """The real cell of one of the translated frame's free variables (``LOAD_CLOSURE`` pushes it)."""

    def __init__(self, name: str, graph: "FunctionGraph") -> None:
        super().__init__(graph, DummyTracker())
        self.name = name

    def _reconstruct_computed(self, codegen: "CodeGen") -> None:
        emit_load_closure(codegen.emit, FreeVar(self.name))


class SourceOnlyVariable(ObjectVariable):
    """An intermediate object used only as the source of other values (``fn.__globals__``, a closure
    tuple): it needs no guard of its own, the guard on its owner covers it."""

    def make_guards(self, builder: "GuardBuilder", expr: str) -> list[str]:
        return []


def _bind_arguments(code: types.CodeType, name: str, args: list[VariableBase], kwargs: dict[str, VariableBase],
                    defaults: tuple[VariableBase, ...], kwdefaults: dict[str, VariableBase],
                    graph: "FunctionGraph") -> dict[str, VariableBase]:
    """Python's argument binding rules, on variables. A mismatch is the user's TypeError (eager raises it)."""
    from .container import DictVariable, TupleVariable

    def fail(message: str) -> FallbackError:
        return UserCodeError(f"user code raised TypeError: {name}() {message}")

    n_pos = code.co_argcount
    n_posonly = code.co_posonlyargcount
    names = code.co_varnames
    kwonly = names[n_pos:n_pos + code.co_kwonlyargcount]
    bound: dict[str, VariableBase] = {}
    for arg_name, value in zip(names[:n_pos], args):
        bound[arg_name] = value
    extra = args[n_pos:]
    if extra and not code.co_flags & CO_VARARGS:
        raise fail(f"takes {n_pos} positional arguments but {len(args)} were given")
    extra_kwargs: dict[str, VariableBase] = {}
    for key, value in kwargs.items():
        if key in names[n_posonly:n_pos] or key in kwonly:
            if key in bound:
                raise fail(f"got multiple values for argument {key!r}")
            bound[key] = value
        elif code.co_flags & CO_VARKEYWORDS:
            extra_kwargs[key] = value
        else:
            raise fail(f"got an unexpected keyword argument {key!r}")
    first_default = n_pos - len(defaults)
    for index, arg_name in enumerate(names[:n_pos]):
        if arg_name not in bound:
            if index >= first_default:
                bound[arg_name] = defaults[index - first_default]
            else:
                raise fail(f"missing required positional argument: {arg_name!r}")
    for arg_name in kwonly:
        if arg_name not in bound:
            if arg_name not in kwdefaults:
                raise fail(f"missing required keyword-only argument: {arg_name!r}")
            bound[arg_name] = kwdefaults[arg_name]
    index = n_pos + len(kwonly)
    if code.co_flags & CO_VARARGS:
        bound[names[index]] = TupleVariable(list(extra), graph, DummyTracker(tuple(extra)))
        index += 1
    if code.co_flags & CO_VARKEYWORDS:
        bound[names[index]] = DictVariable(extra_kwargs, graph, DummyTracker(tuple(extra_kwargs.values())))
    return bound


class FunctionVariableBase(VariableBase):
    """What inlining needs from a function: code, name resolution, defaults and closure cells."""

    code: types.CodeType

    def function_name(self) -> str:
        return self.code.co_name

    def resolver(self) -> Any:
        raise NotImplementedError

    def defaults(self) -> tuple[tuple[VariableBase, ...], dict[str, VariableBase]]:
        raise NotImplementedError

    def freevar_cells(self) -> dict[str, CellVariable]:
        raise NotImplementedError

    def _differentiates_twice(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> bool:
        """Whether this library call, run natively at a graph break, may build gradients of gradients of
        the tensors made before it (`BreakGraphError.eager_before`)."""
        return False

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        from ..opcode_executor import OpcodeExecutor

        from ...skip_files import may_inline

        from .library_rules import library_call

        # (``log.debug(...)`` filtered out, ``inspect.signature``, ``Layer.__call__``: asked first, since some
        # library code may be inlined too)
        answered = library_call(self, args, kwargs)
        if answered is not None:
            return answered
        globals_ = self.resolver().globals
        if not may_inline(self.code, globals_):
            error = BreakGraphError(f"call of library function {self.function_name()}() runs natively (not inlined)")
            error.eager_before = self._differentiates_twice(args, kwargs)
            raise error
        generator = self.code.co_flags & CO_GENERATOR_LIKE == CO_GENERATOR
        if self.code.co_flags & CO_GENERATOR_LIKE and not generator:
            raise BreakGraphError(f"call of coroutine function {self.function_name()}() runs natively")
        graph = self.graph
        defaults, kwdefaults = self.defaults()
        bound = _bind_arguments(self.code, self.function_name(), args, kwargs, defaults, kwdefaults, graph)
        parent = graph.current_executor
        child = OpcodeExecutor(self.code, graph, self.resolver(), bound, self.freevar_cells(), parent=parent)
        if generator:  # a generator consumed in the frame (e.g. ``sum(t * 2 for t in ts)``): simulated lazily
            from ..opcode_executor import simulate_generator
            from .iterator import IteratorVariable

            # Until its first item is taken, the same generator is made again by calling the function with the
            # same arguments (a break at a call consuming it, ``sum(float(t) for t in ts)``, runs that call
            # natively on it).
            rebuild = (self, list(args)) if not kwargs else None
            iterator = IteratorVariable(simulate_generator(child), graph, f"generator {self.function_name()}",
                                        rebuild)
            iterator.generator = child
            iterator.made_by = (parent, parent.pc) if parent is not None else None
            graph.simulated_generators.append(iterator)
            return iterator
        try:
            return child.run()
        finally:
            graph.current_executor = parent


# Library functions that may differentiate gradients (see `BreakGraphError.eager_before`), with the argument
# that asks them to: a table, as more such functions come.
_DIFFERENTIATING_FUNCTIONS: tuple[tuple[Any, str], ...] = ((paddle.grad, "create_graph"),)


def _argument(function: Any, args: list[VariableBase], kwargs: dict[str, VariableBase],
              name: str) -> VariableBase | None:
    """The variable a call passes as ``function``'s parameter ``name`` (None: not given, or a call that does
    not bind; the native call raises then)."""
    try:
        bound = inspect.signature(function).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return None
    return bound.arguments.get(name)


def _may_be_true(var: VariableBase | None) -> bool:
    """Whether an argument may be true at some call of the translation: only a literal false constant is
    known false at every call (any other value is not guarded by the break that passes it)."""
    if var is None:
        return False
    return not (isinstance(var, ConstantVariable) and isinstance(var.tracker, ConstTracker) and not var.value)


class UserFunctionVariable(FunctionVariableBase, ObjectVariable):
    """A real Python function reached from the frame (a global, an attribute, a closure value...).

    Inlining a call depends only on the function's code, globals, the number of its defaults and the
    names of its keyword-only defaults; the default values and closure cell contents it reads are guarded
    where they are used, like arguments. So the function is guarded by those parts, not by identity: a
    function made anew for every call (a decorator's wrapper, a lambda argument) reuses the translation.
    Its identity is guarded only when the simulation used the object itself (``is``, ``id()``, a native
    call, an attribute stored on it, a closure cell shared with another path)."""

    def __init__(self, value: types.FunctionType, graph: "FunctionGraph", tracker: Tracker) -> None:
        ObjectVariable.__init__(self, value, graph, tracker)
        self.code = value.__code__
        self._closure_var: VariableBase | None = None

    def get_py_value(self) -> Any:
        self.needs_identity = True  # the very object goes somewhere the structural guard does not cover
        return self.value

    def get_py_type(self) -> type:
        return type(self.value)

    def make_guards(self, builder: "GuardBuilder", expr: str) -> list[str]:
        # (which of its cells are one cell, and which are distinct, is guarded by the graph: the
        # `_guard_shared_cell` aliases, and `FunctionGraph._written_cell_paths` when a cell is written)
        if self.needs_identity:
            return [builder.identity(expr, self.value)]
        fn = self.value
        guards = [f"type({expr}) is {builder.constant(types.FunctionType)}",
                  builder.identity(f"{expr}.__code__", fn.__code__),
                  f"{expr}.__globals__ is {builder.constant(fn.__globals__)}"]
        if self.code.co_argcount:  # which parameters take a default
            guards.append(f"len({expr}.__defaults__ or ()) == {len(fn.__defaults__ or ())}")
        if self.code.co_kwonlyargcount:
            keys = builder.constant(frozenset(fn.__kwdefaults__ or ()))
            guards.append(f"({expr}.__kwdefaults__ or {{}}).keys() == {keys}")
        return guards

    def getattr(self, name: str) -> VariableBase:
        from ..side_effects import ABSENT

        if self.graph.side_effects.lookup_attr(self.value, name) is not ABSENT:
            self.needs_identity = True  # stored earlier in the frame, maybe through another path
        return super().getattr(name)

    def function_name(self) -> str:
        return self.value.__qualname__

    def _differentiates_twice(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> bool:
        # Paddle's decorated functions share one wrapper code: the answer depends on the very function, so a
        # function with that code is guarded by identity.
        for function, flag in _DIFFERENTIATING_FUNCTIONS:
            if self.code is function.__code__:
                self.needs_identity = True
            if self.value is function:
                return _may_be_true(_argument(function, args, kwargs, flag))
        return False

    def _source(self, attr: str, value: Any) -> VariableBase:
        tracker = GetAttrTracker(self, attr) if self.tracker.is_traceable() else DummyTracker((self,))
        return SourceOnlyVariable(value, self.graph, tracker)

    def resolver(self) -> Any:
        from ..opcode_executor import NameResolver

        fn = self.value
        top = self.graph.top_resolver
        builtins_ = fn.__builtins__ if isinstance(fn.__builtins__, dict) else vars(fn.__builtins__)
        if fn.__globals__ is top.globals:
            return top
        return NameResolver(fn.__globals__, builtins_, self._source("__globals__", fn.__globals__))

    def defaults(self) -> tuple[tuple[VariableBase, ...], dict[str, VariableBase]]:
        fn = self.value
        graph = self.graph
        defaults_var = self._source("__defaults__", fn.__defaults__)
        defaults = tuple(
            VariableFactory.from_value(value, graph, GetItemTracker(defaults_var, i)
                                       if self.tracker.is_traceable() else DummyTracker((self,)))
            for i, value in enumerate(fn.__defaults__ or ()))
        kwdefaults_var = self._source("__kwdefaults__", fn.__kwdefaults__)
        kwdefaults = {
            key: VariableFactory.from_value(value, graph, GetItemTracker(kwdefaults_var, key)
                                            if self.tracker.is_traceable() else DummyTracker((self,)))
            for key, value in (fn.__kwdefaults__ or {}).items()}
        return defaults, kwdefaults

    def freevar_cells(self) -> dict[str, CellVariable]:
        fn = self.value
        if self._closure_var is None:  # one per variable: its cells met again are recognised as its own
            self._closure_var = self._source("__closure__", fn.__closure__)
        closure_var = self._closure_var
        cells = {}
        for index, name in enumerate(self.code.co_freevars):
            simulated = self.graph.class_cells.get(id(fn.__closure__[index]))
            if simulated is not None and simulated[0] is fn.__closure__[index]:
                self.needs_identity = True
                cells[name] = simulated[1]  # a function of a class built during simulation
                continue
            known = self.graph.known_cells.get(id(fn.__closure__[index]))
            if known is not None:  # a cell already simulated (shared with the frame or another function)
                cells[name] = known[1]
                self._guard_shared_cell(known[1], index, closure_var)
                continue
            cell_var = SourceOnlyVariable(fn.__closure__[index], self.graph, GetItemTracker(closure_var, index)
                                          if self.tracker.is_traceable() else DummyTracker((self,)))
            try:
                value = fn.__closure__[index].cell_contents
            except ValueError:
                content = None
            else:
                content = VariableFactory.from_value(value, self.graph, GetAttrTracker(cell_var, "cell_contents")
                                                     if self.tracker.is_traceable() else DummyTracker((self,)))
            cells[name] = CellVariable(content, self.graph, DummyTracker(), external=True,
                                       source=cell_var if self.tracker.is_traceable() else None)
            cells[name].path = cell_var if self.tracker.is_traceable() else None
            self.graph.known_cells[id(fn.__closure__[index])] = (fn.__closure__[index], cells[name])
        return cells

    def _guard_shared_cell(self, known: CellVariable, index: int, closure_var: VariableBase) -> None:
        """The simulation shares cell ``index`` with a cell already simulated (of the frame, or of another
        function): the guard checks the two paths still reach one cell (a recursive nested function's cell
        holding itself, two closures of one scope), else this function's identity."""
        if known.path is not None and known.path is not closure_var and self.tracker.is_traceable():
            if known.path.tracker.inputs and known.path.tracker.inputs[0] is closure_var:
                return  # this very function's cell, met again (the function was called twice)
            self.graph.add_alias(known.path, GetItemTracker(closure_var, index))
        else:
            self.needs_identity = True

    def __repr__(self) -> str:
        return f"UserFunctionVariable({self.value.__qualname__})"


def _defined_by_function_type(name: str) -> bool:
    """Whether functions get attribute ``name`` from their type (a slot like ``__annotations__``, or a
    method); ``hasattr(FunctionType, ...)`` would ask the type object itself instead."""
    return any(name in vars(cls) for cls in types.FunctionType.__mro__)


class NestedFunctionVariable(FunctionVariableBase):
    """A function created during simulation by ``MAKE_FUNCTION``; it shares its creator's globals."""

    def __init__(self, code: types.CodeType, qualname: str, resolver: Any, defaults: tuple[VariableBase, ...],
                 kwdefaults: dict[str, VariableBase], closure: dict[str, CellVariable],
                 graph: "FunctionGraph") -> None:
        super().__init__(graph, DummyTracker(tuple(defaults) + tuple(kwdefaults.values())))
        self.code = code
        self.qualname = qualname
        self._resolver = resolver
        self._defaults = defaults
        self._kwdefaults = kwdefaults
        self._closure = closure
        self.annotations: VariableBase | None = None  # MAKE_FUNCTION's tuple of (name, annotation) pairs
        # Attributes a function keeps in its own slots, assigned in the frame (``functools.wraps`` copies
        # ``__name__``, ``__doc__``...), and its ``__dict__``: made once, when first needed.
        self._slots: dict[str, VariableBase] = {}
        self._namespace: VariableBase | None = None
        self._prototype: types.FunctionType | None = None

    def function_name(self) -> str:
        return self.qualname

    # -- attributes ----------------------------------------------------------------------------------------
    _ASSIGNABLE_SLOTS = tuple(name for name in ("__name__", "__qualname__", "__doc__", "__module__",
                                                "__annotations__", "__type_params__")
                              if _defined_by_function_type(name))  # (``__type_params__``: 3.12+)
    _DERIVED = ("__name__", "__doc__", "__module__", "__type_params__")  # as MAKE_FUNCTION sets them

    def _real_like(self) -> types.FunctionType:
        """A function of the same code and globals, to read what ``MAKE_FUNCTION`` derives from them
        (``__doc__`` from the code's constants, ``__module__`` from the globals) exactly as Python does."""
        if self._prototype is None:
            cells = tuple(types.CellType() for _ in self.code.co_freevars)
            self._prototype = types.FunctionType(self.code, self._resolver.globals, self.code.co_name, None,
                                                 cells or None)
        return self._prototype

    def _set_slot(self, name: str, value: VariableBase | None) -> None:
        previous = self._slots.get(name)
        self._slots[name] = value  # type: ignore[assignment]

        def undo() -> None:
            if previous is None:
                self._slots.pop(name, None)
            else:
                self._slots[name] = previous

        self.graph.side_effects.on_rollback(undo)

    def namespace(self) -> VariableBase:
        """The function's ``__dict__`` (its own attributes, e.g. ``__wrapped__``)."""
        from .container import DictVariable

        if self._namespace is None:
            self._namespace = DictVariable({}, self.graph, DummyTracker())
        return self._namespace

    def getattr(self, name: str) -> VariableBase:
        from .container import DictVariable, TupleVariable

        graph = self.graph
        if name in self._slots:
            return self._slots[name]
        if name == "__dict__":
            return self.namespace()
        if name == "__annotations__":  # a dict made on first read, then always the same one
            pairs = self.annotations.unpack() if self.annotations is not None else []
            items = {pairs[i].get_py_value(): pairs[i + 1] for i in range(0, len(pairs), 2)}
            annotations = DictVariable(items, graph, DummyTracker(tuple(items.values())))
            self._set_slot(name, annotations)
            return annotations
        if name == "__qualname__":
            return ConstantVariable(self.qualname, graph, DummyTracker())
        if name in self._DERIVED and name in self._ASSIGNABLE_SLOTS:  # (generic functions are not simulated)
            return VariableFactory.from_value(getattr(self._real_like(), name), graph, DummyTracker())
        if name == "__code__":
            return ObjectVariable(self.code, graph, DummyTracker())
        if name == "__defaults__":
            if not self._defaults:
                return ConstantVariable(None, graph, DummyTracker())
            return TupleVariable(list(self._defaults), graph, DummyTracker(tuple(self._defaults)))
        if self._namespace is not None:
            items = self._namespace.items  # type: ignore[attr-defined]
            if name in items:
                return items[name]
        if _defined_by_function_type(name):
            raise FallbackError(f"attribute {name!r} of a function made in the frame is not supported yet")
        message = f"'function' object has no attribute {name!r}"
        raise UserCodeError(f"user code raised AttributeError: {message}",
                            original=AttributeError(message, name=name))

    def setattr(self, name: str, value: VariableBase | None) -> None:
        """Assigned on the simulated function (it exists only in the frame); rebuilt with it."""
        from .container import DictVariable

        if value is None or (name in ("__name__", "__qualname__") and not (
                isinstance(value, ConstantVariable) and isinstance(value.value, str))):
            raise FallbackError(f"deleting or assigning a non-string to {name!r} of a function made in the "
                                "frame is not supported yet")
        if name in self._ASSIGNABLE_SLOTS:
            if name == "__annotations__" and not isinstance(value, DictVariable):
                raise FallbackError("assigning a non-dict to __annotations__ is not supported yet")
            self._set_slot(name, value)
        elif name == "__dict__":
            if not isinstance(value, DictVariable):
                raise FallbackError("assigning a non-dict to a function's __dict__ is not supported yet")
            previous = self._namespace
            self._namespace = value
            self.graph.side_effects.on_rollback(lambda: setattr(self, "_namespace", previous))
        elif _defined_by_function_type(name):
            raise FallbackError(f"assigning {name!r} of a function made in the frame is not supported yet")
        else:
            self.namespace().setitem(ConstantVariable(name, self.graph, DummyTracker()), value)

    def resolver(self) -> Any:
        return self._resolver

    def defaults(self) -> tuple[tuple[VariableBase, ...], dict[str, VariableBase]]:
        return self._defaults, self._kwdefaults

    def freevar_cells(self) -> dict[str, CellVariable]:
        return dict(self._closure)

    is_mutable_container = True  # one function object per run of the generated code, however referenced

    def children(self) -> list[VariableBase]:
        extras = [var for var in (self.annotations, self._namespace) if var is not None]
        return [*self._defaults, *self._kwdefaults.values(),
                *(self._closure[name].rebuilt() for name in self.code.co_freevars), *extras,
                *self._slots.values()]

    def _reconstruct_computed(self, codegen: "CodeGen") -> None:
        """A new function of the same code, defaults and closure (as ``MAKE_FUNCTION`` makes one)."""
        from ...runtime import make_function
        from .container import DictVariable, TupleVariable

        graph = self.graph
        # (a cell of the translated frame is its real cell, shared with what follows a graph break; any other
        # cell made during simulation is only reachable through the closures rebuilt here, which share it)
        cells = [self._closure[name] for name in self.code.co_freevars]
        parts = [ObjectVariable(self.code, graph, DummyTracker()),
                 ObjectVariable(self._resolver.globals, graph, DummyTracker()),
                 ConstantVariable(self.qualname, graph, DummyTracker()),
                 TupleVariable(list(self._defaults), graph, DummyTracker(tuple(self._defaults))),
                 DictVariable(dict(self._kwdefaults), graph, DummyTracker(tuple(self._kwdefaults.values()))),
                 TupleVariable([cell.rebuilt() for cell in cells], graph, DummyTracker())]
        if self.annotations is not None or self._slots or self._namespace is not None:
            none = ConstantVariable(None, graph, DummyTracker())
            slots = DictVariable(dict(self._slots), graph, DummyTracker(tuple(self._slots.values())))
            parts += [self.annotations or none, slots, self._namespace or none]
        codegen.call_helper(make_function, parts)

    def __repr__(self) -> str:
        return f"NestedFunctionVariable({self.qualname})"


class BoundMethodVariable(VariableBase):
    """``obj.method`` of a user class: calling it inlines the function with ``obj`` first."""

    def __init__(self, function: VariableBase, self_var: VariableBase, graph: "FunctionGraph",
                 tracker: Tracker, name: str | None = None) -> None:
        super().__init__(graph, tracker)
        self.function = function
        self.self_var = self_var
        self.name = name  # the attribute it was read from, to rebuild it as ``self_var.name``

    def children(self) -> list[VariableBase]:
        return [self.self_var, self.function]

    def _reconstruct_computed(self, codegen: "CodeGen") -> None:
        """``self_var.name`` when it was read as an attribute; otherwise (``super().f``, a method found past the
        instance's own attributes) ``types.MethodType(function, self_var)``: re-reading an attribute could
        find another function, so the method is bound again from the parts that were simulated (a break
        inside the callee leaves it pending on the caller's stack)."""
        if self.name is None:
            codegen.call_helper(types.MethodType, [self.function, self.self_var])
            return
        codegen.reconstruct(self.self_var)
        codegen.load_attr(self.name)

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        return self.function.call([self.self_var, *args], kwargs)

    def get_py_value(self) -> Any:
        return types.MethodType(self.function.get_py_value(), self.self_var.get_py_value())

    def make_guards(self, builder: "GuardBuilder", expr: str) -> list[str]:
        return []  # the function and the instance carry the guards

    def __repr__(self) -> str:
        return f"BoundMethodVariable({self.function!r} of {self.self_var!r})"


class RealBoundMethodVariable(BoundMethodVariable):
    """A real bound method of a Python function reached as a value (the ``__exit__`` a ``with`` block keeps on
    the stack, received by a resume function; a method passed as an argument): a new object at each access,
    so it is guarded by its type, and calling it inlines ``__func__`` (guarded as any function: by its code,
    globals and defaults' shape, or its identity once used) with ``__self__``."""

    def __init__(self, value: types.MethodType, graph: "FunctionGraph", tracker: Tracker) -> None:
        super().__init__(None, None, graph, tracker)  # type: ignore[arg-type]
        self.value = value

        def part(attr: str) -> VariableBase:
            sub = GetAttrTracker(self, attr) if tracker.is_traceable() else DummyTracker((self,))
            return VariableFactory.from_value(getattr(value, attr), graph, sub)

        self.function, self.self_var = part("__func__"), part("__self__")

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        self.graph.add_guard(self.function)  # which code runs
        return super().call(args, kwargs)

    def get_py_value(self) -> Any:
        return self.value

    def make_guards(self, builder: "GuardBuilder", expr: str) -> list[str]:
        return [f"type({expr}) is {builder.constant(types.MethodType)}"]

    def _reconstruct_computed(self, codegen: "CodeGen") -> None:
        codegen.reconstruct(self.self_var)
        codegen.load_attr(self.value.__name__)


@VariableFactory.register(60)
def _function_rule(value: Any, graph: "FunctionGraph", tracker: Tracker) -> VariableBase | None:
    if isinstance(value, types.FunctionType):
        return UserFunctionVariable(value, graph, tracker)
    if type(value) is types.MethodType and isinstance(value.__func__, types.FunctionType):
        return RealBoundMethodVariable(value, graph, tracker)
    return None


__all__ = ["BoundMethodVariable", "CellVariable", "ConstantVariable", "NestedFunctionVariable",
           "UserFunctionVariable"]


class PartialVariable(VariableBase):
    """A ``functools.partial``: calling it calls its function with the stored arguments first. One made
    during simulation is rebuilt in generated code; one from outside is read through its attributes."""

    def __init__(self, func: VariableBase, args: VariableBase, keywords: VariableBase, graph: "FunctionGraph",
                 tracker: Tracker) -> None:
        super().__init__(graph, tracker)
        self.func = func
        self.args = args  # a TupleVariable
        self.keywords = keywords  # a DictVariable

    @classmethod
    def build(cls, func: VariableBase, args: list[VariableBase], kwargs: dict[str, VariableBase],
              graph: "FunctionGraph") -> "PartialVariable":
        """``functools.partial(func, *args, **kwargs)``; a partial of a partial is flattened, as in Python."""
        from .container import DictVariable, TupleVariable

        if isinstance(func, PartialVariable):
            args = [*func.args.unpack(), *args]
            kwargs = {**func.keywords.items, **kwargs}  # type: ignore[attr-defined]
            graph.add_guard(func.keywords)
            func = func.func
        if isinstance(func, ConstantVariable) and not callable(func.value):
            raise UserCodeError("user code raised TypeError: the first argument must be callable",
                                original=TypeError("the first argument must be callable"))
        args_var = TupleVariable(list(args), graph, DummyTracker(tuple(args)))
        keywords_var = DictVariable(dict(kwargs), graph, DummyTracker(tuple(kwargs.values())))
        return cls(func, args_var, keywords_var, graph, DummyTracker((func, args_var, keywords_var)))

    @classmethod
    def from_real(cls, value: Any, graph: "FunctionGraph", tracker: Tracker) -> "PartialVariable":
        var = cls(None, None, None, graph, tracker)  # type: ignore[arg-type]

        def part(name: str) -> VariableBase:
            sub = GetAttrTracker(var, name) if tracker.is_traceable() else DummyTracker((var,))
            return VariableFactory.from_value(getattr(value, name), graph, sub)

        var.func, var.args, var.keywords = part("func"), part("args"), part("keywords")
        return var

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        graph = self.graph
        for part in (self.func, self.keywords):
            graph.add_guard(part)
        stored_kwargs = dict(self.keywords.items)  # type: ignore[attr-defined]
        return self.func.call([*self.args.unpack(), *args], {**stored_kwargs, **kwargs})

    def getattr(self, name: str) -> VariableBase:
        parts = {"func": self.func, "args": self.args, "keywords": self.keywords}
        if name in parts:
            return parts[name]
        raise FallbackError(f"attribute {name!r} of functools.partial is not supported yet")

    def get_py_value(self) -> Any:
        import functools

        return functools.partial(self.func.get_py_value(), *self.args.get_py_value(),
                                 **self.keywords.get_py_value())

    def get_py_type(self) -> type:
        import functools

        return functools.partial

    def make_guards(self, builder: "GuardBuilder", expr: str) -> list[str]:
        import functools

        return [f"type({expr}) is {builder.constant(functools.partial)}"]  # its parts are guarded when used

    def children(self) -> list[VariableBase]:
        return [self.func, self.args, self.keywords]

    def _reconstruct_computed(self, codegen: "CodeGen") -> None:
        from ...runtime import make_partial

        codegen.call_helper(make_partial, [self.func, self.args, self.keywords])

    def __repr__(self) -> str:
        return f"PartialVariable({self.func!r})"


@VariableFactory.register(61)
def _partial_rule(value: Any, graph: "FunctionGraph", tracker: Tracker) -> VariableBase | None:
    import functools

    if type(value) is functools.partial and not value.__dict__:
        return PartialVariable.from_real(value, graph, tracker)
    return None

"""Context managers in ``with`` blocks: Paddle's grad-mode switches and mixed-precision blocks
(``paddle.amp.auto_cast``) are modelled in the graph; user context managers written in Python have their
``__enter__``/``__exit__`` inlined."""
from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import types
from typing import TYPE_CHECKING, Any, Callable, Iterator

import paddle

from ....errors import BreakGraphError, FallbackError, UserCodeError
from ....symbolic.amp import AmpState, current_amp_state
from ..tracker import ConstTracker, DummyTracker, GetAttrTracker, Tracker
from .base import VariableBase, VariableFactory
from .basic import ConstantVariable, ObjectVariable
from .callable import CallableVariable, member_of
from .function import BoundMethodVariable, UserFunctionVariable

if TYPE_CHECKING:
    from ...codegen import CodeGen
    from ..function_graph import FunctionGraph
    from ..guard import GuardBuilder

# (``paddle.amp.auto_cast`` is the function; the module of the same name is shadowed by it)
_amp_module = importlib.import_module("paddle.amp.auto_cast")

_GradClasses = {paddle.base.dygraph.base.no_grad_: False, paddle.base.dygraph.base.enable_grad: True}


class GradModeVariable(VariableBase):
    """``paddle.no_grad()`` / ``paddle.enable_grad()``: entering switches the simulated grad mode, so the
    statements recorded inside are marked and run without autograd (in the program and in eager replay)."""

    def __init__(self, enabled: bool, graph: "FunctionGraph") -> None:
        super().__init__(graph, DummyTracker())
        self.enabled = enabled

    def enter(self) -> tuple[VariableBase, VariableBase]:
        exit_var = GradModeExitVariable(self.graph.grad_mode, self.enabled, self.graph)
        self.graph.grad_mode = self.enabled
        return exit_var, ConstantVariable(None, self.graph, DummyTracker())

    def __repr__(self) -> str:
        return f"GradModeVariable(enabled={self.enabled})"


class GradModeExitVariable(VariableBase):
    """The ``__exit__`` a grad-mode ``with`` leaves on the stack."""

    exits_a_block = True  # rebuilding it at a graph break enters the real mode (and returns its exit)

    def __init__(self, previous: bool, inside: bool, graph: "FunctionGraph") -> None:
        super().__init__(graph, DummyTracker())
        self.previous = previous
        self.inside = inside

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        self.graph.grad_mode = self.previous
        return ConstantVariable(None, self.graph, DummyTracker())

    def _reconstruct_computed(self, codegen: "CodeGen") -> None:
        # A graph break inside the block: enter the real mode now; the resume function, which continues in
        # the block, receives the real ``__exit__``.
        from ...runtime import enter_grad_mode

        codegen.load_callable_const(enter_grad_mode)
        codegen.load_const(self.inside)
        codegen.call(1)


def call_set_grad_enabled(var: VariableBase, args: list[VariableBase], kwargs: dict[str, VariableBase]
                           ) -> VariableBase:
    """``paddle.set_grad_enabled(mode)``. Its constructor switches the mode at once, its ``__enter__`` does
    nothing and its ``__exit__`` restores the mode it found. Made for the ``with`` right after it, it is the
    block of ``no_grad()`` or ``enable_grad()``; called as a statement (its object dropped), it switches the
    simulated mode from here on, and the real one after the graph (replayed)."""
    from ...pyversion import WITH_ENTRY
    from ...runtime import set_grad_mode

    graph = var.graph
    given = [*args, *kwargs.values()]
    following = graph.current_executor.next_opname()
    if len(given) != 1 or kwargs.keys() - {"mode"} or not isinstance(given[0], ConstantVariable) or \
            type(given[0].value) is not bool or following not in (WITH_ENTRY, "POP_TOP"):
        raise BreakGraphError("paddle.set_grad_enabled() with a mode that is no constant bool, or kept, runs "
                              "natively")
    graph.add_guard(var)
    graph.add_guard(given[0])
    mode = given[0].value
    if following == WITH_ENTRY:
        return GradModeVariable(mode, graph)
    previous = graph.grad_mode
    graph.grad_mode = mode
    graph.side_effects.on_rollback(lambda: setattr(graph, "grad_mode", previous))
    graph.side_effects.call_after_graph(set_grad_mode, [ConstantVariable(mode, graph, DummyTracker())])
    return ConstantVariable(None, graph, DummyTracker())  # (the manager object: dropped)


def grad_mode_for_class(cls: Any) -> bool | None:
    """The grad mode a Paddle grad-mode class switches to, or None for other classes."""
    try:
        return _GradClasses.get(cls)
    except TypeError:
        return None


def enter_context(manager: VariableBase) -> tuple[VariableBase, VariableBase]:
    """``BEFORE_WITH``: returns (the ``__exit__`` to keep on the stack, the value of ``__enter__()``)."""
    if isinstance(manager, (GradModeVariable, AmpModeVariable, GeneratorContextManagerVariable)):
        return manager.enter()
    if isinstance(manager, ObjectVariable) and not isinstance(manager.value, type):
        methods = [SpecialMethodVariable.of(manager, name) for name in ("__enter__", "__exit__")]
        if None not in methods:
            enter, exit_var = methods
            return exit_var, enter.call([], {})
        if all(inspect.getattr_static(type(manager.value), name, None) is not None
               for name in ("__enter__", "__exit__")):
            # A manager of C code (a file, a lock): entered natively, its real ``__exit__`` handed to the resume
            # function, which runs the block.
            raise BreakGraphError(f"`with` over a {type(manager.value).__name__} object (C code) is entered natively")
    raise FallbackError(f"`with` over {manager!r} is not simulated yet")


# How a special method written in Python binds, by the kind of the class attribute: what comes before the
# call's own arguments (`SpecialMethodVariable`).
_BINDINGS: dict[type, Callable[[VariableBase], list[VariableBase]]] = {
    types.FunctionType: lambda manager: [manager],
    staticmethod: lambda manager: [],
    classmethod: lambda manager: [_class_of(manager)],
}


def _class_of(var: VariableBase) -> VariableBase:
    tracker = GetAttrTracker(var, "__class__") if var.tracker.is_traceable() else DummyTracker((var,))
    return VariableFactory.from_value(type(var.get_py_value()), var.graph, tracker)


class SpecialMethodVariable(BoundMethodVariable):
    """``obj.__enter__`` / ``obj.__exit__`` as a ``with`` block gets them (`runtime.special_method`): the
    class attribute, never one set on the instance, bound as its kind binds (a function to ``obj``, a
    ``classmethod`` to the type, a ``staticmethod`` to nothing). Its function is inlined; rebuilt (the
    ``__exit__`` a resume function receives) by the same lookup at run time."""

    def __init__(self, function: VariableBase, self_var: VariableBase, bound: list[VariableBase], name: str
                 ) -> None:
        super().__init__(function, self_var, self_var.graph, DummyTracker((self_var,)), name)
        self.bound = bound

    @staticmethod
    def of(manager: VariableBase, name: str) -> "SpecialMethodVariable | None":
        """The special method ``name`` of ``manager`` (an instance of a user class, its type guarded), or None
        when it is not Python code of one of the kinds of `_BINDINGS`."""
        from ...runtime import special_attribute

        attribute = special_attribute(type(manager.get_py_value()), name)
        bind = _BINDINGS.get(type(attribute))
        function = attribute if type(attribute) is types.FunctionType else getattr(attribute, "__func__", None)
        if bind is None or type(function) is not types.FunctionType:
            return None
        manager.graph.add_guard(manager)  # (its type fixes the function, as for any inlined dunder)
        function_var = UserFunctionVariable(function, manager.graph, DummyTracker((manager,)))
        return SpecialMethodVariable(function_var, manager, bind(manager), name)

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        return self.function.call([*self.bound, *args], kwargs)

    def get_py_value(self) -> Any:
        from ...runtime import special_method

        return special_method(self.self_var.get_py_value(), self.name)

    def _reconstruct_computed(self, codegen: "CodeGen") -> None:
        from ...runtime import special_method

        codegen.call_helper(special_method, [self.self_var, ConstantVariable(self.name, self.graph, DummyTracker())])

    def __repr__(self) -> str:
        return f"SpecialMethodVariable({self.name} of {self.self_var!r})"


# -- mixed precision ---------------------------------------------------------------------------------------
# The functions that return an AMP context manager; each is called for real (with the block's constant
# arguments) to enter the block, so every rule of Paddle's own (argument checks, the place and device
# checks that turn AMP off, the default op lists) applies exactly as in eager mode.
_AMP_FACTORIES = frozenset({_amp_module.auto_cast, _amp_module.amp_guard, _amp_module.autocast})


class AmpFactoryVariable(CallableVariable):
    """``paddle.amp.auto_cast`` (or ``amp_guard``, ``autocast``): calling it with known arguments makes the
    block's manager; nothing happens before ``__enter__`` (as in eager mode)."""

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        for var in [*args, *kwargs.values()]:
            self.graph.add_guard(var)  # the block's state is computed from their values
        py_args = tuple(var.get_py_value() for var in args)
        py_kwargs = {key: var.get_py_value() for key, var in kwargs.items()}
        self.graph.add_guard(self)
        return AmpModeVariable(functools.partial(self.value, *py_args, **py_kwargs), self.graph)


@VariableFactory.register(73)
def _amp_factory_rule(value: Any, graph: "FunctionGraph", tracker: Tracker) -> VariableBase | None:
    return AmpFactoryVariable(value, graph, tracker) if member_of(_AMP_FACTORIES, value) else None


def _amp_state_inside(make_manager: Callable[[], Any]) -> tuple[AmpState, Any]:
    """The AMP state eager mode has inside the block, and the ``amp_dtype`` it records globally, found by
    entering and leaving a fresh manager (the process-wide record is put back: the generated code
    replays it at run time)."""
    record = _amp_module.amp_global_state()
    recorded_dtype = record.amp_dtype
    try:
        manager = make_manager()
        manager.__enter__()
    except Exception as exc:
        raise UserCodeError(f"user code raised {type(exc).__name__}: {exc}", original=exc) from None
    try:
        return current_amp_state(), record.amp_dtype
    finally:
        manager.__exit__(None, None, None)
        record.amp_dtype = recorded_dtype


def _master_grad_on() -> bool:
    return bool(_amp_module.amp_global_state().use_master_grad)


class AmpModeVariable(VariableBase):
    """``paddle.amp.auto_cast(...)`` before its ``with``: entering switches the simulated AMP state, so the
    statements recorded inside are built and inferred with the casts eager mode applies."""

    def __init__(self, make_manager: Callable[[], Any], graph: "FunctionGraph") -> None:
        super().__init__(graph, DummyTracker())
        self.make_manager = make_manager

    def enter(self) -> tuple[VariableBase, VariableBase]:
        graph = self.graph
        # With master gradients, each entry registers a backward hook: an effect per call, not modelled.
        graph.add_query_guard(_master_grad_on, _master_grad_on())
        if _master_grad_on():
            raise FallbackError("auto_cast with master gradients (amp.decorate(master_grad=True)) registers a "
                                "backward hook at each entry: the frame runs eagerly", graph.location)
        inside, recorded_dtype = _amp_state_inside(self.make_manager)
        # Whether AMP really switches on depends on the device ops run on.
        graph.add_query_guard(paddle.base.framework._current_expected_place,
                              paddle.base.framework._current_expected_place())
        record = ObjectVariable(_amp_module.amp_global_state(), graph, ConstTracker(_amp_module.amp_global_state()))
        graph.side_effects.store_attr(record, "amp_dtype", ConstantVariable(recorded_dtype, graph, DummyTracker()))
        exit_var = AmpModeExitVariable(graph.amp_state, self.make_manager, graph)
        graph.amp_state = inside
        return exit_var, ConstantVariable(None, graph, DummyTracker())

    def _reconstruct_computed(self, codegen: "CodeGen") -> None:
        # Made before a graph break and entered after it: the generated code makes the real manager.
        codegen.load_callable_const(self.make_manager)
        codegen.call(0)

    def __repr__(self) -> str:
        return f"AmpModeVariable({self.make_manager!r})"


class AmpModeExitVariable(VariableBase):
    """The ``__exit__`` an AMP ``with`` leaves on the stack."""

    exits_a_block = True  # rebuilding it at a graph break enters a real block (and returns its exit)

    def __init__(self, previous: AmpState, make_manager: Callable[[], Any], graph: "FunctionGraph") -> None:
        super().__init__(graph, DummyTracker())
        self.previous = previous
        self.make_manager = make_manager

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        self.graph.amp_state = self.previous
        return ConstantVariable(None, self.graph, DummyTracker())

    def _reconstruct_computed(self, codegen: "CodeGen") -> None:
        # A graph break inside the block: enter a real manager now; the resume function, which continues
        # in the block, receives its ``__exit__``.
        from ...runtime import enter_context_manager

        codegen.load_callable_const(enter_context_manager)
        codegen.load_const(self.make_manager)
        codegen.call(1)


# Queries of the AMP state, answered from the simulated state (what the tracer holds at that point of the
# frame: the state at the frame's start is guarded, and a block's state follows from guarded arguments).
_AMP_QUERIES: dict[Any, Callable[[AmpState], Any]] = {
    _amp_module.is_autocast_enabled: lambda state: state.enabled,
    _amp_module.get_autocast_dtype: lambda state: state.dtype if state.enabled else "float16",
}


class AmpQueryVariable(CallableVariable):
    """``paddle.amp.is_autocast_enabled()`` / ``get_autocast_dtype()`` (their ``device_type`` argument is
    ignored by Paddle too)."""

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        if len(args) + len(kwargs) > 1 or (kwargs and "device_type" not in kwargs):
            raise FallbackError(f"{self.value.__name__}() with unexpected arguments (eager raises the error)")
        self.graph.add_guard(self)
        answer = _AMP_QUERIES[self.value](self.graph.amp_state)
        return ConstantVariable(answer, self.graph, DummyTracker())


@VariableFactory.register(74)
def _amp_query_rule(value: Any, graph: "FunctionGraph", tracker: Tracker) -> VariableBase | None:
    return AmpQueryVariable(value, graph, tracker) if member_of(_AMP_QUERIES, value) else None


# -- functions decorated with a mode switch: ``@paddle.amp.auto_cast(...)``, ``@paddle.no_grad()`` -------------
def _context_decorator_wrapper_code() -> types.CodeType:
    """The code of the wrapper ``contextlib.ContextDecorator`` puts around a decorated function."""

    @contextlib.contextmanager
    def manager() -> Iterator[None]:
        yield

    return manager()(lambda: None).__code__


def _grad_decorator_wrapper_code() -> types.CodeType:
    """The code of the wrapper Paddle's grad-mode classes (``paddle.no_grad()``) put around a function (its
    generator variant has another code, and is not simulated)."""
    return paddle.no_grad()(lambda: None).__code__


_AMP_GUARD_GENERATOR = _amp_module.amp_guard.__wrapped__  # what auto_cast's managers run


def _amp_block(manager: Any) -> Callable[["FunctionGraph"], VariableBase] | None:
    if getattr(manager, "func", None) is not _AMP_GUARD_GENERATOR:
        return None
    return lambda graph: AmpModeVariable(manager._recreate_cm, graph)


def _grad_block(manager: Any) -> Callable[["FunctionGraph"], VariableBase] | None:
    enabled = grad_mode_for_class(type(manager))
    return None if enabled is None else lambda graph: GradModeVariable(enabled, graph)


# wrapper code -> what makes the simulated block from the manager in the wrapper's ``self`` cell (None: not simulated)
_DECORATOR_WRAPPERS: dict[types.CodeType, Callable[[Any], Callable[["FunctionGraph"], VariableBase] | None]] = {
    _context_decorator_wrapper_code(): _amp_block,
    _grad_decorator_wrapper_code(): _grad_block,
}


def decorator_block(fn: types.FunctionType) -> Callable[["FunctionGraph"], VariableBase] | None:
    """For a function wrapped by a mode-switching decorator (``@paddle.amp.auto_cast(...)``,
    ``@paddle.no_grad()``, ``@paddle.enable_grad()``): makes the simulated block (a variable with ``enter()``)
    its wrapper runs the function in. None for other functions."""
    block_of = _DECORATOR_WRAPPERS.get(fn.__code__)
    if block_of is None or fn.__closure__ is None:
        return None
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__))
    try:
        manager = cells["self"].cell_contents
    except (KeyError, ValueError):
        return None
    return block_of(manager)


class ModeDecoratedFunctionVariable(UserFunctionVariable):
    """A function decorated with a mode switch (`decorator_block`): its call is the decorated function
    inlined inside the simulated block (the wrapper itself is library code, which would break the graph)."""

    def __init__(self, value: types.FunctionType, graph: "FunctionGraph", tracker: Tracker) -> None:
        super().__init__(value, graph, tracker)
        self.needs_identity = True  # all wrappers share one code: the manager and function are in the object

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        make_block = decorator_block(self.value)
        assert make_block is not None
        self.graph.add_guard(self)  # (the identity of the wrapper fixes its manager and function)
        cells = self.freevar_cells()
        exit_var, _ = make_block(self.graph).enter()  # type: ignore[attr-defined]
        try:
            result = cells["func"].load("func").call(args, kwargs)
        except BaseException:  # (leaving by an exception leaves the block too; it does not suppress it)
            exit_var.call([], {})
            raise
        exit_var.call([], {})
        return result


@VariableFactory.register(61)
def _mode_decorated_rule(value: Any, graph: "FunctionGraph", tracker: Tracker) -> VariableBase | None:
    if isinstance(value, types.FunctionType) and decorator_block(value) is not None:
        return ModeDecoratedFunctionVariable(value, graph, tracker)
    return None


class BlockExitVariable(ObjectVariable):
    """The real ``__exit__`` of a block entered at a graph break, received by a resume function (a new object
    at each call, guarded by its type and the mode it restores). The normal end of the block is simulated:
    the mode switches back for what follows, and the generated code calls the real exit before its graph."""

    exits_a_block = True  # still open at a further break: left if an exception escapes

    def make_guards(self, builder: "GuardBuilder", expr: str) -> list[str]:
        return [f"type({expr}) is {builder.constant(type(self.value))}",
                f"{expr}.kind == {self.value.kind!r}", f"{expr}.previous == {builder.constant(self.value.previous)}"]

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        if kwargs or not all(isinstance(arg, ConstantVariable) and arg.value is None for arg in args):
            raise BreakGraphError("an exception leaving a block entered before a graph break: runs natively")
        graph = self.graph
        graph.add_guard(self)
        block_exit = self.value
        attribute = "grad_mode" if block_exit.kind == "grad" else "amp_state"
        inside = getattr(graph, attribute)
        setattr(graph, attribute, block_exit.previous)
        graph.block_exits.append(self)

        def undo() -> None:
            graph.block_exits.pop()
            setattr(graph, attribute, inside)

        graph.side_effects.on_rollback(undo)
        return ConstantVariable(None, graph, DummyTracker())


@VariableFactory.register(76)
def _block_exit_rule(value: Any, graph: "FunctionGraph", tracker: Tracker) -> VariableBase | None:
    from ...runtime import BlockExit

    return BlockExitVariable(value, graph, tracker) if type(value) is BlockExit else None


# -- ``@contextlib.contextmanager`` -------------------------------------------------------------------------------
# What ``contextlib.contextmanager(f)`` returns is a ``helper`` function (one code object for all of them)
# holding ``f`` in its closure; calling it makes a ``_GeneratorContextManager`` around the generator ``f(...)``.
# Its ``__enter__``/``__exit__`` are simulated here on the simulated generator, with the rules of contextlib.
_CONTEXTMANAGER_HELPER_CODE = contextlib.contextmanager(lambda: iter(())).__code__


def _user_error(error: BaseException) -> UserCodeError:
    return UserCodeError(f"user code raised {type(error).__name__}: {error}", original=error)


def _generator_manager(factory: VariableBase, func: VariableBase, args: list[VariableBase],
                       kwargs: dict[str, VariableBase]) -> "GeneratorContextManagerVariable":
    """``factory(*args, **kwargs)``, i.e. ``_GeneratorContextManager(func, args, kwargs)``: the generator is
    made (its arguments bound) now."""
    from .function import CO_GENERATOR, CO_GENERATOR_LIKE, FunctionVariableBase
    from .iterator import IteratorVariable

    if not isinstance(func, FunctionVariableBase) or func.code.co_flags & CO_GENERATOR_LIKE != CO_GENERATOR:
        raise BreakGraphError(f"a @contextmanager over {func!r} (not a generator function) runs natively")
    generator = func.call(args, kwargs)
    if not isinstance(generator, IteratorVariable):
        raise BreakGraphError(f"the generator of a @contextmanager ({func!r}) runs natively")
    return GeneratorContextManagerVariable(generator, func.graph, (factory, args, kwargs))


class ContextManagerDecoratorVariable(CallableVariable):
    """``contextlib.contextmanager`` itself: applied during simulation, it makes a simulated factory."""

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        if len(args) != 1 or kwargs:
            raise BreakGraphError("contextlib.contextmanager() with unexpected arguments runs natively")
        self.graph.add_guard(self)
        return ContextManagerFactoryVariable(args[0], self.graph)


@VariableFactory.register(62)
def _contextmanager_rule(value: Any, graph: "FunctionGraph", tracker: Tracker) -> VariableBase | None:
    return ContextManagerDecoratorVariable(value, graph, tracker) if value is contextlib.contextmanager else None


class ContextManagerFactoryVariable(VariableBase):
    """``contextlib.contextmanager(func)`` applied during simulation: calling it makes a simulated manager.
    Leaving the frame (returned, stored, alive at a graph break), it is made for real by the generated code."""

    is_mutable_container = True  # one function object per run of the generated code

    def __init__(self, func: VariableBase, graph: "FunctionGraph") -> None:
        super().__init__(graph, DummyTracker((func,)))
        self.func = func

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        return _generator_manager(self, self.func, args, kwargs)

    def children(self) -> list[VariableBase]:
        return [self.func]

    def _reconstruct_computed(self, codegen: "CodeGen") -> None:
        codegen.call_helper(contextlib.contextmanager, [self.func])

    def __repr__(self) -> str:
        return f"ContextManagerFactoryVariable({self.func!r})"


class ContextManagerHelperVariable(UserFunctionVariable):
    """A real function made by ``@contextlib.contextmanager`` (guarded by identity, which fixes the decorated
    function in its closure): calling it makes a simulated manager instead of running contextlib's code."""

    def __init__(self, value: types.FunctionType, graph: "FunctionGraph", tracker: Tracker) -> None:
        super().__init__(value, graph, tracker)
        self.needs_identity = True  # every helper shares contextlib's code: the decorated function is in the object

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        self.graph.add_guard(self)
        return _generator_manager(self, self.freevar_cells()["func"].load("func"), args, kwargs)


@VariableFactory.register(62)
def _contextmanager_helper_rule(value: Any, graph: "FunctionGraph", tracker: Tracker) -> VariableBase | None:
    if isinstance(value, types.FunctionType) and value.__code__ is _CONTEXTMANAGER_HELPER_CODE:
        return ContextManagerHelperVariable(value, graph, tracker)
    return None


class GeneratorContextManagerVariable(VariableBase):
    """A ``_GeneratorContextManager`` made during simulation, over a simulated generator. Until it is entered
    (its generator has not run), the generated code can make the real one the same way: ``made`` is the
    factory and the arguments of that call."""

    def __init__(self, generator: VariableBase, graph: "FunctionGraph",
                 made: tuple[VariableBase, list[VariableBase], dict[str, VariableBase]]) -> None:
        super().__init__(graph, DummyTracker((generator,)))
        self.generator = generator
        self.made = made
        self.entered = False
        from .iterator import IteratorVariable

        if isinstance(generator, IteratorVariable):
            generator.managed = True  # (its ``with`` closes it: not a generator left paused)

    def enter(self) -> tuple[VariableBase, VariableBase]:
        self.entered = True
        try:
            value = next(self.generator._source)  # type: ignore[attr-defined]
        except StopIteration:
            raise _user_error(RuntimeError("generator didn't yield")) from None
        return GeneratorContextExitVariable(self), value

    def children(self) -> list[VariableBase]:
        factory, args, kwargs = self.made
        return [factory, *args, *kwargs.values()]

    def _reconstruct_computed(self, codegen: "CodeGen") -> None:
        if self.entered:
            raise FallbackError("a @contextmanager manager entered during simulation cannot leave the frame (its "
                                "generator is simulated)")
        factory, args, kwargs = self.made
        codegen.push_callable(lambda: codegen.reconstruct(factory))
        for arg in [*args, *kwargs.values()]:
            codegen.reconstruct(arg)
        codegen.call(len(args) + len(kwargs), tuple(kwargs))

    def __repr__(self) -> str:
        return f"GeneratorContextManagerVariable({self.generator!r})"


class GeneratorContextExitVariable(VariableBase):
    """The ``__exit__`` of an entered `GeneratorContextManagerVariable` (what a ``with`` keeps on the stack).

    Exiting normally runs the generator to its end; exiting by an exception throws it into the generator at
    its ``yield``: if the generator ends, the exception is suppressed; if it re-raises it (or it leaves as the
    cause of a RuntimeError, PEP 479), ``__exit__`` returns False and the ``with`` re-raises it; another
    exception replaces it. A generator that yields again is contextlib's RuntimeError."""

    def __init__(self, manager: GeneratorContextManagerVariable) -> None:
        super().__init__(manager.graph, DummyTracker((manager,)))
        self.manager = manager
        # The offset of the translated frame's BEFORE_WITH that entered the block (set by that handler): a
        # graph break inside the block cannot rebuild this exit (its generator is simulated), so the frame is
        # translated again with that instruction run natively (transform.py).
        self.entered_at: int | None = None

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        from ..opcode_executor import ThrowIntoGenerator

        if kwargs or len(args) != 3:
            raise FallbackError("__exit__ of a @contextmanager manager called with unexpected arguments")
        source = self.manager.generator._source  # type: ignore[attr-defined]
        graph = self.graph
        kind = args[0]
        if isinstance(kind, ConstantVariable) and kind.value is None:
            try:
                next(source)
            except StopIteration:
                return ConstantVariable(False, graph, DummyTracker())
            raise _user_error(RuntimeError("generator didn't stop"))
        exc = args[1].get_py_value()
        if not isinstance(exc, BaseException):
            exc = args[0].get_py_value()()
        try:
            source.throw(ThrowIntoGenerator(exc))
        except StopIteration:
            return ConstantVariable(True, graph, DummyTracker())  # the generator ended: suppressed
        except UserCodeError as error:
            raised = error.original
            if raised is exc or (isinstance(raised, RuntimeError) and isinstance(exc, StopIteration)
                                 and raised.__cause__ is exc):
                return ConstantVariable(False, graph, DummyTracker())  # re-raised by the ``with``
            raise
        raise _user_error(RuntimeError("generator didn't stop after throw()"))

    def _reconstruct_computed(self, codegen: "CodeGen") -> None:
        raise FallbackError("a graph break inside the with block of a @contextmanager manager made in the frame "
                            "(its generator is simulated)")

    def __repr__(self) -> str:
        return f"GeneratorContextExitVariable({self.manager!r})"

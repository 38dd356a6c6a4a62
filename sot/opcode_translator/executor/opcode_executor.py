"""`OpcodeExecutor`: runs a frame's bytecode symbolically, one handler per opcode.

Handlers live in `handlers/`, grouped by family, and register themselves in `OPCODE_HANDLERS`. An opcode
without a handler makes the frame fall back, naming the opcode and the user line.
"""
from __future__ import annotations

import dis
import sys
import types
from typing import Any, Callable, Generator

from ...errors import BreakGraphError, FallbackError, SourceLocation, UserCodeError
from .. import pyversion
from .function_graph import FrameInfo, FunctionGraph
from .side_effects import ABSENT, DELETED
from .guard import GuardBuilder, argument_names
from .code_memo import per_code
from .liveness import cells_shared_across_breaks
from .tracker import (BuiltinTracker, ClosureTracker, DummyTracker, FrameCellTracker, GetItemTracker, GlobalTracker,
                      LocalTracker)
from .variables.base import VariableBase, VariableFactory
from .variables.function import CellVariable, FrameCellVariable, SourceOnlyVariable

Handler = Callable[["OpcodeExecutor", dis.Instruction], "Any"]
EXCEPT_HANDLER = -1  # 3.10: the block of a running exception handler (see OpcodeExecutor.blocks)
OPCODE_HANDLERS: dict[str, Handler] = {}


def handles(*opnames: str) -> Callable[[Handler], Handler]:
    """Register ``fn`` as the handler of ``opnames``."""

    def decorate(fn: Handler) -> Handler:
        for name in opnames:
            if name in OPCODE_HANDLERS:
                raise RuntimeError(f"two handlers for {name}")
            OPCODE_HANDLERS[name] = fn
        return fn

    return decorate


class GraphBreak(Exception):
    """Raised by the translated frame's executor: the instruction ``instr`` cannot be simulated.

    Carries the simulated state from just before that instruction, so the generated code can rebuild it,
    run the instruction natively and continue in a resume function.
    """

    def __init__(self, cause: FallbackError | None, instr: dis.Instruction, stack: list[VariableBase],
                 locals_: dict[str, VariableBase], cells: dict[str, VariableBase | None], kw_names: tuple,
                 n_statements: int, n_inputs: int, lineno: int | None) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.instr = instr
        self.stack = stack
        self.locals = locals_
        self.cells = cells
        self.kw_names = kw_names
        self.n_statements = n_statements
        self.n_inputs = n_inputs
        self.lineno = lineno
        # The frame's own cells (``co_cellvars``), set by the executor: the generated code gives its real cells
        # their contents (``cells``), and the resume function receives those cells as its closure.
        self.frame_cells: dict[str, CellVariable] = {}
        # Exceptions the simulation raised in the translated frame and its handlers still handle, outermost first
        self.in_flight: list[RaisedAt] = []


class RaisedAt:
    """Where the translated frame raised an exception its own handler received during simulation (3.11+):
    the instruction, the simulated state before it (as `run` saves it) and its line. A graph break while that
    exception is still in flight has the generated code raise it there natively instead (transform.py)."""

    def __init__(self, exc: BaseException, instr: dis.Instruction, saved: tuple, lineno: int | None) -> None:
        self.exc = exc
        self.instr = instr
        self.saved = saved
        self.lineno = lineno


class Return:
    """What a handler returns to end the simulation with a value."""

    def __init__(self, value: VariableBase) -> None:
        self.value = value


class Yield:
    """What ``YIELD_VALUE`` returns: the simulated generator pauses with a value (see `simulate_generator`)."""

    def __init__(self, value: VariableBase) -> None:
        self.value = value


MAX_INLINE_DEPTH = 32


class NameResolver:
    """How a simulated frame reads its globals and builtins, and where those values come from.

    The translated frame reads its own globals (`GlobalTracker`); an inlined function from another module
    reads ``fn.__globals__`` through the variable of the function itself.
    """

    def __init__(self, globals_: dict[str, Any], builtins_: dict[str, Any],
                 globals_var: VariableBase | None = None) -> None:
        self.globals = globals_
        self.builtins = builtins_
        self.globals_var = globals_var  # None: the translated frame's own globals
        self._module: types.ModuleType | None | object = ABSENT

    @property
    def module(self) -> types.ModuleType | None:
        """The module whose ``__dict__`` these globals are (None: a dict of no module, e.g. ``exec``'s)."""
        if self._module is ABSENT:
            module = sys.modules.get(self.globals.get("__name__"))  # type: ignore[arg-type]
            self._module = module if module is not None and getattr(module, "__dict__", None) is self.globals \
                else None
        return self._module  # type: ignore[return-value]

    def stored(self, name: str, graph: FunctionGraph) -> Any:
        """The global stored during the simulation (`DELETED`), or `ABSENT`: by the frame (``STORE_GLOBAL``)
        or, in another module's globals, by an inlined function of it or as the module's attribute."""
        if self.globals_var is None:
            return graph.side_effects.lookup_global(name)
        module = self.module
        return ABSENT if module is None else graph.side_effects.lookup_attr(module, name)

    def load(self, name: str, graph: FunctionGraph) -> VariableBase:
        stored = self.stored(name, graph)
        if stored is DELETED:
            raise UserCodeError(f"user code raised NameError: name {name!r} is not defined",
                                original=NameError(f"name {name!r} is not defined", name=name))
        if stored is not ABSENT:
            return stored
        if name in self.globals:
            value = self.globals[name]
            tracker = GlobalTracker(name) if self.globals_var is None else GetItemTracker(self.globals_var, name)
        elif name in self.builtins:
            value = self.builtins[name]
            tracker = BuiltinTracker(name, value, self.globals_var)
        else:
            self._guard_undefined(name, graph)
            raise UserCodeError(f"user code raised NameError: name {name!r} is not defined",
                                original=NameError(f"name {name!r} is not defined", name=name))
        return VariableFactory.from_value(value, graph, tracker)

    def _guard_undefined(self, name: str, graph: FunctionGraph) -> None:
        """``name`` is neither a global nor a builtin: the frame raises a NameError it may catch (``try: s =
        LATE`` / ``except NameError``). A global (or builtin) of that name defined before a later call must
        miss the entry, as `BuiltinTracker` makes a global shadowing a builtin miss it."""
        globals_var, globals_, builtins_ = self.globals_var, self.globals, self.builtins
        if globals_var is not None and globals_var.tracker.is_traceable():
            graph.add_guard(globals_var)

        def render(builder: GuardBuilder) -> str:
            if globals_var is None:
                where = builder.GLOBALS
            elif globals_var.tracker.is_traceable():
                where = builder.expr_of(globals_var)
            else:  # (a function made in the frame: the globals it was made with)
                where = builder.constant(globals_)
            return f"{name!r} not in {where} and {name!r} not in {builder.constant(builtins_)}"

        graph.add_namespace_guard(render)



# Kept per code: an inlined function is usually met many times in one translation (squeezenet's 26 convolution
# blocks run one ``forward``), and decoding its bytecode with `dis` costs 30-60 us each time.
@per_code
def decoded(code: types.CodeType) -> tuple[tuple[dis.Instruction, ...], dict[int, int], dict[int, int | None]]:
    """``code``'s instructions, the index of each offset among them and the line of each offset (read only)."""
    instructions = tuple(dis.get_instructions(code))
    return instructions, {instr.offset: i for i, instr in enumerate(instructions)}, pyversion.line_numbers(code)


class OpcodeExecutor:
    """The simulated state of one frame: stack, locals, cells, program counter.

    The translated frame gets one executor (`for_frame`); each inlined call gets a child executor sharing
    the same `FunctionGraph`, so its tensor ops land in the same SIR and its guards in the same entry.
    """

    def __init__(self, code: types.CodeType, graph: FunctionGraph, resolver: NameResolver,
                 locals_: dict[str, VariableBase], freevar_cells: dict[str, CellVariable],
                 parent: "OpcodeExecutor | None" = None) -> None:
        self.code = code
        self.graph = graph
        self.resolver = resolver
        self.parent = parent
        self.depth = 0 if parent is None else parent.depth + 1
        if parent is not None:
            graph.inlined_calls += 1
        if self.depth > MAX_INLINE_DEPTH:
            raise FallbackError(f"inlining deeper than {MAX_INLINE_DEPTH} calls")
        graph.inline_depth = max(graph.inline_depth, self.depth)
        self.instructions, self._index_of_offset, self._lines = decoded(code)
        self.stack: list[VariableBase] = []
        self.locals: dict[str, VariableBase] = dict(locals_)
        self.cells: dict[str, CellVariable] = dict(freevar_cells)
        # The translated frame's own cells (`new_cell`), also while a comprehension's save holds one on the stack
        self.frame_cells: dict[str, CellVariable] = {}
        if not pyversion.CELLS_MADE_BY_BYTECODE:
            # 3.10: the frame starts with its cells made (no MAKE_CELL); an argument that is also a cell
            # lives in its cell.
            for name in code.co_cellvars:
                self.cells[name] = self.new_cell(name, self.locals.pop(name, None))
        self.kw_names: tuple[str, ...] = ()
        # what ``locals()`` returned in this frame, updated by each later call (`pyversion.LOCALS_DICT_PER_FRAME`)
        self.locals_dict: VariableBase | None = None
        self.pc = 0
        self.lineno: int | None = code.co_firstlineno
        self.stop_at: int | None = None
        self.handling: list[BaseException] = []  # exceptions being handled (``except`` blocks entered)
        self.raised: dict[int, RaisedAt] = {}  # the translated frame's: exceptions it raised, by id (3.11+)
        # except*: the parts of exception groups its clauses split off, by id (see handlers/exceptions.py)
        self.except_star_parts: dict[int, BaseException] = {}
        # 3.10's block stack: (handler offset, or EXCEPT_HANDLER for a running handler; stack level)
        self.blocks: list[tuple[int, int]] = []
        self.generator_done = False  # (a simulated generator's frame: it returned or raised)
        # Generators this frame made for a ``for`` loop of its own (``for v in gen(t)``): the loop holds the only
        # reference, so CPython closes each when the loop lets go of it (a break, a return, an exception).
        self.loop_generators: list[Any] = []

    @classmethod
    def for_frame(cls, frame: FrameInfo, graph: FunctionGraph) -> "OpcodeExecutor":
        """The executor of the frame being translated: arguments come from the frame's locals."""
        locals_ = {name: VariableFactory.from_value(value, graph, LocalTracker(name))
                   for name, value in zip(argument_names(frame.code), frame.args)}
        cells = {}
        for index, name in enumerate(frame.code.co_freevars):
            cell = (frame.closure or ())[index]
            try:
                content = VariableFactory.from_value(cell.cell_contents, graph, ClosureTracker(index, name))
            except ValueError:
                content = None  # an empty cell: reading it fails like in eager code
            cells[name] = CellVariable(content, graph, DummyTracker(), external=True,
                                       source=FrameCellVariable(name, graph))
            cells[name].path = SourceOnlyVariable(cell, graph, FrameCellTracker(index, name))
            graph.known_cells[id(cell)] = (cell, cells[name])
        resolver = NameResolver(frame.globals, frame.builtins)
        graph.top_resolver = resolver
        executor = cls(frame.code, graph, resolver, locals_, cells)
        graph.executor = graph.current_executor = executor
        return executor

    def new_cell(self, name: str, content: VariableBase | None, made_again: bool = False) -> CellVariable:
        """The cell of this frame's cell variable ``name``; the translated frame's are marked as its own.
        ``made_again``: the cell a 3.12+ inlined comprehension makes at each run (`liveness.cells_made_again`),
        never the frame's own, even when the frame's cell of that name is shared (it is then on the stack,
        saved by the comprehension, until the comprehension puts it back)."""
        shared = self.parent is None and not made_again and name in cells_shared_across_breaks(self.code)
        cell = CellVariable(content, self.graph, DummyTracker(), frame_name=name if shared else None)
        if shared:
            self.frame_cells[name] = cell
        return cell

    def _graph_break(self, cause: FallbackError | None, instr: dis.Instruction, saved: tuple) -> GraphBreak:
        stack, locals_, cells, kw_names, n_statements, n_inputs = saved
        brk = GraphBreak(cause, instr, stack, locals_, cells, kw_names, n_statements, n_inputs, self.lineno)
        brk.frame_cells = dict(self.frame_cells)
        brk.in_flight = [self.raised[id(exc)] for exc in self.handling
                         if id(exc) in self.raised and self.raised[id(exc)].exc is exc]
        return brk

    # -- stack helpers -----------------------------------------------------------------------------------
    def push(self, var: VariableBase) -> None:
        self.stack.append(var)

    def pop(self) -> VariableBase:
        return self.stack.pop()

    def pop_n(self, n: int) -> list[VariableBase]:
        if n == 0:
            return []
        values = self.stack[-n:]
        del self.stack[-n:]
        return values

    def peek(self, depth: int = 1) -> VariableBase:
        return self.stack[-depth]

    def next_opname(self) -> str:
        """The instruction after the one being simulated (a call's result dropped by ``POP_TOP``, a manager
        entered by the ``with`` it was made for)."""
        return self.instructions[self.pc].opname

    def jump_to(self, offset: int) -> None:
        self.pc = self._index_of_offset[offset]

    def location(self) -> SourceLocation:
        return SourceLocation(self.code.co_filename, self.lineno)

    def _enter_handler(self, instr: dis.Instruction, exc: BaseException) -> bool:
        """Route ``exc``, raised by ``instr``, to this frame's handler as the exception table says."""
        if pyversion.HAS_BLOCK_STACK:
            return self._enter_block_handler(exc)
        for entry in handler_entries(self.code):
            if entry.start <= instr.offset < entry.end:
                from .handlers.exceptions import exception_variable

                del self.stack[entry.depth:]
                if entry.lasti:
                    self.push(VariableFactory.from_value(instr.offset, self.graph, DummyTracker()))
                self.push(exception_variable(self, exc))
                self.jump_to(entry.target)
                return True
        return False

    def _enter_block_handler(self, exc: BaseException) -> bool:
        """3.10: unwind the block stack to the innermost try/with block and enter its handler, as the
        interpreter does: leaving a running handler restores the exception it was handling; the handler
        starts with the previous exception info and the new one (traceback, value, type; no traceback
        objects in simulation) above the stack level of its block."""
        from .handlers.exceptions import exception_variable
        from .variables.basic import ConstantVariable

        graph = self.graph
        while self.blocks:
            handler, level = self.blocks.pop()
            del self.stack[level:]
            if handler == EXCEPT_HANDLER:
                if self.handling:
                    self.handling.pop()
                continue
            self.blocks.append((EXCEPT_HANDLER, len(self.stack)))
            previous = self.handling[-1] if self.handling else None
            for value in (None, previous, None if previous is None else type(previous)):
                self.push(ConstantVariable(None, graph, DummyTracker()) if value is None else
                          exception_variable(self, value) if isinstance(value, BaseException) else
                          VariableFactory.from_value(value, graph, DummyTracker()))
            self.handling.append(exc)
            self.push(ConstantVariable(None, graph, DummyTracker()))
            self.push(exception_variable(self, exc))
            self.push(VariableFactory.from_value(type(exc), graph, DummyTracker()))
            self.jump_to(handler)
            return True
        return False

    def chain_context(self, exc: BaseException) -> None:
        """A new raise of ``exc`` while an exception is handled (here or in a simulated caller) takes it as
        ``exc.__context__``, as the interpreter's ``_PyErr_SetObject`` does, cutting a cycle through ``exc``
        in the handled exception's own context chain first."""
        executor: OpcodeExecutor | None = self
        while executor is not None and not executor.handling:
            executor = executor.parent
        if executor is None:
            return
        handled = executor.handling[-1]
        if handled is exc:
            return
        link, seen = handled, set()
        while (context := link.__context__) is not None and id(link) not in seen:
            seen.add(id(link))
            if context is exc:
                link.__context__ = None
                break
            link = context
        exc.__context__ = handled

    def _close_dropped_generators(self, everything: bool = False) -> None:
        """Close the loop generators (`loop_generators`) this frame's stack no longer holds (``everything``:
        the frame is left), as CPython's refcounting does at that instruction."""
        dropped = [it for it in self.loop_generators if everything or not any(var is it for var in self.stack)]
        self.loop_generators = [it for it in self.loop_generators if not any(it is d for d in dropped)]
        for iterator in dropped:
            close_generator(iterator)

    def user_stack(self) -> list[SourceLocation]:
        """The simulated call stack, outermost first (for reports of breaks inside inlined calls)."""
        chain = []
        executor: OpcodeExecutor | None = self
        while executor is not None:
            chain.append(executor.location())
            executor = executor.parent
        return chain[::-1]

    # -- main loop ---------------------------------------------------------------------------------------
    def run(self) -> VariableBase:
        """Simulate until ``RETURN_VALUE``; returns the returned variable.

        In the translated frame (no parent) a `BreakGraphError` becomes a `GraphBreak` carrying the state
        before the failing instruction; in an inlined frame it propagates to the caller's call site.
        """
        top = self.parent is None
        graph = self.graph
        while True:
            instr = self.instructions[self.pc]
            if top and instr.offset == self.stop_at:
                # Asked to stop before this instruction (the head of a loop whose body breaks the graph).
                raise self._graph_break(None, instr, (list(self.stack), dict(self.locals),
                                                      {n: c.content for n, c in self.cells.items()}, self.kw_names,
                                                      len(graph.statements), len(graph.inputs)))
            self.pc += 1
            if top:
                graph.top_step += 1
            line = self._lines.get(instr.offset)
            if line is not None:
                self.lineno = line
            graph.location = self.location()
            graph.current_executor = self
            handler = OPCODE_HANDLERS.get(instr.opname)
            if handler is None:
                raise FallbackError(f"opcode {instr.opname} is not supported yet", self.location())
            if top:
                saved = (list(self.stack), dict(self.locals), {n: c.content for n, c in self.cells.items()},
                         self.kw_names, len(graph.statements), len(graph.inputs),
                         graph.side_effects.checkpoint())
            try:
                result = handler(self, instr)
                if self.loop_generators:
                    self._close_dropped_generators(everything=isinstance(result, Return))
            except BreakGraphError as exc:
                if exc.location is None:
                    exc.location = self.location()
                if not top:
                    raise
                graph.side_effects.rollback(saved[-1])  # (cell contents too: see CellVariable.store)
                raise self._graph_break(exc, instr, saved[:-1]) from None
            except UserCodeError as exc:
                if exc.location is None:
                    exc.location = self.location()
                if exc.original is not None and id(exc.original) not in graph.raised_exceptions:
                    graph.raised_exceptions[id(exc.original)] = (exc.original, graph.top_step)
                if not exc.chained:
                    exc.chained = True
                    if not exc.reraise and exc.original is not None:
                        self.chain_context(exc.original)
                if exc.original is None or not self._enter_handler(instr, exc.original):
                    if self.loop_generators:  # (the frame is left: its stack goes)
                        self._close_dropped_generators(everything=True)
                    raise
                if self.loop_generators:  # (unwound to the handler's stack depth)
                    self._close_dropped_generators()
                if top and id(exc.original) not in self.raised:
                    # (the first raise: a re-raise keeps the traceback it made; running from it redoes both)
                    self.raised[id(exc.original)] = RaisedAt(exc.original, instr, saved, self.lineno)
                continue
            except FallbackError as exc:
                if exc.location is None:
                    exc.location = self.location()
                raise
            if isinstance(result, Return):
                if top:
                    check_abandoned_generators(graph)
                return result.value
            if isinstance(result, Yield):
                return result  # type: ignore[return-value]  # only in a simulated generator


class ThrowIntoGenerator(Exception):
    """Thrown into `simulate_generator` (``generator.throw``): ``exc`` is raised in the simulated generator at
    the ``yield`` it is paused at, as ``generator.throw(exc)`` does in the interpreter."""

    def __init__(self, exc: BaseException) -> None:
        super().__init__(repr(exc))
        self.exc = exc


def simulate_generator(executor: OpcodeExecutor) -> "Generator[VariableBase, None, VariableBase]":
    """Drive a generator function's executor lazily: each ``next`` runs it up to its next ``yield``, at
    the same point of the consumer's program as in the real interpreter. ``throw(ThrowIntoGenerator(exc))``
    raises ``exc`` at the paused ``yield``: the generator's own handlers see it; unhandled, it leaves the
    generator as a `UserCodeError`."""
    graph = executor.graph
    while True:
        consumer = graph.current_executor
        try:
            result = executor.run()
        except UserCodeError as exc:
            executor.generator_done = True
            if isinstance(exc.original, StopIteration):  # PEP 479 (3.12+ compile it into the generator)
                error = RuntimeError("generator raised StopIteration")
                error.__cause__ = error.__context__ = exc.original
                replaced = UserCodeError(f"user code raised RuntimeError: {error}", exc.location, error)
                replaced.chained = True
                raise replaced from None
            raise
        except BaseException:
            executor.generator_done = True  # (a break or fallback inside it: never resumed)
            raise
        finally:
            graph.current_executor = consumer
        if not isinstance(result, Yield):
            executor.generator_done = True
            return result  # the generator's return value: what ``yield from`` it evaluates to
        try:
            yield result.value
        except ThrowIntoGenerator as thrown:
            paused_at = executor.instructions[executor.pc - 1]  # the YIELD_VALUE
            if not executor._enter_handler(paused_at, thrown.exc):
                executor.generator_done = True
                raise UserCodeError(f"user code raised {type(thrown.exc).__name__}: {thrown.exc}",
                                    executor.location(), thrown.exc, reraise=True) from None
            continue  # in the generator's handler
        executor.push(VariableFactory.from_value(None, graph, DummyTracker()))  # the value ``send`` gives


def suspended_in_cleanup(executor: OpcodeExecutor) -> bool:
    """Whether a simulated generator is paused at a ``yield`` inside a ``try``/``with`` block of its own, so
    that closing it (GeneratorExit thrown there) runs its code: an ``except``, a ``finally``, an ``__exit__``.
    The handler 3.12+ wrap every generator body in (StopIteration -> RuntimeError) does not count."""
    if executor.pc == 0 or executor.generator_done:
        return False  # (not started, or finished: ``close()`` runs nothing)
    if pyversion.HAS_BLOCK_STACK:
        return bool(executor.blocks)
    return _handled_in_frame(executor, executor.instructions[executor.pc - 1].offset)


def _handled_in_frame(executor: OpcodeExecutor, offset: int) -> bool:
    """Whether an exception at ``offset`` reaches a handler of the user's (3.11+ exception table). A ``yield
    from``'s own (3.12+ ``CLEANUP_THROW``, which hands a thrown exception on to the delegate: a simulated
    delegate is a generator of its own, `check_abandoned_generators`) counts as what covers it."""
    for entry in handler_entries(executor.code):
        if entry.start <= offset < entry.end:
            target = executor.instructions[executor._index_of_offset[entry.target]]
            if target.opname == "CLEANUP_THROW":
                return _handled_in_frame(executor, target.offset)
            return not (target.opname == "CALL_INTRINSIC_1" and target.argrepr == "INTRINSIC_STOPITERATION_ERROR")
    return False


def close_generator(iterator: Any) -> None:
    """``close()`` of a simulated generator (an `IteratorVariable` made by a generator function) whose last
    reference goes: as CPython does then, GeneratorExit is thrown at the ``yield`` it is paused at, its
    handlers and ``finally`` blocks simulated. What eager reports as unraisable instead of raising (another
    exception, a ``yield`` ignoring GeneratorExit) falls back."""
    iterator.closed = True
    if not suspended_in_cleanup(iterator.generator):
        return  # (GeneratorExit would leave it at once: nothing observable)
    try:
        iterator._source.throw(ThrowIntoGenerator(GeneratorExit()))
    except StopIteration:
        return
    except UserCodeError as exc:
        if isinstance(exc.original, GeneratorExit):
            return
        raise FallbackError(f"closing a generator raised {exc.original!r} (eager reports it as unraisable)") from None
    raise FallbackError("a generator yielded when closed (eager reports a RuntimeError as unraisable)")


def check_abandoned_generators(graph: FunctionGraph) -> None:
    """At the end of the translated frame (its return, or the graph break translated: a simulation given up
    for another, up to a loop head, proves nothing): a simulated generator left paused inside a ``try``/``with``
    block, other than a ``for`` loop's own (closed when dropped, `close_generator`), was closed by CPython when
    its last reference went, at a point the simulation does not know, running user code there: the frame
    falls back. (One whose steps a graph break rolled back is stepped again by the native instruction.)"""
    for iterator in graph.simulated_generators:
        if iterator.closed or iterator.managed or iterator.spent:
            continue
        if suspended_in_cleanup(iterator.generator):
            raise FallbackError(f"{iterator.description} is left paused inside a try/with block: its cleanup runs "
                                "when it is dropped, which is not simulated")


def handler_entries(code: types.CodeType) -> list:
    parse = getattr(dis, "_parse_exception_table", None)
    return parse(code) if parse is not None else []


def _register_all_handlers() -> None:
    from .handlers import (calls, containers, control_flow, exceptions, functions, intrinsics,  # noqa: F401
                           iteration, load_store, match_import, operators, stack, strings)


_register_all_handlers()

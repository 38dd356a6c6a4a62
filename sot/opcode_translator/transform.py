"""One translation: simulate a frame, compile its SIR, and generate the code that replaces it."""
from __future__ import annotations

import dataclasses
import dis
import sys
import types
from typing import Any

from bytecode import Instr, Label

from ..config import config
from ..errors import BreakGraphError, FallbackError
from ..log import enabled, log
from ..symbolic.compile import CompiledProgram, compile_graph, compiled_programs
from ..symbolic.gradient_parts import ProgramParts
from ..symbolic.made_differentiable import call_made_differentiable
from ..symbolic.replay import compile_replay
from ..symbolic.sir import StatementIR, Symbol
from . import pyversion
from .codegen import CodeGen
from .executor.function_graph import FrameInfo, FunctionGraph
from .executor.guard import Guard
from .executor.handlers.iteration import NativeLoopBreak
from .executor.handlers.operators import LEGACY_BINARY_OPCODES
from .executor.liveness import (cells_shared_across_breaks, deleted_names, in_frame_order, is_protected, live_in,
                                names_used_between)
from .executor.opcode_executor import GraphBreak, OpcodeExecutor, check_abandoned_generators
from .executor.variables.base import NullVariable, VariableBase
from .executor.tracker import DummyTracker
from .executor.variables.basic import TensorVariable
from .executor.variables.inplace import ViewReplay, plan_view_replay, written_back_tensors
from .executor.variables.iterator import IteratorVariable
from .native import NativePlan, ResumePath, can_call_from_native, runs_only_library_code, \
    trampolines_fit_any_call
from .loop import (RAISE, RETURN, build_loop_body_code, caught_around_loop, check_loop_supported, loop_exit,
                   shared_loop_cells)
from .resume import STACK_ARG, abstract_instruction, build_native_code, build_raising_code, build_resume_code
from .runtime import UNBOUND, leave_block, without_own_frame


@dataclasses.dataclass
class Translation:
    """The outcome for one frame: the cache entry to add and what led to it."""

    code: types.CodeType
    guard: Guard
    kind: str  # "compiled", "eager" (graph too small or empty), "break" (prefix + resume), "fallback"
    sir: StatementIR | None = None
    program: CompiledProgram | ProgramParts | None = None
    failure: FallbackError | None = None
    native: NativePlan | None = None  # when the entry may come to run the original code (native.py)
    # Python frames ``code`` may need on top of its own (the hook runs the frame as written when the
    # recursion limit leaves less): see `frames_needed`.
    frames: int = 0
    # ``code`` (the original) calls nothing the hook would translate: it runs with the callback suspended
    # (native.py; a `native` plan decides this itself)
    hook_free: bool = False

    @property
    def is_break(self) -> bool:
        return isinstance(self.failure, BreakGraphError)


# Frames a generated code needs to run a recorded graph: the program's runner (CompiledProgram.__call__ down
# to Paddle's run_program: 9 measured on 3.11) or an eager replay (fewer), with some slack.
RUNNER_FRAMES = 12


def frames_needed(graph: FunctionGraph, runs_a_graph: bool) -> int:
    """Frames the translation of ``graph`` needs on top of its own: as many as the original code pushes
    for the calls inlined into it (a recursion unrolled into one graph), or as the graph's runner needs.
    Near the recursion limit the original then runs instead, so RecursionError comes at the eager depth
    and never from sot's own frames."""
    return max(graph.inline_depth, RUNNER_FRAMES if runs_a_graph else 0)


def _computed_tensors(var: VariableBase, found: dict[Symbol, TensorVariable]) -> None:
    """Tensors produced by the graph that rebuilding ``var`` needs, in first-use order."""
    if isinstance(var, TensorVariable):
        if not var.tracker.is_traceable():
            found.setdefault(var.symbol, var)
    elif not var.tracker.is_traceable():
        for child in var.children():
            _computed_tensors(child, found)


class EagerProgram:
    """A recorded graph too small to be worth compiling: its statements replayed eagerly (`compile_replay`)."""

    def __init__(self, sir: StatementIR) -> None:
        self.sir = sir
        self._replay = compile_replay(sir)

    def __call__(self, inputs: list) -> list:
        if self.sir.made_differentiable:
            return call_made_differentiable(self._replay, inputs, self.sir.made_differentiable)
        return self._replay(inputs)

    def __repr__(self) -> str:
        return f"<EagerProgram {self.sir.name}: {len(self.sir)} statements>"


class ProgramPlan:
    """What runs the recorded graph for one translation: the SIR, its runner (None when there is nothing to run),
    and the views among its results made again natively from their bases (`plan_view_replay`)."""

    def __init__(self, sir: StatementIR, program: "CompiledProgram | ProgramParts | EagerProgram | None",
                 views: ViewReplay | None = None) -> None:
        self.sir = sir
        self.program = program
        self.views = views
        self._replay = None
        if views is not None:
            view_sir = StatementIR(f"{sir.name}_views", list(views.roots), list(views.statements), list(views.views),
                                   dict(sir.metas), grad_enabled=sir.grad_enabled)
            self._replay = compile_replay(view_sir)

    def emit_call(self, codegen: CodeGen, graph: FunctionGraph) -> None:
        """``__sot_outputs = program([inputs])``, the tensors changed in place written back, then the views:
        ``__sot_views = replay([bases])`` (a view of a written-back tensor is made from the caller's tensor once
        it holds its new value and gradient node, as eager's view of the changed tensor)."""
        graph.side_effects.emit_before_graph(codegen)
        if self.program is not None:
            codegen.call_program(self.program, [graph.inputs[s] for s in self.sir.inputs], self.sir.outputs)
        graph.side_effects.emit_tensor_write_backs(codegen)
        if self.views is not None:
            written_back = written_back_tensors(graph)
            bases = [_root_variable(graph, symbol, written_back) for symbol in self.views.roots]
            codegen.call_view_replay(self._replay, bases, self.views.views)


def _root_variable(graph: FunctionGraph, symbol: Symbol, written_back: dict[Symbol, TensorVariable]) -> \
        VariableBase:
    """The variable that loads a view's base in the generated code: an input, a tensor written back (the
    caller's own), or a program output."""
    if symbol in graph.inputs:
        return graph.inputs[symbol]
    if symbol in written_back:
        return written_back[symbol]
    return TensorVariable(graph.metas[symbol], graph, DummyTracker(), symbol=symbol)


def _program_for(graph: FunctionGraph, needed: list[VariableBase], force_compile: bool = False,
                 eager: bool = False) -> ProgramPlan:
    """The SIR producing the tensors ``needed`` requires, and what runs it (None when nothing to run):
    compiled when big enough (or ``force_compile``), else (or when ``eager``) replayed eagerly."""
    outputs: dict[Symbol, TensorVariable] = {}
    for var in needed:
        _computed_tensors(var, outputs)
    if not eager:
        views = plan_view_replay(graph, list(outputs))
        sir = graph.build_sir(_not_replayed(outputs, views))
        if not sir.statements or not sir.outputs:
            return ProgramPlan(sir, None, views)
        if force_compile or sir.op_count() >= config.min_graph_size:
            return ProgramPlan(sir, compile_graph(sir), views)
    # Replayed eagerly on the real tensors: views of inputs are views already, not those of written-back tensors.
    views = plan_view_replay(graph, list(outputs), written_back_only=True)
    full = graph.build_sir(_not_replayed(outputs, views))
    if not full.statements or not full.outputs:
        return ProgramPlan(full, None, views)
    return ProgramPlan(full, EagerProgram(full), views)


def _not_replayed(outputs: dict[Symbol, TensorVariable], views: ViewReplay | None) -> list[Symbol]:
    return [symbol for symbol in outputs if views is None or symbol not in views.views]


def _leave_blocks(codegen: CodeGen, graph: FunctionGraph) -> None:
    """Blocks entered before the frame (grad mode, AMP) whose end the simulation reached are left for real
    first: every statement carries its own mode, and what follows the block runs in the outer one."""
    for block_exit in graph.block_exits:
        codegen.call_helper(leave_block, [block_exit])
        codegen.emit("POP_TOP")


def _log_translation(code: types.CodeType, new_code: types.CodeType, sir: StatementIR | None) -> None:
    if enabled(2) and sir is not None and sir.statements:
        log(2, f"SIR of {code.co_name} ({code.co_filename}:{code.co_firstlineno}):\n{sir.dump()}")
    if enabled(3):
        import dis
        import io

        original, translated = io.StringIO(), io.StringIO()
        dis.dis(code, file=original)
        dis.dis(new_code, file=translated)
        log(3, f"original bytecode of {code.co_name}:\n{original.getvalue()}")
        log(3, f"translated bytecode of {code.co_name}:\n{translated.getvalue()}")


def translate_frame(frame: FrameInfo) -> Translation:
    """Simulate ``frame``; never raises for unsupported code (the result is then a fallback entry)."""
    # Read before anything of ours raises: the exception the user's code is handling around this call, if any.
    handled = sys.exc_info()[1]
    translation = _simulate_frame(frame)
    if translation.failure is not None:
        translation.failure.forget_frames(handled)  # the translation lives as long as its cache entry
    return translation


def _simulate_frame(frame: FrameInfo) -> Translation:
    code = frame.code
    graph = FunctionGraph(frame, code.co_name)
    try:
        executor = OpcodeExecutor.for_frame(frame, graph)
        try:
            result = executor.run()
        except GraphBreak as brk:
            loop = _breaking_loop(brk)
            if loop is not None and not _loop_in_running_handler(code, loop, brk):
                return _translate_loop(frame, loop, brk)
            if isinstance(brk.cause, NativeLoopBreak) and \
                    not _loop_in_running_handler(code, brk.cause.for_iter_offset, brk):
                return _translate_native_loop(frame, graph, brk)
            with_offset = _with_block_entered_in_simulation(brk)
            if with_offset is not None:
                return _translate_native_with(frame, with_offset, brk)
            if brk.in_flight:
                return _translate_raise_in_flight(frame, graph, brk)
            return _translate_break(frame, graph, brk)
        return _translate_return(frame, graph, executor, result)
    except FallbackError as exc:
        return Translation(code, graph.build_guard(), "fallback", failure=exc,
                           # (``psdb.fallback(recursive=True)``: its call tree runs eagerly too)
                           hook_free=getattr(exc, "recursive_code", None) is code)
    except RecursionError:
        raise  # out of stack: says nothing about the frame, whose fallback must not be cached (callback.py)
    except Exception as exc:  # a bug of ours must not break user code: fall back, loudly in strict mode
        if config.strict_mode:
            raise
        failure = FallbackError(f"internal error: {type(exc).__name__}: {exc}", graph.location)
        return Translation(code, graph.build_guard(), "fallback", failure=failure)


def _translate_return(frame: FrameInfo, graph: FunctionGraph, executor: OpcodeExecutor,
                      result: VariableBase) -> Translation:
    code = frame.code
    effects = graph.side_effects
    plan = _program_for(graph, [result, *effects.values()])
    sir, program = plan.sir, plan.program
    if not compiled_programs(program):
        # Nothing worth a compiled program: the original code runs natively, under the same guards.
        log(2, f"{code.co_name}: {sir.op_count()} ops (< min_graph_size={config.min_graph_size}), "
               "runs eagerly")
        return Translation(code, graph.build_guard(), "eager", sir=sir, hook_free=graph.inlined_calls == 0)
    codegen = CodeGen(code, executor.lineno)
    _leave_blocks(codegen, graph)
    codegen.final = True
    plan.emit_call(codegen, graph)
    if effects:
        remade = _spill_before_effects(codegen, [result])  # read before the effects change the paths to it
        effects.emit(codegen)
        for var in remade:
            codegen.spill(var)
    codegen.reconstruct(result)
    codegen.return_value()
    new_code = codegen.to_code()
    _log_translation(code, new_code, sir)
    native = NativePlan(code, new_code, compiled_programs(program)) if graph.inlined_calls == 0 else None
    return Translation(new_code, graph.build_guard(), "compiled", sir=sir, program=program, native=native,
                       frames=frames_needed(graph, True))


def _with_block_entered_in_simulation(brk: GraphBreak) -> int | None:
    """The `pyversion.WITH_ENTRY` offset of the outermost ``with`` block around the break whose manager exists
    only in the simulation (a ``@contextmanager`` generator paused at its ``yield``): its exit cannot be
    rebuilt."""
    for var in brk.stack:
        offset = getattr(var, "entered_at", None)
        if offset is not None:
            return offset
    return None


def _translate_native_with(frame: FrameInfo, before_with_offset: int, brk: GraphBreak) -> Translation:
    """A break inside a ``with`` block whose manager was simulated: translate again up to its
    ``BEFORE_WITH``, which then runs natively (the real manager is made, entered, and its exit passed on to
    the resume function, like a user class's), so the block is only left by real code."""
    code = frame.code
    graph = FunctionGraph(frame, code.co_name)
    executor = OpcodeExecutor.for_frame(frame, graph)
    executor.stop_at = before_with_offset
    try:
        executor.run()
    except GraphBreak as entry:
        if entry.cause is None:
            cause = brk.cause
            entry.cause = BreakGraphError(f"{cause.reason if cause else 'a break'}, inside a with block whose "
                                          "manager is entered natively", cause.location if cause else None)
        return _translate_break(frame, graph, entry)
    raise FallbackError("the with block was not reached again")


def _translate_raise_in_flight(frame: FrameInfo, graph: FunctionGraph, brk: GraphBreak) -> Translation:
    """A break inside a handler of an exception the simulation raised (``try: del obj.x`` then a break in
    ``finally``). Resuming in the handler would re-raise an exception that never passed through the user's
    frames (its traceback would point at the break, not at the raising line or the callee that raised it):
    instead, the generated code runs the frame up to the instruction that raised it, then the rest natively
    from that instruction (`build_native_code`), which raises it for real; the handler and what follows run
    as eager code (``sys.exc_info()`` and a bare ``raise`` in the handler too)."""
    check_abandoned_generators(graph)
    code = frame.code
    raised_at = brk.in_flight[0]  # the outermost: running from there raises the others again too
    offset = raised_at.instr.offset
    stack, locals_, cell_contents, kw_names, n_statements, n_inputs, effects_checkpoint = raised_at.saved
    if kw_names and pyversion.HAS_KW_NAMES:  # (3.11/3.12: enter at the KW_NAMES that names the call's keywords)
        instructions = list(dis.get_instructions(code))
        index = [i.offset for i in instructions].index(offset) - 1
        while index > 0 and instructions[index].opname == "PRECALL":  # (3.11)
            index -= 1
        if instructions[index].opname != "KW_NAMES":
            raise FallbackError("the call that raised does not follow its KW_NAMES")
        offset = instructions[index].offset
    graph.side_effects.rollback(effects_checkpoint)  # (the frame's cells too)
    graph.truncate(n_statements, n_inputs)
    # Locals by value; the frame's cells go in the closure, but a cell a 3.12+ inlined comprehension makes
    # again is passed by value too.
    values = {name: content for name, content in cell_contents.items()
              if name in code.co_cellvars and name not in brk.frame_cells and content is not None}
    values.update(locals_)
    live = in_frame_order(code, (n for n in live_in(code)[offset] if n in values))
    needed = [v for v in stack if not isinstance(v, NullVariable)] + [values[n] for n in live]
    needed += _cell_contents(brk)
    plan, codegen = _begin_break_code(graph, code, raised_at.lineno, brk, needed)
    sir, program = plan.sir, plan.program
    native = build_native_code(code, offset, tuple(isinstance(v, NullVariable) for v in stack), live)
    argc = _push_continuation(codegen, native, stack)
    for name in live:
        codegen.reconstruct(values[name])
    codegen.call(argc + len(live))
    codegen.return_value()
    new_code = codegen.to_code()
    _log_translation(code, new_code, sir)
    return Translation(new_code, graph.build_guard(), "break", sir=sir,
                       program=program if compiled_programs(program) else None, failure=brk.cause)


def _loop_in_running_handler(code: types.CodeType, for_iter_offset: int, brk: GraphBreak) -> bool:
    """Whether the loop runs inside the handler of an exception the simulation raised before the loop: its
    body function would not run with that exception handled (``sys.exc_info()``, a bare ``raise``), so the
    frame runs natively from the raise instead (`_translate_raise_in_flight`)."""
    if not brk.in_flight:
        return False
    raised_at = brk.in_flight[0].instr.offset
    return not for_iter_offset < raised_at < loop_exit(code, for_iter_offset)


def _breaking_loop(brk: GraphBreak) -> int | None:
    """The ``FOR_ITER`` offset of the outermost loop of the translated frame the break happened in."""
    for var in brk.stack:
        if isinstance(var, IteratorVariable) and var.loop_offset is not None:
            return var.loop_offset
    return None


def _translate_native_loop(frame: FrameInfo, graph: FunctionGraph, brk: GraphBreak) -> Translation:
    """A ``for`` loop over an iterator the simulation cannot step (`NativeLoopBreak`): the loop runs natively
    around a translated body function (`_translate_loop`). A loop that cannot run that way (`check_loop_supported`)
    breaks at its ``GET_ITER`` instead: the iterator is made natively and the rest of the frame, the loop with
    it, continues in a resume function."""
    try:
        check_loop_supported(frame.code, brk.cause.for_iter_offset)
    except FallbackError:
        return _translate_break(frame, graph, brk)
    return _translate_loop(frame, brk.cause.for_iter_offset, brk)


def _translate_loop(frame: FrameInfo, for_iter_offset: int, brk: GraphBreak) -> Translation:
    """A break inside a ``for`` body: translate again up to the loop, then run the loop natively around a
    translated body function (loop.py), and continue after it in a resume function."""
    code = frame.code
    how = check_loop_supported(code, for_iter_offset, brk.cause)
    graph = FunctionGraph(frame, code.co_name)
    executor = OpcodeExecutor.for_frame(frame, graph)
    executor.stop_at = how.setup
    try:
        executor.run()
    except GraphBreak as entry:
        if entry.cause is not None:  # a break before the loop: handled as an ordinary break
            return _translate_break(frame, graph, entry)
        try:
            return _emit_loop(frame, graph, entry, for_iter_offset, brk, how)
        except FallbackError as exc:
            if exc.location is None and brk.cause is not None:
                exc.location = brk.cause.location  # (reported at the break that made the loop run natively)
            raise
    raise FallbackError("the loop was not reached again")


def _loop_operands(code: types.CodeType, entry: GraphBreak, how: pyversion.LoopEntry,
                   live_at: dict[int, frozenset[str]]) -> tuple[VariableBase, list[VariableBase]]:
    """What the loop iterates over and the values under its iterator at its head, bottom first, from the
    state right before the instruction that sets it up (`pyversion.LoopEntry`). A variable a 3.12+ inlined
    comprehension saved that nothing reads after it is a NULL (as if unbound: it is never seen)."""
    stack = list(entry.stack)
    if how.kind == "statement":  # ``GET_ITER``: the iterable on top
        return stack[-1], stack[:-1]
    # ``SWAP 2``: [..., saved variables, iterator, empty result]
    iterator, result = stack[-2], stack[-1]
    below = stack[:-2]
    first_saved = len(below) - len(how.saved)
    for position, name in enumerate(how.saved_on_stack, first_saved):
        if name not in live_at[how.get_iter]:
            below[position] = NullVariable(iterator.graph)
    return iterator, below + [result]


def _emit_loop(frame: FrameInfo, graph: FunctionGraph, entry: GraphBreak, for_iter_offset: int,
               brk: GraphBreak, how: pyversion.LoopEntry) -> Translation:
    check_abandoned_generators(graph)
    code = frame.code
    live_at = live_in(code)
    iterable, below = _loop_operands(code, entry, how, live_at)
    below_values = [var for var in below if not isinstance(var, NullVariable)]
    # The body function's closure holds the frame's free variables (e.g. the ``__class__`` that 3.12's
    # ``super()`` reads) and cells, and the cells a 3.12+ inlined comprehension makes for this loop: none is
    # passed or returned as a local.
    loop_cell_names = shared_loop_cells(code, how, for_iter_offset)
    in_closure = set(code.co_freevars) | cells_shared_across_breaks(code) | set(loop_cell_names)
    live = in_frame_order(code, (name for name in live_at[for_iter_offset] if name not in in_closure))
    if any(name in code.co_cellvars for name in live):  # (a cell another comprehension makes: not at the loop)
        raise FallbackError("a graph break in a loop whose body uses a variable captured by a closure")
    exit_offset = loop_exit(code, for_iter_offset)
    # Locals the loop may hand back unbound: those not bound before it, and those the code deletes (``del y``
    # in the body: anywhere in the code, as 3.12+ places an ``except ... as e`` handler's ``del e`` after the
    # function's last line). They are carried as `runtime.UNBOUND` (read out of ``locals()`` in the body).
    unbound = tuple(name for name in live if name not in entry.locals or name in deleted_names(code))
    # (one the body never names is handed through it as the `runtime.UNBOUND` it received: only after the
    # loop, where it is read, is it unbound again)
    in_body = names_used_between(code, for_iter_offset, exit_offset) if unbound else frozenset()
    unbound_in_body = tuple(name for name in unbound if name in in_body)
    live_exit = tuple(n for n in live if n in live_at[exit_offset])
    values = [entry.locals.get(name) for name in live]
    plan, codegen = _begin_break_code(graph, code, entry.lineno, entry,
                                      [iterable, *below_values, *(v for v in values if v is not None),
                                       *_cell_contents(entry)])
    sir, program = plan.sir, plan.program
    for name, var in zip(live, values):  # the loop's state lives in the frame's own locals from here on
        if var is None:
            codegen.load_const(UNBOUND)  # (not bound yet: the functions receiving it unbind it)
        else:
            codegen.reconstruct(var)
        codegen.store_fast(name)
    head, after, stop, returned, done = Label(), Label(), Label(), Label(), Label()
    item, flag, value, state = codegen.new_temp(), codegen.new_temp(), codegen.new_temp(), codegen.new_temp()

    def restore_state() -> None:
        codegen.emit("LOAD_FAST", state)
        codegen.emit("UNPACK_SEQUENCE", len(live))
        for name in live:
            codegen.store_fast(name)

    def emit_flag_is(constant: int, label: Label) -> None:
        codegen.emit("LOAD_FAST", flag)
        codegen.load_const(constant)
        codegen.emit("IS_OP", 0)
        pyversion.emit_pop_jump_forward_if(codegen.emit, True, label)

    # One new cell per comprehension variable a closure captures, for this run of the comprehension (as its
    # MAKE_CELL makes), shared by every item's body function.
    loop_cells = {name: codegen.new_temp() for name in loop_cell_names}
    for temp in loop_cells.values():
        codegen.load_callable_const(types.CellType)
        codegen.call(0)
        codegen.store_fast(temp)
    # A loop inside try/with blocks: an exception the iterator raises, or one the body hands back (RAISE), is
    # raised again in the original at the loop head, where the user's handlers catch it (loop.py).
    protected = caught_around_loop(code, for_iter_offset)
    handler, raised = Label(), Label()
    region = pyversion.begin_exception_region(codegen.add, handler, codegen.lineno) if protected else None
    codegen.reconstruct(iterable)
    codegen.emit("GET_ITER")
    if how.kind == "statement" and not any(var is iterable or getattr(var, "is_mutable_container", False)
                                           for var in below):
        codegen.release(iterable)  # (only the iterator holds it now, as eagerly)
    codegen.add(head)
    codegen.emit("FOR_ITER", after)
    codegen.store_fast(item)
    # A comprehension runs natively between compiled code, on every version (3.10/3.11 call its function,
    # whose frame the hook runs natively: callback._is_comprehension_body): its body function too.
    layout = tuple(isinstance(var, NullVariable) for var in below)
    body = build_loop_body_code(code, for_iter_offset, live, layout, native=how.kind != "statement",
                                loop_cells=loop_cell_names, maybe_unbound=unbound_in_body)
    codegen.push_callable(lambda: codegen.make_function(body, loop_cells))
    for var in below_values:  # (the same objects at every item: a comprehension's result is appended to)
        codegen.reconstruct(var)
    codegen.load_const(None)
    codegen.emit("LOAD_FAST", item)
    for name in live:
        codegen.emit("LOAD_FAST", name)
    codegen.call(len(below_values) + 2 + len(live))
    codegen.emit("UNPACK_SEQUENCE", 3)
    codegen.store_fast(flag)
    codegen.store_fast(value)
    codegen.store_fast(state)
    codegen.emit("LOAD_FAST", flag)
    pyversion.emit_pop_jump_forward_if(codegen.emit, True, stop)
    restore_state()
    pyversion.emit_jump(codegen.emit, head, backward=True)
    if region is not None:
        pyversion.end_exception_region(codegen.add, region, codegen.lineno, first=True)
    codegen.add(stop)
    if region is not None:
        pyversion.end_exception_region(codegen.add, region, codegen.lineno, first=False)
    codegen.emit("POP_TOP")  # the iterator
    emit_flag_is(RETURN, returned)
    if protected:
        emit_flag_is(RAISE, raised)
    restore_state()  # ``break``
    pyversion.emit_jump(codegen.emit, done)
    codegen.add(after)
    if region is not None:
        pyversion.end_exception_region(codegen.add, region, codegen.lineno, first=False)
    pyversion.emit_for_iter_exit(codegen.emit)  # (3.12+: the END_FOR an exhausted FOR_ITER skips)
    codegen.add(done)
    maybe_unbound_after = tuple(name for name in unbound if name in live_exit)
    codegen.push_callable(lambda: codegen.make_function(build_resume_code(code, exit_offset, layout, live_exit,
                                                                          maybe_unbound_after)))
    for var in below_values:
        codegen.reconstruct(var)
    for name in live_exit:
        codegen.emit("LOAD_FAST", name)
    codegen.call(len(below_values) + len(live_exit))
    codegen.return_value()
    codegen.add(returned)
    codegen.emit("LOAD_FAST", value)
    codegen.return_value()
    if protected:
        raise_at_head = _RaiseAtLoopHead(codegen, code, for_iter_offset, below, live, unbound)
        codegen.add(raised)
        restore_state()
        raise_at_head.emit(lambda: _emit_load_and_delete(codegen, value))
        codegen.add(handler)
        exception = codegen.new_temp()
        pyversion.emit_handler_entry(codegen.emit, lambda: codegen.store_fast(exception))
        raise_at_head.emit(lambda: _emit_without_own_frame(codegen, exception))
    new_code = codegen.to_code()
    _log_translation(code, new_code, sir)
    return Translation(new_code, graph.build_guard(), "break", sir=sir,
                       program=program if compiled_programs(program) else None, failure=brk.cause,
                       frames=frames_needed(graph, program is not None))


@dataclasses.dataclass
class _RaiseAtLoopHead:
    """Generated code calling the original entered at a loop head by raising an exception there
    (`build_raising_code`), with the frame's locals: the exception a protected loop's body handed back, or one
    its iterator raised."""

    codegen: CodeGen
    code: types.CodeType
    for_iter_offset: int
    below: list[VariableBase]
    live: tuple[str, ...]
    maybe_unbound: tuple[str, ...]

    def emit(self, push_exception: Any) -> None:
        codegen = self.codegen
        layout = tuple(isinstance(var, NullVariable) for var in self.below) + (True,)  # (the iterator: unread)
        raising = build_raising_code(self.code, self.for_iter_offset, layout, self.live, self.maybe_unbound)
        argc = _push_continuation(codegen, raising, self.below)
        for name in self.live:
            codegen.emit("LOAD_FAST", name)
        push_exception()
        codegen.call(argc + len(self.live) + 1)
        codegen.return_value()


def _emit_without_own_frame(codegen: CodeGen, exception: str) -> None:
    """Push the exception in temporary ``exception`` minus this frame's traceback entry (`without_own_frame`)."""
    codegen.load_callable_const(without_own_frame)
    _emit_load_and_delete(codegen, exception)
    codegen.call(1)


def _emit_load_and_delete(codegen: CodeGen, exception: str) -> None:
    """Push the exception in temporary ``exception`` and unbind the temporary: a frame holding an exception
    whose traceback holds the frame is a reference cycle, which would keep the frame's locals (tensors, a
    generator not closed yet) alive until a garbage collection (``except ... as e`` deletes ``e`` for that)."""
    codegen.emit("LOAD_FAST", exception)
    codegen.emit("DELETE_FAST", exception)


def _cell_contents(brk: GraphBreak) -> list[VariableBase]:
    """What the translated frame's own cells hold at the break (their tensors must be graph outputs)."""
    return [cell.content for cell in brk.frame_cells.values() if cell.content is not None]


def _push_continuation(codegen: CodeGen, continuation: types.CodeType, stack: list[VariableBase]) -> int:
    """Push the function of ``continuation`` (a resume, native or raising code) and the stack values it takes
    first (NULLs are not passed); returns how many were pushed."""
    codegen.push_callable(lambda: codegen.make_function(continuation))
    argc = 0
    for var in stack:
        if not isinstance(var, NullVariable):
            codegen.reconstruct(var)
            argc += 1
    return argc


def _begin_break_code(graph: FunctionGraph, code: types.CodeType, lineno: int, brk: GraphBreak,
                      needed: list[VariableBase]) -> tuple[ProgramPlan, CodeGen]:
    """The start every graph break's generated code shares: the program of what came before (computing
    ``needed`` and the side effects' values), each of ``needed`` read once into a temporary before anything
    changes the paths to it, the frame's cells given their simulated contents, then the side effects."""
    effects = graph.side_effects
    plan = _program_for(graph, needed + effects.values(),
                        eager=isinstance(brk.cause, BreakGraphError) and brk.cause.eager_before)
    codegen = CodeGen(code, lineno)
    _leave_blocks(codegen, graph)
    plan.emit_call(codegen, graph)
    remade = _spill_before_effects(codegen, needed)
    _sync_frame_cells(codegen, brk)
    if effects:
        effects.emit(codegen)  # (before the native instruction, which may observe them)
    for var in remade:
        codegen.spill(var)
    return plan, codegen


def _spill_before_effects(codegen: CodeGen, needed: list[VariableBase]) -> list[VariableBase]:
    """Read each of ``needed`` into a temporary, except the iterators to be made again on the content the side
    effects give their containers (`IteratorVariable.rebuild_after_effects`) and the values built in the frame
    that hold one (a returned tuple): only their parts are read now; they are returned, to be spilled after the
    effects."""
    remade: list[VariableBase] = []
    for var in needed:
        if _holds_iterator_made_after_effects(var):
            _spill_before_effects(codegen, var.children())
            remade.append(var)
        else:
            codegen.spill(var)
    return remade


def _holds_iterator_made_after_effects(var: VariableBase, seen: set[int] | None = None) -> bool:
    seen = set() if seen is None else seen
    if id(var) in seen:
        return False
    seen.add(id(var))
    if isinstance(var, IteratorVariable):
        return var.rebuild_after_effects()
    return not var.tracker.is_traceable() and any(_holds_iterator_made_after_effects(child, seen)
                                                  for child in var.children())


def _sync_frame_cells(codegen: CodeGen, brk: GraphBreak) -> None:
    """Give the generated code's cells (it keeps the original's) the simulated contents, before anything
    native runs: the instruction run at the break, the closures rebuilt for it and the resume function
    (made with these cells as its closure) all see the one cell per variable eager code has."""
    for cell in brk.frame_cells.values():
        codegen.reconstruct(cell.rebuilt())
        codegen.emit("POP_TOP")


# How many stack values the instructions that may break consume, and how many they produce.
def _operand_counts(instr: dis.Instruction) -> tuple[int, int]:
    name = instr.opname
    n_call = pyversion.call_operand_count(instr)
    if n_call is not None:
        return n_call, 1
    if name == pyversion.WITH_ENTRY:  # the manager -> its __exit__ and what __enter__ returned
        return 1, 2
    if name in ("UNARY_NOT", "UNARY_NEGATIVE", "UNARY_INVERT", "UNARY_POSITIVE", "GET_ITER", "TO_BOOL",
                "CALL_INTRINSIC_1", "FORMAT_SIMPLE", "CONVERT_VALUE"):
        return 1, 1
    if name in ("BINARY_OP", "COMPARE_OP", "CONTAINS_OP", "IS_OP", "BINARY_SUBSCR", "FORMAT_WITH_SPEC") \
            or name in LEGACY_BINARY_OPCODES:
        return 2, 1
    if name == "BUILD_STRING":
        return instr.arg, 1
    if name == "BINARY_SLICE":
        return 3, 1
    if name == "STORE_SLICE":
        return 4, 0
    if name == "LOAD_SUPER_ATTR":  # a method load runs as a plain one (_translate_break)
        return 3, 1
    if name == "LOAD_ATTR" and not pyversion.pushes_null(instr):  # e.g. a dynamic ``x.shape``
        return 1, 1
    if name == "STORE_SUBSCR":
        return 3, 0
    if name in ("STORE_ATTR", "DELETE_SUBSCR"):
        return 2, 0
    if name == "DELETE_ATTR":
        return 1, 0
    if name == "FORMAT_VALUE":
        return 1 + bool(instr.arg & 0x04), 1
    if name.startswith("POP_JUMP") or name in ("JUMP_IF_TRUE_OR_POP", "JUMP_IF_FALSE_OR_POP"):
        return 1, 0
    raise FallbackError(f"cannot break the graph at {name}")


def _translate_break(frame: FrameInfo, graph: FunctionGraph, brk: GraphBreak) -> Translation:
    """Compile what came before ``brk.instr``, run it natively, continue in resume function(s)."""
    check_abandoned_generators(graph)
    code = frame.code
    instr = brk.instr
    graph.truncate(brk.n_statements, brk.n_inputs)
    n_in, n_out = _operand_counts(instr)
    base, operands = brk.stack[:len(brk.stack) - n_in], brk.stack[len(brk.stack) - n_in:]
    instructions = [i for i in dis.get_instructions(code)]
    next_offset = instructions[[i.offset for i in instructions].index(instr.offset) + 1].offset
    # What the instruction leaves on the stack, bottom first: True for a NULL (not a value)
    produced_layout = (False,) * n_out
    if instr.opname == "LOAD_SUPER_ATTR" and pyversion.pushes_null(instr):
        # The method load runs as a plain load (a NULL cannot be passed on); the resume function re-creates
        # the NULL next to the bound method, where the running version's call expects it.
        produced_layout = (True, False) if pyversion.NULL_BELOW_CALLABLE else (False, True)
    # (offset, what the instruction leaves for that path)
    paths = [(next_offset, produced_layout)]
    if instr.opname.startswith("POP_JUMP") or instr.opname in ("JUMP_IF_TRUE_OR_POP", "JUMP_IF_FALSE_OR_POP"):
        paths.append((instr.argval, (False,) if instr.opname.endswith("_OR_POP") else ()))
    live_at = live_in(code)

    def value_of(name: str) -> VariableBase | None:
        """A live local passed to the resume function (the frame's cells go in its closure instead)."""
        if name in brk.frame_cells:
            return None
        if name in brk.locals:
            return brk.locals[name]
        if name in code.co_cellvars:  # (a cell a 3.12+ inlined comprehension makes again: its value)
            return brk.cells.get(name)
        return None

    lives = [in_frame_order(code, (n for n in live_at[offset] if value_of(n) is not None)) for offset, _ in paths]
    needed = [v for v in base if not isinstance(v, NullVariable)] + list(operands)
    needed += [value_of(n) for live in lives for n in live]
    needed += _cell_contents(brk)
    # Every value any path needs is read once (`_begin_break_code`): before the effects and the native
    # instruction change what the paths to them lead to, and on a line all later paths (the jump target, the
    # exception handler) start from, so a container built here is one object that each of them sees.
    plan, codegen = _begin_break_code(graph, code, brk.lineno, brk, needed)
    sir, program = plan.sir, plan.program
    # An instruction inside a try/with block runs natively here, outside the original's exception table: if
    # it raises, the exception goes to a function entering the original at that instruction by raising it
    # there, so the user's handlers (except, finally, __exit__) run as in eager code.
    protected = is_protected(code, instr.offset)
    handler = Label()
    guarded_region = pyversion.begin_exception_region(codegen.add, handler, codegen.lineno) if protected else None
    for var in operands:
        codegen.reconstruct(var)
    label = Label()
    native = abstract_instruction(code, instr.offset)
    emitted_from = len(codegen.instructions)
    if instr.opname == "CALL" and pyversion.HAS_KW_NAMES:
        # (3.11/3.12: the keyword names were set by a KW_NAMES already simulated; 3.10 and 3.13 keep them
        # on the stack, among the operands)
        codegen.call(instr.arg, brk.kw_names)
    elif len(paths) > 1:
        pyversion.emit_truth_jump_prefix(codegen.emit, instr.opname)
        # The label is always after this instruction: a backward jump (a loop condition) becomes forward.
        codegen.add(Instr(native.name.replace("BACKWARD", "FORWARD"), label, lineno=codegen.lineno))
    elif instr.opname == pyversion.WITH_ENTRY:
        pyversion.emit_native_with_entry(codegen)
    elif instr.opname == "LOAD_SUPER_ATTR":
        codegen.add(Instr(native.name, pyversion.plain_attribute_arg(native.arg), lineno=codegen.lineno))
    else:
        codegen.add(Instr(native.name, native.arg, lineno=codegen.lineno))
    if native.location is not None and native.location.lineno == codegen.lineno:
        # (the instruction's columns too: a traceback through it underlines the expression, as eager's)
        for emitted in codegen.instructions[emitted_from:]:
            if isinstance(emitted, Instr):
                emitted.location = native.location
    resume_paths: list[ResumePath] = []
    for index, ((offset, produced_layout), live) in enumerate(zip(paths, lives)):
        if index == 1:
            codegen.add(label)
        if guarded_region is not None:
            pyversion.end_exception_region(codegen.add, guarded_region, codegen.lineno, first=index == 0)
        results = [codegen.new_temp() for is_null in produced_layout if not is_null]
        for temp in reversed(results):
            codegen.store_fast(temp)
        layout = tuple(isinstance(v, NullVariable) for v in base) + produced_layout
        resume = build_resume_code(code, offset, layout, live)
        resume_paths.append(ResumePath(resume, index == 1, layout.count(False), live,
                                       # (also where the path continues inside a block the instruction
                                       # began: 3.10's SETUP_WITH pushes it, natively too, so the resume
                                       # function's exception would reach the with's handler twice)
                                       can_call_from_native(code, resume, layout,
                                                            protected or is_protected(code, offset)),
                                       _unpinned_arguments(graph, base, len(results), live, value_of)))
        argc = _push_continuation(codegen, resume, base)
        for temp in results:
            codegen.emit("LOAD_FAST", temp)
        for name in live:
            codegen.reconstruct(value_of(name))
        codegen.call(argc + len(results) + len(live))
        codegen.return_value()
    if protected:
        _emit_reraise_in_handler(codegen, handler, code, instr.offset, base, n_in, value_of,
                                 in_frame_order(code, (n for n in live_at[instr.offset] if value_of(n) is not None)))
    new_code = codegen.to_code()
    _log_translation(code, new_code, sir)
    fits_any_call = trampolines_fit_any_call(code, instr.offset, len(base),
                                             [(offset, live) for (offset, _), live in zip(paths, lives)])
    native = NativePlan(code, new_code, compiled_programs(program), instr.offset, tuple(resume_paths),
                        break_runs_user_code=not runs_only_library_code(operands),
                        trampolines_fit_any_call=fits_any_call) if graph.inlined_calls == 0 else None
    return Translation(new_code, graph.build_guard(), "break", sir=sir,
                       program=program if compiled_programs(program) else None, failure=brk.cause,
                       native=native, frames=frames_needed(graph, program is not None))


def _unpinned_arguments(graph: FunctionGraph, base: list[VariableBase], n_results: int, live: tuple[str, ...],
                        value_of: Any) -> tuple[str, ...]:
    """The arguments of a resume function (the stack below the breaking instruction's operands, its
    ``n_results`` results, the ``live`` locals) whose values this translation's guard does not determine."""
    below = [var for var in base if not isinstance(var, NullVariable)]
    return tuple([STACK_ARG.format(i) for i, var in enumerate(below) if not graph.pins(var)]
                 + [STACK_ARG.format(len(below) + k) for k in range(n_results)]
                 + [name for name in live if not graph.pins(value_of(name))])


def _emit_reraise_in_handler(codegen: CodeGen, handler: Label, code: types.CodeType, offset: int,
                             base: list[VariableBase], n_operands: int, value_of: Any,
                             live: tuple[str, ...]) -> None:
    """The handler of the region around a natively run instruction: call the raising entry of the original
    at ``offset`` (`build_raising_code`) with the stack below the instruction's operands, the live locals
    and the exception, and return what it returns (the user's handler may recover)."""
    codegen.add(handler)
    exception = codegen.new_temp()
    pyversion.emit_handler_entry(codegen.emit, lambda: codegen.store_fast(exception))
    # The operands are never read again (the raise unwinds the stack): NULLs stand for them.
    layout = tuple(isinstance(var, NullVariable) for var in base) + (True,) * n_operands
    raising = build_raising_code(code, offset, layout, live)
    argc = _push_continuation(codegen, raising, base)
    for name in live:
        codegen.reconstruct(value_of(name))
    _emit_without_own_frame(codegen, exception)
    codegen.call(argc + len(live) + 1)
    codegen.return_value()


def describe_code(code: types.CodeType) -> str:
    return f"{pyversion.code_qualname(code)} " \
           f"({code.co_filename}:{code.co_firstlineno})"


__all__ = ["Translation", "translate_frame", "describe_code"]

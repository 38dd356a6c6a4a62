"""Exceptions: ``raise``, ``try``/``except`` and the exceptional exit of ``with`` blocks.

An exception raised by user code during simulation (`UserCodeError` carrying the real exception) is routed
through the exception table of the frame it was raised in, exactly as the interpreter would: to a handler
of that frame, or up to the caller's call site. When no simulated frame handles it, the translated frame
runs eagerly and raises it for real, with the user's own traceback (never an internal error).
"""
from __future__ import annotations

import dis
import types
from typing import TYPE_CHECKING

from ....errors import FallbackError, UserCodeError
from ... import pyversion
from ..opcode_executor import EXCEPT_HANDLER, OpcodeExecutor, handles
from ..tracker import ConstTracker, DummyTracker
from ..variables.base import VariableBase, VariableFactory
from ..variables.basic import ConstantVariable, ObjectVariable

if TYPE_CHECKING:
    from ...codegen import CodeGen
    from ..function_graph import FunctionGraph


def exception_variable(executor: OpcodeExecutor, exc: BaseException) -> VariableBase:
    return ObjectVariable(exc, executor.graph, DummyTracker())


def _exception_of(var: VariableBase) -> BaseException:
    value = var.get_py_value()
    if isinstance(value, type) and issubclass(value, BaseException):
        value = value()
    if not isinstance(value, BaseException):
        raise UserCodeError("user code raised TypeError: exceptions must derive from BaseException",
                            original=TypeError("exceptions must derive from BaseException"))
    return value


class UnknownTracebackVariable(VariableBase):
    """The traceback ``__exit__`` receives with an exception raised during simulation: the real one exists only
    when the frame runs natively (eager passes it, never None). Handing it on is fine; reading it in any way,
    ``tb is None`` included, makes the frame fall back (`VariableBase.get_py_value`). A native ``__exit__``
    (C code, called at a graph break) receives None, as the generated code has no traceback to give."""

    def __init__(self, graph: "FunctionGraph") -> None:
        super().__init__(graph, DummyTracker())

    def get_py_type(self) -> type:
        return types.TracebackType

    def _reconstruct_computed(self, codegen: "CodeGen") -> None:
        codegen.load_const(None)

    def __repr__(self) -> str:
        return "UnknownTracebackVariable()"


@handles("LOAD_ASSERTION_ERROR")
def load_assertion_error(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    executor.push(VariableFactory.from_value(AssertionError, executor.graph, ConstTracker(AssertionError)))


@handles("RAISE_VARARGS")
def raise_varargs(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    values = executor.pop_n(instr.arg)
    if not values:  # a bare ``raise``: the exception being handled
        if not executor.handling:
            raise UserCodeError("user code raised RuntimeError: No active exception to reraise")
        raise UserCodeError("user code re-raised", original=executor.handling[-1], reraise=True)
    exc = _exception_of(values[0])
    # ``raise e`` gives ``e`` a new traceback: it no longer counts as a part of an except* group re-raised
    executor.except_star_parts.pop(id(exc), None)
    if len(values) == 2:  # ``raise exc from cause`` (``from None`` too) hides the context in tracebacks
        exc.__cause__ = None if values[1].get_py_value() is None else _exception_of(values[1])
        exc.__suppress_context__ = True
    raise UserCodeError(f"user code raised {type(exc).__name__}: {exc}", original=exc)


@handles("PUSH_EXC_INFO")
def push_exc_info(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    exc = executor.pop()
    previous = executor.handling[-1] if executor.handling else None
    executor.push(VariableFactory.from_value(previous, executor.graph, DummyTracker()) if previous is None
                  else exception_variable(executor, previous))
    executor.handling.append(exc.get_py_value())
    executor.push(exc)


@handles("POP_EXCEPT")
def pop_except(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    if pyversion.HAS_BLOCK_STACK:
        # 3.10: leave the handler's block; the three values below restore the previous exception info
        handler, _ = executor.blocks.pop()
        if handler != EXCEPT_HANDLER:
            raise FallbackError("POP_EXCEPT outside an exception handler")
        executor.pop_n(3)
    else:
        executor.pop()
    if executor.handling:
        executor.handling.pop()


# -- 3.10's block stack (3.11+ use the exception table: see OpcodeExecutor._enter_handler) ---------------------
@handles("SETUP_FINALLY")
def setup_finally(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    executor.blocks.append((instr.argval, len(executor.stack)))


@handles("POP_BLOCK")
def pop_block(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    executor.blocks.pop()


@handles("JUMP_IF_NOT_EXC_MATCH")
def jump_if_not_exc_match(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    """3.10's ``except E:`` test: the exception type and the class (or tuple) to match, both popped."""
    classes = executor.pop().get_py_value()
    exc_type = executor.pop().get_py_value()
    try:
        matches = issubclass(exc_type, classes)
    except TypeError:
        raise UserCodeError("user code raised TypeError: catching classes that do not inherit from "
                            "BaseException is not allowed") from None
    if not matches:
        executor.jump_to(instr.argval)


@handles("CHECK_EXC_MATCH")
def check_exc_match(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    classes = executor.pop().get_py_value()
    exc = executor.peek().get_py_value()
    executor.push(ConstantVariable(isinstance(exc, classes), executor.graph, DummyTracker()))


@handles("RERAISE")
def reraise(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    if pyversion.HAS_BLOCK_STACK:  # 3.10: traceback, value, type on the stack
        exc = executor.pop_n(3)[1].get_py_value()
    else:
        exc = executor.pop().get_py_value()
    if not isinstance(exc, BaseException):
        raise FallbackError("RERAISE of something that is not an exception")
    raise UserCodeError(f"user code raised {type(exc).__name__}: {exc}", original=exc, reraise=True)


@handles("WITH_EXCEPT_START")
def with_except_start(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    # Stack: __exit__, (lasti), previous exception, exception: call __exit__(type, value, traceback).
    # 3.10: __exit__, previous exception info, then traceback, value, type (three values each).
    exc_var = executor.peek(2) if pyversion.HAS_BLOCK_STACK else executor.peek(1)
    exit_var = executor.peek(7) if pyversion.HAS_BLOCK_STACK else executor.peek(4)
    exc = exc_var.get_py_value()
    graph = executor.graph
    args = [VariableFactory.from_value(type(exc), graph, DummyTracker()), exc_var, UnknownTracebackVariable(graph)]
    executor.push(exit_var.call(args, {}))


# -- except* (3.11+) ---------------------------------------------------------------------------------------
def _check_except_star_classes(classes: object) -> None:
    candidates = classes if isinstance(classes, tuple) else (classes,)
    for cls in candidates:
        if not (isinstance(cls, type) and issubclass(cls, BaseException)):
            error = TypeError("catching classes that do not inherit from BaseException is not allowed")
            raise UserCodeError(f"user code raised TypeError: {error}", original=error)
        if issubclass(cls, BaseExceptionGroup):
            error = TypeError("catching ExceptionGroup with except* is not allowed. Use except instead.")
            raise UserCodeError(f"user code raised TypeError: {error}", original=error)


def _split_exception_group(exc: BaseException | None, classes: object) -> tuple[object, object]:
    """``(match, rest)`` of one ``except*`` clause, as the interpreter splits: a whole match of a naked
    exception is wrapped in a group; a group is split; no match leaves the exception as the rest."""
    if exc is None:
        return None, None
    if isinstance(exc, classes):  # type: ignore[arg-type]
        if isinstance(exc, BaseExceptionGroup):
            return exc, None
        wrapped = BaseExceptionGroup("", [exc])
        wrapped.__traceback__ = exc.__traceback__
        return wrapped, None
    if isinstance(exc, BaseExceptionGroup):
        return exc.split(classes)  # type: ignore[arg-type]
    return None, exc


@handles("CHECK_EG_MATCH")
def check_eg_match(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    """``except* E``: replace the exception below ``E`` with the part not matched (the rest) and push the
    part matched, or None; the matched part becomes the exception being handled."""
    classes = executor.pop().get_py_value()
    exc = executor.pop().get_py_value()
    _check_except_star_classes(classes)
    match, rest = _split_exception_group(exc, classes)
    graph = executor.graph
    for part in (exc, match, rest):
        if part is not None:
            executor.except_star_parts[id(part)] = part  # parts of the original group (see prep_reraise_star)
    for part in (rest, match):
        executor.push(ConstantVariable(None, graph, DummyTracker()) if part is None
                      else exception_variable(executor, part))
    if match is not None and executor.handling:
        executor.handling[-1] = match


def prep_reraise_star(executor: OpcodeExecutor, original: BaseException, raised: list[object]) -> object:
    """What a ``try``/``except*`` statement raises at its end: the exceptions its clauses raised, plus the
    parts of the original group re-raised or left unhandled, re-assembled into the original's shape.

    The interpreter tells a re-raised part from a new exception by its metadata (traceback, cause...);
    here a re-raised part is one of the objects the clauses' matching produced and ``raise e`` did not
    give a new traceback (`raise_varargs` forgets it)."""
    raised = [exc for exc in raised if exc is not None]
    if not raised:
        return None
    if not isinstance(original, BaseExceptionGroup):  # a naked exception: one clause ran at most
        return raised[0]
    parts = executor.except_star_parts
    reraised = [exc for exc in raised if parts.get(id(exc)) is exc]
    new = [exc for exc in raised if parts.get(id(exc)) is not exc]
    leaves: set[int] = set()

    def collect(exc: BaseException) -> None:
        if isinstance(exc, BaseExceptionGroup):
            for inner in exc.exceptions:
                collect(inner)
        else:
            leaves.add(id(exc))

    for exc in reraised:
        collect(exc)
    kept = original.split(lambda e: id(e) in leaves)[0] if leaves else None
    if not new:
        return kept
    if kept is not None:
        new.append(kept)
    return BaseExceptionGroup("", new) if len(new) > 1 else new[0]


@handles("PREP_RERAISE_STAR")
def prep_reraise_star_op(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    """3.11: the original exception and the list of raised ones -> the exception to re-raise, or None."""
    push_reraise_star(executor)


def push_reraise_star(executor: OpcodeExecutor) -> None:
    raised = executor.pop()
    original = executor.pop().get_py_value()
    items = [item.get_py_value() for item in raised.unpack()]
    result = prep_reraise_star(executor, original, items)
    executor.push(ConstantVariable(None, executor.graph, DummyTracker()) if result is None
                  else exception_variable(executor, result))  # type: ignore[arg-type]

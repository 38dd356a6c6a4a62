"""``MAKE_FUNCTION`` (and 3.13's ``SET_FUNCTION_ATTRIBUTE``): nested functions, lambdas and comprehensions
created during simulation."""
from __future__ import annotations

import dis

from ....errors import FallbackError, UserCodeError
from ... import pyversion
from ..opcode_executor import OpcodeExecutor, Yield, handles
from ..tracker import DummyTracker
from ..variables.base import VariableBase, VariableFactory
from ..variables.basic import ConstantVariable
from ..variables.container import DictVariable, TupleVariable
from ..variables.function import CellVariable, NestedFunctionVariable

MAKE_FUNCTION_DEFAULTS = pyversion.FUNCTION_DEFAULTS
MAKE_FUNCTION_KWDEFAULTS = pyversion.FUNCTION_KWDEFAULTS
MAKE_FUNCTION_ANNOTATIONS = pyversion.FUNCTION_ANNOTATIONS
MAKE_FUNCTION_CLOSURE = pyversion.FUNCTION_CLOSURE


def _set_function_attribute(fn: NestedFunctionVariable, flag: int, value: VariableBase) -> None:
    """Give a function made during simulation its closure, annotations, keyword defaults or defaults."""
    if flag == MAKE_FUNCTION_CLOSURE:
        assert isinstance(value, TupleVariable)
        closure: dict[str, CellVariable] = {}
        for name, cell in zip(fn.code.co_freevars, value.items):
            if not isinstance(cell, CellVariable):
                raise FallbackError("a closure built from something other than cells")
            closure[name] = cell
        fn._closure = closure
    elif flag == MAKE_FUNCTION_ANNOTATIONS:
        if not isinstance(value, TupleVariable):
            raise FallbackError("function annotations given as something other than a tuple")
        fn.annotations = value  # (they do not change what the function computes; kept for the real one)
    elif flag == MAKE_FUNCTION_KWDEFAULTS:
        assert isinstance(value, DictVariable)
        fn._kwdefaults = dict(value.items)
    elif flag == MAKE_FUNCTION_DEFAULTS:
        fn._defaults = tuple(value.unpack())
    else:
        raise FallbackError(f"function attribute flag {flag} is not supported yet")
    fn.tracker = DummyTracker(tuple(fn._defaults) + tuple(fn._kwdefaults.values()))


@handles("MAKE_FUNCTION")
def make_function(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    qualname = None
    if pyversion.MAKE_FUNCTION_POPS_QUALNAME:
        qualname = executor.pop().get_py_value()
    code = executor.pop().get_py_value()
    if qualname is None:
        qualname = getattr(code, "co_qualname", code.co_name)
    fn = NestedFunctionVariable(code, qualname, executor.resolver, (), {}, {}, executor.graph)
    if pyversion.MAKE_FUNCTION_HAS_FLAGS:
        # The stack holds, bottom to top: defaults, kwdefaults, annotations, closure (those flagged).
        for flag in (MAKE_FUNCTION_CLOSURE, MAKE_FUNCTION_ANNOTATIONS, MAKE_FUNCTION_KWDEFAULTS,
                     MAKE_FUNCTION_DEFAULTS):
            if instr.arg & flag:
                _set_function_attribute(fn, flag, executor.pop())
    executor.push(fn)


@handles("SET_FUNCTION_ATTRIBUTE")
def set_function_attribute(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    fn = executor.pop()
    value = executor.pop()
    if not isinstance(fn, NestedFunctionVariable):
        raise FallbackError(f"SET_FUNCTION_ATTRIBUTE on {fn!r}")
    _set_function_attribute(fn, instr.arg, value)
    executor.push(fn)


@handles("BEFORE_WITH")
def before_with(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    from ..variables.context import enter_context

    exit_var, entered = enter_context(executor.pop())
    if executor.parent is None and hasattr(exit_var, "entered_at"):
        exit_var.entered_at = instr.offset  # (see GeneratorContextExitVariable)
    executor.push(exit_var)
    executor.push(entered)


@handles("SETUP_WITH")
def setup_with(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    """3.10: ``BEFORE_WITH`` plus a try block whose handler calls ``__exit__`` (kept above ``__exit__``)."""
    before_with(executor, instr)
    executor.blocks.append((instr.argval, len(executor.stack) - 1))


@handles("RETURN_GENERATOR")
def return_generator(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    """The start of a simulated generator: the real one would return itself here; the ``POP_TOP`` that
    follows pops this placeholder."""
    executor.push(ConstantVariable(None, executor.graph, DummyTracker()))


@handles("YIELD_VALUE")
def yield_value(executor: OpcodeExecutor, instr: dis.Instruction) -> Yield:
    return Yield(executor.pop())


@handles("GEN_START")
def gen_start(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    """3.10: the interpreter pushes the first value sent (None) and ``GEN_START`` pops it; a simulated
    generator starts with an empty stack instead, so there is nothing to pop."""


@handles("GET_YIELD_FROM_ITER")
def get_yield_from_iter(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    from ..variables.iterator import iterate

    executor.push(iterate(executor.pop()))


def _step_delegate(executor: OpcodeExecutor) -> tuple[VariableBase | None, VariableBase]:
    """``yield from``: pop the sent value, step the delegate below it. Returns ``(item, _)`` while the
    delegate yields, ``(None, returned)`` once it returned."""
    from ..variables.iterator import IteratorVariable

    sent = executor.pop()
    delegate = executor.peek()
    if not (isinstance(sent, ConstantVariable) and sent.value is None):
        raise FallbackError("send() of a value into a delegating generator is not simulated")
    if not isinstance(delegate, IteratorVariable):
        raise FallbackError(f"yield from {delegate!r} is not supported (only iterators made during simulation)")
    item, returned = delegate.step()
    if item is not None:
        return item, delegate
    return None, returned if returned is not None else ConstantVariable(None, executor.graph, DummyTracker())


@handles("SEND")
def send(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    """3.11+: one step of ``yield from``/``await``. While the delegate yields, its item replaces the sent
    value (the ``YIELD_VALUE`` that follows passes it on); once it returns, its return value is pushed
    and execution continues at the target."""
    item, result = _step_delegate(executor)
    if item is not None:
        executor.push(item)
        return
    if pyversion.SEND_POPS_DELEGATE_ON_RETURN:
        executor.pop()
    executor.push(result)
    executor.jump_to(instr.argval)


@handles("YIELD_FROM")
def yield_from(executor: OpcodeExecutor, instr: dis.Instruction) -> Yield | None:
    """3.10: ``SEND`` and ``YIELD_VALUE`` in one instruction, executed again after each resumption (the
    value the generator is resumed with is then on the stack) until the delegate returns."""
    item, result = _step_delegate(executor)
    if item is not None:
        executor.pc -= 1
        return Yield(item)
    executor.pop()
    executor.push(result)
    return None


@handles("END_SEND")
def end_send(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    """3.12+: after the delegate of ``yield from`` returned: drop the delegate under its return value."""
    result = executor.pop()
    executor.pop()
    executor.push(result)


@handles("CLEANUP_THROW")
def cleanup_throw(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    """3.12+: an exception thrown into the delegate while it was suspended: a ``StopIteration`` ends the
    ``yield from`` with its value; anything else propagates."""
    exc = executor.pop().get_py_value()
    if not isinstance(exc, StopIteration):
        raise UserCodeError(f"user code raised {type(exc).__name__}: {exc}", original=exc)
    executor.pop_n(2)
    executor.push(VariableFactory.from_value(exc.value, executor.graph, DummyTracker()))


@handles("LOAD_BUILD_CLASS")
def load_build_class(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    """``class`` inside a function: the call of ``__build_class__`` that follows is simulated
    (variables/classes.py)."""
    import builtins

    from ..variables.classes import BuildClassVariable

    executor.push(BuildClassVariable(builtins.__build_class__, executor.graph, DummyTracker()))

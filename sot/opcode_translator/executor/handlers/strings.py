"""f-strings: ``FORMAT_VALUE`` (3.10-3.12), its 3.13 split into ``CONVERT_VALUE``, ``FORMAT_SIMPLE`` and
``FORMAT_WITH_SPEC``, and ``BUILD_STRING``. Python values are formatted during simulation (guarded); a
tensor's text depends on its data, so formatting one breaks the graph and runs natively. The text of
numbers (and strings, bools, None) read from the frame is deferred text (`deferred_text.py`): the generated
code formats them again, and the guard checks their types only. Other values formatted are folded and
guarded as data only (`FunctionGraph.add_guard`): a frame without a graph that only formats numbers is not
translated again for each of their values (graph_free.py)."""
from __future__ import annotations

import dis
import inspect
from typing import Any, Callable

from ....errors import BreakGraphError
from ..opcode_executor import OpcodeExecutor, handles
from ..variables.base import VariableBase
from ..variables.basic import TensorVariable
from ..variables.callable import constant_fold
from ..variables.deferred_text import deferred_text

# FORMAT_VALUE's conversion bits (3.10-3.12) and CONVERT_VALUE's argument (3.13) use the same numbers.
CONVERSIONS: dict[int, Callable[[Any], str]] = {1: str, 2: repr, 3: ascii}
FORMAT_VALUE_HAS_SPEC = 0x04


def _fold(executor: OpcodeExecutor, fn: Callable[..., Any], operands: list[VariableBase]) -> VariableBase:
    if any(isinstance(var, TensorVariable) for var in operands):
        raise BreakGraphError("formatting a tensor as text reads its data: runs natively")
    deferred = deferred_text(executor.graph, fn, operands)
    if deferred is not None:
        return deferred
    folded = constant_fold(fn, executor.graph, operands, {}, data_only=True)  # (the text decides nothing yet)
    assert folded is not None
    return folded


def _instance_text(executor: OpcodeExecutor, var: VariableBase, conversion: Callable[[Any], str] | None,
                   spec: VariableBase | None) -> VariableBase:
    """What formatting gets from a user instance: its own Python ``__str__``/``__repr__`` run in the
    simulation (it reads the attributes the frame set). Its default text holds its address (known at run
    time only) and a Python ``__format__`` is not simulated: both run natively. Anything else (not a user
    instance, a format spec the default ``__format__`` rejects) is left to folding."""
    from ..variables.callable import BUILTIN_DISPATCH
    from ..variables.dunder import is_user_instance, user_method

    if not is_user_instance(var):
        return var
    name = type(var.get_py_value()).__name__
    if conversion is None:
        if user_method(var, "__format__") is not None:
            raise BreakGraphError(f"{name}.__format__ is not simulated: runs natively")
        if spec is not None and spec.get_py_value():
            return var  # object.__format__ raises its TypeError on the spec alone
        conversion = str
    if conversion is ascii:
        raise BreakGraphError(f"ascii() of a {name} object runs natively")
    wanted = ("__str__", "__repr__") if conversion is str else ("__repr__",)
    for method in wanted:
        if user_method(var, method) is not None:
            return BUILTIN_DISPATCH[conversion](executor.graph, [var], {})
        if method == "__str__" and inspect.getattr_static(type(var.get_py_value()), "__str__") is not object.__str__:
            break
    raise BreakGraphError(f"the default text of a {name} object holds its address: runs natively")


@handles("FORMAT_VALUE")
def format_value(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    spec = executor.pop() if instr.arg & FORMAT_VALUE_HAS_SPEC else None
    conversion = CONVERSIONS.get(instr.arg & 0x03)
    value = executor.pop()
    text = _instance_text(executor, value, conversion, spec)
    if text is not value:
        conversion = None

    def render(obj: Any, *format_spec: str) -> str:
        return format(conversion(obj) if conversion is not None else obj, *format_spec)

    executor.push(_fold(executor, render, [text] if spec is None else [text, spec]))


@handles("CONVERT_VALUE")
def convert_value(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    value = executor.pop()
    text = _instance_text(executor, value, CONVERSIONS[instr.arg], None)
    executor.push(text if text is not value else _fold(executor, CONVERSIONS[instr.arg], [value]))


@handles("FORMAT_SIMPLE")
def format_simple(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    value = _instance_text(executor, executor.pop(), None, None)
    executor.push(_fold(executor, format, [value]))


@handles("FORMAT_WITH_SPEC")
def format_with_spec(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    spec = executor.pop()
    value = _instance_text(executor, executor.pop(), None, spec)
    executor.push(_fold(executor, format, [value, spec]))


def _concat(*parts: str) -> str:
    return "".join(parts)


@handles("BUILD_STRING")
def build_string(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    executor.push(_fold(executor, _concat, executor.pop_n(instr.arg)))

"""Operators: binary, unary, comparisons, subscripts.

On tensors each operator is recorded as an ``api`` statement calling the `operator` function, which
dispatches exactly like the interpreter would (``__add__`` then ``__radd__``). On plain Python values the
result is computed directly (constant folding), guarded by the operands' values.
"""
from __future__ import annotations

import dis
import operator
from typing import Any, Callable

from ....errors import BreakGraphError
from ... import pyversion
from ..opcode_executor import OpcodeExecutor, handles
from ..variables.base import VariableBase
from ..variables.basic import ConstantVariable, ObjectVariable, TensorVariable, is_guarded_by_type, same_tensor
from ..variables.callable import apply_operator as apply_operator_in
from ..tracker import DummyTracker

# BINARY_OP's argument indexes this table (the order of CPython's NB_* constants).
BINARY_OPERATORS: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add, "&": operator.and_, "//": operator.floordiv, "<<": operator.lshift,
    "@": operator.matmul, "*": operator.mul, "%": operator.mod, "|": operator.or_, "**": operator.pow,
    ">>": operator.rshift, "-": operator.sub, "/": operator.truediv, "^": operator.xor,
    "+=": operator.iadd, "&=": operator.iand, "//=": operator.ifloordiv, "<<=": operator.ilshift,
    "@=": operator.imatmul, "*=": operator.imul, "%=": operator.imod, "|=": operator.ior,
    "**=": operator.ipow, ">>=": operator.irshift, "-=": operator.isub, "/=": operator.itruediv,
    "^=": operator.ixor,
}
COMPARE_OPERATORS: dict[str, Callable[[Any, Any], Any]] = {
    "<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne, ">": operator.gt,
    ">=": operator.ge,
}
UNARY_OPERATORS: dict[str, Callable[[Any], Any]] = {
    "UNARY_NEGATIVE": operator.neg, "UNARY_POSITIVE": operator.pos, "UNARY_INVERT": operator.invert,
}


def apply_operator(executor: OpcodeExecutor, fn: Callable[..., Any], operands: list[VariableBase]) -> VariableBase:
    return apply_operator_in(executor.graph, fn, operands)


# 3.10 has one opcode per binary operator (3.11 merged them into BINARY_OP).
LEGACY_BINARY_OPCODES: dict[str, str] = {
    "BINARY_ADD": "+", "BINARY_AND": "&", "BINARY_FLOOR_DIVIDE": "//", "BINARY_LSHIFT": "<<",
    "BINARY_MATRIX_MULTIPLY": "@", "BINARY_MULTIPLY": "*", "BINARY_MODULO": "%", "BINARY_OR": "|",
    "BINARY_POWER": "**", "BINARY_RSHIFT": ">>", "BINARY_SUBTRACT": "-", "BINARY_TRUE_DIVIDE": "/",
    "BINARY_XOR": "^",
    "INPLACE_ADD": "+=", "INPLACE_AND": "&=", "INPLACE_FLOOR_DIVIDE": "//=", "INPLACE_LSHIFT": "<<=",
    "INPLACE_MATRIX_MULTIPLY": "@=", "INPLACE_MULTIPLY": "*=", "INPLACE_MODULO": "%=", "INPLACE_OR": "|=",
    "INPLACE_POWER": "**=", "INPLACE_RSHIFT": ">>=", "INPLACE_SUBTRACT": "-=", "INPLACE_TRUE_DIVIDE": "/=",
    "INPLACE_XOR": "^=",
}


def _binary(executor: OpcodeExecutor, symbol: str) -> None:
    rhs = executor.pop()
    lhs = executor.pop()
    executor.push(apply_operator(executor, BINARY_OPERATORS[symbol], [lhs, rhs]))


@handles("BINARY_OP")
def binary_op(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    _binary(executor, instr.argrepr)


@handles(*LEGACY_BINARY_OPCODES)
def legacy_binary_op(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    _binary(executor, LEGACY_BINARY_OPCODES[instr.opname])


def to_bool(executor: OpcodeExecutor, value: VariableBase) -> VariableBase:
    """``bool(value)`` as a Python decision (guarded); a tensor's truth needs a graph break."""
    if type(value) is ConstantVariable and type(value.value) is bool:  # (a symbolic int's value would pin it)
        return value
    truth = value.bool()
    executor.graph.add_guard(value)
    return ConstantVariable(truth, executor.graph, DummyTracker((value,)))


def to_bool_unless_jump_follows(executor: OpcodeExecutor, value: VariableBase) -> VariableBase:
    """3.13's conversion of what a conditional jump or ``not`` tests to an exact bool (``TO_BOOL``,
    ``COMPARE_OP``'s bool bit), except right before a conditional jump: the value itself is left for the
    jump, which tests its truth the same way.

    A tensor's truth then breaks the graph at the jump, as on the other versions, and each of the jump's two
    continuations gets a resume function of its own. Broken at the conversion instead, the one continuation
    would start with a Python bool's jump; once that resume function runs the original code natively (its
    graphs too small to compile), the branch not taken so far would run natively too, never translated."""
    if executor.pc < len(executor.instructions) and \
            executor.instructions[executor.pc].opname in pyversion.TRUTH_JUMPS:
        return value
    return to_bool(executor, value)


@handles("COMPARE_OP")
def compare_op(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    rhs = executor.pop()
    lhs = executor.pop()
    result = apply_operator(executor, COMPARE_OPERATORS[instr.argval], [lhs, rhs])
    if pyversion.compare_converts_to_bool(instr):
        result = to_bool_unless_jump_follows(executor, result)
    executor.push(result)


@handles("TO_BOOL")
def to_bool_op(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    """3.13: what a conditional jump or ``not`` tests is made an exact bool first."""
    executor.push(to_bool_unless_jump_follows(executor, executor.pop()))


@handles("UNARY_NEGATIVE", "UNARY_POSITIVE", "UNARY_INVERT")
def unary_op(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    executor.push(apply_operator(executor, UNARY_OPERATORS[instr.opname], [executor.pop()]))


@handles("UNARY_NOT")
def unary_not(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    value = executor.pop()
    truth = value.bool()
    executor.graph.add_guard(value)
    executor.push(ConstantVariable(not truth, executor.graph, DummyTracker((value,))))


def _is_container(var: VariableBase) -> bool:
    from ..variables.container import DictVariable, SequenceVariable

    return isinstance(var, (SequenceVariable, DictVariable))


# The types with a single instance: ``obj is None`` is decided by the type of ``obj``.
_SINGLETON_TYPES = (type(None), type(Ellipsis), type(NotImplemented))


def _type_decides_identity(lhs: VariableBase, rhs: VariableBase) -> bool:
    """``err is None``: an object guarded by its type (`is_guarded_by_type`, an exception handed to a helper)
    compared with a singleton (None, ...): never the same object, which its type guard keeps true; guarding
    its identity instead would miss for the new object each call brings."""
    return any(isinstance(single, ConstantVariable) and type(single.value) in _SINGLETON_TYPES
               and isinstance(obj, ObjectVariable) and not obj.needs_identity and is_guarded_by_type(obj.value)
               for single, obj in ((lhs, rhs), (rhs, lhs)))


@handles("IS_OP")
def is_op(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    rhs = executor.pop()
    lhs = executor.pop()
    if isinstance(lhs, TensorVariable) or isinstance(rhs, TensorVariable):
        if isinstance(lhs, TensorVariable) and isinstance(rhs, TensorVariable):
            result = same_tensor(lhs, rhs)
        elif lhs is rhs:
            result = True
        else:
            result = False  # a tensor is never the same object as a non-tensor
            other = rhs if isinstance(lhs, TensorVariable) else lhs
            executor.graph.add_guard(other)
    elif lhs is rhs:
        result = True  # (one variable per real list/dict: reached by two paths, guarded as aliases)
        if lhs.tracker.is_traceable():
            executor.graph.add_guard(lhs)
    elif _is_container(lhs) or _is_container(rhs):
        # One variable per real list/dict, and a built container is a new object: identity is variable
        # identity, except for two reads of the same real tuple.
        real_l, real_r = getattr(lhs, "real", None), getattr(rhs, "real", None)
        result = real_l is not None and real_l is real_r
        for operand in (lhs, rhs):  # (their aliasing is guarded with them: FunctionGraph._identity_guards)
            if operand.tracker.is_traceable():
                executor.graph.add_guard(operand)
    elif _type_decides_identity(lhs, rhs):
        result = False
        executor.graph.add_guard(lhs)
        executor.graph.add_guard(rhs)
    else:
        for operand in (lhs, rhs):
            if hasattr(operand, "needs_identity"):
                operand.needs_identity = True
            executor.graph.add_guard(operand)
        result = lhs.get_py_value() is rhs.get_py_value()
    executor.push(ConstantVariable(result != bool(instr.arg), executor.graph, DummyTracker((lhs, rhs))))


@handles("CONTAINS_OP")
def contains_op(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    container = executor.pop()
    item = executor.pop()
    result = apply_operator(executor, operator.contains, [container, item])
    if instr.arg:
        result = ConstantVariable(not result.get_py_value(), executor.graph, DummyTracker((result,)))
    executor.push(result)


@handles("BINARY_SUBSCR")
def binary_subscr(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    from ..variables.callable import subscript

    key = executor.pop()
    container = executor.pop()
    executor.push(subscript(container, key))


@handles("BINARY_SLICE")
def binary_slice(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    """3.12+: ``container[start:stop]`` is ``BUILD_SLICE 2`` + ``BINARY_SUBSCR`` in one instruction."""
    from .containers import build_slice

    build_slice(executor, TWO_OPERANDS)
    binary_subscr(executor, instr)


class _Operands:
    """A stand-in instruction for calling another handler with a given argument."""

    def __init__(self, arg: int) -> None:
        self.arg = arg


TWO_OPERANDS: Any = _Operands(2)

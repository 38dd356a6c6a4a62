"""Building and unpacking tuples, lists, dicts and slices."""
from __future__ import annotations

import dis

from ....errors import FallbackError, UserCodeError
from ..opcode_executor import OpcodeExecutor, handles
from ..tracker import DummyTracker
from ..variables.basic import ConstantVariable
from ..variables.container import DictVariable, ListVariable, SequenceVariable, TupleVariable


@handles("BUILD_TUPLE")
def build_tuple(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    items = executor.pop_n(instr.arg)
    executor.push(TupleVariable(items, executor.graph, DummyTracker(tuple(items))))


@handles("BUILD_LIST")
def build_list(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    items = executor.pop_n(instr.arg)
    executor.push(ListVariable(items, executor.graph, DummyTracker(tuple(items))))


def _constant_key(var: object) -> object:
    if not isinstance(var, ConstantVariable):
        raise FallbackError(f"dict key {var!r} is not a Python constant")
    return var.value


@handles("BUILD_MAP")
def build_map(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    flat = executor.pop_n(2 * instr.arg)
    items = {_constant_key(flat[i]): flat[i + 1] for i in range(0, len(flat), 2)}
    executor.push(DictVariable(items, executor.graph, DummyTracker(tuple(flat))))


@handles("BUILD_CONST_KEY_MAP")
def build_const_key_map(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    keys = executor.pop().get_py_value()
    values = executor.pop_n(instr.arg)
    executor.push(DictVariable(dict(zip(keys, values)), executor.graph, DummyTracker(tuple(values))))


@handles("LIST_EXTEND")
def list_extend(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    source = executor.pop()
    target = executor.peek(instr.arg)
    if not isinstance(target, ListVariable) or target.tracker.is_traceable():
        raise FallbackError("extending a list that came from outside the frame is a side effect not supported yet")
    target.items.extend(source.unpack())


@handles("LIST_APPEND")
def list_append(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    item = executor.pop()
    target = executor.peek(instr.arg)
    if not isinstance(target, ListVariable) or target.tracker.is_traceable():
        raise FallbackError("appending to a list that came from outside the frame is not supported yet")
    target.items.append(item)


@handles("LIST_TO_TUPLE")
def list_to_tuple(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    source = executor.pop()
    executor.push(TupleVariable(source.unpack(), executor.graph, DummyTracker((source,))))


@handles("UNPACK_SEQUENCE")
def unpack_sequence(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    source = executor.pop()
    items = source.unpack()
    if len(items) != instr.arg:
        raise UserCodeError(f"user code raised ValueError: cannot unpack {len(items)} values into {instr.arg}")
    for item in reversed(items):
        if item.tracker.is_traceable():
            executor.graph.add_guard(item)
        executor.push(item)


@handles("BUILD_SLICE")
def build_slice(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    parts = executor.pop_n(instr.arg)
    for part in parts:
        if not isinstance(part, ConstantVariable):
            raise FallbackError("slice bounds that are not Python constants are not supported yet")
        executor.graph.add_guard(part)
    value = slice(*(part.value for part in parts))
    executor.push(ConstantVariable(value, executor.graph, DummyTracker(tuple(parts))))


__all__ = ["SequenceVariable"]

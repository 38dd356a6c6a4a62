"""Building and unpacking tuples, lists, dicts and slices."""
from __future__ import annotations

import dis

from ....errors import FallbackError, UserCodeError
from ..opcode_executor import OpcodeExecutor, handles
from ..tracker import DummyTracker
from ..variables.basic import ConstantVariable
from ..variables.container import (DictVariable, ListVariable, SequenceVariable, SetVariable, TupleVariable,
                                   dict_key, key_variable)
from ..variables.iterator import IteratorVariable
from ..variables.symbolic_int import (SymbolicIntVariable, SymbolicSliceVariable, TensorBoundSliceVariable,
                                      is_slice_bound_tensor, pin_float)
from ..variables.user_mapping import MappingInstanceVariable, is_mapping_like, protocol_items


@handles("BUILD_TUPLE")
def build_tuple(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    items = executor.pop_n(instr.arg)
    executor.push(TupleVariable(items, executor.graph, DummyTracker(tuple(items))))


@handles("BUILD_LIST")
def build_list(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    items = executor.pop_n(instr.arg)
    executor.push(ListVariable(items, executor.graph, DummyTracker(tuple(items))))


@handles("BUILD_MAP")
def build_map(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    flat = executor.pop_n(2 * instr.arg)
    items = {dict_key(flat[i], tensors=True): flat[i + 1] for i in range(0, len(flat), 2)}
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
    _reject_non_iterable(source, "Value after * must be an iterable, not {}")  # (``[*5]``, ``(*5,)``)
    if isinstance(target, ListVariable) and target.tracker.is_traceable():
        # (the list a star-argument call is building, handed to a resume function by a break in its middle
        # (``f(*make_data())``): changed like any list from outside, written back after the graph)
        target.getattr("extend").call([source], {})
        return
    if not isinstance(target, ListVariable):
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


def _reject_non_iterable(source: VariableBase, message: str) -> None:
    """Raise the interpreter's own TypeError (``message`` formatted with the type's name) for a value whose type
    is not iterable at all, where the opcode words it otherwise than ``iter()`` (``'int' object is not
    iterable``)."""
    cls = source.get_py_type()
    if isinstance(cls, type) and getattr(cls, "__iter__", None) is None and not hasattr(cls, "__getitem__"):
        source.graph.add_guard(source)
        problem = message.format(cls.__name__)
        raise UserCodeError(f"user code raised TypeError: {problem}", original=TypeError(problem))


def _unpacked(source: VariableBase) -> list[VariableBase]:
    """The items ``a, b = source`` (or ``a, *b = source``) takes."""
    _reject_non_iterable(source, "cannot unpack non-iterable {} object")
    return source.unpack()


@handles("UNPACK_SEQUENCE")
def unpack_sequence(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    source = executor.pop()
    # An iterator is stepped once past the targets (to tell "too many values"), never to its end.
    items = source.take(instr.arg + 1) if isinstance(source, IteratorVariable) else _unpacked(source)
    if len(items) != instr.arg:
        problem = (f"too many values to unpack (expected {instr.arg})" if len(items) > instr.arg
                   else f"not enough values to unpack (expected {instr.arg}, got {len(items)})")
        raise UserCodeError(f"user code raised ValueError: {problem}", original=ValueError(problem))
    for item in reversed(items):  # (each guarded by its uses: ``key, t = pair`` may only pass ``key`` on)
        executor.push(item)


@handles("BUILD_SLICE")
def build_slice(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    parts = [pin_float(part) for part in executor.pop_n(instr.arg)]
    if any(is_slice_bound_tensor(part) for part in parts) \
            and all(isinstance(part, ConstantVariable) or is_slice_bound_tensor(part) for part in parts):
        executor.push(TensorBoundSliceVariable(parts, executor.graph))
        return
    for part in parts:
        if not isinstance(part, ConstantVariable):
            raise FallbackError("slice bounds that are not Python constants are not supported yet")
    if any(isinstance(part, SymbolicIntVariable) for part in parts):
        executor.push(SymbolicSliceVariable(parts, executor.graph))
        return
    for part in parts:
        executor.graph.add_guard(part)
    value = slice(*(part.value for part in parts))
    executor.push(ConstantVariable(value, executor.graph, DummyTracker(tuple(parts))))


__all__ = ["SequenceVariable"]


@handles("BUILD_SET")
def build_set(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    items = executor.pop_n(instr.arg)
    executor.push(SetVariable.of(items, executor.graph, DummyTracker(tuple(items))))


@handles("SET_ADD")
def set_add(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    item = executor.pop()
    target = executor.peek(instr.arg)
    if not isinstance(target, SetVariable):
        raise FallbackError(f"SET_ADD on {target!r}")
    target.add_items([item])


@handles("SET_UPDATE")
def set_update(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    source = executor.pop()
    target = executor.peek(instr.arg)
    if not isinstance(target, SetVariable):
        raise FallbackError(f"SET_UPDATE on {target!r}")
    target.update_from(source)


def _merge_into(target: object, source: object, reject_duplicates: bool) -> None:
    if not isinstance(target, DictVariable):
        raise FallbackError(f"dict merge into {target!r}")
    if isinstance(source, MappingInstanceVariable):  # (a user dict subclass: its mapping protocol)
        items = source.mapping_items()
    elif is_mapping_like(source):  # (a ``UserDict``, an HF ``BatchEncoding``...)
        items = protocol_items(source)
    elif isinstance(source, DictVariable):
        target.graph.add_guard(source)
        items = source.items
    else:
        raise FallbackError(f"dict unpacking of {source!r} is not supported yet")
    if reject_duplicates:
        for key in items:
            if key in target.items:
                # (no ``original``: the eager message names the callee; the frame runs eagerly and says it)
                raise UserCodeError(f"user code raised TypeError: got multiple values for keyword argument {key!r}")
    _store_items(target, items)


def _store_items(target: DictVariable, items: dict) -> None:
    """Add ``items`` to the dict a ``**`` merge or a dict display builds. One with a path is a real dict (a
    resume function's parameter: the display was pending on the stack at a graph break): its stores are
    changes of a real object, recorded (`DictVariable.setitem`); a dict made in the frame is just filled."""
    if not target.tracker.is_traceable():
        target.items.update(items)
        return
    for key, value in items.items():
        target.setitem(key_variable(key, target.graph, DummyTracker((target,))), value)


@handles("DICT_MERGE")
def dict_merge(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    source = executor.pop()
    _merge_into(executor.peek(instr.arg), source, reject_duplicates=True)


@handles("DICT_UPDATE")
def dict_update(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    source = executor.pop()
    _merge_into(executor.peek(instr.arg), source, reject_duplicates=False)


@handles("MAP_ADD")
def map_add(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    value = executor.pop()
    key = executor.pop()
    target = executor.peek(instr.arg)
    if not isinstance(target, DictVariable):
        raise FallbackError(f"MAP_ADD on {target!r}")
    _store_items(target, {dict_key(key, tensors=True): value})


@handles("UNPACK_EX")
def unpack_ex(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    before, after = instr.arg & 0xFF, instr.arg >> 8
    source = executor.pop()
    items = _unpacked(source)
    if len(items) < before + after:
        problem = f"not enough values to unpack (expected at least {before + after}, got {len(items)})"
        raise UserCodeError(f"user code raised ValueError: {problem}", original=ValueError(problem))
    rest = items[before:len(items) - after]
    values = items[:before] + [ListVariable(rest, executor.graph, DummyTracker(tuple(rest)))] + items[len(items) - after:]
    for item in reversed(values):
        if item.tracker.is_traceable():
            executor.graph.add_guard(item)
        executor.push(item)

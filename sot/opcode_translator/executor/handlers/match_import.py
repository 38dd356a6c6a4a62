"""``match`` statements over Python values, and ``import`` inside functions."""
from __future__ import annotations

import collections.abc
import dis

from ....errors import FallbackError
from ... import pyversion
from ..opcode_executor import OpcodeExecutor, handles
from ..tracker import ConstTracker, DummyTracker
from ..variables.base import VariableBase, VariableFactory
from ..variables.basic import ConstantVariable, ObjectVariable, TensorVariable
from ..variables.callable import guard_abc_registrations
from ..variables.container import DictVariable, SequenceVariable, TupleVariable


def _known(executor: OpcodeExecutor, var: VariableBase) -> object:
    """The Python value a pattern inspects (its shape of container, or its type)."""
    if isinstance(var, TensorVariable):
        return var  # (neither a mapping nor a sequence: ``collections.abc`` registers no tensor class)
    executor.graph.add_guard(var)
    return var


def _const(executor: OpcodeExecutor, value: object, *sources: VariableBase) -> VariableBase:
    return VariableFactory.from_value(value, executor.graph, DummyTracker(tuple(sources)))


@handles("GET_LEN")
def get_len(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    subject = executor.peek()
    length = getattr(subject, "length", None)
    if length is None:
        raise FallbackError(f"len() of {subject!r} in a match statement")
    executor.push(ConstantVariable(length(), executor.graph, DummyTracker((subject,))))


@handles("MATCH_MAPPING")
def match_mapping(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    subject = _known(executor, executor.peek())
    result = isinstance(subject, DictVariable) or (
        isinstance(subject, ObjectVariable) and isinstance(subject.value, collections.abc.Mapping))
    executor.push(_const(executor, result, subject))


@handles("MATCH_SEQUENCE")
def match_sequence(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    subject = _known(executor, executor.peek())
    result = isinstance(subject, SequenceVariable) or (
        isinstance(subject, ObjectVariable) and isinstance(subject.value, collections.abc.Sequence)
        and not isinstance(subject.value, (str, bytes, bytearray)))
    executor.push(_const(executor, result, subject))


@handles("MATCH_KEYS")
def match_keys(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    keys = executor.peek().get_py_value()
    subject = executor.peek(2)
    if not isinstance(subject, DictVariable):
        raise FallbackError("a mapping pattern over something else than a dict")
    executor.graph.add_guard(subject)
    matched = all(key in subject.items for key in keys)
    if matched:
        values = [subject.items[key] for key in keys]
        executor.push(TupleVariable(values, executor.graph, DummyTracker(tuple(values))))
    else:
        executor.push(ConstantVariable(None, executor.graph, DummyTracker()))
    if pyversion.MATCH_PUSHES_SUCCESS_FLAG:
        executor.push(ConstantVariable(matched, executor.graph, DummyTracker()))


@handles("COPY_DICT_WITHOUT_KEYS")
def copy_dict_without_keys(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    """3.10: ``**rest`` of a mapping pattern: the subject's items without the matched keys."""
    keys = executor.pop().get_py_value()
    subject = executor.peek()
    if not isinstance(subject, DictVariable):
        raise FallbackError("a mapping pattern over something else than a dict")
    rest = {key: value for key, value in subject.items.items() if key not in keys}
    executor.push(DictVariable(rest, executor.graph, DummyTracker(tuple(rest.values()))))


@handles("MATCH_CLASS")
def match_class(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    names = executor.pop().get_py_value()
    cls_var = executor.pop()
    subject = executor.pop()
    attributes = _match_class(executor, instr, subject, cls_var, names)
    if pyversion.MATCH_PUSHES_SUCCESS_FLAG:  # 3.10: (attributes, True) or (subject, False)
        executor.push(subject if attributes is None else attributes)
        executor.push(ConstantVariable(attributes is not None, executor.graph, DummyTracker()))
    else:
        executor.push(ConstantVariable(None, executor.graph, DummyTracker()) if attributes is None else attributes)


def _match_class(executor: OpcodeExecutor, instr: dis.Instruction, subject: VariableBase, cls_var: VariableBase,
                 names: tuple[str, ...]) -> VariableBase | None:
    """The attributes a class pattern extracts, or None when the subject is not an instance."""
    cls = cls_var.get_py_value()
    executor.graph.add_guard(cls_var)
    if isinstance(subject, TensorVariable):
        matched = issubclass(subject.get_py_type(), cls)
    else:
        executor.graph.add_guard(subject)
        matched = isinstance(subject.get_py_value(), cls)
    guard_abc_registrations(executor.graph, cls)
    if not matched:
        return None
    positional = list(getattr(cls, "__match_args__", ())) if instr.arg else []
    if instr.arg > len(positional):
        if instr.arg == 1 and cls in (bool, bytearray, bytes, dict, float, frozenset, int, list, set, str, tuple):
            return TupleVariable([subject], executor.graph, DummyTracker((subject,)))
        raise FallbackError(f"{cls.__name__}() accepts {len(positional)} positional sub-patterns")
    attributes = positional[:instr.arg] + list(names)
    values = [subject.getattr(name) for name in attributes]
    return TupleVariable(values, executor.graph, DummyTracker(tuple(values)))


@handles("IMPORT_NAME")
def import_name(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    fromlist = executor.pop().get_py_value()
    level = executor.pop().get_py_value()
    # Importing runs the module once; here it is almost always already imported. The module object is the
    # same at every call, so it is a constant of the translation.
    module = __import__(instr.argval, executor.resolver.globals, None, fromlist, level)
    executor.push(VariableFactory.from_value(module, executor.graph, ConstTracker(module)))


@handles("IMPORT_FROM")
def import_from(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    module = executor.peek()
    executor.push(module.getattr(instr.argval))

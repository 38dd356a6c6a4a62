"""Instances of user classes deriving from ``list`` (HuggingFace's ``LogitsProcessorList``, a list of hooks).

The twin of `user_mapping` for sequences. Such an object is a user instance (attributes, Python methods and
dunders, simulated as for any user object: `ObjectVariable`) whose items live in the C list. The items are
held by a simulated list (``content``, the `ListVariable` that models a plain list), which the builtin
methods of ``list`` act on: ``for p in self``, ``len(self)``, ``self[i]``, ``self.append(p)``,
``super().__init__(items)``, ``x in self``, ``self + [p]``... A Python method of the class wins over the
builtin one, as in Python.

Received from outside, it is guarded by its class and its length; its items are read with
``list.__getitem__`` (never the class's own); changed, its final items are written back into it after the
graph with ``list.__setitem__`` (`runtime.write_back_sequence`). Made in the frame, it is built in generated
code by ``list.__new__`` and ``list.extend`` with its final items (`runtime.new_sequence_instance`), past
any Python ``__init__`` whose effects the simulation already accounted for; its attribute stores are then
replayed.
"""
from __future__ import annotations

import inspect
import operator
from typing import TYPE_CHECKING, Any, Callable

from ....errors import BreakGraphError, FallbackError, UserCodeError
from ..tracker import DummyTracker, Tracker
from .base import HEAPTYPE, VariableBase, VariableFactory
from .basic import ConstantVariable, ObjectVariable, is_plain_instance
from .builtin_subclass import BuiltinSubclassInstanceVariable, BuiltinSubclassMethodVariable
from .container import ListVariable
from .user_mapping import MappingItemTracker

if TYPE_CHECKING:
    from ...codegen import CodeGen
    from ..function_graph import FunctionGraph
    from ..guard import GuardBuilder

# Builtin methods of ``list`` that only read the items, and those that change them (simulated on ``content``).
_READING_METHODS = frozenset({"__getitem__", "__len__", "__iter__", "__contains__", "__reversed__", "index",
                              "count", "copy"})
_CHANGING_METHODS = frozenset({"__setitem__", "__delitem__", "append", "extend", "insert", "pop", "remove",
                               "clear", "reverse", "sort", "__init__", "__iadd__"})


def sequence_base(cls: Any) -> type | None:
    """``list`` when ``cls`` is a user class whose instances `SequenceInstanceVariable` models (plain
    metaclass, ``list.__new__``, every class of its MRO but ``list`` and ``object`` a Python class), else None.
    (``paddle.Size``, a C subclass, is not one.)"""
    if not isinstance(cls, type) or type(cls) is not type or not cls.__flags__ & HEAPTYPE:
        return None
    if list not in cls.__mro__ or cls.__new__ is not list.__new__:
        return None
    builtins_in_mro = {klass for klass in cls.__mro__ if not klass.__flags__ & HEAPTYPE}
    return list if builtins_in_mro <= {list, object} else None


class SequenceInstanceVariable(BuiltinSubclassInstanceVariable):
    """An instance of a user class deriving from ``list``: ``value`` is the real object (from outside) or a
    stand-in of the class without items (made in the frame); ``content`` holds its items."""

    base = list
    BUILTIN_BASES = (list,)

    def __init__(self, value: Any, graph: "FunctionGraph", tracker: Tracker,
                 cls_var: VariableBase | None = None) -> None:
        super().__init__(value, graph, tracker, cls_var)
        self.content = ListVariable([], graph, DummyTracker((self,)))
        self.initial_length: int | None = None

    @classmethod
    def created_by(cls, cls_var: VariableBase) -> "SequenceInstanceVariable":
        return cls(list.__new__(cls_var.get_py_value()), cls_var.graph, DummyTracker((cls_var,)), cls_var)

    @classmethod
    def from_real(cls, value: Any, graph: "FunctionGraph", tracker: Tracker) -> "SequenceInstanceVariable":
        var = cls(value, graph, tracker)
        traceable = tracker.is_traceable()
        if traceable:
            var.content.unread_paths = []  # (its items are read through ``content``: see `ItemsReadTracked`)
        var.content._items = [
            VariableFactory.from_value(item, graph, MappingItemTracker(var, list, index) if traceable
                                       else DummyTracker((var,)))
            for index, item in enumerate(list.__iter__(value))]
        var.initial_length = len(var.content._items)
        return var

    # -- guards, write-back and reconstruction ----------------------------------------------------------
    def make_guards(self, builder: "GuardBuilder", expr: str) -> list[str]:
        guards = super().make_guards(builder, expr)
        if self.initial_length is not None:  # (its structure; ``len()`` might be the class's own)
            guards.append(f"{builder.constant(list.__len__)}({expr}) == {self.initial_length}")
        return guards

    def _final_items(self) -> ListVariable:
        items = list(self.content.items)
        return ListVariable(items, self.graph, DummyTracker(tuple(items)))

    def write_back(self, codegen: "CodeGen") -> None:
        from ...runtime import write_back_sequence

        codegen.call_helper(write_back_sequence, [self, self._final_items()])
        codegen.emit("POP_TOP")

    def write_back_values(self) -> list[VariableBase]:
        return list(self.content.items)

    def _reconstruct_computed(self, codegen: "CodeGen") -> None:
        from ...runtime import new_sequence_instance

        if self.cls_var is None:
            super()._reconstruct_computed(codegen)
            return
        if any(item is self for item in self.content.items):
            raise FallbackError(f"a {type(self.value).__name__} holding itself is not rebuilt yet")
        codegen.call_helper(new_sequence_instance, [self.cls_var, self._final_items()])

    def iterator(self) -> "VariableBase | None":
        if self._own("__iter__") is not None:
            return super().iterator()
        return sequence_operation(self, "__iter__", [], {})

    def __repr__(self) -> str:
        return f"SequenceInstanceVariable({type(self.value).__name__}: {self.content._items!r})"


class SequenceMethodVariable(BuiltinSubclassMethodVariable):
    """A builtin method of ``list`` bound to a `SequenceInstanceVariable` (``super().__init__``,
    ``self.append``): simulated on its items."""

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        return sequence_operation(self.owner, self.name, args, kwargs)


SequenceInstanceVariable.READING_METHODS = _READING_METHODS
SequenceInstanceVariable.CHANGING_METHODS = _CHANGING_METHODS
SequenceInstanceVariable.METHOD_VARIABLE = SequenceMethodVariable


def _expect(name: str, args: list[VariableBase], kwargs: dict[str, VariableBase], *counts: int) -> None:
    if kwargs or len(args) not in counts:
        raise FallbackError(f"list.{name}() with unusual arguments")


def sequence_operation(owner: SequenceInstanceVariable, name: str, args: list[VariableBase],
                       kwargs: dict[str, VariableBase]) -> VariableBase:
    """``list.<name>(owner, *args, **kwargs)`` on the simulated items of ``owner``."""
    from .container import ContainerMethodVariable, _sequence_setitem
    from .iterator import iterate

    graph = owner.graph
    content = owner.content
    if name in _CHANGING_METHODS:
        owner.record_change()
    none = ConstantVariable(None, graph, DummyTracker())
    if name == "__init__":  # ``list.__init__(self, iterable=())``: the items are replaced
        _expect(name, args, kwargs, 0, 1)
        items = iterate(args[0]).unpack() if args else []
        _sequence_setitem(content, ConstantVariable(slice(None), graph, DummyTracker()),
                          ListVariable(items, graph, DummyTracker(tuple(args))))
        return none
    if name == "__iadd__":
        _expect(name, args, kwargs, 1)
        ContainerMethodVariable(content, "extend").call(args, {})
        return owner
    if name in ("__getitem__", "__setitem__", "__delitem__"):
        _expect(name, args, kwargs, {"__getitem__": 1, "__setitem__": 2, "__delitem__": 1}[name])
        if name == "__getitem__":
            return content.getitem(args[0])
        _sequence_setitem(content, args[0], args[1] if name == "__setitem__" else None)
        return none
    if name == "__len__":
        _expect(name, args, kwargs, 0)
        return ConstantVariable(content.length(), graph, DummyTracker((owner,)))
    if name == "__contains__":
        _expect(name, args, kwargs, 1)
        from .callable import apply_operator

        return apply_operator(graph, operator.contains, [_read_view(owner), args[0]])
    if name in ("__iter__", "__reversed__"):
        _expect(name, args, kwargs, 0)
        if name == "__reversed__":
            from .callable import BUILTIN_DISPATCH

            return BUILTIN_DISPATCH[reversed](graph, [_read_view(owner)], {})
        # (its own items, not a snapshot: appended during the loop, they are reached, as eagerly)
        return iterate(owner.content) if isinstance(owner.content, ListVariable) else iterate(_read_view(owner))
    return ContainerMethodVariable(content, name).call(args, kwargs)


def _read_view(owner: SequenceInstanceVariable) -> ListVariable:
    """The items of ``owner`` as a plain list to read from (a snapshot: reading them guards ``owner``)."""
    return ListVariable(owner.content.unpack(), owner.graph, DummyTracker((owner,)))


def _unbound_list_method(name: str) -> Callable[..., VariableBase]:
    """``list.<name>(obj, ...)`` called explicitly: on the items of a user list instance; on a plain simulated
    list, its method (the dunders through the protocol)."""
    from .container import ContainerMethodVariable

    def rule(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        owner = args[0] if args else None
        if isinstance(owner, SequenceInstanceVariable):
            return sequence_operation(owner, name, args[1:], kwargs)
        if type(owner) is ListVariable and not name.startswith("__"):
            return ContainerMethodVariable(owner, name).call(args[1:], kwargs)
        raise BreakGraphError(f"list.{name}() on {owner!r} runs natively")

    return rule


def _register_unbound_methods() -> None:
    from .callable import BUILTIN_DISPATCH

    for name in _READING_METHODS | _CHANGING_METHODS:
        method = list.__dict__.get(name)
        if method is not None and method not in BUILTIN_DISPATCH:
            BUILTIN_DISPATCH[method] = _unbound_list_method(name)


_register_unbound_methods()


def _sequence_operator(fn: Callable[..., Any], operands: list[VariableBase]) -> VariableBase | None:
    """Operators of a user list instance without Python dunders of its own for them (those are inlined
    first, by `dunder.dunder_operator`): ``+=`` extends its items; ``+``, ``*``, ``==``, ``<``... are
    list's, on its items (``+`` and ``*`` make a plain list, as ``list.__add__`` does)."""
    from .container import container_operator

    if not any(isinstance(operand, SequenceInstanceVariable) for operand in operands):
        return None
    lhs = operands[0]
    if fn is operator.iadd and isinstance(lhs, SequenceInstanceVariable):
        return sequence_operation(lhs, "__iadd__", operands[1:], {})
    if fn is operator.imul and isinstance(lhs, SequenceInstanceVariable):
        lhs.record_change()
        return lhs if container_operator(fn, [lhs.content, *operands[1:]]) is not None else None
    return container_operator(fn, [_read_view(o) if isinstance(o, SequenceInstanceVariable) else o
                                   for o in operands])


def _register_operator_hook() -> None:
    from .container import OPERATOR_HOOKS

    OPERATOR_HOOKS.append(_sequence_operator)


_register_operator_hook()


def instantiate_sequence(cls_var: ObjectVariable, args: list[VariableBase],
                         kwargs: dict[str, VariableBase]) -> VariableBase:
    """``cls(*args, **kwargs)`` for a list class: a new instance whose ``__init__`` is inlined (or, when it is
    list's own, applied to its items as ``list(iterable)`` would)."""
    from .callable import run_python_init

    cls = cls_var.value
    graph = cls_var.graph
    cls_var.needs_identity = True
    graph.add_guard(cls_var)
    obj = SequenceInstanceVariable.created_by(cls_var)
    if not run_python_init(cls_var, obj, args, kwargs):
        if getattr(inspect.getattr_static(cls, "__init__"), "__objclass__", None) is not list:
            raise BreakGraphError(f"{cls.__qualname__}.__init__ is not Python code: the instance is built natively")
        sequence_operation(obj, "__init__", args, kwargs)
    return obj


@VariableFactory.register(93)
def _sequence_instance_rule(value: Any, graph: "FunctionGraph", tracker: Tracker) -> VariableBase | None:
    if sequence_base(type(value)) is None or not is_plain_instance(value):
        return None
    known = graph.known_objects.get(id(value))
    if known is not None and known[0] is value and (not known[1].tracker.is_traceable()
                                                    or graph.reached_again(known[1], tracker)):
        return known[1]
    var = SequenceInstanceVariable.from_real(value, graph, tracker)
    graph.note_object(value, var)
    return var

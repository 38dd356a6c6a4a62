"""Containers: tuples, lists and dicts, holding variables."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ....errors import FallbackError, UserCodeError
from ..tracker import DummyTracker, GetItemTracker, Tracker
from .base import VariableBase, VariableFactory
from .basic import ConstantVariable

if TYPE_CHECKING:
    from ...codegen import CodeGen
    from ..function_graph import FunctionGraph
    from ..guard import GuardBuilder


class SequenceVariable(VariableBase):
    """Shared behaviour of tuples and lists; ``py_type`` is the container type rebuilt."""

    py_type: type = tuple
    build_op: str = "BUILD_TUPLE"

    def __init__(self, items: list[VariableBase], graph: "FunctionGraph", tracker: Tracker) -> None:
        super().__init__(graph, tracker)
        self.items = items

    @classmethod
    def from_real(cls, value: Any, graph: "FunctionGraph", tracker: Tracker) -> "SequenceVariable":
        var = cls([], graph, tracker)
        var.items = [VariableFactory.from_value(item, graph, GetItemTracker(var, i) if tracker.is_traceable()
                                                else DummyTracker((var,))) for i, item in enumerate(value)]
        return var

    def get_py_value(self) -> Any:
        return self.py_type(item.get_py_value() for item in self.items)

    def get_py_type(self) -> type:
        return self.py_type

    def length(self) -> int:
        self.graph.add_guard(self)
        return len(self.items)

    def make_guards(self, builder: "GuardBuilder", expr: str) -> list[str]:
        return [f"type({expr}) is {self.py_type.__name__}", f"len({expr}) == {len(self.items)}"]

    def _reconstruct_computed(self, codegen: "CodeGen") -> None:
        for item in self.items:
            codegen.reconstruct(item)
        codegen.build(self.build_op, len(self.items))

    def bool(self) -> bool:
        return self.length() > 0

    def unpack(self) -> list[VariableBase]:
        self.graph.add_guard(self)
        return list(self.items)

    iter_items = unpack

    def getitem(self, key: VariableBase) -> VariableBase:
        if not isinstance(key, ConstantVariable):
            raise FallbackError(f"indexing a {self.py_type.__name__} with {key!r} is not supported yet")
        self.graph.add_guard(self)
        self.graph.add_guard(key)
        index = key.value
        if isinstance(index, slice):
            return type(self)(self.items[index], self.graph, DummyTracker((self, key)))
        try:
            return self.items[index]
        except (IndexError, TypeError) as exc:
            raise UserCodeError(f"user code raised {type(exc).__name__}: {exc}") from None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.items!r})"


class TupleVariable(SequenceVariable):
    py_type = tuple
    build_op = "BUILD_TUPLE"


class ListVariable(SequenceVariable):
    py_type = list
    build_op = "BUILD_LIST"
    is_mutable_container = True


class DictVariable(VariableBase):
    """A dict with constant keys."""

    is_mutable_container = True

    def __init__(self, items: dict[Any, VariableBase], graph: "FunctionGraph", tracker: Tracker) -> None:
        super().__init__(graph, tracker)
        self.items = items

    @classmethod
    def from_real(cls, value: dict, graph: "FunctionGraph", tracker: Tracker) -> "DictVariable":
        var = cls({}, graph, tracker)
        for key, item in value.items():
            if type(key) not in (int, str, float, bool, bytes, type(None)):
                raise FallbackError(f"dict key of type {type(key).__name__} is not supported yet")
            var.items[key] = VariableFactory.from_value(
                item, graph, GetItemTracker(var, key) if tracker.is_traceable() else DummyTracker((var,)))
        return var

    def get_py_value(self) -> Any:
        return {key: item.get_py_value() for key, item in self.items.items()}

    def get_py_type(self) -> type:
        return dict

    def length(self) -> int:
        self.graph.add_guard(self)
        return len(self.items)

    def make_guards(self, builder: "GuardBuilder", expr: str) -> list[str]:
        keys = builder.constant(tuple(self.items))
        return [f"type({expr}) is dict", f"tuple({expr}) == {keys}"]

    def _reconstruct_computed(self, codegen: "CodeGen") -> None:
        for key, item in self.items.items():
            codegen.load_const(key)
            codegen.reconstruct(item)
        codegen.build("BUILD_MAP", len(self.items))

    def bool(self) -> bool:
        return self.length() > 0

    def iter_items(self) -> list[VariableBase]:
        self.graph.add_guard(self)
        return [ConstantVariable(key, self.graph, DummyTracker((self,))) for key in self.items]

    unpack = iter_items

    def getitem(self, key: VariableBase) -> VariableBase:
        if not isinstance(key, ConstantVariable):
            raise FallbackError(f"dict lookup with {key!r} is not supported yet")
        self.graph.add_guard(self)
        self.graph.add_guard(key)
        if key.value not in self.items:
            raise UserCodeError(f"user code raised KeyError: {key.value!r}")
        return self.items[key.value]

    def __repr__(self) -> str:
        return f"DictVariable({self.items!r})"


@VariableFactory.register(95)
def _container_rule(value: Any, graph: "FunctionGraph", tracker: Tracker) -> VariableBase | None:
    if type(value) is tuple:
        return TupleVariable.from_real(value, graph, tracker)
    if type(value) is list:
        return ListVariable.from_real(value, graph, tracker)
    if type(value) is dict:
        return DictVariable.from_real(value, graph, tracker)
    return None


class SizeVariable(ListVariable):
    """A tensor's ``shape``: a `paddle.Size` (a list subclass) of known ints."""

    def __init__(self, items: list[VariableBase], graph: "FunctionGraph", tracker: Tracker) -> None:
        super().__init__(items, graph, tracker)
        import paddle

        self.py_type = paddle.Size

    def _reconstruct_computed(self, codegen: "CodeGen") -> None:
        codegen.push_null()
        codegen.load_const(self.py_type)
        super()._reconstruct_computed(codegen)
        codegen.call(1)

"""What the simulated instances of user subclasses of ``dict`` and ``list`` share (`user_mapping`,
`user_sequence`): the real object or a stand-in of its class, with its items simulated in ``content``."""
from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any

from ....errors import BreakGraphError
from ..tracker import DummyTracker, Tracker
from .base import VariableBase
from .basic import ObjectVariable

if TYPE_CHECKING:
    from ...codegen import CodeGen
    from ..function_graph import FunctionGraph


class BuiltinSubclassInstanceVariable(ObjectVariable):
    """An instance of a user class deriving from a builtin container: ``value`` is the real object (from
    outside) or a stand-in of the class without items (made in the frame, ``cls_var`` its class); ``content``
    (set by the subclass) holds its items."""

    content: VariableBase

    def __init__(self, value: Any, graph: "FunctionGraph", tracker: Tracker,
                 cls_var: VariableBase | None = None) -> None:
        super().__init__(value, graph, tracker)
        self.cls_var = cls_var
        self.created = cls_var is not None

    @property
    def is_mutable_container(self) -> bool:  # type: ignore[override]
        return self.created  # built once in generated code, so every reference is the same object

    def get_py_value(self) -> Any:
        """The real object, for folding (`callable._check_no_hidden_user_code` breaks first when the frame
        changed it): what folding reads of it is its items, every one of which is guarded then."""
        if self.tracker.is_traceable():
            for item in self.content.children():
                self.graph.add_guard(item)
        return self.value

    def get_py_type(self) -> type:
        return type(self.value)

    def record_change(self) -> None:
        """The items of this object from outside the frame are about to change: its final items are written
        back into it after the graph (its structure at the start is guarded by `make_guards`)."""
        if self.created:
            return
        if not self.tracker.is_traceable():
            raise BreakGraphError(f"changing the items of a {type(self.value).__name__} computed during "
                                  "simulation runs natively")
        self.graph.add_guard(self)
        self.graph.side_effects.mutate(self, lambda: None)  # (the items' own changes are undone by ``content``)

    def children(self) -> list[VariableBase]:
        if self.cls_var is None:
            return []  # (read from the frame: rebuilt from its path)
        return [self.cls_var, *self.content.children()]


class BuiltinSubclassMethodVariable(VariableBase):
    """A method of the builtin base (``owner.base``) bound to a `BuiltinSubclassInstanceVariable`
    (``super().__init__``, ``self.append``, ``self.keys``): each subclass simulates it on the items (``call``)."""

    def __init__(self, owner: BuiltinSubclassInstanceVariable, name: str) -> None:
        super().__init__(owner.graph, DummyTracker((owner,)))
        self.owner = owner
        self.name = name

    def children(self) -> list[VariableBase]:
        return [self.owner]

    def _reconstruct_computed(self, codegen: "CodeGen") -> None:
        codegen.load_callable_const(types.MethodType)
        codegen.load_const(getattr(self.owner.base, self.name))  # type: ignore[attr-defined]
        codegen.reconstruct(self.owner)
        codegen.call(2)


__all__ = ["BuiltinSubclassInstanceVariable", "BuiltinSubclassMethodVariable"]

"""What the simulated instances of user subclasses of ``dict`` and ``list`` share (`user_mapping`,
`user_sequence`): the real object or a stand-in of its class, with its items simulated in ``content``."""
from __future__ import annotations

import inspect
import types
from typing import TYPE_CHECKING, Any, ClassVar

from ....errors import BreakGraphError
from ..side_effects import ABSENT
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
    base: type  # the builtin base whose methods are simulated on ``content``
    # Set by each subclass: the builtin classes whose methods it simulates, the names of those methods (the
    # ones that read the items and the ones that change them), and the variable of such a bound method.
    BUILTIN_BASES: ClassVar[tuple[type, ...]]
    READING_METHODS: ClassVar[frozenset[str]]
    CHANGING_METHODS: ClassVar[frozenset[str]]
    METHOD_VARIABLE: ClassVar[type["BuiltinSubclassMethodVariable"]]

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

    # -- the container protocol: a Python method of the class first, else the base's on ``content`` ------
    def _own(self, name: str) -> types.FunctionType | None:
        from .dunder import user_method

        return user_method(self, name)

    def base_method(self, name: str) -> VariableBase | None:
        """``self.<name>`` resolved to the builtin base (``super().name`` past the user's classes, or a C
        method found on the type): a callable acting on the simulated items; None for other names."""
        if name not in self.READING_METHODS and name not in self.CHANGING_METHODS:
            return None
        return self.METHOD_VARIABLE(self, name)

    def getattr(self, name: str) -> VariableBase:
        found = inspect.getattr_static(type(self.value), name, None)
        shadowed = (self.graph.side_effects.lookup_attr(self.value, name) is not ABSENT
                    or name in getattr(self.value, "__dict__", {}))  # (by an attribute of the instance)
        if getattr(found, "__objclass__", None) in self.BUILTIN_BASES and not shadowed:
            method = self.base_method(name)
            if method is None:
                raise BreakGraphError(f"{type(self.value).__name__}.{name}() of the {self.base.__name__} base runs "
                                      "natively")
            return method
        return super().getattr(name)

    def _base_call(self, name: str, args: list[VariableBase]) -> VariableBase:
        return self.METHOD_VARIABLE(self, name).call(args, {})

    def getitem(self, key: VariableBase) -> VariableBase:
        if self._own("__getitem__") is not None:
            return super().getitem(key)
        return self._base_call("__getitem__", [key])

    def setitem(self, key: VariableBase, value: VariableBase | None) -> None:
        name = "__setitem__" if value is not None else "__delitem__"
        if self._own(name) is not None:
            return super().setitem(key, value)
        self._base_call(name, [key] if value is None else [key, value])

    def length(self) -> int:
        if self._own("__len__") is not None:
            return super().length()
        return self.content.length()

    def bool(self) -> bool:
        if self._own("__bool__") is not None or self._own("__len__") is not None:
            return super().bool()
        return self.content.length() > 0

    def unpack(self) -> list[VariableBase]:
        return self.iterator().unpack()  # type: ignore[union-attr]


class BuiltinSubclassMethodVariable(VariableBase):
    """A method of the builtin base (``owner.base``) bound to a `BuiltinSubclassInstanceVariable`
    (``super().__init__``, ``self.append``, ``self.keys``): each subclass simulates it on the items (``call``)."""

    owner: BuiltinSubclassInstanceVariable

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

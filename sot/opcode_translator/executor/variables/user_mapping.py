"""Instances of user classes deriving from ``dict`` or ``OrderedDict`` (a model's ``ModelOutput``, a config dict).

Such an object is two things at once: a user instance (attributes, Python methods and dunders, all simulated
as for any user object: `ObjectVariable`) and a mapping whose items live in the C dict. The items are held
by a simulated dict (``content``, the same `DictVariable` that models a plain dict), which the builtin
methods of the mapping base act on: ``super().__setitem__`` in the class's own ``__setitem__``,
``self.keys()``, ``len(self)``, ``k in self``, ``for k in self``, ``dict.__getitem__(self, k)``... A Python
method of the class wins over the builtin one, as in Python.

Made in the frame, the object is built in generated code by the base's own ``__new__`` and ``__setitem__``
(`runtime.new_mapping_instance`, with the final items, past any Python ``__init__``/``__setitem__`` whose
effects the simulation already accounted for), then its attribute stores are replayed. Received from
outside, it is guarded by its class and its keys (in order); its items are read with the base's
``__getitem__`` (never the class's own); changed, its final items are written back into it after the graph
(`runtime.write_back_mapping`), as for a dict.
"""
from __future__ import annotations

import collections
import inspect
from typing import TYPE_CHECKING, Any

from ....errors import BreakGraphError, FallbackError, UserCodeError
from ..tracker import DummyTracker, Tracker
from .base import HEAPTYPE, VariableBase, VariableFactory
from .basic import ConstantVariable, ObjectVariable, is_plain_instance
from .builtin_subclass import BuiltinSubclassInstanceVariable, BuiltinSubclassMethodVariable
from .container import DictVariable, DictViewVariable, ListVariable, _dict_setitem, _is_constant_key, dict_key

if TYPE_CHECKING:
    from ...codegen import CodeGen
    from ..function_graph import FunctionGraph
    from ..guard import GuardBuilder

# The builtin mapping classes a user class may derive from (a defaultdict's factory would need its own
# handling). Nearest first: an OrderedDict subclass is built and read through OrderedDict's methods.
MAPPING_BASES = (collections.OrderedDict, dict)
# Builtin methods of the bases that only read the items.
_READING_METHODS = frozenset({"keys", "values", "items", "get", "__getitem__", "__contains__", "__len__",
                              "__iter__"})
# ... and those that change them.
_CHANGING_METHODS = frozenset({"__setitem__", "__delitem__", "update", "pop", "setdefault", "clear", "popitem",
                               "__init__", "move_to_end"})


def mapping_base(cls: Any) -> type | None:
    """The builtin mapping base of a user class whose instances `MappingInstanceVariable` models (plain
    metaclass, the base's own ``__new__``, every other class of the MRO a Python class), else None."""
    if not isinstance(cls, type) or type(cls) is not type or not cls.__flags__ & HEAPTYPE:
        return None
    base = next((klass for klass in cls.__mro__ if klass in MAPPING_BASES), None)
    if base is None or cls.__new__ is not base.__new__:
        return None
    builtins_in_mro = {klass for klass in cls.__mro__ if not klass.__flags__ & HEAPTYPE}
    return base if builtins_in_mro <= {*MAPPING_BASES, object} else None


class MappingItemTracker(Tracker):
    """``base.__getitem__(owner, key)``: an item of a mapping instance read with the builtin base's lookup, not
    the class's own ``__getitem__`` (which may compute something else, or cost a Python call per guard)."""

    def __init__(self, owner: VariableBase, base: type, key: Any) -> None:
        self.inputs = (owner,)
        self.owner = owner
        self.base = base
        self.key = key

    def guard_expr(self, builder: "GuardBuilder") -> str:
        getter = builder.constant(self.base.__getitem__)
        return f"{getter}({builder.expr_of(self.owner)}, {builder.constant(self.key)})"

    def gen_load(self, codegen: "CodeGen") -> None:
        codegen.load_callable_const(self.base.__getitem__)
        codegen.reconstruct(self.owner)
        codegen.load_const(self.key)
        codegen.call(2)

    def describe(self) -> str:
        return f"{self.base.__name__}.__getitem__({self.owner.tracker.describe()}, {self.key!r})"

    def slot(self) -> tuple[VariableBase, Any] | None:
        return getattr(self.owner, "content", None), self.key


class MappingInstanceVariable(BuiltinSubclassInstanceVariable):
    """An instance of a user class deriving from ``dict``/``OrderedDict``: ``value`` is the real object (from
    outside) or a stand-in of the class without items (made in the frame); ``content`` holds its items."""

    def __init__(self, value: Any, graph: "FunctionGraph", tracker: Tracker, base: type,
                 cls_var: VariableBase | None = None) -> None:
        super().__init__(value, graph, tracker, cls_var)
        self.base = base
        self.content = DictVariable({}, graph, DummyTracker((self,)))
        self.initial_keys: tuple | None = None

    @classmethod
    def created_by(cls, cls_var: VariableBase, base: type) -> "MappingInstanceVariable":
        klass = cls_var.get_py_value()
        return cls(base.__new__(klass), cls_var.graph, DummyTracker((cls_var,)), base, cls_var)

    @classmethod
    def from_real(cls, value: Any, graph: "FunctionGraph", tracker: Tracker, base: type) -> "MappingInstanceVariable":
        var = cls(value, graph, tracker, base)
        if tracker.is_traceable():
            var.content.unread_paths = []  # (its items are read through ``content``: see `ItemsReadTracked`)
        for key in base.keys(value):
            item_tracker = MappingItemTracker(var, base, key) if tracker.is_traceable() else DummyTracker((var,))
            var.content._items[key] = VariableFactory.from_value(base.__getitem__(value, key), graph, item_tracker)
        var.initial_keys = tuple(var.content._items)
        return var

    # -- guards and reconstruction ---------------------------------------------------------------------
    def make_guards(self, builder: "GuardBuilder", expr: str) -> list[str]:
        guards = super().make_guards(builder, expr)
        if self.initial_keys is not None:  # its structure: which fields are set, in which order
            keys = builder.constant(self.base.keys)
            guards.append(f"tuple({keys}({expr})) == {builder.constant(self.initial_keys)}")
        return guards

    def write_back(self, codegen: "CodeGen") -> None:
        from ...runtime import write_back_mapping

        items = DictVariable(dict(self.content.items), self.graph, DummyTracker())
        codegen.call_helper(write_back_mapping, [self, items])
        codegen.emit("POP_TOP")

    def write_back_values(self) -> list[VariableBase]:
        return self.content.children()  # (its values, and the tensors among its keys)

    def _reconstruct_computed(self, codegen: "CodeGen") -> None:
        from ...runtime import new_mapping_instance

        if self.cls_var is None:
            super()._reconstruct_computed(codegen)
            return
        if any(item is self for item in self.content.items.values()):
            raise FallbackError(f"a {type(self.value).__name__} holding itself is not rebuilt yet")
        items = DictVariable(dict(self.content.items), self.graph, DummyTracker(tuple(self.content.items.values())))
        codegen.call_helper(new_mapping_instance, [self.cls_var, items])

    def iterator(self) -> "VariableBase | None":
        if self._own("__iter__") is not None:
            return super().iterator()
        from .iterator import iterate

        return iterate(ListVariable(self.content.iter_items(), self.graph, DummyTracker((self,))))

    def mapping_items(self) -> dict[Any, VariableBase]:
        """What ``dict(self)`` copies: the raw items when iteration is dict's own (CPython's fast path), else
        through the mapping protocol, ``self.keys()`` then ``self[key]`` (maybe the class's own methods)."""
        if inspect.getattr_static(type(self.value), "__iter__") is dict.__iter__:
            self.graph.add_guard(self.content)
            return dict(self.content.items)
        return protocol_items(self)

    def __repr__(self) -> str:
        return f"MappingInstanceVariable({type(self.value).__name__}: {self.content.items!r})"


def protocol_items(var: VariableBase) -> dict[Any, VariableBase]:
    """The items a dict copies from a mapping that is not a plain dict (``dict(m)``, ``{**m}``, ``f(**m)``):
    ``m.keys()``, then ``m[key]`` for each (the object's own methods, simulated)."""
    items = {}
    for key in var.getattr("keys").call([], {}).unpack():
        items[dict_key(key)] = var.getitem(key)
    return items


def is_mapping_like(var: VariableBase) -> bool:
    """A user object a dict can be made from: an instance of a user class with ``keys`` (``UserDict``...)."""
    from .dunder import defines, is_user_instance

    return is_user_instance(var) and defines(var, "keys") and defines(var, "__getitem__")


class MappingMethodVariable(BuiltinSubclassMethodVariable):
    """A builtin method of the mapping base bound to a `MappingInstanceVariable` (``super().__setitem__``,
    ``self.keys``): simulated on its items."""

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        return mapping_operation(self.owner, self.name, args, kwargs)


MappingInstanceVariable.BUILTIN_BASES = MAPPING_BASES
MappingInstanceVariable.READING_METHODS = _READING_METHODS
MappingInstanceVariable.CHANGING_METHODS = _CHANGING_METHODS
MappingInstanceVariable.METHOD_VARIABLE = MappingMethodVariable


def mapping_operation(owner: MappingInstanceVariable, name: str, args: list[VariableBase],
                      kwargs: dict[str, VariableBase]) -> VariableBase:
    """``base.<name>(owner, *args, **kwargs)`` on the simulated items of ``owner``."""
    graph = owner.graph
    content = owner.content
    if name in _CHANGING_METHODS and not owner.created:
        owner.record_change()
    none = ConstantVariable(None, graph, DummyTracker())
    # OrderedDict's own methods that add items do it with ``self[key] = value``: the class's ``__setitem__``
    item_methods_overridden = owner.base is collections.OrderedDict and any(
        owner._own(dunder) is not None for dunder in ("__getitem__", "__setitem__", "__delitem__"))
    if name in ("__init__", "update"):  # as ``dict(*args, **kwargs)``, merged in
        from .callable import BUILTIN_DISPATCH

        made = BUILTIN_DISPATCH[dict](graph, args, kwargs)
        for key, value in made.items.items():
            key_var = ConstantVariable(key, graph, DummyTracker())
            if item_methods_overridden:
                owner.setitem(key_var, value)
            else:
                _dict_setitem(content, key_var, value)
        return none
    if item_methods_overridden and name in ("setdefault", "pop", "popitem"):
        raise BreakGraphError(f"{owner.base.__name__}.{name}() through the item methods of "
                              f"{type(owner.value).__name__} runs natively")
    if name == "__getitem__":
        _expect(name, args, kwargs, 1)
        key = dict_key(args[0], "lookup with")
        graph.add_guard(content)
        if key in content.items:
            return content.items[key]
        missing = owner._own("__missing__")
        if missing is not None:
            from .dunder import call_method

            return call_method(owner, missing, [args[0]])
        raise UserCodeError(f"user code raised KeyError: {key!r}", original=KeyError(key))
    if name in ("__setitem__", "__delitem__"):
        _expect(name, args, kwargs, 2 if name == "__setitem__" else 1)
        _dict_setitem(content, args[0], args[1] if name == "__setitem__" else None)
        return none
    if name == "__contains__":
        _expect(name, args, kwargs, 1)
        key = dict_key(args[0], "membership test with")
        graph.add_guard(content)
        return ConstantVariable(key in content.items, graph, DummyTracker((owner,)))
    if name == "__len__":
        _expect(name, args, kwargs, 0)
        return ConstantVariable(content.length(), graph, DummyTracker((owner,)))
    if name == "__iter__":
        _expect(name, args, kwargs, 0)
        from .iterator import iterate

        return iterate(ListVariable(content.iter_items(), graph, DummyTracker((owner,))))
    if name in ("keys", "values", "items"):
        _expect(name, args, kwargs, 0)
        return DictViewVariable(content, name, owner, owner.base)
    from .container import ContainerMethodVariable, ordered_dict_method

    if owner.base is collections.OrderedDict:  # (``content`` is a plain dict: OrderedDict's own methods first)
        ordered = ordered_dict_method(content, name, args, kwargs)
        if ordered is not None:
            return ordered
    return ContainerMethodVariable(content, name).call(args, kwargs)


def _expect(name: str, args: list[VariableBase], kwargs: dict[str, VariableBase], count: int) -> None:
    if kwargs or len(args) != count:
        raise FallbackError(f"{name}() with unusual arguments")


def _unbound_base_method(base: type, name: str) -> Any:
    """``dict.<name>(obj, ...)`` / ``OrderedDict.<name>(obj, ...)`` called explicitly: on the items of a user
    mapping instance, or on a simulated dict (of that very class when the method changes it)."""

    def rule(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        owner = args[0] if args else None
        if isinstance(owner, MappingInstanceVariable):
            return mapping_operation(owner, name, args[1:], kwargs)
        if isinstance(owner, DictVariable) and name != "__init__" and (
                name in _READING_METHODS or owner.get_py_type() is base):
            return _dict_operation(owner, name, args[1:], kwargs)
        raise BreakGraphError(f"{base.__name__}.{name}() on {owner!r} runs natively")

    return rule


def _dict_operation(owner: DictVariable, name: str, args: list[VariableBase],
                    kwargs: dict[str, VariableBase]) -> VariableBase:
    """``dict.<name>(d, *args)`` on a simulated dict: its protocol for the dunders, its method otherwise."""
    none = ConstantVariable(None, owner.graph, DummyTracker())
    dunder_arity = {"__getitem__": 1, "__setitem__": 2, "__delitem__": 1, "__contains__": 1, "__len__": 0,
                    "__iter__": 0}
    if name not in dunder_arity:
        return owner.getattr(name).call(args, kwargs)
    _expect(name, args, kwargs, dunder_arity[name])
    if name == "__getitem__":
        return owner.getitem(args[0])
    if name in ("__setitem__", "__delitem__"):
        owner.setitem(args[0], args[1] if name == "__setitem__" else None)
        return none
    if name == "__contains__":
        from .container import _key_membership

        found = _key_membership(owner, args[0])
        if found is None:
            raise FallbackError(f"dict.__contains__ with {args[0]!r}")
        return found
    if name == "__len__":
        return ConstantVariable(owner.length(), owner.graph, DummyTracker((owner,)))
    from .iterator import iterate

    return iterate(owner)


def _register_unbound_methods() -> None:
    from .callable import BUILTIN_DISPATCH

    for base in MAPPING_BASES:
        for name in _READING_METHODS | _CHANGING_METHODS:
            method = base.__dict__.get(name)
            if method is not None:
                BUILTIN_DISPATCH[method] = _unbound_base_method(base, name)


_register_unbound_methods()


def instantiate_mapping(cls_var: ObjectVariable, base: type, args: list[VariableBase],
                        kwargs: dict[str, VariableBase]) -> VariableBase:
    """``cls(*args, **kwargs)`` for a mapping class: a new instance whose ``__init__`` is inlined (or, when the
    base's own, applied to its items as ``dict(*args, **kwargs)`` would)."""
    from .callable import run_python_init

    cls = cls_var.value
    graph = cls_var.graph
    cls_var.needs_identity = True
    graph.add_guard(cls_var)
    obj = MappingInstanceVariable.created_by(cls_var, base)
    if not run_python_init(cls_var, obj, args, kwargs):
        if getattr(inspect.getattr_static(cls, "__init__"), "__objclass__", None) not in MAPPING_BASES:
            raise BreakGraphError(f"{cls.__qualname__}.__init__ is not Python code: the instance is built natively")
        mapping_operation(obj, "__init__", args, kwargs)
    return obj


@VariableFactory.register(93)
def _mapping_instance_rule(value: Any, graph: "FunctionGraph", tracker: Tracker) -> VariableBase | None:
    base = mapping_base(type(value))
    if base is None or not is_plain_instance(value) or not all(_is_constant_key(key) for key in base.keys(value)):
        return None  # (keys that are not constants: an opaque user object)
    known = graph.known_objects.get(id(value))
    if known is not None and known[0] is value and (not known[1].tracker.is_traceable()
                                                    or graph.reached_again(known[1], tracker)):
        return known[1]
    var = MappingInstanceVariable.from_real(value, graph, tracker, base)
    graph.note_object(value, var)
    return var

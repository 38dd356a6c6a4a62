"""Containers: tuples, lists and dicts, holding variables."""
from __future__ import annotations

import collections
import enum
import functools
import itertools
import operator
from typing import TYPE_CHECKING, Any, Callable

from ....errors import FallbackError, UserCodeError
from ....eval_frame_ext import clone_set_layout
from ..tracker import ConstTracker, DummyTracker, GetAttrTracker, GetItemTracker, Tracker
from .base import VariableBase, VariableFactory
from .basic import ConstantVariable, TensorVariable

if TYPE_CHECKING:
    from ...codegen import CodeGen
    from ..function_graph import FunctionGraph
    from ..guard import GuardBuilder


class ItemsReadTracked:
    """A container whose ``items`` (its item variables) the simulation may never read.

    A container reached from the frame (`from_real`) makes a variable for every item at once, and an item
    that is an object the translation already knows (``xs[k]`` is the loop item ``t`` a loop body function
    receives) shares that object's variable. Guarding that both paths still reach one object only matters
    when the simulation reads the items: until then ``unread_paths`` keeps the paths into this container
    that reach a known object (`FunctionGraph.reached_again`), and the first read of ``items`` turns them
    into guards (`FunctionGraph.contents_read`); indexing reads one item only. Its length and a dict's keys
    are no read of the items. ``None``: not tracked (built during simulation) or already read.
    """

    unread_paths: "list[tuple[VariableBase, Tracker]] | None" = None
    _items: Any

    @property
    def items(self) -> Any:
        if self.unread_paths is not None:
            self.graph.contents_read(self)  # type: ignore[attr-defined]
        return self._items

    @items.setter
    def items(self, value: Any) -> None:
        if self.unread_paths is not None:
            self.graph.contents_read(self)  # type: ignore[attr-defined]
        self._items = value

    def track_reads(self) -> None:
        """Called by `from_real` before the items are made (their variables may register paths here)."""
        if self.tracker.is_traceable():  # type: ignore[attr-defined]
            self.unread_paths = []


class SequenceVariable(ItemsReadTracked, VariableBase):
    """Shared behaviour of tuples and lists; ``py_type`` is the container type rebuilt."""

    py_type: type = tuple
    build_op: str = "BUILD_TUPLE"

    def __init__(self, items: list[VariableBase], graph: "FunctionGraph", tracker: Tracker) -> None:
        super().__init__(graph, tracker)
        self.items = items
        self.initial_length: int | None = None  # for a container from the frame: its length at the start
        self.length_used = False  # the simulation depended on the length (or the items): guard it

    @classmethod
    def from_real(cls, value: Any, graph: "FunctionGraph", tracker: Tracker) -> "SequenceVariable":
        var = cls([], graph, tracker)
        var.track_reads()
        var._items = [VariableFactory.from_value(item, graph, GetItemTracker(var, i) if tracker.is_traceable()
                                                 else DummyTracker((var,))) for i, item in enumerate(value)]
        var.initial_length = len(var._items)
        var.real = value if tracker.is_traceable() else None
        return var

    def get_py_value(self) -> Any:
        # The whole value is read (e.g. folded into a constant): the length and every item are guarded.
        self.length_used = True
        for item in self.items:
            self.graph.add_guard(item)
        return self.py_type(item.get_py_value() for item in self.items)

    def get_py_type(self) -> type:
        return self.py_type

    def length(self) -> int:
        self.length_used = True
        self.graph.add_guard(self)
        return len(self._items)

    def make_guards(self, builder: "GuardBuilder", expr: str) -> list[str]:
        length = self.initial_length if self.initial_length is not None else len(self._items)
        guards = [f"type({expr}) is {self.py_type.__name__}"]
        if self.length_used or self.py_type is tuple:
            guards.append(f"len({expr}) == {length}")
        return guards

    def _reconstruct_computed(self, codegen: "CodeGen") -> None:
        for item in self.items:
            codegen.reconstruct(item)
        codegen.build(self.build_op, len(self.items))

    def bool(self) -> bool:
        return self.length() > 0

    def unpack(self) -> list[VariableBase]:
        self.length_used = True
        self.graph.add_guard(self)
        return list(self.items)

    iter_items = unpack

    def getitem(self, key: VariableBase) -> VariableBase:
        if not isinstance(key, ConstantVariable):
            raise FallbackError(f"indexing a {self.py_type.__name__} with {key!r} is not supported yet")
        self.length_used = True
        self.graph.add_guard(self)
        self.graph.add_guard(key)
        index = key.value
        if isinstance(index, slice):
            return type(self)(self.items[index], self.graph, DummyTracker((self, key)))
        try:
            item = self._items[index]
        except (IndexError, TypeError) as exc:
            if issubclass(self.py_type, tuple):  # (a tuple's errors say "tuple index out of range")
                try:
                    tuple(self._items)[index]
                except (IndexError, TypeError) as tuple_exc:
                    exc = tuple_exc
            raise UserCodeError(f"user code raised {type(exc).__name__}: {exc}", original=exc) from None
        if self.unread_paths is not None:  # (only this item is read)
            self.graph.contents_read(self, index % len(self._items))
        return item

    def children(self) -> list[VariableBase]:
        return list(self.items)

    def getattr(self, name: str) -> VariableBase:
        return ContainerMethodVariable(self, name)

    def setitem(self, key: VariableBase, value: VariableBase | None) -> None:
        """``self[key] = value`` (``del self[key]`` when value is None)."""
        _sequence_setitem(self, key, value)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._items!r})"


class TupleVariable(SequenceVariable):
    py_type = tuple
    build_op = "BUILD_TUPLE"


class ListVariable(SequenceVariable):
    py_type = list
    build_op = "BUILD_LIST"
    is_mutable_container = True
    appended_only = True  # external list: mutated only by append/extend so far

    def write_back(self, codegen: "CodeGen") -> None:
        """Make the real list hold the simulated content (it came from outside and was mutated)."""
        _list_write_back(self, codegen)

    def write_back_values(self) -> list[VariableBase]:
        """The items `write_back` reads: only the appended ones for a list only appended to (its earlier
        items are neither guarded nor read, and the next call's list may be shorter)."""
        if self.appended_only and self.initial_length is not None:
            return self.items[self.initial_length:]
        return list(self.items)


_CONSTANT_KEY_TYPES = (int, str, float, bool, bytes, type(None))


def _is_constant_key(key: Any) -> bool:
    """A key the simulated dict can hold as a Python value: a constant, an object key (`is_object_key`), or a
    plain tuple of such keys."""
    if type(key) is tuple:
        return all(_is_constant_key(part) for part in key)
    return type(key) in _CONSTANT_KEY_TYPES or is_object_key(key)


def is_object_key(key: Any) -> bool:
    """A key that is not a constant but that the simulated dict can hold as itself, the real object: an enum
    member (``{Activation.GELU: F.gelu}``), a class (``{nn.Linear: init_linear}``), a function
    (``{F.relu: 1.0}``, a registry of the user's functions) or any object compared by identity (a layer, a
    translated function), whose hash and equality are those of its identity (or of its plain ``int``/``str``
    value for an ``IntEnum``/``StrEnum``), so that looking it up in the simulated dict finds what the real
    lookup finds, and runs no user code. Generated code loads such a key as a constant (it lives as long as
    the translation) and guards compare it by identity."""
    cls = type(key)
    if isinstance(key, enum.Enum):
        return all(getattr(cls, name) in _PURE_KEY_METHODS[name] for name in ("__hash__", "__eq__"))
    if isinstance(key, type):
        return cls.__hash__ is type.__hash__ and cls.__eq__ is type.__eq__
    return cls.__hash__ is object.__hash__ and cls.__eq__ is object.__eq__


# Hash and equality an object key may have: identity's (object's, also type's), enum's hash (of the member's
# name) and those of int and str (the values of IntEnum / StrEnum members).
_PURE_KEY_METHODS = {
    "__hash__": (object.__hash__, enum.Enum.__hash__, int.__hash__, str.__hash__),
    "__eq__": (object.__eq__, int.__eq__, str.__eq__),
}


class DictVariable(ItemsReadTracked, VariableBase):
    """A dict with constant keys."""

    is_mutable_container = True

    def __init__(self, items: dict[Any, VariableBase], graph: "FunctionGraph", tracker: Tracker) -> None:
        super().__init__(graph, tracker)
        self.items = items
        self.initial_keys: tuple | None = None  # for a dict from the frame: its keys at the start

    @classmethod
    def _empty_like(cls, value: dict, graph: "FunctionGraph", tracker: Tracker) -> "DictVariable":
        return cls({}, graph, tracker)

    @classmethod
    def from_real(cls, value: dict, graph: "FunctionGraph", tracker: Tracker) -> "DictVariable":
        var = cls._empty_like(value, graph, tracker)
        var.track_reads()
        for index, (key, item) in enumerate(value.items()):
            if _is_constant_key(key):
                item_tracker: Tracker = GetItemTracker(var, key) if tracker.is_traceable() else DummyTracker((var,))
            elif _is_real_tensor(key) and tracker.is_traceable():  # (by position: a tensor is no constant)
                key = TensorKey.of(VariableFactory.from_value(key, graph, NthItemTracker(var, index, True)))
                item_tracker = NthItemTracker(var, index, False)
            else:
                raise FallbackError(f"dict key of type {type(key).__name__} is not supported yet")
            var._items[key] = VariableFactory.from_value(item, graph, item_tracker)
        var.initial_keys = tuple(var._items)
        var.real = value if tracker.is_traceable() else None
        return var

    def get_py_value(self) -> Any:
        for item in self.items.values():  # the whole value is read: every item is guarded
            self.graph.add_guard(item)
        return {py_key(key): item.get_py_value() for key, item in self.items.items()}

    def get_py_type(self) -> type:
        return dict

    def length(self) -> int:
        self.graph.add_guard(self)
        return len(self._items)

    def make_guards(self, builder: "GuardBuilder", expr: str) -> list[str]:
        return [f"type({expr}) is dict", keys_guard(builder, expr, self.initial_keys, self._items)]

    def _reconstruct_computed(self, codegen: "CodeGen") -> None:
        for key, item in self.items.items():
            load_key(codegen, key)
            codegen.reconstruct(item)
        codegen.build("BUILD_MAP", len(self.items))

    def bool(self) -> bool:
        return self.length() > 0

    def iter_items(self) -> list[VariableBase]:
        self.graph.add_guard(self)
        return [key_variable(key, self.graph, DummyTracker((self,))) for key in self._items]

    unpack = iter_items

    def getitem(self, key: VariableBase) -> VariableBase:
        value = dict_key(key, "dict lookup with", tensors=True)
        self.graph.add_guard(self)
        if value not in self._items:
            raise UserCodeError(f"user code raised KeyError: {value!r}", original=KeyError(value))
        if self.unread_paths is not None:  # (only this item is read)
            self.graph.contents_read(self, value)
        return self._items[value]

    def children(self) -> list[VariableBase]:
        return [*self.key_variables(), *self.items.values()]

    def key_variables(self) -> list[VariableBase]:
        """The variables of its tensor keys (which generated code needs, to rebuild the dict)."""
        return [part for key in self._items if has_tensor_key(key) for part in _tensor_key_vars(key)]

    def getattr(self, name: str) -> VariableBase:
        return ContainerMethodVariable(self, name)

    def setitem(self, key: VariableBase, value: VariableBase | None) -> None:
        _dict_setitem(self, key, value)

    def write_back(self, codegen: "CodeGen") -> None:
        _dict_write_back(self, codegen)

    def write_back_values(self) -> list[VariableBase]:
        return [*self.key_variables(), *self.items.values()]

    def __repr__(self) -> str:
        return f"DictVariable({self._items!r})"


class DictViewVariable(VariableBase):
    """``d.keys()``/``d.values()``/``d.items()``: a live view of a simulated dict's items (iterated after the
    dict changed, it sees the change, as the real view does). Leaving the frame, it is the real view of the
    rebuilt mapping (``owner_type.keys(owner)``: a ``dict_keys``, an ``odict_keys``...), whose content is by
    then the final one, as eager's view's is."""

    def __init__(self, mapping: DictVariable, kind: str, owner: VariableBase, owner_type: type) -> None:
        super().__init__(mapping.graph, DummyTracker((owner,)))
        self.mapping = mapping
        self.kind = kind
        self.owner = owner  # what generated code rebuilds: the dict itself, or the object whose items it holds
        self.owner_type = owner_type

    def iter_items(self) -> list[VariableBase]:
        mapping = self.mapping
        mapping.graph.add_guard(mapping)
        keys = [key_variable(key, self.graph, DummyTracker((self,))) for key in mapping.items]
        if self.kind == "keys":
            return keys
        if self.kind == "values":
            return list(mapping.items.values())
        return [TupleVariable([key, value], self.graph, DummyTracker((self,)))
                for key, value in zip(keys, mapping.items.values())]

    unpack = iter_items

    def length(self) -> int:
        return self.mapping.length()

    def bool(self) -> bool:
        return self.length() > 0

    def contains(self, item: VariableBase) -> VariableBase | None:
        """``item in view``: a key lookup for ``keys()`` (the values are not read); for ``items()``, the lookup
        of the pair's key, then its value compared as the interpreter does (`same_or_equal`); else, when
        tensors take part, a scan (never a folded or recorded ``in`` on tensors). None otherwise (folded)."""
        if self.kind == "keys":
            return _key_membership(self.mapping, item)
        found = self._pair_membership(item) if self.kind == "items" else None
        return found if found is not None else _membership_with_tensors(self, self.iter_items(), item)

    def _pair_membership(self, item: VariableBase) -> VariableBase | None:
        if not (isinstance(item, TupleVariable) and len(item.items) == 2):
            return None
        key_var, value = item.items
        found = _key_membership(self.mapping, key_var)
        if found is None or not found.value:
            return found
        mapping_value = self.mapping.items[dict_key(key_var)]
        return ConstantVariable(same_or_equal(mapping_value, value), self.graph, DummyTracker((self, item)))

    def get_py_value(self) -> Any:
        """A real view of the same kind over a dict with the same content (so folded operations, equality
        and set operations of ``keys()`` included, behave as on the real one)."""
        self.graph.add_guard(self.mapping)
        if self.kind == "keys":  # (the values are not read: they may be tensors computed in the frame)
            return dict.fromkeys(py_key(key) for key in self.mapping.items).keys()
        content = dict(zip((py_key(key) for key in self.mapping.items),
                           (item.get_py_value() for item in self.mapping.items.values())))
        return getattr(content, self.kind)()

    def get_py_type(self) -> type:
        return type(getattr(self.owner_type(), self.kind)())

    def getitem(self, key: VariableBase) -> VariableBase:
        message = f"'{self.get_py_type().__name__}' object is not subscriptable"
        raise UserCodeError(f"user code raised TypeError: {message}", original=TypeError(message))

    def children(self) -> list[VariableBase]:
        return [self.owner]

    def _reconstruct_computed(self, codegen: "CodeGen") -> None:
        codegen.load_callable_const(getattr(self.owner_type, self.kind))
        codegen.reconstruct(self.owner)
        codegen.call(1)

    def __repr__(self) -> str:
        return f"DictViewVariable({self.kind} of {self.mapping!r})"


@VariableFactory.register(95)
def _container_rule(value: Any, graph: "FunctionGraph", tracker: Tracker) -> VariableBase | None:
    if type(value) is tuple:
        return TupleVariable.from_real(value, graph, tracker)
    if type(value) is collections.Counter and not all(_is_constant_key(key) for key in value):
        return None  # (counting objects or tensors: an opaque object, as a user dict subclass would be)
    if type(value) in (list, dict, collections.OrderedDict, collections.defaultdict, collections.Counter):
        # One variable per real mutable container, however it is reached: mutations through one path
        # must be seen through the others.
        known = graph.known_objects.get(id(value))
        if known is not None and graph.reached_again(known[1], tracker):
            return known[1]
        if type(value) is collections.Counter:
            from .counter_rules import CounterVariable

            var: VariableBase = CounterVariable.from_real(value, graph, tracker)
        elif type(value) in (collections.OrderedDict, collections.defaultdict):
            var = TypedDictVariable.from_real(value, graph, tracker)
        else:
            var = (ListVariable if type(value) is list else DictVariable).from_real(value, graph, tracker)
        graph.note_object(value, var)
        return var
    return None


class SizeVariable(ListVariable):
    """A tensor's ``shape``: a `paddle.Size` (a list subclass) of known ints."""

    def __init__(self, items: list[VariableBase], graph: "FunctionGraph", tracker: Tracker) -> None:
        super().__init__(items, graph, tracker)
        import paddle

        self.py_type = paddle.Size

    def _reconstruct_computed(self, codegen: "CodeGen") -> None:
        codegen.load_callable_const(self.py_type)
        super()._reconstruct_computed(codegen)
        codegen.call(1)


# -- methods and mutation ------------------------------------------------------------------------------------
def _record_mutation(var: VariableBase, appends_only: bool = False) -> None:
    """Snapshot ``var``'s simulated content so a rollback can restore it; external containers are also
    marked for write-back. A list from outside that is only appended to is written back by appending, so
    its length and items need no guard (a log list growing at every call does not retranslate)."""
    if isinstance(var, DictVariable):
        old = dict(var.items)

        def undo() -> None:
            var.items.clear()
            var.items.update(old)
    else:
        old_items = list(var.items)
        old_pure = getattr(var, "appended_only", False)

        def undo() -> None:
            var.items[:] = old_items
            if isinstance(var, ListVariable):
                var.appended_only = old_pure

        if isinstance(var, ListVariable):
            var.appended_only = var.appended_only and appends_only
    if not (isinstance(var, ListVariable) and var.appended_only):
        if isinstance(var, SequenceVariable):
            var.length_used = True
        var.graph.add_guard(var)
    var.graph.side_effects.mutate(var, undo)


def _read_all(var: SequenceVariable) -> list[Any]:
    """The Python values of every item: the answer depends on the length too (``[].count(3)`` is 0, not
    the count of the next call's list), so both are guarded."""
    var.length_used = True
    var.graph.add_guard(var)
    return list(var.get_py_value())


def _constant_value(var: VariableBase, what: str) -> Any:
    if not isinstance(var, ConstantVariable):
        raise FallbackError(f"{what} {var!r} is not a Python constant")
    var.graph.add_guard(var)
    return var.value


def dict_key(var: VariableBase, what: str = "dict key", tensors: bool = False) -> Any:
    """The Python value of a dict key: a constant, or a plain tuple of such keys (``table[(n, "k")]``). Every
    part is guarded, since the key decides which item is read. ``tensors``: a tensor is a key too (in a dict:
    eager hashes a tensor by identity), held as a `TensorKey`."""
    if type(var) is TupleVariable:
        return tuple(dict_key(item, what, tensors) for item in var.items)
    if tensors and isinstance(var, TensorVariable):
        return TensorKey.of(var)
    if _holds_object_key(var):
        var.needs_identity = True  # (which object it is decides the item read)
        var.graph.add_guard(var)
        return var.value
    return _constant_value(var, what)


def _holds_object_key(var: VariableBase) -> bool:
    from .basic import ObjectVariable

    return isinstance(var, ObjectVariable) and is_object_key(var.value)


class TensorKey:
    """A tensor as a key of a simulated dict. ``Tensor.__hash__`` is by identity (and the lookup compares
    identity first), so a dict finds a tensor key only by the very tensor: here by its variable, which is one
    variable per tensor only when `of` could check it."""

    __slots__ = ("var",)

    def __init__(self, var: VariableBase) -> None:
        self.var = var

    @classmethod
    def of(cls, var: Any) -> "TensorKey":
        """The key of the tensor ``var``. Two variables are two tensors when one is made by an op returning a
        new tensor, or when both come from outside the frame and are different objects (guarded to stay
        so: `FunctionGraph.add_distinct`); otherwise (an op that may hand back its input, a tensor
        received twice by paths that did not meet), the frame runs natively."""
        from .inplace import may_return_an_input

        graph = var.graph
        if var.fresh and not may_return_an_input(var):
            return cls(var)
        if var.value is None or not var.tracker.is_traceable():
            raise FallbackError("a dict keyed by a tensor that may be another tensor itself is not simulated")
        known = graph.tensor_keys_from_outside
        if not any(other is var for other in known):
            for other in known:
                if other.value is var.value:
                    raise FallbackError("one tensor as two dict keys of different variables is not simulated")
                graph.add_distinct(other, var)
            known.append(var)
            graph.add_guard(var)
        return cls(var)

    def __hash__(self) -> int:
        return id(self.var)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TensorKey) and other.var is self.var

    def __repr__(self) -> str:
        return f"TensorKey({self.var!r})"


def has_tensor_key(key: Any) -> bool:
    if type(key) is tuple:
        return any(has_tensor_key(part) for part in key)
    return isinstance(key, TensorKey)


def _is_real_tensor(value: Any) -> bool:
    import paddle

    return isinstance(value, paddle.Tensor)


class _TensorSlot:
    """Where a dict's key layout (`key_layout`) has a tensor."""

    def __repr__(self) -> str:
        return "<tensor>"


TENSOR_SLOT = _TensorSlot()


def key_layout(mapping: dict) -> tuple:
    """The keys of ``mapping`` in order, each tensor replaced by `TENSOR_SLOT` (which tensors they are is
    guarded through their own paths, `NthItemTracker`)."""
    return tuple(TENSOR_SLOT if _is_real_tensor(key) else key for key in mapping)


def keys_guard(builder: "GuardBuilder", expr: str, initial: tuple | None, items: dict) -> str:
    """The guard on a dict's keys at the start: ``tuple(d) == keys``; with tensor keys, its `key_layout`."""
    keys = initial if initial is not None else tuple(items)
    if not any(has_tensor_key(key) for key in keys):
        return f"tuple({expr}) == {builder.constant(keys)}"
    layout = tuple(TENSOR_SLOT if isinstance(key, TensorKey) else key for key in keys)
    return f"{builder.constant(key_layout)}({expr}) == {builder.constant(layout)}"


def nth_item(mapping: dict, index: int, key: bool) -> Any:
    """The ``index``-th key (or value) of ``mapping``."""
    return next(itertools.islice(iter(mapping) if key else iter(mapping.values()), index, None))


class NthItemTracker(Tracker):
    """The ``index``-th key (``key``) or value of a dict from the frame holding tensor keys (a tensor is found
    by position, not by a constant key)."""

    def __init__(self, base: VariableBase, index: int, key: bool) -> None:
        self.inputs = (base,)
        self.base = base
        self.index = index
        self.key = key

    def guard_expr(self, builder: "GuardBuilder") -> str:
        return f"{builder.constant(nth_item)}({builder.expr_of(self.base)}, {self.index}, {self.key})"

    def gen_load(self, codegen: "CodeGen") -> None:
        codegen.load_callable_const(nth_item)
        codegen.reconstruct(self.base)
        codegen.load_const(self.index)
        codegen.load_const(self.key)
        codegen.call(3)

    def describe(self) -> str:
        return f"list({self.base.tracker.describe()}{'' if self.key else '.values()'})[{self.index}]"


def _tensor_key_vars(key: Any) -> list[VariableBase]:
    if type(key) is tuple:
        return [var for part in key for var in _tensor_key_vars(part)]
    return [key.var] if isinstance(key, TensorKey) else []


def py_key(key: Any) -> Any:
    """The real key of a simulated dict's key (a tensor key: the tensor, when known)."""
    if type(key) is tuple:
        return tuple(py_key(part) for part in key)
    return key.var.get_py_value() if isinstance(key, TensorKey) else key


def load_key(codegen: "CodeGen", key: Any) -> None:
    """Push a simulated dict's key in generated code (a tensor key: its tensor)."""
    if not has_tensor_key(key):
        codegen.load_const(key)
    elif isinstance(key, TensorKey):
        codegen.reconstruct(key.var)
    else:
        for part in key:
            load_key(codegen, part)
        codegen.build("BUILD_TUPLE", len(key))


def key_variable(key: Any, graph: "FunctionGraph", tracker: Tracker) -> VariableBase:
    """A variable for a dict key read back from the simulated dict (its keys are Python values): a tuple key
    is a tuple of variables again, so it can be indexed and unpacked like one built in the frame; a tensor
    key is its tensor's variable."""
    if type(key) is tuple:
        return TupleVariable([key_variable(part, graph, tracker) for part in key], graph, tracker)
    if isinstance(key, TensorKey):
        return key.var
    if type(key) not in _CONSTANT_KEY_TYPES:  # an object key: the object itself, a constant of the translation
        return VariableFactory.from_value(key, graph, ConstTracker(key))
    return ConstantVariable(key, graph, tracker)


def _none(graph: "FunctionGraph") -> VariableBase:
    return ConstantVariable(None, graph, DummyTracker())


def _list_method(var: "ListVariable", name: str, args: list[VariableBase],
                 kwargs: dict[str, VariableBase]) -> VariableBase:
    graph = var.graph
    items = var.items
    if name in ("append", "extend", "insert", "pop", "remove", "clear", "reverse", "sort"):
        _record_mutation(var, appends_only=name in ("append", "extend"))
    if name == "append":
        items.append(args[0])
    elif name == "extend":
        from .iterator import iterate

        items.extend(iterate(args[0]).unpack())
    elif name == "insert":
        items.insert(_constant_value(args[0], "list index"), args[1])
    elif name == "pop":
        index = _constant_value(args[0], "list index") if args else -1
        try:
            return items.pop(index)
        except IndexError as exc:
            raise UserCodeError(f"user code raised IndexError: {exc}", original=exc) from None
    elif name == "clear":
        items.clear()
    elif name == "reverse":
        items.reverse()
    elif name == "sort":
        from .callable import sorted_items

        if args:
            raise UserCodeError("user code raised TypeError: sort() takes no positional arguments",
                                original=TypeError("sort() takes no positional arguments"))
        var.length_used = True  # (the order depends on every item, and on how many there are)
        graph.add_guard(var)
        items[:] = sorted_items(graph, list(items), kwargs, "sort")
    elif name in ("remove", "index", "count"):
        values = _read_all(var)
        try:
            if name == "remove":
                # The real method on the values raises the eager error (its message is remove's own).
                target = _constant_value(args[0], "list item")
                position = values.index(target) if target in values else None
                values.remove(target)
                del items[position]
            else:
                method = getattr(values, name)
                return ConstantVariable(method(*[_constant_value(a, "argument") for a in args]), graph,
                                        DummyTracker((var,)))
        except ValueError as exc:
            raise UserCodeError(f"user code raised ValueError: {exc}", original=exc) from None
    elif name == "copy":
        return ListVariable(list(items), graph, DummyTracker((var,)))
    else:
        raise FallbackError(f"list.{name}() is not supported yet")
    return _none(graph)


def merge_into_dict(graph: "FunctionGraph", items: dict[Any, VariableBase], source: VariableBase) -> None:
    """What ``dict(source)`` and ``d.update(source)`` add to ``items``: a dict's items, a mapping's (it has
    ``keys()``), else the pairs of an iterable (`_merge_pairs`)."""
    from .user_mapping import MappingInstanceVariable, is_mapping_like, protocol_items

    if isinstance(source, DictVariable):
        graph.add_guard(source)  # (every key is read: the next call's dict must have the same)
        items.update(source.items)
    elif isinstance(source, MappingInstanceVariable):
        items.update(source.mapping_items())
    elif is_mapping_like(source):
        items.update(protocol_items(source))
    else:
        _merge_pairs(graph, items, source)


def _merge_pairs(graph: "FunctionGraph", items: dict[Any, VariableBase], source: VariableBase) -> None:
    """Each element of ``source`` made a sequence and unpacked into a key and a value, as CPython's
    ``PyDict_MergeFromSeq2``: an element that cannot be iterated (any TypeError making it a sequence) is the
    eager TypeError, one of another length than two the eager ValueError, both numbered by the element; the
    elements before it are in ``items`` already (``d.update`` keeps them, as eagerly)."""
    from .callable import _items_of
    from .iterator import iterate

    for index, element in enumerate(_items_of(source)):
        try:
            pair = iterate(element).unpack()
        except UserCodeError as exc:
            if not isinstance(exc.original, TypeError):
                raise
            error: Exception = TypeError(f"cannot convert dictionary update sequence element #{index} to a sequence")
            raise UserCodeError(f"user code raised TypeError: {error}", original=error) from None
        if len(pair) != 2:
            error = ValueError(f"dictionary update sequence element #{index} has length {len(pair)}; 2 is required")
            raise UserCodeError(f"user code raised ValueError: {error}", original=error)
        key, value = pair
        if _is_key_variable(key, tensors=True) and not _is_key_variable(key):  # (a tensor in the key)
            items[dict_key(key, tensors=True)] = value
            continue
        graph.add_guard(key)
        items[key.get_py_value()] = value


def _dict_method(var: "DictVariable", name: str, args: list[VariableBase],
                 kwargs: dict[str, VariableBase]) -> VariableBase:
    graph = var.graph
    items = var.items
    graph.add_guard(var)
    if isinstance(var, TypedDictVariable):
        # What differs from a plain dict: a copy keeps the class (and factory); OrderedDict.popitem takes
        # ``last`` and words its error its own way.
        if name == "copy":
            return TypedDictVariable(dict(items), graph, DummyTracker((var,)), var.dict_type, var.default_factory)
        if var.dict_type is collections.OrderedDict:
            ordered = ordered_dict_method(var, name, args, kwargs)
            if ordered is not None:
                return ordered
    if name in ("update", "pop", "setdefault", "clear", "popitem"):
        _record_mutation(var)
    if name == "get":
        key = dict_key(args[0], tensors=True)
        return items[key] if key in items else (args[1] if len(args) > 1 else _none(graph))
    if name in ("keys", "values", "items"):
        return DictViewVariable(var, name, var, var.get_py_type())
    if name == "update":
        if args:
            merge_into_dict(graph, items, args[0])
        items.update(kwargs)
        return _none(graph)
    if name == "pop":
        key = dict_key(args[0], tensors=True)
        if key in items:
            return items.pop(key)
        if len(args) > 1:
            return args[1]
        raise UserCodeError(f"user code raised KeyError: {key!r}", original=KeyError(key))
    if name == "setdefault":
        key = dict_key(args[0], tensors=True)
        if key not in items:
            items[key] = args[1] if len(args) > 1 else _none(graph)
        return items[key]
    if name == "popitem":
        if not items:
            error = KeyError("popitem(): dictionary is empty")
            raise UserCodeError(f"user code raised KeyError: {error}", original=error)
        key, value = items.popitem()  # (last inserted first, as the real dict)
        return TupleVariable([key_variable(key, graph, DummyTracker((var,))), value], graph,
                             DummyTracker((var,)))
    if name == "clear":
        items.clear()
        return _none(graph)
    if name == "copy":
        return DictVariable(dict(items), graph, DummyTracker((var,)))
    raise FallbackError(f"dict.{name}() is not supported yet")


def ordered_dict_method(var: DictVariable, name: str, args: list[VariableBase],
                        kwargs: dict[str, VariableBase]) -> VariableBase | None:
    """The methods ``OrderedDict`` has, or has otherwise than ``dict``, on the simulated items ``var`` of an
    OrderedDict (or of a user OrderedDict subclass instance): ``move_to_end`` and ``popitem(last=...)`` (its
    error worded its own way); None for the others (dict's)."""
    graph = var.graph
    items = var.items
    if name == "move_to_end":
        return _move_to_end(var, args, kwargs)
    if name != "popitem":
        return None
    bound = _bind_arguments("popitem", ["last"], args, kwargs, {"last": None})
    last = True if bound["last"] is None else _constant_value(bound["last"], "popitem(last=)")
    graph.add_guard(var)
    if not items:
        error = KeyError("dictionary is empty")
        raise UserCodeError(f"user code raised KeyError: {error}", original=error)
    _record_mutation(var)
    key = next(reversed(items)) if last else next(iter(items))
    value = items.pop(key)
    return TupleVariable([key_variable(key, graph, DummyTracker((var,))), value], graph, DummyTracker((var,)))


def _move_to_end(var: DictVariable, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    """``OrderedDict.move_to_end(key, last=True)``: the item moves to the end (``last=False``: the front); a
    missing key is the eager KeyError, with nothing changed. The order of the simulated items is the
    order the write-back (or the rebuilt object) gets."""
    graph = var.graph
    bound = _bind_arguments("move_to_end", ["key", "last"], args, kwargs, {"last": None})
    key = dict_key(bound["key"])
    last = True if bound["last"] is None else _constant_value(bound["last"], "move_to_end(last=)")
    if key not in var.items:
        raise UserCodeError(f"user code raised KeyError: {key!r}", original=KeyError(key))
    _record_mutation(var)
    items = var.items
    value = items.pop(key)
    if last:
        items[key] = value
    else:
        rest = dict(items)
        items.clear()
        items[key] = value
        items.update(rest)
    return _none(graph)


def _bind_arguments(name: str, params: list[str], args: list[VariableBase], kwargs: dict[str, VariableBase],
                    defaults: dict[str, Any]) -> dict[str, Any]:
    """The arguments of a builtin method by parameter name; a wrong call is the eager TypeError."""
    bound: dict[str, Any] = dict(zip(params, args))
    error = None
    if len(args) > len(params):
        error = f"{name}() takes at most {len(params)} arguments ({len(args)} given)"
    for key, value in kwargs.items():
        if key not in params:
            error = f"{name}() got an unexpected keyword argument '{key}'"
        elif key in bound:
            error = f"{name}() got multiple values for argument '{key}'"
        bound[key] = value
    for param in params:
        if param not in bound:
            if param not in defaults:
                error = f"{name}() missing required argument '{param}'"
            bound[param] = defaults.get(param)
    if error is not None:
        raise FallbackError(f"{error} (the eager TypeError is raised natively)")
    return bound


class ContainerMethodVariable(VariableBase):
    """``container.method`` of a simulated list or dict."""

    def __init__(self, container: VariableBase, name: str) -> None:
        super().__init__(container.graph, DummyTracker((container,)))
        self.container = container
        self.name = name

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        if isinstance(self.container, SetVariable):
            return _set_method(self.container, self.name, args, kwargs)
        if isinstance(self.container, DictVariable):
            return _dict_method(self.container, self.name, args, kwargs)
        if isinstance(self.container, ListVariable):
            return _list_method(self.container, self.name, args, kwargs)
        if self.name in ("index", "count"):
            values = _read_all(self.container)
            try:
                result = getattr(values, self.name)(*[_constant_value(a, "argument") for a in args])
            except ValueError as exc:
                raise UserCodeError(f"user code raised ValueError: {exc}", original=exc) from None
            return ConstantVariable(result, self.graph, DummyTracker((self.container,)))
        raise FallbackError(f"{type(self.container).__name__}.{self.name}() is not supported yet")

    def children(self) -> list[VariableBase]:
        return [self.container]

    def _reconstruct_computed(self, codegen: "CodeGen") -> None:
        codegen.reconstruct(self.container)
        codegen.load_attr(self.name)


_BOUND_CONTAINER_METHOD = type([].append)


class RealContainerMethodVariable(VariableBase):
    """A real bound method of a list, dict or set reached as a value (``log.append`` loaded before a graph
    break and received by the resume function): a new object at each access, so it is guarded by its type
    and name; calling it is the method of the container reached through ``__self__``, simulated."""

    def __init__(self, value: Any, graph: "FunctionGraph", tracker: Tracker) -> None:
        from ..tracker import GetAttrTracker

        super().__init__(graph, tracker)
        self.value = value
        self.name = value.__name__
        owner_tracker = GetAttrTracker(self, "__self__") if tracker.is_traceable() else DummyTracker((self,))
        self.container = VariableFactory.from_value(value.__self__, graph, owner_tracker)

    def make_guards(self, builder: "GuardBuilder", expr: str) -> list[str]:
        return [f"type({expr}) is {builder.constant(_BOUND_CONTAINER_METHOD)}", f"{expr}.__name__ == {self.name!r}"]

    def get_py_value(self) -> Any:
        return self.value

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        self.graph.add_guard(self.container)  # (the type of __self__ fixes what the method does)
        return self.container.getattr(self.name).call(args, kwargs)

    def children(self) -> list[VariableBase]:
        return [self.container]

    def _reconstruct_computed(self, codegen: "CodeGen") -> None:
        codegen.reconstruct(self.container)
        codegen.load_attr(self.name)


@VariableFactory.register(87)
def _real_container_method_rule(value: Any, graph: "FunctionGraph", tracker: Tracker) -> VariableBase | None:
    if type(value) is _BOUND_CONTAINER_METHOD and type(getattr(value, "__self__", None)) in (list, dict, set):
        return RealContainerMethodVariable(value, graph, tracker)
    return None


def _sequence_setitem(self: SequenceVariable, key: VariableBase, value: VariableBase | None) -> None:
    if self.py_type is tuple:
        raise UserCodeError("user code raised TypeError: 'tuple' object does not support item assignment")
    index = _constant_value(key, "list index")
    if isinstance(index, slice) and value is not None:
        cls = value.get_py_type()
        if isinstance(cls, type) and getattr(cls, "__iter__", None) is None and not hasattr(cls, "__getitem__"):
            # (a value that is not iterable at all: the list's own error, worded per version, not ``iter()``'s)
            scratch: list = [None] * len(self.items)
            try:
                scratch[index] = value.get_py_value()
            except TypeError as exc:
                raise UserCodeError(f"user code raised TypeError: {exc}", original=exc) from None
    _record_mutation(self)
    try:
        if value is None:
            del self.items[index]
        elif isinstance(index, slice):
            from .iterator import iterate

            self.items[index] = iterate(value).unpack()
        else:
            self.items[index] = value
    except (IndexError, ValueError) as exc:
        raise UserCodeError(f"user code raised {type(exc).__name__}: {exc}", original=exc) from None


def _dict_setitem(self: DictVariable, key: VariableBase, value: VariableBase | None) -> None:
    k = dict_key(key, tensors=True)
    _record_mutation(self)
    if value is None:
        if k not in self.items:
            raise UserCodeError(f"user code raised KeyError: {k!r}", original=KeyError(k))
        del self.items[k]
    else:
        self.items[k] = value


def _list_write_back(self: ListVariable, codegen: "CodeGen") -> None:
    from ...runtime import extend_list, write_back_list

    if self.appended_only and self.initial_length is not None:
        added = ListVariable(list(self.items[self.initial_length:]), self.graph, DummyTracker())
        codegen.call_helper(extend_list, [self, added])
    else:
        codegen.call_helper(write_back_list, [self, ListVariable(list(self.items), self.graph, DummyTracker())])
    codegen.emit("POP_TOP")


def _dict_write_back(self: DictVariable, codegen: "CodeGen") -> None:
    from ...runtime import write_back_dict

    codegen.call_helper(write_back_dict, [self, DictVariable(dict(self.items), self.graph, DummyTracker())])
    codegen.emit("POP_TOP")




class SetVariable(VariableBase):
    """A set of Python constants or tuples of such (a set holding tensors or objects is not simulated).

    ``values`` is a real set whose hash table is laid out as the eager one's: a set's iteration order (and
    which element ``pop()`` takes) follows from its table, which depends on the exact sequence of operations
    that made it (``{a, b}`` adds one by one, ``update`` from a set or a dict pre-sizes and merges, removals
    leave deleted entries, ``set(s)`` lays the elements out anew). So every simulated operation is applied,
    the very same way, to ``values`` itself (a set received by the frame is kept as a `clone_set_layout`
    of it), never to a copy made with ``set()``; a set escaping the frame is rebuilt as a clone of
    ``values``' table, not by adding its elements again."""

    is_mutable_container = True

    def __init__(self, values: set, graph: "FunctionGraph", tracker: Tracker) -> None:
        super().__init__(graph, tracker)
        self.values = values

    @classmethod
    def of(cls, items: list[VariableBase], graph: "FunctionGraph", tracker: Tracker) -> "SetVariable":
        values: set = set()
        for item in items:  # (added one by one, in order, as ``BUILD_SET`` does)
            values.add(dict_key(item, "set element"))
        return cls(values, graph, tracker)

    def read(self) -> set:
        """The values, read by the simulation: a set from outside the frame is guarded by them (fuzz seed
        12336: ``len(s)`` of a set a resumed function received was folded without a guard)."""
        self.graph.add_guard(self)
        return self.values

    def get_py_value(self) -> Any:
        return clone_set_layout(self.read())

    def get_py_type(self) -> type:
        return set

    def length(self) -> int:
        return len(self.read())

    def iter_items(self) -> list[VariableBase]:
        return [key_variable(v, self.graph, DummyTracker((self,))) for v in self.read()]

    unpack = iter_items

    def make_guards(self, builder: "GuardBuilder", expr: str) -> list[str]:
        # The elements in iteration order: an equal set laid out otherwise iterates otherwise.
        return [f"type({expr}) is set", f"tuple({expr}) == {builder.constant(tuple(self.values))}"]

    def _reconstruct_computed(self, codegen: "CodeGen") -> None:
        codegen.load_callable_const(functools.partial(clone_set_layout, clone_set_layout(self.values)))
        codegen.call(0)

    def bool(self) -> bool:
        return bool(self.read())

    def record_mutation(self) -> None:
        """About to change: sets from outside are not written back yet; a rollback restores the values (and
        their layout)."""
        if self.tracker.is_traceable():
            raise FallbackError("mutating a set from outside the frame is not supported yet")
        old = clone_set_layout(self.values)
        self.graph.side_effects.mutate(self, lambda: setattr(self, "values", old))

    def add_items(self, items: list[VariableBase]) -> None:
        self.record_mutation()
        for item in items:
            self.values.add(dict_key(item, "set element"))

    def update_from(self, source: VariableBase) -> None:
        """``set.update(source)`` (and ``SET_UPDATE``, ``{*source}``)."""
        operand = _set_update_operand(source)
        self.record_mutation()
        self.values.update(operand)

    def getattr(self, name: str) -> VariableBase:
        from .callable import PureFunctionVariable

        if name in _SET_MUTATORS or name in _SET_QUERIES:
            return ContainerMethodVariable(self, name)
        if name in _SET_IN_PLACE_DUNDERS:
            raise FallbackError(f"set.{name}() is not simulated yet")
        return PureFunctionVariable(getattr(self.get_py_value(), name), self.graph, DummyTracker((self,)))

    def __repr__(self) -> str:
        return f"SetVariable({self.values!r})"


def _set_update_operand(source: VariableBase) -> Any:
    """What ``set.update(source)`` would be given, laid out alike: it merges a set or frozenset table by
    table and pre-sizes itself for an exact dict, but adds the items of anything else one by one."""
    if isinstance(source, SetVariable):
        return source.read()  # (itself, not a clone: ``s.update(s)`` changes nothing, as eagerly)
    if isinstance(source, ConstantVariable) and isinstance(source.value, frozenset):
        source.graph.add_guard(source)
        return source.value
    from .iterator import iterate

    elements = [dict_key(item, "set element") for item in iterate(source).unpack()]
    return dict.fromkeys(elements) if source.get_py_type() is dict else elements


_SET_UPDATES = frozenset({"update", "difference_update", "intersection_update", "symmetric_difference_update"})
_SET_ARITY = {"add": 1, "discard": 1, "remove": 1, "clear": 0, "pop": 0}  # (the other mutators: any)
_SET_MUTATORS = _SET_UPDATES | frozenset(_SET_ARITY)
# Methods that do not change the set: folded on its values, the set itself (and the very same object
# wherever an argument is the set too: ``s.union(s)`` copies the table, a union with a clone makes another).
_SET_QUERIES = frozenset({"union", "intersection", "difference", "symmetric_difference", "issubset", "issuperset",
                          "isdisjoint", "copy", "__contains__", "__len__", "__or__", "__and__", "__sub__",
                          "__xor__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__"})
_SET_IN_PLACE_DUNDERS = frozenset({"__ior__", "__iand__", "__isub__", "__ixor__", "__init__"})


def _set_method(var: SetVariable, name: str, args: list[VariableBase],
                kwargs: dict[str, VariableBase]) -> VariableBase:
    graph = var.graph
    if name in _SET_QUERIES:
        from .callable import consume_iterators, constant_fold

        operands = [var, *consume_iterators(getattr(var.values, name), args, graph)]
        folded = constant_fold(getattr(set, name), graph, operands, kwargs)
        if folded is None:
            raise FallbackError(f"set.{name}() with tensors is not supported")
        return folded
    if kwargs or len(args) != _SET_ARITY.get(name, len(args)):
        raise FallbackError(f"set.{name}() with unusual arguments")  # (the eager TypeError)
    if name in _SET_UPDATES:
        # Each operand as the method would get it (a set as it is, a dict as a dict, anything else as the
        # list of its items), then the very method on the values: the same steps on the same table.
        operands = [_set_update_operand(source) for source in args]
        var.record_mutation()
        graph.run_user_python(getattr(var.values, name), operands, {})
        return _none(graph)
    var.record_mutation()
    if name == "add":
        var.values.add(dict_key(args[0], "set element"))
    elif name in ("discard", "remove"):
        value = dict_key(args[0], "set element")
        if name == "remove" and value not in var.values:
            raise UserCodeError(f"user code raised KeyError: {value!r}", original=KeyError(value))
        var.values.discard(value)
    elif name == "clear":
        var.values.clear()
    else:
        if not var.values:
            raise UserCodeError("user code raised KeyError: 'pop from an empty set'",
                                original=KeyError("pop from an empty set"))
        return key_variable(var.values.pop(), graph, DummyTracker((var,)))
    return _none(graph)


@VariableFactory.register(94)
def _set_rule(value: Any, graph: "FunctionGraph", tracker: Tracker) -> VariableBase | None:
    if type(value) is set and all(_is_constant_key(v) for v in value):
        return SetVariable(clone_set_layout(value), graph, tracker)
    return None


# -- operators on containers ---------------------------------------------------------------------------------
# Concatenation, repetition and merging are simulated on the items themselves: the result holds the same
# item variables (tensors, objects, nested containers keep their identity), and an in-place operator changes
# the container it is applied to (``lst += other`` is ``lst.extend(other)`` on the very list, recorded as a
# mutation to write back), as the interpreter does. Folding them on Python copies would lose both.
ContainerOperator = Callable[[VariableBase, VariableBase], "VariableBase | None"]


def _is_plain(var: VariableBase, *kinds: type) -> bool:
    """``var`` is exactly one of ``kinds`` (not a subclass such as `SizeVariable`, whose type differs)."""
    return type(var) in kinds


def _repeat_count(var: VariableBase) -> int | None:
    if isinstance(var, ConstantVariable) and type(var.value) in (int, bool):
        var.graph.add_guard(var)
        return int(var.value)
    return None


def _concatenate(lhs: VariableBase, rhs: VariableBase) -> VariableBase | None:
    if SizeVariable in (type(lhs), type(rhs)):
        # ``x.shape[:-1] + [heads, dim]``: `paddle.Size` concatenates with a list, a tuple or a Size on either
        # side, and gives a Size of the items as they are (symbolic dimensions stay symbolic).
        if not all(_is_plain(side, ListVariable, TupleVariable, SizeVariable) for side in (lhs, rhs)):
            return None
        return SizeVariable(lhs.unpack() + rhs.unpack(), lhs.graph, DummyTracker((lhs, rhs)))
    if not (_is_plain(lhs, ListVariable, TupleVariable) and type(rhs) is type(lhs)):
        return None
    return type(lhs)(lhs.unpack() + rhs.unpack(), lhs.graph, DummyTracker((lhs, rhs)))


def _extend_in_place(lhs: VariableBase, rhs: VariableBase) -> VariableBase | None:
    if _is_plain(lhs, TupleVariable):
        return _concatenate(lhs, rhs)
    if not isinstance(lhs, ListVariable):  # (a `SizeVariable` too: paddle.Size keeps list's in-place ops)
        return None
    from .iterator import iterate

    added = iterate(rhs).unpack()  # (a copy: ``lst += lst`` doubles the list)
    _record_mutation(lhs, appends_only=True)
    lhs.items.extend(added)
    return lhs


def _repeat(lhs: VariableBase, rhs: VariableBase) -> VariableBase | None:
    sequences = (ListVariable, TupleVariable, SizeVariable)  # (``Size * n`` is a Size)
    if not _is_plain(lhs, *sequences):
        lhs, rhs = rhs, lhs  # ``3 * seq``
    if not _is_plain(lhs, *sequences):
        return None  # (before reading the count: reading a symbolic int's value pins it)
    count = _repeat_count(rhs)
    if count is None:
        return None
    return type(lhs)(lhs.unpack() * count, lhs.graph, DummyTracker((lhs, rhs)))


def _repeat_in_place(lhs: VariableBase, rhs: VariableBase) -> VariableBase | None:
    if _is_plain(lhs, TupleVariable):
        return _repeat(lhs, rhs)
    count = _repeat_count(rhs)
    if not isinstance(lhs, ListVariable) or count is None:
        return None
    items = lhs.unpack()
    _record_mutation(lhs)
    lhs.items[:] = items * count
    return lhs


def _merge(lhs: VariableBase, rhs: VariableBase) -> VariableBase | None:
    if not (_is_plain(lhs, DictVariable) and _is_plain(rhs, DictVariable)):
        return None
    lhs.graph.add_guard(lhs)
    lhs.graph.add_guard(rhs)
    return DictVariable({**lhs.items, **rhs.items}, lhs.graph, DummyTracker((lhs, rhs)))


def _merge_in_place(lhs: VariableBase, rhs: VariableBase) -> VariableBase | None:
    if not _is_plain(lhs, DictVariable):
        return None
    if not _is_plain(rhs, DictVariable):
        raise FallbackError("dict |= with a non-dict operand is not supported yet")
    lhs.graph.add_guard(rhs)
    _record_mutation(lhs)
    lhs.items.update(rhs.items)
    return lhs


def _is_key_variable(var: VariableBase, tensors: bool = False) -> bool:
    """``var`` can be turned into a dict key by `dict_key` (a constant, or a plain tuple of such)."""
    if type(var) is TupleVariable:
        return all(_is_key_variable(item, tensors) for item in var.items)
    return (isinstance(var, ConstantVariable) or (tensors and isinstance(var, TensorVariable))
            or _holds_object_key(var))


def _key_membership(container: VariableBase, item: VariableBase) -> VariableBase | None:
    """``key in d`` reads only the keys (guarded by the dict's guard), never the values: a dict holding a
    tensor computed in the frame answers without its data. (A tensor key: by identity, as eager.)"""
    if not (isinstance(container, DictVariable) and _is_key_variable(item, tensors=True)):
        return None
    key = dict_key(item, tensors=True)
    try:
        hash(key)
    except TypeError:
        return None  # (the generic path raises the eager TypeError)
    container.graph.add_guard(container)
    return ConstantVariable(key in container._items, container.graph, DummyTracker((container, item)))


def same_or_equal(left: VariableBase, right: VariableBase) -> bool:
    """``left is right or left == right`` as the interpreter compares the items of containers (membership,
    sequence equality): identity first (known for tensors, see `same_tensor`), then the truth of ``==``
    (which, for a tensor, breaks the graph as ``bool(tensor)`` does)."""
    from .basic import TensorVariable, same_tensor
    from .callable import apply_operator
    from .dunder import truth_value

    if isinstance(left, TensorVariable) and isinstance(right, TensorVariable):
        if same_tensor(left, right):
            return True
    elif left is right:
        return True
    return truth_value(apply_operator(left.graph, operator.eq, [left, right]))


def _membership_with_tensors(container: VariableBase, elements: list[VariableBase],
                             item: VariableBase) -> VariableBase | None:
    """``item in container`` (whose ``elements`` are scanned in order) when tensors take part, element by
    element with `same_or_equal`; None when no tensor does (the operation is folded)."""
    from .basic import TensorVariable

    if not (isinstance(item, TensorVariable) or any(isinstance(e, TensorVariable) for e in elements)):
        return None
    graph = container.graph
    if container.tracker.is_traceable():
        graph.add_guard(container)  # (its length and items: guarded like any container read)
    found = any(same_or_equal(element, item) for element in elements)
    return ConstantVariable(found, graph, DummyTracker((container, item)))


def _sequence_equality(negate: bool) -> ContainerOperator:
    """``lhs == rhs`` (or ``!=``) of two tuples or two lists when tensors take part: as the interpreter
    compares, item by item with `same_or_equal`, then by length (lists of different lengths are unequal
    before any item is compared)."""

    def rule(lhs: VariableBase, rhs: VariableBase) -> VariableBase | None:
        from .basic import TensorVariable

        if not (isinstance(lhs, SequenceVariable) and isinstance(rhs, SequenceVariable)
                and issubclass(lhs.py_type, tuple) == issubclass(rhs.py_type, tuple)
                and any(isinstance(item, TensorVariable) for item in [*lhs.items, *rhs.items])):
            return None
        graph = lhs.graph
        for operand in (lhs, rhs):
            operand.length_used = True
            graph.add_guard(operand)
        same_length = len(lhs.items) == len(rhs.items)
        equal = same_length or issubclass(lhs.py_type, tuple)  # (lists of other lengths differ at once)
        for left, right in zip(lhs.items, rhs.items):
            if not equal:
                break
            equal = same_or_equal(left, right)
        return ConstantVariable((equal and same_length) != negate, graph, DummyTracker((lhs, rhs)))

    return rule


def _membership(container: VariableBase, item: VariableBase) -> VariableBase | None:
    from .dunder import scan_for
    from .iterator import IteratorVariable

    if isinstance(container, DictViewVariable):
        return container.contains(item)
    if isinstance(container, IteratorVariable):  # (a generator: scanned lazily, up to the first match)
        return scan_for(container, item)
    found = _key_membership(container, item)
    if found is None and isinstance(container, SequenceVariable):
        found = _membership_with_tensors(container, container.items, item)
    return found


def _set_in_place(fn: Callable[[Any, Any], Any]) -> ContainerOperator:
    def apply(lhs: VariableBase, rhs: VariableBase) -> VariableBase | None:
        if not isinstance(lhs, SetVariable):
            return None
        graph = lhs.graph
        graph.add_guard(rhs)
        # On the set itself (its layout afterwards is the eager one's), with a set operand as it is (``s -= s``
        # clears the table, where the difference with a copy would leave deleted entries).
        operand = rhs.read() if isinstance(rhs, SetVariable) else rhs.get_py_value()
        lhs.record_mutation()
        graph.run_user_python(fn, [lhs.values, operand], {})
        return lhs

    return apply


CONTAINER_OPERATORS: dict[Callable[..., Any], ContainerOperator] = {
    operator.add: _concatenate,
    operator.iadd: _extend_in_place,
    operator.mul: _repeat,
    operator.imul: _repeat_in_place,
    operator.or_: _merge,
    operator.contains: _membership,
    operator.eq: _sequence_equality(negate=False),
    operator.ne: _sequence_equality(negate=True),
    operator.ior: lambda lhs, rhs: (_merge_in_place if isinstance(lhs, DictVariable)
                                    else _set_in_place(operator.ior))(lhs, rhs),
    operator.iand: _set_in_place(operator.iand),
    operator.isub: _set_in_place(operator.isub),
    operator.ixor: _set_in_place(operator.ixor),
}


# Operators of container types modelled in their own modules (``collections.Counter``: counter_rules.py),
# tried first: each returns None when none of its types takes part.
OPERATOR_HOOKS: list[Callable[[Callable[..., Any], list[VariableBase]], VariableBase | None]] = []


def container_operator(fn: Callable[..., Any], operands: list[VariableBase]) -> VariableBase | None:
    """``fn(*operands)`` simulated on container items, or None when ``fn`` is not such an operator for these
    operands (the caller folds or records it as usual)."""
    for hook in OPERATOR_HOOKS:
        result = hook(fn, operands)
        if result is not None:
            return result
    rule = CONTAINER_OPERATORS.get(fn)
    if rule is None or len(operands) != 2:
        return None
    return rule(*operands)


# -- namedtuples ---------------------------------------------------------------------------------------------
def namedtuple_class(cls: Any) -> bool:
    """A class made by ``collections.namedtuple`` or ``typing.NamedTuple`` (maybe subclassed), whose
    instances are built by the generated ``__new__`` (not overridden)."""
    if not (isinstance(cls, type) and issubclass(cls, tuple) and type(cls) is type):
        return False
    for klass in cls.__mro__:
        if "__new__" in klass.__dict__:
            return "_fields" in klass.__dict__ and "_make" in klass.__dict__
    return False


class NamedTupleVariable(TupleVariable):
    """An instance of a namedtuple class: a tuple whose items are also read by field name."""

    def __init__(self, items: list[VariableBase], graph: "FunctionGraph", tracker: Tracker,
                 cls: type | None = None) -> None:
        super().__init__(items, graph, tracker)
        self.py_type = cls if cls is not None else tuple

    @classmethod
    def of_class(cls, namedtuple: type, items: list[VariableBase], graph: "FunctionGraph") -> "NamedTupleVariable":
        return cls(items, graph, DummyTracker(tuple(items)), namedtuple)

    @classmethod
    def from_real(cls, value: Any, graph: "FunctionGraph", tracker: Tracker) -> "SequenceVariable":
        var = super().from_real(value, graph, tracker)
        var.py_type = type(value)
        return var

    def get_py_value(self) -> Any:
        self.length_used = True
        return tuple.__new__(self.py_type, [item.get_py_value() for item in self.items])

    def make_guards(self, builder: "GuardBuilder", expr: str) -> list[str]:
        return [f"type({expr}) is {builder.constant(self.py_type)}"]  # its class fixes the length

    def _reconstruct_computed(self, codegen: "CodeGen") -> None:
        codegen.load_callable_const(tuple.__new__)
        codegen.load_const(self.py_type)
        super()._reconstruct_computed(codegen)
        codegen.call(2)

    def getitem(self, key: VariableBase) -> VariableBase:
        if isinstance(key, ConstantVariable) and isinstance(key.value, slice):  # a slice is a plain tuple
            self.graph.add_guard(key)
            items = self.items[key.value]
            return TupleVariable(items, self.graph, DummyTracker((self, key)))
        return super().getitem(key)

    def setitem(self, key: VariableBase, value: VariableBase | None) -> None:
        message = f"'{self.py_type.__name__}' object does not support item assignment"
        raise UserCodeError(f"user code raised TypeError: {message}", original=TypeError(message))

    def getattr(self, name: str) -> VariableBase:
        import inspect
        import types

        from ..side_effects import ABSENT
        from .attribute import _descriptor
        from .function import BoundMethodVariable, UserFunctionVariable

        cls = self.py_type
        fields = cls._fields  # type: ignore[attr-defined]
        if name in fields:
            return self.items[fields.index(name)]
        graph = self.graph
        if name == "_replace":
            return NamedTupleMethodVariable(self, name)
        if name == "_asdict":
            return NamedTupleMethodVariable(self, name)
        if any(graph.side_effects.lookup_attr(klass, name) is not ABSENT for klass in cls.__mro__):
            raise FallbackError(f"attribute {name!r} of a namedtuple after its class attribute was assigned in "
                                "the frame is not supported yet")
        found = inspect.getattr_static(cls, name, None)
        if isinstance(found, types.FunctionType):  # a method of a typing.NamedTuple class
            function = UserFunctionVariable(found, graph, DummyTracker((self,)))
            return BoundMethodVariable(function, self, graph, DummyTracker((function, self)))
        if isinstance(found, property):
            if not isinstance(found.fget, types.FunctionType):
                raise FallbackError(f"property {name!r} without a Python getter")
            return UserFunctionVariable(found.fget, graph, DummyTracker((self,))).call([self], {})
        if name in ("count", "index"):
            return super().getattr(name)
        if found is not None and not hasattr(type(found), "__get__"):  # a class attribute (``_fields``...)
            # (by its path when the tuple has one: a container read is then the real one, its changes replayed)
            tracker = GetAttrTracker(self, name) if self.tracker.is_traceable() else DummyTracker((self,))
            return VariableFactory.from_value(found, graph, tracker)
        raise FallbackError(f"attribute {name!r} of a namedtuple is not supported yet")


class NamedTupleMethodVariable(VariableBase):
    """``nt._replace`` / ``nt._asdict`` of a simulated namedtuple."""

    def __init__(self, owner: NamedTupleVariable, name: str) -> None:
        super().__init__(owner.graph, DummyTracker((owner,)))
        self.owner = owner
        self.name = name

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        owner = self.owner
        fields = owner.py_type._fields  # type: ignore[attr-defined]
        if self.name == "_asdict":
            return DictVariable(dict(zip(fields, owner.items)), self.graph, DummyTracker(tuple(owner.items)))
        if args:
            raise UserCodeError("user code raised TypeError: _replace() takes 1 positional argument",
                                original=TypeError("_replace() takes 1 positional argument"))
        unknown = [key for key in kwargs if key not in fields]
        if unknown:
            error = ValueError(f"Got unexpected field names: {unknown!r}")
            raise UserCodeError(f"user code raised ValueError: {error}", original=error)
        items = [kwargs.get(field, item) for field, item in zip(fields, owner.items)]
        return NamedTupleVariable.of_class(owner.py_type, items, self.graph)


def construct_namedtuple(cls_var: VariableBase, args: list[VariableBase],
                         kwargs: dict[str, VariableBase]) -> NamedTupleVariable:
    """``cls(*args, **kwargs)``: arguments bound by the class's own ``__new__`` signature (same errors)."""
    from .function import _bind_arguments

    cls = cls_var.get_py_value()
    graph = cls_var.graph
    graph.add_guard(cls_var)
    new = cls.__new__
    defaults = tuple(VariableFactory.from_value(value, graph, DummyTracker((cls_var,)))
                     for value in new.__defaults__ or ())
    bound = _bind_arguments(new.__code__, f"{cls.__name__}.__new__", [cls_var, *args], kwargs, defaults, {}, graph)
    return NamedTupleVariable.of_class(cls, [bound[field] for field in cls._fields], graph)


@VariableFactory.register(96)
def _namedtuple_rule(value: Any, graph: "FunctionGraph", tracker: Tracker) -> VariableBase | None:
    if isinstance(value, tuple) and type(value) is not tuple and namedtuple_class(type(value)):
        return NamedTupleVariable.from_real(value, graph, tracker)
    return None


# -- dict subclasses made in the frame: OrderedDict, defaultdict ------------------------------------------
class TypedDictVariable(DictVariable):
    """An ``OrderedDict`` or ``defaultdict``: a dict with its class (and, for a defaultdict, the factory a
    missing key calls). Made during simulation, it is rebuilt as that class in generated code; reached from
    the frame (``layer.state_dict()`` kept across a graph break, an argument), it is guarded by its class and
    keys, and a change is written back into the very object, as for a dict."""

    def __init__(self, items: dict[Any, VariableBase], graph: "FunctionGraph", tracker: Tracker, dict_type: type,
                 default_factory: VariableBase | None = None) -> None:
        super().__init__(items, graph, tracker)
        self.dict_type = dict_type
        self.default_factory = default_factory

    @classmethod
    def _empty_like(cls, value: dict, graph: "FunctionGraph", tracker: Tracker) -> "DictVariable":
        from .attribute import _value_tracker

        var = cls({}, graph, tracker, type(value))
        if isinstance(value, collections.defaultdict):
            var.default_factory = VariableFactory.from_value(value.default_factory, graph,
                                                             _value_tracker(var, "default_factory"))
        return var

    def make_guards(self, builder: "GuardBuilder", expr: str) -> list[str]:
        return [f"type({expr}) is {builder.constant(self.dict_type)}",
                keys_guard(builder, expr, self.initial_keys, self._items)]

    def get_py_type(self) -> type:
        return self.dict_type

    def get_py_value(self) -> Any:
        for item in self.items.values():  # the whole value is read: every item is guarded
            self.graph.add_guard(item)
        values = {py_key(key): item.get_py_value() for key, item in self.items.items()}
        if self.default_factory is not None:
            return self.dict_type(self.default_factory.get_py_value(), values)
        return self.dict_type(values)

    def getitem(self, key: VariableBase) -> VariableBase:
        missing = (self.default_factory is not None and _is_key_variable(key, tensors=True)
                   and dict_key(key, tensors=True) not in self.items)
        if missing:
            self.graph.add_guard(self.default_factory)  # (a defaultdict from the frame may get another one)
        if missing and not (isinstance(self.default_factory, ConstantVariable) and self.default_factory.value is None):
            self.graph.add_guard(key)
            value = self.default_factory.call([], {})  # __missing__: the factory's value is stored
            self.setitem(key, value)
            return value
        return super().getitem(key)

    def getattr(self, name: str) -> VariableBase:
        if name == "default_factory" and self.default_factory is not None:
            return self.default_factory
        return super().getattr(name)

    def children(self) -> list[VariableBase]:
        return [*super().children(), *([self.default_factory] if self.default_factory is not None else [])]

    def _reconstruct_computed(self, codegen: "CodeGen") -> None:
        from ...runtime import make_mapping

        plain = DictVariable(dict(self.items), self.graph, DummyTracker(tuple(self.items.values())))
        factory = self.default_factory or ConstantVariable(None, self.graph, DummyTracker())
        codegen.load_callable_const(make_mapping)
        codegen.load_const(self.dict_type)
        codegen.reconstruct(factory)
        codegen.reconstruct(plain)
        codegen.call(3)

    def __repr__(self) -> str:
        return f"TypedDictVariable({self.dict_type.__name__}: {self._items!r})"

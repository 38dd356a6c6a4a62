"""Leaf kinds: Python constants, tensors, and any other object the simulation only looks at."""
from __future__ import annotations

import array
import collections
import copy
import enum
import inspect
import math
import operator
import types
from typing import TYPE_CHECKING, Any

import numpy as np
import paddle

from ....errors import BreakGraphError, FallbackError, UserCodeError
from ....symbolic.sir import MetaInfo, Symbol
from ..tracker import ComputedMethodTracker, DummyTracker, GetAttrTracker, Tracker
from .base import HEAPTYPE, VariableBase, VariableFactory

if TYPE_CHECKING:
    from ...codegen import CodeGen
    from ..function_graph import FunctionGraph
    from ..guard import GuardBuilder

CONSTANT_TYPES: tuple[type, ...] = (int, float, bool, str, bytes, complex, type(None), type(Ellipsis),
                                    slice, range, frozenset,
                                    # what ``paddle.finfo``/``paddle.iinfo`` return (read-only numbers)
                                    type(paddle.finfo(paddle.float32)), type(paddle.iinfo(paddle.int32)))


class ConstantVariable(VariableBase):
    """An immutable Python scalar (int, float, bool, str, None, ...), simulated by its real value."""

    def __init__(self, value: Any, graph: "FunctionGraph", tracker: Tracker) -> None:
        super().__init__(graph, tracker)
        self.value = value

    def get_py_value(self) -> Any:
        return self.value

    def make_guards(self, builder: "GuardBuilder", expr: str) -> list[str]:
        checks = self._value_checks(builder, expr)
        if type(self.value) in (int, float):  # the checks after its type's: of its value
            builder.note_number_checks(checks[1:], data_only=self.graph.guarded_for_data_only(self))
        return checks

    def _value_checks(self, builder: "GuardBuilder", expr: str) -> list[str]:
        if self.value is None or type(self.value) is bool or self.value is Ellipsis:
            return [f"{expr} is {self.value!r}"]
        if type(self.value) is float and self.value != self.value:  # NaN never equals itself
            return [f"type({expr}) is float", f"{expr} != {expr}"]
        if type(self.value) is float and self.value == 0.0:
            # -0.0 == 0.0, but the sign reaches results (``x / s``, ``x * s`` of negative x): compare it too
            return [f"type({expr}) is float", f"{expr} == 0.0",
                    f"{builder.constant(math.copysign)}(1.0, {expr}) == {math.copysign(1.0, self.value)!r}"]
        if type(self.value) is int:  # compared with a missing call's inputs to find ints that vary
            builder.int_checks.append((self.tracker.describe(), expr, self.value))
        if type(self.value) is float and math.isfinite(self.value):  # the same, for floats
            builder.float_checks.append((self.tracker.describe(), expr, self.value))
        if type(self.value) is frozenset:  # its elements in iteration order: an equal one may iterate otherwise
            return [f"type({expr}) is frozenset", f"tuple({expr}) == {builder.constant(tuple(self.value))}"]
        return [f"type({expr}) is {builder.constant(type(self.value))}",
                f"{expr} == {builder.constant(self.value)}"]

    def _reconstruct_computed(self, codegen: "CodeGen") -> None:
        codegen.load_const(self.value)

    def bool(self) -> bool:
        return bool(self.value)

    def getattr(self, name: str) -> VariableBase:
        self.graph.add_guard(self)
        try:
            attr = getattr(self.value, name)
        except AttributeError as exc:
            raise UserCodeError(f"user code raised AttributeError: {exc}", original=exc) from None
        if callable(attr):
            from .callable import PureFunctionVariable

            return PureFunctionVariable(attr, self.graph, DummyTracker((self,)))
        return VariableFactory.from_value(attr, self.graph, DummyTracker((self,)))

    def check_iterable(self) -> None:
        """Raise the eager ``TypeError`` of ``iter(value)`` (``iter(None)`` in a ``try``: the frame may catch
        it) when the value is not iterable."""
        try:
            iter(self.value)
        except TypeError as exc:
            self.graph.add_guard(self)
            raise UserCodeError(f"user code raised TypeError: {exc}", original=exc) from None

    def iter_items(self) -> list[VariableBase]:
        self.graph.add_guard(self)
        if not isinstance(self.value, (str, bytes, range, frozenset)):
            self.check_iterable()
            raise FallbackError(f"iterating over {type(self.value).__name__} is not supported")
        return [ConstantVariable(item, self.graph, DummyTracker((self,))) for item in self.value]

    unpack = iter_items

    def getitem(self, key: VariableBase) -> VariableBase:
        from .callable import constant_fold

        result = constant_fold(operator.getitem, self.graph, [self, key], {})
        if result is None:
            raise FallbackError(f"indexing {type(self.value).__name__} with a tensor is not supported")
        return result

    def __repr__(self) -> str:
        return f"ConstantVariable({self.value!r})"


def is_plain_instance(obj: Any) -> bool:
    """An instance of a user-defined class: what it holds is guarded attribute by attribute, so its type
    is enough to guard the object itself (a new instance with equal attributes reuses the translation)."""
    from .attribute import instance_dict_of

    cls = type(obj)
    return (bool(cls.__flags__ & HEAPTYPE) and not isinstance(obj, (type, types.ModuleType, types.FunctionType,
                                                                        types.MethodType, paddle.nn.Layer,
                                                                        enum.Enum))
            and (instance_dict_of(obj) is not None or _keeps_attributes_in_slots(cls)))  # an enum member: a singleton


# C objects the simulation reads attribute by attribute only (each read guarded by its own path: ``err.args``,
# ``err.__traceback__.tb_lineno``), each call making a new one (an exception caught and handed to a helper):
# guarded by type, as plain instances, until their value is used whole (`ObjectVariable.get_py_value`).
READ_BY_ATTRIBUTE_C_TYPES = (BaseException, types.TracebackType)


def is_guarded_by_type(obj: Any) -> bool:
    """Whether the type of ``obj`` (and the guards of what is read of it) is enough to guard it: a plain
    instance of a user class, or an exception or traceback (`READ_BY_ATTRIBUTE_C_TYPES`)."""
    return is_plain_instance(obj) or isinstance(obj, READ_BY_ATTRIBUTE_C_TYPES)


def _keeps_attributes_in_slots(cls: type) -> bool:
    """A Python class (every class of its MRO but ``object``) whose instances hold their attributes in
    ``__slots__`` (``@dataclass(slots=True)``): read one by one through the slots' descriptors, and guarded so."""
    mro = cls.__mro__[:-1]
    return all(klass.__flags__ & HEAPTYPE for klass in mro) and any("__slots__" in vars(klass) for klass in mro)


# C containers changed in place that no simulated container models (they stay plain objects, guarded by identity):
# what an operation folded on one reads of it is guarded too (`ObjectVariable.read_contents`).
MUTABLE_C_CONTAINERS = (collections.deque, bytearray, array.array)


class ObjectVariable(VariableBase):
    """Any other Python object: modules, functions, classes, layers, dtypes... guarded by identity, except
    plain user instances (guarded by type) unless their identity itself was used."""

    def __init__(self, value: Any, graph: "FunctionGraph", tracker: Tracker) -> None:
        super().__init__(graph, tracker)
        self.value = value
        self.needs_identity = False  # set when the simulation used ``is``, ``id()`` or embedded the object
        # Attributes of the instance read off its class (a method, a class constant): see `not_shadowed_guards`.
        self.names_found_on_class: set[str] = set()
        # What a folded C operation read of a C container's state, which its identity does not fix (a global
        # ``deque`` appended to between calls): its length, a copy of its contents (`read_contents`).
        self.length_read: int | None = None
        self.contents_read: Any = None

    def make_guards(self, builder: "GuardBuilder", expr: str) -> list[str]:
        if self.needs_identity or not is_guarded_by_type(self.value):
            head = builder.identity(expr, self.value)
        else:
            head = f"type({expr}) is {builder.constant(type(self.value))}"
        state = []
        if self.contents_read is not None:
            state.append(f"{expr} == {builder.constant(self.contents_read)}")
        elif self.length_read is not None:
            state.append(f"len({expr}) == {self.length_read}")
        return [head, *state, *self.class_lookup_guards(builder), *self.not_shadowed_guards(builder, expr)]

    def read_contents(self) -> None:
        """A C operation folded on the object reads its contents (``3 in dq``, ``bytes(buf)``): for a C container
        that changes in place (`MUTABLE_C_CONTAINERS`) the guard compares them with a copy, when they are plain
        data; otherwise the operation runs natively."""
        value = self.value
        if not isinstance(value, MUTABLE_C_CONTAINERS) or not self.tracker.is_traceable():
            return
        if isinstance(value, collections.deque) and \
                not all(type(item) in (int, float, bool, str, bytes, type(None)) for item in value):
            raise BreakGraphError(f"reading a {type(value).__name__} of other values than numbers and strings "
                                  "runs natively")
        self.contents_read = copy.copy(value)

    def not_shadowed_guards(self, builder: "GuardBuilder", expr: str) -> list[str]:
        """The attributes the simulation found on the instance's class are still not in the instance's own
        ``__dict__``, where they would come first: a method patched on one object (``layer.forward = fn``,
        ``obj.step = types.MethodType(...)``) must miss the entry. One check for all of them."""
        if not self.names_found_on_class:
            return []
        from .attribute import dict_expr

        # (the bound ``isdisjoint`` a constant: a call of a constant is one instruction of the guard program)
        return [f"{builder.constant(frozenset(self.names_found_on_class).isdisjoint)}({dict_expr(self.value, expr)})"]

    def class_lookup_guards(self, builder: "GuardBuilder") -> list[str]:
        """What the simulation found by looking things up on a user class stays what a lookup finds: the
        class's version (`guard.class_lookup_checks`): the value's class, or the value itself when it is a
        class (and its metaclass when that is a user class too). The guard checks the identity or type of
        the value before, which fixes the class."""
        from ..guard import class_lookup_checks

        value = self.value
        cls = value if isinstance(value, type) else type(value)
        if not cls.__flags__ & HEAPTYPE:
            return []
        graph = self.graph
        reads = graph.class_attribute_reads
        # (the frame's own stores to the class or a base change its version after this call)
        stored = {name for klass in cls.__mro__ for name in graph.side_effects.attr_names_of(klass)}
        checks = class_lookup_checks(builder, cls, reads, stored)
        if isinstance(value, type) and type(cls).__flags__ & HEAPTYPE:  # a metaclass of its own: looked up too
            checks += class_lookup_checks(builder, type(cls), reads)
        return checks

    def get_py_value(self) -> Any:
        if isinstance(self.value, READ_BY_ATTRIBUTE_C_TYPES):
            # Used whole (folded by C code, ``str(err)``, embedded): only its identity fixes what was read.
            self.needs_identity = True
        return self.value

    def get_py_type(self) -> type:
        return type(self.value)  # (not a use of the value: the guard of its type fixes it)

    @property
    def is_mutable_container(self) -> bool:
        """An exception made during simulation is made anew by each run (built once per run)."""
        return isinstance(self.value, BaseException)

    def _reconstruct_computed(self, codegen: "CodeGen") -> None:
        if isinstance(self.tracker, ComputedMethodTracker):  # bound to the receiver the generated code rebuilds
            self.tracker.gen_rebuild(codegen)
            return
        if isinstance(self.value, BaseException):
            # Each eager call makes its own exception object (tracebacks and attributes are per object).
            from ...runtime import fresh_exception

            codegen.load_callable_const(fresh_exception)
            codegen.load_const(self.value)
            codegen.call(1)
            return
        # A computed object (e.g. a tensor's dtype) is the very object the guarded simulation saw.
        codegen.load_const(self.value)

    def bool(self) -> bool:
        from .dunder import truth

        cls = type(self.value)
        if not hasattr(cls, "__bool__") and not hasattr(cls, "__len__"):
            return True  # the default truth of objects, e.g. modules and functions
        result = truth(self)
        if result is not None:
            return result
        if isinstance(self.value, MUTABLE_C_CONTAINERS):  # (their truth is their C length, guarded)
            return self.length() > 0
        raise FallbackError(f"truth value of {cls.__name__} objects is not simulated yet")

    # -- the protocols of user classes (their Python dunders are inlined: see dunder.py) -----------------
    def getitem(self, key: VariableBase) -> VariableBase:
        from .dunder import call_method, user_method

        if isinstance(self.value, enum.EnumMeta):  # ``Color["RED"]``: a member by name
            from .callable import constant_fold

            return constant_fold(operator.getitem, self.graph, [self, key], {}) or super().getitem(key)
        function = user_method(self, "__getitem__")
        if function is None:
            self._subscript_runs_natively("__getitem__")
            return super().getitem(key)
        return call_method(self, function, [key])

    def setitem(self, key: VariableBase, value: VariableBase | None) -> None:
        from .dunder import call_method, user_method

        dunder = "__setitem__" if value is not None else "__delitem__"
        function = user_method(self, dunder)
        if function is None:
            self._subscript_runs_natively(dunder)
            return super().setitem(key, value)
        call_method(self, function, [key] if value is None else [key, value])

    def _subscript_runs_natively(self, dunder: str) -> None:
        """A subscript of an object whose type implements ``dunder`` without a Python function to inline (C
        code: a numpy array's ``x[i:i + 20]``, ``arr[mask] = 0``) runs natively at a graph break: its result
        (a view, a copy, a scalar) and its effects are exactly eager's. (Classes, whose subscript makes
        generic aliases, are left to the caller.)"""
        if not isinstance(self.value, type) and inspect.getattr_static(type(self.value), dunder, None) is not None:
            raise BreakGraphError(f"{type(self.value).__name__}.{dunder} (C code) runs natively")

    def length(self) -> int:
        from .dunder import length

        size = length(self)
        if size is None:  # not a Python __len__: folded on the (guarded) object, and its length guarded
            self.graph.add_guard(self)
            size = self.graph.run_user_python(len, [self.get_py_value()], {})
            if not isinstance(self.value, type):
                self.length_read = size
        return size

    def iterator(self) -> "VariableBase | None":
        """``iter(self)`` for a user instance with Python ``__iter__``/``__getitem__``, else None."""
        from .dunder import is_user_instance, iterate_instance

        if isinstance(self.value, enum.EnumMeta):  # the members of an enum, in definition order
            from .iterator import IteratorVariable, lazy

            self.graph.add_guard(self)
            members = [VariableFactory.from_value(member, self.graph, DummyTracker((self,)))
                       for member in self.value]
            return IteratorVariable(lazy(lambda: members), self.graph, f"iterator over {self.value.__name__}",
                                    (iter, [self]))
        return iterate_instance(self) if is_user_instance(self) else None

    def unpack(self) -> list[VariableBase]:
        iterator = self.iterator()
        if iterator is None:
            return super().unpack()
        return iterator.unpack()  # type: ignore[attr-defined]

    def getattr(self, name: str) -> VariableBase:
        from .attribute import load_attribute

        return load_attribute(self, name)

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        from .callable import call_object

        return call_object(self, args, kwargs)

    def setattr(self, name: str, value: VariableBase | None) -> None:
        """``self.name = value``: through the class's Python ``__setattr__``/``__delattr__`` when it has one
        (inlined: it usually ends in ``super().__setattr__``, the plain store), else the plain store."""
        from .attribute import store_attribute
        from .dunder import call_method, user_method

        function = user_method(self, "__setattr__" if value is not None else "__delattr__")
        if function is not None:
            name_var = ConstantVariable(name, self.graph, DummyTracker())
            call_method(self, function, [name_var] if value is None else [name_var, value])
            return
        store_attribute(self, name, value)

    def __repr__(self) -> str:
        return f"ObjectVariable({type(self.value).__name__} {self.tracker.describe()})"


_MISSING = object()
_SEVERAL_DEVICES = bool(paddle.is_compiled_with_cuda() or paddle.is_compiled_with_xpu()
                        or paddle.device.get_all_custom_device_type())



def _is_basic_index(item: VariableBase) -> bool:
    """An index item Paddle's static setitem turns into a slice (an int, a slice, ``None``, ``...``, a Python
    bool, a 0-D tensor), as opposed to an advanced index (a tensor of 1+ dimensions, a list, an array)."""
    from .symbolic_int import SymbolicIntVariable

    if isinstance(item, TensorVariable):
        return len(item.meta.shape) == 0
    if isinstance(item, SymbolicIntVariable):
        return True
    return type(item) is ConstantVariable and (item.value is None or item.value is Ellipsis or
                                               isinstance(item.value, (int, slice)))


def _item_assignment_unlike_eager(tensor: "TensorVariable", key: VariableBase, value: VariableBase) -> str | None:
    """Why ``tensor[key] = value`` would not be eager's in a program, or None.

    Paddle's static setitem (3.3.1) with an advanced index (a tensor of 1+ dimensions, a list):
      * gives every item of ``value`` written through a repeated index the gradient of the written item (eager:
        the first one only), and a ``value`` broadcast into a boolean mask its gradient where eager gives zero
        (a value of one item: eager's own rule); so a value requiring gradients is assigned natively, but into
        one leading boolean mask with a value of the masked shape (what ``out[mask] = f(x[mask])`` writes);
      * broadcasts a value of fewer dimensions wrongly when the advanced index follows a slice or an int
        (``y[:, mask] = row`` wrote the row down the columns): a tensor value is then assigned natively."""
    from .container import TupleVariable

    items = list(key.items) if isinstance(key, TupleVariable) else [key]
    advanced = [position for position, item in enumerate(items) if not _is_basic_index(item)]
    if not advanced:
        return None
    first_taking = next((position for position, item in enumerate(items)
                         if not (type(item) is ConstantVariable and item.value is None)), 0)
    one_item = type(value) is ConstantVariable and isinstance(value.value, (bool, int, float, complex)) or \
        isinstance(value, TensorVariable) and len(value.meta.shape) == 0
    if advanced[0] > first_taking and not one_item:  # (a tensor, or an array made one)
        return "Paddle's program broadcasts a value after a leading slice or int wrongly"
    if not isinstance(value, TensorVariable) or value.meta.stop_gradient or not tensor.graph.grad_mode:
        return None
    if not isinstance(key, TupleVariable) and isinstance(key, TensorVariable) and key.meta.dtype == paddle.bool:
        shape, mask, written = tensor.meta.shape, key.meta.shape, value.meta.shape
        trailing = list(shape[len(mask):])
        if len(written) == len(trailing) + 1 and written[0] != 1 and list(written[1:]) == trailing \
                and -1 not in trailing:
            return None
    return "Paddle's program gives the value another gradient than eager (repeated indices, broadcasting)"


class TensorVariable(VariableBase):
    """A tensor: a `Symbol` in the SIR with its meta; the data is never touched during simulation."""

    def __init__(self, meta: MetaInfo, graph: "FunctionGraph", tracker: Tracker,
                 value: paddle.Tensor | None = None, symbol: Symbol | None = None) -> None:
        super().__init__(graph, tracker)
        self.meta = meta
        self.value = value  # the real tensor, for inputs read from the frame
        self.symbol = symbol if symbol is not None else graph.new_symbol(meta)
        # An in-place op rebinds the variable to a new symbol (every alias holds this one variable, so all
        # of them see the new value); an input keeps its frame-start meta for its guards, and ``history``
        # lists every symbol it was bound to, oldest first (views of any of them see later changes).
        self.input_meta = meta
        self.history: list[Symbol] = [self.symbol]
        # Made by an api/method statement: a new object, unless the op hands back an input itself (probed on
        # demand, see `same_tensor`); a layer's output may be its input (``nn.Identity``).
        self.fresh = False
        # The value as simulated ints, when the graph computes what the simulation knows: ``paddle.shape(x)``
        # holds x's dimensions, an item of it one of them (see `known_values`); forgotten when changed in place.
        self.known_value: VariableBase | None = None
        # Changed through a view of it while it requires grad: eager changes its data only, its gradient node
        # stays; the caller's tensor then takes the data only (`write_back`), and the frame cannot read the new
        # value (its symbol is stale: no op here gives a value with another value's gradient).
        self.data_written_back = False
        self.written_back_value = False  # the final value of a tensor from outside, for its write-back
        graph.symbol_owners.setdefault(self.symbol, self)

    @property
    def is_rebound(self) -> bool:
        """Changed in place during the simulation (its current value is a graph-computed symbol)."""
        return len(self.history) > 1

    def rebind(self, symbol: Symbol, meta: MetaInfo) -> None:
        """The tensor now holds ``symbol``'s value (an in-place op ran on it); undone on rollback."""
        previous = (self.symbol, self.meta, list(self.history))

        def undo() -> None:
            self.symbol, self.meta, self.history = previous[0], previous[1], previous[2]

        self.symbol, self.meta = symbol, meta
        self.history.append(symbol)
        self.graph.symbol_owners[symbol] = self
        known, self.known_value = self.known_value, None
        previous_undo = undo

        def undo() -> None:
            previous_undo()
            self.known_value = known
        if self.tracker.is_traceable():  # from outside the frame: the real tensor is written back
            self.graph.side_effects.mutate(self, undo)
        else:
            self.graph.side_effects.on_rollback(undo)

    def write_back_values(self) -> list[VariableBase]:
        """The final value as a computed tensor (a graph output), for `write_back`."""
        return [self._final_value()]

    def _final_value(self) -> "TensorVariable":
        final = getattr(self, "_final", None)
        if final is None or final.symbol != self.symbol:
            final = TensorVariable(self.meta, self.graph, DummyTracker((self,)), symbol=self.symbol)
            final.written_back_value = True
            self._final = final
        return final

    def write_back(self, codegen: "CodeGen") -> None:
        """The caller's tensor takes the final value, as eager in-place ops left it (data, autograd and inplace
        version: one more per change)."""
        from ...runtime import write_back_data, write_back_tensor

        codegen.load_callable_const(write_back_data if self.data_written_back else write_back_tensor)
        codegen.reconstruct(self)
        codegen.reconstruct(self._final_value())
        codegen.load_const(len(self.history) - 1)
        codegen.call(3)
        codegen.emit("POP_TOP")

    def get_py_value(self) -> Any:
        if self.value is None:
            raise FallbackError("the data of a computed tensor is not known during simulation")
        return self.value

    def get_py_type(self) -> type:
        return type(self.value) if self.value is not None else paddle.Tensor

    def make_guards(self, builder: "GuardBuilder", expr: str) -> list[str]:
        from ..dynamic_shape import shape_matches

        from ....eval_frame_ext import dtype_matches, tensor_matches
        from ....eval_frame_ext.tensor_meta import canonical_dtype
        from ..guard import CombinedCheck

        meta = self.input_meta  # (the frame-start meta: an in-place op may have changed the current one)
        builder.shape_checks.append((self.tracker.describe(), expr, tuple(meta.shape)))
        cls = builder.constant(self.get_py_type())
        # (the one object standing for the dtype: what the C++ reader knows, whatever the getter made)
        dtype = builder.constant(canonical_dtype(meta.dtype))
        if -1 in meta.shape:
            shape = builder.constant(tuple(meta.shape))  # a pattern: -1 is a dynamic dimension
            shape_guard = f"{builder.constant(shape_matches)}({expr}.shape, {shape})"
        else:
            shape = builder.constant_list(meta.shape)
            shape_guard = f"{expr}.shape == {shape}"
        # Checked in one C call (the hot path); explained as the four checks it stands for.
        meta_check = CombinedCheck(
            f"{builder.constant(tensor_matches)}({expr}, {cls}, {shape}, {dtype}, {meta.stop_gradient!r})",
            [f"type({expr}) is {cls}", shape_guard, f"{builder.constant(dtype_matches)}({expr}.dtype, {dtype})",
             f"{expr}.stop_gradient is {meta.stop_gradient!r}"])
        place = []
        if _SEVERAL_DEVICES and self.value is not None:  # on a CPU-only build every tensor is on the CPU
            place = [f"{expr}.place._equals({builder.constant(self.value.place)})"]
        return [meta_check, *place]

    def _reconstruct_computed(self, codegen: "CodeGen") -> None:
        if not self.written_back_value:  # (data written back: stale for the frame's own reads only)
            self.graph.check_not_stale(self)
        if self.symbol in self.graph.unaliased_views:
            raise FallbackError("a view changed in place, whose base keeps its own gradient node, leaves the frame "
                                "(eager's still aliases the base; views are not simulated)", self.graph.location)
        codegen.load_graph_output(self.symbol)

    def bool(self) -> bool:
        raise BreakGraphError("a tensor is used as a Python bool (tensor-valued control flow)")

    def getattr(self, name: str) -> VariableBase:
        handler = _TENSOR_ATTRIBUTES.get(name)
        if handler is not None:
            return handler(self)
        static = inspect.getattr_static(paddle.Tensor, name, _MISSING)
        if isinstance(static, property):
            return self.graph.call_tensor_op("api", f"getattr({name!r})", _attr_getter(name), [self], {})
        if callable(static) or static is _MISSING and callable(getattr(paddle.Tensor, name, None)):
            from .callable import TensorMethodVariable

            return TensorMethodVariable(self, name, self.graph)
        raise FallbackError(f"tensor attribute {name!r} is not supported yet")

    def getitem(self, key: VariableBase) -> VariableBase:
        from .known_values import item_of_known
        from .symbolic_int import checked_index

        result = self.graph.call_tensor_op("api", "operator.getitem", operator.getitem,
                                           [self, checked_index(self, key)], {})
        item_of_known(self, key, result)
        return result

    def setitem(self, key: VariableBase, value: VariableBase | None) -> None:
        from .inplace import apply_in_place, set_items
        from .symbolic_int import checked_index

        if value is None:
            raise BreakGraphError("deleting items of a tensor runs natively (eager raises)")
        from .container import SequenceVariable

        if isinstance(value, SequenceVariable):
            raise BreakGraphError("assigning a list or tuple into tensor items runs natively (eager raises)")
        reason = _item_assignment_unlike_eager(self, key, value)
        if reason is not None:
            raise BreakGraphError(f"an item assignment through an index tensor or list: {reason}: runs natively")
        apply_in_place(self, "api", "setitem", set_items, [self, checked_index(self, key), value], {},
                       "item assignment")

    def setattr(self, name: str, value: VariableBase | None) -> None:
        if name == "stop_gradient" and isinstance(value, ConstantVariable) and type(value.value) is bool:
            self._set_stop_gradient(value)
            return
        raise BreakGraphError(f"setting Tensor.{name} changes the tensor itself: runs natively")

    def _set_stop_gradient(self, value: "ConstantVariable") -> None:
        """``tensor.stop_gradient = value``. Eager marks the tensor itself: the ops that read it afterwards
        see it with that flag, the ops that read it before keep their gradient paths. So setting the flag it
        has (known from the guarded meta) changes nothing; marking a tensor computed in the frame as stopping
        gradients is ``detach``: the tensor holds the detached value from here on (still no leaf: it keeps its
        gradient node, which setting the flag back to False, with no in-place change between, reconnects);
        and a tensor from outside that no op read yet (as an input, or as a parameter of a built-in layer
        called before: see `FunctionGraph.may_have_read`) is made to require gradients before the program
        runs, which then takes it as an input requiring them (a built-in layer owning it has its forward
        simulated from then on). Other changes (the caller's tensor stopping gradients, a computed tensor made
        a leaf whose ``.grad`` backward fills) run natively."""
        graph = self.graph
        graph.add_guard(value)
        self._used_meta()
        if self.meta.stop_gradient == value.value:
            return
        if self.value is None and value.value:
            attached = (self.symbol, self.meta)
            detached = graph.call_tensor_op("method", "detach", "detach", [self], {})
            self.rebind(detached.symbol, detached.meta)
            self._detached_by_flag(attached)
            return
        if self.value is None and self.detached_from is not None and self.detached_from[0] == self.symbol:
            self.rebind(*self.detached_from[1])  # (the flag set back: the gradient node is reached again)
            return
        if self.value is None or value.value or self.is_rebound or self.symbol in graph.inputs or \
                graph.may_have_read(self):
            which = "a tensor computed in the frame" if self.value is None else self.tracker.describe()
            raise BreakGraphError(f"setting stop_gradient={value.value} on {which} changes its autograd state "
                                  "where the graph cannot: runs natively")
        previous = (self.symbol, self.meta, self.history)
        self.meta = MetaInfo(self.meta.shape, self.meta.dtype, False)
        self.symbol = graph.new_symbol(self.meta)
        self.history = [self.symbol]
        graph.made_to_require_grad.append(self)
        graph.side_effects.call_before_graph(setattr, [self, ConstantVariable("stop_gradient", graph, DummyTracker()),
                                                       value])

        def undo() -> None:
            self.symbol, self.meta, self.history = previous
            graph.made_to_require_grad.remove(self)

        graph.side_effects.on_rollback(undo)

    #: (detached symbol, (symbol, meta) before): the tensor computed in the frame was marked as stopping
    #: gradients (`_set_stop_gradient`) and holds that detached symbol.
    detached_from: "tuple[Symbol, tuple[Symbol, MetaInfo]] | None" = None

    def _detached_by_flag(self, attached: "tuple[Symbol, MetaInfo]") -> None:
        previous = self.detached_from
        self.detached_from = (self.symbol, attached)
        self.graph.side_effects.on_rollback(lambda: setattr(self, "detached_from", previous))

    def unpack(self) -> list[VariableBase]:
        if not self.meta.shape:
            raise FallbackError("unpacking a tensor of unknown length")
        length = self.concrete_dim(0)
        return [self.getitem(ConstantVariable(i, self.graph, DummyTracker())) for i in range(length)]

    def _used_meta(self) -> None:
        self.graph.add_guard(self)

    def concrete_dim(self, axis: int) -> int:
        """One dimension as a Python int (`concrete_shape` for that one only: the others may stay dynamic, as in
        ``q, k, v = qkv`` of a ``[3, -1, ...]`` tensor)."""
        if self.meta.shape[axis] >= 0:
            self._used_meta()
            return self.meta.shape[axis]
        return self.concrete_shape()[axis]

    def concrete_shape(self) -> tuple[int, ...]:
        """The shape as Python ints. A dynamic dimension of an input is pinned again (its value guarded);
        one of a computed tensor is only known at run time: the graph breaks there."""
        self._used_meta()
        if -1 not in self.meta.shape:
            return self.meta.shape
        if self.value is None:
            raise BreakGraphError("a dynamic dimension of a computed tensor is read as a Python value")
        shape = tuple(self.value.shape)  # (an in-place op keeps the shape: the input's is the current one)
        self.meta = MetaInfo(shape, self.meta.dtype, self.meta.stop_gradient)
        self.input_meta = MetaInfo(shape, self.input_meta.dtype, self.input_meta.stop_gradient)
        if not self.is_rebound:  # the program's input and the meta later statements are inferred from: an op
            self.graph.metas[self.symbol] = self.meta  # needing the dimension as a number (`unbind`) saw -1
        return self.meta.shape

    def __repr__(self) -> str:
        return f"TensorVariable({self.symbol.name}: {self.meta})"


def same_tensor(lhs: TensorVariable, rhs: TensorVariable) -> bool:
    """``lhs is rhs`` for two tensors, known during simulation: one variable stands for each real tensor (all
    its aliases hold it, an in-place op returns it), so distinct variables are distinct tensors when one was
    made by an op that returns a new object, or when both came from outside the frame (their distinctness is
    guarded). An op may hand back its input itself (``x.reshape(x.shape)``, ``x.astype(x.dtype)``, a layer such
    as ``nn.Identity``), which a graph break would not keep either (a program's output is another tensor): the
    frame runs eagerly then."""
    from .inplace import may_return_an_input

    if lhs is rhs:
        return True
    if any(var.fresh and not may_return_an_input(var) for var in (lhs, rhs)):
        return False
    if lhs.value is not None and rhs.value is not None and lhs.tracker.is_traceable() \
            and rhs.tracker.is_traceable():
        lhs.graph.add_distinct(lhs, rhs)
        return False
    raise FallbackError("whether an op handed back its input tensor itself is not known during simulation")


_attr_getters: dict[str, operator.attrgetter] = {}


def _attr_getter(name: str) -> operator.attrgetter:
    """One shared getter per attribute name, so equal SIR compares equal."""
    return _attr_getters.setdefault(name, operator.attrgetter(name))


def _meta_value(read: Any) -> Any:
    def handler(var: TensorVariable) -> VariableBase:
        var._used_meta()
        return VariableFactory.from_value(read(var.meta), var.graph, DummyTracker((var,)))

    return handler


def _is_leaf(var: TensorVariable) -> VariableBase:
    if var.detached_from is not None and var.detached_from[0] == var.symbol:
        return ConstantVariable(False, var.graph, DummyTracker((var,)))  # (marked as stopping gradients: no leaf)
    if var.value is None:  # an op's output: a leaf only when no gradient flows into it
        return ConstantVariable(var.meta.stop_gradient, var.graph, DummyTracker((var,)))
    if var.is_rebound and not var.meta.stop_gradient:  # an in-place op gave it a gradient node
        return ConstantVariable(False, var.graph, DummyTracker((var,)))
    var.graph.add_guard(var)
    return VariableFactory.from_value(var.value.is_leaf, var.graph, DummyTracker((var,)))


def _place(var: TensorVariable) -> VariableBase:
    var.graph.add_guard(var)
    place = var.value.place if var.value is not None else paddle.framework._current_expected_place()
    return VariableFactory.from_value(place, var.graph, DummyTracker((var,)))


def _shape(var: TensorVariable) -> VariableBase:
    from .container import SizeVariable

    from .symbolic_int import dimension

    var._used_meta()
    items = [dimension(var, i) for i in range(len(var.meta.shape))]
    return SizeVariable(items, var.graph, DummyTracker((var,)))


def _name(var: TensorVariable) -> VariableBase:
    """``x.name``: a parameter's (or any tensor's of the frame) is read now and guarded; a tensor computed in
    the graph gets its eager name only when it is made at run time."""
    if var.value is None or not var.tracker.is_traceable():
        raise BreakGraphError("the name of a tensor computed in the graph is only known at run time")
    name = var.value.name
    var.graph.add_expr_guard(var, "{}.name == %r" % (name,))
    return ConstantVariable(name, var.graph, DummyTracker((var,)))


def _persistable(var: TensorVariable) -> VariableBase:
    """``x.persistable``: a flag of the tensor object (parameters and buffers set it), read now and guarded for
    a tensor of the frame; an op's output in eager mode is never persistable."""
    if var.value is None:
        return ConstantVariable(False, var.graph, DummyTracker((var,)))
    if not var.tracker.is_traceable():
        raise BreakGraphError("the persistable flag of this tensor is only known at run time")
    flag = bool(var.value.persistable)
    var.graph.add_expr_guard(var, "{}.persistable is %r" % (flag,))
    return ConstantVariable(flag, var.graph, DummyTracker((var,)))


def _grad(var: TensorVariable) -> VariableBase:
    """``x.grad`` of a tensor of the frame: its autograd state now (a graph input read by its path, or None),
    guarded like any value of the frame. Nothing in a graph changes it (``backward()`` is a graph break), so
    the generated code reads what the simulation read. A tensor computed in the graph has its gradient only
    after a backward at run time."""
    if var.value is None or not var.tracker.is_traceable():
        raise BreakGraphError("the gradient of a tensor computed in the graph is only known at run time")
    return VariableFactory.from_value(var.value.grad, var.graph, GetAttrTracker(var, "grad"))


def _meta_property(var: TensorVariable, name: str) -> VariableBase:
    from .tensor_values import meta_property_value

    return meta_property_value(var, name)


def _size(var: TensorVariable) -> VariableBase:
    from .tensor_values import TensorSizeVariable

    return TensorSizeVariable(var)


_TENSOR_ATTRIBUTES = {
    "shape": lambda var: _shape(var),
    "dtype": _meta_value(lambda m: m.dtype),
    "ndim": _meta_value(lambda m: len(m.shape)),
    "size": lambda var: _size(var),
    "name": lambda var: _name(var),
    "grad": lambda var: _grad(var),
    "persistable": lambda var: _persistable(var),
    "is_leaf": lambda var: _is_leaf(var),
    "place": lambda var: _place(var),
    "stop_gradient": _meta_value(lambda m: m.stop_gradient),
    "requires_grad": _meta_value(lambda m: not m.stop_gradient),
    "itemsize": lambda var: _meta_property(var, "itemsize"),
}


@VariableFactory.register(100)
def _tensor_rule(value: Any, graph: "FunctionGraph", tracker: Tracker) -> VariableBase | None:
    if isinstance(value, paddle.Tensor):
        # One variable per real tensor, however it is reached: an in-place change through one path must be
        # seen through the others (and ``a is b`` is then variable identity).
        known = graph.known_objects.get(id(value))
        if known is not None and isinstance(known[1], TensorVariable) and graph.reached_again(known[1], tracker):
            return known[1]
        shape = tuple(value.shape)
        if tracker.is_traceable():
            from ..dynamic_shape import dynamic_dims

            dims = dynamic_dims(graph.frame.code, tracker.describe())
            shape = tuple(-1 if i in dims and d not in (0, 1) else d for i, d in enumerate(shape))
        meta = MetaInfo(shape, value.dtype, bool(value.stop_gradient))
        var = TensorVariable(meta, graph, tracker, value=value)
        if tracker.is_traceable():
            from .inplace import check_memory_apart

            for changed in list(graph.side_effects.mutated.values()):
                if isinstance(changed, TensorVariable):
                    check_memory_apart(changed, var)
            graph.note_object(value, var)
        return var
    return None


@VariableFactory.register(90)
def _constant_rule(value: Any, graph: "FunctionGraph", tracker: Tracker) -> VariableBase | None:
    if type(value) is int and value not in (0, 1) and -2 ** 63 <= value < 2 ** 63 and tracker.is_traceable():
        from ..dynamic_shape import is_dynamic_int

        if is_dynamic_int(graph.frame.code, tracker.describe()):
            from .symbolic_int import int_input

            return int_input(value, graph, tracker)
    if type(value) is float and value != 0.0 and math.isfinite(value) and tracker.is_traceable():
        from ..dynamic_shape import is_dynamic_float

        if is_dynamic_float(graph.frame.code, tracker.describe()):
            from .symbolic_int import float_input

            return float_input(value, graph, tracker)
    if type(value) in CONSTANT_TYPES or isinstance(value, np.generic):
        return ConstantVariable(value, graph, tracker)
    return None


@VariableFactory.register(0)
def _object_rule(value: Any, graph: "FunctionGraph", tracker: Tracker) -> VariableBase | None:
    return ObjectVariable(value, graph, tracker)


class NewObjectVariable(ObjectVariable):
    """An instance created during simulation. ``value`` is a stand-in of the right class (its ``__init__``
    did not run); its attributes live in the side-effect overlay, and the generated code creates the real
    object and replays the assignments."""

    is_mutable_container = True  # built once in generated code, so every reference is the same object

    def __init__(self, placeholder: Any, cls_var: VariableBase, graph: "FunctionGraph") -> None:
        super().__init__(placeholder, graph, DummyTracker((cls_var,)))
        self.cls_var = cls_var
        self.created = True

    def children(self) -> list[VariableBase]:
        return [self.cls_var]

    def _reconstruct_computed(self, codegen: "CodeGen") -> None:
        from ...runtime import new_object

        codegen.call_helper(new_object, [self.cls_var])

    def __repr__(self) -> str:
        return f"NewObjectVariable({type(self.value).__name__})"


class NumpyArrayVariable(ObjectVariable):
    """A numpy array: guarded by type, shape and dtype while only passed around, and by its contents once
    its values are used (constant folding)."""

    value: np.ndarray

    def __init__(self, value: np.ndarray, graph: "FunctionGraph", tracker: Tracker) -> None:
        super().__init__(value, graph, tracker)
        self.values_used = False

    def get_py_value(self) -> Any:
        self.values_used = True
        return self.value

    def make_guards(self, builder: "GuardBuilder", expr: str) -> list[str]:
        guards = [f"type({expr}) is {builder.constant(type(self.value))}",
                  f"{expr}.shape == {self.value.shape!r}", f"{expr}.dtype == {builder.constant(self.value.dtype)}"]
        if self.values_used:
            contents = self.value.copy()
            guards.append(f"{builder.constant(np.array_equal)}({expr}, {builder.constant(contents)})")
            builder.array_checks.append((self.tracker.describe(), expr, contents))
        return guards

    def length(self) -> int:
        """``len(arr)``: the first dimension, which the guard on the shape fixes (not the contents)."""
        self.graph.add_guard(self)
        return self.graph.run_user_python(len, [self.value], {})

    def getattr(self, name: str) -> VariableBase:
        if name in PURE_ARRAY_METHODS and not self.varies():
            return ArrayMethodVariable(self, name)
        return super().getattr(name)

    def varies(self) -> bool:
        """The contents of this input were seen changing between calls: folding them (or baking them into a
        program) would translate again at every call (dynamic_shape.py)."""
        from ..dynamic_shape import is_varying_array

        return self.tracker.is_traceable() and is_varying_array(self.graph.frame.code, self.tracker.describe())


# Methods of numpy arrays that only read the array: folded on its (then guarded) contents when they give a
# Python or numpy scalar. An array result would be a new mutable object per eager call: it runs natively.
PURE_ARRAY_METHODS = frozenset({"sum", "mean", "max", "min", "prod", "std", "var", "any", "all", "argmax",
                                "argmin", "item", "trace", "round", "dot"})


class ArrayMethodVariable(VariableBase):
    """``arr.sum`` (one of `PURE_ARRAY_METHODS`) of a numpy array variable."""

    def __init__(self, array: NumpyArrayVariable, name: str) -> None:
        super().__init__(array.graph, DummyTracker((array,)))
        self.array = array
        self.name = name

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        operands = [*args, *kwargs.values()]
        if not all(isinstance(var, ConstantVariable) for var in operands):
            raise BreakGraphError(f"ndarray.{self.name}() of these arguments runs natively")
        method = getattr(self.array.value, self.name)
        result = self.graph.run_user_python(method, [a.value for a in args], {k: v.value for k, v in kwargs.items()})
        if isinstance(result, np.ndarray) or type(result) is list:
            raise BreakGraphError(f"ndarray.{self.name}() makes a new array or list: runs natively")
        self.array.get_py_value()  # its values are constants of the translation now: guarded
        for var in [self.array, *operands]:
            self.graph.add_guard(var)
        return VariableFactory.from_value(result, self.graph, DummyTracker((self.array, *operands)))

    def children(self) -> list[VariableBase]:
        return [self.array]

    def _reconstruct_computed(self, codegen: "CodeGen") -> None:
        codegen.reconstruct(self.array)
        codegen.load_attr(self.name)

    def __repr__(self) -> str:
        return f"ArrayMethodVariable({self.name})"


@VariableFactory.register(89)
def _ndarray_rule(value: Any, graph: "FunctionGraph", tracker: Tracker) -> VariableBase | None:
    if type(value) is np.ndarray:
        return NumpyArrayVariable(value, graph, tracker)
    return None

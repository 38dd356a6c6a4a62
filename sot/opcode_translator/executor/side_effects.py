"""Python side effects met during simulation, replayed by the generated code after the graph.

Stores to attributes and globals are kept in program order; containers that came from outside the frame
and were mutated are written back as a whole (their final content), before the stores, while the paths
that lead to them are still those of the frame's start. Every change is undoable, so an instruction that
turns out to break the graph (or an inlined call rolled back) leaves no trace.
"""
from __future__ import annotations

import dataclasses
import types
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from ..codegen import CodeGen
    from .variables.base import VariableBase
    from .variables.basic import TensorVariable

DELETED = object()  # overlay marker: the attribute or global was deleted
ABSENT = object()  # lookup result: nothing stored, read the real value


@dataclasses.dataclass
class AttrStore:
    obj: "VariableBase"
    name: str
    value: "VariableBase | None"  # None: ``del obj.name``
    through_object: bool = False  # made by ``object.__setattr__`` (past the class's own ``__setattr__``)


@dataclasses.dataclass
class CellStore:
    cell: "VariableBase"  # a CellVariable whose ``source`` rebuilds the real cell
    value: "VariableBase | None"


@dataclasses.dataclass
class GlobalStore:
    name: str
    value: "VariableBase | None"  # None: ``del name``


@dataclasses.dataclass
class CallStore:
    """``function(*args)`` run after the graph, in program order with the stores, its result dropped: a call
    whose only effect is on objects of the caller, which nothing in the frame observes before the graph ends
    (``tensor.register_hook(hook)`` on a tensor from outside: the hook fires in backward)."""
    function: Any
    args: list["VariableBase"]


class SideEffects:
    """The effects of one translation, with an undo log for rollbacks."""

    def __init__(self) -> None:
        self.stores: list[AttrStore | GlobalStore | CellStore | CallStore] = []
        self.mutated: dict[int, "VariableBase"] = {}  # containers from outside the frame
        self.before_graph: list[CallStore] = []  # calls run before the program (`call_before_graph`)
        self._attrs: dict[tuple[int, str], Any] = {}
        self._globals: dict[str, Any] = {}
        self._undo: list[Callable[[], None]] = []
        # How many changes of objects from outside the frame were recorded (never decreases: compared before
        # and after a simulated call, it tells whether the call changed anything the caller can see).
        self.outside_changes = 0
        # A logical clock of container changes (any container, from outside the frame or made in it) and when
        # each container changed: an iterator rebuilt at a break (`IteratorVariable.rebuild_after_effects`)
        # must be made on the content its original was made on.
        self.clock = 0
        self.changed_at: dict[int, list[int]] = {}

    # -- recording --------------------------------------------------------------------------------------
    def store_attr(self, obj: "VariableBase", name: str, value: "VariableBase | None",
                   through_object: bool = False) -> None:
        key = (id(obj.get_py_value()), name)
        previous = self._attrs.get(key, ABSENT)
        self._attrs[key] = value if value is not None else DELETED
        self.stores.append(AttrStore(obj, name, value, through_object))
        self.outside_changes += 1
        self._undo.append(lambda: (self.stores.pop(), self._restore(self._attrs, key, previous)))

    def cells_written(self) -> bool:
        """Whether a closure cell of a function outside the frame (or of the frame) is assigned."""
        return any(isinstance(store, CellStore) for store in self.stores)

    def store_global(self, name: str, value: "VariableBase | None") -> None:
        previous = self._globals.get(name, ABSENT)
        self._globals[name] = value if value is not None else DELETED
        self.stores.append(GlobalStore(name, value))
        self.outside_changes += 1
        self._undo.append(lambda: (self.stores.pop(), self._restore(self._globals, name, previous)))

    def store_cell(self, cell: "VariableBase", value: "VariableBase | None") -> None:
        """A closure cell shared with an enclosing function is assigned (``nonlocal x; x = ...``)."""
        previous = cell.content
        self.stores.append(CellStore(cell, value))
        self.outside_changes += 1

        def undo() -> None:
            self.stores.pop()
            cell.content = previous

        self._undo.append(undo)

    def call_after_graph(self, function: Any, args: list["VariableBase"]) -> None:
        """``function(*args)`` is replayed with the stores (see `CallStore`)."""
        self.stores.append(CallStore(function, list(args)))
        self.outside_changes += 1
        self._undo.append(self.stores.pop)

    def call_before_graph(self, function: Any, args: list["VariableBase"]) -> None:
        """``function(*args)`` is run before the program: a change of an object from outside the frame that the
        program itself must see (a tensor made to require gradients before any op read it)."""
        self.before_graph.append(CallStore(function, list(args)))
        self.outside_changes += 1
        self._undo.append(self.before_graph.pop)

    def emit_before_graph(self, codegen: "CodeGen") -> None:
        for store in self.before_graph:
            codegen.call_helper(store.function, store.args)
            codegen.emit("POP_TOP")

    def mutate(self, container: "VariableBase", undo: Callable[[], None]) -> None:
        """``container`` is about to change; ``undo`` restores its simulated content.

        A real container from outside the frame reached only through a computed value (no path) could not
        be written back: its change would be lost, so the frame runs natively instead."""
        if getattr(container, "outside_object", False) and not container.tracker.is_traceable():
            from ...errors import FallbackError

            raise FallbackError(f"changing a {type(container).__name__} from outside the frame reached "
                                "without a path (it could not be written back) is not supported")
        if container.tracker.is_traceable():
            self.outside_changes += 1
        self.clock += 1
        times = self.changed_at.setdefault(id(container), [])
        times.append(self.clock)
        self._undo.append(times.pop)
        if container.tracker.is_traceable() and id(container) not in self.mutated:
            self.mutated[id(container)] = container
            self._undo.append(lambda: self.mutated.pop(id(container)))
        self._undo.append(undo)

    @staticmethod
    def _restore(table: dict, key: Any, previous: Any) -> None:
        if previous is ABSENT:
            table.pop(key, None)
        else:
            table[key] = previous

    def on_rollback(self, undo: Callable[[], None]) -> None:
        """Another simulated change (outside this log) that a rollback must undo."""
        self._undo.append(undo)

    # -- reading through the overlay --------------------------------------------------------------------
    def lookup_attr(self, obj: Any, name: str) -> Any:
        """The simulated value of ``obj.name`` if it was stored (or `DELETED`), else `ABSENT`."""
        return self._attrs.get((id(obj), name), ABSENT)

    def has_attr_stores(self) -> bool:
        """Whether any attribute was stored or deleted in the frame (still pending)."""
        return bool(self._attrs)

    def tensor_stored_on_a_layer(self, within: Any = None) -> bool:
        """Whether a tensor was assigned to an attribute of a layer in the frame (still pending): of ``within``
        or one of its sublayers if given, else of any layer."""
        import paddle

        layers = within.sublayers(include_self=True) if within is not None else None
        return any(isinstance(store, AttrStore) and type(store.value).__name__ == "TensorVariable"
                   and isinstance(store.obj.get_py_value(), paddle.nn.Layer)
                   and (layers is None or any(store.obj.get_py_value() is layer for layer in layers))
                   for store in self.stores)

    def tree_store_pending(self, layer: Any) -> bool:
        """Whether a store still pending may change which sublayers or buffers ``layer``'s tree holds (a layer
        assigned to an attribute of it or of a sublayer, a tensor under a name that is no buffer yet, an
        attribute deleted, or a member table changed in place): reading the real tree would miss it."""
        from .variables.layer import LayerVariable

        members = {id(sub): sub for sub in layer.sublayers(include_self=True)}

        def changes_tree(store: AttrStore) -> bool:
            owner = members[id(store.obj.get_py_value())]
            return store.value is None or isinstance(store.value, LayerVariable) or (
                _is_tensor(store.value) and store.name not in (owner.__dict__.get("_buffers") or ()))

        tables = {id(table) for sub in members.values() for store in ("_parameters", "_sub_layers", "_buffers")
                  if (table := sub.__dict__.get(store)) is not None}
        if any(id(getattr(container, "real", None)) in tables for container in self.mutated.values()):
            return True  # (a member table changed in place: ``LayerList.append``, ``add_sublayer``)
        return any(isinstance(store, AttrStore) and id(store.obj.get_py_value()) in members and changes_tree(store)
                   for store in self.stores)

    def has_attrs_of(self, obj: Any) -> bool:
        """Whether an attribute of ``obj`` was stored or deleted in the frame (still pending)."""
        return any(key[0] == id(obj) for key in self._attrs)

    def attr_names_of(self, obj: Any) -> set[str]:
        """The names of the attributes of ``obj`` stored or deleted in the frame (still pending)."""
        return {key[1] for key in self._attrs if key[0] == id(obj)}

    def lookup_global(self, name: str) -> Any:
        return self._globals.get(name, ABSENT)

    # -- rollback ---------------------------------------------------------------------------------------
    def checkpoint(self) -> int:
        return len(self._undo)

    def rollback(self, checkpoint: int) -> None:
        while len(self._undo) > checkpoint:
            self._undo.pop()()

    # -- replay -----------------------------------------------------------------------------------------
    def values(self) -> list["VariableBase"]:
        """Variables the replay needs (their tensors must be graph outputs)."""
        needed: list[VariableBase] = list(self.mutated.values())
        for container in self.mutated.values():
            needed += container.write_back_values()
        needed += [s.value for s in self.stores if not isinstance(s, CallStore) and s.value is not None]
        needed += [arg for s in self.stores if isinstance(s, CallStore) for arg in s.args]
        needed += [s.obj for s in self.stores if isinstance(s, AttrStore)]
        needed += [s.cell.source for s in self.stores if isinstance(s, CellStore)]
        return needed

    def __bool__(self) -> bool:
        return bool(self.stores or self.mutated or self.before_graph)

    def changed_tensors(self) -> list["TensorVariable"]:
        """The tensors from outside the frame changed in place: their final values are written back into them
        after the program (`emit_tensor_write_backs`)."""
        return [var for var in self.mutated.values() if _is_tensor(var)]

    def emit_tensor_write_backs(self, codegen: "CodeGen") -> None:
        """The tensors from outside the frame changed in place take their final values: right after the
        program, before the views of them among its results are made again (`ProgramPlan.emit_call`). They
        change no path to anything, so the other effects are still replayed from the frame's start."""
        for tensor in self.changed_tensors():
            tensor.write_back(codegen)

    def emit(self, codegen: "CodeGen") -> None:
        """Replay: every value is computed first (paths as at the frame's start), then applied. (Tensors were
        written back already, by `emit_tensor_write_backs`.)"""
        for var in self.values():
            codegen.spill(var)
        for container in self.mutated.values():
            if not _is_tensor(container):
                container.write_back(codegen)
        from ..runtime import set_cell

        superseded = _superseded_module_stores(self.stores)
        for index, store in enumerate(self.stores):
            if index in superseded:
                continue
            if isinstance(store, CallStore):
                codegen.call_helper(store.function, store.args)
                codegen.emit("POP_TOP")
            elif isinstance(store, CellStore):
                codegen.call_helper(set_cell, [store.cell.source, store.value])
                codegen.emit("POP_TOP")
            elif isinstance(store, AttrStore) and store.through_object:
                codegen.load_callable_const(object.__setattr__ if store.value is not None else object.__delattr__)
                codegen.reconstruct(store.obj)
                codegen.load_const(store.name)
                if store.value is not None:
                    codegen.reconstruct(store.value)
                codegen.call(3 if store.value is not None else 2)
                codegen.emit("POP_TOP")
            elif isinstance(store, AttrStore):
                if store.value is None:
                    codegen.reconstruct(store.obj)
                    codegen.emit("DELETE_ATTR", store.name)
                else:
                    codegen.reconstruct(store.value)
                    codegen.reconstruct(store.obj)
                    codegen.emit("STORE_ATTR", store.name)
            elif store.value is None:
                codegen.emit("DELETE_GLOBAL", store.name)
            else:
                codegen.reconstruct(store.value)
                codegen.emit("STORE_GLOBAL", store.name)


def _superseded_module_stores(stores: list) -> set[int]:
    """Indexes of stores to a global or a plain module's attribute that a later store of the same name
    overwrites: a module's dict runs no code on assignment, so only the last one is replayed. (Paddle's
    ``RNNCellBase.get_initial_states`` swaps a helper of ``paddle.utils.layers_utils`` for a closure and puts
    it back: the closure, made in the simulation, need not be rebuilt.)"""
    last: dict[tuple[Any, str], int] = {}
    superseded = set()
    for index, store in enumerate(stores):
        if isinstance(store, GlobalStore):
            key: tuple[Any, str] = (None, store.name)
        elif isinstance(store, AttrStore) and type(store.obj.get_py_value()) is types.ModuleType:
            key = (id(store.obj.get_py_value()), store.name)
        else:
            continue
        if key in last:
            superseded.add(last[key])
        last[key] = index
    return superseded


def _is_tensor(var: "VariableBase") -> bool:
    from .variables.basic import TensorVariable

    return isinstance(var, TensorVariable)

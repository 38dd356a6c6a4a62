"""Trackers: where a simulated value came from.

Every variable carries a tracker. Trackers that lead back to the frame (an argument, a global, a closure
cell, an attribute or item of one of those) let us (1) write a guard expression that re-reads the value at
the next call and (2) emit bytecode that reloads it in the generated code. A `DummyTracker` marks a value
produced by the simulation itself.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..codegen import CodeGen
    from .guard import GuardBuilder
    from .variables.base import VariableBase


class Tracker:
    """Base class; ``inputs`` are the variables this one was derived from."""

    inputs: tuple["VariableBase", ...] = ()

    def is_traceable(self) -> bool:
        """True when the value can be re-read from the frame (so it can be guarded and reloaded)."""
        return all(var.tracker.is_traceable() for var in self.inputs)

    def guard_expr(self, builder: "GuardBuilder") -> str:
        raise NotImplementedError(type(self).__name__)

    def gen_load(self, codegen: "CodeGen") -> None:
        raise NotImplementedError(type(self).__name__)

    def describe(self) -> str:
        """A short Python-like expression for logs and reports."""
        raise NotImplementedError(type(self).__name__)

    def slot(self) -> tuple["VariableBase", Any] | None:
        """(container variable, key) when this is an item of a container variable holding the items'
        variables (see `ItemsReadTracked`), else None."""
        return None


def _is_layer(value: Any) -> bool:
    import paddle

    return isinstance(value, paddle.nn.Layer)


class DummyTracker(Tracker):
    """A value computed during simulation; it has no source in the frame."""

    def __init__(self, inputs: tuple["VariableBase", ...] = ()) -> None:
        self.inputs = tuple(inputs)

    def is_traceable(self) -> bool:
        return False

    def describe(self) -> str:
        return "<computed>"


class ComputedMethodTracker(DummyTracker):
    """A method bound to a value computed during simulation (``e.add_note`` of an exception made in the frame).
    Not traceable, but rebuilt by reading the method off the rebuilt receiver: the generated code makes such a
    receiver anew for each run (an exception, `runtime.fresh_exception`), so a method bound to the object the
    simulation saw would act on that one object, shared by every run, and not on the frame's."""

    def __init__(self, receiver: "VariableBase", name: str) -> None:
        super().__init__((receiver,))
        self.receiver = receiver
        self.name = name

    def gen_rebuild(self, codegen: "CodeGen") -> None:
        codegen.reconstruct(self.receiver)
        codegen.load_attr(self.name)

    def describe(self) -> str:
        return f"<computed>.{self.name}"


class LocalTracker(Tracker):
    """An argument of the translated frame (the only locals bound when the frame starts)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def guard_expr(self, builder: "GuardBuilder") -> str:
        return builder.argument(self.name)

    def gen_load(self, codegen: "CodeGen") -> None:
        codegen.load_fast(self.name)

    def describe(self) -> str:
        return self.name


class GlobalTracker(Tracker):
    """A name looked up in the frame's globals."""

    def __init__(self, name: str) -> None:
        self.name = name

    def guard_expr(self, builder: "GuardBuilder") -> str:
        return f"{builder.GLOBALS}[{self.name!r}]"

    def gen_load(self, codegen: "CodeGen") -> None:
        codegen.load_global(self.name)

    def describe(self) -> str:
        return self.name


class BuiltinTracker(Tracker):
    """A name found in builtins after missing in globals (which the guard re-checks).

    ``globals_var`` is the variable of the globals dict searched first, or None for the translated
    frame's own globals.
    """

    def __init__(self, name: str, value: Any, globals_var: "VariableBase | None" = None) -> None:
        self.name = name
        self.value = value
        self.globals_var = globals_var
        self.inputs = (globals_var,) if globals_var is not None else ()

    def guard_expr(self, builder: "GuardBuilder") -> str:
        # Shadowing the builtin by a global later must invalidate the entry.
        where = builder.GLOBALS if self.globals_var is None else builder.expr_of(self.globals_var)
        builder.add_raw(f"{self.name!r} not in {where}")
        return builder.constant(self.value)

    def gen_load(self, codegen: "CodeGen") -> None:
        if self.globals_var is None:
            codegen.load_global(self.name)
        else:
            codegen.load_const(self.value)

    def describe(self) -> str:
        return self.name


class ClosureTracker(Tracker):
    """The content of a closure cell (a free variable of the frame)."""

    def __init__(self, index: int, name: str) -> None:
        self.index = index
        self.name = name

    def guard_expr(self, builder: "GuardBuilder") -> str:
        return f"{builder.CLOSURE}[{self.index}].cell_contents"

    def gen_load(self, codegen: "CodeGen") -> None:
        codegen.load_deref(self.name)

    def describe(self) -> str:
        return self.name


class FrameCellTracker(Tracker):
    """A closure cell of the translated frame itself (not its content): to guard that a function reached
    from the frame shares it."""

    def __init__(self, index: int, name: str) -> None:
        self.index = index
        self.name = name

    def guard_expr(self, builder: "GuardBuilder") -> str:
        return f"{builder.CLOSURE}[{self.index}]"

    def gen_load(self, codegen: "CodeGen") -> None:
        from ..pyversion import emit_load_closure
        from bytecode import FreeVar

        emit_load_closure(codegen.emit, FreeVar(self.name))

    def describe(self) -> str:
        return f"<cell {self.name}>"


class ConstTracker(Tracker):
    """A constant of the code object; never needs a guard."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def is_traceable(self) -> bool:
        return True

    def guard_expr(self, builder: "GuardBuilder") -> str:
        return builder.constant(self.value)

    def gen_load(self, codegen: "CodeGen") -> None:
        codegen.load_const(self.value)

    def describe(self) -> str:
        return repr(self.value)


class GetAttrTracker(Tracker):
    """``base.attr``."""

    def __init__(self, base: "VariableBase", attr: str) -> None:
        self.inputs = (base,)
        self.base = base
        self.attr = attr

    def _member_store(self) -> str | None:
        """The table of a layer's sublayers, parameters or buffers holding ``attr``: read from it directly (the
        layer's Python ``__getattr__`` costs a call per access, and a user layer's own ``__getattr__``, such
        as an adapter's delegating one, would run, and be translated, at every load)."""
        owner = getattr(self.base, "value", None)
        if owner is None or not _is_layer(owner):
            return None
        for store in ("_sub_layers", "_parameters", "_buffers"):
            members = owner.__dict__.get(store)
            if isinstance(members, dict) and self.attr in members:
                return store
        return None

    def guard_expr(self, builder: "GuardBuilder") -> str:
        base = builder.expr_of(self.base)
        store = self._member_store()
        return f"{base}.{store}[{self.attr!r}]" if store is not None else f"{base}.{self.attr}"

    def gen_load(self, codegen: "CodeGen") -> None:
        codegen.reconstruct(self.base)
        store = self._member_store()
        if store is None:
            codegen.load_attr(self.attr)
            return
        codegen.load_attr(store)
        codegen.load_const(self.attr)
        codegen.binary_subscr()

    def describe(self) -> str:
        return f"{self.base.tracker.describe()}.{self.attr}"


class GenericGetAttrTracker(GetAttrTracker):
    """``object.__getattribute__(base, attr)``: an attribute of an object whose class overrides
    ``__getattribute__`` in Python, read as that override reads it (through the generic lookup). The plain
    ``base.attr`` would run the override again, in the guard (its side effects at every check, and a value
    it transforms never equal to the one guarded) and in the generated code."""

    def _member_store(self) -> str | None:
        return None

    def guard_expr(self, builder: "GuardBuilder") -> str:
        return f"{builder.constant(object.__getattribute__)}({builder.expr_of(self.base)}, {self.attr!r})"

    def gen_load(self, codegen: "CodeGen") -> None:
        codegen.load_callable_const(object.__getattribute__)
        codegen.reconstruct(self.base)
        codegen.load_const(self.attr)
        codegen.call(2)

    def describe(self) -> str:
        return f"object.__getattribute__({self.base.tracker.describe()}, {self.attr!r})"


class GetItemTracker(Tracker):
    """``base[key]`` with a constant key."""

    def __init__(self, base: "VariableBase", key: Any) -> None:
        self.inputs = (base,)
        self.base = base
        self.key = key

    def guard_expr(self, builder: "GuardBuilder") -> str:
        return f"{builder.expr_of(self.base)}[{builder.constant(self.key)}]"

    def gen_load(self, codegen: "CodeGen") -> None:
        codegen.reconstruct(self.base)
        codegen.load_const(self.key)
        codegen.binary_subscr()

    def describe(self) -> str:
        return f"{self.base.tracker.describe()}[{self.key!r}]"

    def slot(self) -> tuple["VariableBase", Any] | None:
        return self.base, self.key


class SublayerTracker(GetItemTracker):
    """``container[index]`` of a ``Sequential``/``LayerList`` whose member names are guarded: the guard reads
    ``container._sub_layers[name]`` (a dict lookup) instead of the container's Python ``__getitem__``."""

    def __init__(self, base: "VariableBase", key: Any, name: str) -> None:
        super().__init__(base, key)
        self.name = name

    def guard_expr(self, builder: "GuardBuilder") -> str:
        return f"{builder.expr_of(self.base)}._sub_layers[{self.name!r}]"

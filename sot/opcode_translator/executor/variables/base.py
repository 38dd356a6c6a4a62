"""`VariableBase`, the common interface of simulated values, and the factory that picks a kind."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from ....errors import FallbackError
from ....eval_frame_ext import HEAPTYPE  # (imported from here by the variable kinds)
from ..tracker import DummyTracker, Tracker

if TYPE_CHECKING:
    from ...codegen import CodeGen
    from ..function_graph import FunctionGraph
    from ..guard import GuardBuilder


class VariableBase:
    """A value on the simulated stack or in simulated locals.

    ``graph`` is the `FunctionGraph` being recorded; ``tracker`` says where the value came from. Subclasses
    override the operations they support; the defaults make the frame fall back with a clear reason.
    """

    def __init__(self, graph: "FunctionGraph", tracker: Tracker) -> None:
        self.graph = graph
        self.tracker = tracker

    # -- Python view ---------------------------------------------------------------------------------------
    def get_py_value(self) -> Any:
        """The concrete Python value, when the simulation knows it."""
        raise FallbackError(f"the value of {self!r} is not known during simulation")

    def get_py_type(self) -> type:
        return type(self.get_py_value())

    # -- guards and reconstruction -----------------------------------------------------------------------
    def make_guards(self, builder: "GuardBuilder", expr: str) -> list[str]:
        """Expressions that must hold at the next call for this variable to simulate the same way."""
        return [builder.identity(expr, self.get_py_value())]

    def reconstruct(self, codegen: "CodeGen") -> None:
        """Emit bytecode that pushes this value in the generated code."""
        if self.tracker.is_traceable():
            self.tracker.gen_load(codegen)
            return
        self._reconstruct_computed(codegen)

    def _reconstruct_computed(self, codegen: "CodeGen") -> None:
        raise FallbackError(f"cannot rebuild {self!r} in generated code")

    # -- operations ----------------------------------------------------------------------------------------
    def getattr(self, name: str) -> "VariableBase":
        raise FallbackError(f"attribute {name!r} of {self!r} is not supported yet")

    def getitem(self, key: "VariableBase") -> "VariableBase":
        raise FallbackError(f"subscript of {self!r} is not supported yet")

    def call(self, args: list["VariableBase"], kwargs: dict[str, "VariableBase"]) -> "VariableBase":
        raise FallbackError(f"calling {self!r} is not supported yet")

    def setattr(self, name: str, value: "VariableBase | None") -> None:
        """``self.name = value``; ``value`` None means ``del self.name``."""
        raise FallbackError(f"setting attribute {name!r} of {self!r} is not supported yet")

    def setitem(self, key: "VariableBase", value: "VariableBase | None") -> None:
        """``self[key] = value``; ``value`` None means ``del self[key]``."""
        raise FallbackError(f"item assignment on {self!r} is not supported yet")

    def unpack(self) -> list["VariableBase"]:
        raise FallbackError(f"unpacking {self!r} is not supported yet")

    def children(self) -> list["VariableBase"]:
        """The variables rebuilding this one (computed) needs: container items, a method's receiver..."""
        return []

    def bool(self) -> bool:
        """The truth value, when it is a Python-level decision (a guard is added by the caller)."""
        raise FallbackError(f"truth value of {self!r} is not known during simulation")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.tracker.describe() if self.tracker.is_traceable() else '...'})"


class NullVariable(VariableBase):
    """The NULL that 3.11's ``PUSH_NULL``/``LOAD_GLOBAL``/``LOAD_METHOD`` put under a callable."""

    def __init__(self, graph: "FunctionGraph") -> None:
        super().__init__(graph, DummyTracker())

    def reconstruct(self, codegen: "CodeGen") -> None:
        codegen.push_null()


Rule = Callable[[Any, "FunctionGraph", Tracker], "VariableBase | None"]


class VariableFactory:
    """Maps a real Python value to the variable kind that models it: a table of rules, tried in order."""

    _rules: list[tuple[int, Rule]] = []

    @classmethod
    def register(cls, priority: int) -> Callable[[Rule], Rule]:
        """Register a rule; higher priority rules are tried first."""

        def decorate(rule: Rule) -> Rule:
            cls._rules.append((priority, rule))
            cls._rules.sort(key=lambda item: -item[0])
            return rule

        return decorate

    @classmethod
    def from_value(cls, value: Any, graph: "FunctionGraph", tracker: Tracker) -> VariableBase:
        for _, rule in cls._rules:
            var = rule(value, graph, tracker)
            if var is not None:
                return var
        raise FallbackError(f"no variable kind models a value of type {type(value).__name__}")

"""Context managers in ``with`` blocks: Paddle's grad-mode switches are modelled in the graph; user
context managers written in Python have their ``__enter__``/``__exit__`` inlined."""
from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any

import paddle

from ....errors import FallbackError
from ..tracker import DummyTracker
from .base import VariableBase
from .basic import ConstantVariable, ObjectVariable

if TYPE_CHECKING:
    from ...codegen import CodeGen
    from ..function_graph import FunctionGraph

_GradClasses = {paddle.base.dygraph.base.no_grad_: False, paddle.base.dygraph.base.enable_grad: True}


class GradModeVariable(VariableBase):
    """``paddle.no_grad()`` / ``paddle.enable_grad()``: entering switches the simulated grad mode, so the
    statements recorded inside are marked and run without autograd (in the program and in eager replay)."""

    def __init__(self, enabled: bool, graph: "FunctionGraph") -> None:
        super().__init__(graph, DummyTracker())
        self.enabled = enabled

    def enter(self) -> tuple[VariableBase, VariableBase]:
        exit_var = GradModeExitVariable(self.graph.grad_mode, self.enabled, self.graph)
        self.graph.grad_mode = self.enabled
        return exit_var, ConstantVariable(None, self.graph, DummyTracker())

    def __repr__(self) -> str:
        return f"GradModeVariable(enabled={self.enabled})"


class GradModeExitVariable(VariableBase):
    """The ``__exit__`` a grad-mode ``with`` leaves on the stack."""

    def __init__(self, previous: bool, inside: bool, graph: "FunctionGraph") -> None:
        super().__init__(graph, DummyTracker())
        self.previous = previous
        self.inside = inside

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        self.graph.grad_mode = self.previous
        return ConstantVariable(None, self.graph, DummyTracker())

    def _reconstruct_computed(self, codegen: "CodeGen") -> None:
        # A graph break inside the block: enter the real mode now; the resume function, which continues in
        # the block, receives the real ``__exit__``.
        from ...runtime import enter_grad_mode

        codegen.load_callable_const(enter_grad_mode)
        codegen.load_const(self.inside)
        codegen.call(1)


def grad_mode_for_class(cls: Any) -> bool | None:
    """The grad mode a Paddle grad-mode class switches to, or None for other classes."""
    try:
        return _GradClasses.get(cls)
    except TypeError:
        return None


def enter_context(manager: VariableBase) -> tuple[VariableBase, VariableBase]:
    """``BEFORE_WITH``: returns (the ``__exit__`` to keep on the stack, the value of ``__enter__()``)."""
    if isinstance(manager, GradModeVariable):
        return manager.enter()
    if isinstance(manager, ObjectVariable):
        enter = getattr(type(manager.value), "__enter__", None)
        leave = getattr(type(manager.value), "__exit__", None)
        if isinstance(enter, types.FunctionType) and isinstance(leave, types.FunctionType):
            exit_var = manager.getattr("__exit__")
            return exit_var, manager.getattr("__enter__").call([], {})
    raise FallbackError(f"`with` over {manager!r} is not simulated yet")

"""User ``paddle.autograd.PyLayer`` subclasses: ``MyPyLayer.apply(...)`` becomes one ``pylayer`` statement.

A PyLayer class is a `PyLayerClassVariable` (guarded by identity like any class); reading its ``apply``
(a C classmethod inherited from Paddle) gives a `PyLayerApplyVariable`, as does a bound ``apply`` stored
elsewhere (``my_op = MyPyLayer.apply``). Calling it records ``graph.call_tensor_op("pylayer", ...)`` with
the class's `PyLayerTarget` (see ``sot/symbolic/pylayer.py``): the user's forward and backward are compiled
into the static program by ``static_pylayer``. A call that cannot be made static with eager semantics is
a graph break, so it runs natively (Paddle's own PyLayer): never a wrong gradient.
"""
from __future__ import annotations

import inspect
import types
from typing import TYPE_CHECKING, Any

from paddle.autograd import PyLayer

from ....errors import BreakGraphError, FallbackError
from ....symbolic.compile import inference_callback_installed
from ....symbolic.pylayer import check_static, pylayer_target
from ..tracker import DummyTracker, GetAttrTracker, Tracker
from .base import VariableBase, VariableFactory
from .basic import ObjectVariable, TensorVariable
from .callable import CallableVariable
from .container import DictVariable, SequenceVariable

if TYPE_CHECKING:
    from ..function_graph import FunctionGraph
    from ..guard import GuardBuilder

_PADDLE_APPLY = inspect.getattr_static(PyLayer, "apply")


def _is_pylayer_class(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, PyLayer) and value is not PyLayer


def _uses_paddle_apply(cls: type) -> bool:
    """``cls.apply`` is Paddle's own (not overridden by the user)."""
    return inspect.getattr_static(cls, "apply", None) is _PADDLE_APPLY


class PyLayerClassVariable(ObjectVariable):
    """A PyLayer subclass; ``apply`` is special, every other attribute is read as for any class."""

    value: type

    def getattr(self, name: str) -> VariableBase:
        if name == "apply" and _uses_paddle_apply(self.value):
            tracker = GetAttrTracker(self, name) if self.tracker.is_traceable() else DummyTracker((self,))
            return PyLayerApplyVariable(self.value, self.graph, tracker)
        return super().getattr(name)

    def __repr__(self) -> str:
        return f"PyLayerClassVariable({self.value.__qualname__} {self.tracker.describe()})"


def _holds_tensor(var: VariableBase) -> bool:
    if isinstance(var, TensorVariable):
        return True
    if isinstance(var, SequenceVariable):
        return any(_holds_tensor(item) for item in var.items)
    if isinstance(var, DictVariable):
        return any(_holds_tensor(item) for item in var.items.values())
    return False


def _meta_of(var: VariableBase, name: str) -> Any:
    """The argument as meta inference sees it: `MetaInfo` for tensors, Python values otherwise."""
    if isinstance(var, TensorVariable):
        if any(dim < 0 for dim in var.meta.shape):
            # The forward would read -1 for a symbolic dimension where eager reads the real size.
            raise BreakGraphError(f"{name}: tensor argument with a dynamic shape runs natively")
        return var.meta
    if _holds_tensor(var):
        # Eager PyLayer counts a list of tensors as one input slot: not the static op's view.
        raise BreakGraphError(f"{name}: tensors inside a container argument run natively")
    try:
        return var.get_py_value()
    except FallbackError as exc:
        raise BreakGraphError(f"{name}: argument {var!r} is not known during simulation ({exc.reason})") from None


class PyLayerApplyVariable(CallableVariable):
    """``cls.apply`` of a user PyLayer: each call is one ``pylayer`` SIR statement."""

    def __init__(self, cls: type, graph: "FunctionGraph", tracker: Tracker) -> None:
        super().__init__(cls.apply, graph, tracker)
        self.cls = cls

    def make_guards(self, builder: "GuardBuilder", expr: str) -> list[str]:
        # A bound method is a new object at each access: guard what it is bound to.
        return [builder.identity(f"{expr}.__self__", self.cls)]

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        cls = self.cls
        graph = self.graph
        graph.add_guard(self)
        name = f"{cls.__qualname__}.apply"
        for method in ("forward", "backward"):
            if not isinstance(getattr(cls, method, None), types.FunctionType):
                raise BreakGraphError(f"{name}: {method} is not a Python function; runs natively")
        meta_args = tuple(_meta_of(arg, name) for arg in args)
        meta_kwargs = {key: _meta_of(value, name) for key, value in kwargs.items()}
        target = pylayer_target(cls, tuple(kwargs))
        # ``symbolic_translate(..., training=False)`` (its callback is simulating us) never builds backward.
        inference = inference_callback_installed()
        graph.add_query_guard(inference_callback_installed, inference)
        try:
            check_static(target, meta_args, meta_kwargs, graph.grad_enabled, backward=not inference)
        except Exception as exc:
            first_line = (str(exc).strip().splitlines() or [""])[0]
            raise BreakGraphError(f"{name} cannot be compiled into the graph ({type(exc).__name__}: "
                                  f"{first_line}); it runs natively") from None
        try:
            return graph.call_tensor_op("pylayer", name, target, list(args), dict(kwargs))
        except BreakGraphError:
            raise
        except FallbackError as exc:
            raise BreakGraphError(f"{name} cannot be compiled into the graph ({exc.reason}); it runs "
                                  "natively") from None

    def __repr__(self) -> str:
        return f"PyLayerApplyVariable({self.cls.__qualname__}.apply)"


@VariableFactory.register(98)
def _pylayer_rule(value: Any, graph: "FunctionGraph", tracker: Tracker) -> VariableBase | None:
    if isinstance(value, type):
        return PyLayerClassVariable(value, graph, tracker) if _is_pylayer_class(value) else None
    if isinstance(value, types.BuiltinMethodType) and getattr(value, "__name__", None) == "apply":
        owner = getattr(value, "__self__", None)
        if _is_pylayer_class(owner) and _uses_paddle_apply(owner):
            return PyLayerApplyVariable(owner, graph, tracker)
    return None

"""`paddle.nn.Layer` instances.

A user layer's ``forward`` is inlined like any method. A built-in Paddle layer (``Linear``, ``Conv2D``,
``LSTM``...) becomes one ``layer`` SIR statement; its parameters are captured by the static program when
the statement is built under ``to_static``, so optimizer updates never force a retranslation. Container
layers (``Sequential``, ``LayerList``, ``LayerDict``) iterate, index and chain their children.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import paddle

from ....errors import FallbackError, UserCodeError
from ....symbolic.sir import layer_call
from ..tracker import DummyTracker, GetAttrTracker, GetItemTracker, SublayerTracker, Tracker
from .base import VariableBase, VariableFactory
from .basic import ConstantVariable, ObjectVariable
from .callable import CallableVariable
from .container import TupleVariable

if TYPE_CHECKING:
    from ..function_graph import FunctionGraph
    from ..guard import GuardBuilder

_CONTAINERS = (paddle.nn.Sequential, paddle.nn.LayerList, paddle.nn.LayerDict)


def is_builtin_forward(forward: Any) -> bool:
    """``forward`` is the ``forward`` of a built-in Paddle layer class (``Linear``, ``LSTM``...), which is
    recorded as one ``layer`` statement; the plain containers' forward is simulated instead."""
    module = getattr(forward, "__module__", "") or ""
    return (module.startswith("paddle.nn.") and forward is not paddle.nn.Layer.forward
            and forward is not paddle.nn.Sequential.forward)


def is_builtin_layer(layer: paddle.nn.Layer) -> bool:
    """A layer whose ``forward`` is Paddle's own code (not overridden by the user): ``Linear``, ``LSTM``
    (which happens to subclass ``LayerList``)... but not the plain containers."""
    return is_builtin_forward(getattr(type(layer), "forward", None))


class BuiltinForwardVariable(CallableVariable):
    """The ``forward`` of a built-in layer class bound to a layer of a user subclass: ``super().forward``
    inside ``class Scaled(nn.Linear)``. Called, it is one ``layer`` statement running that class's forward
    on the layer (without the hooks, as a direct ``forward`` call), like a built-in layer called directly."""

    def __init__(self, layer_var: "LayerVariable", cls: type) -> None:
        super().__init__(cls.forward, layer_var.graph, DummyTracker((layer_var,)))
        self.layer_var = layer_var
        self.cls = cls

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        layer_var = self.layer_var
        # The program calls this very layer (its parameters, its attributes): guarded by identity.
        layer_var.needs_identity = True
        self.graph.add_guard(layer_var)
        target = layer_call(layer_var.value, run_hooks=False, forward_of=self.cls)
        return self.graph.call_tensor_op("layer", f"{self.cls.__module__}.{self.cls.__name__}.forward", target,
                                         list(args), dict(kwargs))

    def __repr__(self) -> str:
        return f"BuiltinForwardVariable({self.cls.__name__}.forward of {self.layer_var!r})"


class LayerVariable(ObjectVariable):
    """A `paddle.nn.Layer`; guarded by identity and by its ``training`` flag."""

    value: paddle.nn.Layer

    def make_guards(self, builder: "GuardBuilder", expr: str) -> list[str]:
        # A built-in layer is part of the compiled program itself: its identity matters. A user layer is
        # only a path to its parameters and sublayers, each guarded on its own, so another instance of the
        # same class reuses the translation.
        if self.needs_identity or is_builtin_layer(self.value) or isinstance(self.value, _CONTAINERS):
            head = builder.identity(expr, self.value)
        else:
            head = f"type({expr}) is {builder.constant(type(self.value))}"
        return [head, f"{expr}.training is {bool(self.value.training)!r}"]

    def _child(self, key: Any, layer: Any) -> VariableBase:
        tracker: Tracker
        if not self.tracker.is_traceable():
            tracker = DummyTracker((self,))
        elif isinstance(self.value, (paddle.nn.Sequential, paddle.nn.LayerList)) and isinstance(key, int):
            self._guard_member_names()  # what makes ``_sub_layers[name]`` mean ``[key]``
            tracker = SublayerTracker(self, key, list(self.value._sub_layers)[key])
        else:
            tracker = GetItemTracker(self, key)
        return VariableFactory.from_value(layer, self.graph, tracker)

    def _guard_member_names(self) -> None:
        """The container's members, by name and order: iterating it, its length and its indexing depend on
        them (a block appended to a ``LayerList`` after translation must not be skipped)."""
        names = tuple(self.value._sub_layers)
        self.graph.add_expr_guard(self, "tuple({}._sub_layers) == %r" % (names,))

    def iter_items(self) -> list[VariableBase]:
        layer = self.value
        self.graph.add_guard(self)
        self._guard_member_names()
        if isinstance(layer, paddle.nn.LayerDict):
            return [ConstantVariable(key, self.graph, DummyTracker((self,))) for key in layer.keys()]
        if isinstance(layer, (paddle.nn.Sequential, paddle.nn.LayerList)):
            return [self._child(i, child) for i, child in enumerate(layer)]
        raise FallbackError(f"iterating over {type(layer).__name__} is not supported")

    unpack = iter_items

    def length(self) -> int:
        self.graph.add_guard(self)
        if isinstance(self.value, _CONTAINERS):
            self._guard_member_names()
            return len(self.value)
        raise FallbackError(f"len() of {type(self.value).__name__}")

    def getitem(self, key: VariableBase) -> VariableBase:
        if not isinstance(key, ConstantVariable) or not isinstance(self.value, _CONTAINERS):
            raise FallbackError(f"indexing {type(self.value).__name__} with {key!r} is not supported")
        self.graph.add_guard(self)
        self.graph.add_guard(key)
        try:
            child = self.value[key.value]
        except (IndexError, KeyError, TypeError) as exc:
            raise UserCodeError(f"user code raised {type(exc).__name__}: {exc}") from None
        if isinstance(key.value, slice):
            return VariableFactory.from_value(child, self.graph, DummyTracker((self, key)))
        return self._child(key.value, child)

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        layer = self.value
        graph = self.graph
        graph.add_guard(self)
        for hooks in ("_forward_pre_hooks", "_forward_post_hooks"):
            count = len(getattr(layer, hooks))  # (the common case, none, is the cheaper check)
            graph.add_expr_guard(self, f"len({{}}.{hooks}) == {count}" if count else f"not {{}}.{hooks}")
        if not layer._forward_pre_hooks and not layer._forward_post_hooks:
            return self._call_forward(args, kwargs)
        # ``Layer.__call__`` with hooks: pre-hooks may replace the inputs, post-hooks the output.
        if layer._forward_pre_hooks_with_kwargs_flag or layer._forward_post_hooks_with_kwargs_flag:
            raise FallbackError(f"{type(layer).__name__} has forward hooks taking keyword arguments: not "
                                "simulated yet")
        inputs: VariableBase = TupleVariable(list(args), graph, DummyTracker(tuple(args)))
        for hook_var in self._hooks("_forward_pre_hooks"):
            result = hook_var.call([self, inputs], {})
            if not (isinstance(result, ConstantVariable) and result.value is None):
                inputs = result if isinstance(result, TupleVariable) else TupleVariable(
                    [result], graph, DummyTracker((result,)))
        output = self._call_forward(list(inputs.items), kwargs)
        for hook_var in self._hooks("_forward_post_hooks"):
            result = hook_var.call([self, inputs, output], {})
            if not (isinstance(result, ConstantVariable) and result.value is None):
                output = result
        return output

    def _hooks(self, store: str) -> list[VariableBase]:
        """The hooks of ``store`` in order, each guarded by identity (through its path in the dict)."""
        from .function import SourceOnlyVariable

        hooks = getattr(self.value, store)
        owner = SourceOnlyVariable(hooks, self.graph, GetAttrTracker(self, store) if self.tracker.is_traceable()
                                   else DummyTracker((self,)))
        variables = []
        for hook_id, hook in hooks.items():
            tracker = GetItemTracker(owner, hook_id) if self.tracker.is_traceable() else DummyTracker((self,))
            var = VariableFactory.from_value(hook, self.graph, tracker)
            self.graph.add_guard(var)
            variables.append(var)
        return variables

    def _call_forward(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        layer = self.value
        graph = self.graph
        if isinstance(layer, paddle.nn.Sequential) and type(layer).forward is paddle.nn.Sequential.forward:
            if len(args) != 1 or kwargs:
                raise FallbackError("Sequential called with other than one positional argument")
            value = args[0]
            for child in self.iter_items():
                value = child.call([value], {})
            return value
        if is_builtin_layer(layer):
            self.needs_identity = True
            # With hooks (simulated above) the statement must not run them again through ``__call__``.
            target = layer_call(layer, run_hooks=not (layer._forward_pre_hooks or layer._forward_post_hooks))
            return graph.call_tensor_op("layer", f"{type(layer).__module__}.{type(layer).__name__}", target,
                                        list(args), dict(kwargs))
        return self.getattr("forward").call(args, kwargs)

    def __repr__(self) -> str:
        return f"LayerVariable({type(self.value).__name__} {self.tracker.describe()})"


@VariableFactory.register(65)
def _layer_rule(value: Any, graph: "FunctionGraph", tracker: Tracker) -> VariableBase | None:
    if isinstance(value, paddle.nn.Layer):
        return LayerVariable(value, graph, tracker)
    return None

"""`paddle.nn.Layer` instances.

A user layer's ``forward`` is inlined like any method. A built-in Paddle layer (``Linear``, ``Conv2D``,
``LSTM``...) becomes one ``layer`` SIR statement; its parameters are captured by the static program when
the statement is built under ``to_static``, so optimizer updates never force a retranslation. Container
layers (``Sequential``, ``LayerList``, ``LayerDict``) iterate, index and chain their children.
"""
from __future__ import annotations

import collections
import types
import weakref
from typing import TYPE_CHECKING, Any

import paddle

from ....errors import BreakGraphError, FallbackError, UserCodeError
from ....symbolic.layer_signature import layer_config
from ....symbolic.sir import layer_call
from ..side_effects import ABSENT
from .sparse_gradients import check_layer_call
from ..tracker import ConstTracker, DummyTracker, GetAttrTracker, GetItemTracker, SublayerTracker, Tracker
from .base import VariableBase, VariableFactory
from .basic import ConstantVariable, ObjectVariable
from .callable import CallableVariable
from .library_rules import library_rule
from .container import DictVariable, TupleVariable

if TYPE_CHECKING:
    from ..function_graph import FunctionGraph
    from ..guard import GuardBuilder

_CONTAINERS = (paddle.nn.Sequential, paddle.nn.LayerList, paddle.nn.LayerDict, paddle.nn.ParameterList)


def _member_store(layer: paddle.nn.Layer) -> str:
    """The dict a container layer keeps its members in (a ``ParameterList`` holds parameters)."""
    return "_parameters" if isinstance(layer, paddle.nn.ParameterList) else "_sub_layers"


def is_builtin_forward(forward: Any) -> bool:
    """``forward`` is the ``forward`` of a built-in Paddle layer class (``Linear``, ``LSTM``...), which is
    recorded as one ``layer`` statement; the plain containers' forward is simulated instead."""
    module = getattr(forward, "__module__", "") or ""
    return (module.startswith("paddle.nn.") and forward is not paddle.nn.Layer.forward
            and forward is not paddle.nn.Sequential.forward)


def is_builtin_layer(layer: paddle.nn.Layer) -> bool:
    """A layer whose ``forward`` is Paddle's own code (not overridden by the user, in its class or on the
    instance, ``lin.forward = patched``): ``Linear``, ``LSTM`` (which happens to subclass ``LayerList``)... but
    not the plain containers."""
    return is_builtin_forward(getattr(type(layer), "forward", None)) and "forward" not in layer.__dict__


def user_call_override(layer: paddle.nn.Layer) -> types.FunctionType | None:
    """The ``__call__`` of the layer's class when user code overrides ``Layer.__call__`` (to count calls,
    cast inputs, wrap ``super().__call__``): calling the layer runs it, not the hooks and ``forward``. (A
    library's override is not inlined: its call is a graph break, the layer called natively.)"""
    found = getattr(type(layer), "__call__", None)
    return found if found is not paddle.nn.Layer.__call__ and isinstance(found, types.FunctionType) else None


@library_rule(paddle.nn.Layer.__call__)
def _layer_dunder_call(function: Any, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase | None:
    """``Layer.__call__`` reached explicitly: ``super().__call__(x)`` in a layer overriding it."""
    if not args or not isinstance(args[0], LayerVariable):
        return None
    return args[0].call_layer(args[1:], kwargs)


def tree_runs_user_code(layer: paddle.nn.Layer) -> bool:
    """Whether calling the built-in ``layer`` runs Python code of the user's besides Paddle's: a user
    subclass overriding a method or property its forward uses (``_prepare_qkv`` of a ``MultiHeadAttention``,
    a ``bias`` property), a sublayer of a user class (``nn.RNN(MyCell())``, a user block in
    ``nn.TransformerEncoder``), a sublayer's ``forward`` or ``__call__`` replaced, or forward hooks on a
    sublayer (a feature-capturing hook). As one ``layer`` statement that code would run once, when the
    program is built: its side effects lost at every later call, the Python values it reads baked in (and an
    eager op it runs on static values can crash Paddle). Such a layer's forward is simulated instead (its own
    hooks and ``__call__`` are simulated in `LayerVariable.call` either way)."""
    if _class_runs_user_code(type(layer), own=True):
        return True
    for sub in layer.sublayers():
        if sub._forward_pre_hooks or sub._forward_post_hooks or "forward" in sub.__dict__ \
                or _class_runs_user_code(type(sub), own=False):
            return True
    return False


# Members of a user subclass of a layer class that no ``forward`` calls: constructing, representing, pickling.
_NOT_RUN_BY_FORWARD = frozenset({"__init__", "__repr__", "__str__", "extra_repr", "__getstate__", "__setstate__",
                                 "__reduce__", "__reduce_ex__", "__init_subclass__", "__class_getitem__",
                                 "__doc__", "__module__", "__qualname__", "__annotations__", "__dict__",
                                 "__weakref__", "__firstlineno__", "__static_attributes__"})


def _class_runs_user_code(cls: type, own: bool) -> bool:
    """Whether a class of ``cls``'s MRO other than Paddle's defines code that calling a layer of it may run
    (any function or descriptor but `_NOT_RUN_BY_FORWARD`). ``own``: for the layer called itself, whose
    ``__call__`` and ``forward`` are simulated or Paddle's (`is_builtin_layer`); for a sublayer, both count."""
    exempt = _NOT_RUN_BY_FORWARD | {"__call__", "forward"} if own else _NOT_RUN_BY_FORWARD
    return any(name not in exempt and (callable(member) or hasattr(type(member), "__get__"))
               for klass in cls.__mro__ if not _is_paddles_class(klass)
               for name, member in vars(klass).items())


def _is_paddles_class(cls: type) -> bool:
    return cls is object or (cls.__module__ or "").startswith("paddle.")


@library_rule(paddle.nn.Layer.__setattr__)
def _layer_dunder_setattr(function: Any, args: list[VariableBase], kwargs: dict[str, VariableBase]
                          ) -> VariableBase | None:
    """``Layer.__setattr__`` reached explicitly: ``super().__setattr__(name, value)`` in a layer overriding
    it (to log or validate what is stored): the store a plain ``layer.name = value`` makes (`store_attribute`
    follows ``Layer.__setattr__``: buffers, property setters)."""
    from .attribute import store_attribute

    if len(args) != 3 or kwargs or not isinstance(args[0], LayerVariable) \
            or not isinstance(args[1], ConstantVariable) or type(args[1].value) is not str:
        return None
    store_attribute(args[0], args[1].value, args[2])
    return ConstantVariable(None, args[0].graph, DummyTracker())


def simulate_forward(layer_var: "LayerVariable", forward: Any, args: list[VariableBase],
                     kwargs: dict[str, VariableBase]) -> VariableBase:
    """A built-in layer's ``forward`` simulated (inlined, as Paddle's layer code may be) instead of recorded as
    one ``layer`` statement: for a layer whose state the frame changed before the call (a ``weight_norm``
    pre-hook rebinds ``weight`` at every call, ``eval()`` stores ``training`` flags). The statement's program
    would hold the old state; simulated, ``self.weight`` reads the new one (see
    `FunctionGraph.layer_state_changed_in_frame`)."""
    from .function import UserFunctionVariable

    layer_var.graph.add_guard(layer_var)  # (its type fixes its class's forward: a constant)
    if layer_var.tracker.is_traceable():  # (unless one is set on the instance since)
        layer_var.graph.add_expr_guard(layer_var, "'forward' not in {}.__dict__")
    function = UserFunctionVariable(forward, layer_var.graph, ConstTracker(forward))
    return function.call([layer_var, *args], kwargs)


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
        if self.graph.layer_state_changed_in_frame(layer_var.value) or tree_runs_user_code(layer_var.value):
            return simulate_forward(layer_var, self.cls.forward, args, kwargs)
        check_layer_call(layer_var)
        target = layer_call(layer_var.value, run_hooks=False, forward_of=self.cls)
        # The program calls this very layer (its parameters, its attributes): guarded by identity.
        layer_var.needs_identity = True
        layer_var.in_program = True
        self.graph.add_guard(layer_var)
        return self.graph.call_tensor_op("layer", f"{self.cls.__module__}.{self.cls.__name__}.forward", target,
                                         list(args), dict(kwargs))

    def children(self) -> list[VariableBase]:
        return [self.layer_var]

    def _reconstruct_computed(self, codegen: Any) -> None:
        """The bound method itself (a graph break at its call runs it natively on the layer)."""
        codegen.load_callable_const(types.MethodType)
        codegen.load_const(self.cls.forward)
        codegen.reconstruct(self.layer_var)
        codegen.call(2)

    def __repr__(self) -> str:
        return f"BuiltinForwardVariable({self.cls.__name__}.forward of {self.layer_var!r})"


class LayerVariable(ObjectVariable):
    """A `paddle.nn.Layer`; guarded by identity and by its ``training`` flag."""

    value: paddle.nn.Layer
    in_program = False  # called by a ``layer`` statement: its program holds the layer's tree as traced
    # A built-in layer whose ``forward`` was simulated because its path holds other layers of its class at
    # other calls (dynamic_shape.is_varying_layer): guarded by class, not identity.
    simulated = False
    hook_counts: tuple[int, ...] | None = None  # when called: how many hooks of each `_HOOK_STORES` it had

    def make_guards(self, builder: "GuardBuilder", expr: str) -> list[str]:
        from ..guard import ATTR_FALSY, ATTR_IS

        # A built-in layer is part of the compiled program itself: its identity matters. A user layer is
        # only a path to its parameters and sublayers, each guarded on its own, so another instance of the
        # same class reuses the translation.
        builtin = is_builtin_layer(self.value)
        if self.needs_identity or (builtin and not self.simulated) or isinstance(self.value, _CONTAINERS):
            head = builder.identity(expr, self.value)
            if builtin and not isinstance(self.value, _CONTAINERS) and self.tracker.is_traceable():
                # (a miss finding another layer of the class there makes its forward simulated next time)
                builder.layer_checks.append((self.tracker.describe(), expr, weakref.ref(self.value)))
        else:
            head = f"type({expr}) is {builder.constant(type(self.value))}"
        attributes: list[tuple[str, int, Any]] = [("training", ATTR_IS, bool(self.value.training))]
        hook_checks = []
        for hooks, count in zip(_HOOK_STORES, self.hook_counts or ()):
            if count:
                hook_checks.append(f"len({expr}.{hooks}) == {count}")
            else:  # (the common case, none, is the cheaper check)
                attributes.append((hooks, ATTR_FALSY, None))
        # (``forward``, a dunder or a method of the layer's class, replaced after translation: see
        # `ObjectVariable.class_lookup_guards`; once per layer class)
        head = [head, *self.class_lookup_guards(builder), *self.not_shadowed_guards(builder, expr)]
        if self.in_program:  # (and its forward not replaced on the instance since: `is_builtin_layer`)
            return [*head, *_compiled_state_guards(builder, expr, self.value, attributes), *hook_checks,
                    f"'forward' not in {expr}.__dict__"]
        return [*head, builder.attributes(expr, attributes), *hook_checks]

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

    def _changed_member(self, changed: DictVariable, key: Any) -> VariableBase:
        """``container[key]`` of a member table the frame changed (`_changed_members`): by position for a
        ``LayerList``, ``Sequential`` or ``ParameterList`` (their tables are in index order), by name for a
        ``LayerDict``."""
        members = changed.items
        try:
            if isinstance(self.value, paddle.nn.LayerDict):
                return members[key]
            if type(key) is int:
                return list(members.values())[key]
        except (IndexError, KeyError) as exc:
            raise UserCodeError(f"user code raised {type(exc).__name__}: {exc}", original=exc) from None
        raise BreakGraphError(f"indexing a {type(self.value).__name__} the frame changed with {key!r} runs natively")

    def _guard_member_names(self) -> None:
        """The container's members, by name and order: iterating it, its length and its indexing depend on
        them (a block appended to a ``LayerList`` after translation must not be skipped)."""
        store = _member_store(self.value)
        names = tuple(getattr(self.value, store))
        self.graph.add_expr_guard(self, "tuple({}.%s) == %r" % (store, names))

    def _changed_members(self) -> DictVariable | None:
        """The frame's variable of the container's member table (``_sub_layers``, a ``ParameterList``'s
        ``_parameters``) when the frame changed it (``LayerList.append``/``insert``, ``Sequential.
        add_sublayer``, simulated in Paddle's code): the members are its items, not the real table's until the
        write-back after the graph. None otherwise."""
        table = self.value.__dict__.get(_member_store(self.value))
        known = self.graph.known_objects.get(id(table))
        if known is None or known[0] is not table or id(known[1]) not in self.graph.side_effects.mutated:
            return None
        self.graph.add_guard(known[1])
        return known[1]

    def iter_items(self) -> list[VariableBase]:
        layer = self.value
        self.graph.add_guard(self)
        changed = self._changed_members()
        if changed is not None:
            if isinstance(layer, paddle.nn.LayerDict):
                return [ConstantVariable(key, self.graph, DummyTracker((self,))) for key in changed.items]
            return list(changed.items.values())
        self._guard_member_names()
        if isinstance(layer, paddle.nn.LayerDict):
            return [ConstantVariable(key, self.graph, DummyTracker((self,))) for key in layer.keys()]
        if isinstance(layer, (paddle.nn.Sequential, paddle.nn.LayerList)):
            return [self._child(i, child) for i, child in enumerate(layer)]
        if isinstance(layer, paddle.nn.ParameterList):  # ``iter(self._parameters.values())``
            return [self.getattr(name) for name in layer._parameters]
        raise FallbackError(f"iterating over {type(layer).__name__} is not supported")

    unpack = iter_items

    def length(self) -> int:
        self.graph.add_guard(self)
        if isinstance(self.value, _CONTAINERS):
            changed = self._changed_members()
            if changed is not None:
                return len(changed.items)
            self._guard_member_names()
            return len(self.value)
        raise FallbackError(f"len() of {type(self.value).__name__}")

    def getitem(self, key: VariableBase) -> VariableBase:
        if not isinstance(key, ConstantVariable) or not isinstance(self.value, _CONTAINERS):
            raise FallbackError(f"indexing {type(self.value).__name__} with {key!r} is not supported")
        self.graph.add_guard(self)
        self.graph.add_guard(key)
        changed = self._changed_members()
        if changed is not None:
            return self._changed_member(changed, key.value)
        try:
            child = self.value[key.value]
        except (IndexError, KeyError, TypeError) as exc:
            raise UserCodeError(f"user code raised {type(exc).__name__}: {exc}", original=exc) from None
        if isinstance(key.value, slice):
            return VariableFactory.from_value(child, self.graph, DummyTracker((self, key)))
        return self._child(key.value, child)

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        override = user_call_override(self.value)
        if override is not None:  # (its ``super().__call__(...)`` comes back to `call_layer`)
            from .function import UserFunctionVariable

            self.graph.add_guard(self)  # (its type, and its class's version, fix which function it is)
            return UserFunctionVariable(override, self.graph, ConstTracker(override)).call([self, *args], kwargs)
        return self.call_layer(args, kwargs)

    def call_layer(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        """``Layer.__call__(layer, *args, **kwargs)``: the forward hooks and ``forward``."""
        layer = self.value
        graph = self.graph
        # The hooks it has now are run (or not) by the translation: guarded with the layer (`make_guards`).
        self.hook_counts = tuple(len(getattr(layer, hooks)) for hooks in _HOOK_STORES)
        graph.add_guard(self)
        if not layer._forward_pre_hooks and not layer._forward_post_hooks:
            return self._call_forward(args, kwargs)
        # ``Layer.__call__`` with hooks: pre-hooks may replace the inputs (those registered ``with_kwargs``
        # the keyword arguments too, getting and returning both), post-hooks the output.
        inputs: VariableBase = TupleVariable(list(args), graph, DummyTracker(tuple(args)))
        keywords = DictVariable(dict(kwargs), graph, DummyTracker(tuple(kwargs.values())))
        with_kwargs = layer._forward_pre_hooks_with_kwargs_flag
        for hook_id, hook_var in self._hooks("_forward_pre_hooks"):
            if hook_id in with_kwargs:
                result = hook_var.call([self, inputs, keywords], {})
                if not _is_none(result):
                    inputs, keywords = _args_and_kwargs(result)
                continue
            result = hook_var.call([self, inputs], {})
            if not _is_none(result):
                inputs = result if isinstance(result, TupleVariable) else TupleVariable(
                    [result], graph, DummyTracker((result,)))
        output = self._call_forward(list(inputs.items), dict(keywords.items))
        with_kwargs = layer._forward_post_hooks_with_kwargs_flag
        for hook_id, hook_var in self._hooks("_forward_post_hooks"):
            result = hook_var.call([self, inputs, keywords, output] if hook_id in with_kwargs
                                   else [self, inputs, output], {})
            if not _is_none(result):
                output = result
        return output

    def _hooks(self, store: str) -> list[tuple[int, VariableBase]]:
        """The hooks of ``store`` in order with their ids, each guarded by identity (through its path in the
        dict; an id is never reused, so whether it was registered ``with_kwargs`` is fixed with it)."""
        from .function import SourceOnlyVariable

        hooks = getattr(self.value, store)
        owner = SourceOnlyVariable(hooks, self.graph, GetAttrTracker(self, store) if self.tracker.is_traceable()
                                   else DummyTracker((self,)))
        variables = []
        for hook_id, hook in hooks.items():
            tracker = GetItemTracker(owner, hook_id) if self.tracker.is_traceable() else DummyTracker((self,))
            var = VariableFactory.from_value(hook, self.graph, tracker)
            self.graph.add_guard(var)
            variables.append((hook_id, var))
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
            if graph.layer_state_changed_in_frame(layer) or tree_runs_user_code(layer):
                return simulate_forward(self, type(layer).forward, args, kwargs)
            if self._path_varies():
                simulated = self._try_simulated_forward(args, kwargs)
                if simulated is not None:
                    return simulated
            check_layer_call(self)
            # With hooks (simulated above) the statement must not run them again through ``__call__``.
            target = layer_call(layer, run_hooks=not (layer._forward_pre_hooks or layer._forward_post_hooks))
            self.needs_identity = True
            self.in_program = True
            return graph.call_tensor_op("layer", f"{type(layer).__module__}.{type(layer).__name__}", target,
                                        list(args), dict(kwargs))
        forward = self.getattr("forward")
        if forward.tracker.is_traceable():
            # (a function set on the instance, ``layer.forward = fn``, is guarded as the value it is: another
            # function there, or none, is another forward)
            graph.add_guard(forward)
        return forward.call(args, kwargs)

    def _path_varies(self) -> bool:
        """This built-in layer's path held other layers of its class at other calls (a loop body function
        called with each layer of a ``LayerList``): see `dynamic_shape.is_varying_layer`."""
        from ..dynamic_shape import is_varying_layer

        return (self.tracker.is_traceable() and not isinstance(self.value, _CONTAINERS)
                and is_varying_layer(self.graph.frame.code, self.tracker.describe()))

    def _try_simulated_forward(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase | None:
        """The layer's ``forward`` simulated, its parameters and configuration read through its path (so one
        translation serves every layer of the class there), or None when Paddle's code of it cannot be
        simulated: what it recorded is dropped and the layer becomes a ``layer`` statement as usual."""
        graph = self.graph
        n_statements, n_inputs, effects = len(graph.statements), len(graph.inputs), graph.side_effects.checkpoint()
        self.simulated = True
        try:
            return simulate_forward(self, type(self.value).forward, args, kwargs)
        except UserCodeError:
            raise  # (the user's error: the statement would raise it as well)
        except FallbackError:  # (e.g. a training BatchNorm's warnings.warn: a break)
            graph.truncate(n_statements, n_inputs)
            graph.side_effects.rollback(effects)
            self.simulated = False
            return None

    def getattr(self, name: str) -> VariableBase:
        if name in STRUCTURE_METHODS and _is_paddles_own(self.value, name) and \
                self.graph.side_effects.lookup_attr(self.value, name) is ABSENT:
            return LayerStructureMethodVariable(self, name)
        if name in MODE_METHODS and _is_paddles_own(self.value, name) and \
                self.graph.side_effects.lookup_attr(self.value, name) is ABSENT:
            return LayerModeMethodVariable(self, name)
        return super().getattr(name)

    def __repr__(self) -> str:
        return f"LayerVariable({type(self.value).__name__} {self.tracker.describe()})"


_HOOK_STORES = ("_forward_pre_hooks", "_forward_post_hooks")


def _is_none(var: VariableBase) -> bool:
    return isinstance(var, ConstantVariable) and var.value is None


def _args_and_kwargs(result: VariableBase) -> tuple[TupleVariable, DictVariable]:
    """What a pre-hook registered ``with_kwargs`` returned: ``(args, kwargs)``, as eager takes it (any other
    value makes eager raise a RuntimeError: the frame runs eagerly to raise it)."""
    if isinstance(result, TupleVariable) and len(result.items) == 2:
        args, kwargs = result.items
        if isinstance(args, TupleVariable) and isinstance(kwargs, DictVariable) \
                and all(type(key) is str for key in kwargs.items):
            return args, kwargs
    raise FallbackError("a forward pre-hook taking keyword arguments returned other than (tuple, dict of str)")


def _compiled_state_guards(builder: "GuardBuilder", expr: str, layer: paddle.nn.Layer,
                           own: list[tuple[str, int, Any]] | None = None) -> list[str]:
    """What a built-in layer's compiled statement took in when it was traced, besides its identity: its
    configuration (`_config_checks`), its parameters and buffers (the program holds those very objects, so a
    replaced one must miss, not be ignored) and, through its whole tree of sublayers, each sublayer's
    identity, training flag and forward hooks (the trace ran them). The layer's own training flag and hooks
    are guarded where it is read and called (`LayerVariable.make_guards`: its checks of them are ``own``). The
    plain attributes of each layer (flag, configuration, no hooks) are one check (`GuardBuilder.attributes`)."""
    from ..guard import ATTR_FALSY, ATTR_IS

    attributes, checks = _config_checks(expr, layer)
    if own is not None:
        attributes[:0] = own
    else:
        attributes.insert(0, ("training", ATTR_IS, bool(layer.training)))
        for hooks in _HOOK_STORES:
            registered = getattr(layer, hooks)
            if not registered:  # (the common case)
                attributes.append((hooks, ATTR_FALSY, None))
                continue
            checks.append(f"len({expr}.{hooks}) == {len(registered)}")
            for key, hook in registered.items():
                checks.append(builder.identity(f"{expr}.{hooks}[{key!r}]", hook))
    combined = builder.attributes(expr, attributes)
    if combined is not None:
        checks.insert(0, combined)
    for store in ("_parameters", "_buffers"):
        members = layer.__dict__.get(store) or {}
        for name, tensor in members.items():
            checks.append(builder.identity(f"{expr}.{store}[{name!r}]", tensor) if tensor is not None
                          else f"{expr}.{store}[{name!r}] is None")
    for name, child in (layer.__dict__.get("_sub_layers") or {}).items():
        if child is None:
            checks.append(f"{expr}._sub_layers[{name!r}] is None")
            continue
        child_expr = builder.bind(f"{expr}._sub_layers[{name!r}]")
        checks.append(builder.identity(child_expr, child))
        checks += _compiled_state_guards(builder, child_expr, child)
    return checks


def _config_checks(expr: str, layer: paddle.nn.Layer) -> tuple[list[tuple[str, int, Any]], list[str]]:
    """The plain configuration of a built-in layer (``Dropout.p``, ``Conv2D._stride``, ``BatchNorm``'s
    ``_epsilon``...), by value: its compiled statement baked what forward read of it into the program, so a
    change after translation (a dropout rate scheduled during training) must miss, not reuse the program.
    Returns the (name, how, want) checks of `GuardBuilder.attributes` and the checks of NaN values (which no
    value equals) as expressions."""
    from ..guard import ATTR_EQ, ATTR_IS

    attributes: list[tuple[str, int, Any]] = []
    checks = []
    for name, value in layer_config(layer):
        if value is None or type(value) is bool:
            attributes.append((name, ATTR_IS, value))
        elif value != value:  # a NaN, which never equals itself
            path = f"{expr}.{name}"
            checks += [f"type({path}) is float", f"{path} != {path}"]
        else:
            # A value of another type that compares equal (0.5 and numpy's 0.5, 2 and 2.0) configures the
            # layer alike; a list and a tuple differ.
            attributes.append((name, ATTR_EQ, value if type(value) is not list else list(value)))
    return attributes, checks


# -- the layer tree: children, parameters, buffers, state_dict -------------------------------------------------
# Layer methods that only read the tree of sublayers, parameters and buffers, and how their result is shaped.
# They are run for real during simulation (plain reads of the layer's dicts); each object they give is then
# reached by its attribute path from the layer (``self.blocks.0.weight``), so it is the frame's own value,
# guarded and reloaded like ``self.blocks[0].weight`` written out.
STRUCTURE_METHODS: dict[str, str] = {
    "children": "generator", "named_children": "generator", "named_sublayers": "generator",
    "named_parameters": "generator", "named_buffers": "generator", "modules": "generator",
    "named_modules": "generator",
    "sublayers": "list", "parameters": "list", "buffers": "list", "state_dict": "ordered_dict",
    "get_sublayer": "object", "get_parameter": "object", "get_buffer": "object",
}


def _is_paddles_own(layer: paddle.nn.Layer, name: str) -> bool:
    """``layer.<name>`` is ``paddle.nn.Layer``'s own method (not overridden, not shadowed by the instance)."""
    import inspect

    return (name not in layer.__dict__
            and inspect.getattr_static(type(layer), name, None) is inspect.getattr_static(paddle.nn.Layer, name))


class LayerMethodVariable(VariableBase):
    """A method of ``paddle.nn.Layer`` simulated by a rule of its own, bound to a layer of the frame."""

    def __init__(self, layer_var: LayerVariable, name: str) -> None:
        super().__init__(layer_var.graph, DummyTracker((layer_var,)))
        self.layer_var = layer_var
        self.name = name

    def children(self) -> list[VariableBase]:
        return [self.layer_var]

    def _reconstruct_computed(self, codegen: Any) -> None:
        codegen.reconstruct(self.layer_var)  # (the call then runs natively: a graph break)
        codegen.load_attr(self.name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name} of {self.layer_var!r})"


class LayerStructureMethodVariable(LayerMethodVariable):
    """``layer.named_parameters`` (or another of `STRUCTURE_METHODS`), bound to a layer of the frame."""

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        from ...runtime import layer_method, layer_structure, layer_tree_fingerprint
        from .container import DictVariable, ListVariable, TupleVariable, TypedDictVariable
        from .iterator import IteratorVariable, lazy

        graph, layer_var, name = self.graph, self.layer_var, self.name
        operands = [*args, *kwargs.values()]
        if not layer_var.tracker.is_traceable() or not all(isinstance(v, ConstantVariable) for v in operands):
            # (a layer made in the frame, or ``state_dict(destination=...)`` filling a dict of the caller)
            raise BreakGraphError(f"Layer.{name}() with these arguments runs natively")
        if graph.side_effects.tree_store_pending(layer_var.value):
            raise BreakGraphError(f"Layer.{name}() after the frame assigned a sublayer or a new buffer (or deleted "
                                  "an attribute) runs natively")
        for var in operands:
            graph.add_guard(var)
        py_args = tuple(v.value for v in args)
        py_kwargs = {k: v.value for k, v in kwargs.items()}
        layer = layer_var.value
        signature = graph.run_user_python(layer_structure, [layer, name, py_args, py_kwargs], {})
        if signature is None:
            raise BreakGraphError(f"Layer.{name}() gives objects outside the layer tree or runs hooks: runs "
                                  "natively")
        # The same tree (names, sharing, classes): then the method gives the same names, and objects at the
        # same paths. One check per layer, however many such methods the frame calls on it.
        graph.add_guard(layer_var)
        if not getattr(layer_var, "tree_guarded", False):
            layer_var.tree_guarded = True
            fingerprint = layer_tree_fingerprint(layer)
            graph.add_symbolic_guard(
                lambda builder: f"{builder.constant(layer_tree_fingerprint)}({builder.expr_of(layer_var)}) == "
                                f"{builder.constant(fingerprint)}", "{}")
        items: list[VariableBase] = []
        keyed: dict[Any, VariableBase] = {}
        for key, path in signature:
            value: VariableBase = layer_var
            for attr in path:
                value = value.getattr(attr)
            if key is None:
                items.append(value)
                continue
            keyed[key] = value
            key_var = ConstantVariable(key, graph, DummyTracker())
            items.append(TupleVariable([key_var, value], graph, DummyTracker((value,))))
        kind = STRUCTURE_METHODS[name]
        if kind == "object":
            return items[0]
        if kind == "list":
            return ListVariable(items, graph, DummyTracker(tuple(items)))
        if kind == "ordered_dict":
            return TypedDictVariable(keyed, graph, DummyTracker(tuple(keyed.values())), collections.OrderedDict)
        rebuild_args: list[VariableBase] = [
            layer_var, ConstantVariable(name, graph, DummyTracker()),
            TupleVariable(list(args), graph, DummyTracker(tuple(args))),
            DictVariable(dict(kwargs), graph, DummyTracker(tuple(kwargs.values())))]
        return IteratorVariable(lazy(lambda: items), graph, f"generator Layer.{name}", (layer_method, rebuild_args))


# -- mode switches: train() and eval() ---------------------------------------------------------------------
MODE_METHODS = frozenset({"train", "eval"})


class LayerModeMethodVariable(LayerMethodVariable):
    """``layer.train`` or ``layer.eval`` (Paddle's own), bound to a layer of the frame. Called, it is what
    Paddle's method does, as side effects replayed after the graph: the ``training`` flag of the layer and of
    each of its sublayers is stored (so the frame reads the new flags from then on, and the built-in layers
    it calls afterwards run their forward simulated with them, see `simulate_forward`), and the dygraph
    tracer's mode is set. Returns the layer."""

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        from ...runtime import set_tracer_train_mode

        graph, layer_var = self.graph, self.layer_var
        value = _mode_argument(self.name, args, kwargs)
        if value is None or not layer_var.tracker.is_traceable():
            raise BreakGraphError(f"Layer.{self.name}() with these arguments (or on a layer made in the frame) runs "
                                  "natively")
        if graph.side_effects.tree_store_pending(layer_var.value):
            raise BreakGraphError(f"Layer.{self.name}() after the frame assigned a sublayer or a new buffer (or "
                                  "deleted an attribute) runs natively")
        mode = ConstantVariable(value, graph, DummyTracker())
        graph.side_effects.call_after_graph(set_tracer_train_mode, [mode])
        sublayers = LayerStructureMethodVariable(layer_var, "sublayers").call([], {})
        for var in [layer_var, *sublayers.items]:
            var.setattr("training", mode)
        return layer_var


def _mode_argument(name: str, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> bool | None:
    """The mode ``layer.<name>(*args, **kwargs)`` sets; None when it is not a known bool (eager raises then:
    ``train(mode)`` takes a bool, ``eval()`` nothing). An argument given is guarded."""
    given = [*args, *kwargs.values()]
    if name == "eval":
        return None if given else False
    if len(given) > 1 or kwargs.keys() - {"mode"}:
        return None
    if not given:
        return True
    if not isinstance(given[0], ConstantVariable) or type(given[0].value) is not bool:
        return None
    given[0].graph.add_guard(given[0])
    return given[0].value


@VariableFactory.register(65)
def _layer_rule(value: Any, graph: "FunctionGraph", tracker: Tracker) -> VariableBase | None:
    if isinstance(value, paddle.nn.Layer):
        return LayerVariable(value, graph, tracker)
    return None

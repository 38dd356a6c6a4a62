"""A user ``PyLayer`` as one SIR statement: the callable a ``pylayer`` statement runs.

`PyLayerTarget` (one per PyLayer class and keyword-argument names, so equal SIR compares equal) is called
by `run_sir` on whatever the statement's inputs are:

* eager tensors (eager replay of a small graph, the error path): ``cls.apply(...)``, Paddle's own PyLayer;
* static values (building the program under ``to_static``, or meta inference in a throwaway program):
  ``paddle.static.nn.static_pylayer(forward, inputs, backward)``, the mechanism dy2static uses for
  PyLayer (``paddle.jit.dy2static.py_layer.StaticPyLayer``). The user's ``forward`` runs once on static
  values inside the ``pylayer`` op's forward block; the user's ``backward`` is registered on the op and
  runs when the program's backward is built, inside the op's backward block, so gradients flow through
  exactly the user's backward.

The ``ctx`` both functions receive is a `StaticPyLayerContext`: tensors kept for backward (through
``save_for_backward`` or as plain ``ctx`` attributes) cross from the forward block to the backward block
through one ``cf.tuple_push``/``cf.tuple_pop`` pipe; other attributes are ordinary Python values (they
are fixed when the program is built, and the SIR guards the arguments they come from).

Everything that would make the static program differ from eager (forward returning one of its inputs,
``set_materialize_grads(False)``, tensors inside container arguments, non-tensor outputs, a backward that
omits the gradient of an input requiring one...) raises `PyLayerStaticError` while the program is built;
`check_static` builds forward *and* backward on placeholders during simulation, so the executor turns
such a PyLayer into a graph break (it then runs natively) instead of compiling a wrong program.
"""
from __future__ import annotations

import weakref
from typing import Any

import paddle
from paddle import pir

from ..eval_frame_ext import callback_installed
from .pytree import leaves, map_structure
from .sir import MetaInfo


class PyLayerStaticError(Exception):
    """This PyLayer call cannot be built statically with eager semantics."""


# -- the context ------------------------------------------------------------------------------------------
class _State:
    """What the context keeps for itself (out of the user's attribute namespace)."""

    def __init__(self) -> None:
        self.container: tuple = ()
        self.bwd_container: tuple | None = None
        self.non_differentiable: tuple = ()
        self.not_inplace: tuple = ()
        self.pushed: list[Any] = []  # forward-block values sent to the backward block, in pipe order
        self.fwd_attrs: dict[str, Any] = {}  # the user's attributes as they were at the end of forward
        self.materialize_grads = True


class StaticPyLayerContext:
    """``ctx`` of a PyLayer built statically; mirrors ``paddle.autograd.PyLayerContext``."""

    _sot: _State

    def __init__(self) -> None:
        object.__setattr__(self, "_sot", _State())

    # -- the PyLayerContext API -------------------------------------------------------------------------
    def save_for_backward(self, *tensors: Any) -> None:
        self._sot.container = tensors

    def saved_tensor(self) -> tuple:
        state = self._sot
        return state.bwd_container if state.bwd_container is not None else state.container

    def mark_non_differentiable(self, *args: Any) -> None:
        self._sot.non_differentiable = args

    def mark_not_inplace(self, *args: Any) -> None:
        self._sot.not_inplace = args

    def set_materialize_grads(self, value: bool) -> None:
        if not value:
            # A static backward always receives zeros for outputs without a gradient, never None.
            raise PyLayerStaticError("ctx.set_materialize_grads(False) (None gradients) is not static")
        self._sot.materialize_grads = True

    def set_grad_in_dtype_consistent(self, flag: bool) -> None:
        object.__setattr__(self, "grad_in_dtype_consistent", flag)

    @property
    def container(self) -> tuple:
        return self.saved_tensor()

    @property
    def non_differentiable(self) -> tuple:
        return self._sot.non_differentiable

    @property
    def not_inplace_tensors(self) -> tuple:
        return self._sot.not_inplace

    @property
    def materialize_grads(self) -> bool:
        return self._sot.materialize_grads

    # -- forward block -> backward block ----------------------------------------------------------------
    def _user_attrs(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if k != "_sot"}

    def _end_forward(self) -> None:
        """At the end of the forward block: send every tensor backward may read through one pipe."""
        state = self._sot
        state.fwd_attrs = self._user_attrs()
        seen: set[int] = set()
        for leaf in leaves((state.container, list(state.fwd_attrs.values()))):
            if isinstance(leaf, pir.Value) and leaf.id not in seen:
                seen.add(leaf.id)
                state.pushed.append(leaf)
        for name, value in state.fwd_attrs.items():
            for leaf in leaves(value):
                if not isinstance(leaf, pir.Value) and _holds_value(leaf):
                    raise PyLayerStaticError(f"ctx.{name} holds tensors inside a {type(leaf).__name__}")
        if state.pushed:
            block = pir.get_current_insertion_point().block()
            paddle.base.libpaddle.pir.build_pipe_for_pylayer(block, state.pushed)

    def _begin_backward(self) -> None:
        """At the start of the backward block: rebind saved tensors and attributes to the popped values."""
        state = self._sot
        popped: list[Any] = []
        if state.pushed:
            block = pir.get_current_insertion_point().block()
            for op in block.ops:
                if op.name() == "cf.tuple_pop":
                    popped = op.as_tuple_pop_op().pop_all_values()
            if len(popped) != len(state.pushed):
                raise PyLayerStaticError("saved tensors did not reach the backward block")
        mapping = {value.id: new for value, new in zip(state.pushed, popped)}

        def rebind(leaf: Any) -> Any:
            return mapping[leaf.id] if isinstance(leaf, pir.Value) else leaf

        state.bwd_container = map_structure(rebind, state.container)
        for name, value in state.fwd_attrs.items():
            object.__setattr__(self, name, map_structure(rebind, value))


def _holds_value(obj: Any) -> bool:
    """Whether a plain object stored on ctx keeps static values in its attributes (not carried over)."""
    attrs = getattr(obj, "__dict__", None)
    if not isinstance(attrs, dict):
        return False
    return any(isinstance(leaf, pir.Value) for leaf in leaves(list(attrs.values())))


# -- building the statement statically --------------------------------------------------------------------
def _flat_outputs(out: Any, input_ids: set[int]) -> list[Any]:
    """The forward's tensors, in order; only a tensor or a flat tuple/list of tensors is supported."""
    flat = list(out) if type(out) in (tuple, list) else [out]
    if not flat:
        raise PyLayerStaticError("forward returned no tensor")
    for item in flat:
        if not isinstance(item, pir.Value):
            raise PyLayerStaticError(f"forward returned a {type(item).__name__}, not only tensors")
        if item.id in input_ids:
            # Eager PyLayer treats it as an in-place output (rebinding the input's autograd history).
            raise PyLayerStaticError("forward returns one of its input tensors unchanged")
    return flat


# Set while `check_static` builds on placeholders, whose ``stop_gradient`` is exactly eager's: then a
# backward result eager PyLayer rejects raises. The program built later may mark an input as requiring a
# gradient where eager does not (e.g. the output of ``argmax``): there the result is only normalised.
_strict: list[bool] = [False]


def _input_grads(grads: Any, inputs: list[Any]) -> list[Any]:
    """The backward's result, checked like eager PyLayer does: one gradient per input tensor, None for
    those that do not require one (trailing ones may be left out)."""
    grads = list(grads) if isinstance(grads, (tuple, list)) else [grads]
    if len(grads) > len(inputs):
        raise PyLayerStaticError(f"backward returned {len(grads)} gradients for {len(inputs)} input tensors")
    grads += [None] * (len(inputs) - len(grads))
    result = []
    for index, (grad, value) in enumerate(zip(grads, inputs)):
        if grad is not None and not isinstance(grad, pir.Value):
            raise PyLayerStaticError(f"backward returned a {type(grad).__name__} as gradient {index}")
        if value.stop_gradient:
            if grad is not None and _strict[0]:
                raise PyLayerStaticError(f"backward returned a gradient for input tensor {index}, which does "
                                         "not require one")
            result.append(None)
            continue
        if grad is None and _strict[0]:
            raise PyLayerStaticError(f"backward returned no gradient for input tensor {index}, which requires "
                                     "one")
        result.append(grad)
    return result


def static_apply(cls: type, args: tuple, kwnames: tuple[str, ...], kwvalues: list[Any]) -> Any:
    """``cls.apply(*args, **kwargs)`` on static values: one ``pylayer`` op with forward and backward blocks."""
    if not paddle.framework.in_pir_mode():
        raise PyLayerStaticError("static PyLayer needs PIR mode")
    inputs = [*args, *kwvalues]
    for item in inputs:
        if type(item) in (tuple, list, dict) and any(isinstance(leaf, pir.Value) for leaf in leaves(item)):
            raise PyLayerStaticError("tensors inside a container argument")
    value_inputs = [item for item in inputs if isinstance(item, pir.Value)]
    input_ids = {value.id for value in value_inputs}
    n_args = len(args)
    ctx = StaticPyLayerContext()
    record: dict[str, Any] = {}

    def forward_fn(*values: Any) -> Any:
        with callback_installed(None):  # the user's code runs as it is, never translated by sot
            out = cls.forward(ctx, *values[:n_args], **dict(zip(kwnames, values[n_args:])))
        record["structure"] = out
        record["flat"] = _flat_outputs(out, input_ids)
        ctx._end_forward()
        return out

    def backward_fn(*grads: Any) -> Any:
        ctx._begin_backward()
        with callback_installed(None):
            result = cls.backward(ctx, *grads)
        return _input_grads(result, value_inputs)

    result = paddle.static.nn.static_pylayer(forward_fn, inputs, backward_fn)
    flat_forward = record["flat"]
    results = [result] if len(flat_forward) == 1 else list(result)
    # Eager: every output requires a gradient when an input does, except those marked non-differentiable.
    non_differentiable = {v.id for v in ctx._sot.non_differentiable if isinstance(v, pir.Value)}
    no_input_grad = all(value.stop_gradient for value in value_inputs)
    for inner, outer in zip(flat_forward, results):
        outer.stop_gradient = no_input_grad or inner.id in non_differentiable
    structure = record["structure"]
    if type(structure) in (tuple, list):
        return type(structure)(results)
    return results[0]


class PyLayerTarget:
    """The target of a ``pylayer`` statement for one PyLayer class and keyword-argument names (in call
    order: eager PyLayer matches backward's gradients to input tensors in that order)."""

    def __init__(self, cls: type, kwnames: tuple[str, ...]) -> None:
        self._cls = weakref.ref(cls)
        self.kwnames = kwnames
        self.__name__ = self.__qualname__ = f"{cls.__qualname__}.apply"
        self.__module__ = cls.__module__
        self.checked: dict[tuple, Exception | None] = {}  # see `check_static`

    @property
    def cls(self) -> type:
        cls = self._cls()
        if cls is None:
            raise RuntimeError(f"PyLayer class of {self.__name__} was garbage collected")
        return cls

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if set(kwargs) != set(self.kwnames):
            raise TypeError(f"{self.__name__}: keyword arguments {sorted(kwargs)} != {sorted(self.kwnames)}")
        kwvalues = [kwargs[name] for name in self.kwnames]
        if paddle.in_dynamic_mode():
            with callback_installed(None):
                return self.cls.apply(*args, **dict(zip(self.kwnames, kwvalues)))
        return static_apply(self.cls, args, self.kwnames, kwvalues)

    def __repr__(self) -> str:
        return f"<pylayer {self.__name__}>"


_targets: "weakref.WeakKeyDictionary[type, dict[tuple[str, ...], PyLayerTarget]]" = weakref.WeakKeyDictionary()
# Targets are never freed (they are tiny and only weakly refer to their class): caches keyed by ``id(target)``
# (meta inference, compiled programs) can then never confuse a dead target with a new one.
_all_targets: list[PyLayerTarget] = []


def pylayer_target(cls: type, kwnames: tuple[str, ...] = ()) -> PyLayerTarget:
    """The (cached, hence stable) statement target of ``cls.apply`` called with keywords ``kwnames``."""
    per_class = _targets.setdefault(cls, {})
    target = per_class.get(kwnames)
    if target is None:
        target = per_class[kwnames] = PyLayerTarget(cls, kwnames)
        _all_targets.append(target)
    return target


# -- checking during simulation ---------------------------------------------------------------------------
def _freeze(tree: Any) -> Any:
    if type(tree) in (list, tuple):
        return (type(tree).__name__,) + tuple(_freeze(item) for item in tree)
    if type(tree) is dict:
        return ("dict",) + tuple((k, _freeze(v)) for k, v in tree.items())
    return (type(tree), tree)


def check_static(target: PyLayerTarget, args: tuple, kwargs: dict[str, Any], grad_enabled: bool,
                 backward: bool = True) -> None:
    """Build forward and, when gradients can flow (and ``backward``: not for an inference program),
    backward of the statement on placeholders for the `MetaInfo` leaves of ``args``/``kwargs``; raises what
    the build raised. Cached per argument metas."""
    key: tuple | None = (_freeze(args), _freeze(kwargs), grad_enabled, backward)
    try:
        hash(key)
    except TypeError:
        key = None
    if key is not None and key in target.checked:
        error = target.checked[key]
        if error is not None:
            raise error
        return
    try:
        _build_on_placeholders(target, args, kwargs, grad_enabled, backward)
    except Exception as exc:
        if key is not None:
            target.checked[key] = exc.with_traceback(None)
        raise
    if key is not None:
        target.checked[key] = None


def _build_on_placeholders(target: PyLayerTarget, args: tuple, kwargs: dict[str, Any], grad_enabled: bool,
                           backward: bool) -> None:
    from paddle.autograd.ir_backward import grad

    from .infer_meta import static_mode

    counter = iter(range(1 << 30))
    placeholders: list[Any] = []

    def placeholder(value: Any) -> Any:
        if isinstance(value, MetaInfo):
            data = paddle.static.data(f"_sot_pylayer_in_{next(counter)}", list(value.shape), value.dtype)
            data.stop_gradient = value.stop_gradient or not grad_enabled
            placeholders.append(data)
            return data
        return value

    with static_mode():
        static_args = map_structure(placeholder, args)
        static_kwargs = {k: map_structure(placeholder, v) for k, v in kwargs.items()}
        out = target(*static_args, **static_kwargs)
        outputs = [leaf for leaf in leaves(out) if isinstance(leaf, pir.Value) and not leaf.stop_gradient]
        needs_grad = [value for value in placeholders if not value.stop_gradient]
        if backward and outputs and needs_grad:
            _strict[0] = True
            try:
                grad(outputs, needs_grad, allow_unused=True)
            finally:
                _strict[0] = False


"""The statement IR: what a simulated frame did to tensors, as a flat list of calls.

A `StatementIR` is a straight-line program over `Symbol`s (one per tensor). Each `Statement` is one call of
a Paddle API, a tensor method, a built-in layer, a PyLayer or a nested SIR, with constant Python arguments
kept inline. It can be run eagerly (`run_sir`) or on static placeholders to build a program.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import operator
import types
import weakref
from typing import Any, Callable, Iterator, Literal

import numpy as np
import paddle
from paddle import _C_ops
from paddle.nn.layer import rnn as _rnn_module
from paddle.tensor import creation as _creation

from ..errors import SourceLocation
from ..eval_frame_ext import HEAPTYPE, type_version
from .amp import AMP_OFF, AmpState, amp_applied, current_amp_state
from .layer_signature import layer_config_key
from .program_ops import NUMBER_DIVISOR_MARK
from .pytree import is_namedtuple, leaves, map_structure

StatementKind = Literal["api", "method", "layer", "pylayer", "call"]


_untagged = itertools.count(-1, -1)


def class_version(value: Any) -> int | None:
    """The version tag of the class of ``value`` when it is a user class (a heap type), else None: a program
    traced with an object ran what its class had then (a dunder, ``forward``), so a program cached for the
    object must not serve it once the class changed (a new tag, `sot.eval_frame_ext.type_version`). A class
    with no tag (0) gets a number never given before: such a program is not shared. (Not for a tensor: its
    class is Paddle's, whose methods a program does not look up but records as ops.)"""
    cls = type(value)
    if not cls.__flags__ & HEAPTYPE or isinstance(value, paddle.Tensor):  # (a built-in type never changes)
        return None
    return type_version(cls) or next(_untagged)


@dataclasses.dataclass(frozen=True)
class Symbol:
    """A tensor inside a SIR program, named ``var_N``."""

    name: str

    def __repr__(self) -> str:
        return self.name


@dataclasses.dataclass(frozen=True)
class MetaInfo:
    """What is known about a tensor without its data: enough to guard it and to build placeholders."""

    shape: tuple[int, ...]
    dtype: Any  # a paddle.dtype
    stop_gradient: bool

    def __str__(self) -> str:
        dtype = str(self.dtype).replace("paddle.", "")
        grad = "" if self.stop_gradient else ", grad"
        return f"{list(self.shape)} {dtype}{grad}"


class LayerCall:
    """The callable of a ``layer`` statement: a built-in layer, held by weak reference.

    A SIR lives as long as the cache entry that runs it, and the cache must not keep a deleted layer (nor,
    through it, its parameters) alive. Get one with `layer_call`: one object per (layer, way of calling), so
    equal SIR stays equal. ``run_hooks`` False calls ``forward`` directly (the hooks were simulated).
    ``forward_of``: the built-in class whose ``forward`` runs on the layer (``super().forward(x)`` in a user
    subclass of ``nn.Linear``), instead of the layer's own."""

    __slots__ = ("_layer", "run_hooks", "forward_of", "__weakref__")

    def __init__(self, layer: paddle.nn.Layer, run_hooks: bool, forward_of: type | None = None) -> None:
        self._layer = weakref.ref(layer)
        self.run_hooks = run_hooks
        self.forward_of = forward_of

    @property
    def layer(self) -> paddle.nn.Layer:
        layer = self._layer()
        if layer is None:  # its guard fails once the layer is gone: a deleted layer's program never runs
            raise ReferenceError("sot: the layer of a recorded statement was deleted")
        return layer

    def is_alive(self) -> bool:
        return self._layer() is not None

    def runs_forward_hooks(self) -> bool:
        """Whether the call runs forward hooks of the layer or of a sublayer: Python code that may read any
        tensor, where the layer's own forward reads only its parameters, buffers and arguments."""
        return self.run_hooks and any(sub._forward_pre_hooks or sub._forward_post_hooks
                                      for sub in self.layer.sublayers(include_self=True))

    def watch(self, callback: Callable[[Any], None]) -> "weakref.ref[paddle.nn.Layer]":
        """A weak reference to the layer that calls ``callback`` when the layer is deleted."""
        return weakref.ref(self.layer, callback)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        layer = self.layer
        if self.forward_of is not None:
            return self.forward_of.forward(layer, *args, **kwargs)
        # (``Layer.__call__`` itself: a subclass's ``__call__`` override is simulated around the statement)
        return paddle.nn.Layer.__call__(layer, *args, **kwargs) if self.run_hooks else layer.forward(*args, **kwargs)

    def key(self) -> tuple:
        """What identifies the program this call builds: the layer, how it is called, and for every layer of
        its tree the training flag (train and eval programs differ: dropout, batch norm), its plain configuration
        (`layer_config_key`: a dropout rate, a stride baked into the program), the identity of each
        sublayer, parameter and buffer (the program holds the very tensors it was traced with: a replaced
        parameter needs a new program) and of each forward hook (the trace ran them), and the version of each
        layer's class (the trace looked up its ``forward`` and methods there: `class_version`)."""
        layer = self.layer
        tree = []
        for sub in layer.sublayers(include_self=True):
            state = sub.__dict__
            tree.append((id(sub), class_version(sub), sub.training, layer_config_key(sub),
                         *(tuple((name, id(member)) for name, member in (state.get(store) or {}).items())
                           for store in ("_parameters", "_buffers", "_sub_layers", "_forward_pre_hooks",
                                         "_forward_post_hooks"))))
        return id(layer), self.run_hooks, self.forward_of, tuple(tree)

    def __repr__(self) -> str:
        layer = self._layer()
        if layer is None:
            return "<deleted layer>"
        if self.forward_of is not None:
            return f"<{self.forward_of.__name__}.forward of {type(layer).__name__}>"
        call = "" if self.run_hooks else ".forward"
        return f"<{type(layer).__name__}{call}>"


_layer_calls: "dict[tuple[bool, type | None], weakref.WeakKeyDictionary[paddle.nn.Layer, LayerCall]]" = {}


def layer_call(layer: paddle.nn.Layer, run_hooks: bool = True, forward_of: type | None = None) -> LayerCall:
    """The one `LayerCall` of ``layer`` called this way (it lives as long as the layer)."""
    calls = _layer_calls.setdefault((run_hooks, forward_of), weakref.WeakKeyDictionary())
    call = calls.get(layer)
    if call is None:
        call = calls[layer] = LayerCall(layer, run_hooks, forward_of)
    return call


@dataclasses.dataclass
class Statement:
    """One recorded call; ``target`` is the callable, or the method name for kind ``method``."""

    kind: StatementKind
    name: str
    target: Any
    args: tuple
    kwargs: dict[str, Any]
    outputs: Any  # a Symbol or a tuple/list of Symbols
    location: SourceLocation | None = None
    function: str | None = None  # the user function (possibly inlined) the statement came from
    # The simulated call stack at the statement, outermost first: (file, line, function) of the translated
    # frame and of each inlined call down to the statement's own line (for tracebacks of eager replays).
    frames: tuple[tuple[str, int, str], ...] = ()
    no_grad: bool = False  # recorded inside ``with paddle.no_grad():``
    weight: int = 1  # how many ops it puts in a program (a built-in layer or a PyLayer is many)
    amp: AmpState = AMP_OFF  # the mixed-precision state its ops are created under (``auto_cast`` blocks)
    # The out-of-place form of an in-place op on a tensor made in the frame: the inplace version eager's tensor
    # has after it (k after the k-th change; 0 for any other statement). Eager autograd snapshots versions and
    # reports them when it refuses a backward (see `match_inplace_version`).
    inplace_version: int = 0
    # A built-in layer's own warnings met when it was inferred (BatchNorm's "When training, we now always track
    # global mean and variance"): issued after each compiled run, as its eager forward issues them.
    warnings: tuple = ()

    def inputs(self) -> list[Symbol]:
        return [leaf for leaf in leaves((self.args, self.kwargs)) if isinstance(leaf, Symbol)]

    def output_symbols(self) -> list[Symbol]:
        return [leaf for leaf in leaves(self.outputs) if isinstance(leaf, Symbol)]

    def may_read_any_tensor(self) -> bool:
        """Whether the statement may read tensors other than its operands and, for a built-in layer, the
        layer's own parameters and buffers: a PyLayer's or a nested call's forward (any Python code), a
        layer whose forward hooks run or that is gone (unknown), or a tensor constant among its arguments
        (a tensor the program holds itself: a parameter of another layer passed to a layer, too).

        The one answer to "which tensors from outside may this statement read", for the questions asked
        of it: whether a tensor was read before the frame made it require gradients
        (`FunctionGraph.may_have_read`) and which held parameters an output's gradient reaches
        (`higher_order.output_groups`). When the two answered apart, a layer statement's tensor constant
        was read for one and not for the other."""
        if self.kind in ("pylayer", "call"):
            return True
        if any(isinstance(leaf, paddle.Tensor) for leaf in leaves((self.args, self.kwargs))):
            return True
        target = self.target
        return isinstance(target, LayerCall) and (not target.is_alive() or target.runs_forward_hooks())


def _format_arg(value: Any) -> str:
    if isinstance(value, Symbol):
        return value.name
    if is_namedtuple(value):
        return f"{type(value).__name__}(" + ", ".join(_format_arg(item) for item in value) + ")"
    if type(value) in (tuple, list):
        inner = ", ".join(_format_arg(item) for item in value)
        return f"({inner},)" if type(value) is tuple and len(value) == 1 else (
            f"({inner})" if type(value) is tuple else f"[{inner}]")
    if type(value) is dict:
        return "{" + ", ".join(f"{k!r}: {_format_arg(v)}" for k, v in value.items()) + "}"
    return repr(value)


@dataclasses.dataclass
class StatementIR:
    """A whole recorded program: inputs, statements, outputs and the meta of every symbol."""

    name: str
    inputs: list[Symbol]
    statements: list[Statement]
    outputs: list[Symbol]
    metas: dict[Symbol, MetaInfo]
    grad_enabled: bool = True
    # (output index, input index, changes, kept): the output is the final value of that input, changed in place
    # ``changes`` times, written back into the caller's tensor after the run (which then has its version at the
    # call plus ``changes``, see `runtime.write_back_tensor`); ``kept``: an op of the graph keeps that value for
    # its backward. What the backward keeps of it eager keeps as the caller's tensor: `version_check` watches
    # the caller's tensor for it.
    written_back: tuple[tuple[int, int, int, bool], ...] = ()
    # Indexes of the inputs standing for a tensor that does not require grad, changed in place by an op with a
    # differentiable operand: eager makes it require grad at the op (`made_differentiable`).
    made_differentiable: tuple[int, ...] = ()

    def __len__(self) -> int:
        return len(self.statements)

    def op_count(self) -> int:
        """The size of the program: what ``min_graph_size`` compares with."""
        return sum(stmt.weight for stmt in self.statements)

    def layer_calls(self) -> list[LayerCall]:
        """The built-in layers the program calls (held weakly)."""
        return [stmt.target for stmt in self.statements if isinstance(stmt.target, LayerCall)]

    def dump(self) -> str:
        """A readable listing, one line per statement, like a tiny Python program."""
        ins = ", ".join(f"{s.name}: {self.metas[s]}" + (" (made to require grad)" if i in self.made_differentiable
                                                          else "") for i, s in enumerate(self.inputs))
        lines = [f"SIR {self.name}({ins}):"]
        for stmt in self.statements:
            outs = _format_arg(stmt.outputs)
            args = [_format_arg(a) for a in stmt.args] + [f"{k}={_format_arg(v)}" for k, v in stmt.kwargs.items()]
            if stmt.kind == "method":
                call = f"{args[0]}.{stmt.name}({', '.join(args[1:])})"
            else:
                call = f"{stmt.name}({', '.join(args)})"
            metas = ", ".join(str(self.metas[s]) for s in stmt.output_symbols() if s in self.metas)
            where = f"  @ {stmt.location}" if stmt.location else ""
            where += "  [no_grad]" if stmt.no_grad else ""
            where += f"  [{stmt.amp}]" if stmt.amp.enabled else ""
            lines.append(f"  {outs} = {stmt.kind} {call}    # {metas}{where}")
        lines.append(f"  return {', '.join(s.name for s in self.outputs)}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.dump()

    def structural_key(self) -> tuple:
        """Equal keys mean the two programs compute the same thing on inputs of the same meta."""

        def freeze(value: Any) -> Any:
            if isinstance(value, Symbol):
                return ("sym", value.name)
            if type(value) in (tuple, list) or is_namedtuple(value):  # (a named tuple by its very class)
                return (type(value),) + tuple(freeze(item) for item in value)
            if type(value) is dict:
                return ("dict",) + tuple(sorted((k, freeze(v)) for k, v in value.items()))
            if type(value) is slice:  # (unhashable before 3.12)
                return ("slice", freeze(value.start), freeze(value.stop), freeze(value.step))
            if type(value) in (float, complex):  # -0.0 == 0.0 (and hashes alike), but the sign reaches results
                return ("const", type(value), repr(value))
            try:
                hash(value)
            except TypeError:
                # The SIR holding the value is kept alive by the cache that holds the key.
                return ("id", id(value), class_version(value))
            return ("const", type(value), value, class_version(value))

        def target_key(stmt: Statement) -> Any:
            if stmt.kind == "method":
                return stmt.target
            if isinstance(stmt.target, LayerCall):
                return stmt.target.key()
            return id(stmt.target)

        stmts = tuple(
            (
                s.kind,
                target_key(s),
                freeze(s.args),
                freeze(s.kwargs),
                tuple(o.name for o in s.output_symbols()),
                s.no_grad,
                s.amp,
                s.inplace_version,
            )
            for s in self.statements
        )
        ins = tuple((s.name, self.metas[s]) for s in self.inputs)
        outs = tuple((s.name, self.metas[s]) for s in self.outputs)
        # (the default dtype: what the ops' tensors made without a dtype are, as the program is built now)
        return (ins, stmts, outs, self.grad_enabled, self.written_back, self.made_differentiable,
                paddle.get_default_dtype())


def call_statement(stmt: Statement, args: tuple, kwargs: dict[str, Any], ambient_amp: AmpState | None = None) -> Any:
    """Perform one statement on concrete values (eager tensors or static placeholders).

    ``ambient_amp`` is the AMP state around the call (read now when not given); where the statement's own
    state differs (also when it is off: ops outside an ``auto_cast`` block must not cast), it is applied."""
    if ambient_amp is None:
        ambient_amp = current_amp_state()
    if stmt.amp is not ambient_amp and stmt.amp != ambient_amp:
        with amp_applied(stmt.amp):
            return _call_in_grad_mode(stmt, args, kwargs)
    return _call_in_grad_mode(stmt, args, kwargs)


def _call_in_grad_mode(stmt: Statement, args: tuple, kwargs: dict[str, Any]) -> Any:
    if stmt.no_grad:
        if paddle.in_dynamic_mode():
            with paddle.no_grad():
                return _call(stmt, args, kwargs)
        result = _call(stmt, args, kwargs)
        for value in leaves(result):  # in a static program: cut the gradient at the outputs
            if hasattr(value, "stop_gradient"):
                value.stop_gradient = True
        return result
    if not paddle.is_grad_enabled() and paddle.in_dynamic_mode():  # (recorded in an ``enable_grad()`` block
        with paddle.enable_grad():                                # of a frame entered without grad)
            return _call(stmt, args, kwargs)
    return _call(stmt, args, kwargs)


def _call(stmt: Statement, args: tuple, kwargs: dict[str, Any]) -> Any:
    lowering = static_lowering(stmt.kind, stmt.target)
    if lowering is not None and builds_lowered(stmt.target, args):
        return lowering(*args, **kwargs)
    if stmt.kind == "method":
        return getattr(args[0], stmt.target)(*args[1:], **kwargs)
    return stmt.target(*args, **kwargs)


_FLOATING = (paddle.float16, paddle.bfloat16, paddle.float32, paddle.float64)
_INTEGER = (paddle.uint8, paddle.int8, paddle.int16, paddle.int32, paddle.int64)
_BFLOAT16 = (paddle.bfloat16,)


def _divide_as_eager(x: Any, divisor: Any) -> Any:
    """``x / divisor`` on a static value, computed as eager computes it.

    For a Python number, Paddle's static operator multiplies by the reciprocal (one ``scale`` op): another
    rounding than eager's division (one float32 result in three is an ulp off), and ``-0.0 / 1`` gives 0.0.
    Eager divides by a tensor filled with the number, in the tensor's dtype (float32 for an integer tensor),
    with a node keeping nothing of ``x`` (``div_scale``; a division by a tensor keeps ``x``): the filling op is
    marked (`program_ops.NUMBER_DIVISOR_MARK`) so that the saved-tensor check does not count ``x`` as read."""
    if type(divisor) not in (int, float) or x.dtype not in _FLOATING + _INTEGER:
        return operator.truediv(x, divisor)
    if x.dtype in _BFLOAT16:
        # Eager divides a bfloat16 tensor by the number filled in its dtype, computing in float32 (the same
        # bits, checked on 2e4 values and several divisors); a CPU program has no bfloat16 ``divide`` kernel
        # (Paddle's runner aborted the process). (A float16 division's static meta fails: the frame falls back.)
        # (what the saved-tensor check sees of the division is a cast of ``x``, which eager does not keep either)
        filled = paddle.full([], divisor, x.dtype).astype(paddle.float32)
        return paddle.divide(x.astype(paddle.float32), filled).astype(x.dtype)
    if x.dtype not in _FLOATING:
        x = x.astype(paddle.float32)
    divisor_filled = paddle.full([], divisor, x.dtype)
    divisor_filled.get_defining_op().set_bool_attr(NUMBER_DIVISOR_MARK, True)
    return paddle.divide(x, divisor_filled)


def _subtract_as_eager(x: Any, value: Any) -> Any:
    """``x - value`` on a static value, computed as eager computes it.

    Paddle's static operator adds ``-value`` (a ``scale`` bias): for a zero, that -0.0 stands for +0.0 in the
    IR context (`zero_sign`), and ``-0.0 - 0`` would give 0.0. (Other numbers negate exactly.)"""
    if type(value) in (int, float) and value == 0 and x.dtype in _FLOATING:
        return paddle.subtract(x, paddle.full([], value, x.dtype))
    return operator.sub(x, value)


def _where_as_eager(condition: Any, x: Any = None, y: Any = None, name: str | None = None, *, out: Any = None,
                    **aliases: Any) -> Any:
    """``paddle.where(condition, x, y)`` on static values, built as eager builds it.

    Paddle's static form broadcasts by adding zeros (``x + zeros_like(y) + ...``): a -0.0 selected from a
    broadcast operand comes out 0.0, and a Python number, made a 0-d tensor, is promoted by the additions
    (an int32 tensor with ``2`` computes) where eager's ``where`` op rejects mixed integer, bool and float
    dtypes (TypeError). Eager expands the operands with ``broadcast_to`` (exact), then calls the op, whose
    static form promotes and rejects dtypes as eager does. ``nonzero`` (no ``x``/``y``) and ``out=`` keep
    Paddle's static form."""
    x, y = aliases.pop("input", x), aliases.pop("other", y)
    if aliases or out is not None or x is None or y is None:
        return paddle.where(condition, x, y, name, out=out, **aliases)
    x, y = (paddle.to_tensor(v) if np.isscalar(v) else v for v in (x, y))
    if condition.dtype != paddle.bool:
        raise ValueError(f"The `condition` is expected to be a boolean Tensor, but got a Tensor with dtype "
                         f"{condition.dtype}")
    shapes = [list(v.shape) for v in (condition, x, y)]
    if any(dim < 0 for shape in shapes for dim in shape):
        # A dynamic dimension: the broadcast shape is known at run time only, from a tensor of that shape
        # (its values unused) that every operand is expanded to (``expand_as`` copies values exactly).
        carrier = sum(paddle.zeros_like(v, dtype=paddle.float32) for v in (condition, x, y))
        return paddle._C_ops.where(*(paddle.expand_as(v, carrier) for v in (condition, x, y)))
    shape = paddle.broadcast_shape(paddle.broadcast_shape(shapes[1], shapes[2]), shapes[0])
    condition, x, y = (paddle.broadcast_to(v, shape) if v_shape != shape else v
                       for v, v_shape in zip((condition, x, y), shapes))
    return paddle._C_ops.where(condition, x, y)


def _float32_would_change(value: Any) -> bool:
    """Whether a Python (or numpy) number would change as a float32 (see `eager_static_forms`)."""
    if not isinstance(value, (int, float, np.integer, np.floating)) or isinstance(value, bool):
        return False
    try:
        return float(np.float32(value)) != value
    except OverflowError:
        return True


def _double(value: float) -> Any:
    """``value`` as a 0-D float64 tensor (``full``'s value attribute is a double)."""
    return paddle.full([], value, paddle.float64)


def _is_float64_value(value: Any) -> bool:
    return isinstance(value, paddle.pir.Value) and value.dtype == paddle.float64


# -- Python numbers reaching float64 static values: eager's doubles ------------------------------------------
# Each takes Paddle's function it stands for and gives the replacement, which hands every other call to it.
def _scale_as_eager(original: Callable[..., Any]) -> Callable[..., Any]:
    """``_C_ops.scale(x, s, b, after)``: ``s`` and ``b`` are float32 in a program. ``s`` is passed as a float64
    tensor operand; a ``b`` a float32 would round is added (or, ``after`` false, first added) as one: the same
    two roundings as eager's kernel (checked bit for bit on 2e5 values)."""
    def scale(*args: Any, **kwargs: Any) -> Any:
        if not kwargs and len(args) == 4 and _is_integer_value(args[0]):
            return _integer_scale(original, *args)
        if kwargs or len(args) != 4 or not _is_float64_value(args[0]):
            return original(*args, **kwargs)
        x, factor, bias, bias_after_scale = args
        if not (_float32_would_change(factor) or _float32_would_change(bias)):
            return original(*args)
        factor = _double(factor) if _float32_would_change(factor) else factor
        if not _float32_would_change(bias):
            return original(x, factor, bias, bias_after_scale)
        if bias_after_scale:
            return paddle.add(original(x, factor, 0.0, True), _double(bias))
        return original(paddle.add(x, _double(bias)), factor, 0.0, True)

    return scale


def _integer_scale(original: Callable[..., Any], x: Any, factor: Any, bias: Any, bias_after_scale: bool) -> Any:
    """``scale`` of an integer static value (``ids * 2654435761 + 7``) by numbers a float32 would round: eager's
    kernel casts its double factor and bias to the tensor's integer type, so the arithmetic is exact in it
    (with the numbers as doubles first); the program's float32 attributes rounded them (a hash of ids off by
    hundreds). Done as integer products and sums of the numbers filled in the tensor's dtype."""
    if not (_float32_would_change(factor) or _float32_would_change(bias)) \
            or not all(float(v).is_integer() for v in (factor, bias)):
        return original(x, factor, bias, bias_after_scale)

    def filled(value: Any) -> Any:
        return paddle.full([], int(float(value)), x.dtype)  # (``full``'s value is a double)

    def times(v: Any) -> Any:
        return v if float(factor) == 1 else paddle.multiply(v, filled(factor))

    def plus(v: Any) -> Any:
        return v if float(bias) == 0 else paddle.add(v, filled(bias))

    return plus(times(x)) if bias_after_scale else times(plus(x))


def _is_integer_value(value: Any) -> bool:
    return isinstance(value, paddle.pir.Value) and value.dtype in (paddle.int32, paddle.int64)


def _full_like_as_eager(original: Callable[..., Any]) -> Callable[..., Any]:
    """``_C_ops.full_like(x, v, dtype, place)`` of a float64 result: ``v`` is filled through a float32 in a
    program (``nan_to_num``'s default bounds, the largest float64s, became infinities); broadcast here from a
    float64 0-D tensor."""
    def full_like(*args: Any, **kwargs: Any) -> Any:
        if kwargs or len(args) != 4 or not isinstance(args[0], paddle.pir.Value) \
                or args[2] not in (paddle.float64, paddle.int32, paddle.int64) or not _float32_would_change(args[1]):
            return original(*args, **kwargs)
        if args[2] != paddle.float64:  # (an integer fill: the double's value, in the integer type)
            if not float(args[1]).is_integer():
                return original(*args, **kwargs)
            return paddle.expand(paddle.full([], int(float(args[1])), args[2]), paddle.shape(args[0]))
        return paddle.expand(_double(args[1]), paddle.shape(args[0]))

    return full_like


def _clip_as_eager(original: Callable[..., Any]) -> Callable[..., Any]:
    """``_C_ops.clip(x, lo, hi)`` of a float64 ``x``: bounds a float32 would round as float64 tensors."""
    def clip(*args: Any, **kwargs: Any) -> Any:
        if kwargs.keys() - {"out"} or len(args) != 3 or not _is_float64_value(args[0]):
            return original(*args, **kwargs)
        return original(args[0], *(_double(v) if _float32_would_change(v) else v for v in args[1:]), **kwargs)

    return clip


def _true_divide_as_eager(original: Callable[..., Any]) -> Callable[..., Any]:
    """``Value.__truediv__``: ``v / c`` of a float64 value is a product by a float32 ``1 / c`` in a program;
    eager divides by ``c`` filled (`_divide_as_eager`)."""
    def true_divide(value: Any, other: Any) -> Any:
        if _is_float64_value(value) and type(other) in (int, float):
            return _divide_as_eager(value, other)
        return original(value, other)

    return true_divide


def _to_tensor_static_as_eager(original: Callable[..., Any]) -> Callable[..., Any]:
    """``creation._to_tensor_static`` (static ``to_tensor``) of Python numbers into a float64 tensor: Paddle
    makes the numbers the default dtype (float32) first, then casts (``paddle.quantile`` makes its ``q`` a
    tensor that way). Built from the float64 array instead (``assign`` keeps its doubles)."""
    def to_tensor_static(data: Any, dtype: Any = None, stop_gradient: bool = True) -> Any:
        if dtype is not None and isinstance(data, (int, float, list, tuple)) and not isinstance(data, bool) \
                and paddle.base.framework.convert_np_dtype_to_dtype_(dtype) == paddle.float64:
            try:
                array = np.asarray(data)
            except ValueError:  # (ragged)
                array = None
            if array is not None and array.dtype.kind == "f" \
                    and any(_float32_would_change(float(v)) for v in array.flat):
                out = paddle.assign(array.astype(np.float64))
                out.stop_gradient = stop_gradient
                return out
        return original(data, dtype, stop_gradient)

    return to_tensor_static


def _rnn_unrolled_as_eager(original: Callable[..., Any]) -> Callable[..., Any]:
    """``paddle.nn.layer.rnn._rnn_static_graph``, the static form of ``nn.RNN``/``nn.BiRNN`` (a while op
    over tensor arrays), fails to build in Paddle 3.3.1 ("result and operand type is not equal"): the graph
    then ran eagerly. Eager's form (``_rnn_dynamic_graph``: a Python loop over the time steps) builds the same
    cell ops unrolled, when the program knows the number of steps (results and gradients eager's bit for
    bit). An unknown number (-1) is refused: Paddle's form builds, but the backward of its final states
    cannot be lowered ("Only support DenseTensorType ... and VectorType"), so a ``loss`` reading ``h`` failed
    at ``backward()``, where nothing can run eagerly instead. Refused at meta inference, the step dimension
    is pinned (a translation per length)."""
    def rnn_static_graph(cell: Any, inputs: Any, initial_states: Any = None, sequence_length: Any = None,
                         time_major: bool = False, is_reverse: bool = False, **kwargs: Any) -> Any:
        steps = paddle.utils.flatten(inputs)[0].shape[0 if time_major else 1]
        if steps < 0:
            raise ValueError("nn.RNN over a dynamic number of steps: its static form has no usable backward")
        return _rnn_module._rnn_dynamic_graph(cell, inputs, initial_states, sequence_length, time_major,
                                              is_reverse, **kwargs)

    return rnn_static_graph


_EAGER_STATIC_FORMS: list[tuple[Any, str, Callable[[Callable[..., Any]], Callable[..., Any]]]] = [
    (_C_ops, "scale", _scale_as_eager), (_C_ops, "full_like", _full_like_as_eager), (_C_ops, "clip", _clip_as_eager),
    (paddle.pir.Value, "__truediv__", _true_divide_as_eager),
    (_creation, "_to_tensor_static", _to_tensor_static_as_eager),
    (_rnn_module, "_rnn_static_graph", _rnn_unrolled_as_eager),
]


@contextlib.contextmanager
def eager_static_forms() -> Iterator[None]:
    """Inside the block (a program being built or metas inferred by this thread), Python numbers reach float64
    static values as doubles, as in eager. Paddle's static ops take some numbers as float32 (``scale``'s
    factor and bias, which ``v * c``, ``v + c``, ``v - c`` of a static value are; ``full_like``'s value;
    ``clip``'s bounds; the numbers static ``to_tensor`` fills) where eager computes with the double:
    ``full_like(x, 0.1)`` of a float64 ``x`` gave 0.10000000149011612, ``nan_to_num`` of a float64 infinity
    inf instead of the largest float64, also inside Paddle functions recorded as one statement (which run
    their own Python on static values: ``quantile``, ``deg2rad``). Replaced at Paddle's entry points for the
    block, so every caller gets eager's numbers; float32 values keep Paddle's forms. ``nn.RNN`` is built
    unrolled, as eager runs it (`_rnn_unrolled_as_eager`). Paddle's own forms are back after the block (also
    for other threads: builds are serialised by `compile.BUILD_LOCK`)."""
    saved = [(owner, name, getattr(owner, name), make) for owner, name, make in _EAGER_STATIC_FORMS]
    try:
        for owner, name, original, make in saved:
            setattr(owner, name, make(original))
        yield
    finally:
        for owner, name, original, _ in saved:
            setattr(owner, name, original)


# Statements whose static form Paddle builds differently from the eager op, by the statement's target: an
# operator function or a Paddle API function (an ``api`` statement) or a method name. Lowered when the first
# argument is a static value.
_STATIC_LOWERING: dict[Any, Callable[..., Any]] = {
    operator.truediv: _divide_as_eager, operator.itruediv: _divide_as_eager, "__truediv__": _divide_as_eager,
    "__div__": _divide_as_eager, "__itruediv__": _divide_as_eager,
    operator.sub: _subtract_as_eager, operator.isub: _subtract_as_eager, "__sub__": _subtract_as_eager,
    "__isub__": _subtract_as_eager,
    paddle.where: _where_as_eager, "where": _where_as_eager,
}


def static_lowering(kind: str, target: Any) -> Callable[..., Any] | None:
    """How a statement of ``kind`` calling ``target`` is built in a program, when not by the call itself
    (see `builds_lowered`): also the form meta inference must see, so that its metas (and errors) are those of
    the program built."""
    if kind == "method" or (kind == "api" and type(target) in (types.BuiltinFunctionType, types.FunctionType)):
        return _STATIC_LOWERING.get(target)
    return None


def builds_lowered(target: Any, args: tuple) -> bool:
    """Whether a call of ``target`` (which has a `static_lowering`) with ``args`` is built lowered: on a static
    first argument."""
    return bool(args) and isinstance(args[0], paddle.pir.Value)


def bind_outputs(env: dict[Symbol, Any], pattern: Any, value: Any) -> None:
    """Match a statement's output pattern of Symbols against the value it produced."""
    if isinstance(pattern, Symbol):
        env[pattern] = value
    elif type(pattern) in (tuple, list):
        for sub_pattern, sub_value in zip(pattern, value):
            bind_outputs(env, sub_pattern, sub_value)


@functools.lru_cache(maxsize=256)
def _located_caller(filename: str, lineno: int, name: str) -> Callable[..., Any]:
    """A one-line function whose frame reads as the user's ``name`` at ``filename:lineno``.

    An exception raised by a statement replayed through it shows the user's line in its traceback (the
    whole compiled program otherwise counts as a single instruction of the translated frame)."""
    source = "\n" * (max(lineno, 1) - 1) + "def _located(call, args, kwargs): return call(*args, **kwargs)\n"
    namespace: dict[str, Any] = {}
    exec(compile(source, filename, "exec"), namespace)
    function = namespace["_located"]
    function.__code__ = function.__code__.replace(co_name=name)
    from ..opcode_translator.skip_files import skip_code  # it carries a user file name: never translate it

    skip_code(function.__code__)
    return function


def _call_located(frames: tuple[tuple[str, int, str], ...], call: Callable[..., Any], args: tuple) -> Any:
    """``call(*args)`` inside one located frame per entry of ``frames`` (outermost first), so a traceback
    reads like the user's own call chain."""
    kwargs: dict[str, Any] = {}
    for filename, lineno, name in reversed(frames):
        call, args, kwargs = _located_caller(filename, lineno, name), (call, args, kwargs), {}
    return call(*args, **kwargs)


def run_sir(sir: StatementIR, inputs: list[Any], located: bool = False) -> list[Any]:
    """Interpret ``sir`` on concrete inputs; used to build the static program and for eager replay.

    ``located`` runs every statement through a frame that carries its user source line (error path)."""
    env: dict[Symbol, Any] = dict(zip(sir.inputs, inputs))
    ambient_amp = current_amp_state()  # (statements leave the state as they found it)

    def resolve(value: Any) -> Any:
        return env[value] if isinstance(value, Symbol) else value

    with contextlib.nullcontext() if paddle.in_dynamic_mode() else eager_static_forms():
        for stmt in sir.statements:
            args = map_structure(resolve, stmt.args)
            kwargs = {k: map_structure(resolve, v) for k, v in stmt.kwargs.items()}
            if located and stmt.frames:
                result = _call_located(stmt.frames, call_statement, (stmt, args, kwargs, ambient_amp))
            elif located and stmt.location is not None and stmt.location.lineno:
                caller = _located_caller(stmt.location.filename, stmt.location.lineno, stmt.function or sir.name)
                result = caller(call_statement, (stmt, args, kwargs, ambient_amp), {})
            else:
                result = call_statement(stmt, args, kwargs, ambient_amp)
            bind_outputs(env, stmt.outputs, result)
            if stmt.inplace_version:
                match_inplace_version(result, stmt.inplace_version)
    return [env[symbol] for symbol in sir.outputs]


def match_inplace_version(tensor: Any, version: int) -> None:
    """Give the result of an in-place op's out-of-place form the inplace version of the tensor eager changes in
    place (a new tensor starts at 0): ops after it save it with that version, and a refused backward reports
    eager's numbers. (Raised only: the result may be a tensor the op handed back, already counted. A static
    value, while the program is built, has no version.)"""
    if not isinstance(tensor, paddle.Tensor):
        return
    for _ in range(version - tensor._inplace_version()):
        tensor._bump_inplace_version()

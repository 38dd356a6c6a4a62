"""Output meta (shape, dtype, stop_gradient) of a call, found without running kernels on real data.

The call is replayed on `paddle.static.data` placeholders inside a throwaway program with dygraph mode
switched off (DESIGN.md §6); the results are static values whose meta we read. Results are cached per
(call, input metas, constant arguments) since the same op is met again and again while simulating.
"""
from __future__ import annotations

import contextlib
import inspect
import itertools
from typing import Any, Callable, Iterable, Iterator

import paddle
from paddle.base import core
from paddle.base.dygraph.base import to_static_mode_guard
from paddle.base.libpaddle import DataType
from paddle.pir.core import convert_np_dtype_to_dtype_, vartype_to_datatype

from .build_warnings import LayerWarning, build_warnings_ignored, layer_warnings_recorded
from .callstack import shallow_op_callstacks
from .pytree import map_structure
from .sir import LayerCall, MetaInfo, eager_static_forms
from .tracer_inheritance import static_section
from .zero_sign import pin_zero_sign


class MetaInferenceError(Exception):
    """The call could not be built on static placeholders (or returned something that is not a tensor)."""


@contextlib.contextmanager
def static_mode() -> Iterator[None]:
    """A fresh static program, with dygraph mode off only inside the block (and only in this thread: threads
    starting meanwhile start in dygraph mode, see `tracer_inheritance`). The first one makes +0.0 the zero of
    Paddle's IR context (`zero_sign`)."""
    pin_zero_sign()
    with throwaway_static_program():
        yield


@contextlib.contextmanager
def throwaway_static_program() -> Iterator[None]:
    """`static_mode` without pinning the sign of zero (used to pin it)."""
    main, startup = paddle.static.Program(), paddle.static.Program()
    with static_section(), build_warnings_ignored(), shallow_op_callstacks(), eager_static_forms():
        with paddle.static.program_guard(main, startup):
            with paddle.base.framework._dygraph_guard(None):
                yield


@contextlib.contextmanager
def _to_static_tracing(enabled: bool, captured: Iterable[paddle.Tensor] = ()) -> Iterator[None]:
    """As when ``to_static`` traces a program: layers read their parameters (also those kept in plain
    lists, e.g. RNN weights) as static values of the current program. The ``captured`` tensors (the layer's
    parameters and buffers) are read as placeholders of their meta (`_seed_placeholders`)."""
    if not enabled:
        with to_static_mode_guard(is_to_static=False):
            yield
        return
    from paddle.jit.dy2static.parameter_recorder import _global_inplace_map, _global_parameter_recorder
    from paddle.pir.core import _convert_into_value, static_op_arg_cast_guard

    program = paddle.static.default_main_program()
    try:
        _seed_placeholders(_global_parameter_recorder, program, captured)
        with to_static_mode_guard(is_to_static=True), static_op_arg_cast_guard(_convert_into_value):
            yield
    finally:
        _global_parameter_recorder.pop(program)
        _global_inplace_map.pop(program)


def _seed_placeholders(recorder: Any, program: Any, tensors: Iterable[paddle.Tensor]) -> None:
    """Hand Paddle's parameter recorder a ``pd_op.data`` placeholder for each eager tensor of ``tensors``.

    Under ``to_static`` every eager tensor an op or ``Layer.__getattr__`` meets becomes a static value
    through the recorder, which otherwise creates a static parameter for it: an initializer op in the startup
    program, a ``set_parameter`` and a ``parameter`` op (about 0.1 ms a tensor, most of a conv or batch norm
    layer's inference). A placeholder of the same shape, dtype and ``stop_gradient`` gives the ops the same
    metas. The recorder keeps the values it made per program (keyed by ``id`` of the tensor) and looks there
    first; the values must stay referenced while the program is built (an op holds only the C++ value of
    the Python object the recorder returns). Dense tensors only: a distributed one keeps Paddle's way (its
    value carries the placement). A recorder without those maps (another Paddle version) is left as is:
    slower, same metas."""
    params, values = getattr(recorder, "params_dict", None), getattr(recorder, "tensor2value", None)
    if not isinstance(params, dict) or not isinstance(values, dict):
        return
    from paddle.jit.dy2static.program_translator import _program_hash

    key = _program_hash(program)
    params.setdefault(key, set())
    seeded = values.setdefault(key, {})
    names = itertools.count()
    for tensor in tensors:
        if id(tensor) in seeded or not tensor.is_dense() or tensor.is_dist():
            continue
        seeded[id(tensor)] = _placeholder(f"_sot_captured_{next(names)}",
                                          MetaInfo(tuple(tensor.shape), tensor.dtype, bool(tensor.stop_gradient)))


def _ir_dtype(dtype: Any) -> DataType:
    if isinstance(dtype, DataType):
        return dtype
    if isinstance(dtype, core.VarDesc.VarType):
        return vartype_to_datatype[dtype]
    return convert_np_dtype_to_dtype_(dtype)


def _placeholder(name: str, meta: MetaInfo) -> Any:
    """A ``pd_op.data`` value of ``meta`` at the end of the program's top block. Made directly:
    ``paddle.static.data`` checks its arguments in Python and moves the insertion point (3x the cost); the
    placeholders are made before any other op of the call's program."""
    block = paddle.static.default_main_program().global_block()
    previous = paddle.pir.get_current_insertion_point()
    paddle.pir.set_insertion_point_to_block_end(block)
    try:
        value = paddle._pir_ops.data(name, list(meta.shape), _ir_dtype(meta.dtype), core.Place())
    finally:
        paddle.pir.set_insertion_point(previous)
    value.stop_gradient = meta.stop_gradient
    return value


def _captured_tensors(call: Any) -> list[paddle.Tensor]:
    """The parameters and buffers of a ``layer`` statement's layer tree (what its forward reads besides
    its arguments). Read in dygraph mode: in static mode ``Layer.parameters`` keeps a set of static
    values."""
    if not isinstance(call, LayerCall) or not call.is_alive():
        return []
    layer = call.layer
    return [*layer.parameters(), *layer.buffers()]


def _is_static_value(value: Any) -> bool:
    return isinstance(value, paddle.pir.Value)


def meta_of_static(value: Any) -> MetaInfo:
    return MetaInfo(tuple(value.shape), value.dtype, bool(value.stop_gradient))


# Ops that only pack tensors into a vector value or unpack one (an op taking a list of tensors, such as
# ``concat`` or ``stack``, reads it through ``builtin.combine``): no backward of their own, but the gradient
# flows through them.
_PACKING_OPS = frozenset({"builtin.combine", "builtin.split", "builtin.slice"})


def _input_grad_semantics(op: Any, count: int) -> list[bool]:
    """Which inputs of ``op`` its backward gives a gradient to (all of them when the op does not say)."""
    try:
        semantics = list(op.get_input_grad_semantics())
    except Exception:  # noqa: BLE001 - (ops without the interface)
        return [True] * count
    return [bool(s) for s in semantics] if len(semantics) == count else [True] * count


def _eager_stop_gradients(program: Any) -> dict[Any, bool]:
    """``stop_gradient`` of every value as eager mode would set it.

    Static values default to requiring gradients; eager outputs do only when some input the op's backward
    gives a gradient to does (``argmax``, ``zeros_like``, ``numel`` have no backward; the index of ``gather``
    gets no gradient, so an index requiring grad, as eager's ``argsort`` of a tensor requiring grad gives,
    does not make the gathered values require it).
    """
    stop: dict[str, bool] = {}  # keyed by Value.id: the Python wrappers of one value are not one object
    for op in program.global_block().ops:
        operands = [operand.source() for operand in op.operands()]
        inputs = [v for v in operands if v.initialized()]  # optional inputs left empty
        if not inputs:  # placeholders, parameters, constants: their own flag is the eager one
            for result in op.results():
                stop[result.id] = bool(result.stop_gradient)
            continue
        # A PyLayer op has no vjp interface but a registered backward; it marks its non-differentiable
        # outputs stop_gradient itself (see pylayer.py).
        pylayer = op.name() == "pd_op.pylayer"
        differentiable = core.has_vjp(op) or pylayer or op.name() in _PACKING_OPS
        graded = [v for v, gets_grad in zip(operands, _input_grad_semantics(op, len(operands)))
                  if gets_grad and v.initialized()]
        flag = not differentiable or all(stop.get(v.id, bool(v.stop_gradient)) for v in graded)
        for result in op.results():
            stop[result.id] = flag or (pylayer and bool(result.stop_gradient))
    return stop


# Attributes that differ between two builds of the same op for reasons other than its inputs.
_BUILD_IDENTITY_ATTRIBUTES = frozenset({"op_callstack", "struct_name"})  # (where made; a layer's unique name)

# Ops taking a size from a tensor at run time: Paddle's code built for a dynamic dimension (``paddle.where``
# broadcasts with ``full_like`` and ``expand_as`` where sizes are unknown, with ``expand`` to constants where known).
_RUNTIME_SIZE_OPS = frozenset({"pd_op.shape", "pd_op.shape64", "pd_op.full_like", "pd_op.empty_like",
                               "pd_op.expand_as"})


def _attribute_value(value: Any) -> Any:
    """An attribute as a comparable value: a list of ints as a tuple (a shape can be told apart), else its repr."""
    if isinstance(value, list) and all(type(item) is int for item in value):
        return tuple(value)
    return repr(value)


def _op_signature(op: Any) -> tuple:
    """An op's name and attributes (but those naming the build), comparable across programs."""
    return op.name(), tuple(sorted((name, _attribute_value(value)) for name, value in op.attrs().items()
                                   if name not in _BUILD_IDENTITY_ATTRIBUTES))


def _holds_the_size(dynamic: Any, sized: Any, size: int) -> bool:
    """Whether an attribute differs between the builds only by holding the dynamic dimension itself: a shape
    with -1 where the sized build has ``size`` (``expand_as``'s target shape, a reshape target read from the
    input's shape). -1 there means "as at run time": the program is right for every size."""
    if dynamic == sized:
        return True
    return isinstance(dynamic, tuple) and isinstance(sized, tuple) and len(dynamic) == len(sized) and all(
        a == b or (a == -1 and b == size) for a, b in zip(dynamic, sized))


def bakes_dynamic_size(dynamic_ops: list[tuple], sized_ops: list[tuple], size: int) -> bool:
    """Whether a program built from -1 (``dynamic_ops``, `_op_signature` each) computed with -1 as a number,
    judged against the same call built with the size ``size`` (``sized_ops``).

    Same ops, attributes differing only by shapes holding the dimension: right for every size. Other differing
    attributes were computed from it (``F.kl_div`` batchmean's ``1 / -1``, ``quantile``'s last index ``-2``,
    ``tensor_split``'s sections): wrong. Different ops are wrong too (``fft(n=8)`` pads where it should crop),
    unless the dynamic build takes sizes from tensors at run time: Paddle's code then took a path made for
    unknown sizes (``put_along_axis`` broadcasts to ``shape64`` of its input where the sized build has a
    constant)."""
    if [name for name, _ in dynamic_ops] != [name for name, _ in sized_ops]:
        return not any(name in _RUNTIME_SIZE_OPS for name, _ in dynamic_ops)
    for (_, dynamic_attributes), (_, sized_attributes) in zip(dynamic_ops, sized_ops):
        if dynamic_attributes == sized_attributes:
            continue
        dynamic_values, sized_values = dict(dynamic_attributes), dict(sized_attributes)
        if dynamic_values.keys() != sized_values.keys() or not all(
                _holds_the_size(dynamic_values[name], sized_values[name], size) for name in dynamic_values):
            return True
    return False


def _layer_code_modules(call: LayerCall) -> dict[str, str]:
    """The files of the ``forward`` of every layer in the called layer's tree (filename -> module name)."""
    modules = {}
    classes = {type(sub) for sub in call.layer.sublayers(include_self=True)}
    if call.forward_of is not None:
        classes.add(call.forward_of)
    for cls in classes:
        for klass in cls.__mro__:
            forward = vars(klass).get("forward")
            code = getattr(inspect.unwrap(forward), "__code__", None) if forward is not None else None
            if code is not None:
                modules[code.co_filename] = klass.__module__
    return modules


def infer_meta(call: Callable[..., Any], args: tuple, kwargs: dict[str, Any], to_static: bool = False,
               op_count: list[int] | None = None, layer_warnings: list[LayerWarning] | None = None,
               ops_built: list[tuple] | None = None) -> Any:
    """Run ``call`` with every `MetaInfo` leaf of the arguments replaced by a placeholder.

    Returns the output structure with a `MetaInfo` per tensor leaf. Raises `MetaInferenceError` when the
    output holds anything but tensors (a Python value computed from static data cannot be trusted).
    ``to_static`` marks the call as running under ``to_static`` (layers then read their parameters as
    static values, exactly as when the program is built). ``layer_warnings``: a layer call, whose own code's
    warnings are recorded there (`layer_warnings_recorded`).
    """
    counter = iter(range(1 << 30))

    def placeholder(value: Any) -> Any:
        return _placeholder(f"_sot_in_{next(counter)}", value) if isinstance(value, MetaInfo) else value

    captured = _captured_tensors(call) if to_static else []  # (read in dygraph mode: Paddle's own sets)
    with static_mode():
        static_args = map_structure(placeholder, args)
        static_kwargs = {k: map_structure(placeholder, v) for k, v in kwargs.items()}
        try:
            recording = layer_warnings_recorded(_layer_code_modules(call), layer_warnings) \
                if layer_warnings is not None and isinstance(call, LayerCall) else contextlib.nullcontext()
            with _to_static_tracing(to_static, captured), recording:
                out = call(*static_args, **static_kwargs)
                # (inside: leaving the tracing context takes the parameters out of the program)
                program = paddle.static.default_main_program()
                eager_stop_gradient = _eager_stop_gradients(program)
                if ops_built is not None:  # what the program is made of: each op and its attributes
                    ops_built.extend(_op_signature(op) for op in program.global_block().ops
                                     if op.name() not in ("pd_op.data", "builtin.parameter"))
                if op_count is not None:  # the ops the call added (placeholders and parameters aside)
                    op_count.append(sum(1 for op in program.global_block().ops
                                        if op.name() not in ("pd_op.data", "builtin.parameter", "pd_op.full",
                                                             "pd_op.full_int_array")))
        except Exception as exc:  # the op rejected these inputs: not ours to judge, eager will tell
            raise MetaInferenceError(f"{type(exc).__name__}: {exc}") from exc

        def to_meta(value: Any) -> MetaInfo:
            if _is_static_value(value):
                meta = meta_of_static(value)
                stop = eager_stop_gradient.get(value.id)
                if stop is not None and stop != meta.stop_gradient:
                    meta = MetaInfo(meta.shape, meta.dtype, stop)
                return meta
            raise MetaInferenceError(f"returned a non-tensor value of type {type(value).__name__}")

        return map_structure(to_meta, out)

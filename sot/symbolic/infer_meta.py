"""Output meta (shape, dtype, stop_gradient) of a call, found without running kernels on real data.

The call is replayed on `paddle.static.data` placeholders inside a throwaway program with dygraph mode
switched off (DESIGN.md §6); the results are static values whose meta we read. Results are cached per
(call, input metas, constant arguments) since the same op is met again and again while simulating.
"""
from __future__ import annotations

import contextlib
import warnings
from typing import Any, Callable, Iterator

import paddle
from paddle.base import core
from paddle.base.dygraph.base import to_static_mode_guard

from .callstack import shallow_op_callstacks
from .pytree import map_structure
from .sir import MetaInfo
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
    with static_section(), warnings.catch_warnings(), shallow_op_callstacks():
        warnings.simplefilter("ignore")
        with paddle.static.program_guard(main, startup):
            with paddle.base.framework._dygraph_guard(None):
                yield


@contextlib.contextmanager
def _to_static_tracing(enabled: bool) -> Iterator[None]:
    """As when ``to_static`` traces a program: layers read their parameters (also those kept in plain
    lists, e.g. RNN weights) as static values of the current program."""
    if not enabled:
        with to_static_mode_guard(is_to_static=False):
            yield
        return
    from paddle.jit.dy2static.parameter_recorder import _global_inplace_map, _global_parameter_recorder
    from paddle.pir.core import _convert_into_value, static_op_arg_cast_guard

    program = paddle.static.default_main_program()
    try:
        with to_static_mode_guard(is_to_static=True), static_op_arg_cast_guard(_convert_into_value):
            yield
    finally:
        _global_parameter_recorder.pop(program)
        _global_inplace_map.pop(program)


def _is_static_value(value: Any) -> bool:
    return isinstance(value, paddle.pir.Value)


def meta_of_static(value: Any) -> MetaInfo:
    return MetaInfo(tuple(value.shape), value.dtype, bool(value.stop_gradient))


# Ops that only pack tensors into a vector value or unpack one (an op taking a list of tensors, such as
# ``concat`` or ``stack``, reads it through ``builtin.combine``): no backward of their own, but the gradient
# flows through them.
_PACKING_OPS = frozenset({"builtin.combine", "builtin.split", "builtin.slice"})


def _eager_stop_gradients(program: Any) -> dict[Any, bool]:
    """``stop_gradient`` of every value as eager mode would set it.

    Static values default to requiring gradients; eager outputs do only when some input does and the op
    has a backward (``argmax``, ``zeros_like``, ``numel`` have none).
    """
    stop: dict[str, bool] = {}  # keyed by Value.id: the Python wrappers of one value are not one object
    for op in program.global_block().ops:
        inputs = [operand.source() for operand in op.operands()]
        inputs = [v for v in inputs if v.initialized()]  # optional inputs left empty
        if not inputs:  # placeholders, parameters, constants: their own flag is the eager one
            for result in op.results():
                stop[result.id] = bool(result.stop_gradient)
            continue
        # A PyLayer op has no vjp interface but a registered backward; it marks its non-differentiable
        # outputs stop_gradient itself (see pylayer.py).
        pylayer = op.name() == "pd_op.pylayer"
        differentiable = core.has_vjp(op) or pylayer or op.name() in _PACKING_OPS
        flag = not differentiable or all(stop.get(v.id, bool(v.stop_gradient)) for v in inputs)
        for result in op.results():
            stop[result.id] = flag or (pylayer and bool(result.stop_gradient))
    return stop


def infer_meta(call: Callable[..., Any], args: tuple, kwargs: dict[str, Any], to_static: bool = False,
               op_count: list[int] | None = None) -> Any:
    """Run ``call`` with every `MetaInfo` leaf of the arguments replaced by a placeholder.

    Returns the output structure with a `MetaInfo` per tensor leaf. Raises `MetaInferenceError` when the
    output holds anything but tensors (a Python value computed from static data cannot be trusted).
    ``to_static`` marks the call as running under ``to_static`` (layers then read their parameters as
    static values, exactly as when the program is built).
    """
    counter = iter(range(1 << 30))

    def placeholder(value: Any) -> Any:
        if isinstance(value, MetaInfo):
            data = paddle.static.data(f"_sot_in_{next(counter)}", list(value.shape), value.dtype)
            data.stop_gradient = value.stop_gradient
            return data
        return value

    with static_mode():
        static_args = map_structure(placeholder, args)
        static_kwargs = {k: map_structure(placeholder, v) for k, v in kwargs.items()}
        try:
            with _to_static_tracing(to_static):
                out = call(*static_args, **static_kwargs)
                # (inside: leaving the tracing context takes the parameters out of the program)
                program = paddle.static.default_main_program()
                eager_stop_gradient = _eager_stop_gradients(program)
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

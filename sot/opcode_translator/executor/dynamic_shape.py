"""Dynamic dimensions: a dimension seen with a second value becomes symbolic instead of specialised.

On a cache miss, the shape guards of the code's existing entries are compared with the new inputs: a
dimension that differs (and is not 0 or 1, which stay specialised) is remembered as dynamic for that input
(identified by its path, e.g. ``x`` or ``self.w``). The next translation then gives it ``-1`` in the meta
and in the program's input spec, so later values hit the same entry. Reading such a dimension as a Python
value (``x.shape[0]``) pins it again for that entry (a guard on its value).

Python int inputs are treated the same way: one seen with a second value (neither being 0 or 1) becomes a
symbolic int at the next translation (variables/symbolic_int.py).

A numpy array input whose values were folded (``arr.sum()`` is a constant of the translation) and that is
then seen with other contents (e.g. made by ``y.numpy()`` before a graph break, new at every call) is
remembered as varying: the next translation runs its methods natively (a graph break) rather than
translating again for every new content. (Learned whatever ``dynamic_shape`` says: only speed depends on it.)

A built-in layer (``Linear``, ``Conv2D``...) called as one ``layer`` statement is guarded by identity (its
program holds that layer). One input path seen holding another layer of the same class (the item of a loop
over ``self.layers`` whose body breaks the graph, so that its body is a function called with each layer) is
remembered as varying: the next translation simulates the layer's ``forward`` there instead, its parameters
being program inputs, so that one entry serves every layer of the class (variables/layer.py). (Learned
whatever ``dynamic_shape`` says too.)
"""
from __future__ import annotations

import types
from typing import Any, Iterator

import paddle

from ...config import config

_dynamic: dict[tuple[types.CodeType, str], frozenset[int]] = {}
_dynamic_ints: set[tuple[types.CodeType, str]] = set()
_dynamic_floats: set[tuple[types.CodeType, str]] = set()
_varying_arrays: set[tuple[types.CodeType, str]] = set()
_varying_layers: set[tuple[types.CodeType, str]] = set()


def dynamic_dims(code: types.CodeType, path: str) -> frozenset[int]:
    if not config.dynamic_shape:
        return frozenset()
    return _dynamic.get((code, path), frozenset())


def _checked_values(guards: list[Any], checks: str, globals_: dict, closure: Any, args: tuple
                    ) -> Iterator[tuple[str, Any, Any]]:
    """``(path, recorded, new)`` for each of the guards' ``checks`` (``shape_checks``, ``int_checks``...): the
    value an entry was made for and the one the missed call has there (checks that cannot be evaluated on the
    new call are left out)."""
    for guard in guards:
        for path, expr, recorded in getattr(guard, checks, ()):
            try:
                new = guard.evaluate(expr, globals_, closure, args)
            except Exception:
                continue
            yield path, recorded, new


def learn_from_miss(code: types.CodeType, guards: list[Any], globals_: dict, closure: Any, args: tuple) -> None:
    """Mark the dimensions in which the new call's inputs differ from what existing entries were made for."""
    learn_arrays_from_miss(code, guards, globals_, closure, args)
    learn_layers_from_miss(code, guards, globals_, closure, args)
    if not config.dynamic_shape:
        return
    learn_ints_from_miss(code, guards, globals_, closure, args)
    learn_floats_from_miss(code, guards, globals_, closure, args)
    for path, shape, value in _checked_values(guards, "shape_checks", globals_, closure, args):
        if not isinstance(value, paddle.Tensor) or len(value.shape) != len(shape):
            continue
        changed = {i for i, (old, new) in enumerate(zip(shape, value.shape))
                   if old != -1 and old != new and old not in (0, 1) and new not in (0, 1)}
        if changed:
            key = (code, path)
            _dynamic[key] = _dynamic.get(key, frozenset()) | frozenset(changed)


def is_dynamic_int(code: types.CodeType, path: str) -> bool:
    """Whether the int input at ``path`` was seen with a second value: then it is a symbolic int."""
    return config.dynamic_shape and (code, path) in _dynamic_ints


def learn_ints_from_miss(code: types.CodeType, guards: list[Any], globals_: dict, closure: Any,
                         args: tuple) -> None:
    """Mark the int inputs whose value differs from what an existing entry was made for (0 and 1 aside)."""
    for path, old, new in _checked_values(guards, "int_checks", globals_, closure, args):
        if type(new) is int and new != old and old not in (0, 1) and new not in (0, 1):
            _dynamic_ints.add((code, path))


def is_dynamic_float(code: types.CodeType, path: str) -> bool:
    """Whether the float input at ``path`` was seen with a second value: then, where it is an operand of
    ``+ - * /`` with a float tensor or with another such float, it is a program input
    (`symbolic_int.float_input`); any other use of it still bakes (and guards) its value."""
    return config.dynamic_shape and (code, path) in _dynamic_floats


def learn_floats_from_miss(code: types.CodeType, guards: list[Any], globals_: dict, closure: Any,
                           args: tuple) -> None:
    """Mark the float inputs whose value differs from what an existing entry was made for (a value of a
    use that bakes it: an op's attribute, a Python computation)."""
    for path, old, new in _checked_values(guards, "float_checks", globals_, closure, args):
        if type(new) is float and new != old:
            _dynamic_floats.add((code, path))


def is_varying_array(code: types.CodeType, path: str) -> bool:
    """Whether the numpy array input at ``path`` was seen with other contents than a translation folded."""
    return (code, path) in _varying_arrays


def learn_arrays_from_miss(code: types.CodeType, guards: list[Any], globals_: dict, closure: Any,
                           args: tuple) -> None:
    """Mark the array inputs (of the same shape and dtype) whose contents differ from an entry's."""
    import numpy as np

    for path, old, new in _checked_values(guards, "array_checks", globals_, closure, args):
        if type(new) is np.ndarray and new.shape == old.shape and new.dtype == old.dtype \
                and not np.array_equal(new, old, equal_nan=old.dtype.kind in "fc"):
            _varying_arrays.add((code, path))


def is_varying_layer(code: types.CodeType, path: str) -> bool:
    """Whether the built-in layer at ``path`` was seen to be another layer of its class at a later call."""
    return (code, path) in _varying_layers


def learn_layers_from_miss(code: types.CodeType, guards: list[Any], globals_: dict, closure: Any,
                           args: tuple) -> None:
    """Mark the built-in layer inputs that are now another layer of the same class than an entry's."""
    for path, old, new in _checked_values(guards, "layer_checks", globals_, closure, args):
        layer = old()
        if layer is not None and new is not layer and type(new) is type(layer):
            _varying_layers.add((code, path))


def shape_matches(shape: Any, pattern: tuple[int, ...]) -> bool:
    """The guard of a tensor with dynamic dims: same rank, equal static dims, dynamic dims not 0 or 1."""
    if len(shape) != len(pattern):
        return False
    for dim, want in zip(shape, pattern):
        if want == -1:
            if dim < 2:
                return False
        elif dim != want:
            return False
    return True


# Ops giving one output per index along an axis: the static op needs that dimension as a number (Paddle's
# static unbind/unstack of a -1 dimension aborts the process making a vector of -1 outputs). The name of each
# op's tensor and axis parameters (the tensor is the first argument, the axis the second, for the function
# and for the method alike) and the axis' default.
COUNTED_AXES: dict[Any, tuple[str, str, int]] = {
    paddle.unbind: ("input", "axis", 0), "unbind": ("input", "axis", 0),
    paddle.unstack: ("x", "axis", 0), "unstack": ("x", "axis", 0),
}


def counted_axis(target: Any, args: list[Any], kwargs: dict[str, Any]) -> tuple[Any, Any] | None:
    """``(tensor argument, axis argument or its default)`` of a call of an op of `COUNTED_AXES`, else None.
    (Arguments as the caller's variables; ``target`` a function or a method name.)"""
    try:
        spec = COUNTED_AXES.get(target)
    except TypeError:  # (an unhashable target)
        return None
    if spec is None:
        return None
    tensor_name, axis_name, default = spec
    tensor = args[0] if args else kwargs.get(tensor_name)
    axis = args[1] if len(args) > 1 else kwargs.get(axis_name, default)
    return tensor, axis


def forget() -> None:
    """``sot.reset()``."""
    _dynamic.clear()
    _dynamic_ints.clear()
    _dynamic_floats.clear()
    _varying_arrays.clear()
    _varying_layers.clear()

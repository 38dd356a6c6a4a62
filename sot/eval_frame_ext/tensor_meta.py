"""The optional C++ reader of tensor meta for the guards (``_tensor_meta``, tensor_meta.cpp).

A tensor guard (``tensor_matches``, tensor_guard.c) compares an input's dtype and shape with constants on
every cache hit. Paddle's getters build Python objects for that (a dtype enum, a ``paddle.Size``); the
reader takes both from the C++ tensor instead. It relies on the memory layout of Paddle's classes, so it is
installed only when everything says that layout is the one it was compiled for:

* the module was built (setup.py builds it when Paddle's C++ headers are there) and imports;
* it was compiled against the very Paddle build that is running (``PADDLE_COMMIT``);
* ``calibrate`` finds ``paddle.Tensor`` laid out as expected and reads sample tensors of several dtypes and
  ranks exactly as the Python getters do.

Otherwise (or with ``SOT_TENSOR_META=0`` in the environment) the guards read the attributes, with the same
results. Which tensors the reader leaves to the getters is said in tensor_meta.cpp.

The guards want dtype objects the reader knows by identity: `canonical_dtype` gives, for any dtype a
tensor reports, the one object standing for it (a ``DataType`` member under the PIR API, a ``VarType``
member under the legacy IR, whose getter makes a new object at every read). Each is registered with the
phi code it stands for and the IR whose getter makes it, so a guard made under one IR never passes under
the other, as the Python check (``type(x.dtype) is type(want)``) would not.
"""
from __future__ import annotations

import os
from typing import Any

from . import _eval_frame as _ext

__all__ = ["canonical_dtype", "fresh_inplace_versions", "install", "installed", "uninstall"]

_installed = False
_reason = "not tried"
_fresh_counters: Any = None  # (the C++ function and the tensor type, once calibrated)


def _dtype_table(paddle: Any) -> dict[Any, tuple[int, bool]]:
    """Every DataType and VarType member that names a phi dtype: (its phi code, made under the PIR API)."""
    from paddle.base import core, libpaddle
    from paddle.pir.core import vartype_to_datatype

    table: dict[Any, tuple[int, bool]] = {}
    for member in libpaddle.DataType.__members__.values():
        table[member] = (int(member), True)
    for member in core.VarDesc.VarType.__members__.values():
        datatype = vartype_to_datatype.get(member)
        if datatype is not None:
            table[member] = (int(datatype), False)
    return table


def canonical_dtype(dtype: Any) -> Any:
    """The member of its enum equal to ``dtype`` (a dtype object a tensor's getter made), which guards hold:
    equal to it and of its type, and known to the reader. ``dtype`` itself when it is no enum member."""
    members = getattr(type(dtype), "__members__", None)
    if isinstance(members, dict):
        member = members.get(getattr(dtype, "name", None))
        if member is not None and type(member) is type(dtype) and member == dtype:
            return member
    return dtype


def install() -> bool:
    """Install the reader when it is safe (see the module docstring); whether it is installed."""
    global _installed, _reason
    if _installed:
        return True
    if os.environ.get("SOT_TENSOR_META", "1") == "0":
        _reason = "disabled by SOT_TENSOR_META=0"
        return False
    try:
        from . import _tensor_meta
    except ImportError as exc:
        _reason = f"not built ({exc})"
        return False
    import paddle

    if _tensor_meta.PADDLE_COMMIT != paddle.version.commit:
        _reason = (f"built against Paddle commit {_tensor_meta.PADDLE_COMMIT}, running "
                   f"{paddle.version.commit}")
        return False
    try:
        table = _dtype_table(paddle)
        codes = {member: code for member, (code, _pir) in table.items()}
        samples = []
        with paddle.no_grad():
            for shape, dtype in (([2, 3, 5], "float32"), ([7], "int64"), ([], "float64"), ([3, 1, 2, 2, 4], "bool"),
                                 ([1, 6], "int32"), ([4, 0, 3], "float16")):
                tensor = paddle.zeros(shape, dtype=dtype)
                samples.append((tensor, codes[canonical_dtype(tensor.dtype)], list(tensor.shape)))
        _tensor_meta.calibrate(paddle.Tensor, samples)
        global _fresh_counters
        _fresh_counters = (_tensor_meta.fresh_inplace_versions, paddle.Tensor)
        _ext._set_tensor_meta(_tensor_meta.api, paddle.Tensor, table)
    except Exception as exc:  # a layout or a reading that differs: keep the getters
        _reason = f"calibration failed ({type(exc).__name__}: {exc})"
        return False
    _installed, _reason = True, "installed"
    return True


def uninstall() -> None:
    """Read the attributes again (for tests and for comparing both ways)."""
    global _installed, _reason
    _ext._set_tensor_meta(None, None, None)
    _installed, _reason = False, "uninstalled"


def installed() -> bool:
    return _installed


def status() -> str:
    """Why the reader is or is not installed."""
    return _reason


def fresh_inplace_versions(tensors: list, given: list) -> None:
    """Give each tensor of ``tensors`` that is not one of ``given`` (a run's inputs, handed back as they are) an
    inplace-version counter of its own, at 0 (tensor_meta.cpp says why: the outputs of a program run share their
    counter with the runner's scope variables, and so with every other run's outputs). Nothing to do without the
    calibrated reader: the versions then stay shared, as Paddle makes them."""
    if _fresh_counters is not None:
        function, tensor_type = _fresh_counters
        function(tensor_type, tensors, given)

"""The sign of float zero constants in static programs.

Paddle's IR context keeps one attribute object per distinct value, found by hashing and ``==``; ``-0.0 ==
0.0`` and both hash alike, so whichever of the two the process puts into an attribute first stands for both
from then on, in every program built afterwards (a ``full`` of -0.0, a ``scale`` by -0.0, the items of
``paddle.to_tensor([-0.0, 0.0])``, any op's float attribute). A compiled program can then return 0.0 where
eager returns -0.0, and ``x / z`` gives +inf instead of -inf (fuzz seed 1074); the other way round, a -0.0
that came first turns every later 0.0 into -0.0.

So, before sot builds any static program (meta inference included), `pin_zero_sign` puts the zeros of the
usual attribute kinds into the context as +0.0, and reads back what the context holds (some other code of
the process may have come first). A SIR whose constants hold a zero of the other sign cannot be lowered
faithfully: `holds_unrepresentable_zero` tells the compiler to run it as an eager replay instead (exact, and
rare in practice: a float argument of -0.0 guarded as a constant, ``x * -0.0``...).
"""
from __future__ import annotations

import collections
import math
import threading
from typing import Any

import numpy as np
import paddle

from .pytree import leaves
from .sir import LayerCall, StatementIR, Symbol

_lock = threading.Lock()
# The sign (+1.0 or -1.0) every float zero attribute of the context has; None when the kinds disagree (then
# no zero constant is faithful), absent until pinned.
_canonical: list[float | None] = []


def pin_zero_sign() -> None:
    """Make +0.0 the zero of the context's float attributes, if nothing came first; learn which sign it is."""
    if _canonical:
        return
    with _lock:
        if not _canonical:
            _canonical.append(_probe_zero_signs())


def _probe_zero_signs() -> float | None:
    from .infer_meta import throwaway_static_program

    with throwaway_static_program():
        x = paddle.static.data("_sot_zero_probe", [1], "float32")
        paddle.full([1], 0.0, dtype="float64")  # a double attribute (a Python float fill value)
        paddle.full([1], np.float32(0.0), dtype="float32")
        paddle.scale(x, scale=1.0, bias=0.0)  # float attributes
        paddle.assign(np.zeros([1], dtype="float32"))  # the items of an array, either width
        paddle.assign(np.zeros([1], dtype="float64"))
        program = paddle.static.default_main_program()
        signs = {math.copysign(1.0, value) for op in program.global_block().ops
                 for value in leaves(list(op.attrs().values())) if type(value) is float and value == 0.0}
    return signs.pop() if len(signs) == 1 else None


def holds_unrepresentable_zero(sir: StatementIR) -> bool:
    """Whether a constant of ``sir`` (an argument, or an attribute of a layer it calls) is a float zero whose
    sign the static program would not keep."""
    pin_zero_sign()
    canonical = _canonical[0]
    for stmt in sir.statements:
        constants = [leaf for leaf in leaves((stmt.args, stmt.kwargs)) if not isinstance(leaf, Symbol)]
        if isinstance(stmt.target, LayerCall) and stmt.target.is_alive():
            constants += [value for sub in stmt.target.layer.sublayers(include_self=True)
                          for value in vars(sub).values()]
        if any(type(value) not in _SIGNLESS and _zero_signs(value) - {canonical} for value in constants):
            return True
    return False


# Types `_zero_signs` gives no sign for (containers are not looked into): most attributes of a layer (its dicts,
# flags, names, shapes), skipped without the isinstance tests (a translation looks at every attribute of every
# layer it calls).
_SIGNLESS = frozenset({str, bool, type(None), list, tuple, dict, collections.OrderedDict, set})


def _zero_signs(value: Any) -> set[float]:
    """The signs of the float zeros in a constant (a float, a complex, a NumPy scalar or array). An integer 0
    counts as +0.0: an op may make it a float attribute (``x * 0`` scales by 0.0)."""
    if isinstance(value, (bool, np.bool_, str, type(None))):
        return set()
    if isinstance(value, (int, np.integer)):
        return {1.0} if value == 0 else set()
    if isinstance(value, (float, np.floating)):
        return {math.copysign(1.0, value)} if value == 0 else set()
    if isinstance(value, (complex, np.complexfloating)):
        return _zero_signs(value.real) | _zero_signs(value.imag)
    if isinstance(value, np.ndarray) and value.dtype.kind in "fc":
        parts = (value.real, value.imag) if value.dtype.kind == "c" else (value,)
        zeros = np.concatenate([part[part == 0].ravel() for part in parts])
        return {-1.0 if negative else 1.0 for negative in np.unique(np.signbit(zeros))}
    return set()

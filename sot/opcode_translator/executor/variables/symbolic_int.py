"""Symbolic ints: an int known only when the program runs (a dynamic dimension, or a varying int input).

Two sources:

* ``B, T, C = x.shape`` on an input whose ``T`` varies gives ``T`` as a 0-D int tensor of the graph
  (``paddle.shape(x)[1]``);
* a Python int input (an argument, an attribute, a global) that was seen with a second value (not 0 or 1)
  becomes a program input: the generated code hands it to the program as a 0-D int64 tensor.

Arithmetic with ints stays in the graph, and the value can be passed where Paddle takes a shape
(``x.reshape([B * T, C])``, ``x[:, :n]``) or used as a tensor operand (``x * n``), so one translation serves
every value. A comparison or a truth test of it (``if n > 3``) is decided with this call's value and
guarded by the same expression over the inputs (``n > 3``), not by the value. Any other use as a Python
value (``range(n)``, a list index, a call of a layer) pins it: this call's value is used and guarded. When
the value is not known (derived from a computed tensor) the graph breaks there instead.

A symbolic int is a `ConstantVariable` whose ``value`` pins it when read: code that needs a concrete int
gets one (and a value guard), so only the paths written for symbolic ints keep it symbolic.
"""
from __future__ import annotations

import functools
import operator
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
import paddle

from ....errors import BreakGraphError
from ....symbolic.sir import MetaInfo
from ..tracker import DummyTracker, Tracker
from .base import VariableBase
from .basic import ConstantVariable, TensorVariable

if TYPE_CHECKING:
    from ...codegen import CodeGen
    from ..function_graph import FunctionGraph
    from ..guard import GuardBuilder

# Operators kept in the graph between symbolic ints and ints, with their spelling in guard expressions.
ARITHMETIC: dict[Callable[..., Any], str] = {
    operator.add: "+", operator.sub: "-", operator.mul: "*", operator.floordiv: "//", operator.mod: "%",
    operator.iadd: "+", operator.isub: "-", operator.imul: "*", operator.ifloordiv: "//", operator.imod: "%",
}
# Operators whose int64 result may wrap around where Python's int grows.
_MAY_OVERFLOW = frozenset({operator.add, operator.sub, operator.mul, operator.iadd, operator.isub, operator.imul})
# Operators that raise ZeroDivisionError on a zero right operand.
_DIVISIONS = frozenset({operator.floordiv, operator.mod, operator.ifloordiv, operator.imod})
# Decided at translation time and guarded by the same comparison over the inputs.
COMPARISONS: dict[Callable[..., Any], str] = {
    operator.lt: "<", operator.le: "<=", operator.eq: "==", operator.ne: "!=", operator.gt: ">",
    operator.ge: ">=",
}
# Tensor dtypes a Python int operand is converted to by eager Paddle (``x * 3`` computes in x's dtype); a
# symbolic int operand is cast to the same dtype so the result's dtype and values match.
_CASTABLE_DTYPES = {paddle.float16, paddle.bfloat16, paddle.float32, paddle.float64, paddle.int8, paddle.uint8,
                    paddle.int16, paddle.int32, paddle.int64}


INT64_MIN, INT64_MAX = -2 ** 63, 2 ** 63 - 1


class SymbolicIntVariable(ConstantVariable):
    """An int computed in the graph.

    ``tensor`` is its 0-D int tensor in the graph; ``known`` its value for the call being translated, when
    derivable from the inputs; ``sources`` what pinning it must guard: ``(input tensor, dim)`` pairs and
    ``(int input, None)``; ``form`` how to re-compute it from the inputs in a guard expression (None when it
    cannot be): ``("input",)``, ``("dim", tensor, dim)`` or ``("op", symbol, operands)``.
    """

    def __init__(self, tensor: TensorVariable, known: int | None, sources: tuple, graph: "FunctionGraph",
                 form: tuple | None, tracker: Tracker | None = None) -> None:
        VariableBase.__init__(self, graph, tracker if tracker is not None else DummyTracker((tensor,)))
        self.tensor = tensor
        self.known = known
        self.sources = sources
        self.form = form

    @property
    def value(self) -> int:  # type: ignore[override]
        """Read as a plain constant: pinned."""
        return self.get_py_value()

    def children(self) -> list[VariableBase]:
        return [self.tensor]

    def get_py_value(self) -> Any:
        """Pin: this call's value becomes part of the entry's guards."""
        if self.known is None:
            raise BreakGraphError("a dynamic dimension of a computed tensor is used as a Python value")
        for source, dim in self.sources:
            if dim is None:
                self.graph.add_expr_guard(source, f"{{}} == {source.known!r}", data_only=self.graph.reading_data)
            else:
                self.graph.pin_dimension(source, dim)
        return self.known

    def get_py_type(self) -> type:
        return int

    @property
    def truth_is_symbolic(self) -> bool:
        """`bool` is guarded by the truth of its expression (not by the value)."""
        return self.known is not None and self.form is not None

    def bool(self) -> bool:
        """``if n:``: decided by this call's value, guarded by the truth of the same expression."""
        if self.known is None or self.form is None:
            return bool(self.get_py_value())
        truth = bool(self.known)
        self.graph.add_symbolic_guard(self.render, "{}" if truth else "not {}", self)
        return truth

    def render(self, builder: "GuardBuilder") -> str:
        """A Python expression over the guard's parameters that computes this int at the next call."""
        assert self.form is not None
        kind = self.form[0]
        if kind == "input":
            return builder.expr_of(self)
        if kind == "dim":
            _, tensor, dim = self.form
            return f"{builder.expr_of(tensor)}.shape[{dim}]"
        if kind == "int":
            return f"int({self.form[1].render(builder)})"
        _, symbol, operands = self.form
        parts = [o.render(builder) if isinstance(o, SymbolicIntVariable) else repr(o.value) for o in operands]
        return f"({parts[0]} {symbol} {parts[1]})"

    def make_guards(self, builder: "GuardBuilder", expr: str) -> list[str]:
        if self.form is not None and self.form[0] == "input":
            # Valid for any int but 0 and 1, which stay specialised (as dimensions do), that fits the int64
            # tensor the program gets; uses of the value added their own guards (pins, branch conditions).
            return [f"type({expr}) is int", f"{expr} not in (0, 1)", f"{INT64_MIN} <= {expr} <= {INT64_MAX}"]
        return []

    def _reconstruct_computed(self, codegen: "CodeGen") -> None:
        codegen.call_helper(int, [self.tensor])

    def __repr__(self) -> str:
        return f"SymbolicIntVariable({self.tensor.symbol.name}, known={self.known})"


class IntInputTensorTracker(Tracker):
    """The 0-D int64 tensor the generated code makes from an int input, to feed it to the program."""

    def __init__(self, source: SymbolicIntVariable) -> None:
        self.inputs = (source,)
        self.source = source

    def guard_expr(self, builder: "GuardBuilder") -> str:
        return builder.expr_of(self.source)

    def gen_load(self, codegen: "CodeGen") -> None:
        from ...runtime import int_tensor

        codegen.call_helper(int_tensor, [self.source])

    def describe(self) -> str:
        return f"int_tensor({self.source.tracker.describe()})"


class IntInputTensorVariable(TensorVariable):
    """The program input standing for an int input; the int's own guards cover it."""

    def make_guards(self, builder: "GuardBuilder", expr: str) -> list[str]:
        return []


def int_input(value: int, graph: "FunctionGraph", tracker: Tracker) -> SymbolicIntVariable:
    """A symbolic int for an int input read from the frame (``tracker`` leads back to it)."""
    var = SymbolicIntVariable.__new__(SymbolicIntVariable)
    meta = MetaInfo((), paddle.int64, True)
    tensor = IntInputTensorVariable(meta, graph, IntInputTensorTracker(var))
    SymbolicIntVariable.__init__(var, tensor, value, ((var, None),), graph, ("input",), tracker)
    return var


class SymbolicFloatVariable(SymbolicIntVariable):
    """A float input seen with a second value (`dynamic_shape.is_dynamic_float`): a program input (a 0-D
    float64 tensor) where it is an operand of ``+ - * /`` with a float32 or float64 tensor, which eager Paddle
    computes as with that tensor cast to the operand's dtype (checked against eager, the sign of zeros too:
    a product gets eager's ``+ 0.0``, `with_eager_scale_bias`). Every other use pins it (its value baked and
    guarded, as a plain float): an op's attribute (a dropout rate) must be, and float arithmetic in Python
    with a constant (``1 - p``) is not kept in the graph. ``+ - * /`` between two symbolic floats is
    (`symbolic_float_arithmetic`): its result is a symbolic float too, computed (``sources`` are the inputs
    it came from, which pinning it guards)."""

    def get_py_type(self) -> type:
        return float

    def make_guards(self, builder: "GuardBuilder", expr: str) -> list[str]:
        # Any finite float but 0.0 (whose sign matters): uses of the value added their own guards (pins).
        return [f"type({expr}) is float", f"{expr} != 0.0", f"{expr} - {expr} == 0.0"]

    def _reconstruct_computed(self, codegen: "CodeGen") -> None:
        codegen.call_helper(float, [self.tensor])

    def __repr__(self) -> str:
        return f"SymbolicFloatVariable({self.tensor.symbol.name}, known={self.known})"


class FloatInputTensorTracker(IntInputTensorTracker):
    """The 0-D float64 tensor the generated code makes from a float input, to feed it to the program."""

    def gen_load(self, codegen: "CodeGen") -> None:
        from ...runtime import float_tensor

        codegen.call_helper(float_tensor, [self.source])

    def describe(self) -> str:
        return f"float_tensor({self.source.tracker.describe()})"


def float_input(value: float, graph: "FunctionGraph", tracker: Tracker) -> SymbolicFloatVariable:
    """A symbolic float for a float input read from the frame (``tracker`` leads back to it)."""
    var = SymbolicFloatVariable.__new__(SymbolicFloatVariable)
    meta = MetaInfo((), paddle.float64, True)
    tensor = IntInputTensorVariable(meta, graph, FloatInputTensorTracker(var))
    SymbolicIntVariable.__init__(var, tensor, value, ((var, None),), graph, ("input",), tracker)
    return var


def pin_float(var: VariableBase) -> VariableBase:
    """``var``, or its value (pinned) when it is a symbolic float."""
    if isinstance(var, SymbolicFloatVariable):
        return ConstantVariable(var.get_py_value(), var.graph, DummyTracker((var,)))
    return var


def pin_floats(tree: Any) -> Any:
    """``tree`` (a variable, or a list/tuple/dict of them) with every symbolic float in it pinned."""
    from .container import DictVariable, SequenceVariable

    if isinstance(tree, SymbolicFloatVariable):
        return pin_float(tree)
    if isinstance(tree, list):
        return [pin_floats(item) for item in tree]
    if isinstance(tree, dict):
        return {key: pin_floats(item) for key, item in tree.items()}
    if isinstance(tree, SequenceVariable) and any(isinstance(i, SymbolicFloatVariable) for i in tree.items):
        return type(tree)(pin_floats(list(tree.items)), tree.graph, DummyTracker((tree,)))
    if isinstance(tree, DictVariable) and any(isinstance(i, SymbolicFloatVariable) for i in tree.items.values()):
        return DictVariable(pin_floats(dict(tree.items)), tree.graph, DummyTracker((tree,)))
    return tree


def dimension(tensor: TensorVariable, dim: int) -> VariableBase:
    """``tensor.shape[dim]``: a plain int, or a symbolic one for a dynamic dimension."""
    graph = tensor.graph
    size = tensor.meta.shape[dim]
    if size != -1:
        return ConstantVariable(size, graph, DummyTracker((tensor,)))
    shape = graph.call_tensor_op("api", "paddle.shape", paddle.shape, [tensor], {})
    value = graph.call_tensor_op("api", "operator.getitem", operator.getitem,
                                 [shape, ConstantVariable(dim, graph, DummyTracker())], {})
    if tensor.value is None:
        return SymbolicIntVariable(value, None, (), graph, None)
    return SymbolicIntVariable(value, tensor.value.shape[dim], ((tensor, dim),), graph, ("dim", tensor, dim))


def _is_int_constant(var: VariableBase) -> bool:
    return type(var) is ConstantVariable and type(var.value) is int


def _symbolic_operands(operands: list[VariableBase]) -> bool:
    """At least one symbolic int, the rest symbolic ints or plain int constants (no symbolic float)."""
    return (any(isinstance(o, SymbolicIntVariable) for o in operands)
            and not any(isinstance(o, SymbolicFloatVariable) for o in operands)
            and all(isinstance(o, SymbolicIntVariable) or _is_int_constant(o) for o in operands))


# Python float operators a float64 program computes exactly as Python does (IEEE double, round to nearest),
# in-place forms mapped to the plain ones (a float is immutable).
_FLOAT_ARITHMETIC: dict[Callable[..., Any], Callable[..., Any]] = {
    operator.add: operator.add, operator.sub: operator.sub, operator.mul: operator.mul,
    operator.truediv: operator.truediv, operator.iadd: operator.add, operator.isub: operator.sub,
    operator.imul: operator.mul, operator.itruediv: operator.truediv,
}


def symbolic_float_arithmetic(fn: Callable[..., Any], operands: list[VariableBase]) -> VariableBase | None:
    """``total + x`` of two symbolic floats, kept in the graph (their 0-D float64 tensors): a float carried
    along from call to call (an accumulated loss) then costs no translation per value. Only where both are
    symbolic floats: a float64 ``+ - * /`` of two float64 tensors is Python's float arithmetic bit for bit
    (the sign of zeros, overflow to inf too), while a Python constant operand would reach the program as an
    op attribute (``scale``'s float32 bias) and lose bits, so it is folded on the pinned values as before.
    Every use that needs the value (a comparison, ``if``, formatting, ``int()``, an attribute) pins the
    result, which guards the inputs it came from by their values."""
    if len(operands) != 2 or fn not in _FLOAT_ARITHMETIC \
            or not all(isinstance(o, SymbolicFloatVariable) for o in operands):
        return None
    left, right = operands
    plain = _FLOAT_ARITHMETIC[fn]
    if left.known is None or right.known is None:
        return None
    if plain is operator.truediv and right.form != ("input",):
        # A computed divisor may be 0.0 at a later call, where Python raises and the program gives inf; an
        # input is never 0.0 under its own guard.
        return None
    try:
        known = plain(left.known, right.known)
    except ArithmeticError:
        return None  # (folded on the pinned values: raises as eager does)
    graph = left.graph
    result = graph.call_tensor_op("api", f"operator.{plain.__name__}", plain, [left.tensor, right.tensor], {})
    return SymbolicFloatVariable(result, known, left.sources + right.sources, graph, None)


_TRUE_DIVISIONS = frozenset({operator.truediv, operator.itruediv})
# Ints a double holds exactly: Python's ``a / b`` of such ints (or of such an int and a float) is the float64
# division of the two as doubles, bit for bit.
_EXACT_IN_DOUBLE = 2 ** 53


def symbolic_true_division(fn: Callable[..., Any], operands: list[VariableBase]) -> VariableBase | None:
    """``n / c`` of a symbolic int and a non-zero number (``windows.shape[0] / (H * W / ws / ws)`` in a Swin
    window reverse): a symbolic float computed in float64 (Python's true division of such values exactly, the
    int below 2**53, guarded so when its value is known), which ``int()`` makes a symbolic int again
    (`symbolic_int_of`). None for other operands (a symbolic divisor may be 0 at a later call)."""
    if fn not in _TRUE_DIVISIONS or len(operands) != 2:
        return None
    numerator, divisor = operands
    if not isinstance(numerator, SymbolicIntVariable) or isinstance(numerator, SymbolicFloatVariable) \
            or type(divisor) is not ConstantVariable or type(divisor.value) not in (int, float):
        return None
    value = divisor.value
    if value == 0 or abs(value) >= _EXACT_IN_DOUBLE or value != value or value in (float("inf"), float("-inf")):
        return None
    known = numerator.known
    if known is not None and not -_EXACT_IN_DOUBLE < known < _EXACT_IN_DOUBLE:
        return None
    graph = numerator.graph
    graph.add_guard(divisor)
    if known is not None and numerator.form is not None:
        graph.add_symbolic_guard(lambda builder: f"({-_EXACT_IN_DOUBLE} < {numerator.render(builder)} < "
                                 f"{_EXACT_IN_DOUBLE})", "{}", numerator)
    as_double = graph.call_tensor_op("api", "paddle.cast", paddle.cast,
                                     [numerator.tensor, ConstantVariable(paddle.float64, graph, DummyTracker())], {})
    operand = ConstantVariable(float(value), graph, DummyTracker((divisor,)))
    result = graph.call_tensor_op("api", "operator.truediv", operator.truediv, [as_double, operand], {})
    form = ("op", "/", (numerator, divisor)) if known is not None and numerator.form is not None else None
    return SymbolicFloatVariable(result, None if known is None else known / value, numerator.sources, graph,
                                 form)


def symbolic_int_of(var: VariableBase) -> VariableBase | None:
    """``int(q)`` of a symbolic float computed by `symbolic_true_division`: truncated toward zero in the graph
    (``int()`` of a float), a symbolic int. None for any other value (an input float is pinned)."""
    if not isinstance(var, SymbolicFloatVariable) or var.form == ("input",):
        return None
    graph = var.graph
    truncated = graph.call_tensor_op("api", "paddle.trunc", paddle.trunc, [var.tensor], {})
    result = graph.call_tensor_op("api", "paddle.cast", paddle.cast,
                                  [truncated, ConstantVariable(paddle.int64, graph, DummyTracker())], {})
    known = None if var.known is None else int(var.known)
    form = ("int", var) if known is not None and var.form is not None else None
    return SymbolicIntVariable(result, known, var.sources, graph, form)


def symbolic_arithmetic(fn: Callable[..., Any], operands: list[VariableBase]) -> VariableBase | None:
    """``fn(*operands)`` kept symbolic when a symbolic int meets ints; None when it does not apply."""
    floats = symbolic_float_arithmetic(fn, operands)
    if floats is not None:
        return floats
    divided = symbolic_true_division(fn, operands)
    if divided is not None:
        return divided
    if fn is operator.neg and len(operands) == 1 and isinstance(operands[0], SymbolicIntVariable):
        operands = [ConstantVariable(0, operands[0].graph, DummyTracker()), operands[0]]
        fn = operator.sub
    if len(operands) != 2 or not _symbolic_operands(operands):
        return None
    if fn in COMPARISONS:
        return _symbolic_comparison(fn, operands)
    if fn not in ARITHMETIC:
        return None
    graph = operands[0].graph
    knowns = [o.known if isinstance(o, SymbolicIntVariable) else o.value for o in operands]
    try:
        known = fn(*knowns) if None not in knowns else None
    except ArithmeticError:
        # ``n // 0``: Python raises for these values. Not kept symbolic: the caller folds it on the pinned
        # values, which raises the user's exception as eager code does.
        return None
    if known is not None and not INT64_MIN <= known <= INT64_MAX:
        return None  # (the program's int64 would wrap around: folded on the pinned values, exact as Python's)
    divisor = operands[1]
    if fn in _DIVISIONS and isinstance(divisor, SymbolicIntVariable) and divisor.form != ("input",):
        # A computed divisor (``n - 2``) may be 0 at a later call, where Python raises and the program
        # would not: the entry holds for non-zero divisors only. (An input is never 0 under its guard.)
        if divisor.form is None:
            return None  # (no expression to guard with: folded on its pinned value)
        graph.add_symbolic_guard(lambda builder: f"({divisor.render(builder)} != 0)", "{}", divisor)
    parts = [o.tensor if isinstance(o, SymbolicIntVariable) else o for o in operands]
    result = graph.call_tensor_op("api", f"operator.{fn.__name__}", fn, parts, {})
    if fn in (operator.floordiv, operator.ifloordiv):
        # Eager Paddle gives a 0-D tensor // a Python int the shape [1] (a static program keeps []): make
        # it 0-D again, or reading it back as an int fails.
        result = graph.call_tensor_op("api", "paddle.reshape", paddle.reshape,
                                      [result, ConstantVariable([], graph, DummyTracker())], {})
    for o in operands:
        if not isinstance(o, SymbolicIntVariable):
            graph.add_guard(o)
    sources = tuple(s for o in operands if isinstance(o, SymbolicIntVariable) for s in o.sources)
    renderable = all(o.form is not None for o in operands if isinstance(o, SymbolicIntVariable))
    form = ("op", ARITHMETIC[fn], tuple(operands)) if renderable and known is not None else None
    variable = SymbolicIntVariable(result, known, sources, graph, form)
    if fn in _MAY_OVERFLOW and form is not None:
        # At a later call the Python int may leave int64, where the program's wraps around (``n *= n`` a few
        # times): the entry holds only while it fits.
        graph.add_symbolic_guard(lambda builder: f"({INT64_MIN} <= {variable.render(builder)} <= {INT64_MAX})",
                                 "{}", variable)
    return variable


def _symbolic_comparison(fn: Callable[..., Any], operands: list[VariableBase]) -> VariableBase | None:
    """``n > 3``: this call's answer, guarded by the comparison itself (not by ``n``'s value)."""
    symbolic = [o for o in operands if isinstance(o, SymbolicIntVariable)]
    if any(o.known is None or o.form is None for o in symbolic):
        return None  # constant folding pins (or breaks the graph)
    graph = operands[0].graph
    for o in operands:
        if not isinstance(o, SymbolicIntVariable):
            graph.add_guard(o)
    knowns = [o.known if isinstance(o, SymbolicIntVariable) else o.value for o in operands]
    answer = bool(fn(*knowns))
    symbol = COMPARISONS[fn]

    def render(builder: "GuardBuilder") -> str:
        parts = [o.render(builder) if isinstance(o, SymbolicIntVariable) else repr(o.value) for o in operands]
        return f"({parts[0]} {symbol} {parts[1]})"

    graph.add_symbolic_guard(render, "{}" if answer else "not {}", *symbolic)
    result = ConstantVariable(answer, graph, DummyTracker(tuple(operands)))
    graph.determined_by_expression(result)
    return result


# The operators whose float operand eager Paddle casts to a float32/float64 tensor's dtype (a product is a
# ``scale`` with bias 0.0: `with_eager_scale_bias`).
_FLOAT_OPERAND_OPERATORS = frozenset({operator.add, operator.sub, operator.mul, operator.truediv})
_FLOAT_OPERAND_DTYPES = frozenset({paddle.float32, paddle.float64})


_HALF_DTYPES = frozenset({paddle.float16, paddle.bfloat16})
_INTEGER_RANGES = {paddle.int8: (-2 ** 7, 2 ** 7), paddle.uint8: (0, 2 ** 8), paddle.int16: (-2 ** 15, 2 ** 15),
                   paddle.int32: (-2 ** 31, 2 ** 31), paddle.int64: (-2 ** 53, 2 ** 53)}


def _fits(number: "SymbolicIntVariable", dtype: Any) -> bool:
    """Whether the symbolic number's value, cast to ``dtype``, is the number eager computes with (an int
    in the integer type's range; for int64, one a double holds exactly); then guarded to stay so."""
    bounds = _INTEGER_RANGES.get(dtype)
    if bounds is None or isinstance(number, SymbolicFloatVariable):
        return True
    low, high = bounds
    value = number.known
    if value is None or number.form is None or not low <= value < high:
        return False
    number.graph.add_symbolic_guard(number.render, f"{low} <= {{}} < {high}", number)
    return True


def tensor_operand(tensor: TensorVariable, other: VariableBase, fn: Callable[..., Any] | None = None) -> VariableBase:
    """``other`` as the operand of the operator ``fn`` with ``tensor``: a symbolic int becomes its 0-D tensor
    cast to the tensor's dtype, which is what eager Paddle does with a Python int (``x * 3`` stays in x's
    dtype, ``int32 // 3`` stays int32); for other dtypes (bool, complex) it is pinned to a Python int. A
    symbolic float is cast the same way for `_FLOAT_OPERAND_OPERATORS` on `_FLOAT_OPERAND_DTYPES`, else
    pinned."""
    if not isinstance(other, SymbolicIntVariable):
        return other
    graph = tensor.graph
    if isinstance(other, SymbolicFloatVariable) and (fn not in _FLOAT_OPERAND_OPERATORS
                                                      or tensor.meta.dtype not in _FLOAT_OPERAND_DTYPES):
        return pin_float(other)
    if tensor.meta.dtype not in _CASTABLE_DTYPES or tensor.meta.dtype in _HALF_DTYPES \
            or fn in _POWER_OPERATORS or not _fits(other, tensor.meta.dtype):
        # (an unknown value breaks the graph here.) Pinned: a half tensor (eager scales it: a CPU program has
        # no half elementwise kernels), an exponent (eager's ``pow`` kernel), a number outside the integer
        # dtype's range (the cast would wrap it where eager computes with the double).
        return ConstantVariable(other.get_py_value(), graph, DummyTracker((other,)))
    from .basic import ObjectVariable

    dtype = ObjectVariable(tensor.meta.dtype, graph, DummyTracker())
    return graph.call_tensor_op("api", "paddle.cast", paddle.cast, [other.tensor, dtype], {})


def checked_index(tensor: TensorVariable, key: VariableBase) -> VariableBase:
    """A tensor index (``x[key]``) the program can take as it is.

    Eager raises IndexError for an integer index out of range; a static program reads (or writes) outside
    the tensor instead (fuzz seed 12316: an uninitialized result; an item set out of range changed nothing).
    A symbolic int indexing the first dimension, a static one, is guarded to stay in range (a call out of
    range translates again); any other symbolic int index is pinned. An int index out of the range of a
    static dimension runs the op natively (eager raises). Slice bounds clamp: kept as they are."""
    from .container import TupleVariable

    shape = tensor.meta.shape
    key = pin_floats(key)
    if isinstance(key, TupleVariable):
        items = [_pinned(item) for item in key.items]
        for dim, item in enumerate(items):  # (the leading int indices, one dimension each)
            if dim >= len(shape) or type(item) is not ConstantVariable or type(item.value) is not int:
                break
            _check_in_range(item.value, shape[dim])
        if all(new is old for new, old in zip(items, key.items)):
            return key
        return TupleVariable(items, key.graph, DummyTracker(tuple(items)))
    size = shape[0] if shape else -1
    if isinstance(key, SymbolicIntVariable) and size >= 0 and key.known is not None and key.form is not None \
            and -size <= key.known < size:
        key.graph.add_symbolic_guard(key.render, f"{-size} <= {{}} < {size}", key)
        return key
    key = _pinned(key)
    if type(key) is ConstantVariable and type(key.value) is int and shape:
        _check_in_range(key.value, size)
    return key


def _pinned(item: VariableBase) -> VariableBase:
    if not isinstance(item, SymbolicIntVariable):
        return item
    return ConstantVariable(item.get_py_value(), item.graph, DummyTracker((item,)))


def _check_in_range(index: int, size: int) -> None:
    if size >= 0 and not -size <= index < size:
        raise BreakGraphError(f"index {index} is out of range for a dimension of size {size}: runs natively "
                              "(eager raises IndexError)")


_FLOATING = (paddle.float16, paddle.bfloat16, paddle.float32, paddle.float64)
# Operators eager Paddle computes, with a Python number operand, as ``scale(x, number, bias=0.0)``: the bias
# turns a -0.0 product into 0.0 (``-0.0 * 3`` is 0.0 there), which a product by a tensor does not.
_SCALING_OPERATORS = frozenset({operator.mul, operator.imul})


def eager_scaling(fn: Callable[..., Any], operands: list[VariableBase]) -> VariableBase | None:
    """``x * n`` (or ``n * x``) of a float32/float64 tensor and a symbolic number as eager computes it with a
    Python number: ``scale(x, n, bias=0.0)``, the number given as a 0-D tensor (cast to ``x``'s dtype). Not a
    product by a tensor: that one keeps ``x`` for its backward (an in-place change of ``x`` afterwards, e.g. an
    optimizer's step under no_grad, then made backward refuse where eager's scale, which keeps nothing, does
    not: fuzz seed 121378), and turns a -0.0 product into -0.0 where the bias gives 0.0. None for other
    operators and operands."""
    if fn not in _SCALING_OPERATORS or len(operands) != 2:
        return None
    tensors = [o for o in operands if isinstance(o, TensorVariable)]
    numbers = [o for o in operands if isinstance(o, SymbolicIntVariable)]
    if len(tensors) != 1 or len(numbers) != 1 or tensors[0].meta.dtype not in _FLOAT_OPERAND_DTYPES:
        return None
    tensor = tensors[0]
    scale = tensor_operand(tensor, numbers[0], fn)
    zero = ConstantVariable(0.0, tensor.graph, DummyTracker())
    return tensor.graph.call_tensor_op("api", "paddle.scale", paddle.scale, [tensor],
                                       {"scale": scale, "bias": zero})


# How eager Paddle computes a tensor operator with a Python number where a program replaying the operator on
# its values computes otherwise (measured on Paddle 3.3, bit for bit):
# * ``x ** c`` of a floating tensor: eager's ``pow`` takes the exponent as an op attribute, the program's
#   ``Value.__pow__`` an ``elementwise_pow`` by a filled tensor, another kernel (``x ** 3`` an ulp off in float32);
# * ``x + c``, ``x - c``, ``c - x``, ``x * c`` of a float64 tensor: eager keeps ``c`` a double, the program's
#   ``scale`` takes it as a float32 attribute (``x + math.pi`` 1e-7 off; ``x * 1e-300`` 0.0).
_POWER_OPERATORS = frozenset({operator.pow})


def eager_constant_operand(fn: Callable[..., Any], operands: list[VariableBase]) -> VariableBase | None:
    """``x ** c`` of a floating tensor as ``paddle.pow(x, c)`` (Paddle's static ``**`` of a number takes
    another path than eager's). None otherwise (the plain operator is eager's; a number reaching a float64
    tensor keeps its double in the program through `sir.eager_static_forms`)."""
    if fn not in _POWER_OPERATORS or len(operands) != 2:
        return None
    left, right = operands
    if type(left) is TensorVariable and isinstance(right, SymbolicIntVariable):
        # (a symbolic exponent pinned: as a tensor operand the static ``elementwise_pow`` is not eager's
        # ``pow`` kernel: ``(-2.0) ** 1e-300`` nan, an ulp off elsewhere)
        right = ConstantVariable(right.get_py_value(), right.graph, DummyTracker((right,)))
    if type(left) is not TensorVariable or type(right) is not ConstantVariable \
            or type(right.value) not in (int, float) or left.meta.dtype not in _FLOAT_OPERAND_DTYPES:
        return None
    right.graph.add_guard(right)
    return left.graph.call_tensor_op("api", "paddle.pow", paddle.pow, [left, right], {})


# Arithmetic operators for which eager Paddle makes a Python bool operand a 0-D bool tensor (then the
# elementwise op, with its dtype promotion and kernels), where a number would be a ``scale`` or a filled
# tensor of the other operand's dtype.
_BOOL_TENSOR_OPERATORS = frozenset({operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
                                    operator.mod, operator.pow, operator.iadd, operator.isub, operator.imul,
                                    operator.itruediv, operator.ifloordiv, operator.imod, operator.ipow})


def eager_bool_operand(fn: Callable[..., Any], operands: list[VariableBase]) -> VariableBase | None:
    """``x * True`` (``x - False``, ``True + x``...) of a tensor and a Python bool as eager computes it: with
    the bool as a 0-D bool tensor (measured on Paddle 3.3: the same values, dtypes and errors as eager with
    ``paddle.full([], b, 'bool')`` in its place). The program's operator took the bool as the number 0 or 1:
    ``x * False`` a ``scale`` giving 0.0 where eager gives -0.0 for a negative ``x`` (fuzz seed 200500),
    ``bool_tensor + True`` an int64 tensor where eager keeps bool, ``bool_tensor - True`` a result where eager
    raises. The bool is guarded. A numpy bool operand runs natively (eager raises TypeError). None for other
    operators and operands."""
    if fn not in _BOOL_TENSOR_OPERATORS or len(operands) != 2:
        return None
    if any(type(o) is ConstantVariable and type(o.value) is np.bool_ for o in operands) \
            and any(isinstance(o, TensorVariable) for o in operands):
        # (eager raises TypeError for a numpy bool operand; the program computed with it as a number)
        raise BreakGraphError(f"operator.{fn.__name__} of a tensor and a numpy bool: runs natively")
    flags = [o for o in operands if type(o) is ConstantVariable and type(o.value) is bool]
    if len(flags) != 1 or not any(isinstance(o, TensorVariable) for o in operands):
        return None
    flag = flags[0]
    graph = flag.graph
    if fn in _DIVISION_OPERATORS and flag is operands[0] and operands[1].meta.dtype == paddle.bool:
        # (eager's own path for ``True / bool_tensor`` raises another error than its division by a tensor)
        raise BreakGraphError("a Python bool divided by a bool tensor: runs natively")
    graph.add_guard(flag)
    from .basic import ObjectVariable

    filled = graph.call_tensor_op("api", "paddle.full", paddle.full,
                                  [ConstantVariable((), graph, DummyTracker()),
                                   ConstantVariable(bool(flag.value), graph, DummyTracker((flag,))),
                                   ObjectVariable(paddle.bool, graph, DummyTracker())], {})
    return graph.call_tensor_op("api", f"operator.{fn.__name__}", fn,
                                [filled if o is flag else o for o in operands], {})


_DIVISION_OPERATORS = frozenset({operator.truediv, operator.itruediv})


def eager_reflected_division(fn: Callable[..., Any], operands: list[VariableBase]) -> VariableBase | None:
    """``n / x`` of a symbolic number and a tensor as eager computes it with a Python number: the number
    filled to ``x``'s shape, then divided. Not a 0-D operand broadcast: Paddle's CPU divide takes another path
    for equal shapes, whose float32 quotient can be an ulp off the broadcast one (with AVX-512: one element in
    66 of ``(1/3) / x``). ``x / n`` needs nothing: eager divides by a 0-D tensor there. None for other
    operators and operands."""
    if fn not in _DIVISION_OPERATORS or len(operands) != 2:
        return None
    number, tensor = operands
    if not isinstance(number, SymbolicIntVariable) or not isinstance(tensor, TensorVariable):
        return None
    graph = tensor.graph
    operand = tensor_operand(tensor, number, fn)
    if isinstance(operand, TensorVariable):
        operand = graph.call_tensor_op("api", "paddle.expand_as", paddle.expand_as, [operand, tensor], {})
    return graph.call_tensor_op("api", f"operator.{fn.__name__}", fn, [operand, tensor], {})


def with_eager_scale_bias(fn: Callable[..., Any], operands: list[VariableBase], result: VariableBase) -> \
        VariableBase:
    """``result`` of ``fn`` on a tensor and a symbolic int (cast to a tensor by `tensor_operand`), made what
    eager computes with the int as a Python number: a floating product gets eager's ``+ 0.0``."""
    if fn not in _SCALING_OPERATORS or not any(isinstance(o, SymbolicIntVariable) for o in operands) \
            or not isinstance(result, TensorVariable) or result.meta.dtype not in _FLOATING:
        return result
    zero = ConstantVariable(0.0, result.graph, DummyTracker())
    return result.graph.call_tensor_op("api", "operator.add", operator.add, [result, zero], {})


_FLOOR_DIVISION_OPERATORS = frozenset({operator.floordiv, operator.ifloordiv})


def _fills_a_one_element_tensor(fn: Callable[..., Any], operands: list[VariableBase]) -> bool:
    """Whether eager Paddle makes the Python-number operand of ``fn`` a [1] tensor: any number of ``//``, a
    bool exponent of ``**`` (``t ** True``, and ``t **= True``, which is ``t ** True`` for a tensor without
    ``__ipow__``; ``True ** t`` and a number exponent keep a 0-D result)."""
    if fn in _FLOOR_DIVISION_OPERATORS:
        return True
    return fn in (operator.pow, operator.ipow) and len(operands) == 2 and type(operands[1]) is ConstantVariable \
        and type(operands[1].value) is bool


def with_eager_scalar_operand_shape(fn: Callable[..., Any], operands: list[VariableBase]) -> list[VariableBase]:
    """``operands`` of ``fn``, a 0-D tensor among them made a [1] tensor where eager Paddle fills the other, a
    Python number (or symbolic int), as a [1] tensor: ``t // 2`` (and ``2 // t``) of a 0-D ``t`` is a [1]
    tensor (``x.numel() // 2``), and so is ``t ** True``; the program's operator gave 0-D. Made on the operand,
    not on the result: the program and an eager replay of its statements (whose operator gives [1] already)
    then both give eager's [1] (an unsqueezed result was [1, 1] in a replay). Other operators keep 0-D."""
    if not _fills_a_one_element_tensor(fn, operands) or len(operands) != 2:
        return operands
    tensors = [i for i, operand in enumerate(operands) if isinstance(operand, TensorVariable)]
    if len(tensors) != 1 or len(operands[tensors[0]].meta.shape) != 0:
        return operands
    tensor = operands[tensors[0]]
    axis = ConstantVariable(0, tensor.graph, DummyTracker())
    made = list(operands)
    made[tensors[0]] = tensor.graph.call_tensor_op("api", "paddle.unsqueeze", paddle.unsqueeze, [tensor, axis], {})
    return made


# Floor divisions whose dtype a program does not take from eager: `eager_floor_division`.
_FLOOR_DIVISIONS = (operator.floordiv, paddle.floor_divide)
# An operand of one, for `_eager_floor_division_dtype`: ("tensor", dtype, rank) or ("number", int or float).
Operand = tuple


@functools.lru_cache(maxsize=256)
def _eager_floor_division_dtype(fn: Callable[..., Any], left: Operand, right: Operand) -> Any:
    """The dtype eager Paddle gives ``fn(left, right)``, asked of eager itself on one-element operands (None
    if it raises: the program's form is then left as it is)."""
    def stand_in(operand: Operand) -> Any:
        return paddle.ones([1] * operand[2], dtype=operand[1]) if operand[0] == "tensor" else operand[1](2)

    try:
        with paddle.no_grad():
            return fn(stand_in(left), stand_in(right)).dtype
    except Exception:  # noqa: BLE001 - eager refuses these operands: the program's op raises or answers alike
        return None


def eager_floor_division(fn: Callable[..., Any], operands: list[VariableBase]) -> VariableBase | None:
    """``t // s`` or ``paddle.floor_divide(t, s)`` in eager's dtype. Eager promotes a 0-D tensor operand of
    another dtype like any tensor (an int32 position id ``//`` an int64 0-D stride is int64), and
    ``paddle.floor_divide`` makes a Python number a tensor of the default dtype (int32 ``//`` 2 is int64);
    the program kept the dtype of the bigger operand. The tensors are cast to eager's dtype first, as eager
    computes in it. None when the program's dtype is eager's already (equal dtypes, the ``//`` operator with
    a number) or for other operands."""
    if fn not in _FLOOR_DIVISIONS or len(operands) != 2:
        return None
    described = []
    for operand in operands:
        if type(operand) is TensorVariable:
            described.append(("tensor", operand.meta.dtype, len(operand.meta.shape)))
        elif type(operand) is ConstantVariable and type(operand.value) in (int, float):
            described.append(("number", type(operand.value)))
        else:
            return None
    tensors = [d for d in described if d[0] == "tensor"]
    if not tensors or (len(tensors) == 2 and tensors[0][1] == tensors[1][1]) or \
            (len(tensors) == 1 and fn is operator.floordiv):
        return None
    dtype = _eager_floor_division_dtype(fn, *described)
    if dtype is None:
        return None
    graph = operands[0].graph
    cast = [graph.call_tensor_op("api", "paddle.cast", paddle.cast,
                                 [operand, ConstantVariable(dtype, graph, DummyTracker())], {})
            if type(operand) is TensorVariable and operand.meta.dtype != dtype else operand
            for operand in operands]
    name = "paddle.floor_divide" if fn is paddle.floor_divide else f"operator.{fn.__name__}"
    return graph.call_tensor_op("api", name, fn, cast, {})


class SymbolicSliceVariable(ConstantVariable):
    """``start:stop:step`` with a symbolic bound: passed to the program as a slice of its tensors
    (``x[:, :n]``); read as a Python slice (a list's ``items[:n]``) it pins the bounds."""

    def __init__(self, parts: list[VariableBase], graph: "FunctionGraph") -> None:
        VariableBase.__init__(self, graph, DummyTracker(tuple(parts)))
        self.parts = parts

    @property
    def value(self) -> slice:  # type: ignore[override]
        return self.get_py_value()

    def get_py_value(self) -> Any:
        return slice(*(part.get_py_value() for part in self.parts))

    def get_py_type(self) -> type:
        return slice

    def bool(self) -> bool:
        return True

    def children(self) -> list[VariableBase]:
        return list(self.parts)

    def make_guards(self, builder: "GuardBuilder", expr: str) -> list[str]:
        return []

    def _reconstruct_computed(self, codegen: "CodeGen") -> None:
        for part in self.parts:
            codegen.reconstruct(part)
        codegen.build("BUILD_SLICE", len(self.parts))

    def __repr__(self) -> str:
        return f"SymbolicSliceVariable({self.parts!r})"


class TensorBoundSliceVariable(SymbolicSliceVariable):
    """``start:stop:step`` with a bound that is a one-element integer tensor (``ids[:, :mask.sum(1).max()]``,
    trimming padding): a tensor's index takes it as it is (eager reads its value, the program slices by it),
    so the result's dimension is dynamic. Any other use needs the tensor's value as a Python int: the graph
    breaks there (a list sliced by it)."""

    def get_py_value(self) -> Any:
        raise BreakGraphError("a slice bounded by a tensor's value is used as a Python slice (not a tensor's "
                              "index): runs natively")

    def __repr__(self) -> str:
        return f"TensorBoundSliceVariable({self.parts!r})"


def is_slice_bound_tensor(var: VariableBase) -> bool:
    """An integer tensor of one element, which eager Paddle takes as a slice bound (its value)."""
    return isinstance(var, TensorVariable) and var.meta.dtype in _SLICE_BOUND_DTYPES \
        and tuple(var.meta.shape) in ((), (1,))


_SLICE_BOUND_DTYPES = frozenset({paddle.int32, paddle.int64})


# Calls that take a 0-D int tensor where the user passed an int, with the same meaning. Anywhere else a
# symbolic int passed directly as an argument is pinned: a tensor can mean something else there
# (``repeat_interleave(x, n)`` takes a tensor as per-element repeats). Inside a list or tuple (a shape:
# ``reshape([n, -1])``, ``full([n], v)``) and as a slice bound it stays symbolic.
TAKES_SCALAR_TENSORS: set[Any] = {operator.getitem, paddle.full, paddle.full_like, paddle.arange,
                                  paddle.to_tensor, paddle.linspace}


def pin_direct(args: list[VariableBase], kwargs: dict[str, VariableBase]) -> tuple[list, dict]:
    """``args``/``kwargs`` with the symbolic ints passed directly (not inside a shape) pinned."""
    def pin(var: VariableBase) -> VariableBase:
        return pin_all(var) if isinstance(var, SymbolicIntVariable) else var

    return [pin(a) for a in args], {k: pin(v) for k, v in kwargs.items()}


def pin_all(tree: Any) -> Any:
    """``tree`` (a variable, or a list/tuple/dict of them) with every symbolic int in it pinned."""
    from .container import DictVariable, SequenceVariable

    if isinstance(tree, (SymbolicIntVariable, SymbolicSliceVariable)):
        return ConstantVariable(tree.get_py_value(), tree.graph, DummyTracker((tree,)))
    if isinstance(tree, list):
        return [pin_all(item) for item in tree]
    if isinstance(tree, dict):
        return {key: pin_all(item) for key, item in tree.items()}
    if isinstance(tree, SequenceVariable) and contains_symbolic(tree):
        return type(tree)(pin_all(list(tree.items)), tree.graph, DummyTracker((tree,)))
    if isinstance(tree, DictVariable) and contains_symbolic(tree):
        return DictVariable(pin_all(dict(tree.items)), tree.graph, DummyTracker((tree,)))
    return tree


def contains_symbolic(tree: Any) -> bool:
    from .container import DictVariable, SequenceVariable

    if isinstance(tree, (SymbolicIntVariable, SymbolicSliceVariable)):
        return True
    if isinstance(tree, (list, tuple)):
        return any(contains_symbolic(item) for item in tree)
    if isinstance(tree, dict):
        return any(contains_symbolic(item) for item in tree.values())
    if isinstance(tree, SequenceVariable):
        return any(contains_symbolic(item) for item in tree.items)
    if isinstance(tree, DictVariable):
        return any(contains_symbolic(item) for item in tree.items.values())
    return False

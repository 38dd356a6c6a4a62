"""``collections.Counter`` on simulated dicts.

A Counter's methods and operators are Python functions of the standard library, which the simulation does not
enter (every call would break the graph). It is modelled here instead, as a `TypedDictVariable` of class
``Counter`` (guarded, rebuilt and written back like an ``OrderedDict``), with what Counter changes:

* a missing key reads 0 (``__missing__``, nothing stored) and deleting one is not an error (``__delitem__``);
* counting (``Counter(...)``, ``update``, ``subtract``) is simulated on the items, in the order the real
  methods visit them, the arithmetic on each count going through `apply_operator` (so a count may be any
  value the simulation handles);
* what reads every count at once (``most_common``, ``elements``, ``total``, the operators ``+ - & |``, unary
  ``+``/``-``, the comparisons, and the in-place ``+= -= &= |=``) runs the real Counter code on the counts'
  values (each count guarded), when they are Python constants; otherwise the graph breaks and the operation
  runs natively.
"""
from __future__ import annotations

import collections
import collections.abc
import itertools
import operator
from typing import TYPE_CHECKING, Any, Callable, Iterator

from ....errors import BreakGraphError, FallbackError
from ..tracker import DummyTracker, Tracker
from .base import VariableBase, VariableFactory
from .basic import ConstantVariable, ObjectVariable
from .callable import BUILTIN_DISPATCH, apply_operator
from .container import (OPERATOR_HOOKS, ContainerMethodVariable, DictVariable, TypedDictVariable, _constant_value,
                        _is_key_variable, _record_mutation, dict_key, key_variable)
from .iterator import IteratorVariable, iterate

if TYPE_CHECKING:
    from ..function_graph import FunctionGraph

Counter = collections.Counter
CounterMethod = Callable[["CounterVariable", list[VariableBase], dict[str, VariableBase]], VariableBase]


class CounterVariable(TypedDictVariable):
    """A ``collections.Counter`` (exactly that class) with constant keys."""

    def __init__(self, items: dict[Any, VariableBase], graph: "FunctionGraph", tracker: Tracker) -> None:
        super().__init__(items, graph, tracker, Counter)

    @classmethod
    def _empty_like(cls, value: dict, graph: "FunctionGraph", tracker: Tracker) -> "DictVariable":
        return cls({}, graph, tracker)

    def getitem(self, key: VariableBase) -> VariableBase:
        _check_key(key, "lookup")
        found = dict_key(key, "Counter lookup with")
        self.graph.add_guard(self)  # (its keys decide)
        if found not in self.items:  # __missing__: 0, and nothing is stored
            return ConstantVariable(0, self.graph, DummyTracker((self, key)))
        return super().getitem(key)

    def setitem(self, key: VariableBase, value: VariableBase | None) -> None:
        _check_key(key, "item store")
        if value is None:
            self.graph.add_guard(self)
            if dict_key(key) not in self.items:  # Counter.__delitem__ ignores a missing key
                return
        super().setitem(key, value)

    def getattr(self, name: str) -> VariableBase:
        if name in COUNTER_METHODS:
            return CounterMethodVariable(self, name)
        return super().getattr(name)

    def __repr__(self) -> str:
        return f"CounterVariable({self.items!r})"


class CounterMethodVariable(ContainerMethodVariable):
    """``counter.method`` for a method Counter defines in Python (the dict methods it inherits are dict's)."""

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        return COUNTER_METHODS[self.name](self.container, args, kwargs)


def _check_key(key: VariableBase, what: str) -> None:
    """A key that is not a constant (counting tensors or objects): the Counter's Python code runs natively."""
    if not _is_key_variable(key):
        raise BreakGraphError(f"a Counter {what} with a {type(key).__name__} key runs natively")


def _zero(graph: "FunctionGraph") -> VariableBase:
    return ConstantVariable(0, graph, DummyTracker())


def _none(graph: "FunctionGraph") -> VariableBase:
    return ConstantVariable(None, graph, DummyTracker())


# -- counting: Counter(...), update, subtract --------------------------------------------------------------
def _mapping_pairs(source: VariableBase) -> list[tuple[Any, VariableBase]] | None:
    """``source.items()`` when ``source`` is a mapping (Counter's ``isinstance(source, Mapping)``), else None
    (an iterable of elements)."""
    from .user_mapping import MappingInstanceVariable

    if isinstance(source, DictVariable):
        source.graph.add_guard(source)  # (every key is read)
        return list(source.items.items())
    if isinstance(source, MappingInstanceVariable):
        return list(source.mapping_items().items())
    if isinstance(source, ObjectVariable) and isinstance(source.value, collections.abc.Mapping):
        raise BreakGraphError(f"counting the items of a {type(source.value).__name__} runs natively")
    return None


def _check_positional(graph: "FunctionGraph", method: Callable[..., Any], args: list[VariableBase]) -> None:
    """More than one positional argument: the real method raises its TypeError."""
    if len(args) > 1:
        graph.run_user_python(method, [Counter(), *[None] * len(args)], {})


def _count(var: CounterVariable, args: list[VariableBase], kwargs: dict[str, VariableBase], subtract: bool,
           fresh: bool = False) -> None:
    """``var.update(*args, **kwargs)`` (``subtract``: ``var.subtract``) as Counter's Python code does it."""
    graph = var.graph
    items = var.items
    source = args[0] if args else None
    if isinstance(source, ConstantVariable) and source.value is None:
        source = None
    changed = False

    def change() -> None:
        nonlocal changed
        if not changed and not fresh:
            _record_mutation(var)
        changed = True

    def combine(key: Any, amount: VariableBase, amount_first: bool) -> None:
        """``self[key] = self.get(key, 0) -/+ amount`` (``amount + self.get(key, 0)`` when counting a mapping:
        the operands in the order of Counter's own code)."""
        current = items.get(key)
        current = current if current is not None else _zero(graph)
        change()
        if subtract:
            items[key] = apply_operator(graph, operator.sub, [current, amount])
        else:
            items[key] = apply_operator(graph, operator.add, [amount, current] if amount_first else [current, amount])

    for mapping_source in ([source] if source is not None else []) + ([kwargs] if kwargs else []):
        pairs = (list(mapping_source.items()) if isinstance(mapping_source, dict)
                 else _mapping_pairs(mapping_source))
        if pairs is None:  # an iterable of elements, each counted once as it comes (a generator may read var)
            one = ConstantVariable(1, graph, DummyTracker())
            elements = iterate(mapping_source)
            while (element := elements.next()) is not None:
                key = dict_key(element, "Counter element")
                graph.run_user_python(hash, [key], {})  # (an unhashable element: the eager TypeError)
                combine(key, one, amount_first=False)
            continue
        graph.add_guard(var)  # (whether it is empty, and its keys, decide)
        if not subtract and not items:  # the fast path of an empty Counter: dict.update
            if pairs:
                change()
                items.update(pairs)
            continue
        for key, amount in pairs:
            combine(key, amount, amount_first=True)


def _construct(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    """``Counter(iterable_or_mapping, **counts)``: an empty Counter updated from the arguments."""
    if len(args) > 1:
        graph.run_user_python(Counter, [None] * len(args), {})  # (the eager TypeError)
    var = CounterVariable({}, graph, DummyTracker(tuple(args) + tuple(kwargs.values())))
    try:
        _count(var, args, kwargs, subtract=False, fresh=True)
    except FallbackError as exc:  # (elements that are not constants: the Counter is made natively)
        raise BreakGraphError(f"creating a Counter runs natively: {exc}") from None
    return var


def _counting_method(subtract: bool) -> CounterMethod:
    def method(var: CounterVariable, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        _check_positional(var.graph, Counter.subtract if subtract else Counter.update, args)
        try:
            _count(var, args, kwargs, subtract)
        except FallbackError as exc:
            raise BreakGraphError(f"Counter.{'subtract' if subtract else 'update'} runs natively: {exc}") from None
        return _none(var.graph)

    return method


# -- what reads every count: run on the counts' values ---------------------------------------------------------
def _value_of(var: VariableBase, what: str) -> Any:
    """The Python value of an operand whose items are all constants (each guarded), else a graph break."""
    if isinstance(var, DictVariable):
        if not all(isinstance(item, ConstantVariable) for item in var.items.values()):
            raise BreakGraphError(f"{what} on counts that are not Python constants runs natively")
        return var.get_py_value()
    if isinstance(var, ConstantVariable):
        var.graph.add_guard(var)
        return var.value
    raise BreakGraphError(f"{what} with a {type(var).__name__} operand runs natively")


def _most_common(var: CounterVariable, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    graph = var.graph
    counts = _value_of(var, "Counter.most_common")
    named = {key: _value_of(value, "Counter.most_common") for key, value in kwargs.items()}
    result = graph.run_user_python(counts.most_common, [_value_of(a, "Counter.most_common") for a in args], named)
    return VariableFactory.from_value(result, graph, DummyTracker((var, *args)))


def _total(var: CounterVariable, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    counts = _value_of(var, "Counter.total")
    result = var.graph.run_user_python(counts.total, list(args), dict(kwargs))
    return ConstantVariable(result, var.graph, DummyTracker((var,)))


def _elements(var: CounterVariable, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    """A lazy iterator, as the real one (``chain.from_iterable(starmap(repeat, self.items()))``): each count
    is read when the iteration reaches its key."""
    graph = var.graph
    graph.run_user_python(Counter().elements, list(args), dict(kwargs))  # (arguments: the eager TypeError)
    _value_of(var, "Counter.elements")
    graph.add_guard(var)
    keys = list(var.items)

    def produce() -> Iterator[VariableBase]:
        for key in keys:
            count = var.items.get(key)
            if count is None:
                continue
            times = _constant_value(count, "Counter count")
            for _ in graph.run_user_python(itertools.repeat, [None, times], {}):
                yield key_variable(key, graph, DummyTracker((var,)))

    return IteratorVariable(produce(), graph, "Counter.elements", (Counter.elements, [var]))


def _copy(var: CounterVariable, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    var.graph.run_user_python(Counter().copy, list(args), dict(kwargs))  # (arguments: the eager TypeError)
    var.graph.add_guard(var)
    return CounterVariable(dict(var.items), var.graph, DummyTracker((var,)))


def _fromkeys(var: CounterVariable, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    var.graph.run_user_python(Counter.fromkeys, [None] * len(args), dict.fromkeys(kwargs))  # (it always raises)
    raise FallbackError("Counter.fromkeys() did not raise")


COUNTER_METHODS: dict[str, CounterMethod] = {
    "update": _counting_method(subtract=False), "subtract": _counting_method(subtract=True),
    "most_common": _most_common, "total": _total, "elements": _elements, "copy": _copy, "fromkeys": _fromkeys,
}

# The operators Counter defines (the in-place ones change the left operand; the others make a new value).
_IN_PLACE = frozenset({operator.iadd, operator.isub, operator.iand, operator.ior})
_FOLDED = frozenset({operator.add, operator.sub, operator.and_, operator.or_, operator.neg, operator.pos,
                     operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge})


def counter_operator(fn: Callable[..., Any], operands: list[VariableBase]) -> VariableBase | None:
    """An operator with a Counter operand, run by the real Counter code on the operands' values; None when no
    Counter takes part (or the operator is dict's own, such as ``in``)."""
    if not any(isinstance(o, CounterVariable) for o in operands):
        return None
    graph = operands[0].graph
    what = f"operator.{fn.__name__} of a Counter"
    if fn in _IN_PLACE and isinstance(operands[0], CounterVariable):
        target, other = operands
        counts = _value_of(target, what)
        other_value = counts if other is target else _value_of(other, what)
        graph.run_user_python(fn, [counts, other_value], {})  # (Counter's in-place operators return self)
        _record_mutation(target)
        target.items.clear()
        for key, count in counts.items():
            target.items[key] = ConstantVariable(count, graph, DummyTracker((target, other)))
        return target
    if fn in _FOLDED or fn in _IN_PLACE:  # (``d |= counter`` of another left operand: the real operator)
        values = [_value_of(o, what) for o in operands]
        result = graph.run_user_python(fn, values, {})
        return VariableFactory.from_value(result, graph, DummyTracker(tuple(operands)))
    return None


def _register() -> None:
    BUILTIN_DISPATCH[Counter] = _construct
    OPERATOR_HOOKS.append(counter_operator)


_register()

"""The ``itertools`` module on simulated iterables: each function becomes a lazy `IteratorVariable` that
steps its inputs when the real one would (``chain``, ``islice``, ``zip_longest``, ``accumulate``...), or,
like the real one, reads its inputs whole when it is created (``product``, ``combinations``,
``permutations``). Items keep their variables: tensors flow through unchanged.
"""
from __future__ import annotations

import itertools
import operator
from typing import TYPE_CHECKING, Any, Callable, Iterator

from ..tracker import DummyTracker
from .base import VariableBase
from .basic import ConstantVariable
from .callable import BUILTIN_DISPATCH, BuiltinRule, apply_operator
from .container import TupleVariable
from .iterator import IteratorVariable, iterate

if TYPE_CHECKING:
    from ..function_graph import FunctionGraph


def _constant(graph: "FunctionGraph", var: VariableBase | None, default: Any = None) -> Any:
    if var is None:
        return default
    graph.add_guard(var)
    return var.get_py_value()


def _tuple(graph: "FunctionGraph", items: list[VariableBase]) -> TupleVariable:
    return TupleVariable(list(items), graph, DummyTracker(tuple(items)))


def _lazy(graph: "FunctionGraph", name: str, produce: Iterator[VariableBase], args: list[VariableBase],
          kwargs: dict[str, VariableBase], fn: Callable[..., Any]) -> IteratorVariable:
    rebuild = None if kwargs else (fn, list(args))
    return IteratorVariable(produce, graph, f"itertools.{name}", rebuild)


def _check_call(graph: "FunctionGraph", fn: Callable[..., Any], args: list[VariableBase],
                kwargs: dict[str, VariableBase], allowed: set[str], min_args: int, max_args: int | None) -> None:
    """Misuse raises the eager TypeError (the real function is called on placeholders to produce it)."""
    if set(kwargs) - allowed or len(args) < min_args or (max_args is not None and len(args) > max_args):
        graph.run_user_python(fn, [()] * len(args), dict.fromkeys(kwargs))


def _chain(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    _check_call(graph, itertools.chain, args, kwargs, set(), 0, None)

    def produce() -> Iterator[VariableBase]:
        for arg in args:
            source = iterate(arg)
            while (item := source.next()) is not None:
                yield item

    return _lazy(graph, "chain", produce(), args, kwargs, itertools.chain)


def _chain_from_iterable(graph: "FunctionGraph", args: list[VariableBase],
                         kwargs: dict[str, VariableBase]) -> VariableBase:
    outer = iterate(args[0])

    def produce() -> Iterator[VariableBase]:
        while (inner := outer.next()) is not None:
            source = iterate(inner)
            while (item := source.next()) is not None:
                yield item

    return _lazy(graph, "chain.from_iterable", produce(), args, kwargs, itertools.chain.from_iterable)


def _islice(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    _check_call(graph, itertools.islice, args, kwargs, set(), 2, 4)
    bounds = [_constant(graph, arg) for arg in args[1:]]
    window = slice(*bounds)
    start, stop, step = window.start or 0, window.stop, window.step or 1
    graph.run_user_python(itertools.islice, [(), *bounds], {})  # invalid bounds: the eager ValueError
    source = iterate(args[0])

    def produce() -> Iterator[VariableBase]:
        index, wanted = 0, start
        while stop is None or wanted < stop:
            item = source.next()
            if item is None:
                return
            if index == wanted:
                yield item
                wanted += step
            index += 1

    return _lazy(graph, "islice", produce(), args, kwargs, itertools.islice)


def _zip_longest(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    _check_call(graph, itertools.zip_longest, args, kwargs, {"fillvalue"}, 0, None)
    fill = kwargs.get("fillvalue") or ConstantVariable(None, graph, DummyTracker())
    sources = [iterate(arg) for arg in args]

    def produce() -> Iterator[VariableBase]:
        if not sources:
            return
        active = [True] * len(sources)
        while True:
            row = []
            for i, source in enumerate(sources):
                item = source.next() if active[i] else None
                if item is None:
                    active[i] = False
                    item = fill
                row.append(item)
            if not any(active):
                return
            yield _tuple(graph, row)

    return _lazy(graph, "zip_longest", produce(), args, kwargs, itertools.zip_longest)


def _accumulate(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    _check_call(graph, itertools.accumulate, args, kwargs, {"initial", "func"}, 1, 2)
    source = iterate(args[0])
    func = args[1] if len(args) > 1 else kwargs.get("func")
    initial = kwargs.get("initial")
    if initial is not None and isinstance(initial, ConstantVariable) and initial.value is None:
        initial = None

    def combine(acc: VariableBase, item: VariableBase) -> VariableBase:
        if func is None or (isinstance(func, ConstantVariable) and func.value is None):
            return apply_operator(graph, operator.add, [acc, item])
        return func.call([acc, item], {})

    def produce() -> Iterator[VariableBase]:
        acc = initial
        if acc is not None:
            yield acc
        while (item := source.next()) is not None:
            acc = item if acc is None else combine(acc, item)
            yield acc

    return _lazy(graph, "accumulate", produce(), args, kwargs, itertools.accumulate)


def _pairwise(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    source = iterate(args[0])

    def produce() -> Iterator[VariableBase]:
        previous = source.next()
        while previous is not None and (item := source.next()) is not None:
            yield _tuple(graph, [previous, item])
            previous = item

    return _lazy(graph, "pairwise", produce(), args, kwargs, getattr(itertools, "pairwise", None))


def _starmap(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    _check_call(graph, itertools.starmap, args, kwargs, set(), 2, 2)
    fn, source = args[0], iterate(args[1])

    def produce() -> Iterator[VariableBase]:
        while (item := source.next()) is not None:
            yield fn.call(item.unpack(), {})

    return _lazy(graph, "starmap", produce(), args, kwargs, itertools.starmap)


def _while(take: bool) -> BuiltinRule:
    real = itertools.takewhile if take else itertools.dropwhile

    def rule(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        from .dunder import truth_value

        _check_call(graph, real, args, kwargs, set(), 2, 2)
        predicate, source = args[0], iterate(args[1])

        def produce() -> Iterator[VariableBase]:
            dropping = True
            while (item := source.next()) is not None:
                if take:
                    if not truth_value(predicate.call([item], {})):
                        return
                    yield item
                else:
                    if dropping and truth_value(predicate.call([item], {})):
                        continue
                    dropping = False
                    yield item

        return _lazy(graph, real.__name__, produce(), args, kwargs, real)

    return rule


def _compress(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    from .dunder import truth_value

    _check_call(graph, itertools.compress, args, kwargs, set(), 2, 2)
    data, selectors = iterate(args[0]), iterate(args[1])

    def produce() -> Iterator[VariableBase]:
        while (item := data.next()) is not None and (selector := selectors.next()) is not None:
            if truth_value(selector):
                yield item

    return _lazy(graph, "compress", produce(), args, kwargs, itertools.compress)


def _counting(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    _check_call(graph, itertools.count, args, kwargs, {"start", "step"}, 0, 2)
    start = _constant(graph, args[0] if args else kwargs.get("start"), 0)
    step = _constant(graph, args[1] if len(args) > 1 else kwargs.get("step"), 1)
    values = graph.run_user_python(itertools.count, [start, step], {})
    produce = (ConstantVariable(value, graph, DummyTracker()) for value in values)
    return _lazy(graph, "count", produce, args, kwargs, itertools.count)


def _repeat(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    _check_call(graph, itertools.repeat, args, kwargs, {"times"}, 1, 2)
    times = _constant(graph, args[1] if len(args) > 1 else kwargs.get("times"), None)
    value = args[0]
    produce = (value for _ in (itertools.repeat(None) if times is None else range(times)))
    return _lazy(graph, "repeat", produce, args, kwargs, itertools.repeat)


def _combinatoric(fn: Callable[..., Any]) -> BuiltinRule:
    """``product``/``combinations``/``permutations``/``combinations_with_replacement``: the real function
    run on the indexes of the inputs (read whole at creation, as the real one does), mapped back to items."""

    def rule(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        if fn is itertools.product:
            pools = [iterate(arg).unpack() for arg in args]
            repeat = _constant(graph, kwargs.get("repeat"), 1)
            if set(kwargs) - {"repeat"}:
                graph.run_user_python(fn, [], dict.fromkeys(kwargs))
            indexes = graph.run_user_python(fn, [range(len(pool)) for pool in pools], {"repeat": repeat})
            pools = pools * repeat if isinstance(repeat, int) else pools
            produce = (_tuple(graph, [pools[i][k] for i, k in enumerate(row)]) for row in indexes)
        else:
            if not args:
                graph.run_user_python(fn, [], dict.fromkeys(kwargs))
            pool = iterate(args[0]).unpack()
            rest = [_constant(graph, arg) for arg in args[1:]]
            named = {key: _constant(graph, value) for key, value in kwargs.items()}
            indexes = graph.run_user_python(fn, [range(len(pool)), *rest], named)
            produce = (_tuple(graph, [pool[k] for k in row]) for row in indexes)
        return IteratorVariable(produce, graph, f"itertools.{fn.__name__}")

    return rule


def _register() -> None:
    table: dict[Any, BuiltinRule] = {
        itertools.chain: _chain, itertools.chain.from_iterable: _chain_from_iterable, itertools.islice: _islice,
        itertools.zip_longest: _zip_longest, itertools.accumulate: _accumulate, itertools.starmap: _starmap,
        itertools.takewhile: _while(True), itertools.dropwhile: _while(False), itertools.compress: _compress,
        itertools.count: _counting, itertools.repeat: _repeat,
    }
    if hasattr(itertools, "pairwise"):
        table[itertools.pairwise] = _pairwise
    for fn in (itertools.product, itertools.combinations, itertools.permutations,
               itertools.combinations_with_replacement):
        table[fn] = _combinatoric(fn)
    BUILTIN_DISPATCH.update(table)


_register()

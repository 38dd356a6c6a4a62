"""Iterators: what ``GET_ITER``/``FOR_ITER`` and the iterating builtins work on.

An iterator produces variables one at a time, lazily, so ``map``/``filter`` call their function at the same
point of the program as the real interpreter would.
"""
from __future__ import annotations

from typing import Any, TYPE_CHECKING, Callable, Iterator

from ....errors import BreakGraphError, FallbackError, UserCodeError
from ..tracker import DummyTracker
from .base import VariableBase
from .basic import ConstantVariable, ObjectVariable, TensorVariable

if TYPE_CHECKING:
    from ..function_graph import FunctionGraph


class IteratorVariable(VariableBase):
    """A Python iterator simulated by a generator of variables."""

    def __init__(self, source: Iterator[VariableBase], graph: "FunctionGraph", description: str,
                 rebuild: tuple[Callable[..., Any], list[VariableBase]] | None = None) -> None:
        rebuilt_from = (*([rebuild[0]] if isinstance(rebuild[0], VariableBase) else []), *rebuild[1]) if rebuild else ()
        super().__init__(graph, DummyTracker(tuple(rebuilt_from)))
        self._source = source  # (a simulated generator's is also thrown into: `close_generator`)
        self._items = self._counting(source)
        self.taken = 0  # items produced so far (undone by a rollback): where an index-based one resumes
        self.exhausted = False
        self.description = description
        # How generated code makes the same iterator, valid while nothing was consumed from it:
        # ``fn(*args)`` (e.g. ``enumerate(ys)``; ``fn`` a variable: a generator function of the frame called
        # again), when a loop over it or a call consuming it runs natively.
        self.rebuild = rebuild
        self.consumed = False
        self.spent = False  # consumed by a simulation rolled back since (`_consume`)
        self.loop_offset: int | None = None  # the FOR_ITER of the translated frame stepping it, if any
        self.made_at = graph.side_effects.clock  # (container changes up to this tick came before it)
        # A generator function's: the executor of its frame, and the executor and instruction (its ``pc``)
        # whose call made it (`OpcodeExecutor.loop_generators`). ``closed``: dropped and closed; ``managed``:
        # a ``@contextmanager``'s, closed by its ``with`` statement.
        self.generator: Any = None
        self.made_by: tuple[Any, int] | None = None
        self.closed = False
        self.managed = False
        # ``enumerate``/``zip`` of lists, tuples or tensors: the ``iter()`` of each it made and steps (never seen
        # by the frame), remade at their index when this one, partly consumed, leaves the frame
        # (`_index_sources`); set by their builtin rules, None otherwise.
        self.stepped: list["IteratorVariable"] | None = None

    def _consume(self) -> None:
        """Items are taken from now on. Undone when the simulation rolls back to before the first (a graph
        break at a call that began iterating, e.g. 3.10/3.11's call of a comprehension's function with the
        iterator: that call runs natively, on the iterator made again); the simulated one is then spent."""
        if self.spent:
            raise FallbackError(f"an iterator ({self.description}) is read again after a graph break")
        if self.consumed:
            return
        self.consumed = True

        def undo() -> None:
            self.consumed = False
            self.spent = True

        self.graph.side_effects.on_rollback(undo)

    def _counting(self, source: Iterator[VariableBase]) -> Iterator[VariableBase]:
        """``source``, counting the items it produces into `taken` and noting its end, both undone by a
        rollback (to rebuild the iterator where the simulation left it at a graph break); its return value
        (a simulated generator's) passes through."""
        effects = self.graph.side_effects
        while True:
            try:
                item = next(source)
            except StopIteration as stop:
                if not self.exhausted:
                    self.exhausted = True
                    effects.on_rollback(lambda: setattr(self, "exhausted", False))
                return stop.value
            taken = self.taken
            self.taken = taken + 1
            effects.on_rollback(lambda: setattr(self, "taken", taken))
            yield item

    def next(self) -> VariableBase | None:
        """The next item, or None when exhausted."""
        self._consume()
        return next(self._items, None)

    def step(self) -> tuple[VariableBase | None, VariableBase | None]:
        """One step as ``yield from`` drives its delegate: ``(item, None)`` while it yields, then
        ``(None, returned)`` once exhausted, ``returned`` being a simulated generator's return value
        (None for other iterators: ``yield from`` a list evaluates to None)."""
        self._consume()
        try:
            return next(self._items), None
        except StopIteration as stop:
            returned = stop.value if isinstance(stop.value, VariableBase) else None
            return None, returned

    def unpack(self) -> list[VariableBase]:
        self._consume()
        return list(self._items)

    def take(self, count: int) -> list[VariableBase]:
        """At most ``count`` items, fewer once exhausted: what a consumer that stops early reads (unpacking
        ``a, b = gen()`` steps three times, as CPython does to tell "too many values"), leaving the rest of a
        generator (and the side effects producing it) unrun."""
        self._consume()
        items = []
        while len(items) < count and (item := next(self._items, None)) is not None:
            items.append(item)
        return items

    def children(self) -> list[VariableBase]:
        if not self.rebuild:
            return []
        fn, args = self.rebuild
        return [*([fn] if isinstance(fn, VariableBase) else []), *args]

    def rebuild_after_effects(self) -> bool:
        """Whether the generated code of a break must make this iterator again after the side effects are
        replayed (True) or before (False, with the other values read at the break).

        Iterators snapshot their container when made: ``reversed(lst)`` its length, ``iter(d)`` a dict's size
        (to raise on a change). Remade before the replay, an iterator over a container from outside that the
        frame changed first sees the old content (``lst.append(t); for e in reversed(lst)`` skipped ``t``);
        after it, one the frame made first then changed sees the new. So: changes only before it was made ->
        after the replay; only after -> before (the replay changes the real container under it as eager's
        changes did). Otherwise (a container made in the frame, rebuilt from its final items, changed after;
        changes on both sides) no point is right, unless iterators over plain lists are all it takes: a list
        iterator that has taken nothing sees whatever the list holds when stepped.
        A partly consumed one over a list, tuple or tensor (`_resumes_by_index`) is made after: its index
        counts the items of the content the simulation ended with, which the replay gives the container."""
        if self.consumed and (self._resumes_by_index() or self._index_sources() is not None):
            return True
        if self.rebuild is None or self.consumed:
            return False
        effects = self.graph.side_effects
        containers = self._containers()
        times = [t for c in containers for t in effects.changed_at.get(id(c), ())]
        before = any(t <= self.made_at for t in times)
        after = any(t > self.made_at for t in times)
        if not after:
            return before
        if self._steps_lists_only():
            return False
        if before or not all(c.tracker.is_traceable() for c in containers if effects.changed_at.get(id(c))):
            raise FallbackError(f"an iterator ({self.description}) over a container changed after it was made "
                                "cannot be made again at a graph break")
        return False

    def _containers(self) -> list[VariableBase]:
        """The variables (and their direct parts: a dict view's dict) this iterator's rebuild reads, through
        the iterators it wraps."""
        found: list[VariableBase] = []
        for arg in self.rebuild[1] if self.rebuild else ():
            if isinstance(arg, IteratorVariable):
                found += arg._containers()
            else:
                found += [arg, *arg.children()]
        return found

    def _steps_lists_only(self) -> bool:
        """``iter``/``enumerate``/``zip``/``map``/``filter`` over lists (or iterators of such): nothing snapshot."""
        from .container import ListVariable

        if self.rebuild is None or self.rebuild[0] not in (iter, enumerate, zip, map, filter):
            return False
        fn, args = self.rebuild
        iterated = args[1:] if fn in (map, filter) else args[:1] if fn is enumerate else args
        return all(a._steps_lists_only() if isinstance(a, IteratorVariable) else isinstance(a, ListVariable)
                   for a in iterated)

    def _resumes_by_index(self) -> bool:
        """``iter(x)`` of a list, tuple, tensor or range: CPython's iterator over it is an index into it, so a
        partly consumed one is remade as ``iter(x)`` with its index set (`runtime.iterator_at`)."""
        from .container import ListVariable, TupleVariable

        if self.rebuild is None or self.rebuild[0] is not iter or len(self.rebuild[1]) != 1:
            return False
        (iterated,) = self.rebuild[1]
        return (type(iterated) in (ListVariable, TupleVariable, TensorVariable)
                or type(iterated) is ConstantVariable and type(iterated.get_py_value()) is range)

    def _index_sources(self) -> list["IteratorVariable"] | None:
        """The ``iter()`` of lists, tuples or tensors an ``enumerate``/``zip`` steps (`stepped`), when all are
        (their own, not the frame's, and an ``enumerate``'s ``start`` an int): a partly consumed one is then
        remade over the sources, each at its own index (``zip`` may have taken one more item from the first
        ones than from the one that ended it, as CPython's), ``enumerate``'s count shifted by its items taken
        (`runtime.enumerate_at`, `runtime.zip_at`). None otherwise."""
        if self.stepped is None or self.rebuild is None or self.rebuild[0] not in (enumerate, zip):
            return None
        fn, args = self.rebuild
        if fn is enumerate and len(args) > 1 and type(args[1].get_py_value()) is not int:
            return None
        return self.stepped if all(s._resumes_by_index() for s in self.stepped) else None

    def _reconstruct_computed(self, codegen: Any) -> None:
        from ...runtime import enumerate_at, iterator_at, zip_at

        graph = self.graph

        def constant(value: Any) -> VariableBase:
            return ConstantVariable(value, graph, DummyTracker())

        if self.consumed and self._resumes_by_index():
            codegen.call_helper(iterator_at, [self.rebuild[1][0], constant(self.taken), constant(self.exhausted)])
            return
        sources = self._index_sources() if self.consumed else None
        if sources is not None:
            fn, args = self.rebuild
            positions = [arg for s in sources for arg in (s.rebuild[1][0], constant(s.taken), constant(s.exhausted))]
            if fn is enumerate:
                start = args[1].get_py_value() if len(args) > 1 else 0
                codegen.call_helper(enumerate_at, [*positions, constant(start + self.taken)])
            else:
                codegen.call_helper(zip_at, positions)
            return
        if self.rebuild is None or self.consumed:
            raise FallbackError(f"an iterator ({self.description}) cannot leave the translated frame yet")
        fn, args = self.rebuild
        if not isinstance(fn, VariableBase):
            codegen.call_helper(fn, args)
            return
        # (a generator function of the frame, called again: nothing of its body has run yet)
        codegen.push_callable(lambda: codegen.reconstruct(fn))
        for arg in args:
            codegen.reconstruct(arg)
        codegen.call(len(args))

    def __repr__(self) -> str:
        return f"IteratorVariable({self.description})"


def iterate(var: VariableBase) -> IteratorVariable:
    """``iter(var)``: sequences, dicts (keys), tensors (along the first axis) and iterators."""
    graph = var.graph
    if isinstance(var, IteratorVariable):
        return var
    if isinstance(var, TensorVariable):
        return IteratorVariable(lazy(var.unpack), graph, "tensor iterator", (iter, [var]))
    instance_iterator = getattr(var, "iterator", None)
    if instance_iterator is not None:
        made = instance_iterator()
        if made is not None:
            return made
    keys = getattr(var, "iter_items", None)
    if isinstance(var, ConstantVariable):  # ``iter(None)`` fails at once, not at the first ``next``
        var.check_iterable()
    if keys is not None:
        live = _live_steps(var)
        return IteratorVariable(live if live is not None else lazy(keys), graph,
                                f"iterator over {type(var).__name__}", (iter, [var]))
    if isinstance(var, ObjectVariable) and not isinstance(var.value, type):
        # A real object iterated by C or library code (an ``enumerate`` or generator object, a numpy array,
        # a file): its iteration runs natively (a ``for`` loop over it too: handlers/iteration.py).
        raise BreakGraphError(f"iterating over {type(var.value).__name__} objects runs natively")
    raise FallbackError(f"iterating over {var!r} is not supported yet")


def lazy(producer: Callable[[], list[VariableBase]]) -> Iterator[VariableBase]:
    """Defer reading the items (and guarding on them) until the first ``next``."""
    yield from producer()


def _live_steps(var: VariableBase) -> Iterator[VariableBase] | None:
    """The items of an iterator over a list, dict (or dict view) or set as CPython's iterators step them
    while the loop body changes the container: a list's by index (items appended during the loop are
    reached, removed ones shift the rest), a dict's or set's raising ``RuntimeError`` at the step after its
    size changed (a dict's values read at each step). None for other containers."""
    from .container import DictVariable, DictViewVariable, ListVariable, SetVariable

    effects = var.graph.side_effects
    if isinstance(var, ListVariable):
        return _list_steps(var, effects)
    if isinstance(var, (DictVariable, DictViewVariable)):
        mapping = var if isinstance(var, DictVariable) else var.mapping
        return _sized_steps(var, mapping, lambda: list(mapping.items), len(mapping.items),
                            "dictionary" if _iterates_as_dict(mapping) else None, effects)
    if isinstance(var, SetVariable):
        return _sized_steps(var, var, lambda: list(var.values), len(var.values), "Set", effects)
    return None


def reversed_live_steps(var: VariableBase) -> Iterator[VariableBase] | None:
    """``reversed(var)`` stepped as CPython's reverse iterators step a list (by a falling index: an item
    appended is not reached, one removed may end it) or a dict (raising at the step after its size changed);
    None for other values."""
    from .container import DictVariable, DictViewVariable, ListVariable

    effects = var.graph.side_effects
    if isinstance(var, ListVariable):
        def steps() -> Iterator[VariableBase]:
            index = start
            while True:
                items = var.iter_items()
                if not 0 <= index < len(items):
                    return
                yield items[index]
                index -= 1

        start = len(var.items) - 1
        return steps()
    if isinstance(var, (DictVariable, DictViewVariable)):
        mapping = var if isinstance(var, DictVariable) else var.mapping
        return _sized_steps(var, mapping, lambda: list(mapping.items), len(mapping.items),
                            "dictionary" if _iterates_as_dict(mapping) else None, effects, backwards=True)
    return None


def _iterates_as_dict(mapping: VariableBase) -> bool:
    """Whether the mapping's iteration is ``dict``'s (an ``OrderedDict`` has its own, which reacts otherwise to
    a change during the loop)."""
    try:
        cls = mapping.get_py_type()
    except Exception:  # noqa: BLE001 - (unknown: treated as another iteration)
        return False
    return getattr(cls, "__iter__", None) is dict.__iter__


def _version(container: VariableBase, effects: Any) -> int:
    """How many changes of ``container`` the simulation has recorded (`SideEffects.mutate`)."""
    return len(effects.changed_at.get(id(container), ()))


def _list_steps(var: VariableBase, effects: Any) -> Iterator[VariableBase]:
    index, items, seen = 0, None, -1
    while True:
        if items is None or _version(var, effects) != seen:  # (read again only after a change)
            seen, items = _version(var, effects), var.iter_items()
        if index >= len(items):
            return  # (exhausted for good, as CPython's list iterator: a later append is not reached)
        yield items[index]
        index += 1


def _sized_steps(var: VariableBase, container: VariableBase, keys_of: Callable[[], list], size: int,
                 what: str | None, effects: Any, backwards: bool = False) -> Iterator[VariableBase]:
    """``size``: the container's when the iterator was made, as CPython's iterator remembers it. ``what``:
    the container's name in the RuntimeError; None for a mapping whose own iteration reacts otherwise to a
    change (the frame runs eagerly then)."""
    first_keys = None
    index, items, seen = 0, None, -1
    while True:
        if items is None or _version(container, effects) != seen:
            keys = keys_of()
            if what is None and (len(keys) != size or first_keys is not None and
                                 any(a is not b and a != b for a, b in zip(keys, first_keys))):
                raise FallbackError(f"a {type(container).__name__} changed during its iteration")
            if len(keys) != size:
                error = RuntimeError(f"{what} changed size during iteration")
                raise UserCodeError(f"user code raised RuntimeError: {error}", original=error)
            if first_keys is None:
                first_keys = keys
            elif any(a is not b and a != b for a, b in zip(keys, first_keys)):
                # (as many keys, not the same ones: what CPython does then depends on its table's layout)
                raise FallbackError(f"the keys of a {what.lower()} changed during its iteration")
            seen, items = _version(container, effects), var.iter_items()
            if backwards:
                items = items[::-1]
        if index >= len(items):
            return
        yield items[index]
        index += 1

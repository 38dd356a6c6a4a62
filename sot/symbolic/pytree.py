"""Tiny helpers over nested tuples/lists/dicts, the shapes SIR arguments and outputs come in.

A slice is a node too (its bounds may be symbols: ``x[:, :n]`` with a symbolic ``n``), and so is a named tuple
(``paddle.topk`` returns a ``TopKRetType``), rebuilt as its own class."""
from __future__ import annotations

from typing import Any, Callable, Iterator


def is_namedtuple(tree: Any) -> bool:
    """An instance of a ``collections.namedtuple``/``typing.NamedTuple`` class."""
    return isinstance(tree, tuple) and is_namedtuple_class(type(tree))


def is_namedtuple_class(cls: type) -> bool:
    """A ``collections.namedtuple``/``typing.NamedTuple`` class (or a subclass of one)."""
    return issubclass(cls, tuple) and cls is not tuple and hasattr(cls, "_fields") and hasattr(cls, "_make")


def plain(tree: Any) -> Any:
    """``tree`` with every named tuple replaced by a plain tuple of the same items (a SIR pattern)."""
    return map_structure(lambda leaf: leaf, tree, keep_namedtuples=False)


def map_structure(fn: Callable[[Any], Any], tree: Any, keep_namedtuples: bool = True) -> Any:
    """Apply ``fn`` to every leaf, keeping tuples, lists, dicts and named tuples (and their types) as they are
    (``keep_namedtuples=False``: a named tuple becomes a plain tuple)."""
    if type(tree) in (tuple, list):
        return type(tree)(map_structure(fn, item, keep_namedtuples) for item in tree)
    if is_namedtuple(tree):
        items = [map_structure(fn, item, keep_namedtuples) for item in tree]
        return type(tree)._make(items) if keep_namedtuples else tuple(items)
    if type(tree) is dict:
        return {key: map_structure(fn, value, keep_namedtuples) for key, value in tree.items()}
    if type(tree) is slice:
        return slice(*(map_structure(fn, part, keep_namedtuples) for part in (tree.start, tree.stop, tree.step)))
    return fn(tree)


def leaves(tree: Any) -> Iterator[Any]:
    """Every leaf of ``tree``, depth first."""
    if type(tree) in (tuple, list) or is_namedtuple(tree):
        for item in tree:
            yield from leaves(item)
    elif type(tree) is dict:
        for value in tree.values():
            yield from leaves(value)
    elif type(tree) is slice:
        yield from leaves((tree.start, tree.stop, tree.step))
    else:
        yield tree

"""Tiny helpers over nested tuples/lists/dicts, the shapes SIR arguments and outputs come in.

A slice is a node too (its bounds may be symbols: ``x[:, :n]`` with a symbolic ``n``)."""
from __future__ import annotations

from typing import Any, Callable, Iterator


def map_structure(fn: Callable[[Any], Any], tree: Any) -> Any:
    """Apply ``fn`` to every leaf, keeping tuples, lists and dicts (and their types) as they are."""
    if type(tree) in (tuple, list):
        return type(tree)(map_structure(fn, item) for item in tree)
    if type(tree) is dict:
        return {key: map_structure(fn, value) for key, value in tree.items()}
    if type(tree) is slice:
        return slice(map_structure(fn, tree.start), map_structure(fn, tree.stop), map_structure(fn, tree.step))
    return fn(tree)


def leaves(tree: Any) -> Iterator[Any]:
    """Every leaf of ``tree``, depth first."""
    if type(tree) in (tuple, list):
        for item in tree:
            yield from leaves(item)
    elif type(tree) is dict:
        for value in tree.values():
            yield from leaves(value)
    elif type(tree) is slice:
        yield from leaves((tree.start, tree.stop, tree.step))
    else:
        yield tree

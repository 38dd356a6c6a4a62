"""Warnings raised while sot builds programs are dropped, without Python forgetting which warnings it showed.

Building a program runs Paddle's static-mode code, which warns of things eager code never does (static values
without a place, deprecated static APIs): not the user's warnings. ``warnings.catch_warnings()`` with
``simplefilter("ignore")`` drops them, but both change the filters' version, and a module's
``__warningregistry__`` of another version is cleared at its next warning: a library warning the default
filter had shown once (BatchNorm's "When training, we now always track global mean and variance") was shown
again after every translation. An "ignore" filter put first in the list itself, and taken out after, drops the
same warnings and leaves the version (and every registry) alone: an ignored warning is not recorded either.
"""
from __future__ import annotations

import contextlib
import dataclasses
import sys
import warnings
from typing import Any, Iterator


@contextlib.contextmanager
def _first_filter(action: str) -> Iterator[None]:
    """A filter of ``action`` for every warning is put first in the list for the block, then taken out by
    identity (not by restoring a saved list: the filters' version, and so every registry, stays as it was)."""
    entry = (action, None, Warning, None, 0)  # (a tuple of its own: taken out by identity)
    filters = warnings.filters
    filters.insert(0, entry)
    try:
        yield
    finally:
        for index, item in enumerate(filters):
            if item is entry:
                del filters[index]
                break


@contextlib.contextmanager
def build_warnings_ignored() -> Iterator[None]:
    """Warnings raised inside the block are dropped (in every thread, as ``catch_warnings`` does)."""
    with _first_filter("ignore"):
        yield


@dataclasses.dataclass(frozen=True)
class LayerWarning:
    """A warning a built-in layer's own ``forward`` issued while its statement was built: issued again after
    each compiled run (`issue`), where eager's forward issues it at every call."""

    message: Any  # the Warning instance (or text)
    category: type
    filename: str
    lineno: int
    module: str  # the module whose ``__warningregistry__`` eager's ``warnings.warn`` uses

    def issue(self) -> None:
        module = sys.modules.get(self.module)
        globals_ = vars(module) if module is not None else {}
        warnings.warn_explicit(self.message, self.category, self.filename, self.lineno, module=self.module,
                               registry=globals_.setdefault("__warningregistry__", {}), module_globals=globals_)


@contextlib.contextmanager
def layer_warnings_recorded(modules: dict[str, str], into: list[LayerWarning]) -> Iterator[None]:
    """Inside `build_warnings_ignored`: the warnings issued from the files of ``modules`` (filename -> module
    name: the built-in layers' own code) are recorded into ``into``; the others are dropped as before.

    A warning eager's filters already showed at that place (in its module's registry) is skipped by Python
    before any filter, as it would be eagerly: nothing to issue again."""
    shown = warnings._showwarnmsg  # type: ignore[attr-defined]

    def record(message: Any) -> None:
        module = modules.get(message.filename)
        if module is not None:
            into.append(LayerWarning(message.message, message.category, message.filename, message.lineno, module))

    with _first_filter("always"):
        warnings._showwarnmsg = record  # type: ignore[attr-defined]
        try:
            yield
        finally:
            warnings._showwarnmsg = shown  # type: ignore[attr-defined]

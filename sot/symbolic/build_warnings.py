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
import warnings
from typing import Iterator


@contextlib.contextmanager
def build_warnings_ignored() -> Iterator[None]:
    """Warnings raised inside the block are dropped (in every thread, as ``catch_warnings`` does)."""
    ignore_all = ("ignore", None, Warning, None, 0)  # (a tuple of its own: taken out by identity)
    filters = warnings.filters
    filters.insert(0, ignore_all)
    try:
        yield
    finally:
        for index, item in enumerate(filters):
            if item is ignore_all:
                del filters[index]
                break

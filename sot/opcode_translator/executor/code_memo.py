"""Results computed once per code object and forgotten with it.

Analyses of a code object (its decoded instructions, liveness, block stacks) are asked for many times in one
translation (an inlined function met at every call site, a frame broken at several places). A cache keyed
by the code itself (``functools.lru_cache``) would keep up to its size of code objects alive, and a function
made at run time (``exec``, a generated method) with them; here the code is held by weak reference and its
entry dropped when it dies, so an id is never taken for a dead code's.
"""
from __future__ import annotations

import functools
import types
import weakref
from typing import Callable, Generic, TypeVar

T = TypeVar("T")


class PerCode(Generic[T]):
    """``function(code)``, computed once per live code object (``memo``: code id -> (weak ref, result))."""

    def __init__(self, function: Callable[[types.CodeType], T]) -> None:
        functools.update_wrapper(self, function)
        self.function = function
        self.memo: dict[int, tuple[weakref.ref, T]] = {}

    def __call__(self, code: types.CodeType) -> T:
        key = id(code)
        known = self.memo.get(key)
        if known is not None and known[0]() is code:
            return known[1]
        result = self.function(code)
        memo = self.memo
        memo[key] = (weakref.ref(code, lambda _, key=key: memo.pop(key, None)), result)
        return result


def per_code(function: Callable[[types.CodeType], T]) -> PerCode[T]:
    """Decorator: `PerCode`."""
    return PerCode(function)

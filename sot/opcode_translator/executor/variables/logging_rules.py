"""Calls of the standard ``logging`` module inside translated code (``log.debug("x=%s", x)`` in a forward).

``logging`` is library code: not inlined, so each call was a graph break (two for the usual
``if log.isEnabledFor(DEBUG): log.debug(...)``). Most of them do nothing: a logger whose level (or
``disabled`` flag, or ``logging.disable()``) filters the message out only asks ``isEnabledFor(level)`` and
returns. That question is answered during simulation and guarded, re-asked at every call
(``isEnabledFor`` reads the logger's cache): while the answer stays False the call is skipped, with no
break; when the logger would emit, the call runs natively (one break) as before.

Only the methods of ``logging.Logger`` itself (not a subclass overriding ``isEnabledFor``) are answered,
and the module-level functions (``logging.debug``...) while the root logger has handlers (without them,
they call ``basicConfig()`` first: a side effect).
"""
from __future__ import annotations

import functools
import inspect
import logging
from typing import TYPE_CHECKING, Any, Callable

from ..tracker import DummyTracker
from .base import VariableBase
from .basic import ConstantVariable, ObjectVariable

if TYPE_CHECKING:
    from ..guard import GuardBuilder
    from .function import FunctionVariableBase

# Logger methods that log at a fixed level: they call ``self.isEnabledFor(level)`` and nothing else when it
# is False. (``log`` takes the level as its first argument; ``exception``/``warn``/``fatal`` go through
# other methods, or warn: left native.)
_FIXED_LEVEL_METHODS: dict[str, int] = {"debug": logging.DEBUG, "info": logging.INFO,
                                        "warning": logging.WARNING, "error": logging.ERROR,
                                        "critical": logging.CRITICAL}


def _logger_methods() -> dict[Any, tuple[Callable[..., Any], str]]:
    """code object -> (the function, what it is)."""
    table: dict[Any, tuple[Callable[..., Any], str]] = {}
    for name in (*_FIXED_LEVEL_METHODS, "log", "isEnabledFor", "getEffectiveLevel"):
        function = getattr(logging.Logger, name)
        table[function.__code__] = (function, name)
    return table


def _module_functions() -> dict[Any, tuple[Callable[..., Any], str]]:
    table: dict[Any, tuple[Callable[..., Any], str]] = {}
    for name in (*_FIXED_LEVEL_METHODS, "log"):
        function = getattr(logging, name)
        table[function.__code__] = (function, name)
    return table


_LOGGER_METHODS = _logger_methods()
_MODULE_FUNCTIONS = _module_functions()


def _binds(function: Callable[..., Any], args: list[VariableBase], kwargs: dict[str, VariableBase]) -> bool:
    """The call binds to ``function``'s parameters (else the native call raises the eager TypeError)."""
    try:
        inspect.signature(function).bind(*args, **kwargs)
    except TypeError:
        return False
    return True


def _level_of(name: str, args: list[VariableBase]) -> int | None:
    """The level a call logs at, when known during simulation (``log``'s first argument a guarded int)."""
    if name in _FIXED_LEVEL_METHODS:
        return _FIXED_LEVEL_METHODS[name]
    level = args[0] if args else None
    if isinstance(level, ConstantVariable) and type(level.value) is int:
        level.graph.add_guard(level)
        return level.value
    return None


def _plain_logger(var: VariableBase) -> bool:
    """A logger whose ``isEnabledFor`` is Logger's own, reached by a path the guard can re-ask it through."""
    if not isinstance(var, ObjectVariable) or not isinstance(var.value, logging.Logger):
        return False
    return (inspect.getattr_static(type(var.value), "isEnabledFor", None) is logging.Logger.isEnabledFor
            and var.tracker.is_traceable())


def _guard_answer(var: ObjectVariable, question: str, answer: Any) -> None:
    """Guard that ``Logger.<question>`` of the logger at ``var``'s path still gives ``answer``."""
    method = getattr(logging.Logger, question.split("(")[0])
    call_args = question[question.index("(") + 1:-1]

    def render(builder: "GuardBuilder", expr: str) -> str:
        arguments = f"{expr}, {call_args}" if call_args else expr
        return f"{builder.constant(method)}({arguments}) == {answer!r}"

    var.graph.add_guard(var)
    var.graph.add_rendered_guard(var, render)


def _root_call_is_silent(level: int) -> bool:
    """What ``logging.<level function>(...)`` does nothing for: the root logger has handlers (no
    ``basicConfig()``) and filters the level out."""
    return len(logging.root.handlers) != 0 and not logging.root.isEnabledFor(level)


def logging_call(function: "FunctionVariableBase", args: list[VariableBase],
                 kwargs: dict[str, VariableBase]) -> VariableBase | None:
    """The result of a call of a ``logging`` function answered during simulation, or None (it runs natively)."""
    code = getattr(function, "code", None)
    graph = function.graph
    none = ConstantVariable(None, graph, DummyTracker())
    if code in _LOGGER_METHODS:
        real, name = _LOGGER_METHODS[code]
        if not args or not _plain_logger(args[0]) or not _binds(real, args, kwargs):
            return None
        logger_var, rest = args[0], args[1:]
        logger = logger_var.value  # type: ignore[attr-defined]
        if name == "getEffectiveLevel":
            level = logger.getEffectiveLevel()
            _guard_answer(logger_var, "getEffectiveLevel()", level)  # type: ignore[arg-type]
            return ConstantVariable(level, graph, DummyTracker((logger_var,)))
        level = _level_of("log" if name == "isEnabledFor" else name, rest)
        if level is None:
            return None
        enabled = logger.isEnabledFor(level)
        _guard_answer(logger_var, f"isEnabledFor({level!r})", enabled)  # type: ignore[arg-type]
        if name == "isEnabledFor":
            return ConstantVariable(enabled, graph, DummyTracker((logger_var,)))
        return None if enabled else none
    if code in _MODULE_FUNCTIONS:
        real, name = _MODULE_FUNCTIONS[code]
        if not _binds(real, args, kwargs):
            return None
        level = _level_of(name, args)
        if level is None:
            return None
        silent = _root_call_is_silent(level)
        graph.add_query_guard(functools.partial(_root_call_is_silent, level), silent)
        return none if silent else None
    return None


def _register() -> None:
    from .library_rules import LIBRARY_RULES

    for code in (*_LOGGER_METHODS, *_MODULE_FUNCTIONS):
        LIBRARY_RULES[code] = logging_call


_register()

"""``warnings.warn`` simulated: the warning is issued after the graph, as the frame's call would issue it.

Library code warns on ordinary paths: Paddle's batch norm layers call ``warnings.warn`` at every forward in
training mode. Run natively, such a call is a graph break; in a loop over layers it split every layer's graph
and, since the layer's forward then became a ``layer`` statement guarded by identity, translated the loop body
once per layer.

A warning changes nothing the frame can see (unless the filters turn it into an exception), so it is recorded
as a side effect: ``warnings.warn_explicit`` replayed with the stores after the graph, with what ``warn`` would
have found in the calling frame at ``stacklevel`` (its file, line, module name and ``__warningregistry__``).
``warn_explicit`` then applies the filters, the registry ("default" and "once" show a warning once per place)
and ``showwarning`` exactly as the eager call does; only the moment differs: after the graph's ops instead of
between them, which nothing but a user ``showwarning`` reading tensors could tell.

The one action that is not a mere side effect is ``"error"``: the warning is raised there, before the ops that
follow (a batch norm's update of its statistics). The filters are therefore read at translation: a warning they
make an error runs natively (a graph break, eager's exception), and the translation is guarded by the filters
it read (a copy of ``warnings.filters`` and ``warnings.defaultaction``: equal filters, the same decision; a
``catch_warnings`` block that makes an equal copy still hits).
"""
from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from ....errors import BreakGraphError
from ..tracker import DummyTracker
from .base import VariableBase
from .basic import ConstantVariable, ObjectVariable
from .symbolic_int import SymbolicIntVariable
from .callable import builtin_rule

if TYPE_CHECKING:
    from ..function_graph import FunctionGraph

_PARAMETERS = ("message", "category", "stacklevel", "source")  # positional or keyword
_KEYWORD_ONLY = ("skip_file_prefixes",)  # (3.12+)


def warning_filters() -> tuple:
    """The warnings filters and the action of a warning none matches, now: what a simulated ``warn`` is
    guarded by."""
    return tuple(warnings.filters), warnings.defaultaction


class WarningReplay:
    """``warnings.warn_explicit`` of one call site: called with the message after the graph."""

    def __init__(self, category: type, filename: str, lineno: int, module: str, module_globals: dict) -> None:
        self.category = category
        self.filename = filename
        self.lineno = lineno
        self.module = module
        self.module_globals = module_globals

    def __call__(self, message: str) -> None:
        # (the registry as ``warn`` finds it: the calling module's, made when missing)
        registry = self.module_globals.setdefault("__warningregistry__", {})
        warnings.warn_explicit(message, self.category, self.filename, self.lineno, self.module, registry)

    def __repr__(self) -> str:
        return f"<warning {self.category.__name__} at {self.filename}:{self.lineno}>"


def _matches(pattern: Any, text: str) -> bool:
    """A filter's message or module pattern: None matches anything, a string only itself, a regex by
    ``match`` (as the interpreter's filters are checked)."""
    if pattern is None:
        return True
    if isinstance(pattern, str):
        return pattern == text
    return bool(pattern.match(text))


def filter_action(text: str, category: type, module: str, lineno: int) -> str:
    """The action of the first filter matching the warning (``warnings.defaultaction`` when none does)."""
    for action, message, cls, module_pattern, line in warnings.filters:
        if _matches(message, text) and issubclass(category, cls) and _matches(module_pattern, module) \
                and (line == 0 or line == lineno):
            return action
    return warnings.defaultaction


def _bind(args: list[VariableBase], kwargs: dict[str, VariableBase]) -> dict[str, Any] | None:
    """The arguments of the call as plain values, or None when they are not all known constants (or do not
    fit ``warn``'s signature: eager raises the TypeError)."""
    if len(args) > len(_PARAMETERS):
        return None
    bound: dict[str, VariableBase] = dict(zip(_PARAMETERS, args))
    for name, var in kwargs.items():
        if name in bound or name not in _PARAMETERS + _KEYWORD_ONLY:
            return None
        bound[name] = var
    if "message" not in bound:
        return None
    values = {}
    for name, var in bound.items():
        if isinstance(var, ConstantVariable) and not isinstance(var, SymbolicIntVariable):
            values[name] = var.value
        elif name == "category" and isinstance(var, ObjectVariable) and isinstance(var.value, type):
            values[name] = var.value
        else:
            return None
    return values


@builtin_rule(warnings.warn)
def _warn(graph: "FunctionGraph", args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
    values = _bind(args, kwargs)
    message = None if values is None else values["message"]
    category = None if values is None else values.get("category") or UserWarning
    stacklevel = None if values is None else values.get("stacklevel", 1)
    if values is None or type(message) is not str or not isinstance(category, type) \
            or not issubclass(category, Warning) or type(stacklevel) is not int \
            or values.get("source") is not None or values.get("skip_file_prefixes"):
        raise BreakGraphError("warnings.warn() with these arguments runs natively")
    # The frame ``warn`` attributes the warning to: the caller, or ``stacklevel - 1`` frames above it.
    executor = graph.current_executor
    for _ in range(max(stacklevel, 1) - 1):
        executor = executor.parent
        if executor is None:
            raise BreakGraphError("warnings.warn() attributing the warning to a frame above the translated one "
                                  "runs natively")
    module_globals = executor.resolver.globals
    module = module_globals.get("__name__")
    module = module if isinstance(module, str) else "<string>"
    lineno = executor.lineno or executor.code.co_firstlineno
    for var in [*args, *kwargs.values()]:
        graph.add_guard(var)
    graph.add_query_guard(warning_filters, warning_filters())
    if filter_action(message, category, module, lineno) == "error":
        raise BreakGraphError(f"warnings.warn() of a warning the filters make an error ({category.__name__}) "
                              "runs natively")
    replay = WarningReplay(category, executor.code.co_filename, lineno, module, module_globals)
    message_var = args[0] if args else kwargs["message"]
    graph.side_effects.call_after_graph(replay, [message_var])
    return ConstantVariable(None, graph, DummyTracker())


__all__ = ["WarningReplay", "filter_action", "warning_filters"]

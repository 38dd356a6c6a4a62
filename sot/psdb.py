"""`sot.psdb`: helpers users put in their code to steer or inspect the translation.

Run eagerly they are (almost) no-ops; during simulation the executor recognises them (`SIMULATED`) and acts
on the simulation itself.
"""
from __future__ import annotations

import pdb
import sys
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from .errors import BreakGraphError, FallbackError

if TYPE_CHECKING:
    from .opcode_translator.executor.function_graph import FunctionGraph
    from .opcode_translator.executor.variables.base import VariableBase

F = TypeVar("F", bound=Callable[..., Any])


def breakgraph() -> None:
    """Force a graph break at this point."""


def fallback(recursive: bool = False) -> None:
    """Run the calling frame eagerly; with ``recursive=True`` the functions it calls too (none of them is
    translated while it runs)."""


def in_sot() -> bool:
    """True while the code is being simulated, False when it runs eagerly."""
    return False


def assert_true(cond: Any) -> None:
    """An assertion checked during simulation (and eagerly)."""
    assert cond


def breakpoint() -> None:
    """Stop the simulation in a debugger with the simulated stack and locals visible."""


def _code_of(fn: Any) -> Any:
    """The code object checked for ``fn``: a function's, a method's, or a Layer's ``forward`` (what translating
    the layer translates), also through a `symbolic_translate` result."""
    import paddle

    fn = getattr(fn, "__sot_translated__", fn)
    if isinstance(fn, paddle.nn.Layer):
        fn = type(fn).forward
    fn = getattr(fn, "__func__", fn)
    code = getattr(fn, "__code__", None)
    if code is None:
        raise TypeError(f"expected a Python function, got {type(fn).__name__} object {fn!r:.80}")
    return code


def check_no_breakgraph(fn: F) -> F:
    """Decorator: translating ``fn`` raises `BreakGraphCheckError` if a graph break happens inside it."""
    from .opcode_translator.callback import no_breakgraph_codes

    no_breakgraph_codes.add(_code_of(fn))
    return fn


def check_no_fallback(fn: F) -> F:
    """Decorator: translating ``fn`` raises `UnsupportedError` if it falls back to eager."""
    from .opcode_translator.callback import no_fallback_codes

    no_fallback_codes.add(_code_of(fn))
    return fn


# -- what the executor does when it meets each helper -------------------------------------------------------
def _sim_breakgraph(graph: "FunctionGraph", args: list["VariableBase"], kwargs: dict) -> "VariableBase":
    raise BreakGraphError("psdb.breakgraph() was called", graph.location)


def _sim_fallback(graph: "FunctionGraph", args: list["VariableBase"], kwargs: dict) -> "VariableBase":
    recursive_arg = args[0] if args else kwargs.get("recursive")
    recursive = bool(recursive_arg.get_py_value()) if recursive_arg is not None else False
    if recursive_arg is not None:
        graph.add_guard(recursive_arg)  # (the entry's hook-free run depends on it)
    reason = f"psdb.fallback({'recursive=True' if recursive else ''}) was called"
    executor = graph.current_executor
    if executor.parent is not None:
        # Called in a function inlined into the frame: that function's frame is the one to run eagerly, not
        # the caller's. A break at the call (reported at the call's line) runs it natively, and its own
        # translation then falls back here.
        while executor.parent is not None:
            executor = executor.parent
        raise BreakGraphError(f"{reason} in {graph.current_executor.code.co_name}()", executor.location())
    failure = FallbackError(reason, graph.location)
    if recursive:
        # the functions this frame calls run eagerly too (the fallback entry runs with the callback suspended)
        failure.recursive_code = graph.current_executor.code
    raise failure


def _none(graph: "FunctionGraph") -> "VariableBase":
    from .opcode_translator.executor.tracker import DummyTracker
    from .opcode_translator.executor.variables.basic import ConstantVariable

    return ConstantVariable(None, graph, DummyTracker())


def _sim_in_sot(graph: "FunctionGraph", args: list["VariableBase"], kwargs: dict) -> "VariableBase":
    from .opcode_translator.executor.tracker import DummyTracker
    from .opcode_translator.executor.variables.basic import ConstantVariable

    return ConstantVariable(True, graph, DummyTracker())


def _sim_assert_true(graph: "FunctionGraph", args: list["VariableBase"], kwargs: dict) -> "VariableBase":
    (cond,) = args
    truth = cond.bool()
    graph.add_guard(cond)
    if not truth:
        raise FallbackError("psdb.assert_true failed during simulation (eager run raises AssertionError)",
                            graph.location)
    return _none(graph)


def _sim_breakpoint(graph: "FunctionGraph", args: list["VariableBase"], kwargs: dict) -> "VariableBase":
    executor = graph.current_executor
    simulated_locals = dict(executor.locals)
    simulated_stack = list(executor.stack)
    print(f"sot.psdb.breakpoint at {graph.location}: inspect `simulated_locals`, `simulated_stack`, "
          "`graph` (the SIR so far: graph.statements)", file=sys.stderr)
    pdb.Pdb().set_trace(sys._getframe())
    del simulated_locals, simulated_stack
    return _none(graph)


SIMULATED: dict[Callable[..., Any], Callable[["FunctionGraph", list, dict], "VariableBase"]] = {
    breakgraph: _sim_breakgraph,
    fallback: _sim_fallback,
    in_sot: _sim_in_sot,
    assert_true: _sim_assert_true,
    breakpoint: _sim_breakpoint,
}

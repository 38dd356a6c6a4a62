"""Eager replay of a SIR as generated straight-line Python.

A graph that runs eagerly (too small to compile, or measured faster eagerly than compiled by the cost model in
`compile.py`) is called on every cache hit, so the price of interpreting it matters: `run_sir` walks each
statement's argument structure and dispatches through `call_statement`, a few microseconds per statement,
which on a 70-statement GPT block costs more than the kernels. Here the SIR becomes the Python function a
person would write for it, compiled once:

    def replay_sir_3(inputs):
        v0, v1 = inputs
        v2 = k0(v0, k1, axis=k2)                  # api / layer / pylayer / call
        v3 = v2.reshape([v1, k3])                 # method
        del v2                                    # not used after this statement
        with no_grad():
            v4, v5, *_ = k4(v3)                   # statement recorded under paddle.no_grad() (a SIR entered
                                                  # without grad: ``with enable_grad():`` around the others)
        with amp(k5):
            v6 = k6(v4)                           # statement recorded in an ``auto_cast`` block
        v7 = k7(v6, k8)                           # out-of-place form of ``v6.add_(...)`` (v6 made in the frame)
        k9(v7, 1)                                 # ... with the inplace version eager's tensor has now
        return [v5, v7]

Constants (callables, layers, dtypes, Python values) are referenced by name from the function's globals, so
they keep their identity; tuples, lists and dicts in arguments are rebuilt on each call exactly as `run_sir`
rebuilds them (a callee that mutates an argument list cannot leak into the next call).

With mixed precision on around the call (statements carry their own AMP state, applied where it differs from
the ambient one), the SIR is interpreted by `run_sir` instead.

A statement that raises is re-raised through a frame carrying the statement's user ``file:line`` (as
`run_sir(located=True)` does), without running anything twice.
"""
from __future__ import annotations

import itertools
import keyword
import re
import types
from typing import Any, Callable

import paddle

from .pytree import is_namedtuple
from .amp import ambient_amp_enabled, amp_applied
from .sir import (Statement, StatementIR, Symbol, _call_located, _located_caller, match_inplace_version,
                  run_sir)
from .version_check import ReplayWatch

Replay = Callable[[list], list]
_counter = itertools.count()


class _ReplaySource:
    """Builds the source text of one replay function and the namespace its constants live in."""

    def __init__(self, sir: StatementIR) -> None:
        self.sir = sir
        self.namespace: dict[str, Any] = {"no_grad": paddle.no_grad, "enable_grad": paddle.enable_grad,
                                          "amp": amp_applied}
        self._constant_names: dict[int, str] = {}
        self._local_names: dict[Symbol, str] = {}
        # Line number in the generated source -> the statement on it (for locating exceptions).
        self.statement_at_line: dict[int, Statement] = {}

    def constant(self, value: Any) -> str:
        name = self._constant_names.get(id(value))
        if name is None:
            name = f"k{len(self._constant_names)}"
            self._constant_names[id(value)] = name
            self.namespace[name] = value
        return name

    def local(self, symbol: Symbol) -> str:
        name = self._local_names.get(symbol)
        if name is None:
            name = f"v{len(self._local_names)}"
            self._local_names[symbol] = name
        return name

    def expression(self, value: Any) -> str:
        """Source that rebuilds ``value`` (the same structure walk as `map_structure`)."""
        if isinstance(value, Symbol):
            return self.local(value)
        if type(value) is tuple:
            inner = "".join(f"{self.expression(item)}, " for item in value)
            return f"({inner})"
        if is_namedtuple(value):  # (``_make`` as `map_structure` rebuilds it: no custom ``__new__`` runs)
            inner = "".join(f"{self.expression(item)}, " for item in value)
            return f"{self.constant(type(value))}._make(({inner}))"
        if type(value) is list:
            return "[" + ", ".join(self.expression(item) for item in value) + "]"
        if type(value) is dict:
            items = ", ".join(f"{self.constant(key)}: {self.expression(item)}" for key, item in value.items())
            return "{" + items + "}"
        if type(value) is slice:  # (its bounds may be symbols: ``x[:, :n]`` with a symbolic ``n``)
            parts = ", ".join(self.expression(part) for part in (value.start, value.stop, value.step))
            return f"{self.constant(slice)}({parts})"
        return self.constant(value)

    def target(self, pattern: Any) -> str:
        """An assignment target binding the Symbols of an output pattern (other leaves are discarded)."""
        if isinstance(pattern, Symbol):
            return self.local(pattern)
        if type(pattern) in (tuple, list):
            # ``*_`` tolerates a longer result, as the zip of `bind_outputs` does.
            return "(" + "".join(f"{self.target(item)}, " for item in pattern) + "*_)"
        return "_"

    def call(self, stmt: Statement) -> str:
        args = [self.expression(arg) for arg in stmt.args]
        for key, value in stmt.kwargs.items():
            if key.isidentifier() and not keyword.iskeyword(key):
                args.append(f"{key}={self.expression(value)}")
            else:
                args.append(f"**{{{self.constant(key)}: {self.expression(value)}}}")
        if stmt.kind == "method":
            if not (stmt.target.isidentifier() and not keyword.iskeyword(stmt.target)):
                raise ValueError(f"not a method name: {stmt.target!r}")
            return f"{args[0]}.{stmt.target}({', '.join(args[1:])})"
        return f"{self.constant(stmt.target)}({', '.join(args)})"

    def _dead_after(self) -> list[list[Symbol]]:
        """For each statement, the symbols not needed after it (neither read later nor returned)."""
        last_use: dict[Symbol, int] = {symbol: -1 for symbol in self.sir.inputs}
        for index, stmt in enumerate(self.sir.statements):
            for symbol in stmt.inputs() + stmt.output_symbols():
                last_use[symbol] = index
        kept = set(self.sir.outputs)
        dead: list[list[Symbol]] = [[] for _ in self.sir.statements]
        for symbol, index in last_use.items():
            if symbol not in kept and index >= 0:
                dead[index].append(symbol)
        return dead

    def source(self, function_name: str) -> str:
        lines = [f"def {function_name}(inputs):"]
        inputs = "".join(f"{self.local(symbol)}, " for symbol in self.sir.inputs)
        lines.append(f"    ({inputs}) = inputs")
        dead_after = self._dead_after()
        for index, stmt in enumerate(self.sir.statements):
            assignment = f"{self.target(stmt.outputs)} = {self.call(stmt)}"
            managers = ([f"amp({self.constant(stmt.amp)})"] if stmt.amp.enabled else []) + (
                ["no_grad()"] if stmt.no_grad else [] if self.sir.grad_enabled else ["enable_grad()"])
            if managers:
                lines.append(f"    with {', '.join(managers)}:")
                lines.append(f"        {assignment}")
            else:
                lines.append(f"    {assignment}")
            self.statement_at_line[len(lines)] = stmt
            if stmt.inplace_version:
                lines.append(f"    {self.constant(match_inplace_version)}({self.local(stmt.outputs)}, "
                             f"{stmt.inplace_version})")
            if dead_after[index]:
                # Free intermediates as the original code would (a rebound name drops its tensor), so the
                # allocator can reuse their memory.
                lines.append(f"    del {', '.join(self.local(symbol) for symbol in dead_after[index])}")
        outputs = ", ".join(self.local(symbol) for symbol in self.sir.outputs)
        lines.append(f"    return [{outputs}]")
        return "\n".join(lines) + "\n"


def compile_replay(sir: StatementIR) -> Replay:
    """A function running ``sir``'s statements eagerly on a list of input tensors, returning its outputs."""
    builder = _ReplaySource(sir)
    function_name = "replay_" + re.sub(r"\W", "_", sir.name)  # a code name may be ``<lambda>``
    filename = f"<sot replay of {sir.name} #{next(_counter)}>"
    code = compile(builder.source(function_name), filename, "exec")
    exec(code, builder.namespace)
    replay: types.FunctionType = builder.namespace[function_name]
    from ..opcode_translator.skip_files import skip_code  # sot's own code: never translated

    skip_code(replay.__code__)
    statement_at_line = builder.statement_at_line
    watch = ReplayWatch(sir)

    def run_unwatched(inputs: list) -> list:
        if ambient_amp_enabled():
            return run_sir(sir, inputs, located=True)
        try:
            return replay(inputs)
        except Exception as exc:
            _raise_at_user_line(exc, replay.__code__, statement_at_line, sir.name)
            raise

    def run_watched(inputs: list) -> list:
        outputs = run_unwatched(inputs)
        watch(inputs, outputs)
        return outputs

    # (run on every call of an eager graph: the watch's call only where it watches something)
    run = run_watched if watch.watches else run_unwatched

    run.__qualname__ = run.__name__ = function_name
    skip_code(run_unwatched.__code__)
    skip_code(run_watched.__code__)
    return run


def _raise_at_user_line(exc: BaseException, code: types.CodeType, statement_at_line: dict[int, Statement],
                        sir_name: str) -> None:
    """Re-raise ``exc`` through a frame showing the failing statement's user line, when it is known."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code is not code:
        tb = tb.tb_next
    if tb is None:
        return
    stmt = statement_at_line.get(tb.tb_lineno)
    if stmt is None:
        return
    try:
        if stmt.frames:  # the whole simulated call chain: the translated frame and each inlined call
            _call_located(stmt.frames, _reraise, (exc, tb.tb_next))
        elif stmt.location is not None and stmt.location.lineno:
            caller = _located_caller(stmt.location.filename, stmt.location.lineno, stmt.function or sir_name)
            caller(_reraise, (exc, tb.tb_next), {})
    finally:
        del exc, tb  # no cycle through this frame


def _reraise(exc: BaseException, tb: types.TracebackType | None) -> None:
    raise exc.with_traceback(tb)


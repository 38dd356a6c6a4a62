"""One translation: simulate a frame, compile its SIR, and generate the code that replaces it."""
from __future__ import annotations

import dataclasses
import types
from typing import Any

from ..config import config
from ..errors import BreakGraphError, FallbackError
from ..log import enabled, log
from ..symbolic.compile import CompiledProgram, compile_sir
from ..symbolic.sir import StatementIR, Symbol
from .codegen import CodeGen
from .executor.function_graph import FrameInfo, FunctionGraph
from .executor.guard import Guard
from .executor.opcode_executor import OpcodeExecutor
from .executor.variables.base import VariableBase
from .executor.variables.basic import TensorVariable
from .executor.variables.container import DictVariable, SequenceVariable


@dataclasses.dataclass
class Translation:
    """The outcome for one frame: the cache entry to add and what led to it."""

    code: types.CodeType
    guard: Guard
    kind: str  # "compiled", "eager" (graph too small or empty), "fallback"
    sir: StatementIR | None = None
    program: CompiledProgram | None = None
    failure: FallbackError | None = None

    @property
    def is_break(self) -> bool:
        return isinstance(self.failure, BreakGraphError)


def _computed_tensors(var: VariableBase, found: dict[Symbol, TensorVariable]) -> None:
    """Tensors produced by the graph that the return value needs, in first-use order."""
    if isinstance(var, TensorVariable):
        if not var.tracker.is_traceable():
            found.setdefault(var.symbol, var)
    elif isinstance(var, SequenceVariable) and not var.tracker.is_traceable():
        for item in var.items:
            _computed_tensors(item, found)
    elif isinstance(var, DictVariable) and not var.tracker.is_traceable():
        for item in var.items.values():
            _computed_tensors(item, found)


def translate_frame(frame: FrameInfo) -> Translation:
    """Simulate ``frame``; never raises for unsupported code (the result is then a fallback entry)."""
    code = frame.code
    graph = FunctionGraph(frame, code.co_name)
    executor = OpcodeExecutor.for_frame(frame, graph)
    try:
        result = executor.run()
        outputs = {}
        _computed_tensors(result, outputs)
        sir = graph.build_sir(list(outputs))
        if not sir.statements or not sir.outputs or len(sir.statements) < config.min_graph_size:
            # Nothing worth a compiled program: the original code runs natively, under the same guards.
            log(2, f"{code.co_name}: {len(sir.statements)} ops (< min_graph_size={config.min_graph_size}), "
                   "runs eagerly")
            return Translation(code, graph.build_guard(), "eager", sir=sir)
        program = compile_sir(sir)
        codegen = CodeGen(code, executor.lineno)
        codegen.call_program(program, [graph.inputs[s] for s in sir.inputs], sir.outputs)
        result.reconstruct(codegen)
        codegen.return_value()
        new_code = codegen.to_code()
    except FallbackError as exc:
        return Translation(code, graph.build_guard(), "fallback", failure=exc)
    except Exception as exc:  # a bug of ours must not break user code: fall back, loudly in strict mode
        if config.strict_mode:
            raise
        failure = FallbackError(f"internal error: {type(exc).__name__}: {exc}", graph.location)
        return Translation(code, graph.build_guard(), "fallback", failure=failure)
    if enabled(2):
        log(2, f"SIR of {code.co_name} ({code.co_filename}:{code.co_firstlineno}):\n{sir.dump()}")
    if enabled(3):
        import dis
        import io

        original, translated = io.StringIO(), io.StringIO()
        dis.dis(code, file=original)
        dis.dis(new_code, file=translated)
        log(3, f"original bytecode of {code.co_name}:\n{original.getvalue()}")
        log(3, f"translated bytecode of {code.co_name}:\n{translated.getvalue()}")
    return Translation(new_code, graph.build_guard(), "compiled", sir=sir, program=program)


def describe_code(code: types.CodeType) -> str:
    return f"{code.co_qualname if hasattr(code, 'co_qualname') else code.co_name} " \
           f"({code.co_filename}:{code.co_firstlineno})"


__all__ = ["Translation", "translate_frame", "describe_code", "Any"]

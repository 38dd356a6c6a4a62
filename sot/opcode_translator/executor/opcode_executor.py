"""`OpcodeExecutor`: runs a frame's bytecode symbolically, one handler per opcode.

Handlers live in `handlers/`, grouped by family, and register themselves in `OPCODE_HANDLERS`. An opcode
without a handler makes the frame fall back, naming the opcode and the user line.
"""
from __future__ import annotations

import dis
from typing import Any, Callable

from ...errors import FallbackError, SourceLocation
from .function_graph import FrameInfo, FunctionGraph
from .guard import argument_names
from .tracker import LocalTracker
from .variables.base import VariableBase, VariableFactory

Handler = Callable[["OpcodeExecutor", dis.Instruction], "Any"]
OPCODE_HANDLERS: dict[str, Handler] = {}


def handles(*opnames: str) -> Callable[[Handler], Handler]:
    """Register ``fn`` as the handler of ``opnames``."""

    def decorate(fn: Handler) -> Handler:
        for name in opnames:
            if name in OPCODE_HANDLERS:
                raise RuntimeError(f"two handlers for {name}")
            OPCODE_HANDLERS[name] = fn
        return fn

    return decorate


class Return:
    """What a handler returns to end the simulation with a value."""

    def __init__(self, value: VariableBase) -> None:
        self.value = value


class OpcodeExecutor:
    """The simulated state of one frame: stack, locals, cells, program counter."""

    def __init__(self, frame: FrameInfo, graph: FunctionGraph) -> None:
        self.frame = frame
        self.code = frame.code
        self.graph = graph
        graph.executor = self
        self.instructions = list(dis.get_instructions(frame.code))
        self._index_of_offset = {instr.offset: i for i, instr in enumerate(self.instructions)}
        self.stack: list[VariableBase] = []
        self.locals: dict[str, VariableBase] = {}
        self.cells: dict[str, VariableBase | None] = {}
        self.kw_names: tuple[str, ...] = ()
        self.pc = 0
        self.lineno: int | None = frame.code.co_firstlineno
        for name, value in zip(argument_names(frame.code), frame.args):
            self.locals[name] = VariableFactory.from_value(value, graph, LocalTracker(name))

    # -- stack helpers -----------------------------------------------------------------------------------
    def push(self, var: VariableBase) -> None:
        self.stack.append(var)

    def pop(self) -> VariableBase:
        return self.stack.pop()

    def pop_n(self, n: int) -> list[VariableBase]:
        if n == 0:
            return []
        values = self.stack[-n:]
        del self.stack[-n:]
        return values

    def peek(self, depth: int = 1) -> VariableBase:
        return self.stack[-depth]

    def jump_to(self, offset: int) -> None:
        self.pc = self._index_of_offset[offset]

    def location(self) -> SourceLocation:
        return SourceLocation(self.code.co_filename, self.lineno)

    # -- main loop ---------------------------------------------------------------------------------------
    def run(self) -> VariableBase:
        """Simulate until ``RETURN_VALUE``; returns the returned variable."""
        while True:
            instr = self.instructions[self.pc]
            self.pc += 1
            if instr.positions is not None and instr.positions.lineno is not None:
                self.lineno = instr.positions.lineno
            self.graph.location = self.location()
            handler = OPCODE_HANDLERS.get(instr.opname)
            if handler is None:
                raise FallbackError(f"opcode {instr.opname} is not supported yet", self.location())
            try:
                result = handler(self, instr)
            except FallbackError as exc:
                if exc.location is None:
                    exc.location = self.location()
                raise
            if isinstance(result, Return):
                return result.value


def _register_all_handlers() -> None:
    from .handlers import calls, containers, control_flow, load_store, operators, stack  # noqa: F401


_register_all_handlers()

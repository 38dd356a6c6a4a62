"""Generate the translated code object with the `bytecode` package.

The generated code keeps the original's signature, free variables and cell prologue (the hook copies the
arguments into it by name and its ``COPY_FREE_VARS`` reads the original function's closure). Its body
loads the graph inputs, calls the compiled program and rebuilds the return value. Line numbers point at
the user's return line so tracebacks read naturally.

Instruction spellings that differ between Python versions come from `pyversion` (calls, NULLs, closures).
"""
from __future__ import annotations

import dis
import inspect
import types
from typing import Any

import bytecode
from bytecode import Bytecode, CellVar, FreeVar, Instr, Label

from ..errors import FallbackError
from ..symbolic.sir import Symbol
from . import pyversion

_PROLOGUE_OPS = (*pyversion.PROLOGUE_OPNAMES, "NOP")
OUTPUTS_LOCAL = "__sot_outputs"
VIEWS_LOCAL = "__sot_views"


def _prologue_arg(instr: dis.Instruction) -> Any:
    """The `bytecode` argument of a prologue instruction (``COPY_FREE_VARS n``, ``MAKE_CELL name``,
    ``RESUME n``, ``NOP``)."""
    if instr.opname == "MAKE_CELL":
        return CellVar(instr.argval)
    return bytecode.UNSET if instr.arg is None else instr.arg


class CodeGen:
    """Accumulates instructions for a new code object modelled on ``original``."""

    def __init__(self, original: types.CodeType, lineno: int | None = None) -> None:
        self.original = original
        self.lineno = lineno or original.co_firstlineno
        self.instructions: list[Any] = []
        self.output_index: dict[Symbol, int] = {}
        self.view_index: dict[Symbol, int] = {}  # graph results made again natively as views (`call_view_replay`)
        # Mutable containers built by the generated code, stored once so aliases stay one object.
        self._built: dict[int, str] = {}
        # ... and those variables, kept alive: a key is an id(), which a dead variable would hand to a new one
        self._built_vars: list[Any] = []
        self._temps = 0
        self._program_failure: Label | None = None  # the handler of a failing compiled program
        # True when the code being generated ends the frame (its return): simulated values are final, so
        # closures made in the frame can be rebuilt with new cells holding them (nothing later writes them).
        self.final = False
        # (read with `dis`, not `Bytecode.from_code`: converting the whole original costs ~1 ms per 100
        # instructions, on every translation, for the few instructions of its prologue)
        for instr in dis.get_instructions(original):
            if instr.opname not in _PROLOGUE_OPS:
                break
            self.instructions.append(Instr(instr.opname, _prologue_arg(instr), lineno=original.co_firstlineno))
        # An argument that is also a cell: its value at the frame's start (what `load_fast` means) is kept
        # apart, since the generated code gives the cell its simulated content before a graph break.
        from .executor.guard import argument_names

        self._argument_copies: dict[str, str] = {}
        for name in argument_names(original):
            if name in original.co_cellvars:
                copy = f"__sot_arg_{name}"
                self.instructions += [Instr("LOAD_DEREF", CellVar(name), lineno=original.co_firstlineno),
                                      Instr("STORE_FAST", copy, lineno=original.co_firstlineno)]
                self._argument_copies[name] = copy

    # -- primitive emitters ------------------------------------------------------------------------------
    def emit(self, name: str, arg: Any = bytecode.UNSET) -> None:
        self.instructions.append(Instr(name, arg, lineno=self.lineno))

    def load_fast(self, name: str) -> None:
        """The value of argument ``name`` at the frame's start."""
        if name in self._argument_copies:
            self.emit("LOAD_FAST", self._argument_copies[name])
        elif name in self.original.co_cellvars:
            self.emit("LOAD_DEREF", CellVar(name))
        else:
            self.emit("LOAD_FAST", name)

    def store_fast(self, name: str) -> None:
        self.emit("STORE_FAST", name)

    def load_const(self, value: Any) -> None:
        self.emit("LOAD_CONST", value)

    def load_global(self, name: str) -> None:
        self.emit("LOAD_GLOBAL", pyversion.load_global_arg(name))

    def load_deref(self, name: str) -> None:
        self.emit("LOAD_DEREF", FreeVar(name) if name in self.original.co_freevars else CellVar(name))

    def load_attr(self, name: str) -> None:
        self.emit("LOAD_ATTR", pyversion.load_attr_arg(name))

    def binary_subscr(self) -> None:
        self.emit("BINARY_SUBSCR")

    def build(self, op: str, count: int) -> None:
        self.emit(op, count)

    def push_null(self) -> None:
        """Push a NULL exactly where the simulated stack had one (a pending method call's marker)."""
        pyversion.emit_push_null(self.emit)

    def push_callable(self, push: Any) -> None:
        """Push a callable for `call`: ``push()`` emits the callable, the NULL a call needs is added around
        it as the running version wants it."""
        pyversion.emit_callable(self.emit, push)

    def load_callable_const(self, value: Any) -> None:
        """`push_callable` of a constant (a compiled program, a helper function, a type)."""
        self.push_callable(lambda: self.load_const(value))

    def call(self, argc: int, kw_names: tuple[str, ...] = ()) -> None:
        """Call the callable pushed by `push_callable` with the ``argc`` arguments above it (the last
        ``len(kw_names)`` of them by keyword)."""
        pyversion.emit_call(self.emit, argc, kw_names)

    def return_value(self) -> None:
        self.emit("RETURN_VALUE")

    def new_temp(self) -> str:
        self._temps += 1
        return f"__sot_tmp_{self._temps}"

    def reconstruct(self, var: Any) -> None:
        """Push ``var``; a computed list/dict/object is built once and reused, keeping aliasing exact."""
        name = self._built.get(id(var))
        if name is not None:
            self.emit("LOAD_FAST", name)
            return
        var.reconstruct(self)
        if not var.tracker.is_traceable() and getattr(var, "is_mutable_container", False):
            name = self.new_temp()
            pyversion.emit_dup_top(self.emit)
            self.store_fast(name)
            self._built[id(var)] = name
            self._built_vars.append(var)

    def spill(self, var: Any) -> None:
        """Evaluate ``var`` now into a temporary; later reconstructions read the temporary."""
        if id(var) in self._built or type(var).__name__ == "NullVariable":
            return
        var.reconstruct(self)
        name = self.new_temp()
        self.store_fast(name)
        self._built[id(var)] = name
        self._built_vars.append(var)

    def release(self, var: Any) -> None:
        """Unbind the temporary holding ``var`` (nothing reconstructs it again), so that the generated code
        holds no reference the original does not: a generator a loop runs over is closed when the loop ends,
        before the code after it, as eagerly."""
        name = self._built.pop(id(var), None)  # (``var`` stays in `_built_vars`: its id is not reused)
        if name is not None:
            self.emit("DELETE_FAST", name)

    def call_helper(self, helper: Any, args: list[Any]) -> None:
        """``helper(*args)`` for a runtime helper function; the result is left on the stack."""
        self.load_callable_const(helper)
        for arg in args:
            self.reconstruct(arg)
        self.call(len(args))

    def add(self, item: Any) -> None:
        """Append an already built instruction or label."""
        self.instructions.append(item)

    def make_function(self, code: types.CodeType, cells: dict[str, str] | None = None) -> None:
        """Push a new function of ``code`` with this frame's globals and free-variable cells; ``cells`` maps
        a free variable of ``code`` to the temporary holding the cell it gets instead of this frame's."""
        if code.co_freevars:
            for name in code.co_freevars:
                if cells and name in cells:
                    self.emit("LOAD_FAST", cells[name])
                    continue
                pyversion.emit_load_closure(
                    self.emit, FreeVar(name) if name in self.original.co_freevars else CellVar(name))
            self.build("BUILD_TUPLE", len(code.co_freevars))
        pyversion.emit_make_function(self.emit, code, bool(code.co_freevars))

    # -- graph outputs -----------------------------------------------------------------------------------
    def load_graph_output(self, symbol: Symbol) -> None:
        if symbol in self.view_index:
            self.emit("LOAD_FAST", VIEWS_LOCAL)
            self.load_const(self.view_index[symbol])
            self.binary_subscr()
            return
        index = self.output_index.get(symbol)
        if index is None:
            raise FallbackError(f"tensor {symbol.name} is needed in the generated code but is not a graph output")
        self.emit("LOAD_FAST", OUTPUTS_LOCAL)
        self.load_const(index)
        self.binary_subscr()

    def call_program(self, program: Any, inputs: list[Any], outputs: list[Symbol]) -> None:
        """``__sot_outputs = program([inputs...])``; ``inputs`` are variables to reconstruct.

        It must come first in the generated code, before anything the outside world can see (side effects,
        native instructions): if the program raises (an op fails at run time, e.g. an index out of range
        only the kernel checks), the original code then runs natively from its start instead
        (`runtime.native_rerun`), so the error, its line, the effects before it and the user's
        ``try``/``finally`` around it are exactly eager's. The programs are pure (an in-place op is recorded
        out of place and written back after the program), so nothing of the failed attempt is visible."""
        self._program_failure = Label()
        region = pyversion.begin_exception_region(self.add, self._program_failure, self.lineno)
        self.load_callable_const(program)
        for var in inputs:
            self.reconstruct(var)
        self.build("BUILD_LIST", len(inputs))
        self.call(1)
        self.store_fast(OUTPUTS_LOCAL)
        pyversion.end_exception_region(self.add, region, self.lineno, first=True)
        self.output_index = {symbol: i for i, symbol in enumerate(outputs)}

    def call_view_replay(self, replay: Any, bases: list[Any], views: list[Symbol]) -> None:
        """``__sot_views = replay([bases...])``: results of the graph that are eagerly views of an input or of
        another result, made again from their base after the program (whose outputs are separate tensors), so
        an in-place change of one reaches the other as in eager mode."""
        self.load_callable_const(replay)
        for var in bases:
            self.reconstruct(var)
        self.build("BUILD_LIST", len(bases))
        self.call(1)
        self.store_fast(VIEWS_LOCAL)
        self.view_index = {symbol: i for i, symbol in enumerate(views)}

    def _emit_program_failure(self) -> None:
        """The handler of `call_program`'s region: ``runner, args, kwargs = native_rerun(exc, <original
        function>, <its arguments>); return runner(*args, **kwargs)``."""
        from .executor.guard import argument_names
        from .runtime import native_rerun

        self.add(self._program_failure)
        exception = self.new_temp()
        pyversion.emit_handler_entry(self.emit, lambda: self.store_fast(exception))
        self.load_callable_const(native_rerun)
        self.emit("LOAD_FAST", exception)
        self.make_function(self.original)
        names = argument_names(self.original)
        for name in names:
            self.load_fast(name)
        self.build("BUILD_TUPLE", len(names))
        self.call(3)
        rerun = self.new_temp()
        self.store_fast(rerun)
        self.emit("DELETE_FAST", exception)  # (its traceback holds this frame: no cycle through it)

        def item(index: int) -> None:
            self.emit("LOAD_FAST", rerun)
            self.load_const(index)
            self.binary_subscr()

        self.push_callable(lambda: item(0))
        item(1)
        item(2)
        self.emit("CALL_FUNCTION_EX", 1)
        self.return_value()

    # -- result ------------------------------------------------------------------------------------------
    def to_code(self) -> types.CodeType:
        if self._program_failure is not None:
            self._emit_program_failure()
            self._program_failure = None
        original = self.original
        new = Bytecode(self.instructions)
        # The original's signature and names, as `Bytecode.from_code` would give them.
        new.argcount = original.co_argcount
        new.posonlyargcount = original.co_posonlyargcount
        new.kwonlyargcount = original.co_kwonlyargcount
        nargs = (original.co_argcount + original.co_kwonlyargcount + original.co_posonlyargcount
                 + bool(original.co_flags & inspect.CO_VARARGS) + bool(original.co_flags & inspect.CO_VARKEYWORDS))
        new.argnames = list(original.co_varnames[:nargs])
        new.name = original.co_name
        new.filename = original.co_filename
        new.first_lineno = original.co_firstlineno
        new.cellvars = list(original.co_cellvars)
        new.freevars = list(original.co_freevars)
        if original.co_consts and (original.co_consts[0] is None or isinstance(original.co_consts[0], str)):
            new.docstring = original.co_consts[0]
        if hasattr(original, "co_qualname"):
            new.qualname = original.co_qualname
        # the same kind of function: optimized, with the same */** arguments
        new.flags = bytecode.CompilerFlags(original.co_flags)
        return new.to_code()

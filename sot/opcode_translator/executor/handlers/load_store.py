"""Loads and stores: locals, constants, globals, builtins, attributes, closure cells."""
from __future__ import annotations

import dis

from ....errors import FallbackError, UserCodeError
from ... import pyversion
from ..liveness import cells_made_again
from ..opcode_executor import OpcodeExecutor, handles
from ..tracker import ConstTracker
from ..variables.base import NullVariable, VariableBase, VariableFactory
from ..variables.function import CellVariable


def _load_local(executor: OpcodeExecutor, name: str, checked: bool = False) -> VariableBase:
    """The value of local ``name``. Unbound: a ``checked`` read (`pyversion.LOAD_FAST_CHECKED`) raises the
    UnboundLocalError of eager, which a handler of the frame may catch; an unchecked one (3.12+'s LOAD_FAST,
    which the compiler emits only where it proved the local bound) falls back."""
    var = executor.locals.get(name)
    if var is None:
        if pyversion.LOAD_FAST_MAY_PUSH_CELL and name in executor.cells:
            return executor.cells[name]  # 3.13: LOAD_FAST on a cell slot loads the cell (for a closure)
        if checked:
            _raise_unbound_local(name)
        raise FallbackError(f"local variable {name!r} is read before assignment")
    return var


def _raise_unbound_local(name: str) -> None:
    error = UnboundLocalError(pyversion.unbound_local_message(name))
    raise UserCodeError(f"user code raised UnboundLocalError: {error}", original=error)


def _store_local(executor: OpcodeExecutor, name: str, value: VariableBase) -> None:
    if isinstance(value, CellVariable):
        executor.cells[name] = value  # 3.12+: a cell saved by LOAD_FAST_AND_CLEAR is put back
    elif isinstance(value, NullVariable):
        executor.locals.pop(name, None)  # 3.12+: restoring a local that was unbound before a comprehension
    else:
        executor.locals[name] = value


@handles("LOAD_FAST", "LOAD_FAST_CHECK")
def load_fast(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    executor.push(_load_local(executor, instr.argval, checked=instr.opname == pyversion.LOAD_FAST_CHECKED))


@handles("LOAD_FAST_LOAD_FAST")
def load_fast_load_fast(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    """3.13: two ``LOAD_FAST`` in one instruction (``argval`` is the pair of names)."""
    for name in instr.argval:
        executor.push(_load_local(executor, name))


@handles("LOAD_FAST_AND_CLEAR")
def load_fast_and_clear(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    """3.12+, around an inlined comprehension (PEP 709): save the outer value of the comprehension's
    variable on the stack (NULL when unbound) and unbind it; a ``STORE_FAST`` puts it back afterwards."""
    name = instr.argval
    if name in executor.cells and name in executor.code.co_cellvars:
        saved: VariableBase | None = executor.cells.pop(name)
    else:
        saved = executor.locals.pop(name, None)
    executor.push(saved if saved is not None else NullVariable(executor.graph))


@handles("STORE_FAST")
def store_fast(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    _store_local(executor, instr.argval, executor.pop())


@handles("STORE_FAST_LOAD_FAST")
def store_fast_load_fast(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    """3.13: ``STORE_FAST a`` then ``LOAD_FAST b``."""
    store_name, load_name = instr.argval
    _store_local(executor, store_name, executor.pop())
    executor.push(_load_local(executor, load_name))


@handles("STORE_FAST_STORE_FAST")
def store_fast_store_fast(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    """3.13: ``STORE_FAST a`` then ``STORE_FAST b``."""
    for name in instr.argval:
        _store_local(executor, name, executor.pop())


@handles("DELETE_FAST")
def delete_fast(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    if executor.locals.pop(instr.argval, None) is None:
        if instr.argval in executor.cells:
            raise FallbackError(f"local variable {instr.argval!r} is deleted before assignment")
        _raise_unbound_local(instr.argval)  # (as eager's ``del`` of an unbound local)


@handles("LOAD_CONST")
def load_const(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    if instr.argval is pyversion.call_without_self:  # 3.10: generated code's stand-in for a NULL
        executor.push(NullVariable(executor.graph))
        return
    executor.push(VariableFactory.from_value(instr.argval, executor.graph, ConstTracker(instr.argval)))


def push_callable(executor: OpcodeExecutor, var: VariableBase, with_null: bool) -> None:
    """Push ``var``, with the NULL of a following call where the running version puts it. A method load
    is simulated the same way, as NULL + bound attribute: the call then sees an ordinary callable."""
    if with_null and pyversion.NULL_BELOW_CALLABLE:
        executor.push(NullVariable(executor.graph))
    executor.push(var)
    if with_null and not pyversion.NULL_BELOW_CALLABLE:
        executor.push(NullVariable(executor.graph))


@handles("LOAD_GLOBAL")
def load_global(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    var = executor.resolver.load(instr.argval, executor.graph)
    executor.graph.guard_read(var)
    push_callable(executor, var, pyversion.pushes_null(instr))


@handles("LOAD_ATTR", "LOAD_METHOD")
def load_attr(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    obj = executor.pop()
    var = obj.getattr(instr.argval)
    if var.tracker.is_traceable():
        executor.graph.guard_read(var)
    push_callable(executor, var, pyversion.pushes_null(instr))


@handles("LOAD_SUPER_ATTR")
def load_super_attr(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    """3.12+: ``super().name`` without building the super object: ``super, class, self`` on the stack."""
    self_var = executor.pop()
    cls = executor.pop()
    super_fn = executor.pop()
    proxy = super_fn.call([cls, self_var], {})
    var = proxy.getattr(instr.argval)
    if var.tracker.is_traceable():
        executor.graph.guard_read(var)
    push_callable(executor, var, pyversion.pushes_null(instr))


@handles("MAKE_CELL")
def make_cell(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    name = instr.argval
    executor.cells[name] = executor.new_cell(name, executor.locals.pop(name, None),
                                             made_again=instr.offset in cells_made_again(executor.code))


@handles("COPY_FREE_VARS")
def copy_free_vars(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    """The executor was created with its free-variable cells already in place."""


@handles("LOAD_DEREF", "LOAD_CLASSDEREF")
def load_deref(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    var = executor.cells[instr.argval].load(instr.argval)
    if var.tracker.is_traceable():
        executor.graph.guard_read(var)
    executor.push(var)


@handles("STORE_DEREF")
def store_deref(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    executor.cells[instr.argval].store(instr.argval, executor.pop())


@handles("DELETE_DEREF")
def delete_deref(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    cell = executor.cells[instr.argval]
    cell.load(instr.argval)  # deleting an empty cell is the user's NameError
    cell.store(instr.argval, None)


@handles("LOAD_CLOSURE")
def load_closure(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    executor.push(executor.cells[instr.argval])


@handles("STORE_ATTR")
def store_attr(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    obj = executor.pop()
    value = executor.pop()
    obj.setattr(instr.argval, value)


@handles("DELETE_ATTR")
def delete_attr(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    executor.pop().setattr(instr.argval, None)


def _store_global(executor: OpcodeExecutor, name: str, value: VariableBase | None) -> None:
    """A global of the translated frame's module is replayed as ``STORE_GLOBAL``; one of another module (an
    inlined function of it assigning its global) as the module's attribute, which its functions and readers
    of ``module.name`` see from then on in the simulation too (`NameResolver.stored`)."""
    resolver = executor.resolver
    if resolver.globals_var is None:
        executor.graph.side_effects.store_global(name, value)
        return
    module = resolver.module
    if module is None:
        raise FallbackError("assigning a global of a function whose globals are no module's is not supported")
    module_var = VariableFactory.from_value(module, executor.graph, ConstTracker(module))
    executor.graph.side_effects.store_attr(module_var, name, value)


@handles("STORE_GLOBAL")
def store_global(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    _store_global(executor, instr.argval, executor.pop())


@handles("DELETE_GLOBAL")
def delete_global(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    executor.resolver.load(instr.argval, executor.graph)  # deleting an unknown global is the user's NameError
    _store_global(executor, instr.argval, None)


@handles("STORE_SUBSCR")
def store_subscr(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    key = executor.pop()
    container = executor.pop()
    value = executor.pop()
    container.setitem(key, value)


@handles("STORE_SLICE")
def store_slice(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    """3.12+: ``container[start:stop] = value`` is ``BUILD_SLICE 2`` + ``STORE_SUBSCR`` in one instruction."""
    from .containers import build_slice
    from .operators import TWO_OPERANDS

    build_slice(executor, TWO_OPERANDS)
    store_subscr(executor, instr)


@handles("DELETE_SUBSCR")
def delete_subscr(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    key = executor.pop()
    executor.pop().setitem(key, None)

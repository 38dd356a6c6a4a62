"""``CALL_INTRINSIC_1``/``CALL_INTRINSIC_2`` (3.12+): older instructions folded into one opcode, told
apart by the argument (``dis`` names it in ``argrepr``). The ones a function body needs are simulated by
the handler of the instruction they replace; the rest fall back with their name."""
from __future__ import annotations

import dis
import operator

from ....errors import FallbackError
from ..opcode_executor import OpcodeExecutor, handles


def _unary_positive(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    from .operators import apply_operator

    executor.push(apply_operator(executor, operator.pos, [executor.pop()]))


def _list_to_tuple(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    from .containers import list_to_tuple

    list_to_tuple(executor, instr)


def _stopiteration_error(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    """A ``StopIteration`` escaping a generator's body becomes a ``RuntimeError`` (PEP 479)."""
    from ..variables.basic import ObjectVariable
    from ..tracker import DummyTracker

    exc = executor.pop().get_py_value()
    if isinstance(exc, StopIteration):
        error = RuntimeError("generator raised StopIteration")
        error.__cause__ = exc
        exc = error
    executor.push(ObjectVariable(exc, executor.graph, DummyTracker()))


# Intrinsics a function body may contain and that are simulated.
INTRINSICS_1 = {
    "INTRINSIC_STOPITERATION_ERROR": _stopiteration_error,  # the implicit handler around a generator's body
    "INTRINSIC_UNARY_POSITIVE": _unary_positive,  # +x (3.11: UNARY_POSITIVE)
    "INTRINSIC_LIST_TO_TUPLE": _list_to_tuple,  # f(*args) (3.11: LIST_TO_TUPLE)
}

# Why the others fall back.
UNSUPPORTED_INTRINSICS = {
    "INTRINSIC_PRINT": "interactive mode only",
    "INTRINSIC_IMPORT_STAR": "module bodies only",
    "INTRINSIC_ASYNC_GEN_WRAP": "async generators are not translated",
    "INTRINSIC_TYPEVAR": "PEP 695 generics are not simulated",
    "INTRINSIC_PARAMSPEC": "PEP 695 generics are not simulated",
    "INTRINSIC_TYPEVARTUPLE": "PEP 695 generics are not simulated",
    "INTRINSIC_SUBSCRIPT_GENERIC": "PEP 695 generics are not simulated",
    "INTRINSIC_TYPEALIAS": "PEP 695 type aliases are not simulated",
    "INTRINSIC_TYPEVAR_WITH_BOUND": "PEP 695 generics are not simulated",
    "INTRINSIC_TYPEVAR_WITH_CONSTRAINTS": "PEP 695 generics are not simulated",
    "INTRINSIC_SET_FUNCTION_TYPE_PARAMS": "PEP 695 generics are not simulated",
}


@handles("CALL_INTRINSIC_1")
def call_intrinsic_1(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    handler = INTRINSICS_1.get(instr.argrepr)
    if handler is None:
        reason = UNSUPPORTED_INTRINSICS.get(instr.argrepr, "not supported yet")
        raise FallbackError(f"CALL_INTRINSIC_1 {instr.argrepr}: {reason}")
    handler(executor, instr)


def _prep_reraise_star(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    from .exceptions import push_reraise_star

    push_reraise_star(executor)


INTRINSICS_2 = {
    "INTRINSIC_PREP_RERAISE_STAR": _prep_reraise_star,  # the end of try/except* (3.11: PREP_RERAISE_STAR)
}


@handles("CALL_INTRINSIC_2")
def call_intrinsic_2(executor: OpcodeExecutor, instr: dis.Instruction) -> None:
    handler = INTRINSICS_2.get(instr.argrepr)
    if handler is not None:
        handler(executor, instr)
        return
    reason = UNSUPPORTED_INTRINSICS.get(instr.argrepr, "not supported yet")
    raise FallbackError(f"CALL_INTRINSIC_2 {instr.argrepr}: {reason}")

"""The opcode coverage table of issue 3, for the running Python version: every name in ``dis.opmap`` has a
handler or is listed in `sot.opcodes` (fallback with a reason, or never in a code object)."""
from __future__ import annotations

import dis
import subprocess
import sys

from sot import opcodes
from sot.opcode_translator.executor.opcode_executor import OPCODE_HANDLERS


def test_every_opname_is_handled_or_listed():
    missing = [name for name, status, _ in opcodes.table() if status == "MISSING"]
    assert not missing, (f"opnames of Python {sys.version_info[:2]} with neither a handler nor an entry in "
                         f"sot/opcodes.py FALLBACKS: {missing}")


def test_fallback_list_has_no_handled_opcode():
    stale = sorted(name for name in opcodes.FALLBACKS if name in OPCODE_HANDLERS)
    assert not stale, f"these opcodes have a handler now: remove them from sot/opcodes.py FALLBACKS: {stale}"


def test_every_fallback_has_a_reason():
    for name, reason in {**opcodes.FALLBACKS, **opcodes.NOT_IN_CODE}.items():
        assert isinstance(reason, str) and len(reason) > 10, name
    for name, status, reason in opcodes.table():
        assert status == "handled" or reason, name


def test_handlers_are_registered_for_real_opnames():
    # a typo in @handles("...") would silently never run; names of other versions are fine
    known = set(dis.opmap) | _OTHER_VERSIONS_OPNAMES
    unknown = sorted(set(OPCODE_HANDLERS) - known)
    assert not unknown, f"handlers registered for names no supported Python has: {unknown}"


# Opnames of the other supported versions that handlers may register (checked against dis on each version).
_OTHER_VERSIONS_OPNAMES = {
    # 3.10 only
    "BINARY_ADD", "BINARY_AND", "BINARY_FLOOR_DIVIDE", "BINARY_LSHIFT", "BINARY_MATRIX_MULTIPLY",
    "BINARY_MODULO", "BINARY_MULTIPLY", "BINARY_OR", "BINARY_POWER", "BINARY_RSHIFT", "BINARY_SUBTRACT",
    "BINARY_TRUE_DIVIDE", "BINARY_XOR", "INPLACE_ADD", "INPLACE_AND", "INPLACE_FLOOR_DIVIDE", "INPLACE_LSHIFT",
    "INPLACE_MATRIX_MULTIPLY", "INPLACE_MODULO", "INPLACE_MULTIPLY", "INPLACE_OR", "INPLACE_POWER",
    "INPLACE_RSHIFT", "INPLACE_SUBTRACT", "INPLACE_TRUE_DIVIDE", "INPLACE_XOR", "CALL_FUNCTION",
    "CALL_FUNCTION_KW", "CALL_METHOD", "ROT_TWO", "ROT_THREE", "ROT_FOUR", "ROT_N", "DUP_TOP", "DUP_TOP_TWO",
    "JUMP_ABSOLUTE", "POP_JUMP_IF_TRUE", "POP_JUMP_IF_FALSE", "SETUP_FINALLY", "SETUP_WITH", "POP_BLOCK", "LOAD_METHOD", "GEN_START",
    "COPY_DICT_WITHOUT_KEYS", "YIELD_FROM", "JUMP_IF_NOT_EXC_MATCH", "SETUP_ASYNC_WITH",
    # 3.10-3.11
    "JUMP_IF_TRUE_OR_POP", "JUMP_IF_FALSE_OR_POP", "LIST_TO_TUPLE", "LOAD_CLASSDEREF", "UNARY_POSITIVE",
    "IMPORT_STAR", "PRINT_EXPR",
    # 3.11 only
    "PRECALL", "KW_NAMES", "POP_JUMP_FORWARD_IF_TRUE", "POP_JUMP_FORWARD_IF_FALSE", "POP_JUMP_FORWARD_IF_NONE",
    "POP_JUMP_FORWARD_IF_NOT_NONE", "POP_JUMP_BACKWARD_IF_TRUE", "POP_JUMP_BACKWARD_IF_FALSE",
    "POP_JUMP_BACKWARD_IF_NONE", "POP_JUMP_BACKWARD_IF_NOT_NONE", "ASYNC_GEN_WRAP", "PREP_RERAISE_STAR",
    # 3.11+
    "CALL", "PUSH_NULL", "COPY", "SWAP", "RESUME", "CACHE", "MAKE_CELL", "COPY_FREE_VARS", "BEFORE_WITH",
    "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "BINARY_OP", "PUSH_EXC_INFO", "CHECK_EXC_MATCH",
    "CHECK_EG_MATCH", "RETURN_GENERATOR", "SEND",
    # 3.12+
    "LOAD_FAST_AND_CLEAR", "LOAD_FAST_CHECK", "RETURN_CONST", "END_FOR", "BINARY_SLICE", "STORE_SLICE",
    "CALL_INTRINSIC_1", "CALL_INTRINSIC_2", "LOAD_SUPER_ATTR", "POP_JUMP_IF_NONE", "POP_JUMP_IF_NOT_NONE",
    "JUMP", "END_SEND", "CLEANUP_THROW", "LOAD_LOCALS", "LOAD_FROM_DICT_OR_GLOBALS", "LOAD_FROM_DICT_OR_DEREF",
    # 3.13
    "TO_BOOL", "CALL_KW", "FORMAT_SIMPLE", "FORMAT_WITH_SPEC", "CONVERT_VALUE", "SET_FUNCTION_ATTRIBUTE",
    "LOAD_FAST_LOAD_FAST", "STORE_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST",
    # 3.10-3.12
    "FORMAT_VALUE",
}


def test_fallback_list_names_real_opnames():
    unknown = sorted(set(opcodes.FALLBACKS) - set(dis.opmap) - _OTHER_VERSIONS_OPNAMES)
    assert not unknown, f"sot/opcodes.py FALLBACKS lists names no supported Python has: {unknown}"


def test_printout():
    proc = subprocess.run([sys.executable, "-m", "sot.opcodes", "--all"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert f"Python {sys.version_info.major}.{sys.version_info.minor}" in out
    for name in dis.opmap:
        assert name in out
    assert "handled" in out


def test_only_async_and_module_or_class_body_opcodes_fall_back():
    # issue 3: every opcode a translated function body can contain is simulated
    allowed = {opcodes.ASYNC, opcodes.MODULE_OR_CLASS_BODY, opcodes.INTERACTIVE}
    others = {name: reason for name, reason in opcodes.FALLBACKS.items() if reason not in allowed}
    assert not others, f"fallback opcodes that a function body may contain: {others}"

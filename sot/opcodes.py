"""Opcode coverage of the executor, for the running Python version.

Every name in ``dis.opmap`` is in exactly one of three states:

* **handled**: the executor has a handler for it (``OPCODE_HANDLERS``, registered with ``@handles`` in
  ``sot/opcode_translator/executor/handlers/``);
* **fallback**: it is on `FALLBACKS` below, with the reason a frame containing it falls back (runs eagerly)
  when the simulation reaches it. Shrinking this list is the goal of issue 3: when you add a handler,
  delete the entry (``tests/opcode_translator/test_opcode_coverage.py`` fails until you do);
* **not in code**: it never appears in the bytecode of a function object (`NOT_IN_CODE`, plus the
  compiler's pseudo-instructions and the interpreter's instrumented variants, recognised by number and
  prefix), so there is nothing to simulate.

``python -m sot.opcodes`` prints the table (``--all`` also lists the handled ones). The list covers 3.10 to
3.13 at once: names the running version does not have are ignored.
"""
from __future__ import annotations

import dis
import sys

# -- reasons -----------------------------------------------------------------------------------------------
ASYNC = "async code (coroutines, async generators, async for/with) is never translated"
MODULE_OR_CLASS_BODY = "only in module or class bodies, which are never translated"
INTERACTIVE = "only in the interactive interpreter"

#: Opnames a frame may contain that the executor does not simulate, with the reason (all versions).
FALLBACKS: dict[str, str] = {
    # async
    "BEFORE_ASYNC_WITH": ASYNC, "SETUP_ASYNC_WITH": ASYNC, "GET_AITER": ASYNC, "GET_ANEXT": ASYNC,
    "GET_AWAITABLE": ASYNC, "END_ASYNC_FOR": ASYNC, "ASYNC_GEN_WRAP": ASYNC,
    # module and class bodies, interactive mode
    "IMPORT_STAR": MODULE_OR_CLASS_BODY, "LOAD_NAME": MODULE_OR_CLASS_BODY, "STORE_NAME": MODULE_OR_CLASS_BODY,
    "DELETE_NAME": MODULE_OR_CLASS_BODY, "SETUP_ANNOTATIONS": MODULE_OR_CLASS_BODY,
    "LOAD_LOCALS": MODULE_OR_CLASS_BODY, "LOAD_FROM_DICT_OR_GLOBALS": MODULE_OR_CLASS_BODY,
    "LOAD_FROM_DICT_OR_DEREF": MODULE_OR_CLASS_BODY,
    "PRINT_EXPR": INTERACTIVE,
}

#: Opnames that are real opcodes but never appear in a function's ``co_code``.
NOT_IN_CODE: dict[str, str] = {
    "ENTER_EXECUTOR": "3.13: the JIT's hook, hidden from co_code (dis shows the original instruction)",
    "EXIT_INIT_CHECK": "3.13: only in the interpreter's own shim frames for calls of classes",
    "INTERPRETER_EXIT": "only in the interpreter's own trampoline code",
    "RESERVED": "a placeholder number, never emitted",
}

#: 3.12+: opcodes numbered from here on are pseudo-instructions of the compiler, replaced by real ones.
MIN_PSEUDO_OPCODE = 256


def not_in_code_reason(name: str) -> str | None:
    """Why ``name`` never appears in a code object's bytecode, or None when it may."""
    if name in NOT_IN_CODE:
        return NOT_IN_CODE[name]
    if dis.opmap.get(name, 0) >= MIN_PSEUDO_OPCODE:
        return "compiler pseudo-instruction, replaced by a real one before the code object is made"
    if name.startswith("INSTRUMENTED_"):
        return "instrumented variant (sys.monitoring); co_code shows the plain instruction"
    return None


def handlers() -> dict[str, object]:
    from .opcode_translator.executor.opcode_executor import OPCODE_HANDLERS

    return OPCODE_HANDLERS


def table() -> list[tuple[str, str, str]]:
    """``(opname, status, reason)`` for every name of ``dis.opmap``, sorted by name; status is one of
    ``handled``, ``fallback``, ``not in code`` or ``MISSING`` (neither handled nor listed: a bug)."""
    handled = handlers()
    rows = []
    for name in sorted(dis.opmap):
        if name in handled:
            rows.append((name, "handled", ""))
        elif name in FALLBACKS:
            rows.append((name, "fallback", FALLBACKS[name]))
        elif not_in_code_reason(name) is not None:
            rows.append((name, "not in code", not_in_code_reason(name) or ""))
        else:
            rows.append((name, "MISSING", "neither handled nor on the fallback list"))
    return rows


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    show_all = "--all" in argv
    rows = table()
    counts: dict[str, int] = {}
    for _, status, _ in rows:
        counts[status] = counts.get(status, 0) + 1
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    print(f"sot opcode coverage on Python {version}: {len(rows)} opnames in dis.opmap: {summary}")
    if not show_all:
        print("(handled opcodes omitted; `python -m sot.opcodes --all` lists them too)")
    print()
    width = max(len(name) for name, _, _ in rows)
    print(f"{'opname':<{width}}  {'status':<11}  reason")
    print(f"{'-' * width}  {'-' * 11}  {'-' * 6}")
    for name, status, reason in rows:
        if status == "handled" and not show_all:
            continue
        print(f"{name:<{width}}  {status:<11}  {reason}")
    return 1 if counts.get("MISSING") else 0


if __name__ == "__main__":
    sys.exit(main())

"""Garbage collected inside Paddle's program building only, on demand (not collected by pytest).

    python -m tests.reliability.stress_gc_in_builds tests/symbolic -q -p no:cacheprovider
    python -m tests.reliability.stress_gc_in_builds -q -p no:cacheprovider          # the whole suite (slow)

Runs pytest with the arguments given, with the cyclic garbage collector off except at one point of every
program build: the third value name read by Paddle's ``RunnableProgram.program_name_attr``
(``pir_partial_program.get_value_name``), where a 3.13 CI run segfaulted once (a train program built by
``CompiledProgram._saved_for_backward``; an earlier 3.10 crash in the same function led to the deferred
releases of `compile._BuildLock`). So everything that became cyclic garbage since the previous build (programs,
partial programs, scopes, grad nodes and hooks of earlier tests) is freed in the middle of a build, every time,
where normally a collection lands there only by chance. ``faulthandler`` is on.

Result when added: tests/reliability and tests/symbolic up to test_higher_order_gradients.py pass under it on
3.13 (about 11 minutes); the CI crash was not reproduced. Its patches rely on Paddle 3.3's module layout.
Later (2026-12-02) the crash was reproduced without this script, in about one run in four of
``pytest tests/symbolic/test_recompute_plan.py -k held_tensor`` on 3.13, and went away with ``gc.disable()``:
`compile.BUILD_LOCK` now holds automatic collection off inside its sections, so this script forces a
collection at a point that no longer gets one by itself (a stricter check than normal runs).
"""
from __future__ import annotations

import faulthandler
import functools
import gc
import os
import sys

os.environ.setdefault("GLOG_minloglevel", "2")
sys.path.insert(0, os.getcwd())  # (run from the repository root, as pytest is)

import paddle.jit.dy2static.pir_partial_program as partial_program  # noqa: E402
import pytest  # noqa: E402

import sot  # noqa: E402

#: The value name read (per ``program_name_attr``) at which garbage is collected.
COLLECT_AT = 3

_names_read = [COLLECT_AT]  # (no collection before the first ``program_name_attr``)
_get_value_name = partial_program.get_value_name
_program_name_attr = partial_program.RunnableProgram.__dict__["program_name_attr"].func


@sot.skip_function  # (called inside translated calls' builds: not to be translated itself)
def get_value_name(value: object) -> str:
    _names_read[0] += 1
    if _names_read[0] == COLLECT_AT:
        gc.collect()
    return _get_value_name(value)


@sot.skip_function
def program_name_attr(self: object) -> dict:
    _names_read[0] = 0
    return _program_name_attr(self)


def main(argv: list[str]) -> int:
    partial_program.get_value_name = get_value_name
    cached = functools.cached_property(program_name_attr)
    cached.__set_name__(partial_program.RunnableProgram, "program_name_attr")
    partial_program.RunnableProgram.program_name_attr = cached
    faulthandler.enable()
    gc.disable()
    gc.enable = lambda: None  # (a test that turns it back on keeps it off)
    return pytest.main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

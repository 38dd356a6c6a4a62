"""The decoded bytecode of a code object is kept between the executors that run it (an inlined function is
met many times per translation), without keeping the code alive or handing one code's decoding to another."""
from __future__ import annotations

import dis
import gc
import weakref

from sot.opcode_translator.executor import liveness
from sot.opcode_translator.executor.opcode_executor import decoded


def test_decoding_is_shared_exact_and_dropped_with_the_code():
    namespace: dict = {}
    exec("def f(x):\n    y = x + 1\n    return y * 2\n", namespace)
    code = namespace["f"].__code__
    first = decoded(code)
    assert decoded(code) is first  # kept
    instructions, index_of_offset, lines = first
    assert list(instructions) == list(dis.get_instructions(code))
    assert all(instructions[index_of_offset[instr.offset]] is instr for instr in instructions)
    assert lines[instructions[-1].offset] == 3
    other = compile("def g(a):\n    return a\n", "<other>", "exec").co_consts[0]
    assert decoded(other)[0] != instructions
    key, ref = id(code), weakref.ref(code)
    del namespace, code, first, instructions, index_of_offset, lines
    gc.collect()
    assert ref() is None  # the cache held it weakly ...
    assert key not in decoded.memo  # ... and forgot it with it


def test_the_liveness_analyses_do_not_keep_a_code_alive():
    """A frame broken at a graph break asks these of its code; a function made at run time must still die."""
    namespace: dict = {}
    exec("def f(x):\n    try:\n        y = x + 1\n    finally:\n        x = 0\n    return y\n", namespace)
    code = namespace["f"].__code__
    analyses = (liveness.block_stacks, liveness.live_in, liveness.cells_shared_across_breaks,
                liveness.definitely_bound)
    results = [analysis(code) for analysis in analyses]
    assert all(analysis(code) is result for analysis, result in zip(analyses, results))  # computed once
    key, ref = id(code), weakref.ref(code)
    del namespace, code
    gc.collect()
    assert ref() is None
    assert all(key not in analysis.memo for analysis in analyses)

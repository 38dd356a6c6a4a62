"""The decoded bytecode of a code object is kept between the executors that run it (an inlined function is
met many times per translation), without keeping the code alive or handing one code's decoding to another."""
from __future__ import annotations

import dis
import gc
import weakref

from sot.opcode_translator.executor.opcode_executor import _decoded, decoded


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
    assert key not in _decoded  # ... and forgot it with it

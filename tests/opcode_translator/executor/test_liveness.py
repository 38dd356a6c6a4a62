"""`live_in` and `saved_local_restores` (liveness.py): a variable only a list/set/dict comprehension binds is
not live before it on any version, though 3.12+ inline the comprehension (PEP 709) and save the variable's
outer value with ``LOAD_FAST_AND_CLEAR``; the outer value is live when it is read after the comprehension."""
from __future__ import annotations

import dis
import sys
import types

import pytest

from sot.opcode_translator.executor.liveness import live_in, saved_local_restores

inlined = pytest.mark.skipif(sys.version_info < (3, 12), reason="comprehensions are inlined from 3.12 (PEP 709)")


def assigned_from_a_comprehension(y):
    x = [v for v in y]  # (3.12+ stores x before putting v back: the stores are reordered)
    return x


def several_shapes(y, z):
    a, b = [(v, w) for v in y for w in z], {k: k for k in y}
    fns = [lambda: v for v in y]  # (v is a cell inside this one)
    try:
        s = sum([v * 2 for v in y if v])
    except ValueError:
        s = {u for u in y}
    v = [v for v in [[q for q in r] for r in y]]  # (v's saved value is put back, then v is assigned)
    print([v for v in y])  # (a comprehension as an argument)
    return a, b, fns, s, {n: [n for n in range(n)] for n in range(3)}


def outer_value_read_after(y, v):
    out = [v * 2 for v in y]
    return out, v


def outer_value_not_read_after(y, v):
    out = [v * 2 for v in y]
    return out


def loop_then_comprehension(x, xs):
    for t in xs:
        x = x + t
    return x, [v for v in xs], [[a for a in range(b)] for b in range(3)]


def _loads_and_clears(code: types.CodeType) -> list[int]:
    return [instr.offset for instr in dis.get_instructions(code) if instr.opname == "LOAD_FAST_AND_CLEAR"]


@pytest.mark.parametrize("fn", [assigned_from_a_comprehension, several_shapes, outer_value_read_after,
                                loop_then_comprehension])
def test_every_saved_value_is_followed_to_its_stores(fn) -> None:
    """Each save of the compiler's comprehensions is put back by a store on the normal path and one in the
    cleanup handler, both of its own variable."""
    code = fn.__code__
    restores = saved_local_restores(code)
    saves = _loads_and_clears(code)
    assert sorted(restores) == saves
    assert bool(saves) == (sys.version_info >= (3, 12))
    by_offset = {instr.offset: instr for instr in dis.get_instructions(code)}
    for save, stores in restores.items():
        assert len(stores) == 2, (save, stores)
        for offset, part in stores:
            names = by_offset[offset].argval
            assert (names if isinstance(names, str) else names[part]) == by_offset[save].argval


def test_a_variable_only_a_comprehension_binds_is_not_live_before_it() -> None:
    """What makes a graph break in a loop before such a comprehension translatable (it fell back on 3.12+)."""
    code = loop_then_comprehension.__code__
    assert live_in(code)[0] == {"x", "xs"}
    head = next(instr.offset for instr in dis.get_instructions(code) if instr.opname == "FOR_ITER")
    assert live_in(code)[head] == {"x", "xs"}
    assert live_in(several_shapes.__code__)[0] == {"y", "z"}


def test_the_outer_value_is_live_when_read_after_the_comprehension() -> None:
    assert live_in(outer_value_read_after.__code__)[0] == {"y", "v"}
    assert live_in(outer_value_not_read_after.__code__)[0] == {"y"}


@inlined
def test_a_save_not_followed_counts_as_a_read() -> None:
    """A saved value that an instruction other than a store takes (here ``POP_TOP``) is not followed: the
    ``LOAD_FAST_AND_CLEAR`` then reads its local, as any load does."""
    from bytecode import Bytecode, Instr

    code = Bytecode([Instr("RESUME", 0), Instr("LOAD_FAST_AND_CLEAR", "v"), Instr("POP_TOP"),
                     Instr("LOAD_CONST", None), Instr("RETURN_VALUE")])
    code.argnames = ["v"]
    code.argcount = 1
    compiled = code.to_code()
    assert saved_local_restores(compiled) == {}
    assert live_in(compiled)[0] == {"v"}


@inlined
def test_a_save_put_back_in_another_local_counts_as_a_read() -> None:
    from bytecode import Bytecode, Instr

    code = Bytecode([Instr("RESUME", 0), Instr("LOAD_FAST_AND_CLEAR", "v"), Instr("STORE_FAST", "w"),
                     Instr("LOAD_FAST", "w"), Instr("RETURN_VALUE")])
    code.argnames = ["v"]
    code.argcount = 1
    compiled = code.to_code()
    assert saved_local_restores(compiled) == {}
    assert "v" in live_in(compiled)[0]


"""`definitely_bound`: the locals bound on every path to an instruction (liveness.py)."""
from __future__ import annotations

import dis

from sot.opcode_translator.executor.liveness import definitely_bound


def sample(x, flag, *rest, **options):
    h = x * 2
    if flag:
        y = 1
    print(h, y)  # (a load of y: bound on one path only)
    for i in range(3):
        q = i
    print(q)  # (after a loop that may not run: q is not bound on every path)
    del h
    print(x)
    try:
        z = 3
    except Exception:
        pass
    return x + z


def _bound_at_load(fn, name: str, nth: int = 0) -> frozenset[str]:
    loads = [i for i in dis.get_instructions(fn.__code__)
             if i.opname.startswith("LOAD_FAST")
             and name in (i.argval if isinstance(i.argval, tuple) else (i.argval,))]
    return definitely_bound(fn.__code__)[loads[nth].offset]


def test_arguments_and_stores_on_every_path() -> None:
    assert {"x", "flag", "rest", "options", "h"} <= _bound_at_load(sample, "y")
    assert "y" not in _bound_at_load(sample, "y"), "stored on one branch only"


def test_a_loop_body_store_is_not_definite_after_the_loop() -> None:
    assert "q" not in _bound_at_load(sample, "q", -1)
    assert "i" in _bound_at_load(sample, "i"), "inside the body, the loop variable is bound"


def test_a_delete_unbinds() -> None:
    after_del = _bound_at_load(sample, "x", 1)  # print(x)
    assert "h" not in after_del and "x" in after_del


def test_after_a_handler_only_arguments_never_unbound_are_definite() -> None:
    after = _bound_at_load(sample, "z", -1)
    assert "x" in after and "z" not in after


def _loop_body(w, n):
    for i in range(n):
        with open(w) as f:
            loss = f.read()
        print(loss)  # a read that raises when unbound: bound after it on every path
    return loss


def test_bound_from_a_loop_body_counts_a_read_that_would_raise_as_binding():
    from sot.opcode_translator.executor.liveness import bound_from

    code = _loop_body.__code__
    instructions = list(dis.get_instructions(code))
    head = next(i for i in instructions if i.opname == "FOR_ITER")
    body_start = instructions[instructions.index(head) + 1].offset
    bound = bound_from(code, body_start, frozenset({"w", "n"}))
    assert "loss" in bound[head.offset]
    assert "loss" not in bound[body_start]
    # Without the read, only the with block's normal path binds it: not every path (an exit may swallow).
    assert "loss" not in definitely_bound(code).get(head.offset, frozenset())

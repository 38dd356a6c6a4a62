"""Reading a built static program: the ops of a partial program's forward, nested blocks included.

Several decisions are read from what Paddle built rather than from the SIR (what an op writes in place, whether
it draws random numbers, whether Paddle would crash on it): they all walk the same ops."""
from __future__ import annotations

from typing import Any, Iterator


def forward_ops(program: Any) -> Iterator[Any]:
    """Every op of the forward program ``program`` (a ``PartialProgramLayer``) was built from, those of the
    blocks nested in control-flow ops included. Reads Paddle 3.3's layout: raises on another one (callers
    catch and fall back)."""
    pending = list(program._origin_main_program.global_block().ops)
    while pending:
        op = pending.pop()
        for block in op.blocks():
            pending.extend(block.ops)
        yield op

"""A recorded graph whose results belong to separate gradient graphs runs as one program per part.

Eager autograd gives every op its own grad node; a compiled program is one node for all of its outputs. A
``backward()`` without ``retain_graph`` frees the saved tensors of the nodes it runs, so a program's node is
used up by the first pass that reaches any of its outputs, including a pass whose gradient never flows into
the others. Eager code relies on that freedom: a GAN step runs ``loss_d.backward()`` on the discriminator fed
``fake.detach()``, then ``loss_g.backward()`` through ``fake``; eagerly the first pass never reaches the
generator's nodes, but with ``fake`` and ``loss_d`` from one program it consumed the program's node and the
second pass raised "The TensorWrappers of Dy2StGradNode do not exist" (and gave the generator's parameters a
gradient of zeros, where eager leaves them None).

So the graph is cut where no gradient crosses but a tensor requiring gradients does: between two statements
such that nothing after the cut differentiates a tensor made before it, while something there reads one (a
``detach()``: the user cut the gradient graph there). Each part that has a result requiring gradients becomes
a program of its own (`gradient_parts`), run in the
original order (`ProgramParts`: random numbers are drawn in eager's order, as the parts are runs of
consecutive statements). A tensor a part reads from an earlier one is handed over detached, so the later
part's node has no edge into the earlier one: a backward from it stops there, as eager's does.

A graph is left whole when it records no gradients, changes tensors from outside in place (their write-back
indexes are the whole program's), or has a single part with a result requiring gradients (the usual forward
of a model, its loss reaching everything). Results that are merely computed apart, with no tensor handed
over detached (two towers of a model fed two inputs), stay one program too: a forward is one graph. A
``backward()`` through one of them then still uses up the program's node for the other (a known limit).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

from .sir import Statement, StatementIR, Symbol


@dataclasses.dataclass(frozen=True)
class PartPlan:
    """One part: its SIR, and where each of its inputs comes from: ``(-1, i)`` the whole graph's input ``i``,
    ``(p, i)`` output ``i`` of the earlier part ``p``; ``detached``: positions of inputs fed detached."""

    sir: StatementIR
    sources: tuple[tuple[int, int], ...]
    detached: frozenset[int]


def _differentiable(sir: StatementIR, symbol: Symbol) -> bool:
    meta = sir.metas.get(symbol)
    return meta is not None and not meta.stop_gradient


def _cuts(sir: StatementIR) -> list[int]:
    """The positions ``k`` (a cut before statement ``k``) no gradient crosses while a tensor requiring gradients
    does: no statement at or after ``k`` with an output requiring gradients reads a tensor requiring gradients
    made before ``k``, and some statement there reads one (a ``detach()``, a shape read).

    Only those: the user cut the gradient graph there while using the value, so a pass from after the cut
    must stop there, as eager's does. Results merely computed apart (a model's two towers fed two inputs)
    stay one program, as a forward is one graph."""
    statements = sir.statements
    made_at: dict[Symbol, int] = {}
    # differentiated[k] > 0: some gradient edge (made at i, differentiated at j) has i < k <= j; read[k] > 0:
    # some tensor requiring gradients made at i is read at j, i < k <= j.
    differentiated = [0] * (len(statements) + 2)
    read = [0] * (len(statements) + 2)
    for j, statement in enumerate(statements):
        differentiable_result = any(_differentiable(sir, s) for s in statement.output_symbols())
        for symbol in statement.inputs():
            i = made_at.get(symbol)
            if i is not None and _differentiable(sir, symbol):
                for spans in ((differentiated, read) if differentiable_result else (read,)):
                    spans[i + 1] += 1
                    spans[j + 1] -= 1
        for symbol in statement.output_symbols():
            made_at[symbol] = j
    cuts, open_edges, open_reads = [], 0, 0
    for k in range(1, len(statements)):
        open_edges += differentiated[k]
        open_reads += read[k]
        if open_edges == 0 and open_reads > 0:
            cuts.append(k)
    return cuts


def _blocks(sir: StatementIR) -> list[range]:
    """Runs of consecutive statements between cuts, each with a result of the graph requiring gradients (a run
    without one joins the run before it, or the next one at the start)."""
    wanted = {s for s in sir.outputs if _differentiable(sir, s)}
    bounds = [0, *_cuts(sir), len(sir.statements)]
    blocks: list[range] = []
    start, has_result = 0, False
    for begin, end in zip(bounds, bounds[1:]):
        has_result = has_result or any(s in wanted for st in sir.statements[begin:end] for s in st.output_symbols())
        if has_result:
            blocks.append(range(start, end))
            start, has_result = end, False
    if start < len(sir.statements):  # (a tail without such a result: part of the last block)
        if not blocks:
            return [range(0, len(sir.statements))]
        blocks[-1] = range(blocks[-1].start, len(sir.statements))
    return blocks


def gradient_parts(sir: StatementIR) -> tuple[list[PartPlan], list[tuple[int, int]]] | None:
    """The parts of ``sir`` (None when it stays whole), and where each of its outputs comes from: ``(p, i)``,
    output ``i`` of part ``p``."""
    if not sir.grad_enabled or sir.written_back or sir.made_differentiable or len(sir.statements) < 2:
        return None
    blocks = _blocks(sir)
    if len(blocks) < 2:
        return None
    statements = sir.statements
    part_of: dict[Symbol, int] = {}
    for p, block in enumerate(blocks):
        for statement in statements[block.start:block.stop]:
            for symbol in statement.output_symbols():
                part_of[symbol] = p
    if any(s not in part_of for s in sir.outputs):  # (an output that is an input: not made by a statement)
        return None
    read_later: list[set[Symbol]] = [set() for _ in blocks]
    for p, block in enumerate(blocks):
        for statement in statements[block.start:block.stop]:
            for symbol in statement.inputs():
                q = part_of.get(symbol)
                if q is not None and q != p:
                    read_later[q].add(symbol)
    wanted = set(sir.outputs)
    outputs: list[list[Symbol]] = []
    for p, block in enumerate(blocks):
        made = [s for st in statements[block.start:block.stop] for s in st.output_symbols()]
        outputs.append([s for s in dict.fromkeys(made) if s in wanted or s in read_later[p]])
    graph_inputs = {symbol: i for i, symbol in enumerate(sir.inputs)}
    parts = []
    for p, block in enumerate(blocks):
        part_statements = list(statements[block.start:block.stop])
        inputs = _part_inputs(part_statements, part_of, p)
        metas = {s: sir.metas[s] for st in part_statements for s in st.output_symbols() if s in sir.metas}
        sources, detached = [], set()
        for position, symbol in enumerate(inputs):
            meta = sir.metas[symbol]
            if symbol in part_of:
                q = part_of[symbol]
                sources.append((q, outputs[q].index(symbol)))
                if not meta.stop_gradient:  # (only read, never differentiated, here: see `_cuts`)
                    detached.add(position)
                    meta = dataclasses.replace(meta, stop_gradient=True)
            else:
                sources.append((-1, graph_inputs[symbol]))
            metas[symbol] = meta
        part_sir = StatementIR(f"{sir.name}_part{p}", inputs, part_statements, outputs[p], metas,
                               grad_enabled=sir.grad_enabled)
        parts.append(PartPlan(part_sir, tuple(sources), frozenset(detached)))
    where = [(part_of[s], outputs[part_of[s]].index(s)) for s in sir.outputs]
    return parts, where


def _part_inputs(statements: list[Statement], part_of: dict[Symbol, int], part: int) -> list[Symbol]:
    """What a part reads that it does not make, in first-read order."""
    found: dict[Symbol, None] = {}
    for statement in statements:
        for symbol in statement.inputs():
            if part_of.get(symbol) != part:
                found.setdefault(symbol)
    return list(found)


class ProgramParts:
    """The programs of a graph's parts, called as one program: ``parts([inputs]) -> [outputs]``."""

    def __init__(self, sir: StatementIR, parts: list[tuple[Any, PartPlan]], where: list[tuple[int, int]]) -> None:
        self.sir = sir
        self.parts = parts
        self.where = where

    @property
    def programs(self) -> list[Any]:
        return [program for program, _ in self.parts]

    def __call__(self, inputs: list) -> list:
        results: list[list] = []
        for program, plan in self.parts:
            fed = []
            for position, (part, index) in enumerate(plan.sources):
                value = inputs[index] if part < 0 else results[part][index]
                fed.append(value.detach() if position in plan.detached else value)
            results.append(program(fed))
        return [results[part][index] for part, index in self.where]

    def __repr__(self) -> str:
        return f"ProgramParts({self.sir.name}: {', '.join(repr(p) for p in self.programs)})"


def split_sir_parts(sir: StatementIR, compile_part: Callable[[StatementIR], Any]) -> ProgramParts | None:
    """`ProgramParts` running ``sir`` (each part compiled by ``compile_part``), or None when it stays whole."""
    found = gradient_parts(sir)
    if found is None:
        return None
    parts, where = found
    return ProgramParts(sir, [(compile_part(plan.sir), plan) for plan in parts], where)



"""A recorded graph whose results belong to separate gradient graphs runs as one program per part.

Eager autograd gives every op its own grad node; a compiled program is one node for all of its outputs. A
``backward()`` without ``retain_graph`` frees the saved tensors of the nodes it runs, so a program's node is
used up by the first pass that reaches any of its outputs, including a pass whose gradient never flows into
the others. Eager code relies on that freedom: a GAN step runs ``loss_d.backward()`` on the discriminator fed
``fake.detach()``, then ``loss_g.backward()`` through ``fake``; eagerly the first pass never reaches the
generator's nodes, but with ``fake`` and ``loss_d`` from one program it consumed the program's node and the
second pass raised "The TensorWrappers of Dy2StGradNode do not exist" (and gave the generator's parameters a
gradient of zeros, where eager leaves them None).

Eager code relies on it in other ways too: an actor's and a critic's losses computed side by side, each
``backward()``-ed in turn (the second pass raised likewise), or one of two results ``backward()``-ed before
an optimizer steps over both models (the program gave the other model's parameters gradients of zeros, where
eager leaves them None: Adam and weight decay then moved them, a wrong answer).

So the statements are grouped by gradient: joined when one differentiates what another made (or reads a
value made without gradient). Each group with a result requiring gradients becomes a program of its own
(`gradient_parts`), the parts run in an order where each comes after those it reads from (`ProgramParts`). A
tensor requiring gradients that a part reads from another (through a ``detach()``: the user cut the gradient
graph there while using the value) is handed over detached, so the part's node has no edge into the other's:
a backward from it stops there, as eager's does. When the parts run in another order than the statements
were recorded, at most one of them may draw random numbers (`_may_draw_random_numbers`), so the draws stay in
eager's order; else the graph stays whole. It is still one compiled graph in `sot.stats()`: captured whole.

A tensor from outside changed in place (a discriminator's spectral-norm buffer) is written back by its part,
which holds the ops changing it. A graph is left whole when it records no gradients, or has a single group
with a result requiring gradients (the usual forward of a model, its loss reaching everything).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

from .sir import LayerCall, Statement, StatementIR, Symbol


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


class _Components:
    """Union-find over statement indexes."""

    def __init__(self, n: int) -> None:
        self.parent = list(range(n))

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def union(self, i: int, j: int) -> None:
        self.parent[self.find(i)] = self.find(j)


# Substrings of the names of Paddle functions and methods that draw random numbers, and the layers that do.
_RANDOM_NAMES = ("dropout", "rand", "uniform", "normal", "bernoulli", "multinomial", "poisson", "gumbel", "rrelu",
                 "exponential", "shuffle", "sample")


def _may_draw_random_numbers(statement: Statement) -> bool:
    """Whether running the statement may draw from the global generator (an unknown callee may)."""
    if statement.kind in ("pylayer", "call"):
        return True
    if isinstance(statement.target, LayerCall):
        if not statement.target.is_alive() or statement.target.runs_forward_hooks():
            return True
        return any(any(word in type(sub).__name__.lower() for word in _RANDOM_NAMES)
                   or (isinstance(getattr(sub, "dropout", None), float) and sub.dropout > 0)
                   for sub in statement.target.layer.sublayers(include_self=True))
    return any(word in statement.name.lower() for word in _RANDOM_NAMES)


def _part_order(count: int, first: list[int], needs: list[set[int]]) -> list[int] | None:
    """The parts in an order where each comes after those it reads from (earliest first statement first
    among the ready ones); None on a cycle."""
    done: list[int] = []
    left = set(range(count))
    while left:
        ready = [p for p in left if not (needs[p] & left)]
        if not ready:
            return None
        chosen = min(ready, key=first.__getitem__)
        done.append(chosen)
        left.remove(chosen)
    return done


def gradient_parts(sir: StatementIR) -> tuple[list[PartPlan], list[tuple[int, int]]] | None:
    """The parts of ``sir`` (None when it stays whole), and where each of its outputs comes from: ``(p, i)``,
    output ``i`` of part ``p``.

    Statements are joined when one differentiates what another made, or reads a value made without gradient
    (a mask, a detached copy: it goes with its reader). What is left apart is a read, by a statement whose
    results need no gradient (a ``detach()``), of a tensor requiring gradients: the user cut the gradient
    graph there. Groups with no result requiring gradients join the group they read from; each group with one
    is a part."""
    statements = sir.statements
    if not sir.grad_enabled or sir.made_differentiable or len(statements) < 2:
        return None
    made_at: dict[Symbol, int] = {}
    for j, statement in enumerate(statements):
        for symbol in statement.output_symbols():
            made_at[symbol] = j
    if any(s not in made_at for s in sir.outputs):  # (an output that is an input: not made by a statement)
        return None
    components = _Components(len(statements))
    detached_reads: list[tuple[int, int]] = []  # (maker, reader)
    for j, statement in enumerate(statements):
        differentiable_result = any(_differentiable(sir, s) for s in statement.output_symbols())
        for symbol in statement.inputs():
            i = made_at.get(symbol)
            if i is None:
                continue
            if _differentiable(sir, symbol) and not differentiable_result:
                detached_reads.append((i, j))
            else:
                components.union(i, j)
    members: dict[int, list[int]] = {}  # group (its union-find root) -> its statements, in order
    for j in range(len(statements)):
        members.setdefault(components.find(j), []).append(j)
    wanted = {components.find(made_at[s]) for s in sir.outputs if _differentiable(sir, s)}
    roots = sorted(wanted, key=lambda group: members[group][0])
    if len(roots) < 2:
        return None
    # A group without a result requiring gradients joins the first part it reads from (or the first part).
    part_of_root = {root: p for p, root in enumerate(roots)}
    part_of_statement = [part_of_root.get(components.find(j), -1) for j in range(len(statements))]
    read_from: dict[int, list[int]] = {}  # group -> the statements it reads detached
    for maker, reader in detached_reads:
        read_from.setdefault(components.find(reader), []).append(maker)
    orphans = []
    for group, indexes in members.items():
        if group not in part_of_root:
            sources = [part_of_statement[i] for i in read_from.get(group, ()) if part_of_statement[i] >= 0]
            if not sources:
                orphans.append(indexes)
            for j in indexes:
                part_of_statement[j] = sources[0] if sources else 0
    # A group reading nothing made in the graph goes with the part writing back an input it reads (the old value
    # of a buffer ``paddle.assign(new, buffer)`` reads is recorded apart from the new one), else the first.
    writer_of_input = {sir.inputs[input_index]: part_of_statement[made_at[sir.outputs[output]]]
                       for output, input_index, _, _ in sir.written_back}
    for indexes in orphans:
        writers = [writer_of_input[symbol] for j in indexes for symbol in statements[j].inputs()
                   if symbol in writer_of_input]
        for j in indexes:
            part_of_statement[j] = writers[0] if writers else 0
    crossing = [(part_of_statement[i], part_of_statement[j]) for i, j in detached_reads
                if part_of_statement[i] != part_of_statement[j]]
    count = len(roots)
    needs: list[set[int]] = [set() for _ in range(count)]
    for maker, reader in crossing:
        needs[reader].add(maker)
    in_part: list[list[int]] = [[] for _ in range(count)]
    for j, part in enumerate(part_of_statement):
        in_part[part].append(j)
    order = _part_order(count, [indexes[0] for indexes in in_part], needs)
    if order is None:
        return None
    running = [j for p in order for j in in_part[p]]
    if running != sorted(running):
        # Reordered: random numbers must still be drawn in eager's order, so at most one part may draw them.
        drawing = {part_of_statement[j] for j in range(len(statements)) if _may_draw_random_numbers(statements[j])}
        if len(drawing) > 1:
            return None
    return _plans(sir, [[statements[j] for j in in_part[p]] for p in order])


def _written_back_by_part(sir: StatementIR, part_of: dict[Symbol, int], part_inputs: list[list[Symbol]],
                          part_outputs: list[list[Symbol]]) -> list[tuple] | None:
    """`StatementIR.written_back` of each part: an input changed in place and its final value are in one part
    (the ops changing it read it); None when they are not (the graph then stays whole)."""
    found: list[list[tuple]] = [[] for _ in part_outputs]
    for output, input_index, changes, kept in sir.written_back:
        symbol, source = sir.outputs[output], sir.inputs[input_index]
        p = part_of.get(symbol)
        if p is None or source not in part_inputs[p]:
            return None
        found[p].append((part_outputs[p].index(symbol), part_inputs[p].index(source), changes, kept))
    return [tuple(entries) for entries in found]


def _plans(sir: StatementIR, groups: list[list[Statement]]) -> tuple[list[PartPlan], list[tuple[int, int]]] | None:
    """The parts running ``groups`` of statements in this order, each reading only the graph's inputs and
    what the parts before it made."""
    part_of: dict[Symbol, int] = {}
    for p, group in enumerate(groups):
        for statement in group:
            for symbol in statement.output_symbols():
                part_of[symbol] = p
    read_by_others: list[set[Symbol]] = [set() for _ in groups]
    for p, group in enumerate(groups):
        for statement in group:
            for symbol in statement.inputs():
                q = part_of.get(symbol)
                if q is not None and q != p:
                    read_by_others[q].add(symbol)
    wanted = set(sir.outputs)
    outputs: list[list[Symbol]] = []
    for p, group in enumerate(groups):
        made = [s for statement in group for s in statement.output_symbols()]
        outputs.append([s for s in dict.fromkeys(made) if s in wanted or s in read_by_others[p]])
    graph_inputs = {symbol: i for i, symbol in enumerate(sir.inputs)}
    inputs_of = [_part_inputs(group, part_of, p) for p, group in enumerate(groups)]
    written_back = _written_back_by_part(sir, part_of, inputs_of, outputs)
    if written_back is None:
        return None
    parts = []
    for p, group in enumerate(groups):
        inputs = inputs_of[p]
        metas = {s: sir.metas[s] for st in group for s in st.output_symbols() if s in sir.metas}
        sources, detached = [], set()
        for position, symbol in enumerate(inputs):
            meta = sir.metas[symbol]
            if symbol in part_of:
                q = part_of[symbol]
                sources.append((q, outputs[q].index(symbol)))
                if not meta.stop_gradient:  # (only read, never differentiated, here: see `gradient_parts`)
                    detached.add(position)
                    meta = dataclasses.replace(meta, stop_gradient=True)
            else:
                sources.append((-1, graph_inputs[symbol]))
            metas[symbol] = meta
        part_sir = StatementIR(f"{sir.name}_part{p}", inputs, group, outputs[p], metas, grad_enabled=sir.grad_enabled,
                               written_back=written_back[p])
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



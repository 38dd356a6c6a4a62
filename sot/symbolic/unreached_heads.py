"""Tensors that only the results a backward pass did not reach depend on keep no gradient, as in eager.

A compiled program is one grad node. A backward pass reaching any of its results runs the whole node, and
Paddle fills the gradients of the results the pass did not reach with zeros: every parameter the program
reads gets a gradient, zeros where nothing flowed. Eager leaves a tensor that only the unreached results
depend on without gradient (None): an auxiliary classifier's parameters when only the main output is
``backward()``-ed (GoogLeNet), one task head's in a step training another, the later layers of an encoder
when one of its earlier hidden states is differentiated. Optimizers tell the two apart: Adam's moments and
AdamW's weight decay move a parameter whose gradient is zeros, and skip one whose gradient is None.

Splitting such a graph into a program per head would give each its own node, but the sums of the gradients
flowing back into the trunk would then be made by Paddle's engine in another order than eager's (the whole
program's backward adds them in eager's order: bit-identical gradients), and every call would pay a program
call per head. So the program stays whole, and the pass is corrected after the fact: a hook on each
differentiable result notes whether the pass brought it a gradient (Paddle calls it with None when not), and
when the pass ends, each such tensor (a leaf: a parameter of a built-in layer the program calls, or a
differentiable leaf input) that had no gradient before the pass, that none of the reached results depend on,
and whose gradient is all zeros, gets None again. A ``paddle.grad`` pass gets None for such a target (or
eager's error, without ``allow_unused``): its results are corrected as it returns them
(`backward_pass.BackwardPass.result_fixes`).

Only graphs with such tensors pay the hooks (`head_leaves` is None for the usual forward, whose every
parameter reaches every result). Not corrected: graphs with a statement whose reads are unknown (a PyLayer, a
nested call, a layer with forward hooks), and non-leaf inputs (the zeros flow on into the graph before the
program: the leaves there get zeros, as they did). A leaf whose gradient from the rest of the pass is exactly
zero gets None too (eager: zeros), for want of telling the two apart.
"""
from __future__ import annotations

import inspect
from typing import Any

import paddle
import paddle.nn.functional as F

from . import backward_pass
from .pytree import leaves
from .sir import LayerCall, Statement, StatementIR, Symbol


class HeadLeaves:
    """Of one graph: the leaves it reads, each with the results (indexes into the graph's outputs) that depend
    on it; `watch_call` corrects those some differentiable result does not depend on."""

    def __init__(self, inputs: dict[int, frozenset[int]], layers: list[tuple[LayerCall, frozenset[int]]],
                 constants: list[tuple[paddle.Tensor, frozenset[int]]], results: tuple[int, ...]) -> None:
        self.inputs = inputs  # input position -> results reaching it
        self.layers = layers
        self.constants = constants
        self.results = results  # the differentiable results
        self._held: dict[int, tuple[paddle.Tensor, frozenset[int]]] | None = None
        self._held_partial: list[tuple[paddle.Tensor, frozenset[int]]] | None = None

    def held(self) -> dict[int, tuple[paddle.Tensor, frozenset[int]]]:
        """The tensors the program holds (the parameters of its layers, its tensor arguments) by ``id``, with
        the results reaching them: resolved at the first call (the program holds the very tensors it was
        traced with: a replaced parameter makes a new program)."""
        if self._held is None:
            held: dict[int, tuple[paddle.Tensor, frozenset[int]]] = {}
            found = [(p, reach) for call, reach in self.layers if call.is_alive()
                     for p in call.layer.parameters()] + self.constants
            for tensor, reach in found:
                if not tensor.stop_gradient:
                    held[id(tensor)] = (tensor, held.get(id(tensor), (tensor, frozenset()))[1] | reach)
            self._held = held
        return self._held

    def held_partial(self) -> list[tuple[paddle.Tensor, frozenset[int]]]:
        """`held` without the tensors every differentiable result reaches."""
        if self._held_partial is None:
            every = frozenset(self.results)
            self._held_partial = [(t, reach) for t, reach in self.held().values() if reach != every]
        return self._held_partial


def _differentiable(sir: StatementIR, symbol: Symbol) -> bool:
    meta = sir.metas.get(symbol)
    return meta is not None and not meta.stop_gradient


# Operands eager's grad node of an op does not differentiate (3.3.1), by the statement's target (a function of
# an ``api`` statement, a method name): their ``.grad`` stays None, where the program's backward fills zeros.
_OPERANDS_WITHOUT_EAGER_GRADIENT: dict[Any, tuple[str, ...]] = {
    paddle.lerp: ("weight",), "lerp": ("weight",), "lerp_": ("weight",),
    paddle.scale: ("scale",), "scale": ("scale",), "scale_": ("scale",),
    paddle.expand_as: ("y",), "expand_as": ("y",),
    F.label_smooth: ("prior_dist",),
    F.softmax_with_cross_entropy: ("label",), F.cross_entropy: ("label",),
    paddle.clip: ("min", "max"), paddle.tensor.clip_: ("min", "max"), "clip": ("min", "max"), "clip_": ("min", "max"),
    "type_as": ("other",),
    # (indices: an int tensor made by an op eager records, ``argsort``, may require gradients)
    paddle.take_along_axis: ("indices",), "take_along_axis": ("indices",),
    paddle.put_along_axis: ("indices",), "put_along_axis": ("indices",), "put_along_axis_": ("indices",),
    paddle.gather: ("index",), "gather": ("index",), paddle.gather_nd: ("index",), "gather_nd": ("index",),
    paddle.index_select: ("index",), "index_select": ("index",), paddle.index_sample: ("index",),
    "index_sample": ("index",), paddle.scatter: ("index",), "scatter": ("index",), "scatter_": ("index",),
    paddle.scatter_nd_add: ("index",), "scatter_nd_add": ("index",), paddle.index_add: ("index",),
    "index_add": ("index",), "index_add_": ("index",), paddle.index_put: ("indices",), "index_put": ("indices",),
    "index_put_": ("indices",), F.embedding: ("x",),
}


def _signature(target: Any) -> inspect.Signature | None:
    try:
        return inspect.signature(getattr(paddle.Tensor, target) if isinstance(target, str) else target)
    except (AttributeError, TypeError, ValueError):
        return None


def _operands_without_gradient(statement: Statement) -> set[Symbol]:
    """The symbols ``statement`` reads only as operands its op's eager backward does not differentiate."""
    try:
        parameters = _OPERANDS_WITHOUT_EAGER_GRADIENT.get(statement.target)
    except TypeError:  # (an unhashable target)
        return set()
    if not parameters or statement.kind not in ("api", "method"):
        return set()
    signature = _signature(statement.target)
    try:
        bound = signature.bind(*statement.args, **statement.kwargs) if signature is not None else None
    except TypeError:
        bound = None
    if bound is None:
        return set()

    def symbols(value: Any) -> set[Symbol]:
        return {leaf for leaf in leaves(value) if isinstance(leaf, Symbol)}

    without = set().union(*(symbols(value) for name, value in bound.arguments.items() if name in parameters))
    differentiated = set().union(*(symbols(value) for name, value in bound.arguments.items()
                                   if name not in parameters))
    return without - differentiated  # (a symbol also passed where the op differentiates it keeps its gradient)


def differentiated_inputs(statement: Statement) -> list[Symbol]:
    """The symbols ``statement`` reads that its gradient flows into."""
    without = _operands_without_gradient(statement)
    return [symbol for symbol in statement.inputs() if symbol not in without]


def _has_operands_without_gradient(sir: StatementIR) -> bool:
    return any(_operands_without_gradient(statement) for statement in sir.statements)


def results_reached(sir: StatementIR) -> list[frozenset[int]]:
    """For each statement, the differentiable results of the graph (their indexes) whose gradients flow back
    into it."""
    statements = sir.statements
    made_at = {symbol: j for j, statement in enumerate(statements) for symbol in statement.output_symbols()}
    results: dict[Symbol, set[int]] = {}
    for k, symbol in enumerate(sir.outputs):
        if _differentiable(sir, symbol):
            results.setdefault(symbol, set()).add(k)
    reach: list[set[int]] = [set() for _ in statements]
    for j in reversed(range(len(statements))):
        statement = statements[j]
        if not any(_differentiable(sir, s) for s in statement.output_symbols()):
            reach[j].clear()  # (no gradient flows through it)
            continue
        for symbol in statement.output_symbols():
            reach[j] |= results.get(symbol, set())
        for symbol in differentiated_inputs(statement):
            i = made_at.get(symbol)
            if i is not None and _differentiable(sir, symbol):
                reach[i] |= reach[j]
    return [frozenset(r) for r in reach]


def head_leaves(sir: StatementIR) -> HeadLeaves | None:
    """The leaves of ``sir`` that some differentiable result does not depend on; None when there are none
    (every leaf reaches every result: nothing to correct, no hook)."""
    every = frozenset(k for k, s in enumerate(sir.outputs) if _differentiable(sir, s))
    if not sir.grad_enabled or not every or len(every) < 2 and not _has_operands_without_gradient(sir):
        return None
    reach = results_reached(sir)
    by_input: dict[int, frozenset[int]] = {}
    positions = {symbol: i for i, symbol in enumerate(sir.inputs)}
    layers: dict[int, tuple[LayerCall, frozenset[int]]] = {}
    constants: dict[int, tuple[paddle.Tensor, frozenset[int]]] = {}
    for j, statement in enumerate(sir.statements):
        for symbol in statement.inputs():  # (read only where no gradient flows: reaching no result)
            if symbol in positions and _differentiable(sir, symbol):
                by_input.setdefault(positions[symbol], frozenset())
        if not reach[j]:
            continue
        for symbol in differentiated_inputs(statement):
            if symbol in positions and _differentiable(sir, symbol):
                by_input[positions[symbol]] = by_input.get(positions[symbol], frozenset()) | reach[j]
        target = statement.target
        if isinstance(target, LayerCall):
            _, known = layers.get(id(target), (target, frozenset()))
            layers[id(target)] = (target, known | reach[j])
        for leaf in paddle.utils.flatten((statement.args, statement.kwargs)):
            if isinstance(leaf, paddle.Tensor) and not leaf.stop_gradient:
                _, known = constants.get(id(leaf), (leaf, frozenset()))
                constants[id(leaf)] = (leaf, known | reach[j])
    if all(reach == every for reach in [*by_input.values(), *(r for _, r in layers.values()),
                                        *(r for _, r in constants.values())]):
        return None
    if any(statement.kind in ("pylayer", "call") or (isinstance(statement.target, LayerCall) and (
            not statement.target.is_alive() or statement.target.runs_forward_hooks()))
            for statement in sir.statements):
        return None  # (reads unknown tensors, which may be anything the rest reads too: not corrected)
    return HeadLeaves(by_input, list(layers.values()), list(constants.values()), tuple(sorted(every)))


class _CallWatch:
    """One call's hooks: which of its results the running pass reached, and the leaves to correct at its end."""

    __slots__ = ("leaves", "candidates", "reached", "pending")

    def __init__(self, leaves: list[tuple[paddle.Tensor, frozenset[int]]]) -> None:
        self.leaves = leaves
        self.candidates: list[tuple[paddle.Tensor, frozenset[int]]] = []
        self.reached: set[int] = set()
        self.pending = False

    def on_result_gradient(self, index: int, grad: Any) -> None:
        if not self.pending:  # (the first hook of this pass through the call: before its node runs)
            self.pending = True
            running = backward_pass.current()
            if running is not None and running.partial:  # (``paddle.grad``: its results, not ``.grad``)
                self.candidates = [(leaf, reach) for leaf, reach in self.leaves if id(leaf) in running.targets]
                running.result_fixes.append(lambda results: self.fix_results(running, results))
            else:
                self.candidates = [(leaf, reach) for leaf, reach in self.leaves if leaf.grad is None]
                if not backward_pass.at_pass_end(self.finish):
                    self.pending = False
                    return
        if grad is not None:
            self.reached.add(index)

    def _unreached(self) -> dict[int, paddle.Tensor]:
        """The candidates none of whose results the pass reached, by ``id``."""
        unreached = {id(leaf): leaf for leaf, reach in self.candidates if not (reach & self.reached)}
        for leaf, reach in self.candidates:  # (a leaf listed twice, reached through one of them)
            if reach & self.reached:
                unreached.pop(id(leaf), None)
        return unreached

    def fix_results(self, running: backward_pass.BackwardPass, results: Any) -> Any:
        """The results of a ``paddle.grad`` pass, with None for the targets only unreached results depend on
        (or eager's error without ``allow_unused``)."""
        unreached = self._unreached()
        self.candidates, self.reached, self.pending = [], set(), False
        if not unreached or not isinstance(results, (list, tuple)):
            return results
        fixed = list(results)
        for i, (target, result) in enumerate(zip(running.inputs, fixed)):
            if id(target) in unreached and result is not None and not bool((result != 0).any()):
                if not running.allow_unused:
                    raise ValueError(f"(InvalidArgument) The {i}-th input does not appear in the backward graph. "
                                     "Please check the input tensor or set allow_unused=True to get None result.")
                fixed[i] = None
        return fixed if isinstance(results, list) else type(results)(fixed)

    def finish(self) -> None:
        for leaf in self._unreached().values():
            grad = leaf.grad
            if grad is not None and not bool((grad != 0).any()):
                leaf.clear_gradient(False)
        self.candidates, self.reached, self.pending = [], set(), False


def watch_call(heads: HeadLeaves, inputs: list, outputs: list) -> None:
    """Hook the differentiable ``outputs`` of a call run with gradients so that the leaves only unreached
    results depend on keep no gradient (see the module's docstring)."""
    every = frozenset(heads.results)
    from_inputs = [(value, reach) for value, reach in ((inputs[i], r) for i, r in heads.inputs.items())
                   if isinstance(value, paddle.Tensor) and not value.stop_gradient and value.is_leaf]
    if from_inputs:
        found = dict(heads.held())
        for value, reach in from_inputs:
            found[id(value)] = (value, found.get(id(value), (value, frozenset()))[1] | reach)
        leaves = [(tensor, reach) for tensor, reach in found.values() if reach != every]
    else:
        leaves = heads.held_partial()
    if not leaves:
        return
    watch = _CallWatch(leaves)
    for index in heads.results:
        out = outputs[index]
        if isinstance(out, paddle.Tensor) and not out.stop_gradient:
            out._register_grad_hook(lambda grad, index=index: watch.on_result_gradient(index, grad))

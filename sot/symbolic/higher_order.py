"""Backward passes a compiled program's own grad node cannot take: a second one, or one that is differentiated.

Paddle's program op (``run_program``) keeps the values its backward reads in a scope that its first backward
frees, and the gradients it gives have no gradient of their own. Eager autograd allows both: ``backward(
retain_graph=True)`` then another ``backward()``, and ``paddle.grad(..., create_graph=True)`` followed by a
backward through the gradient (a WGAN-GP gradient penalty, a physics-informed loss, a Hessian-vector product);
after ``create_graph`` the loss usually reaches the program's outputs a second time too. None of this can be
seen at the forward call, and it cannot be repaired once a backward pass reaches the program's grad node.

So the calls that may be differentiated so (`needs_recomputed_backward`) are run with a recomputing backward
instead (`run_with_recomputed_backward`): the program runs forward only, without a grad node; each output is
linked to the differentiable tensors it depends on (inputs and held parameters, `output_groups`, flattened
into one ``packed`` tensor) by subtracting 0.0 computed from them, which changes no value. In a backward pass,
hooks on the linked outputs note their gradients, and the hook on ``packed``, reached last, replaces the zeros
it gets by the gradients computed by a second compiled program, the vector-Jacobian product of the first
(`vjp_sir`: the forward statements again, then ``paddle.grad`` in static mode), with the forward's random
state, from the values the forward saw (`recompute_plan`: copies of the inputs eager's backward would not
read, refused as eager refuses when one it reads changed in place). A fresh run each
time, it can run in any number of passes. In a ``create_graph`` pass it is itself a recorded call of a compiled
program, with the same inputs: it is run with a recomputing backward in turn, so derivatives of every order
stay compiled (built from decomposed gradients from the second order on, `decomposed_gradients`; a gradient
Paddle's static ops lack raises naming the op, as eager does). A product program is differentiated only for the
outputs a gradient reached in the pass, as eager's backward runs only the nodes it reaches; and one with
differentiable outputs is built without a backward of its own (``forward_only``, see `CompiledProgram`):
Paddle's program runner would build one at its first run, and refuse an op without a gradient op of its own
(``exp_grad``, ``embedding_grad``), where eager differentiates the gradient through its own node or not at all.

Why not the obvious tools (Paddle 3.3): ``paddle.grad`` called inside a backward pass (from a hook, or a
PyLayer's backward) corrupts the engine of the outer ``paddle.grad`` (a segmentation fault); a PyLayer node
crashes when a backward reaches it after ``backward(retain_graph=True)``, and must return None for each input
``paddle.grad`` does not ask for, which it cannot tell; and a hook runs in the ambient grad mode whatever
``create_graph`` is, which `_zero_of` makes visible.

Which calls (`needs_recomputed_backward`): those with an input requiring grad that is a leaf and not a parameter
(a tensor the user asked gradients for: a gradient penalty's sample, a physics-informed loss's points), or that
is not an output of a compiled program run with its own backward (an activation after a graph break in such
a model, coordinates concatenated into points by eager code). Calls of ordinary training (inputs that do not
require grad, parameters, activations a resume function gets from the program before it) keep the program's
own backward and pay one check per input and a mark per output. The price, on
the calls that take this path: the backward recomputes the forward (as activation checkpointing does), plus a
few eager ops and hooks per call.

The gradients of *parameters* under ``create_graph`` through a call run with its program's own backward (a
Hessian-vector product with respect to the weights of a model called on data) come from that grad node, which
cannot record anything: the call keeps what a recomputation needs (`OwnBackwardCall`: its inputs, by reference,
and their inplace versions; nothing is computed), the hooks on its outputs note their gradients in a
``create_graph`` pass, and when the pass ends (outside it, `differentiable_parameter_gradients`) each
parameter's gradient ``g`` the pass returns becomes ``g + (d - d.detach())``, where ``d`` is the sum over those
calls of the parameter's gradient computed by the call's product program with ``create_graph`` (recorded, run
with a recomputing backward): the value stays the program's, the derivative is eager's. A call reading an output of
another such call (after a graph break, a model applied twice) gets from its product program the derivative of
the gradient its node gave that output, added to the other call's cotangent the same way before that call's
turn. Ordinary training pays one list, the inputs' versions and a mark per output per call, and nothing per
backward pass.
"""
from __future__ import annotations

import contextlib
import itertools
import operator
import weakref
from typing import TYPE_CHECKING, Any, Callable, Iterator

import paddle
from paddle import _C_ops
from paddle.base import core
from paddle.base.core import _set_has_grad
from paddle.base.framework import EagerParamBase

from ..errors import SotError
from . import backward_pass
from .backward_pass import pass_keeps_graph
from .kept_scope import OWN_BACKWARD_OUTPUT
from .program_ops import forward_ops
from .pytree import leaves
from .recompute_plan import HELD_COPIES, ForwardState, released_error
from .sir import LayerCall, MetaInfo, Statement, StatementIR, Symbol
from .unreached_heads import differentiated_inputs
from .version_check import parameters_read, producers, statements_reached

if TYPE_CHECKING:
    from .compile import CompiledProgram

_vjp_names = itertools.count()


# Set on the differentiable outputs of a compiled program's call: the output's inplace version when the
# program's own grad node makes its gradients, None when the call was run with a recomputing backward. (An
# output changed in place since has a grad node of that change, which may lead to a leaf: no longer the
# program's output alone.)
PROGRAM_OUTPUT_VERSION = "_sot_program_output_version"


def needs_recomputed_backward(inputs: list, grad_inputs: list[int]) -> bool:
    """Whether the call on ``inputs`` is one that may be differentiated twice: it has an input requiring grad
    that is a leaf and not a parameter, or that is not an output of a compiled program run with its own
    backward, unchanged since (one of a call run with a recomputing backward, a tensor eager ops made or
    changed in place: maybe from such a leaf, as the points of a physics-informed loss concatenated from
    coordinates; maybe from parameters only, then the call pays the recomputation without need). (Following a
    tensor's grad nodes back would tell, but reading ``Tensor.grad_fn`` leaks the node, and what it keeps, in
    Paddle 3.3.)"""
    for index in grad_inputs:
        tensor = inputs[index]
        if tensor.stop_gradient:
            continue
        if tensor.is_leaf:
            if not isinstance(tensor, EagerParamBase):
                return True
        elif getattr(tensor, PROGRAM_OUTPUT_VERSION, None) != tensor._inplace_version():
            return True
    return False


def mark_outputs(outputs: list, recomputed: bool) -> None:
    """Mark the differentiable outputs of a call recording gradients (see `PROGRAM_OUTPUT_VERSION`)."""
    for output in outputs:
        if isinstance(output, paddle.Tensor) and not output.stop_gradient:
            setattr(output, PROGRAM_OUTPUT_VERSION, None if recomputed else output._inplace_version())


class _GradientOfOutputs:
    """The last statement of a product program: ``paddle.grad`` of the forward's outputs with respect to its
    differentiable inputs and the parameters the program holds, in static mode (a program building itself)."""

    def __init__(self, parameters: list[paddle.Tensor], create_graph: bool) -> None:
        self.parameters = parameters
        self.create_graph = create_graph

    def __call__(self, outputs: list, inputs: list, cotangents: list) -> tuple:
        if paddle.in_dynamic_mode():
            # An eager replay: ``paddle.grad`` inside the backward pass that runs this would corrupt Paddle's
            # engine. (A product program is never replayed by choice; this is the replay after a failure.)
            raise SotError("sot: a gradient of a compiled program's gradient failed to build as a program, "
                           "and it cannot be computed eagerly inside a backward pass")
        from paddle.jit.dy2static.parameter_recorder import _global_parameter_recorder

        program = paddle.static.default_main_program()
        targets = list(inputs) + [_global_parameter_recorder.get(program, p) for p in self.parameters]
        grads = paddle.grad(outputs, targets, cotangents, create_graph=self.create_graph, allow_unused=True)
        grads = [paddle.zeros_like(t) if g is None else g for g, t in zip(grads, targets)]
        if not self.create_graph:
            # Outputs not differentiable: the program is built without a backward of its own (which would need
            # the next order of derivatives, which some ops lack).
            for grad in grads:
                grad.stop_gradient = True
        return tuple(grads)


def differentiates_gradients(sir: StatementIR) -> bool:
    """Whether ``sir`` is a product program already: its own product is of second order or more."""
    return any(isinstance(stmt.target, _GradientOfOutputs) for stmt in sir.statements)


# Grad ops whose gradient Paddle's prim backward decomposes wrongly, kept whole by `decomposed_gradients`
# (their own static gradient op is right). ``batch_norm_grad`` in training mode: the gradient with respect to the
# input of ``sum(g * g) + mean(out)``, ``g`` the gradient of ``tanh(batch_norm(linear(x))).sum()``, came out
# 0.158 where finite differences, eager and Paddle's static ``batch_norm_double_grad`` give 0.382 (Paddle 3.3,
# float64, reproduced with ``paddle.static.gradients`` alone).
_WRONG_WHEN_DECOMPOSED = ("batch_norm_grad",)


@contextlib.contextmanager
def decomposed_gradients() -> Iterator[None]:
    """Paddle's static gradients built from primitive ops (its "prim" backward) while a product program of
    second order or more is built: the gradients of some double-gradient ops are wrong in static mode (Paddle
    3.3: the third derivative of ``x * x.sum()`` came out 7 where eager gives 12; decomposed, 12), and others
    have none (``matmul_triple_grad``). The ops of `_WRONG_WHEN_DECOMPOSED` stay whole (added to Paddle's
    blacklist for the while, unless already there)."""
    before = core._is_bwd_prim_enabled()
    added = [name for name in _WRONG_WHEN_DECOMPOSED if name not in core.prim_config["backward_blacklist"]]
    core._set_prim_backward_enabled(True)
    if added:
        core._set_prim_backward_blacklist(*added)
    try:
        yield
    finally:
        for name in added:
            core._remove_skip_comp_ops(name)
            core.prim_config["backward_blacklist"].discard(name)
        core._set_prim_backward_enabled(before)


def vjp_sir(sir: StatementIR, grad_inputs: list[int], grad_outputs: list[int], cotangent_metas: list[MetaInfo],
            parameters: list[paddle.Tensor], create_graph: bool) -> StatementIR:
    """The vector-Jacobian product of ``sir``: inputs are ``sir``'s followed by one cotangent per output of
    ``grad_outputs``; outputs the gradients of the inputs of ``grad_inputs``, then of ``parameters``,
    differentiable in turn if ``create_graph``."""
    serial = next(_vjp_names)
    cotangents = [Symbol(f"cot{serial}_{i}") for i in range(len(grad_outputs))]
    grads = [Symbol(f"grad{serial}_{i}") for i in range(len(grad_inputs) + len(parameters))]
    metas = dict(sir.metas)
    metas.update(zip(cotangents, cotangent_metas))
    differentiable = [sir.metas[sir.inputs[i]] for i in grad_inputs] + [
        MetaInfo(tuple(p.shape), p.dtype, True) for p in parameters]
    metas.update((g, MetaInfo(m.shape, m.dtype, not create_graph)) for g, m in zip(grads, differentiable))
    gradient = Statement("api", "paddle.grad", _GradientOfOutputs(parameters, create_graph),
                         ([sir.outputs[i] for i in grad_outputs], [sir.inputs[i] for i in grad_inputs],
                          cotangents), {}, tuple(grads), weight=2 * max(1, sir.op_count()))
    return StatementIR(f"{sir.name}_vjp", list(sir.inputs) + cotangents, list(sir.statements) + [gradient],
                       grads, metas, sir.grad_enabled)


class _RecomputedCall:
    """One group of outputs of a call run with a recomputing backward (`output_groups`), and what its hooks
    need to compute the gradients of the tensors those outputs depend on.

    The hooks on the outputs note the gradients reaching them in a backward pass; the hooks on the differentiable
    tensors (each flattened, then packed into the link) run last in the pass (every output's gradient reaches
    them through the link): the first computes the product program's results, and each replaces the zeros it
    receives by its tensor's. (One hook per tensor, not one on the pack: the gradient returned for the pack
    would reach each tensor through the pack's split, whose gradient, under ``create_graph``, links each
    tensor's gradient to every other's, which then got zeros where eager gives None.)"""

    __slots__ = ("program", "inputs", "grad_positions", "parameters", "output_grads", "forward_state", "results")

    def __init__(self, program: "CompiledProgram", inputs: list, grad_positions: tuple[int, ...],
                 parameters: tuple[paddle.Tensor, ...], forward_state: ForwardState) -> None:
        self.program, self.inputs, self.grad_positions, self.parameters = program, inputs, grad_positions, \
            parameters
        self.output_grads: dict[int, paddle.Tensor] = {}  # of the group's outputs, noted in the current pass
        self.forward_state: ForwardState | None = forward_state  # None once released (`_release`)
        # The pass that computed the tensors' gradients, and those gradients (`tensor_hook`).
        self.results: tuple[backward_pass.BackwardPass | None, list[paddle.Tensor]] | None = None

    def output_hook(self, index: int) -> Callable[[paddle.Tensor], None]:
        def note(grad: paddle.Tensor) -> None:
            if not self.output_grads:
                # A pass may end before the inputs' hook runs (``paddle.grad`` of an output itself): what it
                # noted must not reach the next pass.
                backward_pass.at_pass_end(self.output_grads.clear)
            self.output_grads[index] = grad

        return note

    def tensor_hook(self, position: int) -> Callable[[paddle.Tensor], paddle.Tensor]:
        """The hook on the flattened differentiable tensor at ``position`` among the call's (see the class)."""
        def gradient(zeros: paddle.Tensor) -> paddle.Tensor:
            if not zeros.is_leaf:  # (under ``create_graph``: see `input_gradients`)
                self._refuse_as_eager(position)
            running = backward_pass.current()
            if self.results is None or self.results[0] is not running:
                self.results = (running, self.input_gradients(zeros))
                backward_pass.at_pass_end(self._forget_results)  # (a pass may not reach every tensor's hook)
            return _C_ops.reshape(self.results[1][position], [-1])

        return gradient

    def _refuse_as_eager(self, position: int) -> None:
        """Raise what eager raises when the gradient of the tensor at ``position`` is taken with
        ``create_graph`` (`EagerRefusals`), if anything."""
        refusals = self.program.eager_refusals
        if refusals is None or not refusals.first:
            return
        inputs = len(self.grad_positions)
        if position < inputs and not self.inputs:
            return  # (released: `input_gradients` raises eager's error of a second pass)
        if position < inputs:
            key, tensor = ("input", self.grad_positions[position]), self.inputs[self.grad_positions[position]]
        else:
            tensor = self.parameters[position - inputs]
            key = ("parameter", id(tensor))
        refused = refusals.first.get(key)
        running = backward_pass.current()
        if refused is None or (running is not None and tensor.is_leaf and id(tensor) not in running.targets):
            return  # (a leaf whose gradient the pass does not ask for: eager never runs the nodes refusing)
        backward_pass.refuse_as_eager(refused)

    def _forget_results(self) -> None:
        """(At the end of the pass, `backward_pass.at_pass_end`; the results also name their pass, when it is
        recorded.)"""
        self.results = None

    def input_gradients(self, zeros: paddle.Tensor) -> list[paddle.Tensor]:
        """The gradients of the call's differentiable tensors in this pass. Under ``create_graph``, the zeros a
        tensor's hook gets are made by recorded ops (`_zero_of`: they have a grad node, they are no leaf), else
        by none: the only sign of it a hook has (it runs in the ambient grad mode)."""
        create_graph = not zeros.is_leaf
        output_grads = dict(self.output_grads)
        self.output_grads.clear()  # (the next pass notes its own)
        forward_state = self.forward_state
        if forward_state is None:
            raise released_error(self.program.sir.name)
        # By output index (the groups interleave: ``(a.sum(), b.sum(), a.mean())`` has groups [0, 2] and [1]).
        # Outputs without gradient in this pass are left out: `CompiledProgram.input_gradients` differentiates
        # only those a gradient reached.
        grads = {index: grad for index, grad in output_grads.items() if grad is not None and grad._is_initialized()}
        forward_state.check_unchanged(self.program, list(grads))
        state_now = paddle.get_rng_state()
        paddle.set_rng_state(forward_state.random_state)
        # The recomputed forward updates a batch norm's running statistics again (held by a layer statement's
        # program, or inputs of an ``F.batch_norm`` statement): eager's backward leaves them as they are, values
        # and inplace versions (put back by a copy that bumps no version: an eager batch norm node of the same
        # layer, from an earlier call, checks the statistics' version in its backward).
        inputs = forward_state.recomputation_inputs(self.inputs)
        with paddle.no_grad():
            state = [(tensor, tensor.clone()) for tensor in self.program.state_its_forward_may_update(inputs)]
        try:
            with forward_state.held_values():
                result = self.program.input_gradients(inputs, grads, self.grad_positions, self.parameters,
                                                      create_graph)
        finally:
            paddle.set_rng_state(state_now)
            with paddle.no_grad():
                for tensor, value in state:
                    if not bool(paddle.equal_all(tensor, value)):
                        tensor.copy_(value, False)
        if not pass_keeps_graph():
            self._release()
        return result

    def _release(self) -> None:
        """Let go of what the forward left for the recomputation, as eager's nodes clear their saved tensors
        at the end of a pass that does not keep the graph (a later pass through this group raises)."""
        self.inputs = []
        self.forward_state = None


# Statements whose gradient does not read the values of the tensors they compute from (by target: a callable for
# ``api``, a name for ``method``): an input reaching only such statements may change in place after the call,
# the recomputed gradient stays eager's. Of `_EVERY_OPERAND_IS_DATA`, every tensor operand is such data; of
# `_FIRST_OPERAND_IS_DATA`, only the first argument: the others (the index of ``x[index]``, a shape, an axis, the
# scale of ``paddle.scale``) say where the gradient goes, and are read. A product and a quotient only by a
# number (`_operands_read`).
_EVERY_OPERAND_IS_DATA: frozenset = frozenset([
    operator.add, operator.iadd, operator.sub, operator.isub, operator.neg, operator.pos, paddle.add,
    paddle.subtract, paddle.concat, paddle.stack, paddle.cast, paddle.assign, paddle.clone,
    "__add__", "__radd__", "__iadd__", "__sub__", "__rsub__", "__isub__", "__neg__", "astype", "cast", "clone",
    # (eager's ``expand_as_grad`` keeps no buffer of ``x`` and nothing of ``y``, whose shape only is read)
    paddle.expand_as, "expand_as",
])
_FIRST_OPERAND_IS_DATA: frozenset = frozenset([
    operator.getitem, paddle.reshape, paddle.transpose, paddle.sum, paddle.mean, paddle.flatten, paddle.squeeze,
    paddle.unsqueeze, paddle.split, paddle.chunk, paddle.scale, paddle.expand, paddle.broadcast_to, paddle.tile,
    "__getitem__", "reshape", "transpose", "sum", "mean", "flatten", "squeeze", "unsqueeze", "expand",
    "broadcast_to", "tile", "scale", "split", "chunk",
])
_TIMES_A_NUMBER = frozenset([operator.mul, operator.imul, "__mul__", "__rmul__", "__imul__"])
_DIVIDED_BY_A_NUMBER = frozenset([operator.truediv, operator.itruediv, "__truediv__", "__itruediv__"])


def _operands_read(stmt: Statement) -> list[Symbol]:
    """The operands of ``stmt`` whose values its gradient may read (all of them when not known)."""
    operands = stmt.inputs()
    if stmt.kind not in ("api", "method"):
        return operands
    try:
        if stmt.target in _EVERY_OPERAND_IS_DATA:
            return []
        if stmt.target in _FIRST_OPERAND_IS_DATA and stmt.args:
            data = {id(leaf) for leaf in leaves(stmt.args[0])}
            return [operand for operand in operands if id(operand) not in data]
        if stmt.target in _TIMES_A_NUMBER or stmt.target in _DIVIDED_BY_A_NUMBER:
            # (a number divided by a tensor: its gradient reads the tensor)
            by_a_number = len(operands) == 1 and (stmt.target in _TIMES_A_NUMBER or stmt.args[0] is operands[0])
            return [] if by_a_number else operands
    except TypeError:  # (an unhashable target)
        return operands
    return operands


def inputs_read_by_gradients(sir: StatementIR) -> list[frozenset[int]]:
    """Per output of ``sir``, the indexes of the inputs whose values its gradient may depend on: the inputs
    from which the operands whose values a statement reads (`_operands_read`) are computed, among the statements
    the output's gradient flows through (back through values requiring grad, as `version_check.saved_by_reach`
    follows it)."""
    # The inputs each symbol is computed from (statements are in order: operands come first).
    sources: dict[Symbol, frozenset[int]] = {symbol: frozenset([i]) for i, symbol in enumerate(sir.inputs)}
    for stmt in sir.statements:
        found = frozenset().union(*(sources.get(operand, frozenset()) for operand in stmt.inputs()))
        for symbol in stmt.output_symbols():
            sources[symbol] = found
    producer = producers(sir)
    return [frozenset().union(*(sources.get(operand, frozenset())
                                for stmt in statements_reached(sir, output, producer)
                                for operand in _operands_read(stmt)))
            for output in sir.outputs]


def constants_read_by_gradients(sir: StatementIR) -> list[frozenset[int]]:
    """Per output of ``sir``, the indexes of the inputs not requiring grad that a statement its gradient flows
    through reads the value of directly (`_operands_read`: the index of ``x[index]``, the factor of ``x *
    factor``): eager's op keeps such an operand itself for its backward, and refuses the backward once it changed
    in place. (An input read only through a value computed from it, as ``c`` of ``tanh(x + c)``, is not kept:
    the op keeps that value.)"""
    constant = {symbol: i for i, symbol in enumerate(sir.inputs) if sir.metas[symbol].stop_gradient}
    producer = producers(sir)
    return [frozenset(constant[operand] for stmt in statements_reached(sir, output, producer)
                      for operand in _operands_read(stmt) if operand in constant)
            for output in sir.outputs]


def output_groups(sir: StatementIR, grad_positions: tuple[int, ...], parameters: tuple[paddle.Tensor, ...]
                  ) -> list[tuple[list[int], list[int]]]:
    """The differentiable outputs of ``sir`` grouped by the differentiable tensors they may depend on, as
    (output indexes, indexes into ``[inputs at grad_positions..., parameters...]``). Each group gets a link of
    its own: a tensor no output depends on gets no gradient (None, as in eager, not zeros), and ``paddle.grad``
    of an output does not reach what it does not depend on. A statement whose parameters are not known for sure
    depends on all of them (zeros instead of None at worst, never a missing gradient). The gradients a product
    program computes depend on what eager's links of such gradients reach (`_GradientDependence`)."""
    parameter_index = {id(p): len(grad_positions) + i for i, p in enumerate(parameters)}
    depends: dict[Symbol, frozenset[int]] = {sir.inputs[position]: frozenset([k])
                                              for k, position in enumerate(grad_positions)}
    analysis = _GradientDependence(sir, parameter_index)
    for position, stmt in enumerate(sir.statements):
        if isinstance(stmt.target, _GradientOfOutputs):  # (of a product program: `_GradientDependence`)
            found_by_output = analysis.of_gradients(position, depends)
        else:
            found = parameters_read(stmt, parameter_index)
            for symbol in differentiated_inputs(stmt):  # (not an operand eager's backward leaves without one)
                found = found | depends.get(symbol, frozenset())
            found_by_output = [found] * len(stmt.output_symbols())
        for symbol, found in zip(stmt.output_symbols(), found_by_output):
            depends[symbol] = frozenset() if sir.metas[symbol].stop_gradient else found
    groups: dict[frozenset[int], list[int]] = {}
    every_tensor = frozenset(range(len(grad_positions) + len(parameters)))
    for index, symbol in enumerate(sir.outputs):
        if not sir.metas[symbol].stop_gradient:
            # (a differentiable output depending on nothing known: linked to everything, to be safe)
            groups.setdefault(depends.get(symbol) or every_tensor, []).append(index)
    return [(outputs, sorted(members)) for members, outputs in groups.items()]


# Statements whose gradient's own derivative with respect to the cotangent (the Jacobian-vector product of the
# double-backward trick) is not linked to the cotangent by eager autograd (no gradient, None), beyond those whose
# gradient reads no operand (`_operands_read`): checked against eager's by
# tests/symbolic/test_higher_order_gradients.py::test_the_tables_of_gradient_dependence_agree_with_eager.
# (Not here: ``tanh``, whose eager third-order node links the cotangent, which then gets zeros.)
_JVP_NOT_LINKED_TO_THE_COTANGENT: frozenset = frozenset([
    operator.mul, operator.imul, "__mul__", "__rmul__", "__imul__", paddle.multiply, "multiply",
    operator.matmul, "__matmul__", paddle.matmul, "matmul", paddle.exp, "exp", paddle.log, "log",
])


def _jvp_not_linked_to_the_cotangent(stmt: Statement) -> bool:
    """Whether eager leaves the cotangent of ``stmt``'s gradient without gradient through the derivative of that
    gradient with respect to the cotangent (see `_JVP_NOT_LINKED_TO_THE_COTANGENT`)."""
    if stmt.kind not in ("api", "method"):
        return False
    try:
        if stmt.target in _JVP_NOT_LINKED_TO_THE_COTANGENT or stmt.target in _EVERY_OPERAND_IS_DATA or \
                stmt.target in _FIRST_OPERAND_IS_DATA:
            return True
    except TypeError:  # (an unhashable target)
        return False
    return stmt.target in _DIVIDED_BY_A_NUMBER and not _operands_read(stmt)


class _GradientDependence:
    """Which differentiable tensors the outputs of a product statement (`_GradientOfOutputs`: the gradients of a
    forward's outputs with respect to its targets, in a product program) depend on, as eager autograd links the
    gradients it computes with ``create_graph=True``, so that `output_groups` links a gradient only to those: a
    tensor it does not depend on then gets None from a backward through it, as in eager (it got zeros).

    The gradient of target ``t`` is the sum over the forward's outputs ``o`` reached from ``t`` of the cotangent of
    ``o`` times the Jacobians of the statements on the paths from ``t`` to ``o``. Eager records each statement's
    gradient as a node linked to the operands its gradient reads (and to the cotangent), so the gradient of ``t``
    depends on the cotangents of the outputs ``t`` reaches, and on what the operands read by the statements on
    those paths depend on (`_operands_read`: none for ``x + y`` or ``x.sum()``, whose eager double-gradient nodes
    give no gradient to their operands; both for ``x * y``). A statement whose operands are not known is read
    whole, its parameters too: a link too many gives zeros where eager gives None, never a missing gradient.

    A product statement on such a path (in the product of a product program) is linear in its cotangents: its
    gradient with respect to a cotangent (a Jacobian-vector product) reads what the forward's statements read,
    not the cotangents, unless eager links them (`_jvp_not_linked_to_the_cotangent` of each statement on its
    paths); with respect to anything else, it is read whole."""

    def __init__(self, sir: StatementIR, parameter_index: dict[int, int]) -> None:
        self.sir = sir
        self.parameter_index = parameter_index
        self.producer = producers(sir)
        self._jacobian_reads: dict[int, tuple[frozenset[Symbol], frozenset[int]]] = {}

    def of_gradients(self, position: int, depends: dict[Symbol, frozenset[int]]) -> list[frozenset[int]]:
        """Per output of the product statement at ``position``: what it depends on (`output_groups`'s indexes),
        given ``depends`` of the symbols before it."""
        stmt = self.sir.statements[position]
        forward_outputs, targets, cotangents = stmt.args
        found_by_output = []
        for sources, parameters in [*(({t}, ()) for t in targets), *((set(), (p,)) for p in stmt.target.parameters)]:
            path, reached = self._paths(position, sources, parameters, forward_outputs)
            found = frozenset().union(*(depends.get(cotangents[o], frozenset()) for o in reached))
            for at, step, on_path in path:
                read, parameters_read_ = self._read(at, step, on_path)
                found = found.union(parameters_read_, *(depends.get(symbol, frozenset()) for symbol in read))
            found_by_output.append(found)
        return found_by_output

    def _paths(self, end: int, sources: set[Symbol], parameters: tuple[paddle.Tensor, ...], ends: list[Symbol]
               ) -> tuple[list[tuple[int, Statement, list[Symbol]]], list[int]]:
        """The statements before ``end`` on a differentiable path from ``sources`` or ``parameters`` to one of
        ``ends`` (with the operands on the path), and the indexes of the ``ends`` reached."""
        sir = self.sir
        toward_ends = {id(stmt) for symbol in ends for stmt in statements_reached(sir, symbol, self.producer)}
        own_index = {id(p): k for k, p in enumerate(parameters)}
        reach = set(symbol for symbol in sources if not sir.metas[symbol].stop_gradient)
        path = []
        for at, stmt in enumerate(sir.statements[:end]):
            on_path = [symbol for symbol in stmt.inputs() if symbol in reach]
            if not on_path and not (own_index and parameters_read(stmt, own_index)):
                continue
            reach.update(symbol for symbol in stmt.output_symbols() if not sir.metas[symbol].stop_gradient)
            if id(stmt) in toward_ends:
                path.append((at, stmt, on_path))
        return path, [o for o, symbol in enumerate(ends) if symbol in reach]

    def _read(self, at: int, stmt: Statement, on_path: list[Symbol]) -> tuple[frozenset[Symbol], frozenset[int]]:
        """The symbols and the parameters (indexes) whose values the gradient of ``stmt`` with respect to its
        operands ``on_path`` (or to parameters it reads) reads."""
        if isinstance(stmt.target, _GradientOfOutputs):
            _, targets, cotangents = stmt.args
            if on_path and set(on_path) <= set(cotangents) - set(targets) - set(stmt.args[0]):
                return self._jacobian_read(at, stmt)
            return frozenset(stmt.inputs()), frozenset(self.parameter_index.values())
        return frozenset(_operands_read(stmt)), parameters_read(stmt, self.parameter_index)

    def _jacobian_read(self, at: int, stmt: Statement) -> tuple[frozenset[Symbol], frozenset[int]]:
        """What the gradient of the product statement at ``at`` with respect to its cotangents reads: what its
        forward's statements on the paths from its targets to its outputs read (its cotangents too, when eager
        links them: `_jvp_not_linked_to_the_cotangent`)."""
        known = self._jacobian_reads.get(id(stmt))
        if known is None:
            forward_outputs, targets, cotangents = stmt.args
            path, _ = self._paths(at, set(targets), tuple(stmt.target.parameters), forward_outputs)
            read: frozenset[Symbol] = frozenset()
            parameters: frozenset[int] = frozenset()
            for step_at, step, on_path in path:
                step_read, step_parameters = self._read(step_at, step, on_path)
                read, parameters = read | step_read, parameters | step_parameters
                if not _jvp_not_linked_to_the_cotangent(step):
                    read |= frozenset(cotangents)
            known = self._jacobian_reads[id(stmt)] = (read, parameters)
        return known


def _zero_of(packed: paddle.Tensor) -> paddle.Tensor:
    """+0.0 computed from ``packed`` (the differentiable tensors of a call flattened, each a new node whose hook
    sees only this call's gradient, and concatenated) so that gradients reach it: subtracted, it leaves every
    value as it is (an added +0.0 would turn -0.0 into +0.0). The square of the sum of none of its values: the
    gradient of the square depends on the value itself, so under ``create_graph`` the ops making the gradient
    are recorded (`_RecomputedCall.input_gradients` reads that). (The square is of the sum, a tensor of its own:
    the empty slice is a view of the inputs, whose later in-place changes would make a multiply keeping it
    refuse. Here and below ``_C_ops``: their Python wrappers would cost several times more.)"""
    nothing = _C_ops.sum(_C_ops.slice(packed, [0], [0], [0], [1], []), [], None, False)
    return _C_ops.multiply(nothing, nothing)


def run_with_recomputed_backward(program: "CompiledProgram", inputs: list, fed: list, run: Any) -> list:
    """``run(inputs)`` without the program's grad node: each group of outputs (`output_groups`) reaches the
    tensors it depends on through a link subtracting 0.0 (`_zero_of` those tensors packed, one pack per dtype
    among them), whose gradient, zeros, the hooks replace by the product program's. ``fed``: the inputs as the
    program is fed them (the views of `gradient_flags.fed`, through which gradients reach the inputs)."""
    grad_positions = tuple(i for i in program.grad_inputs if not fed[i].stop_gradient)
    parameters = program.held_parameters()
    differentiable = [fed[i] for i in grad_positions] + list(parameters)
    groups = program.output_groups(grad_positions, parameters)
    plan = program.recompute_plan(tuple(index for grouped, _ in groups for index in grouped))
    forward_state = ForwardState(inputs, plan, *program.held_tensors_kept_and_copied())
    _set_has_grad(False)  # (``paddle.no_grad()``'s work, without its Python frames)
    try:
        outputs = list(run(inputs))
    finally:
        _set_has_grad(True)  # (only a call recording gradients comes here)
    for grouped, members in groups:
        links = []  # (the call computing the gradients of one pack, +0.0 computed from the pack)
        for pack in _by_dtype(members, differentiable):
            call = _RecomputedCall(program, inputs, tuple(grad_positions[k] for k in pack if k < len(grad_positions)),
                                   tuple(parameters[k - len(grad_positions)] for k in pack
                                         if k >= len(grad_positions)), forward_state)
            flat = [_C_ops.reshape(differentiable[k], [-1]) for k in pack]  # (new nodes: see `_zero_of`)
            for position, tensor in enumerate(flat):
                tensor._register_grad_hook(call.tensor_hook(position))
            links.append((call, _zero_of(flat[0] if len(flat) == 1 else _C_ops.concat(flat, 0))))
        for index in grouped:
            output = outputs[index]
            linked = output
            for _, connector in links:
                linked = _C_ops.subtract(linked, connector if output.dtype == connector.dtype else
                                         _C_ops.cast(connector, output.dtype))
            # The note is on the link, not on the tensor the caller gets: hooks the caller registers on that
            # (at a graph break) run first, and the gradient they return is the one eager's backward uses.
            for call, _ in links:
                linked._register_grad_hook(call.output_hook(index))
            outputs[index] = _C_ops.assign(linked)
    forward_state.watch_kept_inputs(program, outputs, [index for grouped, _ in groups for index in grouped])
    mark_outputs(outputs, recomputed=True)
    return outputs


def _by_dtype(members: list[int], differentiable: list) -> list[list[int]]:
    """``members`` (indexes into ``differentiable``) split by dtype, in order: tensors of one dtype only can be
    packed into one tensor (a float32 input and a float64 one reaching the same output get a pack each)."""
    packs: dict[Any, list[int]] = {}
    for k in members:
        packs.setdefault(differentiable[k].dtype, []).append(k)
    return list(packs.values())


class EagerRefusals:
    """What eager autograd refuses when a call of a program is differentiated twice, found once by doing it
    eagerly (`probe_eager_refusals`): per differentiable tensor of the call (``("input", index)`` or
    ``("parameter", id)``), the error of ``paddle.grad(..., create_graph=True)`` of the call's outputs with
    respect to it (an op on its path whose gradient has no gradient of its own: ``dropout_grad``, an embedding's
    table), and the error of a backward through the gradients of all of them (a kernel refusing: the double
    gradient of a batch norm in eval mode). The compiled path computes both orders from decomposed gradients,
    which never refuse: the hook computing a tensor's gradient under ``create_graph`` raises its ``first``
    (`_RecomputedCall.tensor_hook`, reached in the passes eager's nodes of that tensor run in), the product
    program differentiating that gradient ``second`` (`CompiledProgram.input_gradients`), with eager's type and
    message (`backward_pass.refuse_as_eager`)."""

    __slots__ = ("first", "second")

    def __init__(self, first: dict[tuple[str, int], BaseException] | None = None,
                 second: BaseException | None = None) -> None:
        self.first = first or {}
        self.second = second


def probe_eager_refusals(replay: Callable[[list], list], inputs: list, grad_inputs: list[int],
                         parameters: tuple[paddle.Tensor, ...], state: list[paddle.Tensor]) -> EagerRefusals:
    """Differentiate the eager ``replay`` of a call twice on the call's ``inputs`` (those of ``grad_inputs``
    requiring grad, detached, and ``parameters`` as the targets; ``paddle.grad`` only, so no ``grad`` is
    accumulated), and note what eager raises (`EagerRefusals`; the first order with respect to each target
    alone only when it raises for all of them). The random state and the tensors of ``state`` (statistics a
    batch norm in training mode updates) are put back. Outside a backward pass only (``paddle.grad`` inside one
    corrupts Paddle's engine): nothing is found there."""
    if backward_pass.current() is not None:
        return EagerRefusals()
    random_state = paddle.get_rng_state()
    with paddle.no_grad():
        copies = [(tensor, tensor.clone()) for tensor in state]
    found = EagerRefusals()
    try:
        # (the statistics updated in copies lent to them: their values and inplace versions stay as they are)
        with HELD_COPIES.lend(copies), paddle.enable_grad():
            probe = list(inputs)
            targets: dict[tuple[str, int], paddle.Tensor] = {("parameter", id(p)): p for p in parameters}
            for index in grad_inputs:
                if not inputs[index].stop_gradient:
                    probe[index] = inputs[index].detach()
                    probe[index].stop_gradient = False
                    targets["input", index] = probe[index]
            # (an integer output requiring grad, as eager's topk indices of a tensor requiring grad are, gets no
            # gradient: Paddle's topk_grad crashes the process differentiating one)
            outputs = [out for out in replay(probe) if isinstance(out, paddle.Tensor) and not out.stop_gradient
                       and (out.is_floating_point() or out.is_complex())]
            if not outputs or not targets:
                return found
            try:
                grads = paddle.grad(outputs, list(targets.values()), create_graph=True, allow_unused=True)
            except Exception:  # noqa: BLE001 - eager's refusal, whatever it is: which tensors it is for
                for key, target in targets.items():
                    try:
                        paddle.grad(outputs, [target], create_graph=True, allow_unused=True, retain_graph=True)
                    except Exception as error:  # noqa: BLE001
                        found.first[key] = error
                return found
            second = [grad.sum() for grad in grads if grad is not None and not grad.stop_gradient]
            if second:
                try:
                    paddle.grad(second, list(targets.values()), allow_unused=True)
                except Exception as error:  # noqa: BLE001
                    found.second = error
    except Exception:  # noqa: BLE001 - the forward itself failed (the call raises that as eager does)
        return EagerRefusals()
    finally:
        paddle.set_rng_state(random_state)
    return found


# Op names (substrings) of the static ops drawing random numbers: a call of a program with one cannot be
# recomputed with its forward's numbers without keeping the random state at every call (`OwnBackwardCall`).
_RANDOM_OP_NAMES = ("dropout", "uniform", "gaussian", "randint", "randperm", "bernoulli", "multinomial",
                    "poisson", "rrelu", "exponential", "normal", "random", "binomial", "rand")


def draws_random_numbers(program: Any) -> bool:
    """Whether the built static ``program``'s forward has an op drawing random numbers (True when it cannot be
    read)."""
    try:
        for op in forward_ops(program):
            name = op.name()
            if any(word in name for word in _RANDOM_OP_NAMES):
                return True
    except Exception:  # noqa: BLE001 - another Paddle version: assume the worst
        return True
    return False


class OwnBackwardCall:
    """What a ``paddle.grad(..., create_graph=True)`` pass needs of a call run with its program's own backward
    (see the module docstring): the program, the call's inputs (kept as long as the call's grad node and its
    outputs: the hooks on the outputs and their `OWN_BACKWARD_OUTPUT` hold this) and their inplace versions at
    the call.

    The program is held weakly: tensors hold this, and the last reference to a program (dropped from the cache
    by ``sot.reset()``) must not go when a tensor dies, at any moment: in the middle of another program's build,
    freeing a static program is not safe (see `compile._BuildLock`)."""

    __slots__ = ("_program", "inputs", "versions")

    def __init__(self, program: "CompiledProgram", inputs: list) -> None:
        self._program = weakref.ref(program)
        self.inputs = inputs
        self.versions = [tensor._inplace_version() for tensor in inputs]

    @property
    def program(self) -> "CompiledProgram":
        """The program (a `SotError` once it is gone)."""
        program = self._program()
        if program is None:
            raise SotError("sot: paddle.grad(..., create_graph=True) went through a call of a compiled graph "
                           "that was released since (sot.reset()): its gradients cannot be differentiated")
        return program

    def servable(self) -> bool:
        """Whether the gradients its node computes can be given their derivative: every input requiring grad is
        a parameter or an output of another such call (`OWN_BACKWARD_OUTPUT`: that call's cotangent gets its
        derivative from this call's product program first). An output of an eager replay, whose eager nodes
        would differentiate this node's gradient as it is, is not."""
        inputs = self.inputs
        program = self._program()
        if program is None:
            return False
        for index in program.grad_inputs:
            tensor = inputs[index]
            if tensor.stop_gradient:
                continue
            if tensor.is_leaf:
                if not isinstance(tensor, EagerParamBase):
                    return False
            elif getattr(tensor, OWN_BACKWARD_OUTPUT, None) is None:
                return False
        return True

    def gradients(self, output_grads: dict[int, paddle.Tensor], targets: frozenset[int], noted: dict[int, Any]
                  ) -> list[tuple[paddle.Tensor, paddle.Tensor]]:
        """(tensor, its gradient differentiable in turn) for each parameter of the call (given as an input or
        held by the program) among ``targets`` (ids), and each input that is an output of a call of ``noted``
        (by id: those the pass went through) or among ``targets``, from the gradients of the outputs noted in
        a pass (differentiable, `differentiable_parameter_gradients`)."""
        program = self.program
        grads = {index: grad for index, grad in output_grads.items()
                 if grad is not None and grad._is_initialized()}
        if not grads:
            return []
        inputs = self.inputs
        grad_positions = tuple(i for i in program.grad_inputs if not inputs[i].stop_gradient and (
            id(inputs[i]) in targets or (not inputs[i].is_leaf and id(
                getattr(inputs[i], OWN_BACKWARD_OUTPUT, (None,))[0]) in noted)))
        parameters = tuple(p for p in program.held_parameters() if id(p) in targets)
        if not grad_positions and not parameters:
            return []
        # Only those the outputs reached depend on (others get no derivative: None stays None in a later pass).
        differentiable = len(grad_positions) + len(parameters)
        reached = set()
        for grouped, members in program.output_groups(grad_positions, parameters):
            if any(index in grads for index in grouped):
                reached.update(members)
        if not reached:
            return []
        if program.eager_refusals is None:
            program.probe_refusals(inputs)
        refusals = program.eager_refusals
        if refusals is not None and refusals.first:
            for key in [("input", i) for i in grad_positions] + [("parameter", id(p)) for p in parameters]:
                if key in refusals.first:
                    _raise_fresh(refusals.first[key])
        for tensor, version in zip(inputs, self.versions):
            if tensor._inplace_version() != version:
                raise SotError(
                    f"sot: paddle.grad(..., create_graph=True) went through graph {program.sir.name}, whose "
                    f"input ({tensor.name or 'unnamed'}, {list(tensor.shape)}) was changed in place after the "
                    f"call: the differentiable gradients of its parameters are computed again from the call's "
                    f"inputs, which needs their values at the call")
        if program.draws_random_numbers():
            raise SotError(
                f"sot: paddle.grad(..., create_graph=True) went through graph {program.sir.name}, called with "
                f"parameters as its only inputs requiring grad and drawing random numbers: the differentiable "
                f"gradients of its parameters would be computed again with other random numbers. Workaround: "
                f"give the call an input that requires grad and is not a parameter (e.g. "
                f"`x = x.detach(); x.stop_gradient = False` before the call), or run that code eagerly "
                f"(sot.skip_function)")
        # The recomputed forward updates a batch norm's running statistics again: put back, as
        # `_RecomputedCall.input_gradients` does.
        with paddle.no_grad():
            state = [(tensor, tensor.clone()) for tensor in program.state_its_forward_may_update(inputs)]
        try:
            result = program.input_gradients(inputs, grads, grad_positions, parameters, True)
        finally:
            with paddle.no_grad():
                for tensor, value in state:
                    if not bool(paddle.equal_all(tensor, value)):
                        tensor.copy_(value, False)
        tensors = [inputs[i] for i in grad_positions] + list(parameters)
        return [(tensors[k], result[k]) for k in range(differentiable) if k in reached]


def _raise_fresh(error: BaseException) -> None:
    """Raise a new ``error`` (of its type and arguments: eager's refusal, noted by the probe)."""
    try:
        fresh = type(error)(*error.args)
    except Exception:  # (a type that cannot be made again from its arguments)
        fresh = error
    raise fresh


def differentiable_parameter_gradients(running: backward_pass.BackwardPass, result: list) -> list:
    """The results of the ``create_graph`` pass ``running`` (a ``paddle.grad``, ended), with the gradient of
    each parameter some noted call (`BackwardPass.own_backward_calls`) computes with its program's own backward
    given the derivative that node could not record (see the module docstring).

    The calls are taken in the order they were noted: a call's hooks run right before its node, after the nodes
    of the calls reading its outputs ran. So the gradient a call's node gave an input that is an output of
    another noted call (after a graph break, a model applied twice) is known, differentiable, before that
    call's turn: its cotangent gets that derivative the same way."""
    if not running.create_graph:
        return result
    noted = running.own_backward_calls
    terms: dict[int, paddle.Tensor] = {}  # by id of a target
    cotangent_terms: dict[tuple[int, int], paddle.Tensor] = {}  # by (id of a noted call, output index)
    with paddle.enable_grad():
        for call, output_grads in noted.values():
            grads = dict(output_grads)
            for index, grad in output_grads.items():
                term = cotangent_terms.pop((id(call), index), None)
                if term is not None and grad is not None and grad._is_initialized():
                    grads[index] = _with_derivative_of(grad, term)
            for tensor, grad in call.gradients(grads, running.targets, noted):
                source = None if tensor.is_leaf else getattr(tensor, OWN_BACKWARD_OUTPUT, None)
                if source is not None and id(source[0]) in noted:
                    key = (id(source[0]), source[1])
                    cotangent_terms[key] = grad if key not in cotangent_terms else cotangent_terms[key] + grad
                if id(tensor) in running.targets:
                    key = id(tensor)
                    terms[key] = grad if key not in terms else terms[key] + grad
        if not terms:
            return result
        finished = list(result)
        for position, target in enumerate(running.inputs):
            term = terms.get(id(target))
            if term is not None and finished[position] is not None:
                finished[position] = _with_derivative_of(finished[position], term)
    return finished


def _with_derivative_of(value: paddle.Tensor, term: paddle.Tensor) -> paddle.Tensor:
    """``value`` (unchanged) with the derivative of ``term`` added to what its own graph records."""
    return value + (term - term.detach())


backward_pass.RESULT_FINISHERS.append(differentiable_parameter_gradients)

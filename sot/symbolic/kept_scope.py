"""What a compiled program's own backward reads, kept for a later backward pass through the same call.

A call whose only differentiable inputs are parameters (or outputs of such calls) keeps the program's own grad
node (`higher_order.needs_recomputed_backward`). Paddle's program runner keeps the values that node reads in a
*scope* (one per run in flight, reused by later runs once free), and frees them (Paddle 3.3):

* when the node runs, whatever ``retain_graph`` says: a second ``backward()`` after
  ``backward(retain_graph=True)`` failed ("Tensor holds no memory") where eager accumulates twice;
* when a ``paddle.grad`` pass ends: it runs on copies of the nodes, and a copy frees the shared scope when it
  runs or, unrun, when it is destroyed; eager's graph stays usable after ``paddle.grad`` (a gradient penalty
  on a tensor met after the call, then a backward reaching the call: failed likewise).

And once freed, the scope may be handed to the next run of the program, whose values a later pass through
the first call would read: a wrong gradient. The node also marks the scope reusable before it has freed it
(as observed: Paddle's source is not at hand): a run in another thread (runs of one program are serialised,
backward passes are not) could take the scope in between and lose its values to the freeing (issue 9: its
outputs or its backward read tensors that "hold no memory", or a wrong gradient), so a pass that consumes the
node takes the scope out of the runner's cache before the node runs and returns it when the pass ends.

So each such call gets a `_CallScope` (a gradient hook on one of its outputs: Paddle calls it, with None if
that output gets no gradient, right before the node, or its copy, runs; owned by the node, it lives as long as
the node can run). When the pass may leave the node runnable (``retain_graph``, any ``paddle.grad``, a pass
of unknown kind), the hook *keeps* the scope: it notes the tensors the scope holds (sharing their memory, no
copy: what eager's saved tensors hold) and takes the scope out of the runner's cache, so that no other run gets
it; before a later pass runs the node, it puts the tensors back. ``paddle.grad`` passes get the same before
they start (`_before_partial_grad`), for every call whose scope still holds its values, as the node copies
that free them may not run their hooks. A pass that consumes the node (``backward()`` without
``retain_graph``: a later pass raises eager's error) or the node's death returns the scope to the cache.

Runs meanwhile get a new scope from the runner (and build its interpreters once): bounded by the number of
calls kept at once (usually one step's).

Under ``create_graph``, the gradients such a node computes (of parameters: a Hessian-vector product with
respect to the weights) have no gradient of their own. The hook (and a note on each other differentiable
output, `_OutputNote`) notes the gradients of the call's outputs in such a pass (`BackwardPass.note_output`),
and when the pass ends `higher_order.differentiable_parameter_gradients` gives the gradients their missing
derivative, computed by the call's product program (the outputs carry their call, `OWN_BACKWARD_OUTPUT`, so
that a call reading another's output gives that call's cotangent its derivative). A call it cannot serve (an
input requiring grad made by something else that gave it a gradient without gradient: the eager replay of such
a call) makes the pass raise a clear error at its end (`_refuse_undifferentiable`) instead of returning
gradients whose own gradients would silently be missing.
"""
from __future__ import annotations

import weakref
from typing import Any

import paddle
from paddle.base import core

from ..errors import SotError
from . import backward_pass
from .backward_pass import BackwardPass
from .version_check import _modified_in_place_summary

# Set on the differentiable outputs of a call run with its program's own backward, recording gradients: the
# call's `higher_order.OwnBackwardCall` and the output's index (`watch_call`).
OWN_BACKWARD_OUTPUT = "_sot_own_backward_output"

# A scope's values: (variable name, a tensor sharing its memory).
Snapshot = list[tuple[str, Any]]


class ScopeKeeper:
    """A compiled program's side of the keeping: its runner (held weakly: a program lets its parameters go
    when one of its layers is deleted), whose scope cache maps a key to a list of scopes (the runner hands out
    the first one it marks reusable), and the graph's name for messages."""

    __slots__ = ("runner", "graph")

    def __init__(self, runner: Any, graph: str) -> None:
        self.runner = weakref.ref(runner)
        self.graph = graph

    def take_out(self, scope: Any) -> list | None:
        """Remove ``scope`` from the runner's cache; the list it was in (None if in none)."""
        runner = self.runner()
        for scopes in list(getattr(runner, "_scope_cache", {}).values()):
            for index, cached in enumerate(scopes):
                if cached is scope:
                    del scopes[index]
                    return scopes
        return None

    def parameters_read(self) -> list[paddle.Tensor]:
        """The parameters the runner holds whose values (not only shapes) its backward reads: a change in
        place of one of them after a pass makes eager refuse the next pass through the node that saved it."""
        runner = self.runner()
        try:
            attrs = runner.train_program.program_attr
            read = set(attrs["bp_names"]) - set(attrs.get("no_need_buffers_names", ()))
        except (AttributeError, KeyError, TypeError):  # (another Paddle: nothing checked)
            return []
        return [p for p in runner._params if p.name in read]


class _CallScope:
    """One call's claim on the scope of its run (see the module's docstring). Called as the hook."""

    __slots__ = ("keeper", "scope", "snapshot", "versions", "home", "consumed", "call", "index", "__weakref__")

    def __init__(self, keeper: ScopeKeeper, scope: Any, call: Any = None, index: int = 0) -> None:
        self.keeper = keeper
        self.scope = scope
        # What a ``create_graph`` pass needs of the call (`higher_order.OwnBackwardCall`; None: it cannot be
        # served), and the index of the output this hook is on.
        self.call = call
        self.index = index
        self.snapshot: Snapshot | None = None  # while kept
        self.versions: list[tuple[paddle.Tensor, int]] = []  # of `ScopeKeeper.parameters_read`, when kept
        self.home: list | None = None  # the cache list the scope was taken out of, while kept
        self.consumed = False  # a pass that frees the node's saved tensors ran it

    def __call__(self, grad: Any) -> None:
        current = backward_pass.current()
        if current is not None and current.create_graph:
            _note(current, self.call, self.index, grad, self.keeper.graph)
        if self.snapshot is not None:
            _refuse_changed(self.versions)
            _restore(self.scope, self.snapshot)
        if current is not None and current.consumes_graph:
            self.consumed = True
            self.snapshot = None
            # Out of the cache until the pass ends, kept or not: the node marks the scope reusable before it
            # has freed the scope's values, and a run in another thread that took it in between lost its values
            # to that freeing (see the module's docstring). The pass ends after the freeing (and a run the pass
            # itself makes meanwhile, from a hook, must not get it either).
            if self.home is None:
                self.home = self.keeper.take_out(self.scope)
            backward_pass.at_pass_end(self.put_back)
        elif self.snapshot is None and not self.consumed:
            self.keep()

    def keep(self) -> None:
        """Note the scope's values and take it out of the runner's cache."""
        self.snapshot = _snapshot(self.scope)
        # (The inputs need no such check: the program's own version watch checks them at every pass.)
        self.versions = [(p, p._inplace_version()) for p in self.keeper.parameters_read()]
        if self.home is None:
            self.home = self.keeper.take_out(self.scope)

    def put_back(self) -> None:
        """Let the runner hand the scope out again (its values are freed by then, or about to be)."""
        self.snapshot = None
        self.versions = []
        home, self.home = self.home, None
        if home is not None and not any(cached is self.scope for cached in home):
            home.append(self.scope)

    def __del__(self) -> None:
        # (the node died: no pass can run it any more)
        try:
            self.put_back()
        except Exception:  # (at interpreter exit)
            pass


# The latest call of each scope (by id of the scope object; the scope outlives the entry: the cache or the
# call holds it): the one whose values the scope holds, until a run or a pass frees them.
_occupants: dict[int, "weakref.ref[_CallScope]"] = {}


class _OutputNote:
    """The note of the gradient of one more differentiable output of a call (the first has the `_CallScope`)
    in a ``create_graph`` pass. Called as the hook."""

    __slots__ = ("call", "index", "graph")

    def __init__(self, call: Any, index: int, graph: str) -> None:
        self.call, self.index, self.graph = call, index, graph

    def __call__(self, grad: Any) -> None:
        current = backward_pass.current()
        if current is not None and current.create_graph:
            _note(current, self.call, self.index, grad, self.graph)


def _note(current: BackwardPass, call: Any, index: int, grad: Any, graph: str) -> None:
    """In a ``create_graph`` pass: note the gradient of output ``index`` of ``call``, or the graph as one whose
    gradients cannot be differentiated (`_refuse_undifferentiable` at the end of the pass)."""
    if call is not None and call.servable():
        current.note_output(call, index, grad)
    else:
        current.undifferentiable.append(graph)


def watch_call(keeper: ScopeKeeper, scope: Any, outputs: list, call: Any = None) -> None:
    """Called after a run of a program with its own grad node, recording gradients, whose runner used
    ``scope``. ``call``: what a ``create_graph`` pass needs of the call (`higher_order.OwnBackwardCall`)."""
    first = None
    for index, out in enumerate(outputs):
        if isinstance(out, paddle.Tensor) and not out.stop_gradient:
            if call is not None:
                setattr(out, OWN_BACKWARD_OUTPUT, (call, index))
            if first is None:
                first = index
                if call is None:
                    break
            else:  # (a program of several differentiable outputs: a note on each other one)
                out._register_grad_hook(_OutputNote(call, index, keeper.graph))
    if first is None:
        return
    if not backward_pass.install():
        return  # (another Paddle: passes cannot be told apart, the runner's behaviour is left alone)
    claim = _CallScope(keeper, scope, call, first)
    _occupants[id(scope)] = weakref.ref(claim)
    # (at every call: the hook registered without the public wrapper's decorator, check and helper object)
    outputs[first]._register_grad_hook(claim)


def _on_pass(current: BackwardPass, started: bool) -> None:
    if not current.partial:
        return
    if started:
        _before_partial_grad()
    elif current.create_graph and current.undifferentiable:
        _refuse_undifferentiable(current.undifferentiable)


backward_pass.PASS_LISTENERS.append(_on_pass)  # (told of passes once `backward_pass.install` wraps them)


def _before_partial_grad() -> None:
    """Keep every scope still holding a call's values: the pass's copies of their nodes may free it."""
    for key, ref in list(_occupants.items()):
        call = ref()
        if call is None:
            del _occupants[key]
        elif call.snapshot is None and not call.consumed and _holds_values(call.scope):
            call.keep()


def _refuse_undifferentiable(graphs: list[str]) -> None:
    names = ", ".join(sorted(set(graphs)))
    raise SotError(
        f"sot: paddle.grad(..., create_graph=True) went through the backward of compiled graph(s) {names}, "
        f"whose gradients cannot be differentiated again: those graphs run with the compiled program's own "
        f"backward, which is not differentiable, and one of their inputs requiring grad came from code that "
        f"cannot give it a derivative (the gradient of a gradient with respect to the parameters, as a "
        f"Hessian-vector product or a gradient penalty on the parameters' gradients, would be silently "
        f"missing). Workarounds: give the call an input that requires grad and is not a parameter (e.g. "
        f"`x = x.detach(); x.stop_gradient = False` before the call), which compiles it with a differentiable "
        f"backward; or run that code eagerly (sot.skip_function)")


def _refuse_changed(versions: list[tuple[paddle.Tensor, int]]) -> None:
    """Raise eager's refusal if one of the parameters changed in place since the scope was kept (Paddle wraps
    what a hook raises: eager's message, inside Paddle's error)."""
    for tensor, expected in versions:
        version = tensor._inplace_version()
        if version != expected:
            raise RuntimeError(f"(PermissionDenied) {_modified_in_place_summary(version, expected)}")


def _holds_values(scope: Any) -> bool:
    for name in scope.local_var_names():
        variable = scope.find_var(name)
        try:
            if variable is not None and variable.get_tensor()._is_initialized():
                return True
        except Exception:  # (not a dense tensor)
            continue
    return False


def _snapshot(scope: Any) -> Snapshot:
    """The tensors ``scope`` holds, each shared (no copy) by a tensor of its own."""
    kept = []
    for name in scope.local_var_names():
        variable = scope.find_var(name)
        if variable is None:
            continue
        try:
            tensor = variable.get_tensor()
        except Exception:  # (not a dense tensor: the programs sot builds make none)
            continue
        if tensor._is_initialized():
            copy = core.DenseTensor()
            copy._share_data_with(tensor)
            kept.append((name, copy))
    return kept


def _restore(scope: Any, snapshot: Snapshot) -> None:
    for name, tensor in snapshot:
        scope.var(name).get_tensor()._share_data_with(tensor)

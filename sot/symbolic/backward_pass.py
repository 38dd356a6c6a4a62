"""Which backward pass is running, and whether it keeps the graph it goes through.

A gradient hook sees a gradient, not the pass that computes it: ``retain_graph`` and ``create_graph`` are
nowhere in its reach. `kept_scope` needs them (a compiled program's own backward frees what it reads unless a
later pass may need it), so the two entry points of Paddle's backward passes, ``core.eager.run_backward``
(``Tensor.backward``, ``paddle.autograd.backward``) and ``core.eager.run_partial_grad`` (``paddle.grad``),
are wrapped once (`install`): each call pushes a `BackwardPass` for its thread while it runs, and tells the
listeners (`PASS_LISTENERS`) when it starts and ends. Paddle's own code looks both functions up on the module
at every call, so the wrappers see every pass started from Python. A pass started another way (from C++)
has no record: `current` is None there, and users of it must assume the worst.

Passes nest (a hook may run a backward of its own): the records form a stack per thread.

What a compiled call keeps for its backward (the inputs a recomputing backward recomputes from, the tensors a
version check watches) is let go when eager lets go of what its grad nodes saved (`pass_keeps_graph`). Eager's
rules (Paddle 3.3, checked by tests/symbolic/test_backward_pass.py):

* ``Tensor.backward`` and ``paddle.autograd.backward`` clear the saved tensors of the nodes they run unless
  ``retain_graph=True`` (a second pass then raises "The TensorWrappers of ... do not exist").
* ``paddle.grad`` runs on a copy of the graph whatever its ``retain_graph`` and ``create_graph`` say (its
  ``retain_graph`` defaults to ``create_graph``, and only the copy is cleared): the original graph keeps its saved
  tensors, and a later ``backward()`` or ``paddle.grad`` through it works.
"""
from __future__ import annotations

import dataclasses
import threading
from types import TracebackType
from typing import Any, Callable, Protocol

from paddle.base import core


@dataclasses.dataclass(eq=False)
class BackwardPass:
    """One running backward pass.

    ``partial``: a ``paddle.grad`` pass. Paddle runs it on copies of the grad nodes it reaches (the graph
    stays usable afterwards whatever ``retain_graph`` says), and destroys the copies when it ends.
    ``retains_graph``: the nodes keep what they saved (``retain_graph=True``; for ``paddle.grad`` its default
    is ``create_graph``). ``create_graph``: the gradients are recorded, to be differentiated again."""

    partial: bool
    retains_graph: bool
    create_graph: bool
    # Filled by the pass's hooks, read by the listeners at its end (graph names, see `kept_scope`).
    undifferentiable: list[str] = dataclasses.field(default_factory=list)
    # The error eager autograd raises in this pass, raised by a hook (`refuse_as_eager`): the pass raises it
    # itself, not Paddle's wrapping of what a hook raised (an OSError "(External) ValueError: ...").
    eager_error: BaseException | None = None
    # Of a ``paddle.grad`` pass: the ids of the tensors it computes the gradients of (its ``inputs``), and those
    # tensors in order (the pass's results are theirs, in that order).
    targets: frozenset[int] = frozenset()
    inputs: tuple = ()
    # Of a ``create_graph`` pass: the calls run with their program's own backward whose grad node it ran, with
    # the gradients of their outputs noted by their hooks, by output index (`note_output`; keyed by ``id`` of
    # the call's record). Their parameters' gradients are made differentiable when the pass ends
    # (`RESULT_FINISHERS`).
    own_backward_calls: dict[int, tuple[Any, dict[int, Any]]] = dataclasses.field(default_factory=dict)
    # What runs when the pass ends, raised or not (`at_pass_end`).
    at_end: list[Callable[[], None]] = dataclasses.field(default_factory=list)
    # Of a ``paddle.grad`` pass: its ``allow_unused``, and what corrects its results once it ended well, in order
    # (each gets the results and returns those to give: `unreached_heads`).
    allow_unused: bool = False
    result_fixes: list[Callable[[list], list]] = dataclasses.field(default_factory=list)

    def note_output(self, call: Any, index: int, grad: Any) -> None:
        """Note the gradient ``grad`` of output ``index`` of ``call`` (a hook's, in this pass)."""
        entry = self.own_backward_calls.get(id(call))
        if entry is None:
            entry = self.own_backward_calls[id(call)] = (call, {})
        entry[1][index] = grad

    @property
    def consumes_graph(self) -> bool:
        """Whether the nodes this pass runs let go of what they saved (a second pass through them fails, as
        eager's does): a ``backward()`` without ``retain_graph``."""
        return not (self.partial or self.retains_graph)


class PassListener(Protocol):
    def __call__(self, backward_pass: BackwardPass, started: bool) -> None: ...


# Called at the start (``started=True``, before Paddle runs anything) and at the end of every pass, the end
# even when the pass raised (then after the listener, the pass's own exception propagates). A listener may
# raise at the end of a pass that succeeded: the caller gets that exception instead of the result.
PASS_LISTENERS: list[PassListener] = []

# Called, in order, after a ``paddle.grad`` pass that noted calls (`BackwardPass.own_backward_calls`) ended
# well, outside it (after its listeners): each gets the pass and its results and returns the results to give
# (`higher_order.differentiable_parameter_gradients`).
RESULT_FINISHERS: list[Callable[[BackwardPass, list], list]] = []

_local = threading.local()


def current() -> BackwardPass | None:
    """The innermost pass running in this thread (None: none, or one started without the wrappers)."""
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else None


def _running(backward_pass: BackwardPass, run: Callable[[], Any]) -> Any:
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    for listener in PASS_LISTENERS:
        listener(backward_pass, True)
    stack.append(backward_pass)
    try:
        try:
            result = run()
        finally:
            _run_end_actions(backward_pass)
    except BaseException as failure:
        stack.pop()
        for listener in PASS_LISTENERS:
            try:
                listener(backward_pass, False)
            except Exception:  # (the pass's own error is the one to report)
                pass
        if backward_pass.eager_error is not None and isinstance(failure, Exception):
            raise backward_pass.eager_error from None
        raise
    stack.pop()
    for listener in PASS_LISTENERS:
        listener(backward_pass, False)
    return result


def _run_end_actions(backward_pass: BackwardPass) -> None:
    """The pass's `at_pass_end` actions, in order, each even when an earlier one raised (the first error then
    propagates)."""
    failure: BaseException | None = None
    while backward_pass.at_end:
        try:
            backward_pass.at_end.pop(0)()
        except BaseException as error:  # noqa: BLE001
            failure = failure or error
    if failure is not None:
        raise failure


_add_backward_final_hook = getattr(core.eager, "_add_backward_final_hook", None)


def at_pass_end(action: Callable[[], None]) -> bool:
    """Run ``action`` when the backward pass running in this thread ends (raised or not); False if it cannot
    be (no pass recorded here, and this Paddle has no final hooks).

    A recorded pass runs it itself, in its thread. Paddle's own final hooks, used for a pass without a record,
    are process-wide: a pass ending in one thread runs and clears those another thread's pass registered,
    concurrently with their registration (four threads training one translated layer crashed about once in
    eight runs: a segfault in ``RunBackward``, or a hook called on a freed object)."""
    running = current()
    if running is not None:
        running.at_end.append(action)
        return True
    if _add_backward_final_hook is not None:
        _add_backward_final_hook(action)
        return True
    return False


_ORIGINALS: dict[str, Callable[..., Any]] = {}


def _without_own_frames(traceback: TracebackType | None) -> TracebackType | None:
    """``traceback`` without the entries of this module's wrappers: a failing ``backward()`` or ``paddle.grad``
    shows the user's and Paddle's frames (and those of hooks or PyLayer backwards run inside), as eagerly."""
    entries = []
    while traceback is not None:
        if traceback.tb_frame.f_code.co_filename != __file__:
            entries.append(traceback)
        traceback = traceback.tb_next
    kept = None
    for entry in reversed(entries):
        kept = TracebackType(kept, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return kept


def _run_backward(tensors: Any, grad_tensors: Any, retain_graph: bool = False, *rest: Any) -> Any:
    original = _ORIGINALS["run_backward"]
    try:
        return _running(BackwardPass(False, bool(retain_graph), False),
                        lambda: original(tensors, grad_tensors, retain_graph, *rest))
    except BaseException as failure:
        raise failure.with_traceback(_without_own_frames(failure.__traceback__))  # (this line stays: one entry)


def _run_partial_grad(outputs: Any, inputs: Any, grad_outputs: Any, retain_graph: bool = False,
                      create_graph: bool = False, *rest: Any) -> Any:
    original = _ORIGINALS["run_partial_grad"]
    listed = tuple(inputs) if isinstance(inputs, (list, tuple)) else (inputs,)
    running = BackwardPass(True, bool(retain_graph), bool(create_graph), targets=frozenset(map(id, listed)),
                           inputs=listed, allow_unused=len(rest) > 1 and bool(rest[1]))  # (only_inputs, allow_unused)
    try:
        result = _running(running, lambda: original(outputs, inputs, grad_outputs, retain_graph, create_graph,
                                                     *rest))
    except BaseException as failure:
        raise failure.with_traceback(_without_own_frames(failure.__traceback__))
    for fix in running.result_fixes:
        result = fix(result)
    if running.own_backward_calls:
        for finish in RESULT_FINISHERS:
            result = finish(running, result)
    return result


_WRAPPERS: dict[str, Callable[..., Any]] = {"run_backward": _run_backward, "run_partial_grad": _run_partial_grad}
_install_lock = threading.Lock()


def install() -> bool:
    """Wrap Paddle's pass entry points (once; later calls are free). False when this Paddle lacks one of
    them: no pass is ever recorded then."""
    if len(_ORIGINALS) == len(_WRAPPERS):
        return True
    with _install_lock:
        if not all(hasattr(core.eager, name) for name in _WRAPPERS):
            return False
        for name, wrapper in _WRAPPERS.items():
            if name not in _ORIGINALS:
                _ORIGINALS[name] = getattr(core.eager, name)
                setattr(core.eager, name, wrapper)
    return True


def pass_keeps_graph() -> bool:
    """Whether the backward pass running now keeps the graph it goes through for another pass: False only in a
    recorded pass that consumes it (a hook must let go of what it keeps, as eager's nodes do). True outside a
    pass and in a pass without a record (started from C++, or before `install`): what is kept is then freed with
    the graph, never too early."""
    running = current()
    return running is None or not running.consumes_graph


def refuse_as_eager(error: BaseException) -> None:
    """Raise ``error`` (a new one of its type and arguments), eager's, from a hook of the running pass: the pass
    raises it as it is (see `BackwardPass.eager_error`)."""
    try:
        fresh = type(error)(*error.args)
    except Exception:  # (a type that cannot be made again from its arguments)
        fresh = error
    running = current()
    if running is not None:
        running.eager_error = fresh
    raise fresh

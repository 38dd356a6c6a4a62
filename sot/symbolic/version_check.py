"""The refusal of a backward that reads a tensor changed in place since the forward, as eager autograd's.

Eager autograd snapshots the inplace version of every tensor a grad node saves (Paddle's TensorWrapper); when
``backward()`` reaches the node and the version moved, it raises a C++ PermissionDenied error, which Python sees
as a ``RuntimeError``. A compiled program's grad node keeps plain references, so `CompiledProgram` registers a
gradient hook on its outputs that compares the versions (`version_check_hook`).

Paddle wraps anything a Python hook raises in an External error (an ``OSError``, whatever the Python type), so
the hook given to Paddle is the C extension's `PermissionDeniedHook` (sot/eval_frame_ext/autograd_errors.cpp):
it runs the Python check, then throws Paddle's own PermissionDenied error, which ``backward()`` raises exactly as
eager's (type, message and location). It costs nothing more on a backward that passes. Without the extension
(not built: no Paddle headers; an interpreter without unwind tables; built against another Paddle) the check
raises in Python: the same message, as an ``OSError``.

What is watched: the inputs and outputs the program's backward reads, and the parameters the program holds
itself that it reads (a built-in layer's weight: eager's matmul saves it too). Each pass reaching the output
checks; a pass that does not keep the graph (`backward_pass.pass_keeps_graph`) then lets the tensors go, as
eager's nodes clear their saved tensors (a loss kept for logging does not keep a batch alive).
"""
from __future__ import annotations

import dataclasses
import functools
import re
from typing import Any, Callable

import paddle

from .backward_pass import pass_keeps_graph
from .sir import LayerCall, Statement, StatementIR, Symbol

try:
    from ..eval_frame_ext import _autograd_errors
except ImportError:  # (the optional extension is not built: see setup.py)
    _autograd_errors = None
# The native hook, when it was built against this very Paddle (it throws an object of Paddle's C++ classes).
PermissionDeniedHook = _autograd_errors.PermissionDeniedHook \
    if _autograd_errors is not None and _autograd_errors.PADDLE_COMMIT == paddle.version.commit else None

# What a check reports of a refused backward: Paddle's error summary, and the file and line it is raised at.
Refusal = tuple[str, str, int]


@dataclasses.dataclass(frozen=True)
class SavedForOutput:
    """What the backward of one output of a program reads the data of (indexes)."""

    inputs: list[int]
    outputs: list[int]
    parameters: list[int] = dataclasses.field(default_factory=list)  # into the parameters the program holds

    def __bool__(self) -> bool:
        return bool(self.inputs or self.outputs or self.parameters)


# Per output of a program.
SavedByOutput = list[SavedForOutput]


def written_back_map(sir: StatementIR) -> dict[int, tuple[int, int]]:
    """`StatementIR.written_back` by output: (input index, number of in-place changes)."""
    return {output: (input_index, changes) for output, input_index, changes, _ in sir.written_back}


def saved_by_reach(sir: StatementIR, saved_inputs: list[int], saved_outputs: list[int],
                   saved_parameters: list[paddle.Tensor] = ()) -> SavedByOutput:
    """For each output, the saved inputs, outputs and held parameters (indexes; of the parameters, into
    ``saved_parameters``) its backward can read: those read or made by the statements its gradient flows
    through (from its producer back through values that require grad), as eager only checks the tensors kept
    by the nodes a ``backward()`` reaches (fuzz seed 13877: a factor kept by an op that did not lead to the
    returned tensor, then changed, made its backward refuse)."""
    producer = producers(sir)
    parameter_index = {id(p): k for k, p in enumerate(saved_parameters)}
    plans = []
    for symbol in sir.outputs:
        touched: set[Symbol] = {symbol}  # read or made by a node the gradient reaches: may be kept by it
        parameters: set[int] = set()
        for stmt in statements_reached(sir, symbol, producer):
            touched.update(stmt.inputs(), stmt.output_symbols())
            if saved_parameters:
                parameters |= parameters_read(stmt, parameter_index)
        plans.append(SavedForOutput([i for i in saved_inputs if sir.inputs[i] in touched],
                                    [i for i in saved_outputs if sir.outputs[i] in touched], sorted(parameters)))
    return plans


def parameters_read(stmt: Statement, parameter_index: dict[int, int]) -> frozenset[int]:
    """The parameters (their indexes, by ``id``, in ``parameter_index``) a statement may read: all of them when
    it may read any tensor (`Statement.may_read_any_tensor`), else those of the built-in layer it calls."""
    if stmt.may_read_any_tensor():
        return frozenset(parameter_index.values())
    if isinstance(stmt.target, LayerCall):
        return frozenset(parameter_index[id(p)] for p in stmt.target.layer.parameters() if id(p) in parameter_index)
    return frozenset()


def producers(sir: StatementIR) -> dict[Symbol, Statement]:
    """The statement making each symbol."""
    return {symbol: stmt for stmt in sir.statements for symbol in stmt.output_symbols()}


def statements_reached(sir: StatementIR, output: Symbol, producer: dict[Symbol, Statement]) -> list[Statement]:
    """The statements the gradient of ``output`` flows through: from its producer back through values that
    require grad."""
    reached: list[Statement] = []
    visited: set[Symbol] = set()
    pending = [output]
    while pending:
        current = pending.pop()
        if current in visited or sir.metas[current].stop_gradient:
            continue
        visited.add(current)
        stmt = producer.get(current)
        if stmt is not None:
            reached.append(stmt)
            pending += stmt.inputs()
    return reached


class ReplayWatch:
    """The version watch of an eager replay of a SIR. Eager autograd checks what the replayed ops keep, except
    for the final value of a tensor from outside changed in place: the replay keeps its own result of the
    out-of-place op, and the caller's tensor only gets a copy; eager's ops kept the caller's tensor, whose
    later in-place change makes their backward refuse. That one is watched here (`StatementIR.written_back`)."""

    def __init__(self, sir: StatementIR) -> None:
        kept = [output for output, _, _, kept in sir.written_back if kept]
        self._written_back = written_back_map(sir)
        self._saved = saved_by_reach(sir, [], kept) if kept else None
        if kept:
            prepare()

    @property
    def watches(self) -> bool:
        """Whether the replay keeps any such tensor (most do not: the call can then be left out)."""
        return self._saved is not None

    def __call__(self, inputs: list, outputs: list) -> None:
        if self._saved is not None and paddle.is_grad_enabled():
            watch_saved_tensors(inputs, outputs, self._saved, self._written_back)


def watch_saved_tensors(inputs: list, outputs: list, saved: SavedByOutput,
                        written_back: dict[int, tuple[int, int]], parameters: list[paddle.Tensor] = ()) -> None:
    """Hook each differentiable output whose backward reads saved tensors (``saved``; its parameters indexes
    into ``parameters``) with their versions now.

    An output that is the final value of an input changed in place (``written_back``) becomes the caller's
    tensor after the run: eager's ops kept that tensor, so the caller's tensor is watched, with the version the
    write-back gives it (its version now plus the number of changes)."""
    for out, plan in zip(outputs, saved):
        if not plan or not isinstance(out, paddle.Tensor) or out.stop_gradient:
            continue
        versions = [(inputs[i], inputs[i]._inplace_version()) for i in plan.inputs]
        versions += [(parameters[k], parameters[k]._inplace_version()) for k in plan.parameters]
        for index in plan.outputs:
            if index in written_back:
                input_index, changes = written_back[index]
                versions.append((inputs[input_index], inputs[input_index]._inplace_version() + changes))
            else:
                versions.append((outputs[index], outputs[index]._inplace_version()))
        # (at every run: the hook registered without the public wrapper's decorator, check and helper object)
        out._register_grad_hook(version_check_hook(versions))


def version_check_hook(versions: list[tuple[paddle.Tensor, int]]) -> Callable[[Any], None]:
    """A gradient hook refusing, as eager autograd does, a backward reading one of the tensors of ``versions``
    (with the inplace version each had at the forward) changed in place since. Checked by every pass the
    gradient arrives in (the program's backward calls the hooks of outputs no gradient flows to, with None:
    those check nothing); after a pass that does not keep the graph, the tensors are let go (a later pass is
    refused by the nodes that pass cleared, or computes what eager's would)."""
    held: list[list[tuple[paddle.Tensor, int]] | None] = [versions]

    def refusal(grad: Any) -> Refusal | None:
        watched = held[0]
        if grad is None or watched is None:
            return None
        for tensor, expected in watched:
            version = tensor._inplace_version()
            if version != expected:
                return (_modified_in_place_summary(version, expected), *_eager_check_location())
        if not pass_keeps_graph():
            held[0] = None
        return None

    return PermissionDeniedHook(refusal) if PermissionDeniedHook is not None else _raising_in_python(refusal)


def _raising_in_python(refusal: Callable[[Any], Refusal | None]) -> Callable[[Any], None]:
    """The hook without the C extension: raises eager's message (Paddle re-raises it inside an OSError)."""
    def hook(grad: Any) -> None:
        found = refusal(grad)
        if found is not None:
            summary, file, line = found
            raise RuntimeError(f"(PermissionDenied) {summary} (at {file}:{line})")

    return hook


def _modified_in_place_summary(version: int, expected: int) -> str:
    """Eager autograd's words for the misuse (paddle/fluid/eager/tensor_wrapper.h), without the error type."""
    return (f"Tensor '' used in gradient computation has been modified by an inplace operation. Its version is "
            f"{version} but the expected version is {expected}. Please fix your code to void calling an inplace "
            "operator after using the Tensor which will used in gradient computation.\n  [Hint: Expected "
            "tensor_version == wrapper_version_snapshot, but received tensor_version:"
            f"{version} != wrapper_version_snapshot:{expected}.]")


_LOCATION = re.compile(r" \(at (?P<file>.+):(?P<line>\d+)\)\s*\Z")


@functools.cache
def _eager_check_location() -> tuple[str, int]:
    """The file and line eager's version check raises at (the end of its message): learnt by making eager
    refuse a backward once, on the CPU. Called first by `prepare`, out of any backward pass: a backward run
    inside another would call the final hooks of the outer one."""
    try:
        with paddle.enable_grad():
            x = paddle.to_tensor([1.0], place=paddle.CPUPlace(), stop_gradient=False)
            y = paddle.exp(x)  # (exp's backward reads its output)
            y._bump_inplace_version()
            y.backward()
    except RuntimeError as exc:
        match = _LOCATION.search(str(exc))
        if match:
            return match["file"], int(match["line"])
    return __file__, 0  # (another Paddle: the message stays eager's, the location is this module)


def prepare() -> None:
    """Learn what the hooks need before a backward pass can call one (cheap once done)."""
    _eager_check_location()

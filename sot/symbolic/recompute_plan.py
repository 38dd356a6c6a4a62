"""What the recomputing backward of a call (`higher_order.run_with_recomputed_backward`) keeps of its forward, and
how it gets the values the forward saw.

The backward recomputes the forward from the call's inputs, so it reads inputs that eager's backward may never
read: ``tanh(x + 1)`` keeps its output for its backward, not ``x``. Eager lets ``x`` change in place (under
``no_grad``) between the call and the backward and still gives the gradient at the values of the call; only a
change of a tensor its nodes saved makes it refuse (Paddle's PermissionDenied). So the inputs the recomputation
reads are split (`RecomputePlan`):

* ``inputs_kept_by_gradients``: those eager's backward reads too (the saved inputs of the program's own backward,
  of the outputs whose gradients the call links: `version_check.saved_by_reach`). A change of one makes the
  version hook on the call's outputs refuse the backward as eager does; the recomputation only checks again.
* ``copied``: the others. They are copied at the call (the price of the path: one copy each, as eager keeps
  what its nodes save); when one was changed in place before the backward, the recomputation runs on its copy
  (for an input requiring grad, a tensor of the copy's values whose gradient goes to the input:
  `_with_values_of`), never on the new values.

What a call keeps (its inputs, the copies, the versions) is let go by its recomputed backward at the end of a pass
that does not keep the graph (`backward_pass.pass_keeps_graph`), as eager clears its nodes' saved tensors; a later
pass through it then raises, as eager's does.

The tensors a program holds itself (the parameters and buffers of the built-in layers it calls) are read by the
product program where they are, not as inputs. Those the program's own backward reads (a linear layer's weight:
eager's matmul keeps it; a batch norm's statistics) are version-checked, a change refused as eager refuses it.
The others (a linear layer's bias, a frozen parameter, an embedding table) are copied at the call too (`HeldCopies`: one copy per
tensor and inplace version, shared by the calls that see the same values, and dropped with the last of them); one
changed in place before the backward lends the copy's memory to the tensor while the product program runs
(`ForwardState.held_values`: the tensor's own data and inplace version are left as they are), so the gradient is
eager's, at the values of the call.
"""
from __future__ import annotations

import contextlib
import dataclasses
import weakref
from typing import TYPE_CHECKING, Iterable, Iterator

import paddle
from paddle import _C_ops
from paddle.base import core
from paddle.base.core import _set_has_grad

from ..errors import SotError
from . import version_check

if TYPE_CHECKING:
    from .compile import CompiledProgram


@dataclasses.dataclass(frozen=True)
class RecomputePlan:
    """Which inputs (indexes into the call's inputs) the recomputation of a call reads, and how each is kept."""

    read: frozenset[int]
    inputs_kept_by_gradients: frozenset[int]  # read and saved by eager's backward: version-checked
    copied: frozenset[int]  # read and not saved by eager's backward: copied at the call

    @classmethod
    def of(cls, read: frozenset[int], saved_inputs: frozenset[int]) -> "RecomputePlan":
        return cls(read, read & saved_inputs, read - saved_inputs)

    @classmethod
    def of_outputs(cls, read_by_output: list[frozenset[int]], saved_by_output: list[frozenset[int]]
                   ) -> "RecomputePlan":
        """The plan of a recomputation of several outputs, from what each one's gradient reads and eager's
        nodes reached by it keep: an input kept for one output's gradient but only read by another's is both
        version-checked (the first one's backward refuses as eager's) and copied (the other's backward computes
        from the values of the call, as eager's)."""
        plans = [cls.of(read, saved) for read, saved in zip(read_by_output, saved_by_output)]
        return cls(frozenset().union(*(plan.read for plan in plans)),
                   frozenset().union(*(plan.inputs_kept_by_gradients for plan in plans)),
                   frozenset().union(*(plan.copied for plan in plans)))


@dataclasses.dataclass(eq=False)
class _Copy:
    """An input's values at the call, and the input's inplace version then."""

    tensor: paddle.Tensor
    version: int


class HeldCopies:
    """The values of tensors a program holds (see the module's docstring), each copied once per inplace version:
    the calls made while a tensor keeps its values share one copy, which lives as long as one of them keeps it.
    While the product program of a recomputation runs, a changed tensor holds its copy's memory (`lend`); a call
    made meanwhile (a product program recorded under ``create_graph``) saw the copy's values: it gets that copy,
    with no version (the tensor's own version says nothing of them)."""

    def __init__(self) -> None:
        self._copies: dict[int, tuple[weakref.ref, int, weakref.ref]] = {}  # id -> (tensor, version, copy)
        self._lent: dict[int, paddle.Tensor] = {}  # id of a tensor holding a copy's memory now -> that copy

    def values_now(self, tensor: paddle.Tensor) -> tuple[int | None, paddle.Tensor]:
        """``tensor``'s inplace version (None while it holds a copy's memory) and a copy of its values now."""
        lent = self._lent.get(id(tensor))
        if lent is not None:
            return None, lent
        version = tensor._inplace_version()
        known = self._copies.get(id(tensor))
        if known is not None and known[0]() is tensor and known[1] == version:
            copy = known[2]()
            if copy is not None:
                return version, copy
        _set_has_grad(False)  # (a copy of the values, outside any graph)
        try:
            copy = _C_ops.assign(tensor)
        finally:
            _set_has_grad(True)  # (only a call recording gradients comes here)
        key = id(tensor)

        def forget(reference: weakref.ref, key: int = key) -> None:
            if self._copies.get(key, (None,))[0] is reference:
                del self._copies[key]

        self._copies[key] = (weakref.ref(tensor, forget), version, weakref.ref(copy))
        return version, copy

    def is_lent(self, tensor: paddle.Tensor) -> bool:
        return id(tensor) in self._lent

    @contextlib.contextmanager
    def lend(self, lent: list[tuple[paddle.Tensor, paddle.Tensor]]) -> Iterator[None]:
        """Each tensor of ``lent`` holds its copy's memory (the copy's values) meanwhile; its own memory, with
        its values now, is given back after. Neither its data nor its inplace version changes."""
        given: list[tuple[paddle.Tensor, object, paddle.Tensor | None]] = []
        try:
            for tensor, copy in lent:
                own = core.DenseTensor()
                own._share_data_with(tensor.get_tensor())
                tensor.get_tensor()._share_data_with(copy.get_tensor())
                given.append((tensor, own, self._lent.get(id(tensor))))
                self._lent[id(tensor)] = copy
            yield
        finally:
            for tensor, own, before in reversed(given):
                tensor.get_tensor()._share_data_with(own)
                if before is None:
                    del self._lent[id(tensor)]
                else:
                    self._lent[id(tensor)] = before


HELD_COPIES = HeldCopies()


class ForwardState:
    """What the recomputation of one call needs to find as the forward left it: the random generators' state (the
    same dropout masks; put back after, as eager's backward draws nothing), the inputs of its `RecomputePlan` (the
    versions of those kept by gradients, copies of the others), the versions of the held parameters its program's
    backward reads and copies of the other held tensors (`HeldCopies`)."""

    __slots__ = ("random_state", "versions", "copies", "parameter_versions", "held")

    def __init__(self, inputs: list, plan: RecomputePlan, parameters: tuple[paddle.Tensor, ...],
                 held: tuple[paddle.Tensor, ...] = ()) -> None:
        """``parameters``: the held parameters requiring grad that the program's backward reads (version-checked);
        ``held``: the other tensors the program holds (copied)."""
        self.random_state = paddle.get_rng_state()
        self.versions = {index: (inputs[index], inputs[index]._inplace_version())
                         for index in plan.inputs_kept_by_gradients}
        self.copies: dict[int, _Copy] = {}
        if plan.copied:
            _set_has_grad(False)  # (a copy of the values, outside any graph)
            try:
                self.copies = {index: _Copy(_C_ops.assign(inputs[index]), inputs[index]._inplace_version())
                               for index in plan.copied}
            finally:
                _set_has_grad(True)  # (only a call recording gradients comes here)
        lent = [p for p in parameters if HELD_COPIES.is_lent(p)]  # (its values now are a copy's: see HeldCopies)
        self.parameter_versions = [(p, p._inplace_version()) for p in parameters if not HELD_COPIES.is_lent(p)]
        self.held = [(tensor, *HELD_COPIES.values_now(tensor)) for tensor in (*held, *lent)]

    def held_values(self) -> contextlib.AbstractContextManager:
        """Meanwhile, the held tensors changed in place since the call hold their values at the call."""
        return HELD_COPIES.lend([(tensor, copy) for tensor, version, copy in self.held
                                 if version is None or tensor._inplace_version() != version])

    def check_unchanged(self, program: "CompiledProgram", outputs_reached: list[int]) -> None:
        """Refuse a recomputation from a kept input or a held parameter changed in place since the call (the
        version hooks on the outputs refuse it first, as eager does, for what eager's backward saves). An input
        also copied (kept for another output's gradient only) is recomputed from its copy."""
        read_by_output = program.inputs_read_by_gradients
        reached = frozenset().union(*(read_by_output[o] for o in outputs_reached))
        watched = [self.versions[i] for i in reached if i in self.versions and i not in self.copies]
        for tensor, version in watched + self.parameter_versions:
            if tensor._inplace_version() != version:
                raise SotError(
                    f"sot: a tensor graph {program.sir.name} read ({tensor.name or 'unnamed'}, {list(tensor.shape)}) "
                    f"was changed in place after the call and before this backward pass; its backward recomputes "
                    f"the forward from the tensors it read (so that it can be differentiated again and taken "
                    f"more than once), which needs their values at the call")

    def watch_kept_inputs(self, program: "CompiledProgram", outputs: list, indexes: Iterable[int]) -> None:
        """Hook the outputs of ``indexes`` to refuse, with eager's error, a backward after an input eager keeps
        for it changed in place (the program's own backward may keep a value computed from it instead, which
        the version hooks of `CompiledProgram` do not watch: the index of ``x[index]``)."""
        for index in indexes:
            versions = [self.versions[i] for i in program.recompute_plan((index,)).inputs_kept_by_gradients
                        if i in self.versions]
            if versions:
                version_check.prepare()
                outputs[index]._register_grad_hook(version_check.version_check_hook(versions))

    def recomputation_inputs(self, inputs: list) -> list:
        """``inputs`` with the values of the call: each copied input changed in place since replaced by its
        copy (for one requiring grad, by a tensor of the copy's values whose gradient goes to the input)."""
        changed = [(index, copy) for index, copy in self.copies.items()
                   if inputs[index]._inplace_version() != copy.version]
        if not changed:
            return inputs
        inputs = list(inputs)
        for index, copy in changed:
            original = inputs[index]
            inputs[index] = copy.tensor if original.stop_gradient else _with_values_of(copy.tensor, original)
        return inputs


def _with_values_of(values: paddle.Tensor, tensor: paddle.Tensor) -> paddle.Tensor:
    """A tensor holding ``values`` whose gradient goes to ``tensor`` unchanged (differentiable in turn): a copy
    of ``tensor`` (its grad node reads nothing), overwritten without recording."""
    with paddle.enable_grad():  # (a hook runs in the ambient mode)
        result = _C_ops.assign(tensor)
    with paddle.no_grad():
        paddle.assign(values, output=result)
    return result


def released_error(graph: str) -> SotError:
    """Eager's refusal of a second pass through nodes a pass without ``retain_graph`` cleared, for a call whose
    recomputing backward let its inputs go."""
    return SotError(
        f"(Fatal) The TensorWrappers of graph {graph}'s recomputed backward do not exist. This may be because:\n"
        "You calculate backward twice for the same subgraph without setting retain_graph=True. Please set "
        "retain_graph=True in the first backward/grad call.\n")

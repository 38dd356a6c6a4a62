"""``paddle.distributed.fleet.utils.recompute(function, *args, **kwargs)`` (and the function it calls,
``paddle.distributed.fleet.recompute.recompute``): activation recomputation.

Recomputation changes when the activations of ``function`` exist (computed again in backward instead of
kept), not what forward returns nor the gradients backward accumulates. So a call is simulated as the call
of ``function`` it stands for, inlined into the graph, with what Paddle's ``recompute`` makes differently:

- ``use_reentrant=True`` (the default) runs ``function`` as a PyLayer (``RecomputeFunction``): without any
  input requiring gradients its outputs stop gradients (``function`` runs under ``no_grad``, and Paddle logs
  a warning, replayed after the graph); with one, every tensor output requires them (an output that would
  not, an integer ``argmax``, runs natively: the graph breaks). Only direct tensor and constant arguments
  are simulated (Paddle's binding passes keyword arguments by position).
- ``use_reentrant=False`` calls ``function(*args, **kwargs)`` under saved-tensor hooks: a plain call, whose
  backward may run ``function`` again.

Run natively, Paddle's implementation runs with the hook suspended (`RECOMPUTE_CODES`).

Inside ``function`` the simulation keeps the grad mode of the call (eager runs a reentrant forward under
``no_grad``, which only Python code asking ``paddle.is_grad_enabled()`` there could see). A custom RNG state
manager (``custom_state_manager``) runs natively, as does anything Paddle's ``recompute`` would raise for.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ....errors import BreakGraphError
from ....symbolic.sir import LayerCall, Statement
from ...skip_files import run_hook_free
from ..tracker import Tracker
from .base import VariableBase, VariableFactory
from .basic import ConstantVariable, TensorVariable
from .callable import CallableVariable
from .container import TupleVariable

if TYPE_CHECKING:
    from ..function_graph import FunctionGraph

# (the module: the package ``paddle.distributed.fleet.recompute`` re-exports the function under its name)
recompute_module = importlib.import_module("paddle.distributed.fleet.recompute.recompute")
# The function, and the public wrapper calling it (``paddle.distributed.fleet.utils.recompute``).
_RECOMPUTES = (recompute_module.recompute, importlib.import_module("paddle.distributed.fleet.utils").recompute)


# Paddle's recompute implementation, run natively (a graph break at the call, or a caller not translated):
# run with the hook suspended, so the user's function runs eagerly in the forward and again in the backward
# (``unpack`` / ``RecomputeFunction.backward`` call it from the autograd engine). The non-reentrant backward
# pairs the tensors the re-run saves with those the forward saved, one by one; translated runs would save
# others; and the re-run's Python effects (appends, prints) then repeat exactly as eager's.
RECOMPUTE_CODES = run_hook_free([*_RECOMPUTES, recompute_module._recompute_without_reentrant,
                                 recompute_module.RecomputeFunction.forward,
                                 recompute_module.RecomputeFunction.backward])


def _no_custom_state_manager() -> bool:
    """Whether ``recompute`` uses Paddle's own RNG state handling (re-asked at every call of a translation)."""
    manager = recompute_module.custom_state_manager
    return manager.custom_get_state_func is None and manager.custom_set_state_func is None


def _warn_no_input_needs_grad() -> None:
    """Paddle's warning for a recompute block none of whose inputs needs gradients (its own check, given no
    input, logs it)."""
    recompute_module.check_recompute_necessary([])


def _constant_option(kwargs: dict[str, VariableBase], name: str, default: Any) -> Any:
    """A ``recompute`` option popped from ``kwargs``: a constant (guarded) or the graph breaks."""
    var = kwargs.pop(name, None)
    if var is None:
        return default
    if not isinstance(var, ConstantVariable):
        raise BreakGraphError(f"recompute({name}=...) not a constant: runs natively")
    var.graph.add_guard(var)
    return var.value


def _an_input_needs_grad(inputs: list[VariableBase]) -> bool:
    """Paddle's ``check_recompute_necessary`` on the simulated inputs: whether a tensor among them, or among
    the items of a plain tuple among them, requires gradients (their flags guarded)."""
    tensors = [var for var in inputs if isinstance(var, TensorVariable)]
    tensors += [item for var in inputs if isinstance(var, TupleVariable) and var.py_type is tuple
                for item in var.items if isinstance(item, TensorVariable)]
    for tensor in tensors:
        tensor.graph.add_guard(tensor)
    return any(not tensor.meta.stop_gradient for tensor in tensors)


def _call_recomputed(function: VariableBase, args: list[VariableBase], kwargs: dict[str, VariableBase]
                     ) -> VariableBase:
    """``function(*args, **kwargs)`` simulated, for a call whose backward runs ``function`` again: eager repeats
    then what it changes outside (a batch norm's running statistics updated twice, a list of the caller's
    appended to again), which a graph computing it once cannot. Any such change breaks the graph (the
    ``recompute`` call runs natively)."""
    graph = function.graph
    changes, first_statement = graph.side_effects.outside_changes, len(graph.statements)
    output = function.call(args, kwargs)
    if graph.side_effects.outside_changes != changes or \
            any(_repeats_effects(statement) for statement in graph.statements[first_statement:]):
        raise BreakGraphError("recompute() of a function that changes state outside (repeated by its backward) "
                              "runs natively")
    return output


def _repeats_effects(statement: Statement) -> bool:
    """Whether running ``statement`` again changes state: a PyLayer's forward (any Python), a built-in layer
    in training mode holding tensors without gradient (a batch norm's running statistics, parameters that stop
    gradients, or buffers)."""
    if statement.kind == "pylayer":
        return True
    target = statement.target
    return isinstance(target, LayerCall) and (not target.is_alive() or any(
        sub.training and any(tensor is not None and tensor.stop_gradient
                             for table in (sub._parameters, sub._buffers) for tensor in table.values())
        for sub in target.layer.sublayers(include_self=True)))


class RecomputeVariable(CallableVariable):
    """Paddle's ``recompute`` function, reached from the frame (guarded by identity)."""

    def call(self, args: list[VariableBase], kwargs: dict[str, VariableBase]) -> VariableBase:
        graph = self.graph
        if not args:
            raise BreakGraphError("recompute() without a function runs natively (eager raises)")
        function, args, kwargs = args[0], list(args[1:]), dict(kwargs)
        _constant_option(kwargs, "preserve_rng_state", True)
        reentrant = _constant_option(kwargs, "use_reentrant", True)
        graph.add_query_guard(_no_custom_state_manager, _no_custom_state_manager())
        if not _no_custom_state_manager():
            raise BreakGraphError("recompute with a custom RNG state manager runs natively")
        needs_grad = graph.grad_mode and _an_input_needs_grad([*args, *kwargs.values()])
        if graph.grad_mode and not needs_grad:
            graph.side_effects.call_after_graph(_warn_no_input_needs_grad, [])
        if not reentrant:
            # Eager runs ``function`` again in the backward when a tensor it saved is needed (also for its
            # parameters alone: every call under grad may be differentiated): a function that changes state
            # outside runs natively (`RECOMPUTE_CODES`), which repeats those changes as eager.
            return _call_recomputed(function, args, kwargs) if graph.grad_mode else function.call(args, kwargs)
        _constant_option(kwargs, "offload_indices", [])
        if kwargs or not all(isinstance(arg, (TensorVariable, ConstantVariable)) for arg in args):
            raise BreakGraphError("recompute(use_reentrant=True) with keyword or container arguments runs natively")
        if not needs_grad:
            return self._call_without_grad(function, args)
        output = _call_recomputed(function, args, {})
        outputs = output.items if isinstance(output, TupleVariable) else [output]
        if not isinstance(output, (TensorVariable, TupleVariable)) or any(
                isinstance(item, TensorVariable) and item.meta.stop_gradient for item in outputs):
            raise BreakGraphError("recompute(use_reentrant=True) gives outputs a plain call would not mark as "
                                  "requiring gradients: runs natively")
        return output

    def _call_without_grad(self, function: VariableBase, args: list[VariableBase]) -> VariableBase:
        graph = self.graph
        previous = graph.grad_mode
        graph.grad_mode = False
        try:
            return function.call(args, {})
        finally:
            graph.grad_mode = previous

    def __repr__(self) -> str:
        return "RecomputeVariable(recompute)"


@VariableFactory.register(74)
def _recompute_rule(value: Any, graph: "FunctionGraph", tracker: Tracker) -> VariableBase | None:
    return RecomputeVariable(value, graph, tracker) if any(value is fn for fn in _RECOMPUTES) else None

"""Turn a `StatementIR` into a program compiled by ``paddle.jit.to_static(full_graph=True)``.

The SIR interpreter is marked ``not_to_static`` so the AST pass leaves it alone and it simply runs once on
static inputs to build the program (DESIGN.md §6). Structurally equal SIR shares one compiled program.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import math
import sys
import threading
import weakref
from typing import Any, Callable, Iterator

import paddle
from paddle.base import core
from paddle.static import InputSpec

from ..config import config
from ..errors import SotError
from ..eval_frame_ext import get_callback, set_callback
from ..eval_frame_ext.tensor_meta import fresh_inplace_versions
from ..log import log
from ..stack_room import enter_room, leave_room
from ..stats import count_compiled_graph, uncount_compiled_graph
from . import backward_pass, gradient_flags, kept_scope, program_registries, unreached_heads, version_check
from .amp import AMP_OFF, ambient_amp_enabled, amp_applied
from .build_warnings import build_warnings_ignored
from .callstack import shallow_op_callstacks
from .cost_model import WARMUP_CALLS, CostModel
from .higher_order import (EagerRefusals, OwnBackwardCall, constants_read_by_gradients, decomposed_gradients,
                           differentiates_gradients, draws_random_numbers, inputs_read_by_gradients, mark_outputs,
                           needs_recomputed_backward, output_groups, probe_eager_refusals,
                           run_with_recomputed_backward, vjp_sir)
from .gradient_parts import ProgramParts, split_sir_parts
from .made_differentiable import call_made_differentiable
from .program_ops import buffers_read_per_output_gradient, forward_ops
from .recompute_plan import RecomputePlan
from .replay import Replay, compile_replay
from .sir import LayerCall, MetaInfo, StatementIR, match_inplace_version, run_sir
from .tracer_inheritance import enter_static_section, leave_static_section
from .zero_sign import holds_unrepresentable_zero


# For tests only: every graph runs this way, "compiled" (its static program) or "eager" (the eager replay of its
# statements), instead of the way its cost model chooses (None), so that both ways are compared with eager
# Paddle on the same programs (`forced_way`; tests/conftest.py). Not a config field: no user needs it.
_FORCED_WAY: str | None = None


@contextlib.contextmanager
def forced_way(way: str) -> Iterator[None]:
    """Within the block, every `CompiledProgram` call runs ``way`` ("compiled" or "eager"), except where only one
    way can be right (`CompiledProgram._way`). Tests only."""
    global _FORCED_WAY
    if way not in ("compiled", "eager"):
        raise ValueError(f"a graph runs 'compiled' or 'eager', not {way!r}")
    previous, _FORCED_WAY = _FORCED_WAY, way
    try:
        yield
    finally:
        _FORCED_WAY = previous


class CompiledProgram:
    """A SIR compiled to a static program; call it with the list of input tensors."""

    def __init__(self, sir: StatementIR, key: tuple | None = None, forward_only: bool = False) -> None:
        self.sir = sir
        self.key = key
        # A frame entered without grad that turns it on (``with paddle.enable_grad():``, a statement
        # ``paddle.set_grad_enabled(True)``) records statements that track gradients: each statement holds its
        # own mode, so the program runs with grad on (the caller's mode is back once it returns).
        self._turns_grad_on = not sir.grad_enabled and any(not stmt.no_grad for stmt in sir.statements)
        # A product program (`higher_order.vjp_sir`) with differentiable outputs is built without a backward of
        # its own: every call of it recording gradients runs with a recomputing backward (`_run_compiled_locked`),
        # a product program of the next order built from decomposed gradients. Paddle's program runner would
        # build its own backward at its first run in training mode, never used, and differentiating static
        # gradient ops there fails: an op without a gradient op (``pd_op.exp_grad``, ``pd_op.embedding_grad``
        # in Paddle 3.3: refused), ``matmul_double_grad`` without the gradient of one of its inputs (a
        # segmentation fault in its Vjp: see `gradient_ops_paddle_crashes_on`).
        self._forward_only = forward_only
        self.static_function = self._static_function()
        self._program: Any = None
        self._built_modes: set[bool] = set()
        # Outputs eager mode would not track gradients for (the program marks every output as differentiable).
        self._stop_gradient_outputs = [i for i, s in enumerate(sir.outputs) if sir.metas[s].stop_gradient]
        self._differentiable_outputs = len(self._stop_gradient_outputs) < len(sir.outputs)
        # Outputs standing for a tensor made in the frame and changed in place, with eager's inplace version.
        versions = {symbol: stmt.inplace_version for stmt in sir.statements if stmt.inplace_version
                    for symbol in stmt.output_symbols()}
        self._output_versions = [(i, versions[s]) for i, s in enumerate(sir.outputs) if s in versions]
        self._written_back = version_check.written_back_map(sir)
        self._layer_warnings = tuple(warning for statement in sir.statements for warning in statement.warnings)
        self._grad_inputs = [i for i, s in enumerate(sir.inputs) if not sir.metas[s].stop_gradient]
        self._heads = unreached_heads.head_leaves(sir)  # (None for the usual graph: every leaf reaches every result)
        self._lock = threading.Lock()
        self._saved: version_check.SavedByOutput | None = None  # see saved_plan()
        self._saved_parameters: list[paddle.Tensor] = []  # the held parameters its backward reads
        self._held_split: tuple[tuple[paddle.Tensor, ...], tuple[paddle.Tensor, ...]] | None = None  # see there
        # (input indexes, held tensors) the built program changes in place (see state_its_forward_may_update);
        # False when the program cannot be read
        self._changed_in_place: tuple[tuple[int, ...], tuple[paddle.Tensor, ...]] | bool | None = None
        self._recompute_plans: dict[tuple[int, ...], RecomputePlan] = {}  # see recompute_plan()
        self._scopes = _ScopeWatch()  # see _watch_new_scopes
        self._keeper: kept_scope.ScopeKeeper | None = None  # see _watch_new_scopes
        self._build_flags: dict[str, Any] = {}  # see build_flags(), once the program is built
        self._choice: str | None = None  # "compiled" or "eager", once measured (a copy of the cost model's)
        # Its program would change the sign of a zero constant (`zero_sign`): replayed, never compiled.
        self._replay_only = holds_unrepresentable_zero(sir)
        if self._replay_only:
            self._choice = "eager"
        self._cost = CostModel(weakref.WeakMethod(self._cost_chose))
        self._replay_function: Replay | None = None
        # Product programs (`higher_order.vjp_sir`), by the positions and flags they differentiate for.
        self._vjp_programs: dict[tuple, CompiledProgram] = {}
        self._differentiates: str | None = None  # for a product program: the name of the graph it differentiates
        # For a product program: the held parameters eager's gradient nodes keep (see `saved_plan`).
        self._parameters_eager_keeps: list[paddle.Tensor] | None = None
        self._output_groups: dict[tuple, list[tuple[list[int], list[int]]]] = {}  # see output_groups()
        # What eager refuses when a call is differentiated twice (probed at the first call with a recomputing
        # backward); for a first-order product program under ``create_graph``: its program's second refusal.
        self._eager_refusals: EagerRefusals | None = None
        self._draws_random_numbers: bool | None = None  # see draws_random_numbers()
        # The `sot.stats()` epoch it was counted in as a compiled graph (`compile_sir`); None: not counted.
        self.counted_in: int | None = None
        self.part_counted = False  # (made as a part of a graph, `compile_graph`, which counted the graph)
        # The program holds the parameters of the built-in layers it calls (the SIR holds the layers weakly):
        # when one of the layers is deleted, the program can never run again (its guard checks the layer's
        # identity), so it lets its parameters go.
        # (``release`` bound now: at interpreter exit, the module's globals may be gone when a layer is freed)
        this = weakref.ref(self)
        self._layer_watches = [call.watch(lambda _, this=this, release=_release: release(this))
                               for call in sir.layer_calls()]
        _RUNNABLE.add(self)
        weakref.finalize(self, _program_gone)

    def _static_function(self) -> Any:
        """``run_sir`` of the SIR as a ``paddle.jit.to_static`` function; when `_forward_only`, its outputs
        do not require grad in the program, which then has no backward of its own to build."""
        sir = self.sir
        forward_only = self._forward_only
        specs = [InputSpec([None if d == -1 else d for d in sir.metas[s].shape], sir.metas[s].dtype, s.name,
                           stop_gradient=sir.metas[s].stop_gradient) for s in sir.inputs]

        @paddle.jit.not_to_static
        def sir_runner(inputs: list) -> list:
            outputs = run_sir(sir, inputs)
            if forward_only:
                for output in outputs:
                    output.stop_gradient = True
            return outputs

        sir_runner.__name__ = sir_runner.__qualname__ = f"sir_{sir.name}"
        return paddle.jit.to_static(sir_runner, input_spec=[specs], full_graph=True)

    def release(self) -> None:
        """Drop the static program (and the parameters it holds); it must not be called again."""
        if self.key is not None and _compiled.get(self.key) is self:
            del _compiled[self.key]
        self.static_function = None
        self._program = None
        self._replay_function = None
        self._saved_parameters = []
        self._held_split = None
        self._changed_in_place = None
        self._vjp_programs.clear()
        self._layer_watches = []
        self._cost.forget_samples()
        _RUNNABLE.discard(self)
        _program_gone()

    @property
    def choice(self) -> str | None:
        """What the cost model chose ("compiled" or "eager"), None while it is still measuring; "eager" from
        the start for a SIR whose constants a static program cannot hold exactly."""
        return self._choice

    def _replay_program(self) -> Replay:
        if self._replay_function is None:  # built only when the eager side is measured or chosen
            self._replay_function = compile_replay(self.sir)
        return self._replay_function

    def _replay(self, inputs: list) -> list:
        outputs = self._replay_program()(inputs)
        if paddle.is_grad_enabled():  # (eager ops: marked as a compiled call on the same inputs would be)
            mark_outputs(outputs, needs_recomputed_backward(inputs, self._grad_inputs))
        return outputs

    def _replay_after_failure(self, failure: Exception, inputs: list, building: bool = False) -> list:
        """The program failed to build or to run: replay its statements eagerly, each from its user line, so
        that a user error (an index out of range only a kernel sees) is raised exactly as eager raises it.
        When the replay works, the failure was not the user's: `_give_up_compiling`. A product program
        (`input_gradients`) runs inside a backward pass, where no replay can compute it: it raises."""
        if self._differentiates is not None:
            raise SotError(f"sot: cannot compute the gradient of graph {self._differentiates} inside this "
                           f"backward pass: the program computing it failed ({type(failure).__name__}: "
                           f"{str(failure).strip()[:500]})") from failure
        outputs = run_sir(self.sir, inputs, located=True)
        version_check.ReplayWatch(self.sir)(inputs, outputs)
        if not isinstance(failure, RecursionError):  # (out of stack says nothing about the program)
            self._give_up_compiling(failure)
            if building and self.counted_in is not None:  # never built: not a compiled graph in `sot.stats()`
                uncount_compiled_graph(self.counted_in)
                self.counted_in = None
        return outputs

    def _give_up_compiling(self, failure: Exception) -> None:
        """The program failed where the eager replay of its statements works: a bug of ours or of Paddle's
        static mode, not of the user's code. It is logged, raised in strict mode, and otherwise the statements
        are replayed eagerly from now on (instead of failing at every call)."""
        reason = f"graph {self.sir.name} failed as a compiled program where eager mode works " \
                 f"({type(failure).__name__}: {str(failure).strip()[:500]})"
        if config.strict_mode:
            raise SotError(reason) from failure
        log(1, f"{reason}; its statements run eagerly from now on")
        self._cost.give_up()
        self._choice = "eager"
        self._announce_choice()

    @property
    def cost(self) -> CostModel:
        """Its cost model (the opcode translator lets it join its frame's `CostGroup`)."""
        return self._cost

    def _cost_chose(self, choice: str | None) -> None:
        """The cost model (or its group, for every member) chose, or measures again (None)."""
        self._choice = choice
        self._announce_choice()

    def _announce_choice(self) -> None:
        for listener in list(CHOICE_LISTENERS):
            listener(self)

    def __call__(self, inputs: list) -> list:
        if self.sir.made_differentiable:
            return call_made_differentiable(self._call_in_grad_mode, inputs, self.sir.made_differentiable)
        return self._call_in_grad_mode(inputs)

    def _call_in_grad_mode(self, inputs: list) -> list:
        if self._turns_grad_on and not paddle.is_grad_enabled():
            with paddle.enable_grad():
                return self._call_in_mode(inputs)
        return self._call_in_mode(inputs)

    def _way(self) -> str | None:
        """The way the next call runs: the cost model's choice (None while it measures), or the way a test
        forces (`forced_way`) where both ways can be right: not for a product program (its replay would call
        ``paddle.grad`` inside a backward pass), nor for one whose program cannot hold its constants or failed
        where its replay works (`_give_up_compiling`)."""
        if _FORCED_WAY is None or self._differentiates is not None or self._replay_only or self._cost.gave_up:
            return self._choice
        return _FORCED_WAY

    def _call_in_mode(self, inputs: list) -> list:
        way = self._way()
        if way is not None:
            outputs = self._replay(inputs) if way == "eager" else self._run_compiled(inputs)
            if self._cost.probing:
                self._cost.probe(outputs)  # backward passes after a forward-only choice: measure again
            return outputs
        return self._measure(inputs)

    def _measure(self, inputs: list) -> list:
        """The cost model (`cost_model.py`): after warming up, time compiled calls and eager replays of the same
        statements, forward and backward, and keep the faster. ``min_graph_size=0`` asks for compiled graphs:
        no choice."""
        cost = self._cost
        cost.calls += 1
        if config.min_graph_size <= 0 or cost.calls <= WARMUP_CALLS:
            if cost.calls == WARMUP_CALLS and config.min_graph_size > 0:
                self._replay_program()  # built before anything is timed
            return self._run_compiled(inputs)
        cost.settle()
        if cost.decide() is not None:  # (told through `_cost_chose`, with its group's other members)
            return self._call_in_grad_mode(inputs)
        parameters = getattr(self._program, "_params", None) or []  # (built by the warm-up)
        if cost.next_is_eager():
            return cost.timed(True, self._replay, inputs, parameters)
        return cost.timed(False, self._run_compiled, inputs, parameters)

    def _run_compiled(self, inputs: list) -> list:
        # Paddle's program runner keeps per-program scopes: concurrent runs of one program from several
        # threads would share them (wrong results were observed), so runs of one program are serialised.
        with self._lock:
            try:
                if ambient_amp_enabled():
                    # Every statement carries its own AMP state: the program is built and run with AMP off
                    # around it, so mixed precision outside neither rewrites nor casts the program as a whole.
                    with amp_applied(AMP_OFF):
                        outputs = self._run_compiled_locked(inputs)
                else:
                    outputs = self._run_compiled_locked(inputs)
            except Exception as failure:
                if self._program is not None or self.static_function is None:
                    raise  # a failed run was replayed already (this is the user's error), or a released program
                return self._replay_after_failure(failure, inputs, building=True)  # building it failed
        for warning in self._layer_warnings:  # (a replay runs the layers' forward: they warn themselves)
            warning.issue()
        return outputs

    def _run_compiled_locked(self, inputs: list) -> list:
        if self._program is None:
            if self.static_function is None:
                raise ReferenceError(f"sot: {self!r} was released (a layer it calls was deleted)")
            enter_room()  # building is deep Python code, run wherever the user's call happens to be
            try:
                with BUILD_LOCK, build_warnings_ignored(), BUILD_FLAGS.held(build_flags()), \
                        shallow_op_callstacks():
                    _, self._program = self.static_function.get_concrete_program(inputs)
            finally:
                leave_room()
            self._build_flags = build_flags(_bytes_made_per_run(self._program))
            self._watch_new_scopes()
            # (before any backward through a run of it: what it keeps is let go by the pass that frees its graph)
            backward_pass.install()
            # The parameters the program holds: their gradients are flagged where they are accumulated.
            gradient_flags.keep_eager_flags(getattr(self._program, "_params", None) or ())
        # ``symbolic_translate(..., training=False)`` installs its own callback: run the inference program.
        training = not inference_callback_installed()
        if self._program.training is not training:
            self._program.training = training
        try:
            try:
                records_grad = training and paddle.is_grad_enabled()
                recomputed = records_grad and self._differentiable_outputs and \
                    (self._forward_only or needs_recomputed_backward(inputs, self._grad_inputs))
                if recomputed and self._eager_refusals is None and self._differentiates is None:
                    self._eager_refusals = self._probe_eager_refusals(inputs)
                if recomputed and self._written_back:
                    # The recomputing backward would recompute from inputs the call changed in place, and the
                    # program's own backward gives gradients without gradients: the eager replay, whose
                    # autograd is eager's.
                    return self._replay(inputs)
                # (Through views, the gradients get eager's autograd flags: `gradient_flags`. No output
                # requiring grad, no gradient.)
                fed = gradient_flags.fed(inputs, self._grad_inputs, non_leaves=not recomputed) \
                    if records_grad and self._differentiable_outputs else inputs
                if self._scopes.made >= MAX_BUSY_SCOPES and records_grad and not recomputed and \
                        training in self._built_modes and self._may_replay_when_busy() and \
                        _scopes_all_busy(self._program, fed, MAX_BUSY_SCOPES):
                    return self._replay(inputs)  # (see MAX_BUSY_SCOPES)
                if training not in self._built_modes:
                    # The first run in a mode builds the runnable programs and their interpreters (and the
                    # backward of the train program, whose Paddle code warns of its own static values: not
                    # the user's warnings, which eager code never shows).
                    self._built_modes.add(training)
                    enter_room()
                    try:
                        with BUILD_LOCK, BUILD_FLAGS.held(self._build_flags), shallow_op_callstacks(), \
                                build_warnings_ignored(), \
                                parameter_gradients_kept(getattr(self._program, "_params", None) or ()):
                            outputs = self._run_program(inputs, fed, recomputed)
                    finally:
                        leave_room()
                else:
                    outputs = self._run_program(inputs, fed, recomputed)
            finally:
                self._end_scope_build()
        except Exception as failure:
            # A kernel failed at run time (e.g. an index out of range). Replay the ops eagerly so the user
            # gets exactly the eager exception and message; if eager succeeds, its result is the answer.
            return self._replay_after_failure(failure, inputs)
        if not recomputed:
            # (each output a counter of its own, as a new eager tensor: Paddle's share the scope variable's)
            fresh_inplace_versions(outputs, fed)
        for index in self._stop_gradient_outputs:
            if records_grad:
                # (the runner gives every output the program's grad node: eager's tensor made without gradient
                # has none, and a later ``t.stop_gradient = False`` must make a leaf of it, not an edge into
                # the program; the detached tensor shares its memory and inplace version)
                outputs[index] = outputs[index].detach()
            else:
                outputs[index].stop_gradient = True
        for index, version in self._output_versions:  # (before the versions of saved outputs are noted)
            match_inplace_version(outputs[index], version)
        if records_grad:
            self._watch_saved_tensors(fed, outputs)
            if not recomputed:
                mark_outputs(outputs, recomputed=False)
                if self._heads is not None:
                    unreached_heads.watch_call(self._heads, inputs, outputs)
                if self._scopes.last not in self._scopes.backward_built:
                    _build_backward_under_flags(self._scopes, self._build_flags, outputs)
                if self._keeper is not None and self._scopes.last_scope is not None:
                    kept_scope.watch_call(self._keeper, self._scopes.last_scope, outputs,
                                          OwnBackwardCall(self, inputs))
        return outputs

    def _may_replay_when_busy(self) -> bool:
        """Whether a call may run as the eager replay when every scope of the program is busy (see
        `MAX_BUSY_SCOPES`): not a product program (its replay would call ``paddle.grad`` inside a backward
        pass), nor with ``min_graph_size=0`` (compiled graphs asked for)."""
        return self._differentiates is None and config.min_graph_size > 0 and _FORCED_WAY != "compiled"

    def _run_program(self, inputs: list, fed: list, recomputed: bool) -> list:
        """Run the built program; with a recomputing backward if ``recomputed``."""
        if recomputed:
            return run_with_recomputed_backward(self, inputs, fed, self._program.sot_call)
        return self._program.sot_call(fed)

    # What `higher_order` needs of a program it runs with a recomputing backward.
    @property
    def grad_inputs(self) -> list[int]:
        """Indexes of the inputs that may require grad."""
        return self._grad_inputs

    @property
    def stop_gradient_outputs(self) -> list[int]:
        """Indexes of the outputs eager mode tracks no gradient for."""
        return self._stop_gradient_outputs

    def output_groups(self, grad_positions: tuple[int, ...], parameters: tuple[paddle.Tensor, ...]
                      ) -> list[tuple[list[int], list[int]]]:
        """`higher_order.output_groups` of the SIR, computed once per set of differentiable tensors."""
        key = (grad_positions, tuple(id(p) for p in parameters))
        groups = self._output_groups.get(key)
        if groups is None:
            groups = self._output_groups[key] = output_groups(self.sir, grad_positions, parameters)
        return groups

    def _probe_eager_refusals(self, inputs: list) -> EagerRefusals:
        """`higher_order.probe_eager_refusals` of a call, without this thread's callback (the eager replay must
        not be translated). Not of a SIR running the user's Python code (a PyLayer, whose backward the probe
        would run too; a nested call; a layer's forward hooks): its side effects would run once more, so nothing
        is refused there."""
        if any(stmt.kind in ("pylayer", "call") or (isinstance(stmt.target, LayerCall) and (
                not stmt.target.is_alive() or stmt.target.runs_forward_hooks())) for stmt in self.sir.statements):
            return EagerRefusals()
        previous = set_callback(None)
        try:
            return probe_eager_refusals(self._replay_program(), inputs, self._grad_inputs, self.held_parameters(),
                                        self.state_its_forward_may_update(inputs))
        finally:
            set_callback(previous)

    def probe_refusals(self, inputs: list) -> None:
        """Probe what eager refuses (`_probe_eager_refusals`) on a call's ``inputs``, once: for a ``create_graph``
        pass through a call run with the program's own backward (`higher_order.OwnBackwardCall`), at its end."""
        if self._eager_refusals is None and self._differentiates is None:
            self._eager_refusals = self._probe_eager_refusals(inputs)

    def draws_random_numbers(self) -> bool:
        """Whether the (built) program's forward draws random numbers (`higher_order.draws_random_numbers`)."""
        if self._draws_random_numbers is None:
            self._draws_random_numbers = draws_random_numbers(self._program)
        return self._draws_random_numbers

    @property
    def eager_refusals(self) -> EagerRefusals | None:
        """What eager refuses when a call is differentiated twice (`higher_order.EagerRefusals`), once probed."""
        return self._eager_refusals

    @functools.cached_property
    def inputs_read_by_gradients(self) -> list[frozenset[int]]:
        """`higher_order.inputs_read_by_gradients` of the SIR."""
        return inputs_read_by_gradients(self.sir)

    def held_parameters(self) -> tuple[paddle.Tensor, ...]:
        """The parameters requiring grad that the (built) program holds itself (of the built-in layers it
        calls), rather than takes as inputs."""
        return tuple(p for p in getattr(self._program, "_params", None) or () if not p.stop_gradient)

    def held_tensors_kept_and_copied(self) -> tuple[tuple[paddle.Tensor, ...], tuple[paddle.Tensor, ...]]:
        """The tensors the (built) program holds, split for a recomputing backward (`recompute_plan.ForwardState`):
        the parameters requiring grad its own backward reads (eager's keeps them too: version-checked), and the
        others (copied)."""
        if self._held_split is None:
            self.saved_plan()
            saved = {id(p) for p in self._saved_parameters}
            held = [t for t in getattr(self._program, "_params", None) or () if t._is_initialized()]
            self._held_split = (tuple(p for p in held if id(p) in saved and not p.stop_gradient),
                                tuple(t for t in held if id(t) not in saved))
        return self._held_split

    def state_its_forward_may_update(self, inputs: list) -> list[paddle.Tensor]:
        """The tensors the (built) program's forward changes in place, of the call's ``inputs`` (the running
        statistics an ``api`` statement ``F.batch_norm`` in training mode updates) and of those it holds (a
        batch norm layer's): eager's backward leaves them as the forward did, so what recomputes the forward (a
        recomputing backward, the eager refusal probe) puts them back. Read from the program's in-place ops
        (`changed_in_place`), whatever the op; when the program cannot be read, the tensors without gradient of
        the built-in layers in training mode that it calls, as a layer's forward is all it can know of."""
        if self._changed_in_place is None and self._program is not None:
            self._changed_in_place = changed_in_place(self._program, self.sir) or False
        if not self._changed_in_place:
            return self._layer_state_in_training()
        indexes, held = self._changed_in_place
        return [inputs[i] for i in indexes] + list(held)

    def _layer_state_in_training(self) -> list[paddle.Tensor]:
        """The tensors without gradient of the built-in layers in training mode that the program calls."""
        found: dict[int, paddle.Tensor] = {}
        for stmt in self.sir.statements:
            if isinstance(stmt.target, LayerCall) and stmt.target.is_alive():
                for sub in stmt.target.layer.sublayers(include_self=True):
                    if sub.training:
                        found.update((id(t), t) for table in (sub._parameters, sub._buffers)
                                     for t in table.values() if t is not None and t.stop_gradient)
        return list(found.values())

    def input_gradients(self, inputs: list, output_grads: dict[int, paddle.Tensor], grad_positions: tuple[int, ...],
                        parameters: tuple[paddle.Tensor, ...], create_graph: bool) -> list:
        """The gradients of ``inputs[grad_positions]`` and of ``parameters`` given those of the differentiable
        outputs (those not in `stop_gradient_outputs`, by output index), computed by the product program
        (`higher_order.vjp_sir`): differentiable in turn if ``create_graph``. (Keyed by index, not a list: the
        product program pairs each cotangent with its output by position, and a list in another order, with
        outputs of equal shapes, would give wrong gradients silently.)"""
        # Only the outputs a gradient reached in this pass: eager's backward never runs the gradient of what
        # the others were computed by (a gradient of an embedding's table, which has no gradient of its own:
        # a product program differentiating it would not build), and adds no zero term (0 * inf).
        if self._differentiates is not None and self._eager_refusals is not None and \
                self._eager_refusals.second is not None:
            backward_pass.refuse_as_eager(self._eager_refusals.second)  # (see `EagerRefusals`)
        grad_outputs = [i for i in range(len(self.sir.outputs))
                        if i not in self._stop_gradient_outputs and i in output_grads]
        if not grad_outputs:
            return [paddle.zeros_like(inputs[i]) for i in grad_positions] + [paddle.zeros_like(p) for p in parameters]
        cotangents = [output_grads[i] for i in grad_outputs]
        cotangent_metas = [MetaInfo(self.sir.metas[self.sir.outputs[i]].shape, c.dtype, c.stop_gradient)
                           for i, c in zip(grad_outputs, cotangents)]
        key = (grad_positions, tuple(grad_outputs), tuple(cotangent_metas), tuple(id(p) for p in parameters),
               create_graph)
        program = self._vjp_programs.get(key)
        if program is None:
            if differentiates_gradients(self.sir):
                self._refuse_undifferentiable_gradient_ops()
            program = CompiledProgram(vjp_sir(self.sir, list(grad_positions), grad_outputs, cotangent_metas,
                                              list(parameters), create_graph), forward_only=create_graph)
            program._choice = "compiled"  # (an eager replay would call ``paddle.grad`` inside a backward pass)
            program._differentiates = self.sir.name
            if create_graph and self._differentiates is None and self._eager_refusals is not None:
                program._eager_refusals = EagerRefusals(second=self._eager_refusals.second)
            self.saved_plan()
            program._parameters_eager_keeps = list(self._saved_parameters)
            self._vjp_programs[key] = program
        # (Hooks run in the ambient grad mode. Under no_grad, a program's values would not require grad, and
        # ``paddle.grad`` inside would find none.)
        with paddle.enable_grad():
            if program._program is None and differentiates_gradients(self.sir):
                with BUILD_LOCK, decomposed_gradients():  # (see there; the first call builds the program)
                    gradients = program(list(inputs) + cotangents)
            else:
                gradients = program(list(inputs) + cotangents)
        return _unwritten_as_zeros(gradients, [inputs[i] for i in grad_positions] + list(parameters))

    def _refuse_undifferentiable_gradient_ops(self) -> None:
        """Refuse (a `SotError`, raised by the pass) to build the product of this product program when its
        built program has an op whose static gradient Paddle crashes on (`gradient_ops_paddle_crashes_on`)."""
        crashing = gradient_ops_paddle_crashes_on(self._program)
        if crashing:
            backward_pass.refuse_as_eager(SotError(
                f"sot: cannot compute a derivative of order three or more through graph {self._differentiates}: "
                f"the program computing its derivative of the order before has {', '.join(sorted(crashing))} "
                f"with an operand that does not require grad, which Paddle's static autograd cannot "
                f"differentiate (it crashes). Workaround: give the call an input that requires grad (e.g. "
                f"`x = x.detach(); x.stop_gradient = False` before the call), or run that code eagerly "
                f"(sot.skip_function)"))

    def _watch_new_scopes(self) -> None:
        """Build every interpreter of the program under its `build_flags`, not only the first: keep Paddle's
        in-place pass away from all of them.

        The program runner builds one interpreter per scope, and makes a new scope whenever the cached ones
        are still held (e.g. by outputs whose backward has not run yet); the pass, applied at that moment,
        may let an op write into the buffer of an input (observed: ``(y.detach() - t).detach()`` followed
        by ``-=`` changed the caller's ``y`` on every other call). So the flags are set while a call that
        makes a new scope runs."""
        program = self._program
        original = getattr(type(program), "_create_scope_vec", None)
        scope_cache = getattr(program, "_scope_cache", None)
        if original is None or not isinstance(scope_cache, dict):
            return
        program_ref = weakref.ref(program)  # (the wrapper lives on the program: no reference cycle)
        watch = self._scopes  # (shared with the wrapper, which must not hold ``self``: no cycle)
        flags = self._build_flags
        self._keeper = kept_scope.ScopeKeeper(program, self.sir.name)

        def create_scope_vec(cache_key: Any = None, use_scope_cache: bool = False) -> Any:
            known = len(scope_cache.get(cache_key, ()))
            scopes = original(program_ref(), cache_key=cache_key, use_scope_cache=use_scope_cache)
            watch.last = id(scopes[0]) if scopes else None
            watch.last_scope = scopes[0] if scopes and use_scope_cache else None
            made = use_scope_cache and len(scope_cache.get(cache_key, ())) > known
            watch.made += made
            thread = threading.get_ident()
            if (not use_scope_cache or made) and thread not in watch.building:
                BUILD_LOCK.acquire()  # (the flags are process-wide: released by _end_scope_build)
                watch.building.add(thread)
                BUILD_FLAGS.enter(flags)
            return scopes

        program._create_scope_vec = create_scope_vec

    def _end_scope_build(self) -> None:
        thread = threading.get_ident()
        if thread in self._scopes.building:
            self._scopes.building.discard(thread)
            try:
                BUILD_FLAGS.exit()
            finally:
                BUILD_LOCK.release()

    def _watch_saved_tensors(self, inputs: list, outputs: list) -> None:
        """Make ``backward()`` refuse, as eager autograd does, when a tensor the backward program reads was
        changed in place after this run (eager snapshots the version of every saved tensor; the program
        runner keeps plain references, so the backward would silently use the new values)."""
        if self._saved is None:
            if not any(isinstance(out, paddle.Tensor) and not out.stop_gradient for out in outputs):
                return
            self.saved_plan()
        version_check.watch_saved_tensors(inputs, outputs, self._saved, self._written_back, self._saved_parameters)

    def saved_plan(self) -> version_check.SavedByOutput:
        """Per output, what the (built) program's backward reads the data of (`version_check.saved_by_reach`):
        what eager's backward would keep of the call, and refuse to use after an in-place change."""
        if self._saved is None:
            inputs, outputs, self._saved_parameters = _saved_for_backward(self._program, self.sir)
            if self._parameters_eager_keeps is not None:
                # A product program: its static backward (of the next order, from decomposed gradients) reads
                # parameters eager's nodes never keep (a bias). Eager's nodes of every order keep what the
                # first-order gradients read: the parameters the differentiated program's backward reads.
                kept = {id(p) for p in self._parameters_eager_keeps}
                self._saved_parameters = [p for p in getattr(self._program, "_params", None) or ()
                                          if id(p) in kept]
            self._saved = version_check.saved_by_reach(self.sir, inputs, outputs, self._saved_parameters)
            if self._parameters_eager_keeps is None:  # (a product program's static backward is not eager's)
                self._saved = _narrowed_to_what_each_gradient_reads(self._program, self.sir, self._saved)
            version_check.prepare()
        return self._saved

    def recompute_plan(self, outputs: tuple[int, ...]) -> RecomputePlan:
        """How a recomputing backward of ``outputs`` (indexes) keeps the inputs it reads (`RecomputePlan`):
        those eager's backward keeps too are version-checked, the others copied. Eager keeps what the program's
        own backward reads (a static op may keep a value computed from an input where eager's keeps the input:
        the index of ``x[index]``), and the inputs not requiring grad whose values the ops reached read
        (`higher_order.constants_read_by_gradients`)."""
        plan = self._recompute_plans.get(outputs)
        if plan is None:
            saved = self.saved_plan()
            constants = constants_read_by_gradients(self.sir)
            plan = self._recompute_plans[outputs] = RecomputePlan.of_outputs(
                [self.inputs_read_by_gradients[o] for o in outputs],
                [frozenset((*saved[o].inputs, *constants[o])) for o in outputs])
        return plan

    def __repr__(self) -> str:
        return f"<CompiledProgram {self.sir.name}: {len(self.sir)} statements>"


# A run recording gradients holds its scope (the values its backward reads) until its backward has run or its
# outputs are gone; a run finding every scope of the program held makes a new one, and with it new forward and
# backward interpreters, which Paddle's global interpreter cache keeps for the life of the process (about 2 MB
# per scope for squeezenet, and a build of ~50 ms). Calls whose outputs are kept (predictions collected
# without ``no_grad``, in train mode) would so build and keep an interpreter each, forever. Past this many
# scopes held at once, a call runs as the eager replay of its statements (eager's results and autograd, and
# eager's memory, freed with its outputs); up to it (a few forward calls before one backward: a siamese or
# triplet loss, losses of micro-batches summed) every call runs compiled.
MAX_BUSY_SCOPES = 8


@contextlib.contextmanager
def parameter_gradients_kept(parameters: Any) -> Iterator[None]:
    """Keep the gradients accumulated in ``parameters`` through the build of a program's runnable programs.

    Building the train program, Paddle sets the gradient type of each parameter it holds (``_set_grad_type``),
    which drops the gradient accumulated so far: with gradient accumulation (``backward()`` at every step,
    ``step()`` every k), a new program (a new batch size, a retranslation, eval then train) silently lost the
    earlier steps' gradients. The same tensors are put back (a later pass accumulates into them, as into
    eager's)."""
    saved = [(parameter, parameter.grad) for parameter in parameters]
    try:
        yield
    finally:
        for parameter, gradient in saved:
            if gradient is not None and parameter.grad is None:
                parameter.grad = gradient


def _scopes_all_busy(program: Any, inputs: list, limit: int) -> bool:
    """The program runner holds at least ``limit`` scopes for the current mode, each held by a run whose
    backward has not run: the next run would make a new one. False where Paddle's runner cannot be read."""
    scopes_by_key = getattr(program, "_scope_cache", None)
    if not isinstance(scopes_by_key, dict):
        return False
    try:
        key = paddle.base.core.calc_scope_cache_key(program.program_id, inputs, False, 0)
        scopes = scopes_by_key.get(key, ())
        return len(scopes) >= limit and not any(scope._can_reused for scope in scopes)
    except Exception:  # another Paddle version: as Paddle does
        return False


def _unwritten_as_zeros(gradients: list, tensors: list) -> list:
    """``gradients`` (of ``tensors``, in order) with zeros for those the program left unwritten: a grad kernel
    skips an output whose every term is zero for lack of the operand it would come from (Paddle 3.3's
    ``conv2d_grad_grad`` leaves the filter's gradient unallocated without the input's second gradient: H v with
    respect to the parameters of a bare convolution called on an input not requiring grad), and an unwritten
    tensor raises "holds no memory" where it is read."""
    if not isinstance(gradients, list) or len(gradients) != len(tensors):
        return gradients
    return [gradient if not isinstance(gradient, paddle.Tensor) or gradient._is_initialized()
            else paddle.zeros_like(tensor) for gradient, tensor in zip(gradients, tensors)]


def _saved_for_backward(program: Any, sir: StatementIR) -> tuple[list[int], list[int], list[paddle.Tensor]]:
    """Indexes of the inputs and of the outputs whose data the backward program reads (its ``bx``/``bo``
    values, minus those it needs only the shape of), and the held parameters it reads (``bp``: a linear
    layer's weight, not its bias; or through an in-place op's output, `_held_read_through_in_place_outputs`:
    a batch norm's statistics)."""
    try:
        attrs = program.train_program.program_attr
        no_need = set(attrs.get("no_need_buffers_names", ()))
        needed = (set(attrs["bx_names"]) | set(attrs["bo_names"])) - no_need
        needed_parameters = set(attrs.get("bp_names", ())) - no_need
        output_names = list(attrs["fo_names"])
        middles = set(attrs.get("bm_names", ())) - no_need
    except (AttributeError, KeyError, TypeError):  # another Paddle version: nothing to watch
        return [], [], []
    needed_parameters |= _held_read_through_in_place_outputs(program, middles)
    inputs = [i for i, symbol in enumerate(sir.inputs) if symbol.name in needed]
    outputs = [i for i, name in enumerate(output_names) if name in needed] \
        if len(output_names) == len(sir.outputs) else []
    parameters = [p for p in getattr(program, "_params", None) or () if p.name in needed_parameters]
    return inputs, outputs, parameters


def _narrowed_to_what_each_gradient_reads(program: Any, sir: StatementIR,
                                          plans: version_check.SavedByOutput) -> version_check.SavedByOutput:
    """``plans`` keeping, of each output's saved inputs and outputs, those the grad ops its gradient reaches in
    the built backward program read the data of (`buffers_read_per_output_gradient`): the SIR's reach counts
    every value a reached statement touches, though eager's node may keep none of them (a subtraction keeps
    no buffer) or keep a value only for another output's gradient (fuzz seeds 122624, 142014, 142925). The
    held parameters keep the SIR's plan. ``plans`` unchanged when the program cannot be read."""
    try:
        read = buffers_read_per_output_gradient(program)
        output_names = list(program.train_program.program_attr["fo_names"])
    except Exception:  # noqa: BLE001 - another Paddle version (or an unexpected layout): the coarser plan
        return plans
    if not len(read) == len(output_names) == len(sir.outputs) == len(plans):
        return plans
    return [dataclasses.replace(plan, inputs=[i for i in plan.inputs if sir.inputs[i].name in read[o]],
                                outputs=[i for i in plan.outputs if output_names[i] in read[o]])
            if read[o] is not None else plan for o, plan in enumerate(plans)]


def changed_in_place(program: Any, sir: StatementIR) -> tuple[tuple[int, ...], tuple[paddle.Tensor, ...]] | None:
    """The indexes of ``sir``'s inputs and the held tensors whose memory an in-place op of the built ``program``
    (any block) writes: Paddle's own table of each op's in-place outputs (``get_op_inplace_info``: output index
    -> operand index; ``batch_norm_`` writes ``mean_out`` into ``mean``), each operand followed back through
    earlier in-place ops to the value it started as (`_in_place_origin`), a program input (``pd_op.data``, named
    as the SIR's input) or a held tensor (``builtin.parameter``). None when the program cannot be read (another
    Paddle version)."""
    try:
        inplace_info = core.pir.get_op_inplace_info
        input_names, held_names = set(), set()
        for op in forward_ops(program):
            for operand in inplace_info(op).values():
                source = _in_place_origin(op.operand_source(operand), inplace_info)
                if source is None:
                    continue
                if source.name() == "pd_op.data":
                    input_names.add(source.attrs()["name"])
                elif source.name() == "builtin.parameter":
                    held_names.add(source.attrs()["parameter_name"])
    except Exception:  # noqa: BLE001 - another Paddle version: the caller's fallback
        return None
    return (tuple(i for i, symbol in enumerate(sir.inputs) if symbol.name in input_names),
            tuple(t for t in getattr(program, "_params", None) or () if t.name in held_names))


def _in_place_origin(value: Any, inplace_info: Callable[[Any], dict[int, int]]) -> Any:
    """The op defining the value whose memory ``value`` is: ``value`` followed back through the in-place ops
    that wrote it (an in-place output is its operand's memory). None for a value no op defines."""
    source = value.get_defining_op()
    while source is not None and value.index() in inplace_info(source):
        value = source.operand_source(inplace_info(source)[value.index()])
        source = value.get_defining_op()
    return source


def _held_read_through_in_place_outputs(program: Any, middles: set[str]) -> set[str]:
    """The names of the held tensors whose memory the backward program reads as an output of an in-place op of
    the forward (the statistics of a batch norm: ``batch_norm_`` writes ``mean_out`` into ``mean``, and its
    gradient reads ``mean_out``): ``middles`` are the forward's intermediate values the backward reads, each
    followed back to its memory's origin (`_in_place_origin`). Eager's op keeps that tensor (its backward
    refuses once it changed in place), and the program's backward would read its new values. (Empty when the
    program cannot be read.)"""
    found: set[str] = set()
    try:
        inplace_info = core.pir.get_op_inplace_info
        for op in program.train_program.forward_program.global_block().ops:
            if op.name() != "builtin.shadow_output" or op.attrs().get("output_name") not in middles:
                continue
            value = op.operand_source(0)
            producer = value.get_defining_op()
            if producer is None or value.index() not in inplace_info(producer):
                continue  # (not an in-place output: a value of its own)
            source = _in_place_origin(value, inplace_info)
            if source is not None and source.name() == "builtin.parameter":
                found.add(source.attrs()["parameter_name"])
    except Exception:  # noqa: BLE001 - another Paddle version: what the backward reads directly only
        return set()
    return found


@dataclasses.dataclass(eq=False)
class _ScopeWatch:
    """What `CompiledProgram._watch_new_scopes` saw of the program runner's scopes (one interpreter each for
    the forward and the backward program, built by their first run in the scope)."""

    # The threads whose current run made a new scope: its forward interpreter is built under the flags, with
    # the build lock held by that thread (per thread: a run of another thread ending meanwhile must not
    # release it).
    building: set[int] = dataclasses.field(default_factory=set)
    last: int | None = None  # id of the scope of the latest run
    last_scope: Any = None  # that scope, when it is one of the runner's cache (`kept_scope` may keep it)
    backward_built: set = dataclasses.field(default_factory=set)  # ids of scopes whose backward ran
    made: int = 0  # scopes the runner made for the program, all modes (only grows): see MAX_BUSY_SCOPES


def _build_backward_under_flags(scopes: _ScopeWatch, flags: dict[str, Any], outputs: list) -> None:
    """Have the backward interpreter of the latest run's scope built under the program's ``flags``: it is
    built by the first backward pass through the scope, out of any call of the program. A hook on the
    outputs sets the flags when the first output gradient arrives (the program's grad node runs next); the
    end of the backward pass puts the user's values back (`backward_pass.at_pass_end`)."""
    scope = scopes.last
    if scope is None:
        return

    def on_output_grad(grad: Any) -> None:
        if scope not in scopes.backward_built:
            scopes.backward_built.add(scope)
            BUILD_FLAGS.enter(flags)
            if not backward_pass.at_pass_end(BUILD_FLAGS.exit):
                BUILD_FLAGS.exit()

    # (at every run until a backward went through the scope, i.e. at every forward-only call: the hooks are
    # registered without the public wrapper's decorator, check and helper object)
    for out in outputs:
        if isinstance(out, paddle.Tensor) and not out.stop_gradient:
            out._register_grad_hook(on_output_grad)




def _existing_flag_names(names: list[str]) -> list[str]:
    """The flags of ``names`` this Paddle knows (``get_flags`` refuses unknown names)."""
    known = []
    for name in names:
        try:
            paddle.get_flags([name])
        except ValueError:
            continue
        known.append(name)
    return known


# Dead intermediate tensors of a program run are freed in batches of at most this many bytes (see build_flags).
GC_BATCH_BYTES = 1 << 20
_BUILD_FLAG_NAMES = _existing_flag_names(["FLAGS_pir_apply_inplace_pass", "FLAGS_eager_delete_tensor_gb"])


def build_flags(gc_batch_bytes: int = GC_BATCH_BYTES) -> dict[str, Any]:
    """The Paddle flags in force while the interpreters that run a program are built: its first run in each
    mode (training / inference), every run that makes a new scope (`_watch_new_scopes`), and the backward
    pass that follows (`_build_backward_under_flags`). An interpreter reads them once, when it is built.

    * The in-place pass off: it may make a returned tensor share memory with a later in-place op (observed
      with reshape + softmax), or let an op write into the buffer of an input.
    * ``FLAGS_eager_delete_tensor_gb`` above 0: the interpreter's garbage collector hands dead intermediate
      tensors to its collector thread in batches of ``gc_batch_bytes`` instead of one task (and one thread
      wake-up) per tensor. Per tensor, that hand-off cost a transformer's compiled train step on CPU about
      40% of its process CPU time (forward and backward programs), more than the eager step. A batch counts
      the tensors' bytes only, while each dead tensor holds some KiB of memory however small it is (1e5 runs
      of a two-op program on 8 floats held 130 MiB with 1 MiB batches): so a batch is also at most what one
      run makes (`_bytes_made_per_run`), and a program holds about one run's dead tensors at most."""
    values = {"FLAGS_pir_apply_inplace_pass": False, "FLAGS_eager_delete_tensor_gb": gc_batch_bytes / (1 << 30)}
    return {name: values[name] for name in _BUILD_FLAG_NAMES}


def _bytes_made_per_run(program: Any) -> int:
    """The bytes of the tensors one forward run of ``program`` makes (parameters aside; a dynamic dimension
    counted as 1: a lower bound), at most `GC_BATCH_BYTES`; `GC_BATCH_BYTES` when the program cannot be
    read."""
    try:
        ops = program._origin_main_program.global_block().ops
        made = 0
        for op in ops:
            if op.name() in ("builtin.parameter", "pd_op.data"):
                continue
            for result in op.results():
                made += math.prod(max(d, 1) for d in result.shape) * paddle.core.size_of_dtype(result.dtype)
                if made >= GC_BATCH_BYTES:
                    return GC_BATCH_BYTES
    except Exception:  # another Paddle version: batches of the largest size
        return GC_BATCH_BYTES
    return made


class _BuildFlags:
    """`build_flags` set while at least one section needs them (the latest section's values), and the user's
    values back when the last one ends: sections of several threads and of a backward pass overlap, and end
    in any order."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sections = 0
        self._users: dict[str, Any] = {}

    def enter(self, flags: dict[str, Any]) -> None:
        with self._lock:
            if self._sections == 0:
                self._users = paddle.get_flags(list(flags))
            paddle.set_flags(flags)
            self._sections += 1

    def exit(self) -> None:
        with self._lock:
            self._sections -= 1
            if self._sections == 0:
                paddle.set_flags(self._users)

    @contextlib.contextmanager
    def held(self, flags: dict[str, Any]) -> Iterator[None]:
        self.enter(flags)
        try:
            yield
        finally:
            self.exit()


BUILD_FLAGS = _BuildFlags()


class _BuildLock:
    """A reentrant lock whose holder is in a static section (`tracer_inheritance`): whatever a build switches
    Paddle to in its own thread, threads that start meanwhile still start in dygraph mode.

    It also defers actions that must not run in the middle of a build (`run_outside_builds`): the release of
    a program whose layer was deleted can come from a garbage collection that starts inside Paddle's program
    building, and freeing one static program while Paddle applies passes to another one is not safe.

    And when the outermost section ends, it drops what Paddle's per-program registries still hold of the
    programs made inside it (`program_registries`: a failed build's, a throwaway meta-inference program's),
    which a later program allocated at the same address would otherwise inherit.

    Automatic garbage collection is off inside the outermost section (as it was before, after it): a
    collection started by an allocation inside Paddle's program building frees whatever static programs
    unreachable cycles hold, in the middle of the build. Observed on Python 3.12/3.13 (whose collector runs at
    other moments than 3.11's): building a train program (``RunnableProgram.program_name_attr``) read a value
    of its ``no_need_buffers`` list as freed memory, a segfault in about one run in four of
    tests/symbolic/test_recompute_plan.py's held-tensor tests, none in 20 with collection held off, nor with
    ``gc.disable()`` for the whole run. The cycles are collected by the first collection after the section.
    A collection landing outside the sections still crashed a later build the same way (3.11, about one full
    suite in four; a two-module reproducer in wip/README.md: 1-3 crashes in 12 runs, none with ``gc.disable()``
    for the whole process): the young generations are collected at the start of each outermost section, where
    nothing is being built (the reproducer: 0 in 12 runs, also with a full collection there: 0 in 9). Young
    only: a full collection costs tens of milliseconds, and a first call opens several sections."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._depth = 0  # (changed by the holder only)
        self._deferred: list[Callable[[], None]] = []
        self._registries: list = []  # `program_registries.snapshot` at the start of the outermost section
        self._gc_was_enabled = False  # (whether the outermost section turned automatic collection off)

    # (Either bookkeeping call can raise, a RecursionError near the limit: the lock is never kept by a failed
    # acquire nor by a release whose bookkeeping failed, else every other thread would wait on it forever. So
    # the failure paths call no Python function, which would raise again there: collection is turned back on
    # inline.)
    def acquire(self) -> bool:
        self._lock.acquire()
        try:
            if self._depth == 0:
                self._gc_was_enabled = gc.isenabled()
                if self._gc_was_enabled:
                    gc.collect(1)  # (the young garbage first: see the class docstring)
                self._registries = program_registries.snapshot()
                gc.disable()
            enter_static_section()
        except BaseException:
            try:
                if self._depth == 0 and self._gc_was_enabled:
                    self._gc_was_enabled = False
                    gc.enable()
            finally:
                self._lock.release()
            raise
        self._depth += 1
        return True

    def release(self) -> None:
        try:
            if self._depth == 1:
                try:
                    program_registries.forget_added_since(self._registries)
                finally:
                    self._registries = []
                    if self._gc_was_enabled:
                        self._gc_was_enabled = False
                        gc.enable()
                    while self._deferred:
                        self._deferred.pop()()
        finally:
            self._depth -= 1
            try:
                leave_static_section()
            finally:
                self._lock.release()

    def run_outside_builds(self, action: Callable[[], None]) -> None:
        """Run ``action`` now if no thread is building, else when the build ends (by its thread)."""
        if self._depth and self._lock._is_owned():  # type: ignore[attr-defined]
            self._deferred.append(action)  # (this thread is building)
        elif self._lock.acquire(blocking=False):
            try:
                action()
            finally:
                self._lock.release()
        else:
            self._deferred.append(action)  # (another thread is building: it runs it when done)

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc_info: Any) -> None:
        self.release()


# Building static programs goes through Paddle's process-wide default programs: one thread at a time
# (translation, which infers metas on throwaway static programs, takes it too).
BUILD_LOCK = _BuildLock()

_compiled: dict[tuple, CompiledProgram] = {}
# Called with a program right after its cost model chose (native.py re-examines the entries using it).
CHOICE_LISTENERS: list[Callable[[CompiledProgram], None]] = []
# Filled by the callback module: the callback installed by ``symbolic_translate(..., training=False)``.
INFERENCE_CALLBACK: list[Any] = [None]


def inference_callback_installed() -> bool:
    """Whether this thread runs under ``symbolic_translate(..., training=False)``: its programs run (and are
    simulated) without building backward."""
    return INFERENCE_CALLBACK[0] is not None and get_callback() is INFERENCE_CALLBACK[0]


# Static gradient ops whose own gradient (Vjp) Paddle 3.3 builds by reading every operand: with an optional
# operand absent (the gradient of an output nothing reads), building it crashes the process.
_VJP_READS_EVERY_OPERAND = frozenset(["pd_op.matmul_double_grad"])


def gradient_ops_paddle_crashes_on(program: Any) -> set[str]:
    """The names of the ops of the built ``program`` in `_VJP_READS_EVERY_OPERAND` with an absent operand (empty
    when the program cannot be read)."""
    found: set[str] = set()
    try:
        for op in forward_ops(program):
            if op.name() in _VJP_READS_EVERY_OPERAND and \
                    not all(op.operand_source(i).initialized() for i in range(op.num_operands())):
                found.add(op.name())
    except Exception:  # noqa: BLE001 - another Paddle version: left to Paddle
        return set()
    return found


def compile_graph(sir: StatementIR) -> "CompiledProgram | ProgramParts":
    """What runs a recorded graph compiled: one program, or one per part when its results belong to separate
    gradient graphs (`gradient_parts`: a backward through one part must leave the others' nodes usable). One
    compiled graph in `sot.stats()` either way: the graph was captured whole."""
    new: list[CompiledProgram] = []

    def compile_part(part: StatementIR) -> CompiledProgram:
        program = compile_sir(part, counted=False)
        if program.counted_in is None and not program.part_counted:
            program.part_counted = True
            new.append(program)
        return program

    parts = split_sir_parts(sir, compile_part)
    if parts is None:
        return compile_sir(sir)
    if new:
        new[0].counted_in = count_compiled_graph()
    return parts


def compiled_programs(program: Any) -> list[CompiledProgram]:
    """The compiled programs behind what `compile_graph` returned (none for anything else)."""
    if isinstance(program, ProgramParts):
        return program.programs
    return [program] if isinstance(program, CompiledProgram) else []


def compile_sir(sir: StatementIR, counted: bool = True) -> CompiledProgram:
    """The compiled program for ``sir``, reused when an equal SIR was compiled before; ``counted``: a new one
    is a compiled graph in `sot.stats()` (not a part of one, `compile_graph`)."""
    key = sir.structural_key()
    program = _compiled.get(key)
    if program is None:
        program = CompiledProgram(sir, key)
        _compiled[key] = program
        if counted:
            program.counted_in = count_compiled_graph()
    return program


def _release(program_ref: "weakref.ref[CompiledProgram]", is_finalizing: Callable[[], bool] = sys.is_finalizing
             ) -> None:
    """Release the program when a layer it calls is freed; not at interpreter exit, where the modules it would
    use may already be torn down (and the process frees everything anyway)."""
    if is_finalizing():
        return
    program = program_ref()
    if program is not None:
        BUILD_LOCK.run_outside_builds(program.release)


def clear_compiled() -> None:
    """Forget every compiled program (``sot.reset()``)."""
    _compiled.clear()


# The compiled programs that can still run (alive and not released), and whether a reset asked for the
# interpreters of the others to be dropped: see `drop_unused_interpreters`.
_RUNNABLE: "weakref.WeakSet[CompiledProgram]" = weakref.WeakSet()
_DROP_REQUESTED = [False]


def drop_unused_interpreters() -> bool:
    """Empty Paddle's global interpreter cache if no program of sot can run again, and say whether it did;
    else the last program to go does it (``sot.reset()``: the programs it lets go often die later, in a
    garbage collection, or once outputs holding their backward are gone).

    Paddle keeps every interpreter it built, with its threads (one per forward interpreter, two more per
    trained program) and its lowered copy of the program, until ``core.clear_executor_cache()``, which drops
    them all (there is no per-program eviction): without it, the programs a reset let go stayed in memory (2
    threads and ~0.5 MB each). Only when nothing can be running one: no program of sot alive (a live one would
    rebuild its interpreters without the build flags), no build in progress, no other Python thread (one could
    be inside a Paddle program, the user's own ``to_static`` ones included, whose interpreter would be freed
    under it). The backward of an output of a dropped program that is still to run rebuilds its interpreter
    with Paddle's defaults, as Paddle's own ``to_static`` backward is built."""
    _DROP_REQUESTED[0] = True
    if threading.active_count() != 1 or any(True for _ in _RUNNABLE):
        return False
    if not BUILD_LOCK._lock.acquire(blocking=False):
        return False
    try:
        if BUILD_LOCK._depth:  # (this thread is inside a build)
            return False
        core.clear_executor_cache()
        _DROP_REQUESTED[0] = False
        return True
    finally:
        BUILD_LOCK._lock.release()


def _program_gone() -> None:
    """A program died or was released: the drop a reset asked for may be possible now."""
    if _DROP_REQUESTED[0] and not sys.is_finalizing():
        drop_unused_interpreters()

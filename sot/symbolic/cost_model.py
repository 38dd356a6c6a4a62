"""Which way to run one compiled graph, measured: the static program or the eager replay of its statements.

On CPU a static program pays a fixed cost per run (Paddle's interpreter; its dead tensors go to a collector
thread, in batches: `compile.build_flags`), so a small graph can be slower compiled than its ops run eagerly;
its backward (Paddle's ``run_program`` grad op, a second static program) can lose even when its forward wins
(transformer, GRU: forward 0.6-1.0x eager, backward up to 2x). So both ways are timed on the user's own calls,
forward and backward:

* **Forward:** the call itself, compiled and eager replay alternating in blocks of `BLOCK` calls after a
  warm-up (alternating single calls would hide the compiled program's thread hand-off; one block of each
  would let a burst of load on the machine decide). The first call of a block pays for the switch: the
  program runner's threads are woken up again (measured 10-30 ms under load, against ~0.1-0.2 ms for the
  next compiled call), and the previous way's leftover work (the compiled run's collector thread) slows
  the first eager replay. Neither way pays that once chosen (it runs back to back), so each way is costed
  on its *steady* calls, those that followed a call run the same way (`Sample.after_switch`). (Over all the
  calls of a way, with blocks of 2, half were after a switch: the median fell between the two populations.)
* **Backward:** when a timed call's outputs require grad, hooks on those outputs and on the inputs and
  parameters that require grad time its backward: from the first output gradient (the graph's backward
  starts: the compiled program's grad op, or the first eager grad node of its statements) to the last input
  or parameter gradient of that backward pass (the graph's backward is done). With several calls of the
  graph in one backward pass, each call's span ends where the next one's starts (`CostModel.settle`).
  Output hooks live on the call's own grad nodes and go with them; hooks on leaves (parameters, user
  inputs) would outlive the call, so they are removed once the call's backward was seen, at the latest when
  the choice is made. A hook returns None: gradients are untouched (and both ways compute the same
  gradients anyway, so switching never changes a result).

A timed call's backward has happened by the program's next call when there is one per training step; with
several calls per step or with forward-only calls (evaluation with gradients recorded) some never see one.
The choice is made once each way has `SAMPLES` forward times and either each way also has
`MIN_BACKWARD_SAMPLES` backward times, or backward is rare (under `COMMON_BACKWARD` of the calls), or
`MAX_SAMPLES` calls were timed. A way's cost per call is its median forward time plus its median backward
time weighted by the share of timed calls that had a backward; in a training loop (a backward after (nearly)
every call, one call per backward pass) it is the median time from its calls to the program's next call,
the whole training step run that way (`CostModel._step_times`). When the choice was made on forward times
alone (a few forward calls before the training loop), every `PROBE_EVERY`-th later call puts one hook on an
output: if backward passes do come (`PROBE_HITS` of them), both ways are timed again, with backward, once.
(Calls under ``no_grad`` never reach this program: the grad mode is guarded, so they have their own.)

**The programs of one frame are chosen together** (`CostGroup`; the opcode translator's `frame_groups.py`
puts in one group the programs of a function's entries and of its resume functions and loop bodies). A
graph break splits a frame into pieces, each with its own program. Chosen one by one, pieces that are each
a near-tie came out mixed, some compiled and some eager, from one process to the next: in
data_dependent_branch (two graphs around a tensor ``if``) the mixed forward cost 1.24x eager's CPU time
(1.46x wall), all compiled or all eager about 1.0x. Mixing adds what the pieces' own times do not show: a
switch between the ways at every call (the runner's threads woken, the collector's leftover work), and a
frame whose pieces are all eager runs its original code (`native.py`), one with a compiled piece does not.
So:

* **Measured in step.** While the group measures, its members run the way the group says
  (`CostGroup.next_is_eager`), changing every `BLOCK` *rounds*; a round ends when a member is called again
  (mostly, the frame's next call). The pieces of one call of the frame run the same way, as they will once
  chosen together; a piece translated later (a branch first taken) falls into step after its warm-up.
* **Chosen together.** When a member has measured enough (as above), the group chooses for it and for every
  member measured with it (`JOINT_SAMPLES` of each way): each member's cost per call of each way, weighted
  by its timed calls (its share of the frame's calls), summed: one way for all, compiled unless eager is
  clearly faster (`MARGIN`), and a mix (each member its own faster way) only when it beats that by
  `MIXED_MARGIN`. Whole-step times (`_step_times`: each member's is the whole step) allow no mix.
* **What does not count.** A member whose cache entries are all gone (``sot.reset()``, the code died) or
  whose program was released (a layer it calls was deleted) is not weighed, nor a program that gave up
  (failed compiled: eager for good, `give_up`), which neither waits for nor holds the others. A group
  whose members' entries are all gone starts afresh.
* **Members measured later** (a branch first taken after the choice, an entry for new inputs, a member
  with too few calls at the choice) are measured alone and prefer the group's way: the other way only when
  clearly faster (`_faster`).
* **Measured again together.** When a member's probes see backward passes after a forward-only choice, the
  whole group measures again (`CostGroup.reopen`), at most `MAX_REMEASURES` times.

A program shared by equal graphs of two frames (`compile.compile_sir`) belongs to the group that took it
first, for as long as that group's entries run it. ``CostModel.chosen_how`` says how a choice was made
(benchmarks/models.py prints it).
"""
from __future__ import annotations

import contextlib
import dataclasses
import statistics
import time
import weakref
from typing import Any, Callable

import paddle

WARMUP_CALLS = 3  # the first call builds the program; the next ones settle caches
SAMPLES = 6  # timed forward runs of each kind before choosing
BLOCK = 3  # consecutive runs of one kind (the first of a block pays for the switch: `Sample.after_switch`)
MIN_BACKWARD_SAMPLES = 3  # backward times of each kind needed when backward is common
MAX_SAMPLES = 4 * SAMPLES  # timed calls after which the choice is made with what was seen
COMMON_BACKWARD = 1 / 3  # share of timed calls with a backward from which backward times are waited for
EVERY_CALL_BACKWARD = 0.9  # share from which a training loop is assumed: whole steps are compared
MARGIN = 0.95  # eager replay is chosen only when clearly faster: compiled ties (it also captures the graph)
PROBE_EVERY = 4  # after a forward-only choice: one call in this many watches for a backward
PROBE_HITS = 2  # backward passes seen by probes before the choice is measured again
MAX_REMEASURES = 1
JOINT_SAMPLES = 2  # timed calls of each way a member of a group needs to be chosen with the group
# A group mixes ways (some members compiled, some eager) only when that is this much faster in total than
# one way for all: the members' times were taken with the whole group running one way, and mixing adds what
# they do not show (each switch between the ways, the frame kept off its native code: `native.py`). Measured
# on data_dependent_branch, whose two graphs were each a near-tie: mixed 1.24x eager's CPU time (1.46x wall),
# all compiled or all eager about 1.0x.
MIXED_MARGIN = 0.75


@dataclasses.dataclass(eq=False)
class Sample:
    """One timed call: which way ran, its forward time and, once its backward ran, the backward's span."""

    eager: bool
    forward: float
    called_at: float = 0.0  # perf_counter at the call's start
    after_switch: bool = False  # the program's previous call ran the other way (see the module doc)
    backward_start: float | None = None
    backward_end: float | None = None
    closed: bool = False  # its backward pass is over: later input gradients belong to other passes
    # Hooks on leaves, removed when closed: (tensor, hook id). The tensor is held strongly (no weak reference:
    # Paddle warns that weak references to eager tensors misbehave); mostly parameters, which the program
    # holds anyway; a user's leaf input lives until the sample closes.
    hooks: list[tuple[paddle.Tensor, int]] = dataclasses.field(default_factory=list)

    @property
    def backward(self) -> float | None:
        if self.backward_start is None or self.backward_end is None:
            return None
        return max(0.0, self.backward_end - self.backward_start)

    def on_output_grad(self, grad: Any) -> None:
        if self.backward_start is None:
            self.backward_start = time.perf_counter()

    def on_input_grad(self, grad: Any) -> None:
        if self.backward_start is not None and not self.closed:
            self.backward_end = time.perf_counter()

    def remove_hooks(self) -> None:
        hooks, self.hooks = self.hooks, []
        for tensor, hook_id in hooks:
            tensor._remove_grad_hook(hook_id)


class CostModel:
    """The measurements of one `CompiledProgram`; ``choice`` is None while measuring. ``on_choice``: a weak
    reference to what tells the program a choice (or None when it is to measure again, `CostGroup.reopen`)."""

    def __init__(self, on_choice: "weakref.ref[Callable[[str | None], None]] | None" = None) -> None:
        self._on_choice = on_choice
        self.group: CostGroup | None = None  # the programs of the same frame (`CostGroup`), once it joined one
        self.calls = 0
        self.samples: list[Sample] = []
        self.choice: str | None = None
        self.with_backward = False  # the choice weighed backward times
        self.several_per_pass = False  # a backward pass ran the backward of several timed calls
        self.whole_steps = False  # the choice compared whole training steps (`_step_times`)
        self.remeasures = 0
        self.gave_up = False  # the compiled program cannot run (`give_up`): eager for good, out of its group
        self.chosen_how = ""  # once chosen: "alone", "joint", "joint, mixed" (`CostGroup.decide`) or "gave up"
        self._last_eager = False  # the way the program's latest call ran (the warm-up calls run compiled)
        self.probing = False  # a forward-only choice watches for backward passes (until measured again)
        self._probe_countdown = PROBE_EVERY
        self._probe_hits = 0

    # -- while measuring ---------------------------------------------------------------------------------
    def next_is_eager(self) -> bool:
        """The way the next timed call runs: blocks of `BLOCK`, compiled first; the group's way while its
        group measures (`CostGroup.next_is_eager`)."""
        if self.group is not None and not self.group.decided:
            return self.group.next_is_eager(self)
        return (len(self.samples) // BLOCK) % 2 == 1

    def timed(self, eager: bool, run: Callable[[list], list], inputs: list, parameters: list) -> list:
        """Run one timed call and set up the timing of its backward; ``parameters``: those the graph reads
        (they are not among its inputs)."""
        start = time.perf_counter()
        outputs = run(inputs)
        sample = Sample(eager, time.perf_counter() - start, start, after_switch=eager != self._last_eager)
        self._last_eager = eager
        self.samples.append(sample)
        if paddle.is_grad_enabled():
            _watch_backward(sample, [*inputs, *parameters], outputs)
        return outputs

    def settle(self) -> None:
        """Close the samples whose backward has started (a backward pass runs to its end before the program
        is called again in the same thread) and drop their leaf hooks.

        Several calls in one backward pass (a layer applied in a loop) all end at the same parameter
        gradients, which come once, at the end of the pass: each call's span is cut where the next call's
        backward starts (backward runs the calls last to first)."""
        started = sorted((sample for sample in self.samples if not sample.closed and sample.backward_start is not None),
                         key=lambda sample: sample.backward_start)
        if len(started) > 1:
            self.several_per_pass = True
        for sample, next_started in zip(started, [*started[1:], None]):
            if next_started is not None and sample.backward_end is not None:
                sample.backward_end = min(sample.backward_end, next_started.backward_start)
            sample.closed = True
            sample.remove_hooks()

    def decide(self) -> str | None:
        """The faster way once enough was measured (see the module doc), else None. In a `CostGroup` still
        measuring, the group chooses for every member measured with this one (`CostGroup.decide`)."""
        if not self._ready():
            return None
        if self.group is not None and not self.group.decided:
            self.group.decide(self)
        else:
            compiled_cost, eager_cost = self.costs()
            prefer = self.group.mode if self.group is not None else None
            self.finish(_faster(compiled_cost, eager_cost, prefer))
        return self.choice

    def _ready(self) -> bool:
        """Each way has `SAMPLES` forward times and, when backward is common, `MIN_BACKWARD_SAMPLES`
        backward times (or `MAX_SAMPLES` calls were timed)."""
        if not self.has_samples(SAMPLES):
            return False
        compiled, eager = self._backward_counts()
        share = (compiled + eager) / len(self.samples)
        enough_backward = min(compiled, eager) >= MIN_BACKWARD_SAMPLES
        return share < COMMON_BACKWARD or enough_backward or len(self.samples) >= MAX_SAMPLES

    def has_samples(self, count: int) -> bool:
        """Each way has at least ``count`` timed calls."""
        eager = sum(sample.eager for sample in self.samples)
        return min(eager, len(self.samples) - eager) >= count

    def _backward_counts(self) -> tuple[int, int]:
        compiled = sum(1 for s in self.samples if not s.eager and s.backward is not None)
        eager = sum(1 for s in self.samples if s.eager and s.backward is not None)
        return compiled, eager

    def costs(self) -> tuple[float, float]:
        """The cost per call of each way, compiled and eager, from the samples (see the module doc); sets
        `with_backward` and `whole_steps`."""
        compiled = [s for s in self.samples if not s.eager]
        eager = [s for s in self.samples if s.eager]
        compiled_backward, eager_backward = self._backward_counts()
        share = (compiled_backward + eager_backward) / len(self.samples)
        self.with_backward = bool(compiled_backward and eager_backward)
        self.whole_steps = self.with_backward and share >= EVERY_CALL_BACKWARD and not self.several_per_pass
        if self.whole_steps:
            return self._step_times()
        compiled_cost = _steady_median([(s.after_switch, s.forward) for s in compiled])
        eager_cost = _steady_median([(s.after_switch, s.forward) for s in eager])
        if self.with_backward:
            compiled_cost += share * _steady_median([(s.after_switch, s.backward) for s in compiled])
            eager_cost += share * _steady_median([(s.after_switch, s.backward) for s in eager])
        return compiled_cost, eager_cost

    def finish(self, choice: str, how: str = "alone") -> None:
        """Make the choice (``how``: "alone", or "joint"/"joint, mixed" when its group chose) and tell the
        program."""
        self.choice = choice
        self.chosen_how = how
        remeasures = self.group.remeasures if self.group is not None else self.remeasures
        self.probing = not self.with_backward and remeasures < MAX_REMEASURES
        self.forget_samples()
        self._probe_countdown, self._probe_hits = PROBE_EVERY, 0
        self._tell(choice)

    def _tell(self, choice: str | None) -> None:
        on_choice = self._on_choice() if self._on_choice is not None else None
        if on_choice is not None:
            on_choice(choice)

    def _step_times(self) -> tuple[float, float]:
        """Median time from a call to the program's next call, compiled and eager: with one call and one
        backward pass per training step that is the whole step run that way. It sees what the spans do not:
        a compiled program's helper threads (its garbage collector's) keep working after a run and slow down
        the ops that follow (loss, optimizer) on a machine with few cores."""
        steps: dict[bool, list[tuple[bool, float | None]]] = {False: [], True: []}
        for sample, following in zip(self.samples, self.samples[1:]):
            steps[sample.eager].append((sample.after_switch, following.called_at - sample.called_at))
        return _steady_median(steps[False]), _steady_median(steps[True])

    def forget_samples(self) -> None:
        """Drop the samples and their hooks on leaves (on the choice, or when the program goes away in the
        middle of measuring: a parameter would otherwise run them in every later backward)."""
        samples, self.samples = self.samples, []
        for sample in samples:
            sample.remove_hooks()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # (at interpreter exit Paddle may be gone first)
            self.forget_samples()

    def give_up(self) -> None:
        """The compiled program cannot run: eager from now on, never measured again (nor weighed in its
        group's choice)."""
        self.gave_up = True
        self.choice = "eager"
        self.chosen_how = "gave up"
        self.probing = False
        self.forget_samples()

    # -- after the choice ---------------------------------------------------------------------------------
    def probe(self, outputs: list) -> bool:
        """Called after each run once chosen (when `probing`); True when the choice should be measured again."""
        if self._probe_hits >= PROBE_HITS:
            if self.group is not None:
                self.group.reopen()  # the whole group measures again, together
            if self.choice is not None:
                self.reopen()
            return True
        self._probe_countdown -= 1
        if self._probe_countdown > 0:
            return False
        self._probe_countdown = PROBE_EVERY
        if paddle.is_grad_enabled():
            for out in _made_outputs(outputs)[:1]:
                out._register_grad_hook(self._on_probe_grad)  # (no wrapper: a compiled call's bookkeeping)
        return False

    def _on_probe_grad(self, grad: Any) -> None:
        self._probe_hits += 1

    def reopen(self) -> None:
        """Measure again (both ways are warm: no warm-up), and tell the program it has no choice now."""
        self.remeasures += 1
        self._last_eager = self.choice == "eager"
        self.probing = False
        self.choice = None
        self.chosen_how = ""
        self.calls = WARMUP_CALLS
        self._tell(None)


def _faster(compiled: float, eager: float, prefer: str | None = None) -> str:
    """The way to keep: the other way only when clearly faster (`MARGIN`); compiled on a near-tie unless
    ``prefer`` says eager (its group runs eagerly: a member would otherwise mix the frame's ways)."""
    if prefer == "eager":
        return "compiled" if compiled < MARGIN * eager else "eager"
    return "eager" if eager < MARGIN * compiled else "compiled"


class CostGroup:
    """The cost models of the programs of one frame: its entries' and its resume functions' (the opcode
    translator makes one per frame, `frame_groups.py`). While the group measures, its members run the same
    way at the same time and the group chooses for all of them (see the module doc)."""

    def __init__(self, name: str = "") -> None:
        self.name = name
        # member -> what says whether it is still used: one callable per cache entry running it (an entry
        # gone from the cache, e.g. after ``sot.reset()``, no longer counts)
        self.members: "weakref.WeakKeyDictionary[CostModel, list[Callable[[], bool]]]" = \
            weakref.WeakKeyDictionary()
        self.remeasures = 0
        self._measure()

    def _measure(self) -> None:
        """(Back to) measuring in step, compiled first."""
        self.decided = False
        self.mode: str | None = None  # the way every member chosen with the group runs; None: mixed, undecided
        self._eager_now = False  # the way the members run now while the group measures
        self._rounds = 0
        self._round: set[int] = set()  # the members (ids) called in the current round

    def add(self, model: CostModel, alive: Callable[[], bool]) -> bool:
        """Let ``model`` join (``alive``: whether the entry that runs it is still in the cache); False when it
        belongs to another group whose entries still run it (a program shared by equal graphs of two frames
        is chosen by the first)."""
        if model.group is not None and model.group is not self:
            if model.group.is_used(model):
                return False
            model.group.members.pop(model, None)
        if not self.live_members():  # the members' entries are all gone: a fresh start
            self.remeasures = 0
            self._measure()
        model.group = self
        self.members.setdefault(model, []).append(alive)
        return True

    def is_used(self, model: CostModel) -> bool:
        """A cache entry still runs ``model``'s program (the program was not released or given up)."""
        return not model.gave_up and any(alive() for alive in self.members.get(model, ()))

    def live_members(self) -> list[CostModel]:
        return [model for model in list(self.members.keys()) if self.is_used(model)]

    def next_is_eager(self, model: CostModel) -> bool:
        """The way ``model`` runs its next timed call while the group measures. A *round* ends when a member
        is called again (the frame's next call, mostly); the way changes every `BLOCK` rounds. So the members
        called in one call of the frame run the same way, as they will once chosen together."""
        if id(model) in self._round:
            self._round.clear()
            self._rounds += 1
            if self._rounds % BLOCK == 0:
                self._eager_now = not self._eager_now
        self._round.add(id(model))
        return self._eager_now

    def decide(self, trigger: CostModel) -> None:
        """Choose for ``trigger`` (measured enough) and every live member measured with it (`JOINT_SAMPLES`
        of each way): the way that makes the group's total smaller, members weighted by their timed calls
        (their share of the frame's calls). One way for all unless a mix is faster by `MIXED_MARGIN`;
        whole-step times (`CostModel._step_times`, each of them the whole step) allow no mix. The members not
        measured enough yet go on measuring alone, and then prefer the group's way (`_faster`)."""
        members = [m for m in self.live_members() if m is not trigger and m.choice is None
                   and m.has_samples(JOINT_SAMPLES)]
        members.insert(0, trigger)
        costs = {m: m.costs() for m in members}
        weights = {m: len(m.samples) for m in members}
        compiled_total = sum(weights[m] * costs[m][0] for m in members)
        eager_total = sum(weights[m] * costs[m][1] for m in members)
        uniform = _faster(compiled_total, eager_total)
        uniform_total = eager_total if uniform == "eager" else compiled_total
        own = {m: _faster(*costs[m]) for m in members}
        mixed_total = sum(weights[m] * costs[m][own[m] == "eager"] for m in members)
        mixed = len(set(own.values())) > 1 and not any(m.whole_steps for m in members) \
            and mixed_total < MIXED_MARGIN * uniform_total
        self.decided = True
        self.mode = None if mixed else uniform
        how = "joint, mixed" if mixed else "joint" if len(members) > 1 else "alone"
        for member in members:
            member.finish(own[member] if mixed else uniform, how)

    def reopen(self) -> None:
        """Backward passes came after a forward-only choice (`CostModel.probe`): every live member chosen
        with the group measures again, in step (at most `MAX_REMEASURES` times)."""
        if not self.decided or self.remeasures >= MAX_REMEASURES:
            return
        self.remeasures += 1
        self._measure()
        for member in self.live_members():
            if member.choice is not None:
                member.reopen()


def _steady_median(times: list[tuple[bool, float | None]]) -> float:
    """The median of one way's times (``(after_switch, time)`` per sample, None where a sample lacks the
    time) over the samples that did not follow a switch, or over all when none of those has one: the cost of
    the way run back to back, as it runs once chosen."""
    steady = [time for after_switch, time in times if not after_switch and time is not None]
    return statistics.median(steady or [time for _, time in times if time is not None])


def _watch_backward(sample: Sample, sources: list, outputs: list) -> None:
    """Hooks that time the backward of one call (see the module doc): on its differentiable outputs and on the
    differentiable tensors it reads (``sources``: inputs and parameters); none when nothing is differentiable.
    The hooks hold the sample only, never a tensor (a tensor's hooks live in C++, out of the collector's
    sight, so a cycle through them would never be freed)."""
    differentiable_outputs = _made_outputs(outputs)
    if not differentiable_outputs:
        return
    differentiable_inputs = [x for x in sources if isinstance(x, paddle.Tensor) and not x.stop_gradient]
    if not differentiable_inputs:
        return
    for out in differentiable_outputs:
        out.register_hook(sample.on_output_grad)
    for x in differentiable_inputs:
        hook_id = x._register_grad_hook(sample.on_input_grad)
        if x.is_leaf:
            sample.hooks.append((x, hook_id))


def _made_outputs(outputs: list) -> list:
    """The differentiable outputs the call made (a leaf returned as is, e.g. a parameter, would keep a hook
    for its whole life, and its gradient does not mark the start of the graph's backward)."""
    return [out for out in outputs if isinstance(out, paddle.Tensor) and not out.stop_gradient and not out.is_leaf]

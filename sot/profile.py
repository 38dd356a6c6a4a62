"""`sot.profile()`: how much of a model really ran compiled, counted in kernels.

Built on ``paddle.profiler`` (CPU target, host events). Paddle marks every kernel it launches with one of two
event types, whatever issued it:

* ``DygraphKernelLaunch``: a kernel of an eager (dygraph) op, including the autograd engine's backward
  kernels, the statements of a graph sot kept eager (smaller than ``min_graph_size``) and the views sot
  feeds a compiled program's inputs requiring grad through (``reshape`` to their own shape, no data moved);
* ``StaticKernelLaunch``: a kernel run by the static executor (the PIR interpreter core), i.e. inside a
  compiled program: the ``run_program`` of a graph sot compiled, forward or backward, or any other static
  program (``paddle.jit.to_static``, ``paddle.static.Executor``).

A kernel-launch event covers the kernel's execution on the CPU, so its duration is the kernel time. Steps
are Paddle's own ``ProfileStep#N`` ranges: ``prof.step()`` starts the next one, and without any call the
whole block is one step. Nothing is installed while no ``sot.profile()`` block is active.
"""
from __future__ import annotations

import bisect
import collections
import dataclasses
import threading
from typing import Any, Iterator

_EAGER_EVENT = "DygraphKernelLaunch"
_COMPILED_EVENT = "StaticKernelLaunch"
_KERNEL_SUFFIX = " kernel launch"

_active = threading.local()


@dataclasses.dataclass
class StepStats:
    """Kernel counts and total kernel time (nanoseconds) of one step, eager versus compiled."""

    step: int | None  # None for the totals
    eager_kernels: int = 0
    eager_time_ns: int = 0
    compiled_kernels: int = 0
    compiled_time_ns: int = 0
    # kernel name -> [count, time_ns]
    eager_by_name: dict[str, list[int]] = dataclasses.field(default_factory=dict, repr=False)
    compiled_by_name: dict[str, list[int]] = dataclasses.field(default_factory=dict, repr=False)

    @property
    def kernels(self) -> int:
        return self.eager_kernels + self.compiled_kernels

    @property
    def time_ns(self) -> int:
        return self.eager_time_ns + self.compiled_time_ns

    @property
    def compiled_fraction(self) -> float:
        """Share of the kernel time spent inside compiled programs (0.0 when no kernel ran)."""
        return self.compiled_time_ns / self.time_ns if self.time_ns else 0.0

    @property
    def compiled_kernel_fraction(self) -> float:
        """Share of the kernels launched inside compiled programs (0.0 when no kernel ran)."""
        return self.compiled_kernels / self.kernels if self.kernels else 0.0

    def add(self, compiled: bool, name: str, duration_ns: int) -> None:
        by_name = self.compiled_by_name if compiled else self.eager_by_name
        entry = by_name.setdefault(name, [0, 0])
        entry[0] += 1
        entry[1] += duration_ns
        if compiled:
            self.compiled_kernels += 1
            self.compiled_time_ns += duration_ns
        else:
            self.eager_kernels += 1
            self.eager_time_ns += duration_ns

    def merge(self, other: StepStats) -> None:
        for compiled, by_name in ((False, other.eager_by_name), (True, other.compiled_by_name)):
            mine = self.compiled_by_name if compiled else self.eager_by_name
            for name, (count, time_ns) in by_name.items():
                entry = mine.setdefault(name, [0, 0])
                entry[0] += count
                entry[1] += time_ns
        self.eager_kernels += other.eager_kernels
        self.eager_time_ns += other.eager_time_ns
        self.compiled_kernels += other.compiled_kernels
        self.compiled_time_ns += other.compiled_time_ns


def _ms(ns: int) -> str:
    return f"{ns / 1e6:.3f}"


def _percent(fraction: float, any_kernel: bool) -> str:
    return f"{100 * fraction:.1f}%" if any_kernel else "-"


class KernelProfile:
    """Returned by ``sot.profile()``; use it as a context manager, call ``step()`` between iterations.

    After the block: ``steps`` (one `StepStats` per step), ``total``, and ``str()`` as a table."""

    def __init__(self) -> None:
        self.steps: list[StepStats] = []
        self._profiler: Any = None
        self._steps_called = 0
        self._done = False

    # -- recording --------------------------------------------------------------------------------------
    def __enter__(self) -> KernelProfile:
        if getattr(_active, "profile", None) is not None:
            raise RuntimeError("sot.profile() blocks cannot be nested")
        if self._profiler is not None or self._done:
            raise RuntimeError("this sot.profile() object was already used; create a new one")
        import paddle.profiler as profiler  # imported here: no cost at all unless profiling

        self._profiler = profiler.Profiler(targets=[profiler.ProfilerTarget.CPU],
                                           on_trace_ready=_ignore_trace)  # no trace file written
        if self._profiler.profiler is None:  # Paddle allows one live profiler per process
            self._profiler = None
            raise RuntimeError("sot.profile(): another paddle.profiler.Profiler is alive; stop it (and drop "
                               "every reference to it) first")
        _active.profile = self
        try:
            self._profiler.start()
        except BaseException:
            _active.profile = None
            raise
        return self

    def step(self) -> None:
        """End the current step and start the next one (like ``paddle.profiler.Profiler.step``)."""
        if self._profiler is None or getattr(_active, "profile", None) is not self:
            raise RuntimeError("prof.step() must be called inside its `with sot.profile() as prof:` block")
        self._steps_called += 1
        self._profiler.step()

    def __exit__(self, *exc: Any) -> None:
        _active.profile = None
        profiler = self._profiler
        try:
            profiler.stop()
            result = profiler.profiler_result
            self.steps = _collect(result.get_data() if result is not None else {})
        finally:
            # Paddle's native profiler is a singleton alive as long as its Python owner: release it now so
            # the next sot.profile() (or paddle.profiler.Profiler) can start.
            result = profiler.profiler_result = profiler.profiler = None
            self._profiler = None
            self._done = True
        # ``prof.step()`` at the end of each iteration leaves an empty last step: not a step of the model.
        if self._steps_called and len(self.steps) > 1 and self.steps[-1].kernels == 0:
            self.steps.pop()

    # -- results ----------------------------------------------------------------------------------------
    @property
    def total(self) -> StepStats:
        total = StepStats(None)
        for step in self.steps:
            total.merge(step)
        return total

    @property
    def compiled_fraction(self) -> float:
        return self.total.compiled_fraction

    def top_eager_kernels(self, n: int = 5) -> list[tuple[str, int, int]]:
        """The eager kernels that took the most time: ``(name, count, time_ns)``."""
        by_name = self.total.eager_by_name
        ranked = sorted(by_name.items(), key=lambda item: (-item[1][1], item[0]))[:n]
        return [(name, count, time_ns) for name, (count, time_ns) in ranked]

    def __str__(self) -> str:
        header = ("step", "eager kernels", "eager ms", "compiled kernels", "compiled ms", "compiled % (time)",
                  "compiled % (kernels)")
        rows = []
        for stats in self.steps + ([self.total] if len(self.steps) != 1 else []):
            rows.append((
                "total" if stats.step is None else str(stats.step),
                str(stats.eager_kernels), _ms(stats.eager_time_ns),
                str(stats.compiled_kernels), _ms(stats.compiled_time_ns),
                _percent(stats.compiled_fraction, stats.kernels > 0),
                _percent(stats.compiled_kernel_fraction, stats.kernels > 0),
            ))
        if len(self.steps) == 1:  # one step: it is the total
            rows[0] = ("total (1 step)",) + rows[0][1:]
        widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]

        def line(cells: tuple[str, ...]) -> str:
            first = cells[0].ljust(widths[0])
            return "| " + " | ".join([first] + [c.rjust(w) for c, w in zip(cells[1:], widths[1:])]) + " |"

        rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
        lines = ["sot.profile: kernels run eagerly vs inside compiled programs (CPU time of the kernels)",
                 line(header), rule]
        lines.extend(line(row) for row in rows)
        if not rows:
            lines.append("(no kernel ran)")
        top = self.top_eager_kernels()
        if top:
            lines.append("most expensive eager kernels: " + ", ".join(
                f"{name} x{count} ({_ms(time_ns)} ms)" for name, count, time_ns in top))
        return "\n".join(lines)

    def __repr__(self) -> str:
        total = self.total
        return (f"<sot.profile: {len(self.steps)} step(s), {total.eager_kernels} eager / "
                f"{total.compiled_kernels} compiled kernels, {100 * total.compiled_fraction:.1f}% compiled time>")


def _ignore_trace(prof: Any) -> None:
    pass


def profile() -> KernelProfile:
    """``with sot.profile() as prof: ...``; then ``print(prof)``. ``prof.step()`` separates steps."""
    return KernelProfile()


# -- reading paddle.profiler's event trees ----------------------------------------------------------------
def _walk(node: Any) -> Iterator[Any]:
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(current.children_node)


def _type_name(node: Any) -> str:
    kind = node.type
    return getattr(kind, "name", None) or str(kind).rsplit(".", 1)[-1]


def _collect(data: dict[Any, Any]) -> list[StepStats]:
    """Per-step statistics from ``ProfilerResult.get_data()`` (thread id -> root HostPythonNode)."""
    steps: list[tuple[int, int, int]] = []  # (start_ns, end_ns, number)
    kernels: list[tuple[int, int, bool, str]] = []  # (start_ns, duration_ns, compiled, name)
    for root in data.values():
        for node in _walk(root):
            kind = _type_name(node)
            if kind == "ProfileStep":
                number = node.name.rsplit("#", 1)[-1]
                steps.append((node.start_ns, node.end_ns, int(number) if number.isdigit() else len(steps)))
            elif kind in (_EAGER_EVENT, _COMPILED_EVENT):
                name = node.name[:-len(_KERNEL_SUFFIX)] if node.name.endswith(_KERNEL_SUFFIX) else node.name
                kernels.append((node.start_ns, max(node.end_ns - node.start_ns, 0), kind == _COMPILED_EVENT,
                                name))
    steps.sort()
    if not steps:  # should not happen (the profiler always opens step 0); keep every kernel anyway
        steps = [(0, 0, 0)]
    stats = collections.OrderedDict((number, StepStats(number)) for _, _, number in steps)
    starts = [start for start, _, _ in steps]
    for start, duration, compiled, name in kernels:
        index = max(bisect.bisect_right(starts, start) - 1, 0)  # the step that started last before it
        stats[steps[index][2]].add(compiled, name, duration)
    return list(stats.values())

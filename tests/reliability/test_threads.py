"""Threads: concurrent calls of translated functions give eager results; translation is safe under concurrency;
a thread that never called a translated function is never hooked; a thread that starts while sot builds a
static program in another thread starts in dygraph mode (issue 9).

The concurrent scenarios run in a subprocess each (all started at once by a module fixture), so that a crash
of the interpreter (a segmentation fault under concurrency) fails one test instead of killing the session.
"""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from typing import Any, Callable, Iterator

import numpy as np
import paddle
import pytest

import sot
from sot import psdb

N_THREADS = 4


def scale_shift(x, n):
    y = x * n + 1
    if n > 2:
        y = paddle.tanh(y)
    return y.sum()


def append_and_subtract(x, lst):
    lst.append(len(lst))
    return x - sum(lst)


def with_break(x, n):
    y = x * 2
    psdb.breakgraph()
    return y + n


class Acc:
    def __init__(self) -> None:
        self.total = 0


def attribute_update(x, acc, n):
    acc.total += n
    return x * acc.total


def _run_threads(worker: Callable[[int], None], n_threads: int = N_THREADS) -> None:
    errors: list[BaseException] = []
    barrier = threading.Barrier(n_threads)

    def body(i: int) -> None:
        try:
            barrier.wait()
            worker(i)
        except BaseException as exc:  # noqa: BLE001 - reported in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    if errors:
        raise errors[0]


def _inputs() -> list[paddle.Tensor]:
    return [paddle.to_tensor(np.arange(4, dtype="float32") + i) for i in range(N_THREADS)]


def _check_same_function(min_graph_size: int, warm: bool, iterations: int = 60) -> None:
    xs = _inputs()
    expected = {(i, n): scale_shift(xs[i], n).numpy() for i in range(N_THREADS) for n in range(5)}
    with sot.config.patch(min_graph_size=min_graph_size):
        translated = sot.symbolic_translate(scale_shift)
        if warm:
            for n in range(5):
                translated(xs[0], n)
        wrong: list[Any] = []

        def worker(i: int) -> None:
            for k in range(iterations):
                n = (i + k) % 5
                got = translated(xs[i], n).numpy()
                if not np.allclose(got, expected[(i, n)]):
                    wrong.append((i, k, n, got, expected[(i, n)]))

        _run_threads(worker)
    assert not wrong, f"{len(wrong)} wrong results, e.g. {wrong[:3]}"


def scenario_same_function_warm(min_graph_size: int) -> None:
    _check_same_function(min_graph_size, warm=True)


def scenario_same_function_cold(min_graph_size: int) -> None:
    _check_same_function(min_graph_size, warm=False)


def scenario_different_functions(min_graph_size: int) -> None:
    xs = _inputs()
    with sot.config.patch(min_graph_size=min_graph_size):
        fns = [sot.symbolic_translate(f) for f in (scale_shift, append_and_subtract, with_break, attribute_update)]
        wrong: list[Any] = []

        def worker(i: int) -> None:
            for k in range(40):
                x = xs[i]
                if i == 0:
                    got, want = fns[0](x, k % 5), scale_shift(x, k % 5)
                elif i == 1:
                    l1, l2 = [k], [k]
                    got, want = fns[1](x, l1), append_and_subtract(x, l2)
                    if l1 != l2:
                        wrong.append(("list", l1, l2))
                elif i == 2:
                    got, want = fns[2](x, k % 3), with_break(x, k % 3)
                else:
                    a1, a2 = Acc(), Acc()
                    got, want = fns[3](x, a1, k % 4), attribute_update(x, a2, k % 4)
                    if a1.total != a2.total:
                        wrong.append(("attr", a1.total, a2.total))
                if not np.allclose(got.numpy(), want.numpy()):
                    wrong.append((i, k, got.numpy(), want.numpy()))

        _run_threads(worker)
    assert not wrong, f"{len(wrong)} wrong results, e.g. {wrong[:3]}"


def scenario_same_function_cold_repeated(min_graph_size: int, rounds: int = 150) -> None:
    """same_function_cold again and again, each round with new threads translating the function from scratch:
    a thread whose first Paddle call came while another one was building in static mode used to start in
    static mode itself, and crash in its first eager op (issue 9: within about 100-300 rounds)."""
    for _ in range(rounds):
        sot.reset()
        _check_same_function(min_graph_size, warm=False, iterations=5)


def scenario_reset_while_calling(min_graph_size: int, iterations: int = 80) -> None:
    """3 threads call translated functions (one graph, one graph break) while the main thread keeps calling
    ``sot.reset()``: entries, programs and resume functions vanish under running calls, which must neither
    crash nor give a wrong result."""
    import time

    xs = _inputs()
    fns = [scale_shift, with_break, scale_shift]
    wrong: list[Any] = []
    done = threading.Event()
    with sot.config.patch(min_graph_size=min_graph_size):
        translated = [sot.symbolic_translate(f) for f in fns]

        def worker(i: int) -> None:
            for k in range(iterations):
                n = (i + k) % 5
                got, want = translated[i](xs[i], n).numpy(), fns[i](xs[i], n).numpy()
                if not np.allclose(got, want):
                    wrong.append((i, k, n, got, want))

        callers = threading.Thread(target=lambda: (_run_threads(worker, len(fns)), done.set()))
        callers.start()
        resets = 0
        while not done.is_set() and callers.is_alive():
            sot.reset()
            resets += 1
            time.sleep(0.005)
        callers.join()
    assert done.is_set(), "a calling thread failed"
    assert resets > 10, f"only {resets} resets happened while the threads called (the scenario is vacuous)"
    assert not wrong, f"{len(wrong)} wrong results, e.g. {wrong[:3]}"


def scenario_training_one_layer(min_graph_size: int, iterations: int = 150, rounds: int = 3) -> None:
    """Four threads train one translated layer at once, each on its own input, keeping outputs over three calls
    (their scopes stay busy: runs make new scopes, and backward passes overlap); each pass's gradient of the
    first weight (seen by a hook, before it is accumulated) must be eager's. Bugs found with it (issue 9):
    Paddle's process-wide final backward hooks, which sot used, were run and cleared by other threads' passes
    (a segfault in RunBackward, or a hook called on a freed object); and a backward of the program marks its
    scope reusable before it frees the scope's values, so a run of another thread taking the scope in between
    lost its values ("Tensor holds no memory" in its backward: in about one process of three running this,
    before `kept_scope` kept such a scope out of the runner's cache until the pass ended). Deep and narrow:
    many values to free, short runs. (The accumulated ``.grad`` is not checked: concurrent passes accumulating
    into one parameter lose updates in eager Paddle too.)"""
    paddle.seed(0)
    blocks: list[paddle.nn.Layer] = []
    for _ in range(8):
        blocks += [paddle.nn.Linear(8, 8), paddle.nn.Tanh()]
    layer = paddle.nn.Sequential(*blocks)
    weight = blocks[0].weight
    inputs = [paddle.randn([4, 8]) for _ in range(N_THREADS)]
    expected = []
    for x in inputs:  # (eager: the gradient of one pass through three calls on each thread's input)
        weight.clear_gradient()
        sum(layer(x).sum() for _ in range(3)).backward()
        expected.append(weight.grad.numpy())
    thread_input = threading.local()
    seen: list[tuple[int, np.ndarray]] = []
    weight.register_hook(lambda grad: seen.append((thread_input.index, grad.numpy())))
    with sot.config.patch(min_graph_size=min_graph_size):
        translated = sot.symbolic_translate(layer)
        thread_input.index = 0
        translated(inputs[0]).sum().backward()

        def worker(i: int) -> None:
            thread_input.index = i
            held = []
            for k in range(iterations):
                held.append(translated(inputs[i]))
                if k % 3 == 2:
                    sum(out.sum() for out in held).backward()
                    held.clear()

        for _ in range(rounds):
            seen.clear()
            _run_threads(worker)
            assert len(seen) == N_THREADS * (iterations // 3)
            for index, grad in seen:
                np.testing.assert_allclose(grad, expected[index], rtol=1e-5, atol=1e-6)


SCENARIOS = [(name, mgs) for name in ("same_function_warm", "same_function_cold", "different_functions",
                                      "reset_while_calling")
             for mgs in (0, 10)] + [("same_function_cold_repeated", 10), ("training_one_layer", 0)]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def scenario_processes() -> Any:
    """Start every concurrent scenario at once, each in its own interpreter."""
    env = dict(os.environ, GLOG_minloglevel="2", PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    procs = {}
    for name, mgs in SCENARIOS:
        code = (f"import sot; sot.reset(); import tests.reliability.test_threads as t; "
                f"t.scenario_{name}({mgs}); print('SCENARIO OK')")
        procs[(name, mgs)] = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env,
                                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    yield procs
    for proc in procs.values():
        if proc.poll() is None:
            proc.kill()


@pytest.mark.parametrize("name,min_graph_size", SCENARIOS, ids=[f"{n}-min_graph_size={m}" for n, m in SCENARIOS])
def test_concurrent_calls_from_four_threads(scenario_processes: Any, name: str, min_graph_size: int) -> None:
    """same_function_warm: one function translated first, then called from 4 threads; same_function_cold: the
    4 threads translate it concurrently; different_functions: 4 functions (graph, list mutation, graph break,
    attribute update), one per thread; reset_while_calling: 3 threads call while the main one resets the caches;
    same_function_cold_repeated: same_function_cold 150 times, with new threads
    each time (issue 9: threads starting during another one's build); training_one_layer: 4 threads train one
    layer with overlapping backward passes (issue 9: a scope handed out while a backward freed it)."""
    proc = scenario_processes[(name, min_graph_size)]
    try:
        out, err = proc.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("the scenario hung")
    err_tail = "\n".join(line for line in err.splitlines() if "ccache" not in line and "warn" not in line)[-3000:]
    assert proc.returncode == 0 and "SCENARIO OK" in out, \
        f"exit code {proc.returncode} ({'crashed: signal ' + str(-proc.returncode) if proc.returncode < 0 else ''})" \
        f"\n{err_tail}"


def _first_paddle_use_of_a_new_thread() -> list[Any]:
    """Start a thread whose first Paddle call is now: whether it is in dygraph mode, and its eager ``x * 2``
    (not tried outside dygraph mode: it would crash the interpreter)."""
    seen: list[Any] = []

    def body() -> None:
        seen.append(paddle.in_dynamic_mode())
        if seen[0]:
            seen.append((paddle.to_tensor([1.0, 2.0]) * 2).numpy().tolist())

    t = threading.Thread(target=body)
    t.start()
    t.join()
    return seen


def test_a_thread_started_while_sot_builds_a_program_starts_in_dygraph_mode() -> None:
    """Building a program switches the building thread to static mode (``_dygraph_guard(None)``, as Paddle's
    ``switch_to_static_graph`` does inside ``get_concrete_program``); Paddle initialises a new thread's mode
    from whatever thread switched last (issue 9)."""
    from paddle.base import framework

    from sot.symbolic.compile import BUILD_LOCK

    with BUILD_LOCK, framework._dygraph_guard(None):
        assert not paddle.in_dynamic_mode()
        seen = _first_paddle_use_of_a_new_thread()
    assert seen == [True, [2.0, 4.0]]
    assert paddle.in_dynamic_mode()
    assert _first_paddle_use_of_a_new_thread() == [True, [2.0, 4.0]]


def test_a_thread_started_while_sot_builds_gets_the_tracer_of_the_process() -> None:
    """Not a scratch tracer a build set up for itself (as Paddle's legacy partial program does)."""
    from paddle.base import framework

    from sot.symbolic.compile import BUILD_LOCK

    process_tracer = framework._dygraph_tracer()
    seen: list[Any] = []
    t = threading.Thread(target=lambda: seen.append(framework._dygraph_tracer()))
    with BUILD_LOCK, framework._dygraph_guard(paddle.base.dygraph.Tracer()):
        t.start()
        t.join()
    assert seen == [process_tracer]


def test_a_thread_started_during_a_translation_starts_in_dygraph_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    """A thread starting while another one infers metas in static mode, in a real translation."""
    from sot.symbolic import infer_meta

    original = infer_meta.static_mode
    seen: list[Any] = []

    @contextlib.contextmanager
    def static_mode_starting_a_thread() -> Iterator[None]:
        with original():
            if not seen:
                assert not paddle.in_dynamic_mode()
                seen.extend(_first_paddle_use_of_a_new_thread())
            yield

    monkeypatch.setattr(infer_meta, "static_mode", static_mode_starting_a_thread)
    sot.reset()
    x = paddle.to_tensor(np.arange(4, dtype="float32"))
    got = sot.symbolic_translate(scale_shift)(x, 1)
    assert seen == [True, [2.0, 4.0]], "no meta inference ran" if not seen else "the thread started in static mode"
    assert np.allclose(got.numpy(), scale_shift(x, 1).numpy())


def never_translated(x):
    return x * 5 - 1


def test_a_thread_that_never_translates_is_never_hooked() -> None:
    from sot.eval_frame_ext import cache_entries, is_skipped

    x = paddle.ones([4])
    translated = sot.symbolic_translate(scale_shift)
    translated(x, 1)
    before = sot.stats().translate_count
    stop = threading.Event()
    plain_calls = [0]

    def plain_thread() -> None:
        while not stop.is_set():
            never_translated(x)
            plain_calls[0] += 1

    t = threading.Thread(target=plain_thread)
    t.start()
    try:
        for _ in range(300):
            translated(x, 1)  # only cache hits in this thread
    finally:
        stop.set()
        t.join()
    assert plain_calls[0] > 0
    assert sot.stats().translate_count == before, "frames of the plain thread reached the translator"
    assert cache_entries(never_translated.__code__) == [] and not is_skipped(never_translated.__code__)


def test_a_thread_is_unhooked_after_its_translated_call_returns() -> None:
    from sot.eval_frame_ext import cache_entries, is_skipped

    x = paddle.ones([4])
    translated = sot.symbolic_translate(scale_shift)
    result: list[Any] = []

    def thread_body() -> None:
        result.append(translated(x, 1).numpy())
        result.append(never_translated(x).numpy())

    t = threading.Thread(target=thread_body)
    t.start()
    t.join()
    assert np.allclose(result[0], scale_shift(x, 1).numpy())
    assert cache_entries(never_translated.__code__) == [] and not is_skipped(never_translated.__code__)


def test_translation_in_one_thread_does_not_disturb_eager_code_in_another() -> None:
    x = paddle.to_tensor(np.arange(4, dtype="float32"))
    stop = threading.Event()
    bad: list[Any] = []

    def eager_loop() -> None:
        while not stop.is_set():
            got = (x * 2 + 1).numpy()
            if not np.allclose(got, np.arange(4) * 2 + 1):
                bad.append(got)

    t = threading.Thread(target=eager_loop)
    t.start()
    try:
        with sot.config.patch(min_graph_size=0):
            translated = sot.symbolic_translate(scale_shift)
            for n in range(8):
                sot.reset()
                translated(x, n)
    finally:
        stop.set()
        t.join()
    assert not bad

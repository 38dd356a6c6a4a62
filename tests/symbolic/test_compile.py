"""How `CompiledProgram` has Paddle build the interpreters that run its static program: under its
`build_flags` (in-place pass off, dead tensors freed in batches), with the user's own flag values untouched
outside the builds."""
from __future__ import annotations

import time

import numpy as np
import paddle
import pytest
from paddle.base import core

import sot
from sot.symbolic import compile as compile_module

# Small intermediates: each [64, 64] float32 tensor is 16 KiB, far below the collector's batch size.
ROWS = 64
STEPS = 24


def small_chain(x: paddle.Tensor) -> paddle.Tensor:
    for _ in range(STEPS):
        x = paddle.tanh(x * 1.5) + 0.25
    return x


def _host_allocated() -> int:
    return core.host_memory_stat_current_value("Allocated", 0)


def _settled_host_allocated() -> int:
    """Host memory allocated once the collector thread freed the batches handed to it (it runs concurrently,
    late on a loaded machine)."""
    last = _host_allocated()
    for _ in range(100):
        time.sleep(0.02)
        now = _host_allocated()
        if now == last:
            break
        last = now
    return last


def test_builds_leave_the_users_flags_as_they_were() -> None:
    """The build flags are set only while an interpreter is built: the first run in each mode, a run that
    makes a new scope (the first outputs are still held), backward passes, inference."""
    user_values = {"FLAGS_pir_apply_inplace_pass": True, "FLAGS_eager_delete_tensor_gb": 0.25}
    assert set(compile_module.build_flags()) == set(user_values)  # (both exist in this Paddle)
    saved = paddle.get_flags(list(user_values))
    paddle.set_flags(user_values)
    try:
        fn = sot.symbolic_translate(small_chain)
        x = paddle.randn([ROWS, ROWS])
        x.stop_gradient = False
        with sot.config.patch(min_graph_size=0):
            held = fn(x)
            again = fn(x)  # ``held`` keeps the first scope busy: a new scope, a new interpreter
            (held.sum() + again.sum()).backward()
            with paddle.no_grad():
                fn(x)
            sot.symbolic_translate(small_chain, training=False)(x)
        assert paddle.get_flags(list(user_values)) == user_values
        np.testing.assert_allclose(again.numpy(), small_chain(x).numpy(), rtol=1e-6)
    finally:
        paddle.set_flags(saved)


def test_the_backward_interpreter_is_built_under_the_build_flags() -> None:
    """The backward program's interpreter is built by the first backward pass through a scope, out of any
    call of the program: the flags are set from the program's output gradient to the end of that pass."""
    names = list(compile_module.build_flags())
    users = paddle.get_flags(names)
    fn = sot.symbolic_translate(small_chain)
    # The input: an activation from another program (of a parameter), so that the program's own backward runs
    # (an input made by eager ops from a leaf requiring grad runs with a recomputing backward instead, see
    # `sot.symbolic.higher_order`).
    leaf = paddle.create_parameter([ROWS, ROWS], "float32")
    leaf.set_value(paddle.randn([ROWS, ROWS]))
    activation = sot.symbolic_translate(_scaled)
    during_backward = []
    with sot.config.patch(min_graph_size=0):
        activation(leaf).sum().backward()  # (its own backward interpreter built now, under its own flags)
        for _ in range(3):
            x = activation(leaf)  # (a hook on the program's input runs right after the program's grad node)
            x.register_hook(lambda grad: during_backward.append(paddle.get_flags(names)))
            fn(x).sum().backward()
            assert paddle.get_flags(names) == users
    (program,) = [p for p in compile_module._compiled.values() if p.sir.name == "small_chain"]
    assert during_backward == [program._build_flags, users, users]
    assert program._build_flags["FLAGS_eager_delete_tensor_gb"] > 0
    np.testing.assert_allclose(leaf.grad.numpy(), 3 * _eager_grad(leaf) + 1, rtol=1e-5)


def _scaled(x: paddle.Tensor) -> paddle.Tensor:
    return x * 1.0


def _eager_grad(leaf: paddle.Tensor) -> np.ndarray:
    x = leaf.detach()
    x.stop_gradient = False
    small_chain(x).sum().backward()
    return x.grad.numpy()


@pytest.mark.parametrize("backward", [False, True])
def test_dead_intermediates_are_freed_in_batches_of_bounded_size(backward: bool) -> None:
    """The interpreters free the dead intermediate tensors of a run in batches of about `GC_BATCH_BYTES`
    (one hand-off to the collector thread per tensor made a compiled train step cost more CPU than eager):
    between runs, the memory held by dead tensors rises and falls (freed one by one, it would be the same
    after every run), by no more than a batch per interpreter (forward, backward)."""
    fn = sot.symbolic_translate(small_chain)
    x = paddle.randn([ROWS, ROWS])
    x.stop_gradient = not backward
    interpreters = 2 if backward else 1
    tensor_bytes = ROWS * ROWS * 4
    allocated = []
    with sot.config.patch(min_graph_size=0):
        for _ in range(12):  # each run leaves 2 * STEPS dead [64, 64] tensors (forward), as many in backward
            out = fn(x)
            if backward:
                out.sum().backward()
            del out
            allocated.append(_settled_host_allocated())
    allocated = allocated[2:]  # (the first runs build, and make the gradient of ``x``)
    held = max(allocated) - min(allocated)
    assert held > 0, "the same memory after every run: dead tensors are freed one by one, not in batches"
    bound = interpreters * (compile_module.GC_BATCH_BYTES + tensor_bytes)
    assert held <= bound, f"{held} bytes of dead tensors held, more than a batch per interpreter"


class _LinearChain(paddle.nn.Layer):
    """Statements enough for the cost model (``min_graph_size``), and parameters: the program's own backward
    gives their gradients (an input leaf requiring grad would take the recomputing backward instead)."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = paddle.nn.Linear(ROWS, ROWS)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        for _ in range(6):
            x = paddle.tanh(self.linear(x)) + 0.25
        return x


def _scopes(layer_name: str) -> list:
    (program,) = [p for p in compile_module._compiled.values() if p.sir.name == layer_name]
    return [scope for scopes in program._program._scope_cache.values() for scope in scopes]


@pytest.mark.parametrize("min_graph_size", [1, 0])
def test_calls_past_the_busy_scope_limit_run_as_the_eager_replay(monkeypatch: pytest.MonkeyPatch,
                                                                 min_graph_size: int) -> None:
    """Kept outputs whose backward has not run hold their runs' scopes. Past `MAX_BUSY_SCOPES` held at once,
    a call runs as the eager replay instead of making one more scope (and forward and backward interpreters,
    which Paddle keeps for good); with ``min_graph_size=0`` (compiled graphs asked for) it makes one. The
    outputs and gradients are eager's either way, and once the backward freed the scopes the calls run
    compiled in them again."""
    monkeypatch.setattr(compile_module, "MAX_BUSY_SCOPES", 2)
    paddle.seed(7)
    layer = _LinearChain()
    reference = _LinearChain()
    reference.set_state_dict(layer.state_dict())
    x = paddle.randn([ROWS, ROWS])
    fn = sot.symbolic_translate(layer)
    with sot.config.patch(min_graph_size=min_graph_size):
        outs = [fn(x) for _ in range(3)]  # (the cost model's warm-up calls run compiled)
        scopes = _scopes("forward")
        assert len(scopes) == (2 if min_graph_size else 3)
        assert not any(scope._can_reused for scope in scopes)
        paddle.add_n([out.sum() for out in outs]).backward()
        assert all(scope._can_reused for scope in scopes)
        again = fn(x)
        assert len(_scopes("forward")) == len(scopes)
    expected = [reference(x) for _ in range(3)]
    paddle.add_n([out.sum() for out in expected]).backward()
    for out in [*outs, again]:
        np.testing.assert_allclose(out.numpy(), expected[0].numpy(), rtol=1e-6)
    for mine, eager in zip(layer.parameters(), reference.parameters()):
        np.testing.assert_allclose(mine.grad.numpy(), eager.grad.numpy(), rtol=1e-4, atol=1e-4)  # (sums of ~100)


def test_a_run_of_another_thread_ending_does_not_release_the_build_lock_of_a_new_scope() -> None:
    """A run making a new scope holds the build lock (its interpreter is built under the flags) until it ends;
    a run of the same program ending in another thread meanwhile released it in that thread's name: the lock
    failed there, and the building thread, its mark gone, kept the lock forever (every later translation in
    another thread waited on it)."""
    import threading

    fn = sot.symbolic_translate(small_chain)
    x = paddle.randn([ROWS, ROWS])
    with sot.config.patch(min_graph_size=0):
        fn(x)
    (program,) = [p for p in compile_module._compiled.values() if p.sir.name == "small_chain"]
    program._program._create_scope_vec(cache_key=None, use_scope_cache=False)  # (this thread: builds a scope)
    other_failures: list[BaseException] = []

    def end_in_another_thread() -> None:
        try:
            program._end_scope_build()  # (a run of the same program ending there: nothing of its own to end)
        except BaseException as failure:  # noqa: BLE001
            other_failures.append(failure)

    ender = threading.Thread(target=end_in_another_thread)
    ender.start()
    ender.join()
    program._end_scope_build()
    acquired: list[bool] = []

    def acquire() -> None:
        acquired.append(compile_module.BUILD_LOCK._lock.acquire(timeout=5))
        if acquired[0]:
            compile_module.BUILD_LOCK._lock.release()

    checker = threading.Thread(target=acquire)
    checker.start()
    checker.join()
    assert other_failures == [] and acquired == [True], (other_failures, acquired)


@pytest.mark.parametrize("way", ["compiled", "eager"])
def test_forced_way_runs_every_call_of_every_graph_that_way(way: str) -> None:
    """`forced_way` (tests only) overrides the cost model: "eager" never builds the static program (every call,
    the warm-up too, is the eager replay), "compiled" never builds the replay (past the warm-up too); and the
    cost model's own choice is back after the block."""
    x = paddle.randn([4, 4])
    before = set(compile_module._RUNNABLE)
    with sot.config.patch(min_graph_size=1), compile_module.forced_way(way):
        translated = sot.symbolic_translate(small_chain)
        for _ in range(compile_module.WARMUP_CALLS + 8):
            np.testing.assert_array_equal(translated(x).numpy(), small_chain(x).numpy())
        programs = set(compile_module._RUNNABLE) - before
        assert programs
        for program in programs:
            assert program.choice is None  # (the cost model was not asked)
            if way == "eager":
                assert program._program is None and program._replay_function is not None
            else:
                assert program._program is not None and program._replay_function is None
    assert compile_module._FORCED_WAY is None


def test_forced_way_refuses_an_unknown_way() -> None:
    with pytest.raises(ValueError):
        with compile_module.forced_way("static"):
            pass

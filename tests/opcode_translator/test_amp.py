"""Mixed precision (``paddle.amp.auto_cast``) in translated code.

An ``auto_cast`` block inside a translated function is simulated, not a fallback: the statements recorded
inside carry the AMP state eager mode has there, so meta inference, the compiled program and eager replay
apply the same casts. On a CPU place Paddle's own ``auto_cast`` switches AMP off (eager casts nothing
there), which the translation must reproduce exactly: same values, dtypes, gradients, global state. The
casting machinery itself is checked by pretending the place is an accelerator (``_place_casts``), where
eager parity cannot be observed on this build but the SIR, the inferred dtypes and the compiled program
must agree with each other.
"""
from __future__ import annotations

import contextlib
import functools
import importlib
import subprocess
import sys
import warnings
from typing import Any, Iterator

import numpy as np
import paddle
import pytest
from paddle.base import core

import sot
import sot.symbolic.amp as amp_module
from sot.eval_frame_ext import RELAXED_GUARD_PERIOD
from tests.conftest import assert_same

amp_record = importlib.import_module("paddle.amp.auto_cast").amp_global_state()

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _t(*shape: int, seed: int = 0, stop_gradient: bool = True) -> paddle.Tensor:
    tensor = paddle.to_tensor(np.random.RandomState(seed).uniform(-1, 1, shape).astype("float32"))
    tensor.stop_gradient = stop_gradient
    return tensor


def _counts() -> dict[str, int]:
    stats = sot.stats()
    return {name: getattr(stats, name) for name in ("translate_count", "graph_breaks", "fallbacks")}


@contextlib.contextmanager
def tracer_amp(level: str, dtype: str, white: set[str] | None = None) -> Iterator[None]:
    """AMP switched on in the tracer directly: on a CPU build ``auto_cast`` itself turns it off again."""
    tracer = paddle.base.framework._dygraph_tracer()
    saved = (tracer._amp_level, tracer._amp_dtype, tracer._get_amp_op_list())
    lists = importlib.import_module("paddle.amp.auto_cast")._update_list(white, None, level, dtype)
    tracer._amp_level, tracer._amp_dtype = getattr(core.AmpLevel, level), dtype
    tracer._set_amp_op_list(*lists)
    try:
        yield
    finally:
        tracer._amp_level, tracer._amp_dtype = saved[:2]
        tracer._set_amp_op_list(*saved[2])


def amp_block(x, w, level, dtype):
    y = x + 1
    with paddle.amp.auto_cast(level=level, dtype=dtype):
        z = paddle.matmul(y, w)
        z = paddle.nn.functional.relu(z) + paddle.exp(y).sum()
    return (z * 2).mean(), z


def _grads_match(fn: Any, make_args: Any, compare_grads_of: list[int]) -> None:
    """Outputs and gradients of eager and translated runs (two translated calls: translation and hit)."""
    args = make_args()
    expected = fn(*args)
    expected[0].backward()
    expected_grads = [args[i].grad.numpy() for i in compare_grads_of]
    fast = sot.symbolic_translate(fn)
    for _ in range(2):
        args = make_args()
        out = fast(*args)
        assert_same(out, expected)
        out[0].backward()
        for i, grad in zip(compare_grads_of, expected_grads):
            np.testing.assert_allclose(args[i].grad.numpy(), grad, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("level,dtype", [("O1", "float16"), ("O1", "bfloat16"), ("O2", "float16"),
                                         ("O2", "bfloat16")])
def test_auto_cast_block_matches_eager_without_fallback(level: str, dtype: str, compile_all: Any) -> None:
    _grads_match(amp_block, lambda: (_t(4, 8), _t(8, 3, seed=1, stop_gradient=False), level, dtype), [1])
    assert _counts() == {"translate_count": 1, "graph_breaks": 0, "fallbacks": 0}


def custom_lists(x, w):
    with paddle.amp.auto_cast(custom_white_list={"exp"}, custom_black_list=["matmul_v2"], dtype="bfloat16"):
        y = paddle.exp(paddle.matmul(x, w))
    return y.sum(), y


def disabled(x, w):
    with paddle.amp.auto_cast(enable=False):
        y = paddle.matmul(x, w)
    return y.sum(), y


def nested_blocks(x, w):
    with paddle.amp.auto_cast(dtype="bfloat16"):
        y = paddle.matmul(x, w)
        with paddle.amp.auto_cast(enable=False):
            z = y * 3
        y = y + z
    return y.mean(), y, z


def with_grad_mode(x, w):
    with paddle.no_grad(), paddle.amp.auto_cast(level="O2"):
        frozen = paddle.matmul(x, w)
    with paddle.amp.auto_cast() as ctx:
        y = paddle.matmul(x, w) + frozen
    return y.sum(), frozen, ctx


def torch_style_autocast(x, w):
    with paddle.autocast("cpu", dtype="bfloat16"):
        y = paddle.tanh(paddle.matmul(x, w))
    return y.sum(), y


@pytest.mark.parametrize("fn", [custom_lists, disabled, nested_blocks, with_grad_mode, torch_style_autocast])
def test_auto_cast_variants_match_eager(fn: Any, compile_all: Any) -> None:
    _grads_match(fn, lambda: (_t(4, 8), _t(8, 3, seed=1, stop_gradient=False)), [1])
    assert _counts() == {"translate_count": 1, "graph_breaks": 0, "fallbacks": 0}


@paddle.amp.auto_cast(dtype="bfloat16", custom_white_list=["exp"])
def decorated(x, w):
    return paddle.exp(paddle.matmul(x, w)), paddle.amp.is_autocast_enabled(), paddle.amp.get_autocast_dtype()


def calls_decorated(x, w):
    y, enabled, _ = decorated(x * 2, w)
    return y.sum(), y, enabled


class DecoratedForward(paddle.nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.fc = paddle.nn.Linear(8, 3)

    @paddle.amp.auto_cast(level="O2")
    def forward(self, x):
        return paddle.tanh(self.fc(x))


decorated_layer = DecoratedForward()


def calls_decorated_layer(x, w):
    y = decorated_layer(x) + paddle.matmul(x, w)
    return y.mean(), y


@pytest.mark.parametrize("fn", [calls_decorated, calls_decorated_layer])
def test_functions_decorated_with_auto_cast_are_inlined(fn: Any, compile_all: Any) -> None:
    _grads_match(fn, lambda: (_t(4, 8), _t(8, 3, seed=1, stop_gradient=False)), [1])
    assert _counts() == {"translate_count": 1, "graph_breaks": 0, "fallbacks": 0}


@paddle.amp.auto_cast(dtype="bfloat16", custom_white_list=["exp"])
def decorated_with_break(x):
    y = paddle.exp(x)
    observe_amp_state()
    return y + 1


def calls_decorated_with_break(x):
    return decorated_with_break(x * 2) * 3


def test_a_break_inside_a_decorated_function_runs_it_in_amp_mode(compile_all: Any) -> None:
    observed.clear()
    expected = calls_decorated_with_break(_t(3))
    expected_states = list(observed)
    observed.clear()
    fast = sot.symbolic_translate(calls_decorated_with_break)
    for _ in range(2):
        assert_same(fast(_t(3)), expected)
        assert observed == expected_states
        observed.clear()
    assert sot.stats().fallbacks == 0


def amp_queries(x):
    before = (paddle.amp.is_autocast_enabled(), paddle.amp.get_autocast_dtype())
    with paddle.amp.auto_cast(dtype="bfloat16"):
        inside = (paddle.is_autocast_enabled(), paddle.get_autocast_dtype())
    return x + 1, before, inside


def raise_inside_block(x):
    try:
        with paddle.amp.auto_cast(dtype="bfloat16", custom_white_list=["exp"]):
            y = paddle.exp(x)
            if y.shape[0] == 3:
                raise ValueError("leaving the block by an exception")
    except ValueError:
        y = x * 2
    return y, paddle.amp.get_autocast_dtype()


def test_an_exception_leaving_a_block_restores_the_state(parity: Any, compile_all: Any) -> None:
    for outside in (tracer_amp("O1", "float16"), contextlib.nullcontext()):
        with outside:
            before = amp_module.current_amp_state()
            parity(raise_inside_block, _t(3))
            assert amp_module.current_amp_state() == before
    assert sot.stats().fallbacks == 0 and sot.stats().graph_breaks == 0


@paddle.amp.auto_cast(dtype="bfloat16")
def decorated_raising(x):
    if x.shape[0] == 3:
        raise KeyError("leaving a decorated function by an exception")
    return x


def catches_from_decorated(x):
    try:
        decorated_raising(x)
    except KeyError:
        pass
    return x + 1, paddle.amp.is_autocast_enabled(), paddle.amp.get_autocast_dtype()


def test_an_exception_leaving_a_decorated_function_leaves_its_block(parity: Any, compile_all: Any) -> None:
    with tracer_amp("O1", "float16"):
        parity(catches_from_decorated, _t(3))
    assert sot.stats().fallbacks == 0


def test_amp_queries_are_answered_from_the_simulated_state(parity: Any, compile_all: Any) -> None:
    parity(amp_queries, _t(3))
    with tracer_amp("O1", "bfloat16"):
        parity(amp_queries, _t(3))
    assert sot.stats().fallbacks == 0 and sot.stats().graph_breaks == 0


def test_the_global_amp_dtype_record_is_replayed_on_every_call() -> None:
    # ``auto_cast`` records its dtype process-wide (GradScaler reads it): eager sets it at each entry.
    saved = amp_record.amp_dtype
    try:
        amp_record.amp_dtype = "float32"
        amp_block(_t(4, 8), _t(8, 3), "O1", "bfloat16")
        expected = amp_record.amp_dtype
        assert expected == "bfloat16"
        fast = sot.symbolic_translate(amp_block)
        for _ in range(2):
            amp_record.amp_dtype = "float32"
            fast(_t(4, 8), _t(8, 3), "O1", "bfloat16")
            assert amp_record.amp_dtype == expected
        assert sot.stats().cache_hits == 1
    finally:
        amp_record.amp_dtype = saved


observed: list[tuple] = []


@sot.skip_function
def observe_amp_state() -> None:
    """Runs natively (a graph break): records what the tracer holds at that point."""
    white, black = core._get_amp_op_list()
    attrs = core._get_amp_attrs()
    observed.append((attrs._amp_level, attrs._amp_dtype, "exp" in white, len(white), len(black)))


def break_inside_block(x, w):
    y = x * 2
    with paddle.amp.auto_cast(dtype="bfloat16", custom_white_list=["exp"]):
        z = paddle.matmul(y, w)
        observe_amp_state()
        z = paddle.exp(z) + y.sum()
    observe_amp_state()
    return z.mean(), z


def test_graph_break_inside_a_block_resumes_in_amp_mode(compile_all: Any) -> None:
    observed.clear()
    make_args = lambda: (_t(4, 8), _t(8, 3, seed=1, stop_gradient=False))  # noqa: E731
    args = make_args()
    expected = break_inside_block(*args)
    expected_states = list(observed)
    assert expected_states[0] != expected_states[1]  # the block does change the op lists
    observed.clear()
    fast = sot.symbolic_translate(break_inside_block)
    for _ in range(2):
        assert_same(fast(*make_args()), expected)
        assert observed == expected_states
        observed.clear()
    assert sot.stats().fallbacks == 0 and sot.stats().graph_breaks >= 1
    assert observe_amp_state.__code__ is not None and core._get_amp_op_list() == (set(), set())


def manager_made_before_a_break(x, w):
    manager = paddle.amp.auto_cast(dtype="bfloat16", custom_white_list=["exp"])
    y = paddle.matmul(x, w)
    observe_amp_state()
    with manager:
        y = paddle.exp(y)
        observe_amp_state()
    return y.sum(), y


def test_a_manager_made_before_a_graph_break_is_entered_after_it(compile_all: Any) -> None:
    # The graph before the break is compiled; the generated code makes the real manager. The resume function
    # enters that real (library) manager: its block entry runs natively (a break; 3.10's SETUP_WITH without its
    # block, set up again by the resume function), the block and what follows are translated, its library
    # __exit__ run natively at one more break. The same on every version.
    observed.clear()
    make_args = lambda: (_t(4, 8), _t(8, 3, seed=1, stop_gradient=False))  # noqa: E731
    expected = manager_made_before_a_break(*make_args())
    expected_states = list(observed)
    observed.clear()
    fast = sot.symbolic_translate(manager_made_before_a_break)
    for _ in range(2):
        assert_same(fast(*make_args()), expected)
        assert observed == expected_states
        observed.clear()
    assert sot.stats().fallbacks == 0
    assert sot.stats().graph_breaks == 4


def test_block_arguments_are_guarded(compile_all: Any) -> None:
    fast = sot.symbolic_translate(amp_block)
    x, w = _t(4, 8), _t(8, 3)
    fast(x, w, "O1", "bfloat16")
    fast(x, w, "O2", "float16")
    assert sot.stats().translate_count == 2
    fast(x, w, "O1", "bfloat16")
    assert sot.stats().translate_count == 2 and sot.stats().cache_hits == 1


def plain(x, w):
    return paddle.matmul(x + 1, w).sum()


def test_called_under_amp_translates_and_the_state_is_guarded(compile_all: Any) -> None:
    x, w = _t(4, 8), _t(8, 3, seed=1)
    fast = sot.symbolic_translate(plain)
    with tracer_amp("O1", "bfloat16"):
        assert_same(fast(x, w), plain(x, w))  # eager casts nothing on a CPU place
        assert_same(fast(x, w), plain(x, w))
    assert _counts() == {"translate_count": 1, "graph_breaks": 0, "fallbacks": 0}
    assert_same(fast(x, w), plain(x, w))  # AMP off again: another entry
    assert sot.stats().translate_count == 2
    with tracer_amp("O1", "bfloat16", white={"tanh"}):  # only the op lists differ
        fast(x, w)
    assert sot.stats().translate_count == 3


def test_small_graphs_replayed_eagerly_match_eager_in_and_out_of_amp() -> None:
    # (min_graph_size keeps these graphs eager: the generated replay, or the interpreter under AMP)
    x, w = _t(4, 8), _t(8, 3, seed=1)
    fast = sot.symbolic_translate(amp_block)
    with tracer_amp("O1", "float16"):
        for _ in range(2):
            assert_same(fast(x, w, "O2", "bfloat16"), amp_block(x, w, "O2", "bfloat16"))
    # Its entry runs the original code, right under any mode: its guard is relaxed, and the AMP state (not
    # an argument) is read by the full guard, every RELAXED_GUARD_PERIOD hits (native.relaxed_guard).
    for _ in range(RELAXED_GUARD_PERIOD + 1):
        assert_same(fast(x, w, "O2", "bfloat16"), amp_block(x, w, "O2", "bfloat16"))
    assert sot.stats().translate_count == 2 and sot.stats().compiled_graphs == 0


def test_invalid_block_arguments_raise_the_eager_error() -> None:
    def bad_level(x):
        with paddle.amp.auto_cast(level="O5"):
            return x + 1

    with pytest.raises(ValueError) as eager:
        bad_level(_t(3))
    with pytest.raises(ValueError) as translated:
        sot.symbolic_translate(bad_level)(_t(3))
    assert str(translated.value) == str(eager.value)
    assert core._get_amp_attrs()._amp_level == core.AmpLevel.O0


class SmallNet(paddle.nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = paddle.nn.Linear(8, 16)
        self.fc2 = paddle.nn.Linear(16, 2)

    def forward(self, x):
        return self.fc2(paddle.nn.functional.gelu(self.fc1(x)))


def amp_loss(model, x, label):
    with paddle.amp.auto_cast(dtype="bfloat16"):
        out = model(x)
        loss = paddle.nn.functional.mse_loss(out, label)
    return loss


def _train(step: Any) -> list[np.ndarray]:
    paddle.seed(7)
    model = SmallNet()
    opt = paddle.optimizer.AdamW(0.01, parameters=model.parameters())
    scaler = paddle.amp.GradScaler(init_loss_scaling=1024)
    for i in range(3):
        loss = step(model, _t(6, 8, seed=i), _t(6, 2, seed=10 + i))
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.clear_grad()
    return [p.numpy() for p in model.parameters()]


def test_grad_scaler_training_steps_match_eager() -> None:
    expected = _train(amp_loss)
    actual = _train(sot.symbolic_translate(amp_loss))
    for got, want in zip(actual, expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert sot.stats().fallbacks == 0 and sot.stats().translate_count == 2  # the step, and the model's forward


# -- the casting machinery, on a place pretended to be an accelerator -----------------------------------------
def casts(x, w):
    # (each output is computed by an op after the cast ones: Paddle 3.3.1 crashes running a static program
    # on a CPU whose output comes straight from a bfloat16-cast matmul, with its own to_static as well)
    y = paddle.matmul(x, w) * 2
    return y, paddle.tanh(y) * 2


_BFLOAT16_PROBE = """
import numpy as np, paddle
paddle.enable_static()
main, start = paddle.static.Program(), paddle.static.Program()
with paddle.static.program_guard(main, start):
    a = paddle.static.data("a", [4, 8], "float32")
    y = paddle.tanh(paddle.matmul(a.astype("bfloat16"), a.astype("bfloat16"), transpose_y=True) * 2) * 2
paddle.static.Executor(paddle.CPUPlace()).run(main, feed={"a": np.ones([4, 8], "float32")}, fetch_list=[y])
"""


@functools.lru_cache(maxsize=None)
def _cpu_runs_bfloat16_programs() -> bool:
    """Whether this CPU runs a static bfloat16 matmul. On an AVX2-only CPU (seen: an AMD EPYC without AVX-512)
    Paddle 3.3.1 fails it, and aborts the whole process when the program runs under to_static, so the probe
    runs in a child process."""
    return subprocess.run([sys.executable, "-c", _BFLOAT16_PROBE], capture_output=True, timeout=300).returncode == 0


def test_statements_under_amp_on_an_accelerator_carry_the_casts(monkeypatch: Any, compile_all: Any) -> None:
    if not _cpu_runs_bfloat16_programs():
        pytest.skip("Paddle cannot run a bfloat16 static program on this CPU (it aborts the process)")
    # Eager mode on a CPU place never casts, so only the translation's own consistency is observable: the
    # SIR marks the statements, meta inference gives the low-precision dtype and the compiled program
    # produces it. (Its backward is not run: Paddle 3.3.1 crashes in the bfloat16 backward of a static
    # program on a CPU.)
    monkeypatch.setattr(amp_module, "_place_casts", lambda place: True)
    x, w = _t(4, 8), _t(8, 3, seed=1, stop_gradient=False)
    with tracer_amp("O1", "bfloat16"):
        report = str(sot.explain(casts, x, w))
        assert "[amp O1 bfloat16]" in report and "[4, 3] bfloat16" in report
        y, t = sot.symbolic_translate(casts)(x, w)
    assert (y.dtype, t.dtype) == (paddle.bfloat16, paddle.bfloat16)
    assert not y.stop_gradient
    np.testing.assert_allclose(y.astype("float32").numpy(), 2 * paddle.matmul(x, w).numpy(), rtol=2e-2, atol=5e-2)
    np.testing.assert_allclose(t.astype("float32").numpy(), 2 * paddle.tanh(2 * paddle.matmul(x, w)).numpy(),
                               rtol=2e-2, atol=5e-2)
    assert sot.stats().fallbacks == 0


def test_eager_replay_of_a_statement_applies_its_amp_state() -> None:
    # The SIR interpreter (static build, error replay) and the generated eager replay apply each
    # statement's state and restore the ambient one, also when AMP is on around a statement recorded off.
    from sot.symbolic.replay import compile_replay
    from sot.symbolic.sir import MetaInfo, Statement, StatementIR, Symbol, run_sir

    seen: list[Any] = []

    def probe(value: Any) -> Any:
        seen.append((core._get_amp_attrs()._amp_level, core._get_amp_attrs()._amp_dtype))
        return value

    a, b = Symbol("a"), Symbol("b")
    on = amp_module.AmpState(core.AmpLevel.O2, "float16", frozenset({"matmul"}), frozenset(), True)
    meta = MetaInfo((2,), paddle.float32, True)
    sir = StatementIR("probe", [a], [Statement("api", "probe", probe, (a,), {}, b, amp=on),
                                     Statement("api", "probe", probe, (b,), {}, Symbol("c"))],
                      [Symbol("c")], {a: meta, b: meta, Symbol("c"): meta})
    for run in (lambda inputs: run_sir(sir, inputs), compile_replay(sir)):
        seen.clear()
        run([_t(2)])
        with tracer_amp("O1", "bfloat16"):
            run([_t(2)])
            assert core._get_amp_attrs()._amp_level == core.AmpLevel.O1
        assert seen == [(core.AmpLevel.O2, "float16"), (core.AmpLevel.O0, "float32")] * 2
        assert core._get_amp_attrs()._amp_level == core.AmpLevel.O0
    assert "[amp O2 float16]" in sir.dump()


# -- regression: mixed floating dtypes ----------------------------------------------------------------------
def matmul_mixed(x, w):
    return paddle.matmul(x.astype("bfloat16"), w)


def linear_mixed(layer, x):
    return layer(x.astype("bfloat16"))


def test_an_op_eager_rejects_for_mixed_dtypes_raises_like_eager(compile_all: Any) -> None:
    # The static program would cast the float32 weight silently and return a result.
    x, w = _t(4, 8), _t(8, 3)
    with pytest.raises(ValueError):
        matmul_mixed(x, w)
    with pytest.raises(ValueError):
        sot.symbolic_translate(matmul_mixed)(x, w)


def test_a_builtin_layer_eager_rejects_for_mixed_dtypes_raises_like_eager(compile_all: Any) -> None:
    # Its program would cast the bfloat16 input to the float32 weight: a result where eager raises.
    layer = paddle.nn.Linear(8, 3)
    with pytest.raises(ValueError):
        linear_mixed(layer, _t(4, 8))
    with pytest.raises(ValueError):
        sot.symbolic_translate(linear_mixed)(layer, _t(4, 8))


def norm_of_half(layer, x):
    return layer(x.astype("float16")) * 2


@pytest.mark.parametrize("make_layer", [lambda: paddle.nn.BatchNorm1D(4), lambda: paddle.nn.LayerNorm(4)])
def test_probing_a_layer_for_mixed_dtypes_leaves_its_state_alone(make_layer: Any, compile_all: Any) -> None:
    # The probe runs a copy of the layer: the running statistics move only as in eager mode.
    layer, eager_layer = make_layer(), make_layer()
    eager_layer.set_state_dict(layer.state_dict())
    x = _t(8, 4)
    try:
        expected: Any = norm_of_half(eager_layer, x)
    except Exception as exc:  # noqa: BLE001  (whatever eager raises, translated code raises too)
        expected = type(exc)
    try:
        actual: Any = sot.symbolic_translate(norm_of_half)(layer, x)
    except Exception as exc:  # noqa: BLE001
        actual = type(exc)
    if isinstance(expected, type):
        assert actual is expected
    else:
        assert_same(actual, expected, rtol=1e-3, atol=1e-3)
    for (name, value), (_, eager_value) in zip(layer.state_dict().items(), eager_layer.state_dict().items()):
        np.testing.assert_allclose(value.numpy(), eager_value.numpy(), err_msg=name)

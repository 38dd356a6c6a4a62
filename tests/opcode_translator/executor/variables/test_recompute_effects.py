"""``recompute(function, ...)``: eager's backward runs ``function`` again, repeating what it changes outside
(a batch norm's running statistics, a list of the caller's). A translation computing it once must not hide
that: such a call runs natively (`recompute._call_recomputed`; a batch norm's statistics:
tests/symbolic/test_recomputed_backward_keeps_buffers.py), Paddle's implementation with the hook suspended
(`recompute.RECOMPUTE_CODES`), so that the function's re-run in the backward is eager's."""
from __future__ import annotations

from typing import Callable

import paddle
import pytest
from paddle.distributed.fleet.utils import recompute

import sot

calls: list[int] = []


def counted_block(x: paddle.Tensor) -> paddle.Tensor:
    calls.append(1)
    return paddle.tanh(x) * 2


def leaf() -> paddle.Tensor:
    x = paddle.ones([2])
    x.stop_gradient = False
    return x


def run_three_times(f: Callable[[paddle.Tensor], paddle.Tensor], *, backward: bool = True) -> list:
    """``f`` translated, eager, translated again: what each run left in ``calls`` and the input's gradient."""
    translated = sot.symbolic_translate(f)
    results = []
    for fn in (translated, f, translated):
        calls.clear()
        x = leaf()
        out = fn(x)
        if backward:
            out.sum().backward()
        results.append((list(calls), None if x.grad is None else x.grad.numpy().tolist()))
    return results


@pytest.mark.parametrize("reentrant", [True, False])
def test_a_recomputed_function_appending_to_a_list_appends_again_in_backward(compile_all: None,
                                                                             reentrant: bool) -> None:
    def f(x: paddle.Tensor) -> paddle.Tensor:
        return recompute(counted_block, x, use_reentrant=reentrant)

    results = run_three_times(f)
    assert results[0] == results[1] == results[2]
    assert len(results[1][0]) == 2  # eager: the forward and the backward's re-run


def printing_block(x: paddle.Tensor) -> paddle.Tensor:
    print("block ran")
    return paddle.tanh(x) * 2


@pytest.mark.parametrize("reentrant", [True, False])
def test_a_recomputed_function_printing_prints_again_in_backward(compile_all: None, reentrant: bool,
                                                                 capsys: pytest.CaptureFixture) -> None:
    def f(x: paddle.Tensor) -> paddle.Tensor:
        return recompute(printing_block, x, use_reentrant=reentrant)

    translated = sot.symbolic_translate(f)
    printed = []
    for fn in (translated, f, translated):
        capsys.readouterr()
        x = leaf()
        fn(x).sum().backward()
        printed.append((capsys.readouterr().out, x.grad.numpy().tolist()))
    assert printed[0] == printed[1] == printed[2]
    assert printed[1][0].count("block ran") == 2  # eager: forward and the backward's re-run


counter: dict[str, int] = {}


def counting_block(x: paddle.Tensor, scale: float) -> paddle.Tensor:
    counter["runs"] = counter.get("runs", 0) + 1
    return paddle.exp(x) * scale


@pytest.mark.parametrize("reentrant", [True, False])
def test_a_recomputed_function_mutating_a_dict_mutates_it_again_in_backward(compile_all: None,
                                                                            reentrant: bool) -> None:
    def f(x: paddle.Tensor) -> paddle.Tensor:
        h = x * 3
        return recompute(counting_block, h, 0.5, use_reentrant=reentrant) + h

    translated = sot.symbolic_translate(f)
    seen = []
    for fn in (translated, f, translated):
        counter.clear()
        x = leaf()
        out = fn(x)
        after_forward = dict(counter)
        out.sum().backward()
        seen.append((after_forward, dict(counter), x.grad.numpy().tolist()))
    assert seen[0] == seen[1] == seen[2]
    assert seen[1][:2] == ({"runs": 1}, {"runs": 2})


def appending_block_with_parameters(layer: paddle.nn.Layer, x: paddle.Tensor) -> paddle.Tensor:
    calls.append(1)
    return paddle.tanh(layer(x))


def test_a_non_reentrant_recompute_reruns_for_parameters_alone(compile_all: None) -> None:
    """No input requires gradients, the layer's parameters do: eager's non-reentrant backward still re-runs
    the function (the reentrant one would not: its outputs stop gradients)."""
    paddle.seed(3)
    layer = paddle.nn.Linear(2, 2)

    def f(x: paddle.Tensor) -> paddle.Tensor:
        return recompute(appending_block_with_parameters, layer, x, use_reentrant=False)

    translated = sot.symbolic_translate(f)
    seen = []
    for fn in (translated, f, translated):
        calls.clear()
        layer.clear_gradients()
        fn(paddle.ones([1, 2])).sum().backward()
        seen.append((len(calls), layer.weight.grad.numpy().tolist()))
    assert seen[0] == seen[1] == seen[2]
    assert seen[1][0] == 2


class BlockError(Exception):
    pass


def raising_block(x: paddle.Tensor, limit: int) -> paddle.Tensor:
    calls.append(limit)
    if limit > 1:
        raise BlockError(f"limit {limit}")
    return paddle.tanh(x)


@pytest.mark.parametrize("reentrant", [True, False])
def test_a_recomputed_function_raising_raises_the_same_error(compile_all: None, reentrant: bool) -> None:
    def f(x: paddle.Tensor, limit: int) -> paddle.Tensor:
        return recompute(raising_block, x, limit, use_reentrant=reentrant)

    translated = sot.symbolic_translate(f)
    for limit in (1, 2, 1, 2):
        outcomes = []
        for fn in (translated, f):
            calls.clear()
            x = leaf()
            try:
                fn(x, limit).sum().backward()
                outcomes.append((list(calls), x.grad.numpy().tolist()))
            except Exception as exc:  # noqa: BLE001  (the type is what is compared)
                outcomes.append((list(calls), type(exc)))
        assert outcomes[0] == outcomes[1]
    assert outcomes[1] == ([2], BlockError)


@pytest.mark.parametrize("reentrant", [True, False])
def test_a_recompute_without_grad_is_one_graph_and_runs_its_effects_once(compile_all: None,
                                                                         reentrant: bool) -> None:
    """Under ``no_grad`` nothing is recomputed: the append is replayed once after the graph, no break."""
    def f(x: paddle.Tensor) -> paddle.Tensor:
        with paddle.no_grad():
            return recompute(counted_block, x, use_reentrant=reentrant)

    sot.reset()
    results = run_three_times(f, backward=False)
    assert results[0] == results[1] == results[2] == ([1], None)
    stats = sot.stats()
    assert (stats.graph_breaks, stats.fallbacks) == (0, 0), stats


def pure_block(x: paddle.Tensor) -> paddle.Tensor:
    return paddle.tanh(x) * 2


@pytest.mark.parametrize("reentrant", [True, False])
def test_a_recomputed_function_without_effects_stays_in_one_graph(compile_all: None, reentrant: bool) -> None:
    def f(x: paddle.Tensor) -> paddle.Tensor:
        return recompute(pure_block, x, use_reentrant=reentrant) + x

    sot.reset()
    results = run_three_times(f)
    assert results[0] == results[1] == results[2]
    stats = sot.stats()
    assert (stats.graph_breaks, stats.fallbacks, stats.compiled_graphs) == (0, 0, 1), stats


def test_paddles_recompute_code_runs_with_the_hook_suspended(compile_all: None) -> None:
    """Run natively (here after the break its append causes), ``recompute`` runs the function eagerly: its
    frames are not translated, in the forward nor in the backward's re-run."""
    from sot.eval_frame_ext import cache_size
    from sot.opcode_translator.executor.variables.recompute import RECOMPUTE_CODES
    from sot.opcode_translator.skip_files import runs_hook_free

    assert all(runs_hook_free(code) for code in RECOMPUTE_CODES)
    assert len(RECOMPUTE_CODES) > 4  # nested hooks (pack, unpack) included

    def f(x: paddle.Tensor) -> paddle.Tensor:
        return recompute(counted_block, x, use_reentrant=False)

    sot.reset()
    results = run_three_times(f)
    assert results[0] == results[1] == results[2]
    assert len(results[0][0]) == 2
    assert sot.stats().graph_breaks == 1
    assert cache_size(counted_block.__code__) == 0

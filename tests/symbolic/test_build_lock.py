"""`compile.BUILD_LOCK` holds automatic garbage collection off while sot builds static programs: a collection
landing inside Paddle's program building freed memory the build still read (a segfault in
``RunnableProgram.program_name_attr`` on 3.12/3.13, see `compile._BuildLock`)."""
from __future__ import annotations

import gc
from typing import Any, Iterator

import numpy as np
import paddle
import pytest

import sot
from sot.symbolic import compile as compile_module
from sot.symbolic.compile import BUILD_LOCK


@pytest.fixture
def collector_on() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.enable()
    yield
    if not was_enabled:
        gc.disable()


def test_collection_is_off_inside_a_section_and_back_on_after(collector_on):
    with BUILD_LOCK:
        assert not gc.isenabled()
        with BUILD_LOCK:
            assert not gc.isenabled()
        assert not gc.isenabled()  # (until the outermost section ends)
    assert gc.isenabled()


def test_a_collector_the_user_turned_off_stays_off():
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        with BUILD_LOCK:
            pass
        assert not gc.isenabled()
    finally:
        if was_enabled:
            gc.enable()


def test_collection_is_back_on_when_a_section_raises(collector_on):
    with pytest.raises(RuntimeError):
        with BUILD_LOCK:
            raise RuntimeError
    assert gc.isenabled()


def test_collection_is_back_on_when_entering_a_section_fails(collector_on, monkeypatch):
    def failing_enter() -> None:
        raise RecursionError("near the recursion limit")

    monkeypatch.setattr(compile_module, "enter_static_section", failing_enter)
    with pytest.raises(RecursionError):
        BUILD_LOCK.acquire()
    assert gc.isenabled() and not BUILD_LOCK._lock._is_owned()


def test_a_failed_nested_enter_keeps_collection_off_for_the_outer_section(collector_on, monkeypatch):
    with BUILD_LOCK:
        def failing_enter() -> None:
            raise RecursionError("near the recursion limit")

        with monkeypatch.context() as patch:
            patch.setattr(compile_module, "enter_static_section", failing_enter)
            with pytest.raises(RecursionError):
                BUILD_LOCK.acquire()
        assert not gc.isenabled()
    assert gc.isenabled()


def _cycles(count: int) -> None:
    for _ in range(count):
        node: dict[str, Any] = {}
        node["self"] = node


def test_no_collection_starts_while_a_program_is_built_and_trained(collector_on):
    """With a collection due at nearly every allocation, translating, building the program and its train
    program (a backward) start none inside a section; they happen after it."""
    inside: list[bool] = []

    @sot.skip_function  # (a callback run from a translated frame would be translated, under the lock)
    def watch(phase: str, info: dict) -> None:
        if phase == "start":
            inside.append(BUILD_LOCK._depth > 0 and BUILD_LOCK._lock._is_owned())

    layer = paddle.nn.Sequential(paddle.nn.Linear(4, 8), paddle.nn.Tanh(), paddle.nn.Linear(8, 2))
    eager_layer = paddle.nn.Sequential(paddle.nn.Linear(4, 8), paddle.nn.Tanh(), paddle.nn.Linear(8, 2))
    eager_layer.set_state_dict(layer.state_dict())
    translated = sot.symbolic_translate(layer)
    x = paddle.rand([3, 4])
    thresholds = gc.get_threshold()
    gc.callbacks.append(watch)
    gc.set_threshold(1, 1, 1)
    try:
        _cycles(50)
        with sot.config.patch(min_graph_size=0):
            out = translated(x)
            out.sum().backward()
    finally:
        gc.set_threshold(*thresholds)
        gc.callbacks.remove(watch)
    expected = eager_layer(x)
    expected.sum().backward()
    np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-6)
    for p, e in zip(layer.parameters(), eager_layer.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), e.grad.numpy(), rtol=1e-6)
    assert sot.stats().compiled_graphs == 1
    assert inside and not any(inside)  # (collections ran, none inside a section)

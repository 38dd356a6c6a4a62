"""``logging`` calls in translated code (variables/logging_rules.py): a call the logger filters out
(``isEnabledFor(level)`` False: its level, ``disabled``, ``logging.disable``) is skipped with no graph
break, under a guard re-asking ``isEnabledFor``; ``log.isEnabledFor``/``getEffectiveLevel`` are answered
the same way; a call that would emit runs natively (one break), emitting exactly what eager does."""
from __future__ import annotations

import logging

import numpy as np
import paddle
import pytest

import sot

from conftest import assert_counts, assert_same, raised


def _t(*shape: int, seed: int = 0) -> paddle.Tensor:
    rng = np.random.default_rng(seed)
    return paddle.to_tensor(rng.standard_normal(shape).astype("float32"))


class Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    @sot.skip_function  # (a handler of the test: its frames are not what is counted)
    def emit(self, record):
        self.messages.append(f"{record.levelname}:{record.getMessage()}")


@pytest.fixture
def log():
    logger = logging.getLogger("sot.tests.logging_calls")
    handler = Collect()
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(logging.INFO)
    logger.disabled = False
    yield logger, handler
    logger.removeHandler(handler)
    logging.disable(logging.NOTSET)


def forward(logger, x):
    y = x * 2
    logger.debug("y=%s", y)
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug("mean=%s", float(y.mean()))
    logger.log(5, "trace")
    return y + 1


def run(fn, logger, handler, x):
    handler.messages.clear()
    expected = fn(logger, x)
    eager_messages = list(handler.messages)
    handler.messages.clear()
    out = sot.symbolic_translate(fn)(logger, x)
    assert_same(out, expected)
    assert handler.messages == eager_messages
    return eager_messages


def test_filtered_calls_are_skipped_without_a_break(compile_all, log):
    logger, handler = log
    x = _t(3)
    for _ in range(2):
        assert run(forward, logger, handler, x) == []
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)
    assert sot.stats().cache_hits == 1


@pytest.mark.parametrize("turn_on", ["level", "disabled", "disable"])
def test_the_guard_follows_the_loggers_state(compile_all, log, turn_on):
    logger, handler = log
    x = _t(3)
    if turn_on == "disabled":
        logger.setLevel(logging.DEBUG)
        logger.disabled = True
    elif turn_on == "disable":
        logger.setLevel(logging.DEBUG)
        logging.disable(logging.CRITICAL)
    assert run(forward, logger, handler, x) == []
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)
    # The logger now emits: a guard miss, and the calls run natively (the messages are eager's).
    if turn_on == "level":
        logger.setLevel(logging.DEBUG)
    elif turn_on == "disabled":
        logger.disabled = False
    else:
        logging.disable(logging.NOTSET)
    assert len(run(forward, logger, handler, x)) == 2
    stats = sot.stats()
    assert stats.fallbacks == 0 and stats.translate_count >= 2 and stats.graph_breaks >= 1


def enabled_once(logger, x):
    y = x + 1
    logger.info("shape=%s", y.shape)
    return y * 3


def test_an_emitting_call_is_one_break(compile_all, log):
    logger, handler = log
    x = _t(3)
    for _ in range(2):
        assert run(enabled_once, logger, handler, x) == ["INFO:shape=paddle.Size([3])"]
    assert_counts(translate_count=2, graph_breaks=1, fallbacks=0, compiled_graphs=2)


def module_level(logger, x):
    y = x - 1
    logging.debug("root y=%s", y)
    return y * 2


def test_module_level_function_with_root_handlers(compile_all, log):
    logger, handler = log
    root = logging.getLogger()
    added = Collect()
    root.addHandler(added)
    old_level = root.level
    root.setLevel(logging.WARNING)
    try:
        x = _t(3)
        for _ in range(2):
            assert_same(sot.symbolic_translate(module_level)(logger, x), module_level(logger, x))
        assert added.messages == []
        assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)
    finally:
        root.removeHandler(added)
        root.setLevel(old_level)


def effective_level(logger, x):
    return x * logger.getEffectiveLevel()


def test_get_effective_level_is_guarded(compile_all, log):
    logger, handler = log
    x = _t(3)
    fast = sot.symbolic_translate(effective_level)
    assert_same(fast(logger, x), effective_level(logger, x))
    logger.setLevel(logging.WARNING)
    assert_same(fast(logger, x), effective_level(logger, x))
    assert_counts(translate_count=2, graph_breaks=0, fallbacks=0, compiled_graphs=2)


def bad_level(logger, x):
    logger.log("high", "message")
    return x


def test_a_bad_level_raises_as_eager(log):
    logger, handler = log
    x = _t(3)
    expected = raised(bad_level, logger, x)
    actual = raised(sot.symbolic_translate(bad_level), logger, x)
    assert type(actual) is type(expected) and str(actual) == str(expected)

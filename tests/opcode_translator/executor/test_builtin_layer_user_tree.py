"""Built-in layers running the user's Python: ``nn.RNN(MyCell())``, ``nn.TransformerEncoder`` of a user block,
forward hooks on a sublayer of a built-in layer. As one ``layer`` statement that Python would run once, while
the program is built (side effects lost at later calls, static values leaking into the user's lists, Paddle
aborting the process when a cell was translated during the build); the built-in forward is simulated
instead, the user's code inlined into the caller's graph."""
from __future__ import annotations

from typing import Any

import numpy as np
import paddle
import paddle.nn as nn

import sot
from tests.conftest import assert_counts, assert_same


def _tensor(*shape: int, seed: int = 0) -> paddle.Tensor:
    return paddle.to_tensor(np.random.default_rng(seed).standard_normal(shape).astype("float32"))


class CountingCell(nn.RNNCellBase):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 4)
        self.steps = 0

    @property
    def state_shape(self):
        return (4,)

    def forward(self, x, h=None):
        self.steps += 1
        if h is None:
            h = paddle.zeros([x.shape[0], 4])
        h = paddle.tanh(self.lin(paddle.concat([x, h], -1)))
        return h, h


def _pair(make: Any) -> tuple[Any, Any]:
    paddle.seed(11)
    first = make()
    paddle.seed(11)
    return first, make()


def test_rnn_of_a_user_cell_with_initial_states_is_one_graph_with_the_cells_side_effects(compile_all: Any) -> None:
    eager_rnn, rnn = _pair(lambda: nn.RNN(CountingCell()))

    def step(model, x, h0):
        out, h = model(x, h0)
        return out.mean() + h.sum()

    x, h0 = _tensor(2, 3, 4), _tensor(2, 4, seed=1)
    translated = sot.symbolic_translate(step)
    for _ in range(3):
        assert_same(translated(rnn, x, h0), step(eager_rnn, x, h0))
    assert rnn.cell.steps == eager_rnn.cell.steps == 9
    # (the second call retranslates once: ``steps`` seen with a second value becomes symbolic)
    translations = sot.stats().translate_count
    assert_same(translated(rnn, x, h0), step(eager_rnn, x, h0))
    assert sot.stats().translate_count == translations
    assert sot.stats().graph_breaks == 0 and sot.stats().fallbacks == 0
    translated(rnn, x, h0).backward()
    step(eager_rnn, x, h0).backward()
    assert_same(rnn.cell.lin.weight.grad, eager_rnn.cell.lin.weight.grad)


def test_rnn_of_a_user_cell_making_its_own_initial_states_matches_eager(compile_all: Any) -> None:
    eager_rnn, rnn = _pair(lambda: nn.RNN(CountingCell()))

    def step(model, x):
        out, h = model(x)
        return out * 2, h

    x = _tensor(2, 5, 4)
    translated = sot.symbolic_translate(step)
    for _ in range(3):
        assert_same(translated(rnn, x), step(eager_rnn, x))
    assert rnn.cell.steps == eager_rnn.cell.steps == 15
    # (Paddle's ``get_initial_states`` swaps a helper of ``paddle.utils.layers_utils`` and puts it back: a
    # module attribute stored in the frame, no break)
    assert sot.stats().fallbacks == 0 and sot.stats().graph_breaks == 0
    assert paddle.utils.layers_utils.is_sequence.__name__ == "is_sequence"


class HalvedBlock(nn.TransformerEncoderLayer):
    calls: list[int] = []

    def forward(self, src, src_mask=None, cache=None):
        HalvedBlock.calls.append(src.shape[1])
        return super().forward(src, src_mask, cache) * 0.5


def test_a_transformer_encoder_of_a_user_block_runs_the_block_at_every_call(compile_all: Any) -> None:
    eager_encoder, encoder = _pair(lambda: nn.TransformerEncoder(HalvedBlock(8, 2, 16, dropout=0.0), 2))

    def step(model, x):
        return model(x)

    x = _tensor(2, 3, 8)
    translated = sot.symbolic_translate(step)
    HalvedBlock.calls.clear()
    for _ in range(2):
        assert_same(translated(encoder, x), step(eager_encoder, x), rtol=1e-4, atol=1e-5)
    assert HalvedBlock.calls == [3] * 8  # (two blocks, two calls, eager and translated)
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


def test_a_hook_on_a_sublayer_of_a_builtin_layer_captures_real_tensors_at_every_call(compile_all: Any) -> None:
    eager_block, block = _pair(lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0))
    eager_features: list[paddle.Tensor] = []
    features: list[paddle.Tensor] = []
    eager_block.linear1.register_forward_post_hook(lambda layer, inputs, output: eager_features.append(output))
    block.linear1.register_forward_post_hook(lambda layer, inputs, output: features.append(output))

    def step(model, x):
        return model(x).sum()

    translated = sot.symbolic_translate(step)
    for seed in range(2):
        x = _tensor(2, 3, 8, seed=seed)
        assert_same(translated(block, x), step(eager_block, x), rtol=1e-4, atol=1e-4)
    assert len(features) == len(eager_features) == 2
    for actual, expected in zip(features, eager_features):
        assert isinstance(actual, paddle.Tensor)
        assert_same(actual, expected, rtol=1e-4, atol=1e-5)
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


def test_a_builtin_layer_of_paddles_own_code_stays_one_layer_statement(compile_all: Any) -> None:
    paddle.seed(3)
    block = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0)

    def step(x):
        return block(x) + 1

    report = str(sot.explain(step, _tensor(2, 3, 8)))
    assert "layer paddle.nn.layer.transformer.TransformerEncoderLayer(" in report


def test_setting_a_module_attribute_is_replayed_after_the_graph(compile_all: Any) -> None:
    """(It used to fall back, then to break the graph: tests/opcode_translator/executor/handlers/
    test_module_globals.py has the rest.)"""
    import types

    settings = types.ModuleType("settings")
    settings.scale = 1.0

    def step(x):
        y = x * 2 + 1
        settings.scale = settings.scale * 2
        return y * settings.scale

    x = _tensor(3)
    settings.scale = 1.0
    expected = [step(x) for _ in range(2)]
    settings.scale = 1.0
    translated = sot.symbolic_translate(step)
    for want in expected:
        assert_same(translated(x), want)
    assert settings.scale == 4.0
    assert sot.stats().fallbacks == 0 and sot.stats().graph_breaks == 0

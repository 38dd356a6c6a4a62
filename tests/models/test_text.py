"""Text models: paddle.nn.Transformer, LSTM and GRU classifiers, a GPT written like user code."""
from __future__ import annotations

import pytest

from .harness import check_whole_model
from .zoo import TEXT


@pytest.mark.parametrize("name", [
    pytest.param(name, marks=[pytest.mark.slow] if spec.slow else []) for name, spec in TEXT.items()
])
def test_text_model(name: str) -> None:
    check_whole_model(TEXT[name])

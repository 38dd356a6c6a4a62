"""paddle.vision.models at small input sizes: eager parity and whole-graph capture."""
from __future__ import annotations

import pytest

from .harness import check_whole_model
from .zoo import VISION


@pytest.mark.parametrize("name", [
    pytest.param(name, marks=[pytest.mark.slow] if spec.slow else []) for name, spec in VISION.items()
])
def test_vision_model(name: str) -> None:
    check_whole_model(VISION[name])

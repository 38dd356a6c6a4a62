"""A third batch of models written like popular repositories write them (`zoo_third`), each checked for eager
parity and whole-graph capture, and the bugs they found, reduced."""
from __future__ import annotations

import pytest

from .harness import check_whole_model
from .zoo_third import THIRD


@pytest.mark.parametrize("name", [
    pytest.param(name, marks=[pytest.mark.slow] if spec.slow else []) for name, spec in THIRD.items()
])
def test_third_model(name: str) -> None:
    check_whole_model(THIRD[name])

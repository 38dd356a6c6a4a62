"""Models written like user code (`zoo_user`): eager parity and whole-graph capture, another batch size."""
from __future__ import annotations

import pytest

from .harness import check_whole_model
from .zoo_user import USER


@pytest.mark.parametrize("name", [
    pytest.param(name, marks=[pytest.mark.slow] if spec.slow else []) for name, spec in USER.items()
])
def test_user_model(name: str) -> None:
    check_whole_model(USER[name])

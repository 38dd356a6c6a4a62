"""Runtime configuration of `sot`, read once from the environment at import.

Every field can be changed as an attribute (``sot.config.log_level = 2``) or for a block with
``with sot.config.patch(strict_mode=True): ...``.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
from typing import Any, Callable, Iterator


def _env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    if raw.lower() in ("1", "true", "yes", "on"):
        return True
    if raw.lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"environment variable {name}={raw!r} is not a boolean (use 1/0, true/false)")


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"environment variable {name}={raw!r} is not an integer") from None


@dataclasses.dataclass
class Config:
    """The knobs of API.md; each field's default comes from its environment variable."""

    strict_mode: bool = dataclasses.field(default_factory=lambda: _env_bool("SOT_STRICT_MODE", False))
    log_level: int = dataclasses.field(default_factory=lambda: _env_int("SOT_LOG_LEVEL", 0))
    min_graph_size: int = dataclasses.field(default_factory=lambda: _env_int("SOT_MIN_GRAPH_SIZE", 10))
    cache_limit: int = dataclasses.field(default_factory=lambda: _env_int("SOT_CACHE_LIMIT", 8))
    dynamic_shape: bool = dataclasses.field(default_factory=lambda: _env_bool("SOT_DYNAMIC_SHAPE", True))

    def __setattr__(self, name: str, value: Any) -> None:
        # A typo such as ``config.strict = True`` must not pass silently.
        if name not in _FIELD_TYPES:
            raise AttributeError(f"sot.config has no field {name!r}; fields: {', '.join(_FIELD_TYPES)}")
        expected = _FIELD_TYPES[name]
        if expected is bool and not isinstance(value, bool):
            raise TypeError(f"sot.config.{name} must be a bool, got {value!r}")
        if expected is int and (not isinstance(value, int) or isinstance(value, bool)):
            raise TypeError(f"sot.config.{name} must be an int, got {value!r}")
        object.__setattr__(self, name, value)

    @contextlib.contextmanager
    def patch(self, **changes: Any) -> Iterator["Config"]:
        """Set fields for the duration of a ``with`` block, restoring them afterwards."""
        saved = {name: getattr(self, name) for name in changes if name in _FIELD_TYPES}
        try:
            for name, value in changes.items():
                setattr(self, name, value)
            yield self
        finally:
            for name, value in saved.items():
                object.__setattr__(self, name, value)


_FIELD_TYPES: dict[str, type] = {"strict_mode": bool, "log_level": int, "min_graph_size": int,
                                 "cache_limit": int, "dynamic_shape": bool}

config = Config()

"""Leveled logging to stderr, controlled by ``sot.config.log_level`` (env ``SOT_LOG_LEVEL``)."""
from __future__ import annotations

import sys

from .config import config


def log(level: int, message: str) -> None:
    """Print ``message`` when the configured level is at least ``level`` (1: breaks, 2: SIR, 3: bytecode)."""
    if config.log_level >= level:
        print(f"[sot] {message}", file=sys.stderr, flush=True)


def enabled(level: int) -> bool:
    return config.log_level >= level

"""sot: a symbolic opcode translator JIT for PaddlePaddle.

Wrap a function or a layer with `symbolic_translate`; its bytecode is simulated, tensor operations are
captured into compiled static programs, and everything else stays plain Python. See API.md.
"""
from __future__ import annotations

# Every version difference of the translator lives in opcode_translator/pyversion.py (importable on any
# Python 3, so an unsupported interpreter gets this clear error instead of a crash further in).
from .opcode_translator.pyversion import SUPPORTED_PYTHONS, unsupported_python_message

if unsupported_python_message() is not None:
    raise ImportError(unsupported_python_message())

from . import psdb  # noqa: E402
from .config import config  # noqa: E402
from .errors import BreakGraphCheckError, SotError, UnsupportedError  # noqa: E402
from .explain import explain  # noqa: E402
from .export import export  # noqa: E402
from .profile import profile  # noqa: E402
from .report import report  # noqa: E402
from .stats import Stats, stats  # noqa: E402
from .translate import symbolic_translate  # noqa: E402


def reset() -> None:
    """Forget every cached translation and compiled program; statistics restart from zero. Paddle's
    interpreters of the programs are freed too once none of them is alive (`compile.drop_unused_interpreters`:
    outputs still holding their backward keep them)."""
    from .eval_frame_ext import reset_cache
    from .stats import reset_counters
    from .symbolic.compile import clear_compiled, drop_unused_interpreters

    from .opcode_translator.callback import forget_warnings, purge_cache_records
    from .opcode_translator.executor.dynamic_shape import forget as forget_dynamic_dims
    from .opcode_translator.executor.function_graph import forget_metas

    reset_cache()
    purge_cache_records()
    clear_compiled()
    forget_warnings()
    forget_dynamic_dims()
    forget_metas()
    reset_counters()
    drop_unused_interpreters()


def skip_function(fn):  # type: ignore[no-untyped-def]
    """Never translate ``fn`` (decorator, or call it on a function or method); returns ``fn``."""
    from .opcode_translator.skip_files import skip_code

    target = getattr(fn, "__func__", fn)
    target = getattr(target, "__sot_translated__", target)  # (a `symbolic_translate` result: its original)
    code = getattr(target, "__code__", None)
    if code is None:
        raise TypeError(f"sot.skip_function expects a Python function or method, got {type(fn).__name__}")
    skip_code(code)
    return fn


__all__ = ["BreakGraphCheckError", "SotError", "Stats", "UnsupportedError", "config", "explain", "export",
           "profile", "psdb", "report", "reset", "skip_function", "stats", "symbolic_translate"]

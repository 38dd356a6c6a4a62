"""Paddle's registries keyed by ``id`` of a static program, emptied of the programs a sot section made.

While Paddle traces a program under ``to_static`` it records, per program and keyed by ``id(program)``
(Paddle 3.3, ``paddle.jit.dy2static.parameter_recorder``):

* ``_global_parameter_recorder``: the eager tensors the trace met (``params_dict``: a set holding them) and the
  static value it made for each (``tensor2value``: keyed by ``id`` of the tensor);
* ``_global_inplace_map``: for each value replaced by an in-place ``__setitem__``, its replacement.

The trace pops its program's entries when it ends well, but not when it raises (``graph_tracing_guard`` pops
after its ``yield``, outside any ``finally``), and ``__setitem__`` on a static value records an entry for
whatever program it is in (sot's meta inference runs ops on throwaway programs that no trace pops). An entry
left behind outlives its program: it holds Python wrappers of the program's values (raw pointers into the
program, which they do not keep alive) and, for the recorder, the tensors themselves. A later program
allocated at the address of the dead one (CPython reuses freed memory of the same size at once) has the same
key: its trace finds the dead program's entry and, for a tensor met again, gets back a value of the dead
program. That value's defining op is freed memory: wiring it into the new program writes into that memory
(its use list), and reading its name (``get_value_name``, as ``RunnableProgram.program_name_attr`` does for
every parameter when the train program is built) reads the freed op (``pir::OpInfo::id``), a segfault once
the memory holds something else. Reproduced with Paddle alone (a raising ``to_static`` trace of a layer, then
traces of the same layer: an abort "Destroyed a op_result that is still in use" or a wrong broadcast shape
within a few builds), see tests/reliability/stress_failed_builds.py.

`compile.BUILD_LOCK` takes a `snapshot` when its outermost section starts and drops what was added since
(`forget_added_since`) when it ends, however it ends: the entries of every program made inside it. sot's sections (`compile.BUILD_LOCK`: translation with its meta inference, program builds, export)
are done with their programs by then, and Paddle pops what it still needs before.
"""
from __future__ import annotations

from typing import Any


_OWNERS: list[tuple[Any, str]] | None = None  # (registry object, name of its dictionary keyed by program id)


def _owners() -> list[tuple[Any, str]]:
    global _OWNERS
    if _OWNERS is None:
        try:
            from paddle.jit.dy2static.parameter_recorder import _global_inplace_map, _global_parameter_recorder
        except ImportError:  # another Paddle: nothing to clean
            _OWNERS = []
        else:
            _OWNERS = [(_global_parameter_recorder, "params_dict"), (_global_parameter_recorder, "tensor2value"),
                       (_global_inplace_map, "params_dict")]
    return _OWNERS


def _tables() -> list[dict[Any, Any]]:
    """The registries' dictionaries keyed by ``id(program)``, read every time (the in-place map replaces its
    dictionary when a checkpoint is restored); none on a Paddle without them."""
    tables = []
    for owner, name in _owners():
        table = getattr(owner, name, None)
        if isinstance(table, dict):
            tables.append(table)
    return tables


def snapshot() -> list[tuple[dict[Any, Any], frozenset]]:
    """Each registry with the keys it holds now."""
    return [(table, frozenset(table)) for table in _tables()]


def forget_added_since(before: list[tuple[dict[Any, Any], frozenset]]) -> None:
    """Drop the entries added to the registries since ``before`` (`snapshot`)."""
    for table, keys in before:
        for key in [key for key in table if key not in keys]:
            table.pop(key, None)


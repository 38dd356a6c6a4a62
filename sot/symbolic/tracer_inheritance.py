"""Threads that start while sot builds static programs start in dygraph mode all the same (issue 9).

Paddle keeps its dygraph tracer per thread: ``paddle.base.framework.global_var`` is a ``threading.local``
(and the C++ current tracer is thread-local too). But a thread's copy is initialised, on the thread's first
use of Paddle, from a module global that holds the tracer most recently assigned by *any* thread. Building a
static program switches the building thread's tracer to None (``_dygraph_guard(None)``: sot's meta inference,
and Paddle's own ``switch_to_static_graph`` inside ``get_concrete_program`` and the first run of a program),
which sets that module global to None for as long as the build lasts. A thread whose first Paddle call falls
in that window runs in static mode for the rest of its life: ``paddle.in_dynamic_mode()`` is False, and an
eager op such as ``x * 2`` dereferences the missing tracer and kills the process with a segmentation fault.

Eager Paddle has the same hazard next to its own ``to_static`` in another thread; sot must not add it, since
it builds programs on the fly in whichever thread calls a translated function, while the user's other threads
may be starting. So every section in which sot builds static programs (`static_section`: `BUILD_LOCK`,
meta inference) records the tracer the process had when the first of them opened, and a thread that
initialises its Paddle state while one is open starts with that one, whatever a build put in the module global
meanwhile (None, or a scratch tracer of its own). Outside sot's sections, and when the process itself was in
static mode as they opened, Paddle's own rule applies; except that a thread that copied None while a
section was still open, and checks just after it closed, takes the module global as restored by then.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Iterator

from paddle.base import framework

_state_lock = threading.Lock()  # (never held while Paddle code runs: a thread may initialise inside it)
_open_sections = 0  # static sections open, in all threads together
_outer_tracer: Any = None  # the module-global tracer when the first of them opened


def enter_static_section() -> None:
    global _open_sections, _outer_tracer
    with _state_lock:
        if _open_sections == 0:
            _outer_tracer = getattr(framework, "_dygraph_tracer_", None)
        _open_sections += 1


def leave_static_section() -> None:
    global _open_sections, _outer_tracer
    with _state_lock:
        _open_sections -= 1
        if _open_sections == 0:
            _outer_tracer = None


@contextlib.contextmanager
def static_section() -> Iterator[None]:
    """Inside the block this thread may switch Paddle to static mode; threads starting meanwhile do not."""
    enter_static_section()
    try:
        yield
    finally:
        leave_static_section()


def _tracer_for_new_thread(copied: Any) -> Any:
    """The tracer a thread that copied ``copied`` from the module global should start with."""
    with _state_lock:
        if _open_sections and _outer_tracer is not None:
            return _outer_tracer
    if copied is None:
        # If a section was open when the thread copied the module global, that global has been restored since
        # (sections close after the guards inside them): it is the process's mode now.
        return getattr(framework, "_dygraph_tracer_", None)
    return copied


def _wrap_thread_state_init(original: Callable[..., None]) -> Callable[..., None]:
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        copied = self.__dict__.get("_dygraph_tracer_", _MISSING)
        if copied is _MISSING:
            return  # a Paddle that keeps its tracer elsewhere
        tracer = _tracer_for_new_thread(copied)
        if tracer is not copied and tracer is not None:
            self._dygraph_tracer_ = tracer  # (Paddle's __setattr__ also switches this thread's C++ tracer)

    __init__.__wrapped__ = original  # type: ignore[attr-defined]
    __init__.__doc__ = original.__doc__
    __init__._sot_inherits_outer_tracer = True  # type: ignore[attr-defined]
    return __init__


_MISSING = object()


def install() -> None:
    """Wrap the initialiser of Paddle's per-thread state (once; a no-op on a Paddle without it)."""
    thread_state_type = getattr(framework, "GlobalThreadLocal", None)
    if thread_state_type is None or not isinstance(framework.__dict__.get("global_var"), thread_state_type):
        return
    original = thread_state_type.__dict__.get("__init__")
    if original is None or getattr(original, "_sot_inherits_outer_tracer", False):
        return
    # ``threading.local`` looks ``__init__`` up on the type each time a new thread first touches the object.
    thread_state_type.__init__ = _wrap_thread_state_init(original)


install()

__all__ = ["enter_static_section", "leave_static_section", "static_section"]

"""Room on the Python stack for sot's own work, however deep the user's stack already is.

The translator (the frame callback) and Paddle's program builder (the first run of a compiled program) are
deep Python code that runs inside the user's call. Near the user's recursion limit they would fail where
the eager code still works, so while they run the limit is raised by `EXTRA_FRAMES` and restored after:
the user's own code runs against the user's limit, as it does eagerly.
"""
from __future__ import annotations

import sys
import threading

#: Frames added to the recursion limit while sot works (deep enough for the translator and the builder).
EXTRA_FRAMES = 2000

_lock = threading.Lock()
_users = 0  # threads inside `enter_room` and not yet out (the limit is raised once for all of them)
_user_limit = 0  # the limit to restore when the last one leaves


def enter_room() -> None:
    """Raise the recursion limit for sot's work; pair each call with `leave_room` (in a ``finally``)."""
    global _users, _user_limit
    with _lock:
        if _users == 0:
            _user_limit = sys.getrecursionlimit()
            sys.setrecursionlimit(_user_limit + EXTRA_FRAMES)
        _users += 1


def leave_room() -> None:
    global _users
    with _lock:
        _users -= 1
        # (a limit the user changed in the meantime is the user's: it stays)
        if _users == 0 and sys.getrecursionlimit() == _user_limit + EXTRA_FRAMES:
            sys.setrecursionlimit(_user_limit)

"""Python semantics around tensors that a hunt for wrong answers found simulated otherwise than eager Python:
each test runs the idiom eagerly and translated (`_conformance.check`) and compares everything observable."""
from __future__ import annotations

from _conformance import T, check


def test_c_method_of_an_exception_made_in_the_frame_acts_on_the_frames_exception(compile_all):
    """``e.add_note(...)`` runs natively at a graph break. The generated code makes the exception anew for each
    run (`runtime.fresh_exception`), so the method must be read off that exception, not be the method bound to
    the one the simulation saw (baked into the code: the note went to it, shared by every run, and the raised
    exception had none)."""

    def fn(x):
        try:
            e = ValueError("bad")
            e.add_note(f"shape {x.shape}")
            raise e
        except ValueError as err:
            return err.__notes__, x * 2

    check(fn, lambda: (T(3),), calls=3, breaks=None)


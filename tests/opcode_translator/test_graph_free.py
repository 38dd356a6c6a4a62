"""Frames without a graph (graph_free.py): a helper that only formats (or computes with) Python numbers runs
natively under a guard on their types after its second value, instead of being translated again for every
value until the cache limit; numbers that decide something (a jump, ``range(n)``, an op) stay guarded by
value; a tensor argument still misses and is translated."""
from __future__ import annotations

import io
import sys
import warnings

import numpy as np
import paddle

import sot
from sot.eval_frame_ext import cache_entries

from conftest import assert_same

OUT = io.StringIO()


def progress(step, total, loss):
    OUT.write(f"\r{step}/{total} loss={loss:.4f}")


def progress_percent(step, total, loss):
    done = step / total
    OUT.write(f"{step:>4}/{total} {done:.0%} loss={loss:.3e}\n")
    return None


def progress_print(step, total, loss):
    print(f"step {step} of {total}: {loss:.2f}", file=OUT)


def every_ten(step, total, loss):
    if step % 10 == 0:  # (a decision: on a symbolic int, guarded by this expression, not by the value)
        OUT.write(f"{step}/{total}: {round(loss, 2)}\n")


class Bar:
    """A tqdm-like bar: its count is an attribute, changed at every call."""

    def __init__(self, total: int) -> None:
        self.n = 0
        self.total = total

    def update(self, step, total, loss):
        self.n += 1
        OUT.write(f"\r{self.n}/{self.total} {loss:.2f}")


BAR = Bar(50)


def bar_update(step, total, loss):
    BAR.update(step, total, loss)


def _steps(n: int = 50):
    """What a training loop hands its progress helper: a new int and a new float at every step."""
    return [(step + 1, n, 1.0 / (step + 1) + 0.25 * step) for step in range(n)]


def _run(helper, calls) -> tuple[str, int]:
    """(what the calls wrote, translations they made), translated; compared with eager by the callers."""
    OUT.seek(0)
    OUT.truncate()
    translated = sot.symbolic_translate(helper)
    before = sot.stats().translate_count
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (the cache limit's warning would fail the test)
        for args in calls:
            assert translated(*args) is None
    return OUT.getvalue(), sot.stats().translate_count - before


def _eager(helper, calls) -> str:
    OUT.seek(0)
    OUT.truncate()
    for args in calls:
        helper(*args)
    return OUT.getvalue()


def test_a_progress_helper_is_translated_a_bounded_number_of_times_over_new_numbers() -> None:
    for helper in (progress, progress_percent, progress_print, Bar.update):
        sot.reset()
        calls = _steps()
        if helper is Bar.update:
            calls = [(Bar(50), *args) for args in calls]
        expected = _eager(helper, calls)
        if helper is Bar.update:
            calls = [(Bar(50), *args) for args in _steps()]
        text, translations = _run(helper, calls)
        assert text == expected
        assert translations <= 3, (helper.__name__, translations)  # (the frame and the resume after its write)
        assert len(cache_entries(helper.__code__)) <= 2
        hits = sot.stats().cache_hits
        assert hits >= len(calls) - 3


def test_a_helper_logging_every_n_steps_keeps_its_decision_and_is_not_translated_per_value() -> None:
    calls = _steps(100)
    expected = _eager(every_ten, calls)
    text, translations = _run(every_ten, calls)
    assert text == expected and text.count("\n") == 10
    # (the first values, then one symbolic entry for each answer of ``step % 10 == 0``, and the resume)
    assert translations <= 6, translations


def test_a_helper_calling_a_bar_method_is_not_translated_per_value() -> None:
    """(Known bug: ``BAR.update`` breaks inside its inlined call, so the helper's entry breaks at the call and
    runs its translated code, which is never switched to the original one (it inlined a call: native.py),
    and keeps the guards of the inlining, ``BAR.n == 7``: translated per value until the cache limit.)"""
    BAR.n = 0
    calls = _steps()
    text, translations = _run(bar_update, calls)
    assert BAR.n == 50
    BAR.n = 0
    assert text == _eager(bar_update, calls)
    assert translations <= 4, translations


def test_the_widened_entry_checks_the_types_a_tensor_argument_is_translated() -> None:
    calls = _steps(6)
    _run(progress, calls)
    before = sot.stats().translate_count
    OUT.seek(0)
    OUT.truncate()
    translated = sot.symbolic_translate(progress)
    translated(7, 50, 0.5)  # (other numbers of the same types: hits)
    assert sot.stats().translate_count == before
    translated(7.5, 50, 0.25)  # a float step: another type, translated
    assert sot.stats().translate_count > before
    assert OUT.getvalue() == "\r7/50 loss=0.5000\r7.5/50 loss=0.2500"


def describe(a, b):
    OUT.write(f"{a}+{b}\n")
    return a + b


def test_a_frame_without_a_graph_called_later_with_a_tensor_is_translated_and_matches_eager() -> None:
    translated = sot.symbolic_translate(describe)
    for a in range(1, 6):
        assert translated(a, 2) == a + 2
    before = sot.stats().translate_count
    x = paddle.to_tensor(np.arange(6, dtype="float32").reshape(2, 3))
    OUT.seek(0)
    OUT.truncate()
    result = translated(x, 3)
    printed = OUT.getvalue()
    OUT.seek(0)
    OUT.truncate()
    assert_same(result, describe(x, 3))
    assert printed == OUT.getvalue()
    assert sot.stats().translate_count > before


W = paddle.to_tensor(np.linspace(-1, 1, 8, dtype="float32"))


def scaled(x, step):
    OUT.write(f"step {step}\n")
    return (x * step + W).tanh() * step - x / (step + 1)


def repeated(x, n):
    OUT.write(f"n={n}\n")
    for i in range(n):
        x = x * 0.5 + i
    return x


def late(step):
    OUT.write(f"{step}\n")
    if step > 4:
        return (W * step).sum()  # (a graph only from the fifth step)
    return None


def test_frames_whose_numbers_reach_tensor_ops_stay_specialized_and_match_eager() -> None:
    x = paddle.to_tensor(np.linspace(0, 2, 8, dtype="float32"))
    for fn in (scaled, repeated, late):
        sot.reset()
        translated = sot.symbolic_translate(fn)
        for value in range(1, 8):
            args = (value,) if fn is late else (x, value)
            OUT.seek(0)
            OUT.truncate()
            got = translated(*args)
            text = OUT.getvalue()
            OUT.seek(0)
            OUT.truncate()
            expected = fn(*args)
            if expected is None:
                assert got is None
            else:
                assert_same(got, expected)
            assert text == OUT.getvalue()
        # every new value was translated (no entry of the frame runs natively for every value), but where the
        # number is an operand of tensor ops only (a symbolic int input, whose text is made at run time)
        if fn is not repeated:  # (a symbolic int input reaching tensor ops serves every value)
            assert sot.stats().translate_count >= 4, fn.__name__
        else:
            assert sot.stats().translate_count >= 7, fn.__name__


def text_decides(step):
    text = f"{step}"
    OUT.write(text)
    if len(text) > 1:  # (the text decides: the number is guarded by value)
        OUT.write("!")


def test_a_number_whose_text_decides_something_stays_guarded_by_value() -> None:
    calls = [(step,) for step in range(7, 13)]  # (6 values: below the cache limit)
    expected = _eager(text_decides, calls)
    text, translations = _run(text_decides, calls)
    assert text == expected
    # (the text is made at run time before the write's graph break; the piece after it, deciding on the text,
    # is guarded by its value: one entry per value until it runs natively, nothing widened)
    assert translations >= 4


def test_the_widened_entry_keeps_eager_output_and_exceptions() -> None:
    translated = sot.symbolic_translate(progress)
    for step in range(1, 5):
        translated(step, 10, 0.5)
    saved = sys.modules[__name__].OUT
    try:
        globals()["OUT"] = None  # (a global the guard checks: another translation, raising as eagerly)
        try:
            translated(5, 10, 0.5)
        except AttributeError as exc:
            assert "write" in str(exc)
        else:
            raise AssertionError("no AttributeError")
    finally:
        globals()["OUT"] = saved


LOG = io.StringIO()


def train_loop(w, steps):
    best = float("inf")
    for step in range(steps):
        loss = (w * (step + 1)).sum()
        value = loss.item()  # (a break: what follows is a piece of the frame with no tensor op)
        if value < best:  # (a decision on the number: no widening)
            best = value
        LOG.write(f"step {step} loss {value:.3f} best {best:.3f}\n")
    return best


def test_a_piece_of_a_loop_without_a_graph_runs_natively_after_a_few_values():
    """The piece after ``.item()`` decides on a new loss at each step and records no tensor op: after
    `GRAPH_FREE_PIECE_ENTRIES` entries it runs natively for good, instead of a translation per step until
    the cache limit warns."""
    from sot.opcode_translator import graph_free as graph_free_module
    from sot.opcode_translator.graph_free import GRAPH_FREE_PIECE_ENTRIES

    w = paddle.to_tensor([1.0, -2.0, 0.5])
    want = train_loop(w, 20)
    expected_log = LOG.getvalue()
    LOG.seek(0)
    LOG.truncate()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (the cache limit's warning would fail the test)
        got = sot.symbolic_translate(train_loop)(w, 20)
    assert got == want and LOG.getvalue() == expected_log
    from sot.opcode_translator.callback import translated_codes
    from sot.opcode_translator.frame_groups import frame_origin

    pieces = [code for code in translated_codes
              if code is not train_loop.__code__ and frame_origin(code) is train_loop.__code__]
    graph_free = [code for code in pieces if all(graph_free_module._records_no_tensor_op(check)
                                                 for check, _ in cache_entries(code))]
    assert graph_free and all(len(cache_entries(code)) <= GRAPH_FREE_PIECE_ENTRIES for code in graph_free)
    assert sot.stats().translate_count < 2 * sot.config.cache_limit

"""Deferred text (deferred_text.py): a piece of a broken frame that has a graph and formats a number changing at
every step (``print(f"step {step} loss {loss.item():.4f}")``) is translated a bounded number of times, its
guard checking the number's type only; the text printed is eager's; text that decides something keeps its
numbers guarded by value."""
from __future__ import annotations

import io
import warnings
from contextlib import redirect_stdout

import paddle

import sot

from conftest import assert_same


def training_step(x, w, step, lr):
    y = (x * w + 1.0).tanh()
    print(f"step {step:>3} lr {lr:.4f} flag {step > 2!s:>5} loss {y.mean().item():.5f}", "|", "%d/%s" % (step, lr))
    return y * 2


def _run(fn, steps):
    out = io.StringIO()
    results = []
    with redirect_stdout(out):
        for step in steps:
            x = paddle.full([4], 0.1 * step + 0.5)
            results.append(fn(x, paddle.full([4], 0.5), step, 0.5 / (step + 1)))
    return out.getvalue(), results


def test_printed_text_is_eager_and_the_step_is_not_pinned():
    steps = list(range(10))
    eager_text, eager_results = _run(training_step, steps)
    fast = sot.symbolic_translate(training_step)
    # (steps 0 and 1 are specialised, as ints are; then ``step`` is a symbolic int input)
    text, results = _run(fast, steps[:4])
    translated_after_four = sot.stats().translate_count
    more_text, more_results = _run(fast, steps[4:])
    assert text + more_text == eager_text
    assert_same(results + more_results, eager_results)
    # (the step formatted before ``.item()``, in the piece with the graph, no longer misses at every step)
    assert sot.stats().translate_count == translated_after_four


def test_a_number_formatted_with_another_type_later_is_formatted_again():
    def fn(x, value):
        y = x + 1
        print(f"value={value} as text {value!r:>8}")
        return y * 3

    fast = sot.symbolic_translate(fn)
    for value in (3, 4, 3.5, True, None, "s", 5):
        out, eager_out = io.StringIO(), io.StringIO()
        with redirect_stdout(out):
            result = fast(paddle.ones([2]), value)
        with redirect_stdout(eager_out):
            expected = fn(paddle.ones([2]), value)
        assert out.getvalue() == eager_out.getvalue()
        assert_same(result, expected)


def test_text_that_decides_keeps_its_number_guarded_by_value():
    def fn(x, n):
        label = f"{n}"
        if label == "3":
            return x * 2
        return x * 5

    fast = sot.symbolic_translate(fn)
    for n in (3, 4, 3, 7, 3):
        assert_same(fast(paddle.ones([2]), n), fn(paddle.ones([2]), n))


def test_text_returned_and_stored_is_made_for_each_call():
    class Holder:
        text = ""

    holder = Holder()

    def fn(x, step, total):
        y = x * 2
        holder.text = f"{step}/{total}"
        return y, f"[{step:03d}]" + holder.text

    fast = sot.symbolic_translate(fn)
    for step in range(10):
        result = fast(paddle.ones([2]), step, 10)
        assert result[1] == f"[{step:03d}]{step}/10"
        assert holder.text == f"{step}/10"
        if step == 3:
            translated_after_four = sot.stats().translate_count
    assert sot.stats().translate_count == translated_after_four


def test_cache_limit_warning_names_a_stack_value_in_user_terms():
    class Settings:
        v = 0.0

    def scaled(settings, s, x):
        return x * 2 + paddle.full([3], settings.v) + s

    def fn(x, settings):
        y = x * 2
        return scaled(settings, y.sum().item(), x)

    fast = sot.symbolic_translate(fn)
    settings = Settings()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(12):
            settings.v = 0.01 * i
            assert_same(fast(paddle.ones([3]), settings), fn(paddle.ones([3]), settings))
    messages = [str(w.message) for w in caught if "cache limit" in str(w.message) and "resumed at" in str(w.message)]
    assert len(messages) == 1, [str(w.message) for w in caught]
    message = messages[0]
    assert "__sot_stack" not in message
    line = fn.__code__.co_firstlineno + 2
    assert f"value pending on the stack at {__file__}:{line}>.v == " in message
    assert "return scaled(settings, y.sum().item(), x)" in message


def test_text_repeated_is_guarded_as_data_only():
    """Deferred text repeated (``text * 2``) is folded: its numbers are guarded by value, as data only, so a
    frame without a graph still runs natively for other values (graph_free.py), and the text is eager's."""
    out = io.StringIO()

    def banner(step):
        text = f"{step}|"
        out.write(text * 2 + "\n")

    fast = sot.symbolic_translate(banner)
    for step in range(12):
        fast(step)
    assert out.getvalue() == "".join(f"{step}|{step}|\n" for step in range(12))
    assert sot.stats().translate_count < 8


def test_text_of_a_tuple_used_as_a_key_keeps_its_numbers_guarded():
    table = {"1": 10.0, "2": 20.0, "3": 30.0, "4": 40.0}

    def fn(x, n):
        key = "%d" % (n,)
        if key == "3":
            x = x + 100
        return x * table[key]

    fast = sot.symbolic_translate(fn)
    for n in (1, 2, 3, 4, 3, 2, 1, 4):
        assert_same(fast(paddle.ones([2]), n), fn(paddle.ones([2]), n))

"""Numbers guarded as data only (`FunctionGraph.add_guard`'s ``data_only``): formatted, computed with, read
from an attribute, they decide nothing, and `Guard.widened` drops their value checks (keeping their types);
a decision on them, or on anything computed from them, keeps the value checks."""
from __future__ import annotations

import io

import sot
from sot.eval_frame_ext import cache_entries

OUT = io.StringIO()


def _guard(fn, *args):
    sot.symbolic_translate(fn)(*args)
    [(check, _)] = cache_entries(fn.__code__)
    return check.guard


def formats(step, loss):
    OUT.write(f"{step + 1}: {loss / 2:.3f} {round(loss, 1)}")


def decides(step):
    if step > 3:
        OUT.write("late")
    OUT.write(f"{step}")


def decides_on_the_text(step):
    text = f"{step}"
    OUT.write(text * len(text))


def raises_for_some_values(step):
    try:
        OUT.write(f"{100 // step}")
    except ZeroDivisionError:  # (the exception decides which line runs)
        OUT.write("zero")


def indexes(step, names):
    OUT.write(f"{names[step]}")


class Config:
    every = 5


def reads_an_attribute(step, config):
    OUT.write(f"{step}/{config.every}")


def _value_checks(guard, *names: str) -> list[str]:
    """The checks of the values of the arguments (or attributes) ``names``."""
    return [text for text in guard.readable if any(text.startswith(f"{name} ==") for name in names)]


def test_formatted_and_computed_numbers_are_widened_to_their_types() -> None:
    guard = _guard(formats, 3, 0.5)
    assert _value_checks(guard, "step", "loss") == ["step == 3", "loss == 0.5"]
    widened = guard.widened()
    assert widened is not None
    assert _value_checks(widened, "step", "loss") == []
    globals_ = formats.__globals__
    assert widened.check(globals_, None, 7, 2.5)
    assert not widened.check(globals_, None, 7.0, 2.5)  # another type
    assert not guard.check(globals_, None, 7, 2.5)


def test_numbers_that_decide_keep_their_value_checks() -> None:
    for fn, args in ((decides, (5,)), (decides_on_the_text, (12,)), (raises_for_some_values, (0,)),
                     (indexes, (1, ["a", "b"]))):
        sot.reset()
        guard = _guard(fn, *args)
        assert _value_checks(guard, "step"), fn.__name__
        widened = guard.widened()
        assert widened is None or _value_checks(widened, "step"), fn.__name__


def test_an_attribute_read_only_to_be_formatted_is_data() -> None:
    guard = _guard(reads_an_attribute, 3, Config())
    widened = guard.widened()
    assert widened is not None
    assert _value_checks(guard, "config.every") and not _value_checks(widened, "config.every")

"""``obj.__dict__`` of an object reached from the frame (executor/variables/attribute.py): read as the
object's real dict, so it is simulated like any dict, and attribute reads and writes of the same object
stay consistent with it (a write through one is seen through the other, as in eager code)."""
from __future__ import annotations

import numpy as np
import paddle

import sot


class Box:
    def __init__(self, factor: float, **extra) -> None:
        self.factor = factor
        self.__dict__.update(extra)


def _t() -> paddle.Tensor:
    return paddle.to_tensor(np.arange(3, dtype="float32"))


def _run(fn, make, times: int = 2):
    """``fn`` eagerly and translated on fresh arguments from ``make``; returns the translated box states."""
    fast = sot.symbolic_translate(fn)
    for _ in range(times):
        eager_args, fast_args = make(), make()
        expected, actual = fn(*eager_args), fast(*fast_args)
        np.testing.assert_allclose(actual.numpy(), expected.numpy())
        _same_state(fast_args[1], eager_args[1])


def _same_state(a, b) -> None:
    assert a.__dict__.keys() == b.__dict__.keys()
    for key, value in a.__dict__.items():
        other = b.__dict__[key]
        if isinstance(value, paddle.Tensor):
            np.testing.assert_allclose(value.numpy(), other.numpy())
        else:
            assert value == other


def test_reading_an_item_of_the_instance_dict_does_not_break(compile_all):
    def fn(x, box):
        return x * box.__dict__["factor"]

    _run(fn, lambda: (_t(), Box(5.0)))
    stats = sot.stats()
    assert stats.graph_breaks == 0 and stats.fallbacks == 0 and stats.translate_count == 1


def test_a_different_value_or_other_keys_miss(compile_all):
    def fn(x, box):
        return x * box.__dict__["factor"] + len(box.__dict__)

    fast = sot.symbolic_translate(fn)
    for box in (Box(5.0), Box(2.0), Box(2.0, other=1)):
        np.testing.assert_allclose(fast(_t(), box).numpy(), fn(_t(), box).numpy())
    assert sot.stats().translate_count == 3


def test_a_write_through_the_dict_is_seen_by_attribute_reads(compile_all):
    def fn(x, box):
        box.__dict__["factor"] = 3.0
        box.__dict__["cache"] = x * 2
        return x * box.factor + box.cache

    _run(fn, lambda: (_t(), Box(5.0)))
    assert sot.stats().graph_breaks == 0 and sot.stats().fallbacks == 0


def test_an_attribute_written_after_reading_the_dict_is_seen_through_it(compile_all):
    def fn(x, box):
        d = box.__dict__
        box.factor = 7.0
        return x * d["factor"]

    _run(fn, lambda: (_t(), Box(5.0)))
    assert sot.stats().fallbacks == 0


def test_the_dict_read_after_an_attribute_write_holds_it(compile_all):
    def fn(x, box):
        box.factor = 7.0
        return x * box.__dict__["factor"]

    _run(fn, lambda: (_t(), Box(5.0)))
    assert sot.stats().fallbacks == 0


def test_the_dict_of_a_function(compile_all):
    def tagged(t):
        return t + 1

    tagged.scale = 4.0

    def fn(x, f):
        return f(x) * f.__dict__["scale"]

    fast = sot.symbolic_translate(fn)
    np.testing.assert_allclose(fast(_t(), tagged).numpy(), fn(_t(), tagged).numpy())
    tagged.scale = 5.0
    np.testing.assert_allclose(fast(_t(), tagged).numpy(), fn(_t(), tagged).numpy())
    assert sot.stats().graph_breaks == 0 and sot.stats().fallbacks == 0

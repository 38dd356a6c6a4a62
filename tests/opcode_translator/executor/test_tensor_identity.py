"""Identity of tensors during simulation (issue 3): ``x is y`` and ``x in [x, ...]`` answered from the variables
(one per real tensor), with a guard where two tensors from outside the frame were found distinct."""
from __future__ import annotations

import numpy as np
import paddle
import pytest

import sot

from conftest import assert_same


@pytest.fixture(autouse=True)
def _compile_all(compile_all):
    """Every graph compiles."""


def _tensor(*shape: int, seed: int = 0) -> paddle.Tensor:
    rng = np.random.default_rng(seed + 7 * len(shape) + sum(shape))
    return paddle.to_tensor(rng.standard_normal(shape).astype("float32"))


def counts() -> tuple[int, int, int]:
    stats = sot.stats()
    return stats.graph_breaks, stats.fallbacks, stats.translate_count


def check(fn, make, calls: int = 2):
    fast = sot.symbolic_translate(fn)
    for call in range(calls):
        before = sot.stats().translate_count
        assert_same(fast(*make()), fn(*make()))
        if call:
            assert sot.stats().translate_count == before, f"call {call + 1} translated again: {sot.stats()}"
    return fast


# -- identity -------------------------------------------------------------------------------------------------
def test_identity_of_tensors_is_known_and_guarded():
    def fn(x, y):
        z = x
        return x is y, x is not y, z is x, (x + 1) is x, x + 1

    fast = check(fn, lambda: (_tensor(3, 4), _tensor(3, 4, seed=1)))
    assert counts() == (0, 0, 1)
    same = _tensor(3, 4)
    assert_same(fast(same, same), fn(same, same))  # the identity guard fails: translated again
    assert counts() == (0, 0, 2)


def test_tensor_in_a_list_holding_it():
    def fn(x, items):
        return x in [x, 1], x in items, x * 2

    def make():
        x = _tensor(3, 4)
        return x, [x, None]

    check(fn, make)
    assert sot.stats().fallbacks == 0


def test_the_result_of_an_inplace_op_is_its_tensor():
    def fn(x):
        y = x * 2
        z = y.scale_(2.0)
        return z is y, z is x, y

    check(fn, lambda: (_tensor(3),))
    assert counts() == (0, 0, 1)


def test_a_tensor_from_a_list_is_the_argument_itself():
    def fn(x, items):
        return items[0] is x, items[1] is x, x + 1

    def make():
        x = _tensor(3)
        return x, [x, _tensor(3, seed=1)]

    fast = check(fn, make)
    assert counts() == (0, 0, 1)
    x = _tensor(3)
    assert_same(fast(x, [_tensor(3, seed=2), x]), fn(x, [_tensor(3, seed=2), x]))  # other aliasing: retranslated
    assert counts() == (0, 0, 2)


def test_identity_of_a_layer_output_runs_eagerly():
    """``nn.Identity`` returns its input itself; a program's output is another tensor (even across a break)."""

    layer = paddle.nn.Identity()

    def fn(x):
        y = layer(x)
        return y is x, y + 1

    check(fn, lambda: (_tensor(3),))
    assert sot.stats().fallbacks == 1


def test_tensor_equal_to_an_element_breaks_the_graph():
    """``x in [y]`` compares with ``==`` after the identity check: a tensor's truth, as in eager."""

    def fn(x, y):
        return x in [y], x + 1

    check(fn, lambda: (_tensor(1), _tensor(1)))
    assert sot.stats().fallbacks == 0 and sot.stats().graph_breaks == 1


def test_an_op_that_may_return_its_input_itself_runs_eagerly():
    """Eagerly ``x.reshape(x.shape)`` and ``x.astype(x.dtype)`` are ``x`` itself; ``x.reshape([6])`` is not."""

    def same(x):
        y = x.reshape([2, 3])
        return y is x, x + 1

    def other(x):
        y = x.reshape([6])
        z = x.astype("float64")
        return y is x, z is x, x + 1

    check(same, lambda: (_tensor(2, 3),))
    assert sot.stats().fallbacks == 1
    check(other, lambda: (_tensor(2, 3),))
    assert sot.stats().fallbacks == 1 and sot.stats().graph_breaks == 0

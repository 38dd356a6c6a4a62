"""``warnings.warn`` simulated (sot/opcode_translator/executor/variables/warnings_rules.py): issued after the
graph with the place ``warn`` would find, no graph break; a warning the filters make an error runs natively."""
from __future__ import annotations

import copy
import warnings

import numpy as np
import paddle
import pytest

import sot

from conftest import assert_same, counts, line_of


def _tensor(seed: int, *shape: int) -> paddle.Tensor:
    return paddle.to_tensor(np.random.default_rng(seed).standard_normal(shape or (3,)).astype("float32"))


def warns_between_ops(x, log):
    y = x * 2
    log.append("before")
    warnings.warn("between ops")  # MARK-warn
    log.append("after")
    return y + 1


def _helper_warns_for_its_caller(x):
    warnings.warn("the caller's fault", DeprecationWarning, stacklevel=2)
    return x - 1


def warns_through_a_helper(x, log):
    log.append("call")
    return _helper_warns_for_its_caller(x * 3) * 2  # MARK-helper


def _recorded(fn, *args, action: str = "always"):
    """``fn(*args)``'s result and the warnings it issued, as (message, category, file, line)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter(action)
        result = fn(*args)
    return result, [(str(w.message), w.category, w.filename, w.lineno) for w in caught]


@pytest.mark.parametrize("fn, mark", [(warns_between_ops, "MARK-warn"), (warns_through_a_helper, "MARK-helper")])
def test_a_warning_is_issued_at_the_place_eager_gives_it(compile_all, fn, mark):
    x = _tensor(0)
    expected, eager_warnings = _recorded(fn, x, [])
    assert eager_warnings and eager_warnings[0][3] == line_of(fn, mark)
    fast = sot.symbolic_translate(fn)
    for _ in range(2):
        log: list = []
        out, caught = _recorded(fast, x, log)
        assert_same(out, expected)
        assert caught == eager_warnings
        assert log == (["before", "after"] if fn is warns_between_ops else ["call"])
    # one graph, no break; the second call hits the entry (its guard holds the filters it read)
    assert counts() == {"translate_count": 1, "graph_breaks": 0, "fallbacks": 0, "compiled_graphs": 1}, counts()


def _twice(fn, x):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        fn(x, [])
        fn(x, [])
    return [(str(w.message), w.category, w.filename, w.lineno) for w in caught]


def test_the_default_action_shows_a_warning_once_per_place_as_eager(compile_all):
    # "default": the registry of the module that warns (here this test module's) keeps it from showing again
    x = _tensor(0)
    expected = _twice(warns_between_ops, x)
    assert len(expected) == 1
    fast = sot.symbolic_translate(warns_between_ops)
    assert _twice(fast, x) == expected
    assert counts()["translate_count"] == 1 and counts()["graph_breaks"] == 0, counts()


def test_a_warning_the_filters_make_an_error_raises_where_eager_does(compile_all):
    x = _tensor(0)
    eager_log: list = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UserWarning, match="between ops"):
            warns_between_ops(x, eager_log)
    fast = sot.symbolic_translate(warns_between_ops)
    # translated while the warning is ignored, then called when it is an error: the guard on the filters
    # misses, and the new translation runs the warn natively (a break)
    _recorded(fast, x, [], action="ignore")
    assert counts()["graph_breaks"] == 0
    for _ in range(2):
        log: list = []
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(UserWarning, match="between ops"):
                fast(x, log)
        assert log == eager_log == ["before"]
    assert counts()["translate_count"] == 2 and counts()["graph_breaks"] == 1, counts()


def warns_with_a_computed_message(x, n):
    warnings.warn(f"n is {n + 1}")
    return x + n


def warns_with_an_unknown_argument(x):
    warnings.warn("w", UserWarning, 1, None, bogus=True)
    return x + 1


def test_warn_with_other_arguments(compile_all):
    x = _tensor(0)
    # a message computed from known values is a constant of the translation
    expected, eager_warnings = _recorded(warns_with_a_computed_message, x, 2)
    out, caught = _recorded(sot.symbolic_translate(warns_with_a_computed_message), x, 2)
    assert_same(out, expected)
    assert caught == eager_warnings and counts()["graph_breaks"] == 0
    # what ``warn`` rejects runs natively: eager's TypeError
    with pytest.raises(TypeError):
        warns_with_an_unknown_argument(x)
    with pytest.raises(TypeError):
        sot.symbolic_translate(warns_with_an_unknown_argument)(x)


# -- a training batch norm: Paddle's forward warns at every call -------------------------------------------------
class Norms(paddle.nn.Layer):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.norms = paddle.nn.LayerList([paddle.nn.BatchNorm2D(4) for _ in range(n)])

    def forward(self, x):
        for norm in self.norms:
            x = norm(x) * 2
            print("norm")
        return x


def _three_calls(model, x):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        outputs = [model(x) for _ in range(3)]
    return outputs, [(str(w.message), w.filename, w.lineno) for w in caught]


def test_training_batch_norms_in_a_loop_translate_a_bounded_number_of_times(compile_all, capsys):
    found = []
    for n in (3, 6):
        sot.reset()
        paddle.seed(0)
        net = Norms(n)
        twin = copy.deepcopy(net)
        x = _tensor(1, 2, 4, 3, 3)
        fast = sot.symbolic_translate(twin)
        # (the default action: each place warns once. A norm called as one ``layer`` statement, as the body
        # function's first translation calls the first norm, runs Paddle's forward only when its program is
        # built: it does not warn, a gap the simulated norms cover here)
        expected, eager_places = _three_calls(net, x)
        outputs, places = _three_calls(fast, x)
        for out, want in zip(outputs, expected):
            assert_same(out, want)
        assert places == eager_places and len(places) == 1
        for mine, theirs in zip(twin.norms, net.norms):  # the running statistics, updated as eagerly
            np.testing.assert_allclose(mine._mean.numpy(), theirs._mean.numpy(), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(mine._variance.numpy(), theirs._variance.numpy(), rtol=1e-5, atol=1e-6)
        capsys.readouterr()
        found.append(counts())
    # the same translations for 3 and 6 norms (no longer one per norm), no fallback
    assert found[0] == found[1] and found[0]["fallbacks"] == 0 and found[0]["translate_count"] <= 5, found

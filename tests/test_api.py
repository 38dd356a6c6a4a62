"""The public surface of `sot` (API.md): symbolic_translate, explain, config, skip_function, errors."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import paddle
import paddle.nn.functional as F
import pytest

import sot

from conftest import assert_same, check_parity, check_same_exception, line_of


def _t(*shape: int, seed: int = 0, stop_gradient: bool = True) -> paddle.Tensor:
    rng = np.random.default_rng(seed)
    value = paddle.to_tensor(rng.standard_normal(shape).astype("float32"))
    value.stop_gradient = stop_gradient
    return value


def model(x, w):
    h = paddle.matmul(x, w)
    return F.relu(h) + 1


# -- symbolic_translate: what it accepts ---------------------------------------------------------------------
def test_translate_plain_function(compile_all):
    check_parity(model, _t(2, 3), _t(3, 4, seed=1))
    assert sot.stats().compiled_graphs == 1
    assert sot.stats().translate_count == 1


def test_translated_function_keeps_name_and_doc():
    def documented(x):
        """The doc."""
        return x + 1

    fast = sot.symbolic_translate(documented)
    assert fast.__name__ == "documented"
    assert fast.__doc__ == "The doc."
    assert_same(fast(_t(2)), documented(_t(2)))


class Scaler:
    def __init__(self) -> None:
        self.scale = 3.0
        self.bias = paddle.full([4], 0.5)

    def apply(self, x):
        return F.relu(x * self.scale) + self.bias


def test_translate_bound_method(compile_all):
    obj = Scaler()
    x = _t(3, 4)
    expected = obj.apply(x)
    fast = sot.symbolic_translate(obj.apply)
    assert_same(fast(x), expected)
    assert_same(fast(x), expected)
    assert sot.stats().compiled_graphs == 1
    assert sot.stats().translate_count == 1
    obj.scale = -1.0  # a Python attribute read by the method: must be guarded
    assert_same(fast(x), obj.apply(x))
    obj.bias = paddle.full([4], 2.0)  # a tensor attribute: read fresh
    assert_same(fast(x), obj.apply(x))


class TinyNet(paddle.nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.fc = paddle.nn.Linear(4, 3)
        self.scale = 0.5

    def forward(self, x):
        return F.softmax(self.fc(x) * self.scale, axis=-1)


def test_translate_layer_instance():
    paddle.seed(1)
    net = TinyNet()
    x = _t(2, 4)
    expected = net(x)
    fast = sot.symbolic_translate(net)
    assert_same(fast(x), expected)
    assert_same(fast(x), expected)
    # parameters stay live and are the layer's own
    assert [p.name for p in fast.parameters()] == [p.name for p in net.parameters()]
    assert sot.stats().translate_count >= 1


def test_decorator_forms(compile_all):
    @sot.symbolic_translate
    def plain(x):
        return x * 2 + 1

    @sot.symbolic_translate(training=False)
    def configured(x):
        return F.relu(x) * 3

    x = _t(3, 4)
    assert_same(plain(x), x * 2 + 1)
    assert_same(configured(x), F.relu(x) * 3)
    assert sot.stats().compiled_graphs == 2


@pytest.mark.parametrize("bad", [3, "abc", [1, 2], object()])
def test_non_callable_rejected(bad):
    with pytest.raises(TypeError) as info:
        sot.symbolic_translate(bad)
    message = str(info.value)
    assert repr(bad) in message, message


def test_generator_function_rejected():
    def gen(x):
        yield x + 1

    with pytest.raises(TypeError) as info:
        sot.symbolic_translate(gen)
    assert "gen" in str(info.value)


def test_unknown_keyword_rejected():
    with pytest.raises(TypeError):
        sot.symbolic_translate(model, full_graph=True)


# -- explain ---------------------------------------------------------------------------------------------------
def test_explain_shows_sir_and_guards(compile_all):
    report = sot.explain(model, _t(2, 3), _t(3, 4, seed=1))
    text = str(report)
    assert "SIR" in text
    assert "matmul" in text and "relu" in text, text
    assert "x.shape" in text and "w.shape" in text, text
    assert "model" in text


def test_explain_shows_fallback_reason_and_location(compile_all):
    def printing(x):
        y = x + 1
        print("hello from printing", y.shape)
        return y * 2

    line = line_of(printing, "print(")
    report = sot.explain(printing, _t(2))
    text = str(report)
    assert "fallback" in text.lower() or "graph break" in text.lower(), text
    assert f"{__file__}:{line}" in text, text
    assert "print" in text


def test_explain_inplace_fallback_reason(compile_all):
    def inplace(x):
        row = x[0]  # a view of x: changing it changes x (not simulated: the frame runs eagerly)
        row.add_(row)
        return x

    line = line_of(inplace, "add_")
    text = str(sot.explain(inplace, _t(2)))
    assert "add_" in text and f"{os.path.basename(__file__)}:{line}" in text, text


def test_explain_does_not_change_results(compile_all):
    x, w = _t(2, 3), _t(3, 4, seed=1)
    report = sot.explain(model, x, w)
    assert "x.shape" in str(report)
    assert_same(sot.symbolic_translate(model)(x, w), model(x, w))


# -- config ----------------------------------------------------------------------------------------------------
def test_config_defaults():
    assert sot.config.strict_mode is False
    assert sot.config.log_level == 0
    assert sot.config.min_graph_size == 10
    assert sot.config.cache_limit == 8


def test_config_read_from_environment(tmp_path):
    script = tmp_path / "cfg.py"
    script.write_text(textwrap.dedent("""
        import sot
        c = sot.config
        print(c.min_graph_size, c.strict_mode, c.log_level, c.cache_limit, c.dynamic_shape)
    """))
    env = dict(os.environ, SOT_MIN_GRAPH_SIZE="3", SOT_STRICT_MODE="1", SOT_LOG_LEVEL="2",
               SOT_CACHE_LIMIT="5", SOT_DYNAMIC_SHAPE="0", GLOG_minloglevel="2")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                          cwd=str(tmp_path), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["3", "True", "2", "5", "False"], proc.stdout


def test_config_rejects_unknown_field():
    with pytest.raises(AttributeError):
        sot.config.strict = True
    with pytest.raises((AttributeError, TypeError)):
        with sot.config.patch(no_such_field=1):
            pass
    assert not hasattr(sot.config, "strict") and not hasattr(sot.config, "no_such_field")


@pytest.mark.parametrize("field, value", [("strict_mode", "yes"), ("strict_mode", 1), ("min_graph_size", "3"),
                                          ("min_graph_size", 2.5), ("log_level", True), ("cache_limit", None)])
def test_config_rejects_wrong_types(field, value):
    before = getattr(sot.config, field)
    with pytest.raises(TypeError):
        setattr(sot.config, field, value)
    assert getattr(sot.config, field) == before


def test_config_patch_restores():
    assert sot.config.min_graph_size == 10
    with sot.config.patch(min_graph_size=0, strict_mode=True):
        assert sot.config.min_graph_size == 0 and sot.config.strict_mode is True
    assert sot.config.min_graph_size == 10 and sot.config.strict_mode is False
    with pytest.raises(RuntimeError):
        with sot.config.patch(log_level=3):
            raise RuntimeError("boom")
    assert sot.config.log_level == 0
    # a bad value in the middle of a patch leaves nothing half-applied
    with pytest.raises(TypeError):
        with sot.config.patch(min_graph_size=1, strict_mode="no"):
            pass
    assert sot.config.min_graph_size == 10 and sot.config.strict_mode is False


def test_config_attribute_set_takes_effect(compile_all):
    sot.config.min_graph_size = 100
    check_parity(model, _t(2, 3), _t(3, 4, seed=1))
    assert sot.stats().compiled_graphs == 0


# -- skip_function ----------------------------------------------------------------------------------------------
def test_skip_function_never_translated(compile_all):
    @sot.skip_function
    def skipped(x):
        return paddle.matmul(x, x.T) + 1

    x = _t(3, 4)
    assert_same(sot.symbolic_translate(skipped)(x), skipped(x))
    assert_same(sot.symbolic_translate(skipped)(x), skipped(x))
    stats = sot.stats()
    assert stats.translate_count == 0 and stats.compiled_graphs == 0, stats


def test_skip_function_on_method(compile_all):
    obj = Scaler()
    sot.skip_function(obj.apply)
    x = _t(3, 4)
    assert_same(sot.symbolic_translate(obj.apply)(x), obj.apply(x))
    assert sot.stats().translate_count == 0


def test_skip_function_callees_still_translated(compile_all):
    def callee(x):
        return F.relu(x) * 2 - 1

    def skipped_caller(x):
        return callee(x + 1)

    sot.skip_function(skipped_caller)
    x = _t(3, 4)
    assert_same(sot.symbolic_translate(skipped_caller)(x), skipped_caller(x))
    stats = sot.stats()
    assert stats.translate_count == 1 and stats.compiled_graphs == 1, stats


def test_skip_function_rejects_non_function():
    with pytest.raises(TypeError):
        sot.skip_function(3)


# -- exceptions raised by user code keep type, message and traceback ---------------------------------------------
def test_matmul_shape_mismatch_keeps_error(compile_all):
    def bad_matmul(x, y):
        z = x * 2
        out = paddle.matmul(z, y)
        return out + 1

    check_same_exception(bad_matmul, lambda: (_t(2, 3), _t(4, 5)), "paddle.matmul")


def test_zero_division_from_scalars_keeps_error(compile_all):
    def divide(x, n):
        y = x + 1
        k = 10 // n
        return y * k

    exc = check_same_exception(divide, lambda: (_t(3), 0), "10 // n")
    assert type(exc) is ZeroDivisionError
    # a valid call afterwards is unaffected
    assert_same(sot.symbolic_translate(divide)(_t(3), 2), divide(_t(3), 2))


def test_data_dependent_kernel_error_keeps_error(compile_all):
    def gather_rows(x, index):
        y = x * 2
        rows = paddle.gather(y, index)
        return rows + 1

    exc = check_same_exception(gather_rows, lambda: (_t(3, 2), paddle.to_tensor([0, 7])), "paddle.gather")
    assert type(exc) is IndexError


class CustomError(Exception):
    pass


def _raising_helper(n):
    if n < 0:
        raise CustomError(f"negative value {n}")
    return n


def test_raise_in_user_helper_keeps_error(compile_all):
    def calls_helper(x, n):
        y = x * 2
        m = _raising_helper(n)
        return y + m

    exc = check_same_exception(calls_helper, lambda: (_t(3), -4), "_raising_helper(n)",
                               also_through=[(_raising_helper, "raise CustomError")])
    assert type(exc) is CustomError and str(exc) == "negative value -4"


def _matmul_helper(a, b):
    c = a + 1
    return paddle.matmul(c, b)


def test_paddle_error_in_user_helper_keeps_error(compile_all):
    def outer(x, y):
        z = x * 2
        return _matmul_helper(z, y) - 1

    check_same_exception(outer, lambda: (_t(2, 3), _t(4, 5)), "_matmul_helper(z, y)",
                         also_through=[(_matmul_helper, "paddle.matmul")])


def test_raise_in_translated_function_keeps_error(compile_all):
    def checks(x, n):
        y = x + 1
        if n > 3:
            raise ValueError(f"n={n} is too large")
        return y

    exc = check_same_exception(checks, lambda: (_t(3), 5), "raise ValueError")
    assert type(exc) is ValueError and str(exc) == "n=5 is too large"
    assert_same(sot.symbolic_translate(checks)(_t(3), 1), checks(_t(3), 1))


def test_strict_mode_error_is_sot_error(compile_all):
    def printing(x):
        print(x.shape)
        return x

    with sot.config.patch(strict_mode=True):
        with pytest.raises(sot.UnsupportedError) as info:
            sot.symbolic_translate(printing)(_t(2))
    assert isinstance(info.value, sot.SotError)


def test_strict_mode_then_normal_mode_recovers(compile_all):
    def printing(x):
        print("shape", x.shape)
        return x * 2

    fast = sot.symbolic_translate(printing)
    with sot.config.patch(strict_mode=True):
        with pytest.raises(sot.UnsupportedError):
            fast(_t(2))
    assert_same(fast(_t(2)), _t(2) * 2)


@pytest.mark.parametrize("case", ["zero_division", "shape_mismatch"])
def test_user_errors_keep_their_type_in_strict_mode(case, compile_all):
    # strict mode turns *unsupported constructs* into errors; the user's own exceptions stay theirs
    def divide(x, n):
        return x * (10 // n)

    def bad_matmul(x, y):
        return paddle.matmul(x + 1, y)

    fn, args = {"zero_division": (divide, (_t(3), 0)),
                "shape_mismatch": (bad_matmul, (_t(2, 3), _t(4, 5)))}[case]
    with pytest.raises(Exception) as eager:
        fn(*args)
    with sot.config.patch(strict_mode=True):
        with pytest.raises(Exception) as translated:
            sot.symbolic_translate(fn)(*args)
    assert type(translated.value) is type(eager.value), repr(translated.value)
    assert str(translated.value) == str(eager.value)

"""Bad input to ``symbolic_translate``: every kind of callable (and non-callable) either works, with the eager
result, or raises a clear TypeError at translation time. The test names say which."""
from __future__ import annotations

import functools
import math
import operator
from typing import Any

import paddle
import pytest

import sot
from conftest import assert_same


def check_works(fn: Any, *args: Any, translates: bool) -> None:
    """The translated callable returns the eager result (twice); ``translates``: its Python frames were
    actually translated (a C function has none)."""
    expected = fn(*args)
    translated = sot.symbolic_translate(fn)
    with sot.config.patch(min_graph_size=0):
        assert_same(translated(*args), expected)
        assert_same(translated(*args), expected)
    assert (sot.stats().translate_count > 0) == translates, sot.stats()


# -- non-callables: TypeError ----------------------------------------------------------------------------
@pytest.mark.parametrize("value", [42, "forward", 3.5, [1, 2], {"a": 1}, paddle.ones([2])],
                         ids=["int", "str", "float", "list", "dict", "tensor"])
def test_non_callable_raises_type_error(value: Any) -> None:
    with pytest.raises(TypeError, match="not callable"):
        sot.symbolic_translate(value)


def test_none_returns_the_decorator_and_the_decorator_form_works() -> None:
    decorator = sot.symbolic_translate(None, training=True)

    def double(x):
        return x * 2

    assert_same(decorator(double)(paddle.ones([2])), double(paddle.ones([2])))


def test_unknown_keyword_raises_type_error() -> None:
    with pytest.raises(TypeError, match="unexpected keyword"):
        sot.symbolic_translate(lambda x: x, full_graph=True)


# -- builtins and C functions: work (nothing to translate) -------------------------------------------------
def test_builtin_len_works() -> None:
    check_works(len, [1, 2, 3], translates=False)


def test_c_function_math_sqrt_works() -> None:
    check_works(math.sqrt, 16.0, translates=False)


def test_operator_add_works() -> None:
    check_works(operator.add, paddle.ones([2]), paddle.ones([2]), translates=False)


def test_builtin_method_works() -> None:
    check_works("a-b".split, "-", translates=False)


def test_method_descriptor_works() -> None:
    check_works(str.upper, "abc", translates=False)


def test_paddle_api_function_works() -> None:
    check_works(paddle.tanh, paddle.ones([3]), translates=False)


def negated(v):
    return -v


def test_user_functions_a_builtin_calls_back_are_translated() -> None:
    """``sorted`` has no Python frame, its ``key`` function has."""
    check_works(functools.partial(sorted, key=negated), [1, 3, 2], translates=True)


# -- classes: work (the constructor runs, user __init__ translated) -----------------------------------------
class Point:
    def __init__(self, x, k):
        self.x = x * k
        self.k = k


def test_user_class_works_and_builds_the_same_instance() -> None:
    translated = sot.symbolic_translate(Point)
    got, expected = translated(paddle.ones([2]), 3), Point(paddle.ones([2]), 3)
    assert type(got) is Point and got.k == expected.k
    assert_same(got.x, expected.x)
    assert sot.stats().translate_count >= 1


def test_paddle_layer_class_works_and_builds_a_layer() -> None:
    layer = sot.symbolic_translate(paddle.nn.Linear)(2, 3)
    assert isinstance(layer, paddle.nn.Linear) and list(layer.weight.shape) == [2, 3]


# -- generators and coroutines: TypeError at translation time ----------------------------------------------
def generator_function(n):
    yield n


async def coroutine_function(n):
    return n


async def async_generator_function(n):
    yield n


@pytest.mark.parametrize("fn", [generator_function, coroutine_function, async_generator_function],
                         ids=["generator", "coroutine", "async_generator"])
def test_generator_and_async_functions_raise_type_error(fn: Any) -> None:
    with pytest.raises(TypeError, match=fn.__name__):
        sot.symbolic_translate(fn)


class GeneratorMethods:
    def method(self, n):
        yield n

    async def __call__(self, n):
        return n


@pytest.mark.parametrize("make", [lambda: functools.partial(generator_function, 1),
                                  lambda: GeneratorMethods().method, lambda: staticmethod(generator_function),
                                  GeneratorMethods],
                         ids=["partial", "bound_method", "staticmethod", "object_with_async_call"])
def test_generator_and_async_functions_behind_a_wrapper_raise_type_error(make: Any) -> None:
    """The kind of function a call runs decides, whatever wraps it."""
    with pytest.raises(TypeError, match="generator|coroutine"):
        sot.symbolic_translate(make())


def test_function_returning_a_generator_works() -> None:
    def make(n):
        return (i * 2 for i in range(n))

    assert list(sot.symbolic_translate(make)(3)) == [0, 2, 4]


# -- other callables: work ---------------------------------------------------------------------------------
def test_lambda_works() -> None:
    check_works(lambda x, n: x * n + 1, paddle.ones([3]), 2, translates=True)


def add(x, y, scale=1):
    return (x + y) * scale


def test_functools_partial_works() -> None:
    check_works(functools.partial(add, scale=3), paddle.ones([3]), paddle.ones([3]), translates=True)


class Scaler:
    def __init__(self, k):
        self.k = k

    def __call__(self, x):
        return x * self.k - 1

    def method(self, x):
        return x + self.k


def test_object_with_call_works() -> None:
    check_works(Scaler(4), paddle.ones([3]), translates=True)


def test_bound_method_works() -> None:
    check_works(Scaler(4).method, paddle.ones([3]), translates=True)


def test_staticmethod_object_works() -> None:
    check_works(staticmethod(add), paddle.ones([3]), paddle.ones([3]), translates=True)


def test_classmethod_object_gives_a_classmethod_of_the_translation() -> None:
    """A raw ``classmethod`` object (``@symbolic_translate`` above ``@classmethod`` in a class body) gives a
    ``classmethod`` of the translated function: bound to the class, it translates."""
    def scaled(cls, x):
        return x * cls.factor

    translated = sot.symbolic_translate(classmethod(scaled))
    assert isinstance(translated, classmethod) and translated.__func__.__sot_translated__ is scaled
    Scaler = type("Scaler", (), {"factor": 3.0, "scaled": translated})
    x = paddle.ones([3])
    with sot.config.patch(min_graph_size=0):
        assert_same(Scaler.scaled(x), x * 3.0)
        assert_same(Scaler().scaled(x), x * 3.0)
    assert sot.stats().translate_count == 1


def test_already_translated_function_works() -> None:
    once = sot.symbolic_translate(add)
    twice = sot.symbolic_translate(once)
    x = paddle.ones([3])
    with sot.config.patch(min_graph_size=0):
        assert_same(twice(x, x), add(x, x))
        assert_same(twice(x, x), add(x, x))


def test_already_translated_layer_works() -> None:
    layer = paddle.nn.Linear(3, 2)
    once = sot.symbolic_translate(layer)
    twice = sot.symbolic_translate(once)
    x = paddle.ones([1, 3])
    assert_same(twice(x), layer(x))


def test_translated_function_keeps_name_and_doc() -> None:
    def documented(x):
        """Doc."""
        return x

    translated = sot.symbolic_translate(documented)
    assert translated.__name__ == "documented" and translated.__doc__ == "Doc."


def test_wrong_arguments_raise_the_eager_type_error() -> None:
    translated = sot.symbolic_translate(add)
    with pytest.raises(TypeError) as translated_error:
        translated(1)
    with pytest.raises(TypeError) as eager_error:
        add(1)
    assert str(translated_error.value) == str(eager_error.value)

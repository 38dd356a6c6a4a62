"""Dicts (and sets) keyed by enum members, classes, functions or other objects compared by identity are
simulated: ``{Activation.GELU: F.gelu}[config.act]``, ``{nn.Linear: ...}[type(layer)]`` and ``{F.relu: 1.0}[act]``
are common in user code. Such a key hashes and compares as its identity (or as its plain int/str value for an
IntEnum/StrEnum member), so the simulated dict holds the real object as the key; the frame used to fall back
("dict key of type Activation is not supported yet")."""
from __future__ import annotations

import enum

import paddle
import paddle.nn as nn
import paddle.nn.functional as F

import sot
from conftest import assert_counts, assert_same


class Act(enum.Enum):
    RELU = "relu"
    TANH = "tanh"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


TABLE = {Act.RELU: F.relu, Act.TANH: paddle.tanh}
SCALES = {nn.Linear: 2.0, nn.Conv2D: 3.0}
LEVELS = {Level.LOW: 0.5, Level.HIGH: 4.0}


class Config:
    def __init__(self, act: Act) -> None:
        self.act = act


def _by_member(x: paddle.Tensor, config: Config) -> paddle.Tensor:
    return TABLE[config.act](x) + TABLE[Act(config.act.value)](x)


def test_an_enum_keyed_table_is_read_in_the_graph_and_its_key_is_guarded() -> None:
    translated = sot.symbolic_translate(_by_member)
    x = paddle.to_tensor([-1.0, 0.5, 2.0])
    with sot.config.patch(min_graph_size=0):
        for act in (Act.RELU, Act.RELU, Act.TANH, Act.RELU):
            assert_same(translated(x, Config(act)), _by_member(x, Config(act)))
    assert_counts(translate_count=2, graph_breaks=0, fallbacks=0, compiled_graphs=2)


def _by_class(x: paddle.Tensor, layer: nn.Layer, level: int) -> paddle.Tensor:
    return x * SCALES[type(layer)] + LEVELS[level]


def test_a_class_keyed_table_and_an_int_enum_keyed_one_looked_up_by_its_int() -> None:
    translated = sot.symbolic_translate(_by_class)
    x = paddle.to_tensor([1.0, 2.0])
    with sot.config.patch(min_graph_size=0):
        for layer, level in [(nn.Linear(2, 2), 1), (nn.Conv2D(1, 1, 1), 2), (nn.Linear(2, 2), Level.HIGH)]:
            assert_same(translated(x, layer, level), _by_class(x, layer, level))
    assert sot.stats().fallbacks == 0


def _built(x: paddle.Tensor) -> tuple:
    outputs = {Act.RELU: F.relu(x), nn.Linear: x * 2}
    outputs[Act.TANH] = paddle.tanh(x)
    names = [key.value for key in outputs if isinstance(key, Act)]
    members = {Act.TANH, Act.RELU}
    found = Act.TANH in members and nn.Linear in outputs and Act.RELU in TABLE
    return outputs, names, found, [m.value for m in sorted(members, key=lambda m: m.value)]


def test_a_dict_and_a_set_built_with_object_keys_leave_the_frame_as_eagers() -> None:
    x = paddle.to_tensor([-1.0, 2.0])
    with sot.config.patch(min_graph_size=0):
        outputs, names, found, values = sot.symbolic_translate(_built)(x)
    e_outputs, e_names, e_found, e_values = _built(x)
    assert list(outputs) == list(e_outputs) and all(a is b for a, b in zip(outputs, e_outputs))
    assert_same(list(outputs.values()), list(e_outputs.values()))
    assert (names, found, values) == (e_names, e_found, e_values)
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)


def _helper(x: paddle.Tensor) -> paddle.Tensor:
    return x - 1


GAINS = {F.relu: 1.0, paddle.tanh: 2.0, _helper: 3.0}


def _by_function(x: paddle.Tensor, act) -> paddle.Tensor:
    return act(x) * GAINS[act] + GAINS[_helper]


def test_a_function_keyed_table_is_read_in_the_graph_and_a_changed_item_misses() -> None:
    translated = sot.symbolic_translate(_by_function)
    x = paddle.to_tensor([-1.0, 0.5, 2.0])
    with sot.config.patch(min_graph_size=0):
        for act in (F.relu, paddle.tanh, F.relu):
            assert_same(translated(x, act), _by_function(x, act))
        assert_counts(translate_count=2, graph_breaks=0, fallbacks=0, compiled_graphs=2)
        GAINS[F.relu] = 5.0
        try:
            assert_same(translated(x, F.relu), _by_function(x, F.relu))
        finally:
            GAINS[F.relu] = 1.0
    assert sot.stats().translate_count == 3


class _Tag:
    """A plain object: hashed and compared by identity."""


def test_plain_objects_and_translated_functions_as_keys() -> None:
    first, second = _Tag(), _Tag()
    weights = {first: 1.0, second: 2.0}
    double = sot.symbolic_translate(lambda t: t * 2)

    def step(x, tag):
        made = {tag: 5.0, double: 0.5}
        return x * weights[tag] + made[tag] * made[double], tag in made

    translated = sot.symbolic_translate(step)
    x = paddle.to_tensor([1.0, 2.0])
    with sot.config.patch(min_graph_size=0):
        for tag in (first, second, first):
            assert_same(translated(x, tag), step(x, tag))
    assert sot.stats().fallbacks == 0 and sot.stats().translate_count == 2

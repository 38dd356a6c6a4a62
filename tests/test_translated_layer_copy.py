"""A translated layer (`sot.translate.TranslatedLayer`) can be copied: the copy translates its own copy of
the layer (deep) or the same layer (shallow), with the same training flag, and gives eager's results."""
from __future__ import annotations

import copy
import pickle

import paddle

import sot
from conftest import assert_same


def _layer_and_input() -> tuple[paddle.nn.Layer, paddle.Tensor]:
    paddle.seed(7)
    return paddle.nn.Sequential(paddle.nn.Linear(4, 3), paddle.nn.Tanh()), paddle.ones([2, 4])


def test_a_deep_copy_translates_a_copy_of_the_layer() -> None:
    layer, x = _layer_and_input()
    fast = sot.symbolic_translate(layer, training=False)
    clone = copy.deepcopy(fast)
    assert type(clone) is type(fast) and clone._layer is not layer and clone._sot_training is False
    assert_same(clone(x), layer(x))
    with paddle.no_grad():
        clone._layer[0].weight.set_value(paddle.zeros([4, 3]))
    assert_same(fast(x), layer(x))  # the original keeps its own layer
    assert_same(clone(x), clone._layer(x))


def test_a_shallow_copy_and_a_pickle_round_trip() -> None:
    layer, x = _layer_and_input()
    fast = sot.symbolic_translate(layer)
    shallow = copy.copy(fast)
    assert shallow._layer is layer
    assert_same(shallow(x), layer(x))
    restored = pickle.loads(pickle.dumps(fast))
    assert_same(restored(x), layer(x))

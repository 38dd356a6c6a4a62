"""A name missing from an enum class: on Python 3.10/3.11 the enum metaclass's ``__getattr__`` answers (a member
by that name, or AttributeError, always for a dunder). ``dataclasses.asdict`` of a config holding an enum member
asks ``hasattr(type(member), "__dataclass_fields__")``; the frame fell back ("EnumType.__getattr__ computes
attribute '__dataclass_fields__': not simulated yet")."""
from __future__ import annotations

import enum

import paddle

import sot
from conftest import assert_counts, assert_same


class Act(enum.Enum):
    GELU = "gelu"
    RELU = "relu"


def _probe(x: paddle.Tensor) -> tuple:
    flags = (hasattr(Act, "__dataclass_fields__"), hasattr(Act, "TANH"), hasattr(Act, "GELU"))
    return x * 2 if getattr(Act, "RELU") is Act.RELU else x, flags


def test_missing_names_of_an_enum_class_are_answered_as_its_metaclass_does() -> None:
    x = paddle.to_tensor([1.0, 2.0])
    with sot.config.patch(min_graph_size=0):
        assert_same(sot.symbolic_translate(_probe)(x), _probe(x))
    assert_counts(translate_count=1, graph_breaks=0, fallbacks=0, compiled_graphs=1)

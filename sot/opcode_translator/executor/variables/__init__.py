"""The variable family: one class per kind of Python value the simulated bytecode touches."""
from .base import NullVariable, VariableBase, VariableFactory
from .basic import ConstantVariable, ObjectVariable, TensorVariable
from .callable import (BuiltinVariable, CallableVariable, PaddleApiVariable, PsdbVariable,
                       TensorMethodVariable)
from .container import DictVariable, ListVariable, TupleVariable
from .function import BoundMethodVariable, NestedFunctionVariable, UserFunctionVariable
from .iterator import IteratorVariable
from .layer import LayerVariable
from . import pylayer  # noqa: F401  (registers the PyLayer rule)
from . import context  # noqa: F401  (registers the auto_cast rule)
from . import classes  # noqa: F401  (registers the rule of classes built during simulation)
from . import itertools_rules  # noqa: F401  (registers the itertools functions)
from . import counter_rules  # noqa: F401  (registers collections.Counter)
from . import tensor_values  # noqa: F401  (registers the Paddle predicates answered from metas)
from . import recompute  # noqa: F401  (registers Paddle's activation recomputation)
from . import user_mapping  # noqa: F401  (registers the rule of user dict subclasses' instances)
from . import warnings_rules  # noqa: F401  (registers warnings.warn)
from . import user_sequence  # noqa: F401  (registers the rule of user list subclasses' instances)
from . import logging_rules  # noqa: F401  (registers the logging calls answered during simulation)

__all__ = [
    "BoundMethodVariable", "BuiltinVariable", "IteratorVariable", "LayerVariable", "NestedFunctionVariable", "UserFunctionVariable", "CallableVariable", "ConstantVariable", "DictVariable", "ListVariable", "NullVariable",
    "ObjectVariable", "PaddleApiVariable", "PsdbVariable", "TensorMethodVariable", "TensorVariable",
    "TupleVariable", "VariableBase", "VariableFactory",
]

"""What a built-in layer's output metas can depend on, as a hashable value (the key of the meta memo).

Meta inference of a ``layer`` statement runs the layer's ``forward`` on static placeholders, a few hundred
microseconds per layer (Paddle builds every op of it). A model repeats the same block many times with layers
alike but for their identity (resnet18's 20 convolutions are 11 kinds), so the output metas are memoised by
the layer's *signature*: its class, and for each layer of its tree every attribute its forward may read,
with tensors (parameters, buffers, tensors in plain attributes) described by their meta only. Tensor data
never reaches meta inference: under ``to_static`` every tensor the forward reads is a static value.

Only what is known exactly is described: Python scalars, strings, dtypes, tensors, layers, lists, tuples,
dicts and sets of those, plain Python objects of Paddle's own classes (a ``ParamAttr``, an initializer) by
their class and attributes, as a layer, and Paddle's module-level functions and methods (an activation an
RNN cell or a transformer layer keeps) by identity, as a class. Any other attribute value (a forward hook,
a user object, a C++ object) makes the layer have no signature: it is then memoised by its identity and
its state (`layer_state`). Attributes that only name a layer or serve its ``state_dict`` (`BOOKKEEPING`)
are left out, so layers differing only in those share a signature.
"""
from __future__ import annotations

import collections
import functools
import inspect
import sys
import types
import weakref
from typing import Any

import paddle

# Layer attributes that ``forward`` never reads for computing: the unique name (and the helper holding it),
# the record of ops for ``paddle.jit`` save, the state-dict loading holder and hooks.
BOOKKEEPING = frozenset({"_full_name", "_helper", "_op_recorder", "_loaddict_holder", "_state_dict_hooks",
                         "_non_persistable_buffer_names_set"})

_DICTS = frozenset({dict, collections.OrderedDict})
_SCALARS = frozenset({type(None), bool, int, float, complex, str, bytes, paddle.base.libpaddle.DataType,
                      paddle.base.core.VarDesc.VarType})


class _NoSignature(Exception):
    """An attribute value the signature cannot describe exactly."""


def tensor_signature(tensor: paddle.Tensor) -> tuple | None:
    """The meta a static placeholder of ``tensor`` has (a distributed or sparse tensor carries more: None)."""
    if tensor.is_dist() or not tensor.is_dense():
        return None
    return (type(tensor), tuple(tensor.shape), tensor.dtype, bool(tensor.stop_gradient))


class _Describer:
    """One description of a layer tree. ``seen``: the objects met so far, in order (an object met again, a
    shared sublayer or a cycle through a plain attribute, is described by that order: sharing is part of
    the structure). ``exact``: a value that cannot be described makes the description fail; otherwise it
    is described by its type and identity."""

    def __init__(self, exact: bool) -> None:
        self.seen: dict[int, int] = {}
        self.exact = exact

    def value(self, value: Any) -> Any:
        kind = type(value)
        if kind in _SCALARS:
            return kind, value
        if kind in (list, tuple):
            return kind, tuple([self.value(item) for item in value])
        if kind in _DICTS:
            return kind, tuple([(self.value(k), self.value(v)) for k, v in value.items()])
        if isinstance(value, paddle.Tensor):
            signature = tensor_signature(value)
            if signature is not None:
                return signature
        elif isinstance(value, paddle.nn.Layer) or _is_plain_paddle_class(kind):
            return self.object(value)
        elif kind in (set, frozenset):
            return kind, frozenset(self.value(item) for item in value)
        elif _is_paddle_function(value):
            return ("function", value)
        elif kind is types.MethodType and _is_paddle_function(value.__func__):  # (an RNN cell's ``call``)
            return ("method", value.__func__, self.value(value.__self__))
        if self.exact:
            raise _NoSignature
        return ("opaque", kind, id(value))

    def object(self, obj: Any) -> tuple:
        order = self.seen.get(id(obj))
        if order is not None:
            return ("same object as", order)
        self.seen[id(obj)] = len(self.seen)
        return (type(obj), *[(name, self.value(value)) for name, value in vars(obj).items()
                             if name not in BOOKKEEPING])


@functools.lru_cache(maxsize=None)
def _is_plain_paddle_class(kind: type) -> bool:
    """A pure-Python class of Paddle's whose instances keep their whole state in ``__dict__`` (no slots)."""
    return (kind.__module__.startswith("paddle.") and kind.__dictoffset__ != 0
            and all("__slots__" not in vars(cls) for cls in kind.__mro__[:-1]))


def _is_paddle_function(value: Any) -> bool:
    """A function of Paddle's that its module holds by its qualified name (``F.sigmoid``, decorated or not;
    ``LSTMCell.forward``): it lives as long as the process and is the same code for every layer holding it."""
    if not isinstance(value, (types.FunctionType, types.BuiltinFunctionType)):
        return False
    module = getattr(value, "__module__", None) or ""
    if not module.startswith("paddle."):
        return False
    found: Any = sys.modules.get(module)
    for name in (getattr(value, "__qualname__", None) or "<none>").split("."):
        found = getattr(found, name, None)
    return found is value


def layer_signature(layer: paddle.nn.Layer) -> tuple | None:
    """``layer``'s signature, or None when a value of its tree cannot be described exactly."""
    try:
        return _Describer(exact=True).object(layer)
    except _NoSignature:
        return None


def layer_state(layer: paddle.nn.Layer) -> tuple:
    """``layer``'s signature with what cannot be described exactly (a hook, a user object, a distributed
    tensor) described by its type and identity: for a memo keyed by the layer's identity too, where it
    still tells a changed state (a replaced parameter, the training flag) from the state inferred before."""
    return _Describer(exact=False).object(layer)


# -- configuration: the plain values a layer's forward may read -------------------------------------------------
# A compiled ``layer`` statement bakes what its forward read into the program (``Dropout.p``, ``Conv2D._stride``,
# ``BatchNorm``'s ``_epsilon``), so these values are part of the program's key and of the translation's guard.
# ("training" is guarded on its own; ``_built`` flips at the first eager call, which no forward reads.)
_NOT_CONFIG = frozenset({"training", "_built", "_init_in_dynamic_mode"}) | BOOKKEEPING


# Strings too (a data format, ``Upsample.mode``, ``Conv2D._padding_mode``). Paddle's forwards rewrite some to a
# canonical spelling on their first call (``BatchNorm1D`` turns its ``_data_format`` 'NCL' into 'NCHW'): the
# snapshot is taken after that: translating a layer statement runs the forward (its meta inference, never
# memoized for a forward that changed its layer) before the guard and the program's key are made. (The
# scalars of a configuration are those of a signature: `_SCALARS`.)


def _is_config_value(value: Any, depth: int = 0) -> bool:
    """A number, a bool, None, a string, a dtype, or a short list or tuple of those (a rate, a stride, a
    padding, a kernel size, an epsilon, a data format)."""
    if type(value) in _SCALARS:
        return True
    return (type(value) in (list, tuple) and depth < 2 and len(value) <= 32
            and all(_is_config_value(item, depth + 1) for item in value))


# Per class: attribute name -> whether an instance attribute of that name is left out of the configuration
# whatever its value: it is no identifier (not reachable as ``layer.<name>``), or the class (a base, or its
# metaclass) has a data descriptor of that name, which hides the instance attribute. ``inspect.getattr_static``
# walks the MRO for every name (~4 us each, most of `layer_config`, which runs for every built-in layer of a
# translation several times: its guard, its program's key, its meta memo key; mobilenet_v2 ~1500 names). A
# descriptor added to or removed from a layer class after the class was first met is not seen.
_hidden_names: "weakref.WeakKeyDictionary[type, dict[str, bool]]" = weakref.WeakKeyDictionary()


def _hidden_by_data_descriptor(cls: type, name: str) -> bool:
    return hasattr(inspect.getattr_static(cls, name, None), "__set__")


class _AnyName:
    """Every name (what a layer class entirely of Paddle's may read)."""

    def __contains__(self, name: object) -> bool:
        return True


def _code_names(code: types.CodeType, into: set[str]) -> None:
    """The attribute and global names and the strings ``code`` and its nested functions mention."""
    into.update(code.co_names)
    for const in code.co_consts:
        if isinstance(const, str):
            into.add(const)
        elif isinstance(const, types.CodeType):
            _code_names(const, into)


def _names_paddles_code_may_read(cls: type) -> Any:
    """The attribute names the code of ``cls``'s classes mentions, but for a user class's ``__init__`` and
    ``__call__``: all a built-in ``forward`` a user subclass inherits can read of the layer (with the
    methods it may call, which the subclass may override). A user subclass's own attributes of other names
    (a call counter, a list of the shapes its ``__call__`` override saw) are then no configuration: guarding
    them by value would miss at every call. A class entirely of Paddle's: any name."""
    names = _paddle_code_names.get(cls)
    if names is not None:
        return names
    if cls.__module__.startswith("paddle."):
        names = _AnyName()
    else:
        found: set[str] = set()
        for base in cls.__mro__:
            paddles = base.__module__.startswith("paddle.")
            for name, member in vars(base).items():
                if not paddles and name in ("__init__", "__call__"):  # (run around the statement, not in it)
                    continue
                member = getattr(member, "__func__", getattr(member, "fget", member))  # (static/class, property)
                member = inspect.unwrap(member) if callable(member) else member
                code = getattr(member, "__code__", None)
                if isinstance(code, types.CodeType):
                    _code_names(code, found)
        names = frozenset(found)
    _paddle_code_names[cls] = names
    return names


_paddle_code_names: "weakref.WeakKeyDictionary[type, Any]" = weakref.WeakKeyDictionary()


def layer_config(layer: paddle.nn.Layer) -> list[tuple[str, Any]]:
    """``layer``'s own plain configuration attributes (not its sublayers'), as (name, value) in order.
    Attributes shadowed by a data descriptor of the class, or not reachable as ``layer.<name>``, are left out."""
    cls = type(layer)
    hidden = _hidden_names.get(cls)  # (once per layer, not per name: a WeakKeyDictionary read is Python code)
    if hidden is None:
        hidden = _hidden_names[cls] = {}
    items = []
    for name, value in layer.__dict__.items():
        if name in _NOT_CONFIG or (type(value) not in _SCALARS and not _is_config_value(value)):
            continue
        left_out = hidden.get(name)
        if left_out is None:
            left_out = hidden[name] = (not name.isidentifier() or _hidden_by_data_descriptor(cls, name)
                                       or name not in _names_paddles_code_may_read(cls))
        if not left_out:
            items.append((name, value))
    return items


def layer_config_key(layer: paddle.nn.Layer) -> tuple:
    """`layer_config` as a hashable value that tells apart what ``==`` does not (-0.0, a list from a tuple)."""
    return tuple((name, type(value), repr(value)) for name, value in layer_config(layer))

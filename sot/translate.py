"""`symbolic_translate`: the user's entry point.

The returned callable installs the eval-frame hook for the current thread for the duration of the call;
every frame the skip policy lets through (the function itself and the user functions it calls) is then
translated, cached behind guards, and run from the cache on later calls.
"""
from __future__ import annotations

import copy
import functools
import inspect
import sys
import types
from typing import Any, Callable, TypeVar

import paddle

from .eval_frame_ext import CallWithCallback
from .opcode_translator.callback import frame_callback, inference_frame_callback

F = TypeVar("F", bound=Callable[..., Any])


def _called_function(fn: Any) -> Any:
    """What a call of ``fn`` runs, as far as its kind (generator, coroutine) goes: the ``forward`` of a layer,
    the function of a ``staticmethod``, the ``__call__`` of an object; ``inspect`` unwraps methods and
    ``functools.partial`` itself."""
    if isinstance(fn, paddle.nn.Layer):
        return fn.forward
    if isinstance(fn, staticmethod):
        return fn.__func__
    if not (inspect.isroutine(fn) or inspect.isclass(fn) or isinstance(fn, functools.partial)):
        return getattr(type(fn), "__call__", fn)
    return fn


def _check_translatable(fn: Any) -> None:
    if not callable(fn):
        raise TypeError(f"sot.symbolic_translate expects a function, a bound method or a paddle.nn.Layer, "
                        f"got {type(fn).__name__} object {fn!r:.80}, which is not callable")
    target = _called_function(fn)
    if inspect.isgeneratorfunction(target) or inspect.isasyncgenfunction(target):
        raise TypeError(f"sot.symbolic_translate cannot translate the generator function "
                        f"{getattr(target, '__qualname__', target)!r}: generators are run eagerly; translate "
                        "the function that consumes it instead")
    if inspect.iscoroutinefunction(target):
        raise TypeError(f"sot.symbolic_translate cannot translate the coroutine function "
                        f"{getattr(target, '__qualname__', target)!r}")


class TranslatedFunction(CallWithCallback):
    """What `symbolic_translate` returns for a function (or any callable but a Layer): a call is
    `CallWithCallback`'s, ``fn(*args, **kwargs)`` called in C with the callback set for the call, so no frame
    of sot's sits between the caller and ``fn`` (in a traceback, a profile, or the cost of a call).

    It stands in for ``fn`` the way ``functools.wraps`` makes a wrapper do: name, docstring, ``__wrapped__``
    (hence ``inspect.signature``), and as a class attribute it binds like a function, so decorating a method
    works."""

    def __init__(self, fn: Callable[..., Any], training: bool) -> None:
        try:
            functools.update_wrapper(self, fn)  # (it copies ``fn.__dict__`` too: sot's own attributes come after)
        except AttributeError:  # e.g. a callable object without __name__
            pass
        self.__sot_translated__ = fn
        self._sot_training = training
        self._sot_bind(frame_callback if training else inference_frame_callback, fn)

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        return self if instance is None else types.MethodType(self, instance)

    # Like a function, one object: copies are itself.
    def __copy__(self) -> "TranslatedFunction":
        return self

    def __deepcopy__(self, memo: dict) -> "TranslatedFunction":
        return self

    def __reduce__(self) -> str | tuple:
        # A module-level ``@symbolic_translate`` function pickles by name, as the function it replaces would;
        # anything else as a new translation of the (picklable) original.
        module = sys.modules.get(getattr(self, "__module__", None) or "")
        qualname = getattr(self, "__qualname__", None)
        if module is not None and isinstance(qualname, str):
            found: Any = module
            for part in qualname.split("."):
                found = getattr(found, part, None)
            if found is self:
                return qualname
        return TranslatedFunction, (self.__sot_translated__, self._sot_training)

    def __repr__(self) -> str:
        return f"sot.symbolic_translate({self.__sot_translated__!r})"


def _layer_caller(layer: paddle.nn.Layer) -> Callable[..., Any]:
    namespace: dict[str, Any] = {"__name__": "sot_layer_call", "__sot_layer__": layer}
    source = "def call_layer(*args, **kwargs):\n    return __sot_layer__(*args, **kwargs)\n"
    exec(compile(source, f"<call of {type(layer).__name__}>", "exec"), namespace)
    return namespace["call_layer"]


def _forward_is_library_code(layer: paddle.nn.Layer) -> bool:
    from .opcode_translator.skip_files import should_skip

    forward = getattr(type(layer), "forward", None)
    code = getattr(forward, "__code__", None)
    return code is not None and should_skip(code, getattr(forward, "__globals__", {}))


class TranslatedLayer(CallWithCallback):
    """What `symbolic_translate` returns for a Layer: calls go through ``Layer.__call__`` (hooks run) and
    the layer's ``forward`` frame is translated; everything else is delegated to the layer.

    A call is `CallWithCallback`'s: the layer (or its caller frame) called in C with the callback set for
    the call, no Python frame of ours (on a small layer whose forward runs natively, the ``__call__`` frame
    this replaced cost about a third of what sot added per call)."""

    def __init__(self, layer: paddle.nn.Layer, training: bool) -> None:
        from .opcode_translator.executor.variables.layer import is_builtin_layer

        object.__setattr__(self, "_layer", layer)
        object.__setattr__(self, "_sot_training", training)
        object.__setattr__(self, "__sot_translated__", layer)
        # A built-in layer's own frames are Paddle's (never translated): call it from a small frame of ours
        # that is translated, so the call becomes one `layer` statement of a compiled graph. The same for a
        # layer whose forward is other library code (``nn.Sequential``'s, or a decorator's wrapper), which the
        # simulation steps into from that frame.
        target = _layer_caller(layer) if is_builtin_layer(layer) or _forward_is_library_code(layer) else layer
        self._sot_bind(frame_callback if training else inference_frame_callback, target)

    # Copies translate their copy of the layer (the C part, what a call calls, is not state a generic copy
    # would carry; and `__getattr__` would hand the copy protocol's lookups to the layer).
    def __copy__(self) -> "TranslatedLayer":
        return TranslatedLayer(self._layer, self._sot_training)

    def __deepcopy__(self, memo: dict) -> "TranslatedLayer":
        return TranslatedLayer(copy.deepcopy(self._layer, memo), self._sot_training)

    def __reduce__(self) -> tuple:
        return TranslatedLayer, (self._layer, self._sot_training)

    @property
    def __signature__(self) -> inspect.Signature:
        """The layer's own (what ``inspect.signature`` cannot find on this C-called object by itself)."""
        return inspect.signature(self._layer)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._layer, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._layer, name, value)

    def __repr__(self) -> str:
        return f"sot.symbolic_translate({self._layer!r})"


def symbolic_translate(fn: Any = None, training: bool = True, **unused: Any) -> Any:
    """Translate ``fn`` (a function, a bound method or a `paddle.nn.Layer`); usable as a decorator.

    The result has the same signature and results as ``fn`` run eagerly; Paddle ops are captured into
    compiled static programs, everything Python keeps running as Python.

    What ``fn`` may be:
    - works: a function, lambda, bound method, `paddle.nn.Layer`, object with ``__call__``,
      ``functools.partial``, an already translated function or layer, a class (its user ``__init__`` is
      translated), and a builtin or other C function (it runs as is: there is no Python frame to translate,
      only those it calls back into are); a ``staticmethod`` or ``classmethod`` object (``@symbolic_translate``
      above ``@staticmethod`` in a class body) gives the same kind of object around the translated function;
    - ``TypeError`` at once: something not callable, a generator, coroutine or async generator function, also
      as a method, ``partial`` or ``__call__`` (their frames always run eagerly: translate the function
      consuming them), or an unknown keyword.
    """
    if unused:
        raise TypeError(f"symbolic_translate() got unexpected keyword arguments: {', '.join(unused)}")
    if fn is None:
        return functools.partial(symbolic_translate, training=training)
    if isinstance(fn, (staticmethod, classmethod)):  # (a decorator under ours in a class body: it stays outermost)
        return type(fn)(symbolic_translate(fn.__func__, training=training))
    _check_translatable(fn)
    if isinstance(fn, paddle.nn.Layer):
        return TranslatedLayer(fn, training)
    return TranslatedFunction(fn, training)

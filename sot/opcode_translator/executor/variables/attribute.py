"""Attribute reads on Python objects, following the descriptor protocol without running it blindly.

Plain data (instance ``__dict__``, class attributes, modules) is read directly; methods, static and class
methods become variables that inline the function when called; properties inline their getter. Anything
whose reading would run unknown code (custom descriptors, ``__getattr__``) makes the frame fall back.
"""
from __future__ import annotations

import enum
import functools
import inspect
import types
from typing import TYPE_CHECKING, Any

import paddle

from ....errors import BreakGraphError, FallbackError, UserCodeError
from ... import pyversion
from ..tracker import (ComputedMethodTracker, ConstTracker, DummyTracker, GenericGetAttrTracker, GetAttrTracker,
                       GetItemTracker, Tracker)
from ..side_effects import ABSENT, DELETED
from .base import HEAPTYPE, VariableBase, VariableFactory

if TYPE_CHECKING:
    from .basic import ObjectVariable

_MISSING = object()
# C-level descriptors whose __get__ runs no Python code: reading them for real is safe.
_SAFE_DESCRIPTOR_TYPES = (types.MemberDescriptorType, types.GetSetDescriptorType,
                          types.WrapperDescriptorType, types.MethodDescriptorType,
                          types.BuiltinFunctionType, types.ClassMethodDescriptorType,
                          # a method decorated with ``functools.lru_cache``: its ``__get__`` (C) only binds the
                          # wrapper to the instance; the call of that bound memo then runs natively at a graph
                          # break (its key holds the instance, not a built-in constant: see memo_calls.py).
                          functools._lru_cache_wrapper)  # type: ignore[attr-defined]
# The function types of compilers to C extensions, by type name (their module is the compiler's versioned
# runtime: ``_cython_3_2_4``): binding one to an instance (its ``__get__``, C code) makes a bound method and
# runs nothing else. Calling it (a numpy ``Generator.standard_normal``) then runs natively at a graph break.
_COMPILED_FUNCTION_TYPE_NAMES = frozenset({"cython_function_or_method", "fused_cython_function"})


def _no_attribute(message: str, obj: Any, name: str) -> UserCodeError:
    """The AttributeError of a failed ``obj.name``: with its ``name`` and ``obj``, as the interpreter sets them."""
    return UserCodeError(f"user code raised AttributeError: {message}",
                         original=AttributeError(message, name=name, obj=obj))


# Python 3.10/3.11's enum metaclass has a ``__getattr__`` (gone in 3.12) that only looks a member up by name and
# refuses dunders: ``dataclasses.asdict`` asks an enum class ``hasattr(cls, "__dataclass_fields__")``.
_ENUM_META_GETATTR = inspect.getattr_static(enum.EnumMeta, "__getattr__", None)
if not isinstance(_ENUM_META_GETATTR, types.FunctionType):
    _ENUM_META_GETATTR = None


def _enum_member_by_name(var: VariableBase, enum_class: Any, name: str) -> VariableBase:
    """What ``EnumMeta.__getattr__`` returns for a name not found on the class: its member of that name, or an
    AttributeError (always for a dunder)."""
    member = None if name.startswith("__") and name.endswith("__") else enum_class._member_map_.get(name)
    if member is None:
        raise _no_attribute(name, enum_class, name)
    var.graph.add_guard(var)
    return VariableFactory.from_value(member, var.graph, _value_tracker(var, name))


def _value_tracker(owner: VariableBase, name: str) -> Tracker:
    if not owner.tracker.is_traceable():
        return DummyTracker((owner,))
    value = getattr(owner, "value", None)
    if not isinstance(value, type) and user_getattribute(type(value)) is not None:
        # (what the simulation reads of such an object is read past its override: `load_attribute`)
        return GenericGetAttrTracker(owner, name)
    return GetAttrTracker(owner, name)


def user_getattribute(cls: type) -> Any:
    """The ``__getattribute__`` a Python class of ``cls``'s MRO overrides attribute reads with (a function,
    or something else a class holds there), or None for the built-in generic lookups (``object``'s,
    ``type``'s, ``module``'s: slot wrappers, which the simulation follows itself)."""
    found = getattr(cls, "__getattribute__", None)
    return None if found is None or type(found) is types.WrapperDescriptorType else found


def instance_dict_of(obj: Any) -> Any:
    """``obj.__dict__`` (None without one), read past a class's own ``__getattribute__``: the simulation's
    looking must not run it (eager runs it at the reads of the user's code only)."""
    if user_getattribute(type(obj)) is None:
        return getattr(obj, "__dict__", None)
    try:
        return object.__getattribute__(obj, "__dict__")
    except AttributeError:
        return None


def dict_expr(obj: Any, expr: str) -> str:
    """``expr.__dict__`` for a guard checking ``obj``: past a class's own ``__getattribute__`` (`instance_dict_of`:
    a guard must not run it)."""
    if user_getattribute(type(obj)) is None:
        return f"{expr}.__dict__"
    return f"object.__getattribute__({expr}, '__dict__')"


def _generically_has(obj: Any, name: str) -> bool:
    """``object.__getattribute__(obj, name)`` finds something: the presence of an attribute past the class's
    own ``__getattribute__``/``__getattr__``, which the simulation inlines (and which must not run in a guard)."""
    try:
        object.__getattribute__(obj, name)
    except AttributeError:
        return False
    return True


def guard_attribute_presence(var: VariableBase, name: str, present: bool, generic: bool = False) -> None:
    """What the frame did depended on whether ``var``'s object has the attribute ``name`` (``hasattr``, a
    ``getattr`` default, an AttributeError it caught): checked again at every call. The guard of a class (its
    version tag, or its members) and that of a layer (`layer_lookup_fails`) fix it already; a function or a
    module is guarded by its code or identity, a plain instance by its type, none of which says which
    attributes it holds (a memo stored on a function later, a config module filled in after the first call).
    ``generic``: the presence as ``object.__getattribute__`` sees it, what a class's own ``__getattribute__``
    or ``__getattr__`` (simulated, their reads guarded by themselves) was handed."""
    from .basic import ObjectVariable

    graph = var.graph
    graph.add_guard(var)
    if not var.tracker.is_traceable():
        return  # (what it was computed from is guarded instead)
    if isinstance(var, ObjectVariable):
        kind = type(var.value)
    else:
        try:
            kind = var.get_py_type()
        except FallbackError:
            return
    if issubclass(kind, (type, paddle.nn.Layer)) or not kind.__flags__ & HEAPTYPE and not kind.__dictoffset__:
        return  # (nor can an instance of a built-in type without a ``__dict__`` gain or lose one: a list)
    hooked = user_getattribute(kind) is not None or isinstance(
        inspect.getattr_static(kind, "__getattr__", None), types.FunctionType)
    if generic and hooked and not issubclass(kind, types.ModuleType):
        graph.add_rendered_guard(var, lambda builder, expr: f"{builder.constant(_generically_has)}({expr}, "
                                                            f"{name!r}) is {present!r}")
    else:
        graph.add_expr_guard(var, f"hasattr({{}}, {name!r}) is {present!r}")


def _method(owner: VariableBase, name: str, function: types.FunctionType, self_var: VariableBase,
            translated: bool = False) -> VariableBase:
    """``owner.name`` is a bound method of ``function``: its identity is guarded through ``__func__`` (and
    its ``__sot_translated__`` when ``translated``: the method is a `symbolic_translate` result of it)."""
    from .context import ModeDecoratedFunctionVariable, decorator_block
    from .function import BoundMethodVariable, SourceOnlyVariable, UserFunctionVariable

    bound = SourceOnlyVariable(None, owner.graph, _value_tracker(owner, name))
    function_tracker = _value_tracker(bound, "__func__")
    if translated:
        wrapper = SourceOnlyVariable(None, owner.graph, function_tracker)
        function_tracker = _value_tracker(wrapper, "__sot_translated__")
    kind = ModeDecoratedFunctionVariable if decorator_block(function) is not None else UserFunctionVariable
    fn_var = kind(function, owner.graph, function_tracker)
    return BoundMethodVariable(fn_var, self_var, owner.graph, DummyTracker((fn_var, self_var)), name)


def _translated_method(owner: VariableBase, name: str, translation: Any, self_var: VariableBase) -> VariableBase:
    """``owner.name`` is a method bound from ``translation``, a `symbolic_translate` result of a function: the
    function's bound method (`_method`), simulated inline. Across training flags, the bound method called
    natively (a graph break at the call, not at this load)."""
    from .callable import NativeCallVariable, nested_translation_original

    graph = owner.graph
    try:
        original = nested_translation_original(translation, graph)
    except BreakGraphError as mismatch:
        value = getattr(owner.value, name)
        return NativeCallVariable(value, graph, _value_tracker(owner, name), mismatch.reason)
    if not isinstance(original, types.FunctionType):
        raise FallbackError(f"{name!r} is a translation of {type(original).__name__}, bound as a method: "
                            "not simulated yet")
    return _method(owner, name, original, self_var, translated=True)


def _class_of(var: "ObjectVariable") -> VariableBase:
    from .basic import ObjectVariable

    return ObjectVariable(type(var.value), var.graph, _value_tracker(var, "__class__"))


def layer_lookup_fails(layer: paddle.nn.Layer, name: str) -> bool:
    """Paddle's own ``Layer.__getattr__`` finds nothing for ``name`` (neither in the layer's tables of
    parameters, sublayers and buffers nor by the ordinary lookup): the guard of a missing layer attribute."""
    try:
        paddle.nn.Layer.__getattr__(layer, name)
    except AttributeError:
        return True
    return False


def _missing_layer_attribute(var: "ObjectVariable", name: str) -> UserCodeError:
    """``layer.name`` that Paddle's ``Layer.__getattr__`` would not find (its tables were searched already):
    the AttributeError it raises, guarded to stay missing. (Simulating Paddle's own ``__getattr__`` instead
    would read the layer's ``__dict__``, a graph break for every ``hasattr(self, ...)``.)"""
    if var.tracker.is_traceable():
        var.graph.add_rendered_guard(var, lambda builder, expr: f"{builder.constant(layer_lookup_fails)}"
                                                                f"({expr}, {name!r})")
    return _no_attribute(f"{type(var.value).__name__!r} object has no attribute {name!r}", var.value, name)


def load_attribute(var: "ObjectVariable", name: str, user_getattr: bool = True, generic: bool = False
                   ) -> VariableBase:
    """The variable for ``var.value.<name>``. ``user_getattr=False``: without the class's own ``__getattr__``
    (``super().__getattr__(name)`` inside it, reaching Paddle's ``Layer.__getattr__``). ``generic``: as
    ``object.__getattribute__(obj, name)`` reads it, without the class's own ``__getattribute__`` and
    ``__getattr__`` (the end of a user ``__getattribute__``, see `_user_getattribute`)."""
    from .callable import translation_original

    obj = var.value
    graph = var.graph
    if not generic:
        hook = user_getattribute(type(obj))
        if hook is not None:
            return _user_getattribute(var, name, hook)
    stored = graph.side_effects.lookup_attr(obj, name)
    if stored is DELETED:
        raise _no_attribute(f"{type(obj).__name__!r} object has no attribute {name!r}", obj, name)
    if stored is not ABSENT:
        # Stored during the simulation, maybe through another path to the same object: the guard keeps
        # the two paths one object (FunctionGraph._identity_guards).
        if var.tracker.is_traceable():
            graph.add_guard(var)
        return stored
    stored_in_class = _stored_class_attribute(var, name)
    if stored_in_class is not None:
        return stored_in_class
    if isinstance(obj, types.ModuleType):
        if obj.__dict__ is graph.top_resolver.globals:  # (the frame's own globals: ``STORE_GLOBAL``s)
            stored = graph.side_effects.lookup_global(name)
            if stored is DELETED:
                raise _no_attribute(f"module {obj.__name__!r} has no attribute {name!r}", obj, name)
            if stored is not ABSENT:
                return stored
        try:
            value = getattr(obj, name)
        except AttributeError:
            guard_attribute_presence(var, name, False)  # (a later ``module.name = ...`` must miss the entry)
            raise _no_attribute(f"module {obj.__name__!r} has no attribute {name!r}", obj, name) from None
        return VariableFactory.from_value(value, graph, _value_tracker(var, name))
    original = translation_original(obj)
    if isinstance(original, paddle.nn.Layer) and not generic and name not in obj.__dict__ and \
            inspect.getattr_static(type(obj), name, _MISSING) is _MISSING:
        # A `TranslatedLayer` hands what it lacks to its layer (its ``__getattr__``): read off the layer.
        var.needs_identity = True
        graph.add_guard(var)
        layer_var = VariableFactory.from_value(original, graph, GetAttrTracker(var, "__sot_translated__"))
        return layer_var.getattr(name)
    if isinstance(obj, paddle.nn.Layer) and not generic and not any(name in vars(klass) for klass in type(obj).__mro__):
        # (``Layer.__getattr__`` reads these tables only when the ordinary lookup fails: a class attribute of
        # that name, a ``weight`` property of a subclass, comes first)
        for store in ("_parameters", "_sub_layers", "_buffers"):
            members = obj.__dict__.get(store)
            if members is not None and name in members:
                return VariableFactory.from_value(members[name], graph, _value_tracker(var, name))
    if name == "_buffers" and isinstance(obj, paddle.nn.Layer) and graph.side_effects.tensor_stored_on_a_layer(obj):
        # A buffer rebound in the frame is written back to this table after the graph.
        raise BreakGraphError(f"reading {type(obj).__name__}._buffers after a buffer was rebound runs natively")
    is_class = isinstance(obj, type)
    if name == "__dict__" and not is_class and (graph.side_effects.has_attrs_of(obj)
                                                 or isinstance(obj, paddle.nn.Layer)):
        # The attributes stored in the frame live in the side-effect overlay, not in the real dict yet (and
        # a layer's attributes are kept in its own tables).
        raise BreakGraphError(f"reading {type(obj).__name__}.__dict__ runs natively (after pending stores)")
    if name == "__traceback__" and isinstance(obj, BaseException):
        _check_traceback_read(var)
    meta_attr = inspect.getattr_static(type(obj), name, _MISSING)
    # Data descriptors on the type win over the instance dict, and for a class, those of its metaclass over
    # the class's own MRO (``type.__getattribute__``: a ``@property`` of the metaclass hides a class attribute
    # of that name; the descriptors of ``type`` itself, ``__name__``, ``__doc__``..., read the class as before).
    if meta_attr is not _MISSING and hasattr(type(meta_attr), "__set__"):
        return _descriptor(var, name, meta_attr, on_metaclass=is_class)
    if not is_class:
        instance_dict = instance_dict_of(obj)
        dict_var = instance_dict_variable(var)
        if dict_var is not None:  # ``obj.__dict__`` was read (and maybe changed) in the frame: it holds them
            graph.add_guard(dict_var)
            if name in dict_var.items:
                return dict_var.items[name]
        elif isinstance(instance_dict, dict) and name in instance_dict:
            return VariableFactory.from_value(instance_dict[name], graph, _value_tracker(var, name))
    found = inspect.getattr_static(obj, name, _MISSING)
    if found is _MISSING:
        fallback = inspect.getattr_static(type(obj), "__getattr__", None) if not generic else None
        # (before anything the class's ``__getattr__`` computes instead, which is guarded by its own reads)
        guard_attribute_presence(var, name, False, generic=True)
        if isinstance(obj, paddle.nn.Layer) and not generic and (fallback is paddle.nn.Layer.__getattr__
                                                                  or not user_getattr):
            raise _missing_layer_attribute(var, name)
        if isinstance(fallback, types.FunctionType) and not is_class:
            # A Python __getattr__ computes the missing attribute: inlined (its AttributeError is the user's)
            from .function import UserFunctionVariable

            graph.add_guard(var)
            name_var = VariableFactory.from_value(name, graph, DummyTracker())
            # (a constant: the guard on ``var`` fixes its type; a constant is also a source for the globals
            # the function reads, which a library's ``__getattr__`` has of its own)
            try:
                return UserFunctionVariable(fallback, graph, ConstTracker(fallback)).call([var, name_var], {})
            except UserCodeError as exc:
                error = exc.original
                if isinstance(error, AttributeError) and error.name is None and error.obj is None:
                    error.name, error.obj = name, obj  # (as the interpreter completes the one it raises)
                raise
        if is_class and fallback is not None and fallback is _ENUM_META_GETATTR:
            return _enum_member_by_name(var, obj, name)
        if fallback is not None:
            raise FallbackError(f"{type(obj).__name__}.__getattr__ computes attribute {name!r}: not simulated yet")
        raise _no_attribute(f"type object {obj.__name__!r} has no attribute {name!r}" if is_class
                            else f"{type(obj).__name__!r} object has no attribute {name!r}", obj, name)
    if not var.tracker.is_traceable():  # found on a class, with no path of its own to guard its value by
        graph.class_attribute_reads.add(name)  # (see FunctionGraph.class_attribute_reads)
    elif not is_class and not hasattr(type(found), "__set__") and isinstance(instance_dict_of(obj), dict):
        # (an attribute the instance sets later under that name, ``layer.forward = patched``, would come first)
        var.names_found_on_class.add(name)
    if is_class:
        if isinstance(found, staticmethod):
            return VariableFactory.from_value(found.__func__, graph, _value_tracker(var, name))
        if isinstance(found, classmethod):
            if isinstance(found.__func__, types.FunctionType):
                return _method(var, name, found.__func__, var)
            if translation_original(found.__func__) is not None:
                return _translated_method(var, name, found.__func__, var)
        if isinstance(found, types.FunctionType) or not hasattr(type(found), "__get__") or \
                translation_original(found) is not None:  # (a translation: itself, read from a class)
            return VariableFactory.from_value(found, graph, _value_tracker(var, name))
        return _descriptor(var, name, found)
    if isinstance(found, types.FunctionType):
        return _method(var, name, found, var)
    if translation_original(found) is not None:  # a method decorated with ``symbolic_translate``
        return _translated_method(var, name, found, var)
    if isinstance(found, staticmethod):
        return VariableFactory.from_value(found.__func__, graph, _value_tracker(var, name))
    if isinstance(found, classmethod):
        if isinstance(found.__func__, types.FunctionType):
            return _method(var, name, found.__func__, _class_of(var))
        if translation_original(found.__func__) is not None:
            return _translated_method(var, name, found.__func__, _class_of(var))
    if not hasattr(type(found), "__get__"):
        return VariableFactory.from_value(found, graph, _value_tracker(var, name))
    return _descriptor(var, name, found)


def _check_traceback_read(var: "ObjectVariable") -> None:
    """``exc.__traceback__`` of an exception raised during simulation: it has none there (never raised for
    real), eager's is the traceback of the raise. Read natively: a graph break while the raise is still
    being handled in the translated frame (the frame runs natively from the raising instruction,
    `transform._translate_raise_in_flight`) or inside the instruction of the translated frame that raised it
    (an inlined call, run natively at the break); anywhere else (kept after its handler ended) the frame
    falls back."""
    exc = var.value
    graph = var.graph
    raised = graph.raised_exceptions.get(id(exc))
    if raised is None or raised[0] is not exc:
        return  # never raised: None, as eagerly (or a real exception from outside, read as it is)
    top = graph.executor
    in_flight = top is not None and any(handled is exc for handled in top.handling) and \
        id(exc) in top.raised and top.raised[id(exc)].exc is exc
    if in_flight or raised[1] == graph.top_step:
        raise BreakGraphError(f"the traceback of {type(exc).__name__} raised in the frame is read natively")
    raise FallbackError(f"the traceback of {type(exc).__name__} raised in the frame, read after its handler, "
                        "exists only natively")


def _user_getattribute(var: "ObjectVariable", name: str, hook: Any) -> VariableBase:
    """``var.name`` when the object's class overrides ``__getattribute__`` in Python: every read goes through
    it, so the override is inlined at every read (its side effects happen as often as eagerly), then, when it
    raises AttributeError, the class's ``__getattr__`` (as Python's own lookup does). Its reads through
    ``object.__getattribute__``/``super().__getattribute__`` are the generic lookup (``generic``), whose
    values are guarded by paths that skip the override (`GenericGetAttrTracker`). The guard on ``var`` (its
    type, and the class's version) fixes which functions these are."""
    from .function import UserFunctionVariable

    graph = var.graph
    cls = type(var.value)
    if not isinstance(hook, types.FunctionType):
        raise FallbackError(f"{cls.__name__}.__getattribute__ is a {type(hook).__name__}: not simulated yet")
    graph.add_guard(var)
    name_var = VariableFactory.from_value(name, graph, DummyTracker())
    try:
        return UserFunctionVariable(hook, graph, ConstTracker(hook)).call([var, name_var], {})
    except UserCodeError as exc:
        fallback = inspect.getattr_static(cls, "__getattr__", None)
        if not isinstance(exc.original, AttributeError) or fallback is None:
            raise
        if not isinstance(fallback, types.FunctionType) or isinstance(var.value, type):
            raise FallbackError(f"{cls.__name__}.__getattr__ after its __getattribute__: not simulated yet"
                                ) from None
    return UserFunctionVariable(fallback, graph, ConstTracker(fallback)).call([var, name_var], {})


def _stored_class_attribute(var: "ObjectVariable", name: str) -> VariableBase | None:
    """``var.name`` when the class attribute Python would find was assigned in the frame (``Cls.n += 1``,
    pending in the overlay): the classes of the lookup are searched in MRO order, each through the
    overlay first. None when the attribute comes from the real objects (the ordinary lookup)."""
    obj = var.value
    graph = var.graph
    overlay = graph.side_effects
    if not overlay.has_attr_stores():  # (the common case: nothing stored, nothing to search)
        return None
    is_class = isinstance(obj, type)
    mro = obj.__mro__ if is_class else type(obj).__mro__
    if not any(overlay.lookup_attr(cls, name) is not ABSENT for cls in mro):
        return None
    for cls in mro:
        stored = overlay.lookup_attr(cls, name)
        if stored is DELETED:
            continue
        if stored is ABSENT:
            if name in vars(cls):
                return None  # a real attribute comes first
            continue
        if var.tracker.is_traceable():
            graph.add_guard(var)
        try:
            kind = stored.get_py_type()
        except FallbackError:
            kind = None
        if kind is None or hasattr(kind, "__get__"):
            raise FallbackError(f"reading {name!r} after a function or descriptor was assigned to it on "
                                f"{cls.__name__} in the frame is not supported yet")
        instance_dict = None if is_class else instance_dict_of(obj)
        if isinstance(instance_dict, dict) and name in instance_dict:
            return None  # the instance's own attribute wins over a plain class attribute
        return stored
    raise _no_attribute(f"type object {obj.__name__!r} has no attribute {name!r}" if is_class
                        else f"{type(obj).__name__!r} object has no attribute {name!r}", obj, name)


def instance_dict_variable(var: "ObjectVariable") -> VariableBase | None:
    """The variable of ``obj.__dict__`` when the frame read it: then it, not the real dict, holds the
    simulated attributes (a change through it is written back with the other mutated containers)."""
    instance_dict = instance_dict_of(var.value)
    if not isinstance(instance_dict, dict):
        return None
    known = var.graph.known_objects.get(id(instance_dict))
    return known[1] if known is not None and known[0] is instance_dict else None


def _descriptor(var: "ObjectVariable", name: str, descriptor: Any, on_metaclass: bool = False) -> VariableBase:
    """``var.name`` found as ``descriptor`` on the class (``on_metaclass``: a data descriptor of the
    metaclass of ``var``'s class, read with the class as its instance)."""
    from .function import UserFunctionVariable

    graph = var.graph
    if isinstance(descriptor, property):
        if not isinstance(descriptor.fget, types.FunctionType):
            raise FallbackError(f"property {name!r} without a Python getter")
        # The getter is fixed by the guarded identity and type of the object.
        getter = UserFunctionVariable(descriptor.fget, graph, DummyTracker((var,)))
        return getter.call([var], {})
    if (isinstance(descriptor, types.DynamicClassAttribute) and isinstance(var.value, enum.Enum)
            and getattr(descriptor.fget, "__module__", None) == "enum"):
        # ``member.name``/``member.value`` (and enum's other properties): plain reads of the member itself
        value = getattr(var.value, name)
        return VariableFactory.from_value(value, graph, _value_tracker(var, name))
    if isinstance(descriptor, _SAFE_DESCRIPTOR_TYPES) or _is_compiled_function(descriptor):
        # (past a class's own ``__getattribute__``: this is the generic lookup it was inlined down to)
        hooked = not isinstance(var.value, type) and user_getattribute(type(var.value)) is not None
        read = object.__getattribute__ if hooked else getattr
        try:
            value = read(var.value, name)
        except AttributeError as exc:  # (an unset slot: assigned later, it is there)
            guard_attribute_presence(var, name, False, generic=True)
            raise _no_attribute(str(exc), var.value, name) from None
        if callable(value) and not isinstance(value, type):
            from .callable import BUILTIN_DISPATCH, BuiltinVariable, OpaqueCallableVariable, member_of

            if member_of(BUILTIN_DISPATCH, value):  # e.g. ``object.__setattr__`` in a frozen dataclass
                return BuiltinVariable(value, graph, DummyTracker((var,)))

            bound_to_computed = not var.tracker.is_traceable() and getattr(value, "__self__", None) is var.value
            tracker = ComputedMethodTracker(var, name) if bound_to_computed else _value_tracker(var, name)
            return OpaqueCallableVariable(value, graph, tracker)
        return VariableFactory.from_value(value, graph, _value_tracker(var, name))
    getter = inspect.getattr_static(type(descriptor), "__get__", None)
    if isinstance(getter, types.FunctionType) and not on_metaclass:
        return _python_descriptor(var, name, descriptor, getter)
    raise FallbackError(f"attribute {type(var.value).__name__}.{name} is a {type(descriptor).__name__} "
                        "descriptor: not simulated yet")


def _python_descriptor(var: "ObjectVariable", name: str, descriptor: Any, getter: types.FunctionType
                       ) -> VariableBase:
    """``var.name`` found on a class as a descriptor with a Python ``__get__`` (a user's lazy or typed
    attribute, ``functools.cached_property``): ``__get__(descriptor, instance, owner)`` inlined, where
    instance is None for a read off the class itself. The descriptor is reached by its path in the class
    that holds it; the type guard of the instance (and its class's version) fix which one it is. A non-data
    descriptor yields to the instance's own attribute of that name: its absence is guarded."""
    from .basic import ConstantVariable
    from .function import UserFunctionVariable

    graph = var.graph
    obj = var.value
    is_class = isinstance(obj, type)
    cls = obj if is_class else type(obj)
    index = next(i for i, klass in enumerate(cls.__mro__) if vars(klass).get(name) is descriptor)
    graph.add_guard(var)
    if not is_class and not hasattr(type(descriptor), "__set__") and var.tracker.is_traceable():
        where = "getattr({}, '__dict__', ())" if user_getattribute(cls) is None else dict_expr(obj, "{}")
        graph.add_expr_guard(var, f"{name!r} not in {where}")
    descriptor_var = VariableFactory.from_value(descriptor, graph, class_member_tracker(var, index, name))
    if is_class:
        instance: VariableBase = ConstantVariable(None, graph, DummyTracker())
        owner: VariableBase = var
    else:
        instance, owner = var, _class_of(var)
    return UserFunctionVariable(getter, graph, ConstTracker(getter)).call([descriptor_var, instance, owner], {})


def class_member_tracker(var: VariableBase, index: int, name: str) -> Tracker:
    """``type(var).__mro__[index].__dict__[name]`` (``var.__mro__...`` for a class) as a path from ``var``
    when it has one: what is found there is a value of the frame like any other (guarded through it);
    otherwise a computed value."""
    from .function import SourceOnlyVariable

    if not var.tracker.is_traceable():
        return DummyTracker((var,))
    graph = var.graph
    obj = var.get_py_value()
    cls = obj if isinstance(obj, type) else type(obj)
    cls_var = var if isinstance(obj, type) else SourceOnlyVariable(cls, graph, GetAttrTracker(var, "__class__"))
    mro_var = SourceOnlyVariable(cls.__mro__, graph, GetAttrTracker(cls_var, "__mro__"))
    klass_var = SourceOnlyVariable(cls.__mro__[index], graph, GetItemTracker(mro_var, index))
    members = SourceOnlyVariable(cls.__mro__[index].__dict__, graph, GetAttrTracker(klass_var, "__dict__"))
    return GetItemTracker(members, name)


def _is_compiled_function(descriptor: Any) -> bool:
    """A function of a C extension compiled by Cython (`_COMPILED_FUNCTION_TYPE_NAMES`), its ``__get__`` C code."""
    kind = type(descriptor)
    return kind.__name__ in _COMPILED_FUNCTION_TYPE_NAMES and not isinstance(inspect.getattr_static(kind, "__get__"),
                                                                           types.FunctionType)


def has_attribute(var: "ObjectVariable", name: str) -> bool:
    """``hasattr(var.value, name)`` as the frame would see it at this point: attributes stored or deleted
    earlier in the simulation count (they are only replayed after the graph); otherwise the real object is
    asked, and the answer guarded (`guard_attribute_presence`: a plain instance is guarded by type, a function
    by its code, not by what attributes they have). Through a class's own ``__getattribute__`` the answer is
    what the inlined override made of the reads it guarded itself (the guard must not run it)."""
    graph = var.graph
    stored = graph.side_effects.lookup_attr(var.value, name)
    if var.tracker.is_traceable():
        graph.add_guard(var)
    if stored is not ABSENT:
        return stored is not DELETED
    try:  # as Python does it: read the attribute (simulated), AttributeError means False
        var.getattr(name)
        result = True
    except UserCodeError as exc:
        if not isinstance(exc.original, AttributeError):
            raise
        result = False
    if user_getattribute(type(var.value)) is None:
        guard_attribute_presence(var, name, result)
    return result


def _store_module_attribute(var: "ObjectVariable", name: str, value: VariableBase | None) -> None:
    """``module.name = value``: the module's global, seen by its functions inlined later in the frame
    (`NameResolver.stored`); one of the frame's own module is its ``STORE_GLOBAL``. (A module of a class of
    its own may run code on assignment: native.)"""
    module = var.value
    if type(module) is not types.ModuleType:
        raise BreakGraphError(f"setting attribute {name!r} of module {module.__name__} (a {type(module).__name__}) "
                              "runs natively")
    if value is None:
        load_attribute(var, name)  # deleting a missing attribute is the user's AttributeError
    if module.__dict__ is var.graph.top_resolver.globals:
        var.graph.side_effects.store_global(name, value)
    else:
        var.graph.side_effects.store_attr(var, name, value)


def store_attribute(var: "ObjectVariable", name: str, value: VariableBase | None,
                    through_object: bool = False) -> None:
    """``var.value.<name> = value`` (``del`` when value is None), replayed after the graph.
    ``through_object``: ``object.__setattr__(obj, name, value)``, which skips the class's own ``__setattr__``."""
    obj = var.value
    if isinstance(obj, type):
        if through_object:  # ``object.__setattr__(cls, ...)`` is a TypeError: raised natively
            raise BreakGraphError(f"object.__setattr__ on the class {obj.__name__} runs natively")
        _check_class_store(obj, name, value)
    elif not var.tracker.is_traceable() and not getattr(var, "created", False):
        raise FallbackError(f"setting an attribute of {type(obj).__name__} computed during simulation is not "
                            "supported yet")
    if instance_dict_variable(var) is not None:
        # (the overlay of stored attributes and the simulated ``__dict__`` would disagree)
        raise BreakGraphError(f"setting {type(obj).__name__}.{name} after reading its __dict__ runs natively")
    if isinstance(obj, types.ModuleType):
        _store_module_attribute(var, name, value)
        return
    descriptor = inspect.getattr_static(type(obj), name, _MISSING)
    setattr_impl = getattr(type(obj), "__setattr__", object.__setattr__)
    plain_setattr = object.__setattr__ if not isinstance(obj, type) else type.__setattr__
    custom_setattr = (setattr_impl is not plain_setattr and setattr_impl not in pyversion.GENERIC_SETATTR_WRAPPERS
                      and not isinstance(obj, paddle.nn.Layer) and not through_object)
    # A slot of a Python class (``__slots__``) is a plain store, replayed as such (deleting one runs natively:
    # whether it is set is not known to the simulation).
    is_slot = isinstance(descriptor, types.MemberDescriptorType) and bool(
        descriptor.__objclass__.__flags__ & HEAPTYPE)
    if is_slot and value is None:
        raise BreakGraphError(f"deleting the slot {type(obj).__name__}.{name} runs natively")
    if not custom_setattr and not isinstance(obj, (type, paddle.nn.Layer)) and isinstance(descriptor, property):
        accessor = descriptor.fset if value is not None else descriptor.fdel
        if isinstance(accessor, types.FunctionType):
            _run_property_accessor(var, accessor, value)
            return
    if isinstance(obj, paddle.nn.Layer) and isinstance(descriptor, property) and _plain_layer_value(value) \
            and isinstance(descriptor.fset, types.FunctionType) and not through_object:
        # ``Layer.__setattr__`` with a value it files in none of its tables runs the setter, then stores it
        # plainly, which runs the setter again (`object.__setattr__` finds the property both times).
        for table in ("_parameters", "_sub_layers", "_buffers"):
            var.graph.add_expr_guard(var, f"{name!r} not in ({{}}.__dict__.get({table!r}) or ())")
        for _ in range(2):
            _run_property_accessor(var, descriptor.fset, value)
        return
    if custom_setattr or (not is_slot and descriptor is not _MISSING and hasattr(type(descriptor), "__set__")):
        raise BreakGraphError(f"setting {type(obj).__name__}.{name} runs user code (__setattr__ or a "
                              "descriptor): runs natively")
    if isinstance(obj, paddle.nn.Layer) and value is not None and type(value).__name__ == "TensorVariable":
        # Rebinding a registered buffer (``self.running = self.running * 0.9 + ...``) only replaces it in
        # ``_buffers``; a tensor under another name registers a new (non-persistable) buffer: both are done by
        # the write-back, which runs ``Layer.__setattr__``. The frame reads the new value through the overlay
        # of stores; what reads the layer's tables (``_buffers``, ``named_buffers()``, ``state_dict()``...) runs
        # natively while the store is pending. A parameter's or sublayer's name is refused by eager.
        buffers = obj.__dict__.get("_buffers")
        if through_object or buffers is None:
            raise BreakGraphError(f"assigning a tensor to layer attribute {name!r} bypasses Layer.__setattr__: runs "
                                  "natively")
        if id(buffers) in var.graph.known_objects:  # (read before: that variable would keep the old buffer)
            raise BreakGraphError(f"rebinding buffer {name!r} after reading the layer's buffer table runs natively")
        if name in buffers:
            var.graph.add_expr_guard(var, f"{name!r} in {{}}._buffers")
        else:
            for table in ("_parameters", "_sub_layers"):
                if name in (obj.__dict__.get(table) or {}):
                    raise BreakGraphError(f"assigning a tensor to the {table[1:-1]} name {name!r} runs natively "
                                          "(eager raises)")
            for table in ("_buffers", "_parameters", "_sub_layers"):
                var.graph.add_expr_guard(var, f"{name!r} not in ({{}}.__dict__.get({table!r}) or ())")
    if var.tracker.is_traceable():
        var.graph.add_guard(var)
    if value is None:
        _check_deletable(var, name, through_object)
    elif descriptor is _MISSING and not isinstance(obj, type) and not isinstance(instance_dict_of(obj),
                                                                                   dict):
        # No instance dict and no slot of that name (``__slots__``): the real assignment fails, changing
        # nothing, with the eager error; raised here, where the user's ``try`` and line are known.
        var.graph.run_user_python(setattr, [obj, name, None], {})
        raise FallbackError(f"assigning {type(obj).__name__}.{name} without an instance dict did not fail")
    var.graph.side_effects.store_attr(var, name, value, through_object=through_object)


def _plain_layer_value(value: VariableBase | None) -> bool:
    """A value ``Layer.__setattr__`` keeps in none of its tables: not a tensor (a parameter or a buffer), not
    a layer, not a static function (nor None, which clears a member of a table)."""
    from .layer import LayerVariable

    if value is None or type(value).__name__ == "TensorVariable" or isinstance(value, LayerVariable):
        return False
    try:
        kind = value.get_py_type()
    except FallbackError:
        return False
    return kind is not type(None) and not issubclass(kind, (paddle.Tensor, paddle.nn.Layer)) \
        and "StaticFunction" not in kind.__name__


def _run_property_accessor(var: "ObjectVariable", accessor: types.FunctionType, value: VariableBase | None) -> None:
    """``obj.prop = value`` / ``del obj.prop`` through a property's Python setter/deleter: inlined (its own
    stores are replayed after the graph like any other). The guard on the object's type (and the class's
    version) fixes which accessor it is. (Not for a Layer: ``Layer.__setattr__`` runs the setter and then
    files the value in its own tables too.)"""
    from .function import UserFunctionVariable

    graph = var.graph
    graph.add_guard(var)
    UserFunctionVariable(accessor, graph, DummyTracker((var,))).call([var] if value is None else [var, value], {})


def _check_class_store(cls: type, name: str, value: VariableBase | None) -> None:
    """A class attribute assigned in the frame is recorded like an instance's (replayed after the graph, read
    back through the overlay, see `_stored_class_attribute`), except what changes how Python treats the
    class: special methods (``__add__`` fills a type slot), deletion, and built-in or extension types."""
    if name.startswith("__") and name.endswith("__"):
        raise BreakGraphError(f"setting {cls.__name__}.{name} changes the class's behaviour: runs natively")
    if value is None:
        raise BreakGraphError(f"deleting class attribute {cls.__name__}.{name} runs natively")
    if not cls.__flags__ & HEAPTYPE:
        raise BreakGraphError(f"setting attribute {name!r} of built-in type {cls.__name__} runs natively (fails)")


def _check_deletable(var: "ObjectVariable", name: str, through_object: bool = False) -> None:
    """``del obj.name`` fails when the attribute is not there: raise it now, where the user's ``try`` and line
    are known (replayed after the graph it would escape them). Only the instance dict can hold it (data
    descriptors and custom ``__setattr__`` already run natively), so its presence is guarded."""
    obj = var.value
    if not through_object and getattr(type(obj), "__delattr__", object.__delattr__) is not object.__delattr__:
        raise BreakGraphError(f"deleting {type(obj).__name__}.{name} runs a custom __delattr__: runs natively")
    stored = var.graph.side_effects.lookup_attr(obj, name)
    if stored is DELETED:  # deleted twice: the real object still has it, eager code raises the error
        raise UserCodeError(f"user code raised AttributeError: {name}", original=AttributeError(name))
    if stored is not ABSENT:
        return
    instance_dict = instance_dict_of(obj)
    present = isinstance(instance_dict, dict) and name in instance_dict
    if var.tracker.is_traceable() and isinstance(instance_dict, dict):
        var.graph.add_expr_guard(var, f"({name!r} in {dict_expr(obj, '{}')}) is {present!r}")
    if not present:
        # Missing: the real deletion fails without changing anything and raises the exact eager error.
        var.graph.run_user_python(delattr, [obj, name], {})
        raise FallbackError(f"deleting the missing attribute {name!r} of {type(obj).__name__} did not fail")

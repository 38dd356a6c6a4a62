"""Small helpers the generated code calls at run time (kept out of the bytecode for readability)."""
from __future__ import annotations

import inspect
import sys
import types
import weakref
from typing import Any

import paddle

from paddle.base.dygraph.math_op_patch import TensorSize as _TensorSize

from ..errors import SotError

_full = paddle.full
_assign = paddle._C_ops.assign
_INT64 = paddle.int64
_FLOAT64 = paddle.float64


class _Unbound:
    """What generated code passes for a local that is not bound (yet): a loop body function receives it for a
    local the loop only binds later (`resume.build_entry_code` deletes such a local again)."""

    def __repr__(self) -> str:
        return "<unbound local>"

    def __reduce__(self) -> str:
        return "UNBOUND"


UNBOUND = _Unbound()


def values_or_unbound(frame_locals: dict, names: tuple) -> tuple:
    """The values of ``names`` in ``frame_locals`` (what ``locals()`` returned in the calling frame), with
    `UNBOUND` for those not bound: a loop body function handing its state back (at the loop head, a break,
    or an exception leaving it) where a local the loop binds later, or deletes, may be unbound
    (`loop._emit_live_values`)."""
    return tuple(frame_locals.get(name, UNBOUND) for name in names)


def write_back_list(target: list, content: list) -> None:
    """Give ``target`` the content the simulation computed for it, keeping its identity."""
    target[:] = content


def extend_list(target: list, added: list) -> None:
    """Replay appends to a list from outside (its earlier content was never read)."""
    target.extend(added)


def write_back_dict(target: dict, content: dict) -> None:
    target.clear()
    target.update(content)


def write_back_tensor(target: paddle.Tensor, value: paddle.Tensor, changes: int) -> None:
    """A tensor from outside the frame that the simulation changed in place takes its final value, computed by
    the program: the copy goes into ``target``'s own memory (views of it see the change, as with eager in-place
    ops) and, when the value needs a gradient, is recorded on the autograd tape (the gradient of ``target``
    flows back through the program), as the eager in-place ops would have. Each of the ``changes`` eager
    in-place ops raised the tensor's inplace version by one: the version ends where eager's does (autograd
    compares it, and reports it when it refuses a backward).

    A recorded copy is the ``assign`` op writing into ``target`` (``out=``, which leaves the version as it
    is): its gradient, ``assign``, has a gradient in turn, so ``paddle.grad(..., create_graph=True)`` through
    ``target`` works as through eager's in-place ops. ``paddle.assign(value, output=target)`` (``assign_out_``)
    has none ("assign_out__grad doesn't have any grad op"); it is kept for the copies without gradient and for
    a ``target`` that is not contiguous (a strided view: ``out=`` would write it as a contiguous block)."""
    if not value.stop_gradient and target.is_contiguous():
        with paddle.set_grad_enabled(True):
            _assign(value, out=target)
        bumps = changes
    else:
        with paddle.set_grad_enabled(not value.stop_gradient):
            paddle.assign(value, output=target)
        bumps = changes - 1
    for _ in range(bumps):
        target._bump_inplace_version()


def write_back_data(target: paddle.Tensor, value: paddle.Tensor, changes: int) -> None:
    """A tensor requiring grad from outside the frame, changed in place through views of it (``y =
    x.reshape(...); y[0] = v``), takes the final data computed by the program and nothing else, as eager's
    change through a view leaves the base's gradient node as it was. The copy outside autograd bumps the
    inplace version once, the rest of the ``changes`` are bumped by hand (views share the version counter)."""
    with paddle.no_grad():
        paddle.assign(value, output=target)
    for _ in range(changes - 1):
        target._bump_inplace_version()


class BlockExit:
    """The ``__exit__`` of a block entered for real at a graph break, handed to the resume function.

    ``kind`` ("grad" or "amp") and ``previous`` (the grad mode or `AmpState` before the block) let the
    resume function's translation simulate the end of the block: its generated code then calls `leave_block`
    before its graph (and `native_rerun` opens the block again if that graph fails, since the original
    code then reruns from inside it). Run natively, the resume function calls it as ``__exit__`` (also the
    original's own ``with`` cleanup, when an exception is re-raised inside the block). It runs once, and as
    a last resort when the frames holding it are freed, so the mode never stays switched for the rest of
    the program."""

    __slots__ = ("_make_manager", "_exit", "kind", "previous", "left_early")

    def __init__(self, make_manager: Any, kind: str, previous: Any) -> None:
        self._make_manager = make_manager
        self._exit: Any = None
        self.kind = kind
        self.previous = previous
        self.left_early = False

    def enter(self) -> "BlockExit":
        manager = self._make_manager()
        manager.__enter__()
        self._exit = manager.__exit__
        return self

    def __call__(self, *exc_info: Any) -> Any:
        exit_, self._exit = self._exit, None
        return exit_(*exc_info) if exit_ is not None else None

    def __del__(self) -> None:
        if self._exit is not None:
            try:
                self(None, None, None)
            except Exception:  # (at interpreter exit Paddle may be gone: nothing left to restore)
                pass


def leave_block(block_exit: BlockExit) -> None:
    """The normal end of a block entered before a graph break (simulated by the resume function)."""
    block_exit(None, None, None)
    block_exit.left_early = True


def without_own_frame(exc: BaseException) -> BaseException:
    """``exc``, raised by an instruction the calling generated code ran natively, minus that frame's entry
    in its traceback: the resume function re-raising it in the user's handler adds the same line again."""
    tb = exc.__traceback__
    if tb is not None and tb.tb_frame is sys._getframe(1):
        exc.__traceback__ = tb.tb_next
    return exc


_rerun_codes: "weakref.WeakKeyDictionary[types.CodeType, types.CodeType]" = weakref.WeakKeyDictionary()


def _rerun_code(code: types.CodeType) -> types.CodeType:
    """A copy of ``code`` known as a piece of its frame (`frame_groups.derived_from`): a traceback through the
    rerun shows the user's call once, as eagerly, not the translated frame's entry and the rerun's both."""
    copy = _rerun_codes.get(code)
    if copy is None:
        from . import frame_groups

        copy = _rerun_codes[code] = code.replace()
        frame_groups.derived_from(copy, code)
    return copy


def native_rerun(exc: BaseException, fn: Any, arguments: tuple) -> tuple[Any, tuple, dict]:
    """A compiled program of a translated frame raised ``exc`` before anything else of the frame ran: the
    call that runs the frame's original code ``fn`` natively from its start, untranslated (with the same
    frame arguments, in the order of the argument slots), so the user sees exactly what eager code does.

    Returned as ``(runner, args, kwargs)`` for the generated code to make the call ``runner(*args,
    **kwargs)`` itself: ``runner`` calls ``fn`` in C with no callback, so the error's traceback goes from the
    translated frame straight into the user's code, through no frame of sot's."""
    if not isinstance(exc, Exception) or isinstance(exc, SotError):
        raise exc  # KeyboardInterrupt and friends, or sot's own error in strict mode: not the program's error
    from ..eval_frame_ext import CallWithCallback

    for argument in arguments:  # the original code starts inside the blocks the generated code left
        if type(argument) is BlockExit and argument.left_early:
            argument.left_early = False
            argument.enter()

    code = fn.__code__
    fn.__code__ = _rerun_code(code)
    n_positional, n_kwonly = code.co_argcount, code.co_kwonlyargcount
    positional = list(arguments[:n_positional])
    keywords = dict(zip(code.co_varnames[n_positional:n_positional + n_kwonly],
                        arguments[n_positional:n_positional + n_kwonly]))
    rest = n_positional + n_kwonly
    if code.co_flags & inspect.CO_VARARGS:
        positional += arguments[rest]
        rest += 1
    if code.co_flags & inspect.CO_VARKEYWORDS:
        keywords.update(arguments[rest])
    runner = CallWithCallback()
    runner._sot_bind(None, fn)
    return runner, tuple(positional), keywords


class _IndexIterator:
    """CPython's list iterator at an index past the list's current end, which ``__setstate__`` would clamp:
    the list may still grow (a list of the caller's the frame extended is rebuilt before the replay of the
    frame's changes gives it its final items)."""

    def __init__(self, sequence: Any, index: int) -> None:
        self._sequence: Any = sequence
        self._index = index

    def __iter__(self) -> "_IndexIterator":
        return self

    def __next__(self) -> Any:
        sequence = self._sequence
        if sequence is None:
            raise StopIteration
        if self._index >= len(sequence):
            self._sequence = None  # (exhausted for good, as CPython's)
            raise StopIteration
        self._index += 1
        return sequence[self._index - 1]

    def __length_hint__(self) -> int:
        return 0 if self._sequence is None else max(len(self._sequence) - self._index, 0)


def iterator_at(iterable: Any, taken: int, exhausted: bool) -> Any:
    """``iter(iterable)`` already past its first ``taken`` items: a list's, tuple's, tensor's or range's iterator
    (all index based) the translated frame partly consumed before a graph break. Its index is set, not stepped to,
    so a list shorter at this point than it was when the items were read is not found exhausted (which would
    end the iterator for good); an ``exhausted`` one is an empty iterator (CPython's stays exhausted even if
    the list grows)."""
    if exhausted:
        return iter(())
    if isinstance(iterable, list) and taken > len(iterable):
        return _IndexIterator(iterable, taken)
    iterator = iter(iterable)
    iterator.__setstate__(taken)
    return iterator


def enumerate_at(iterable: Any, taken: int, exhausted: bool, count: int) -> enumerate:
    """``enumerate`` of a list, tuple or tensor the translated frame took ``taken`` items from before a graph
    break: over its iterator at that index (`iterator_at`), counting on from ``count``."""
    return enumerate(iterator_at(iterable, taken, exhausted), count)


def zip_at(*positions: Any) -> zip:
    """``zip`` of lists, tuples or tensors the translated frame partly consumed before a graph break: over
    their iterators each at its own index (`iterator_at`); ``positions``: ``iterable, taken, exhausted`` per
    source."""
    return zip(*(iterator_at(*positions[i:i + 3]) for i in range(0, len(positions), 3)))


def tensor_size(count: int, shape: Any) -> int:
    """A new ``x.size`` value, as eager mode makes one at each read: a ``TensorSize`` of ``count`` elements
    carrying the shape (the very ``paddle.Size`` the frame read as its ``as_shape``, or one made from a
    tuple). The count is given: the frame may have changed the list since (the int keeps its value)."""
    size = int.__new__(_TensorSize, count)
    size.as_shape = shape if isinstance(shape, paddle.Size) else paddle.Size(list(shape))
    return size


def _tree_paths(layer: paddle.nn.Layer) -> dict[int, tuple[str, ...]]:
    """The attribute path of every object in a layer's tree (parameters, buffers, sublayers, the layer itself),
    the first one found in the order Paddle walks the tree."""
    paths: dict[int, tuple[str, ...]] = {id(layer): ()}
    pending = [(layer, ())]
    while pending:
        current, path = pending.pop(0)
        for store in ("_parameters", "_buffers", "_sub_layers"):
            for key, member in current.__dict__.get(store, {}).items():
                if member is not None and id(member) not in paths:
                    paths[id(member)] = (*path, key)
                    if store == "_sub_layers":
                        pending.append((member, (*path, key)))
    return paths


def layer_structure(layer: paddle.nn.Layer, method: str, args: tuple, kwargs: dict) -> tuple | None:
    """What ``layer.<method>(*args, **kwargs)`` gives (a method reading the layer tree: ``named_parameters``,
    ``children``, ``state_dict``...), as ``(name or None, attribute path)`` per item; None when an item is not
    in the tree or when ``state_dict`` would run a hook. Equal answers at two calls mean equal results (the
    guard of a translation that used the method)."""
    if method == "state_dict" and any(sub._state_dict_hooks for sub in layer.sublayers(include_self=True)):
        return None
    result = getattr(layer, method)(*args, **kwargs)
    named = method.startswith("named_") or method == "state_dict"
    if method.startswith("get_"):  # one object (``get_sublayer("blocks.0")``)
        items = [result]
    else:
        items = list(result.items()) if isinstance(result, dict) else list(result)
    paths = _tree_paths(layer)
    signature = []
    for item in items:
        name, member = item if named else (None, item)
        path = paths.get(id(member))
        if path is None:
            return None
        signature.append((name, path))
    return tuple(signature)


def layer_tree_fingerprint(layer: paddle.nn.Layer) -> tuple:
    """What the layer-tree methods (`layer_structure`) depend on, cheaper to compute than running them: for
    every layer of the tree, once, in order, its class, its member names in order (parameters, buffers,
    sublayers) each with the index of its object's first appearance (None entries and sharing included),
    its non-persistable buffer names and whether it has state_dict hooks. Equal fingerprints mean every such
    method gives equal names and objects at equal paths; a new instance of the same architecture has the
    same fingerprint."""
    index: dict[int, int] = {id(layer): 0}
    out: list[Any] = []
    pending = [layer]
    while pending:
        current = pending.pop()
        members = current.__dict__
        out.append(type(current))
        for store in ("_parameters", "_buffers", "_sub_layers"):
            for key, member in members.get(store, {}).items():
                if member is None:
                    out.append((key, -1))
                    continue
                known = index.get(id(member))
                if known is None:
                    known = index[id(member)] = len(index)
                    if store == "_sub_layers":
                        pending.append(member)
                out.append((key, known))
        out.append(tuple(sorted(members.get("_non_persistable_buffer_names_set", ()))))
        out.append(bool(members.get("_state_dict_hooks")))
    return tuple(out)


def layer_method(layer: paddle.nn.Layer, method: str, args: tuple, kwargs: dict) -> Any:
    """``layer.<method>(*args, **kwargs)``: rebuilds a generator of the layer tree in generated code."""
    return getattr(layer, method)(*args, **kwargs)


def set_tracer_train_mode(mode: bool) -> None:
    """What ``Layer.train()``/``Layer.eval()`` do besides setting the layers' ``training`` flags (replayed
    with those): the dygraph tracer's mode."""
    from paddle.base import framework

    if framework.in_dygraph_mode():
        tracer = framework._dygraph_tracer()
        tracer.train_mode() if mode else tracer.eval_mode()


def set_grad_mode(enabled: bool) -> None:
    """``paddle.set_grad_enabled(enabled)`` called as a statement in the frame, replayed after the graph."""
    import paddle

    paddle.set_grad_enabled(enabled)


def int_tensor(value: int) -> Any:
    """A symbolic int input handed to a compiled program: a 0-D int64 tensor."""
    return _full([], value, _INT64)


def float_tensor(value: float) -> Any:
    """A symbolic float input handed to a compiled program: a 0-D float64 tensor (the value exactly)."""
    return _full([], value, _FLOAT64)


def enter_grad_mode(enabled: bool) -> Any:
    """Enter ``paddle.enable_grad()``/``paddle.no_grad()`` for real; returns its ``__exit__``."""
    import paddle

    previous = paddle.is_grad_enabled()
    return BlockExit(paddle.enable_grad if enabled else paddle.no_grad, "grad", previous).enter()


def special_attribute(cls: type, name: str, default: Any = None) -> Any:
    """The raw attribute ``name`` of the nearest class of ``cls.__mro__`` defining it (what CPython's
    special-method lookup finds: never the instance's own attribute, nor the metaclass's), or ``default``."""
    return next((vars(klass)[name] for klass in cls.__mro__ if name in vars(klass)), default)


def special_method(obj: Any, name: str) -> Any:
    """``obj``'s special method ``name`` as the interpreter gets it (``with`` and the like): `special_attribute`
    of its type, bound through that attribute's own ``__get__`` if it has one (a function binds ``obj``, a
    ``staticmethod`` nothing, a ``classmethod`` the type); a missing one raises ``AttributeError(name)``."""
    cls = type(obj)
    method = special_attribute(cls, name, _MISSING)
    if method is _MISSING:
        raise AttributeError(name)
    get = getattr(type(method), "__get__", None)
    return method if get is None else get(method, obj, cls)


_MISSING = object()


def enter_with(manager: Any) -> tuple[Any, Any]:
    """3.10's ``SETUP_WITH`` without its block (`pyversion.emit_native_with_entry`): what entering a ``with``
    block leaves, top first: what ``__enter__`` returned, then the bound ``__exit__``. Both are looked up as
    special methods (`special_method`: an ``__enter__`` set on the manager object is ignored, a
    ``staticmethod`` or ``classmethod`` binds as such), ``__enter__`` first, before it is called."""
    enter, exit_ = (special_method(manager, name) for name in ("__enter__", "__exit__"))
    return enter(), exit_


def enter_context_manager(make_manager: Any) -> Any:
    """Enter a fresh AMP ``make_manager()`` for real (a block a graph break interrupted); returns its
    ``__exit__``."""
    from ..symbolic.amp import current_amp_state

    return BlockExit(make_manager, "amp", current_amp_state()).enter()


def set_cell(cell: Any, value: Any) -> None:
    """``nonlocal`` assignment replayed on the real cell."""
    cell.cell_contents = value


def new_object(cls: type) -> Any:
    """An instance of ``cls`` without running ``__init__`` (its effects are replayed after it)."""
    return object.__new__(cls)


def _builtin_mapping_base(cls: type) -> type:
    """The nearest builtin mapping class of a user ``dict``/``OrderedDict`` subclass: its methods act on the
    items whatever the user class overrides."""
    import collections

    return next(klass for klass in cls.__mro__ if klass in (collections.OrderedDict, dict))


def new_mapping_instance(cls: type, items: dict) -> Any:
    """An instance of a user ``dict``/``OrderedDict`` subclass made during simulation, with its final items,
    built by the builtin base's own ``__new__`` and ``__setitem__``: the class's Python ``__init__`` and
    ``__setitem__`` already ran in the simulation (their attribute stores are replayed after this)."""
    base = _builtin_mapping_base(cls)
    obj = base.__new__(cls)
    for key, value in items.items():
        base.__setitem__(obj, key, value)
    return obj


def write_back_mapping(target: dict, items: dict) -> None:
    """A user ``dict``/``OrderedDict`` subclass instance from outside the frame whose items the simulation
    changed takes its final items, through the builtin base's methods (never the class's own, whose effects
    were simulated already)."""
    base = _builtin_mapping_base(type(target))
    base.clear(target)
    for key, value in items.items():
        base.__setitem__(target, key, value)


def new_sequence_instance(cls: type, items: list) -> Any:
    """An instance of a user ``list`` subclass made during simulation, with its final items, built by
    ``list.__new__`` and ``list.extend``: the class's Python ``__init__`` already ran in the simulation (its
    attribute stores are replayed after this)."""
    obj = list.__new__(cls)
    list.extend(obj, items)
    return obj


def write_back_sequence(target: list, items: list) -> None:
    """A user ``list`` subclass instance from outside the frame whose items the simulation changed takes its
    final items, through ``list``'s own ``__setitem__`` (never the class's, whose effects were simulated)."""
    list.__setitem__(target, slice(None), items)


def make_partial(func: Any, args: tuple, keywords: dict) -> Any:
    """``functools.partial(func, *args, **keywords)`` for a partial object made during simulation."""
    import functools

    return functools.partial(func, *args, **keywords)


class _EmptyCell:
    def __repr__(self) -> str:
        return "<empty cell>"


EMPTY_CELL = _EmptyCell()  # an enclosing variable not assigned yet, in `build_class`'s cell contents


def build_class(globals_: dict, body: Any, name: str, contents: tuple, bases: tuple, keywords: dict) -> type:
    """What ``class name(*bases, **keywords): body`` does inside a function: a new class per call. The
    body's enclosing variables get new cells holding the values the translated frame gave them."""
    import builtins
    import types

    cells = tuple(types.CellType() if value is EMPTY_CELL else types.CellType(value) for value in contents)
    function = types.FunctionType(body, globals_, body.co_name, None, cells or None)
    return builtins.__build_class__(function, name, *bases, **keywords)


def fresh_exception(template: BaseException) -> BaseException:
    """A new exception equal to one the simulation made: same type, arguments, attributes, cause and
    context, and (for a group) fresh sub-exceptions."""
    import builtins
    import copy

    group = getattr(builtins, "BaseExceptionGroup", None)  # 3.11+
    if group is not None and isinstance(template, group):
        made = template.derive([fresh_exception(inner) for inner in template.exceptions])
        made.__dict__.update(template.__dict__)
    else:
        made = copy.copy(template)
    made.__cause__ = template.__cause__
    made.__context__ = template.__context__
    made.__suppress_context__ = template.__suppress_context__
    return made


def make_mapping(dict_type: type, default_factory: Any, items: dict) -> Any:
    """An ``OrderedDict``/``defaultdict`` made during simulation, with its final content."""
    import collections

    if dict_type is collections.defaultdict or issubclass(dict_type, collections.defaultdict):
        return dict_type(default_factory, items)
    return dict_type(items)


def new_cell(content: Any) -> Any:
    """A closure cell holding ``content`` (``EMPTY_CELL``: an unassigned variable)."""
    import types

    return types.CellType() if content is EMPTY_CELL else types.CellType(content)


def set_cell(cell: Any, content: Any) -> Any:
    """``cell`` made to hold ``content`` (``EMPTY_CELL``: emptied); returns the cell."""
    if content is EMPTY_CELL:
        try:
            del cell.cell_contents
        except ValueError:
            pass  # already empty
    else:
        cell.cell_contents = content
    return cell


def make_function(code: Any, globals_: dict, qualname: str, defaults: tuple, kwdefaults: dict,
                  closure: tuple, annotations: tuple | None = None, slots: dict | None = None,
                  namespace: dict | None = None) -> Any:
    """What ``MAKE_FUNCTION`` made during simulation, made for real: with its annotations (the
    instruction's ``(name, annotation, ...)`` tuple), the slot attributes the frame assigned (``__name__``,
    ``__doc__``...) and its ``__dict__`` (the very dict the frame may hold)."""
    import types

    function = types.FunctionType(code, globals_, code.co_name, defaults or None, closure or None)
    function.__kwdefaults__ = kwdefaults or None
    function.__qualname__ = qualname
    if annotations:
        function.__annotations__ = dict(zip(annotations[::2], annotations[1::2]))
    for name, value in (slots or {}).items():
        setattr(function, name, value)
    if namespace is not None:
        function.__dict__ = namespace
    return function

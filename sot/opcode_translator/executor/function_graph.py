"""`FunctionGraph`: what one simulated frame records (SIR statements, tensor inputs, guards)."""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import inspect
import itertools
import operator
import types
import weakref
from typing import Any, Callable, Iterator

import paddle

from ...errors import BreakGraphError, FallbackError, UserCodeError, SourceLocation
from ...symbolic.amp import AMP_ATTRS, AMP_OFF, AmpState, ambient_amp_enabled, amp_applied, amp_lists_and_promotion, \
    current_amp_state, op_amp_state
from ...symbolic.build_warnings import LayerWarning
from ...symbolic.infer_meta import MetaInferenceError, bakes_dynamic_size, infer_meta
from ...symbolic.pytree import is_namedtuple, is_namedtuple_class, leaves, map_structure, plain
from ...symbolic.layer_signature import layer_config_key, layer_signature, layer_state
from ...symbolic.sir import LayerCall, MetaInfo, Statement, StatementIR, Symbol, builds_lowered, static_lowering
from .variables import sparse_gradients
from .dynamic_shape import counted_axis
from .guard import CombinedCheck, Guard, GuardBuilder
from .side_effects import SideEffects
from .tracker import ConstTracker, DummyTracker, LocalTracker, Tracker
from .variables.base import VariableBase
from .variables.basic import ConstantVariable, NumpyArrayVariable, ObjectVariable, TensorVariable, is_guarded_by_type
from .variables.symbolic_int import (TAKES_SCALAR_TENSORS, SymbolicIntVariable, SymbolicSliceVariable,
                                     contains_symbolic, pin_all, pin_direct, pin_floats)
from .variables.container import DictVariable, ListVariable, SequenceVariable, TupleVariable


@dataclasses.dataclass
class FrameInfo:
    """What the hook hands over for a frame that is about to start (see eval_frame_ext)."""

    code: types.CodeType
    globals: dict[str, Any]
    builtins: dict[str, Any]
    closure: tuple | None
    args: tuple


_meta_cache: dict[tuple, Any] = {}
# The warnings of a built-in layer's own code met inferring it (`build_warnings.LayerWarning`), by meta key.
_layer_warnings: dict[tuple, tuple] = {}


def forget_metas() -> None:
    """``sot.reset()``: drop the inferred output metas (entries of dead targets would otherwise pile up)."""
    from .variables.inplace import forget_alias_probes

    _meta_cache.clear()
    _layer_warnings.clear()
    _baked_sizes.clear()
    forget_alias_probes()


# Calls that divide: their stand-in tensors are ones, not zeros (an integer kernel dividing by zero kills the
# process with SIGFPE: ``paddle.remainder`` of a bool by an int32 tensor, whose static form Paddle refuses).
_DIVIDING_CALLS = frozenset([
    operator.mod, operator.imod, operator.floordiv, operator.ifloordiv, operator.truediv, operator.itruediv,
    paddle.remainder, paddle.mod, paddle.floor_mod, paddle.floor_divide, paddle.divide,
    "__mod__", "__rmod__", "__imod__", "__floordiv__", "__rfloordiv__", "__ifloordiv__", "__truediv__",
    "__rtruediv__", "__itruediv__", "__div__", "__rdiv__", "remainder", "remainder_", "mod", "floor_mod",
    "floor_divide", "floor_divide_", "divide", "divide_",
])


def _divides(target: Any) -> bool:
    try:
        return target in _DIVIDING_CALLS
    except TypeError:  # (an unhashable target)
        return False


def _fails_eagerly(call: Callable[..., Any], args: tuple, kwargs: dict, divides: bool = False) -> bool:
    """Whether the call also fails in eager mode on zero tensors of the same meta (ones for a call that
    ``divides``): then the static failure is the user's error (e.g. a shape mismatch), not a limit of static
    meta inference."""
    if any(isinstance(leaf, paddle.nn.Layer) for leaf in leaves((args, kwargs))):
        return False  # running a layer would update its state (batch norm statistics)
    fill = paddle.ones if divides else paddle.zeros

    def zeros(leaf: Any) -> Any:
        if isinstance(leaf, MetaInfo):
            if any(dim < 0 for dim in leaf.shape):
                raise ValueError("dynamic shape")
            return fill(leaf.shape, leaf.dtype)
        return leaf

    try:
        eager_args = map_structure(zeros, args)
        eager_kwargs = {k: map_structure(zeros, v) for k, v in kwargs.items()}
    except ValueError:
        return False
    try:
        with paddle.no_grad():
            call(*eager_args, **eager_kwargs)
    except Exception:
        return True
    return False


def _variable_leaves(values: list[Any]) -> Iterator[Any]:
    """The variables inside ``values`` that are not containers: Python lists and tuples of variables, and
    list, tuple and dict variables, are walked into (an op's arguments, their tensors and ints)."""
    pending: list[Any] = list(values)
    while pending:
        var = pending.pop()
        if isinstance(var, (list, tuple)):
            pending.extend(var)
        elif isinstance(var, SequenceVariable):
            pending.extend(var.items)
        elif isinstance(var, DictVariable):
            pending.extend(var.items.values())
        else:
            yield var


def _static_callable(kind: str, target: Any) -> Callable[..., Any]:
    """What meta inference calls for a statement: the form of the op the program is built with."""
    call: Callable[..., Any] = target
    if kind == "method":
        def call(obj: Any, *rest: Any, **kw: Any) -> Any:
            return getattr(obj, target)(*rest, **kw)
    lowering = static_lowering(kind, target)
    if lowering is not None:  # the metas (and errors) of the form the program is built with
        unlowered = call

        def call(*args_: Any, **kwargs_: Any) -> Any:
            return (lowering if builds_lowered(target, args_) else unlowered)(*args_, **kwargs_)
    return call


# Whether an op's Python code bakes a dynamic dimension into the program (`_bakes_dynamic_sizes`), by meta key.
_baked_sizes: dict[tuple, bool] = {}


def _bakes_dynamic_sizes(kind: str, target: Any, args: tuple, kwargs: dict, sized_args: tuple,
                         sized_kwargs: dict, amp: AmpState) -> bool:
    """Whether the program an api/method call builds depends on the size of a dynamic dimension: built from
    -1 and from `DYNAMIC_PROBE_SIZE`, the two differ in more than shapes holding the dimension
    (`bakes_dynamic_size`). The op's Python code then read the
    dimension as a number (``F.kl_div(reduction="batchmean")`` divides by ``input.shape[0]``: by -1 in a
    program built with a dynamic batch, the loss's sign flipped; ``paddle.tensor_split`` computes its sections
    from the size): its output metas may still agree, its values do not."""
    key, _ = _meta_key(kind, target, args, kwargs, amp)
    if key is not None and key in _baked_sizes:
        return _baked_sizes[key]
    call = _static_callable(kind, target)
    programs: list[list[tuple]] = [[], []]
    to_static = kind == "layer"
    try:
        with amp_applied(amp) if amp.enabled or ambient_amp_enabled() else contextlib.nullcontext():
            infer_meta(call, args, kwargs, to_static=to_static, ops_built=programs[0])
            infer_meta(call, sized_args, sized_kwargs, to_static=to_static, ops_built=programs[1])
    except MetaInferenceError:
        return False
    baked = bakes_dynamic_size(programs[0], programs[1], DYNAMIC_PROBE_SIZE)
    if key is not None:
        _baked_sizes[key] = baked
    return baked


def _metas_fit(inferred: Any, wanted: Any, static_sizes: bool) -> bool:
    """Whether output metas ``inferred`` fit ``wanted``: same structure, ranks and dtypes, and with
    ``static_sizes`` every dimension ``inferred`` gives as a number the same there."""
    inferred_leaves, wanted_leaves = list(leaves(plain(inferred))), list(leaves(plain(wanted)))
    if len(inferred_leaves) != len(wanted_leaves):
        return False
    for got, want in zip(inferred_leaves, wanted_leaves):
        if isinstance(got, MetaInfo) != isinstance(want, MetaInfo):
            return False
        if isinstance(got, MetaInfo) and (got.dtype != want.dtype or len(got.shape) != len(want.shape) or (
                static_sizes and any(dim not in (-1, size) for dim, size in zip(got.shape, want.shape)))):
            return False
    return True


# The size every dynamic dimension gets when an op's meta is inferred again to check it
# (`FunctionGraph._dynamic_meta_untrusted`): a prime a wrongly inferred dimension is unlikely to equal, small
# enough that an op building work per element of a dimension stays cheap.
DYNAMIC_PROBE_SIZE = 97

_FLOAT_DTYPES = frozenset({paddle.float16, paddle.bfloat16, paddle.float32, paddle.float64})


def _mixes_float_dtypes(tree: Any, more_dtypes: Any = ()) -> bool:
    dtypes = {leaf.dtype for leaf in leaves(tree) if isinstance(leaf, MetaInfo)} | set(more_dtypes)
    return len(dtypes & _FLOAT_DTYPES) > 1


def _rejects_mixed_float_dtypes(kind: str, call: Callable[..., Any], args: tuple, kwargs: dict) -> bool:
    """Whether eager mode raises for this call because its inputs (or a layer's parameters) mix floating
    dtypes: a static program casts them silently (matmul of bfloat16 by float32) and would compute."""
    if kind == "layer":
        layer = getattr(call, "layer", call)  # (a layer's forward without its hooks)
        if not _mixes_float_dtypes((args, kwargs), (p.dtype for p in layer.parameters())):
            return False
        # Probed on a copy: running the layer may update its state (batch norm statistics).
        return _fails_eagerly(copy.deepcopy(layer).forward, args, kwargs)
    return kind in ("api", "method") and _mixes_float_dtypes((args, kwargs)) and _fails_eagerly(call, args, kwargs)


_global_var = paddle.base.framework.global_var
_has_grad = paddle.base.core._has_grad
_amp_attrs = AMP_ATTRS


def autograd_state() -> tuple:
    """What the tracer decides about every op: (grad enabled, AMP dtype[, AMP level]), as raw values so the
    per-call guard compares one tuple. Read the cheapest way (this runs on every cache hit): the grad flag
    through ``core._has_grad()``; the AMP level (its int: comparing Paddle's enum objects costs ~0.3 us, and
    even ``.value`` costs ~0.35 us) only when the dtype says AMP is on. Paddle's ``auto_cast`` sets both
    together, and AMP off (``enable=False``, or on a place without AMP) is always level O0 with "float32"."""
    if _global_var._dygraph_tracer_ is None:
        return (False, None)
    dtype = _amp_attrs._amp_dtype
    if dtype == "float32":
        return (_has_grad(), dtype)
    return (_has_grad(), dtype, _amp_attrs._amp_level.value)


def autograd_state_check(builder: GuardBuilder, state: tuple) -> CombinedCheck:
    """The guard ``autograd_state() == state``, written as the reads it makes, so the C guard program runs
    it without a Python call (this check is in every cache entry). It stands for (and a miss is explained
    as) the call."""
    tracer = f"{builder.constant(_global_var)}._dygraph_tracer_"
    if state == (False, None):
        fast = f"{tracer} is None"
    else:
        attrs = builder.constant(_amp_attrs)
        terms = [f"{tracer} is not None", f"{builder.constant(_has_grad)}() == {state[0]!r}",
                 f"{attrs}._amp_dtype == {state[1]!r}"]
        if len(state) > 2:
            terms.append(f"{attrs}._amp_level.value == {state[2]!r}")
        fast = " and ".join(terms)
    return CombinedCheck(fast, [f"{builder.constant(autograd_state)}() == {builder.constant(state)}"])


def _reference(target: Any) -> Callable[[], Any]:
    """A weak reference to ``target`` when it allows one (a layer must not be kept alive by the cache)."""
    try:
        return weakref.ref(target)
    except TypeError:
        return lambda: target


def _meta_key(kind: str, target: Any, args: Any, kwargs: Any, amp: AmpState) -> tuple[tuple | None, bool]:
    """The meta memo's key of a call, and whether it holds the identity of ``target`` (then an entry is
    valid only for the very object: a new one may reuse a dead one's id)."""
    callee, by_identity = _callee_key(kind, target)
    # (with the default dtype: ``paddle.zeros([3])`` makes a tensor of it)
    key = (kind, callee, repr_free(args), repr_free(kwargs), amp, paddle.get_default_dtype())
    try:
        hash(key)
    except TypeError:
        return None, by_identity
    return key, by_identity


def _callee_key(kind: str, target: Any) -> tuple[Any, bool]:
    """What stands for the callable in the meta memo's key. A built-in layer is keyed by its signature when
    it has one (`layer_signature`: everything its forward may read, tensors by meta), so the alike layers of
    a model's repeated blocks infer once; otherwise by its identity and its state (`layer_state`). Either
    way a change of what the forward reads (training flag, a replaced parameter, ``stop_gradient``) misses
    the memo. (The default dtype, which layers read for tensors they make, is in `_meta_key` for every call.)
    Any other callable: its identity (a method: its name)."""
    if kind == "method":
        return target, False
    if kind == "layer" and isinstance(target, LayerCall) and target.is_alive():
        layer = target.layer
        how = (target.run_hooks, target.forward_of)
        signature = layer_signature(layer)
        if signature is not None:
            return ("signature", *how, signature), False
        return ("state", id(target), *how, layer_state(layer)), True
    return id(target), True


def _configuration(kind: str, target: Any) -> tuple | None:
    """The plain configuration of a layer statement's whole tree (`layer_config_key`), or None."""
    if kind == "layer" and isinstance(target, LayerCall) and target.is_alive():
        return tuple(layer_config_key(sub) for sub in target.layer.sublayers(include_self=True))
    return None


def repr_free(tree: Any) -> Any:
    """A hashable form of an argument structure (lists become tuples, dicts sorted items)."""
    if type(tree) in (list, tuple) or is_namedtuple(tree):
        return (type(tree),) + tuple(repr_free(item) for item in tree)
    if type(tree) is dict:
        return ("dict",) + tuple(sorted((k, repr_free(v)) for k, v in tree.items()))
    if type(tree) is slice:
        return ("slice", repr_free(tree.start), repr_free(tree.stop), repr_free(tree.step))
    return (type(tree), tree)


ALL_ITEMS = object()  # `FunctionGraph.contents_read`: every item is read


def _path_key(tracker: Tracker) -> tuple[type, str]:
    """What tells two paths apart (the same path met twice is one path)."""
    return type(tracker), tracker.describe() if tracker.is_traceable() else str(id(tracker))


def _unread_holder(tracker: Tracker) -> VariableBase | None:
    """The container variable ``tracker`` is an item of, when nothing has read its items yet."""
    slot = tracker.slot()
    if slot is None or getattr(slot[0], "unread_paths", None) is None:
        return None
    return slot[0]


def _mutable_object(var: VariableBase) -> Any:
    """The real object of a variable reached from the frame whose identity is not guarded but matters for
    aliasing (a list, a dict, an instance of a user class), else None."""
    if not var.tracker.is_traceable():
        return None
    if isinstance(var, (ListVariable, DictVariable)):
        return getattr(var, "real", None)
    if isinstance(var, ObjectVariable) and is_guarded_by_type(var.value):
        return var.value
    return None


def tensor_apart_from_layer(tensor: paddle.Tensor, call: LayerCall) -> bool:
    """Whether ``tensor`` shares memory with no parameter or buffer of the layer of ``call`` (nor its
    sublayers'): a program calling the layer reads those, not ``tensor``."""
    if not call.is_alive():
        return False
    layer = call.layer
    return not any(tensor is own or tensor._is_shared_buffer_with(own)
                   for own in itertools.chain(layer.parameters(), layer.buffers()) if own is not None)


class ApartFromParameters:
    """`tensor_apart_from_layer` for a layer whose parameters and buffers (its whole tree's) the same guard
    checks by identity (a layer its program holds: `_compiled_state_guards`): the tensor is compared with
    those (held weakly), instead of walking the layer tree for them at every call. When the identity checks
    pass they are the layer's; when one fails the guard fails anyway."""

    __slots__ = ("_owned", "_name")

    def __init__(self, layer: paddle.nn.Layer) -> None:
        self._owned = tuple(weakref.ref(own) for own in itertools.chain(layer.parameters(), layer.buffers())
                            if own is not None)
        self._name = type(layer).__name__

    def __call__(self, tensor: paddle.Tensor) -> bool:
        for ref in self._owned:
            own = ref()
            if own is None or tensor is own or tensor._is_shared_buffer_with(own):
                return False
        return True

    def __repr__(self) -> str:
        return f"apart_from_parameters_of_{self._name}"


# Paddle ops whose eager backward gives some tensor operands another gradient than the program's backward
# (3.3.1), by function or Tensor method name: the parameters. ``masked_fill``'s ``value``: eager's grad kernel
# gives it zeros (or, in place, uninitialized memory), the program the sum over the filled items. (Operands
# eager gives no gradient where the program gives zeros: `unreached_heads._OPERANDS_WITHOUT_EAGER_GRADIENT`.)
_OPERANDS_EAGER_DIFFERENTIATES_OTHERWISE: dict[Any, tuple[str, ...]] = {
    paddle.masked_fill: ("value",), paddle.masked_fill_: ("value",), "masked_fill": ("value",),
    "masked_fill_": ("value",),
}


def _check_operands_eager_differentiates(graph: "FunctionGraph", name: str, kind: str, target: Any,
                                         args: list[VariableBase], kwargs: dict[str, VariableBase]) -> None:
    """Raise a `BreakGraphError` when an operand of ``target`` listed in `_OPERANDS_EAGER_DIFFERENTIATES_OTHERWISE`
    is a tensor requiring gradients while they are recorded: the call runs natively, with eager's gradient
    (the operand's ``stop_gradient`` is guarded with its meta, the grad mode always is)."""
    try:
        parameters = _OPERANDS_EAGER_DIFFERENTIATES_OTHERWISE.get(target)
    except TypeError:  # (an unhashable target)
        return
    if parameters is None or not graph.grad_mode:
        return
    function = getattr(paddle.Tensor, target) if kind == "method" else target
    try:
        bound = inspect.signature(function).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return  # (eager raises the same error: the statement's inference reports it)
    for parameter in parameters:
        operand = bound.arguments.get(parameter)
        if isinstance(operand, TensorVariable) and not operand.meta.stop_gradient:
            raise BreakGraphError(f"{name} of a {parameter} requiring gradients: eager's backward gives it another "
                                  "gradient than the program's: runs natively")


def _signature_taking_stop_gradient(function: Any) -> inspect.Signature | None:
    """``function``'s signature when it has a ``stop_gradient`` parameter (``paddle.to_tensor``), else None."""
    try:
        return _SIGNATURES_TAKING_STOP_GRADIENT[function]
    except (KeyError, TypeError):
        pass
    try:
        signature: inspect.Signature | None = inspect.signature(function)
    except (TypeError, ValueError):
        signature = None
    if signature is not None and "stop_gradient" not in signature.parameters:
        signature = None
    try:
        _SIGNATURES_TAKING_STOP_GRADIENT[function] = signature
    except TypeError:
        pass  # (an unhashable callable: looked up again next time)
    return signature


_SIGNATURES_TAKING_STOP_GRADIENT: "weakref.WeakKeyDictionary[Any, inspect.Signature | None]" = \
    weakref.WeakKeyDictionary()


def _check_no_new_leaf_requiring_grad(graph: "FunctionGraph", name: str, function: Any, args: list[VariableBase],
                                      kwargs: dict[str, VariableBase]) -> None:
    """Raise a `BreakGraphError` for a call making a new leaf that requires gradients
    (``paddle.to_tensor(data, stop_gradient=False)``): eager's result is a leaf whose ``.grad`` a later backward
    fills; a program's would be a constant of it, stopping gradients. Run natively, the leaf is a tensor from
    outside for the code after the break. The flag is guarded."""
    signature = _signature_taking_stop_gradient(function)
    if signature is None:
        return
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError:
        return  # (eager raises the same error: the statement's inference reports it)
    flag = bound.arguments.get("stop_gradient")
    if flag is None:
        return  # (the default: the tensor stops gradients)
    if not isinstance(flag, ConstantVariable):
        raise BreakGraphError(f"{name} with a stop_gradient flag not known during simulation runs natively")
    graph.add_guard(flag)
    if not flag.value:
        raise BreakGraphError(f"{name}(..., stop_gradient=False) makes a new leaf requiring gradients (its .grad "
                              "filled by backward): runs natively")


class FunctionGraph:
    """Collects the SIR and the guards of one translation."""

    def __init__(self, frame: FrameInfo, name: str) -> None:
        self.frame = frame
        self.name = name
        self.statements: list[Statement] = []
        self.metas: dict[Symbol, MetaInfo] = {}
        self.inputs: dict[Symbol, TensorVariable] = {}
        self.guard_builder = GuardBuilder(frame.code)
        self._guarded: dict[int, VariableBase] = {}  # holds the variables, so their ids stay unique
        # Values the generated code reads again and only formats (`deferred_text.py`): their exact types are
        # checked, their values only if something else guards them (`add_type_guard`).
        self._type_guarded: dict[int, VariableBase] = {}
        # The guarded variables (and what they were derived from) that decided something in the simulation:
        # a jump, an index, a call, an exception... All but those guarded only as operands of computations
        # of plain values (formatting, arithmetic: `add_guard`'s ``data_only``), whose numbers may then be
        # widened to their types for a frame without a graph (graph_free.py).
        self._decided: dict[int, VariableBase] = {}
        # Values a symbolic guard determines (``n > 3`` of a symbolic int): deciding on one decides on the
        # expression the guard checks, not on the values it was computed from (`determined_by_expression`).
        self._expressed: dict[int, VariableBase] = {}
        # Grad mode decides whether outputs require gradients, mixed precision the dtypes ops compute in:
        # every entry is guarded on both (the AMP op lists too, when AMP is on).
        self.state = autograd_state()
        self.grad_enabled = bool(self.state[0])
        self.grad_mode = self.grad_enabled  # changed by simulated ``with paddle.no_grad():`` blocks
        self.amp_state = current_amp_state()  # changed by simulated ``with paddle.amp.auto_cast():`` blocks
        self._counter = 0
        self.location: SourceLocation | None = None
        self.executor: Any = None  # the OpcodeExecutor of the translated frame
        self.current_executor: Any = None  # the innermost (possibly inlined) executor running now
        # How deep calls were inlined (frames the original code has where the translation has one).
        self.inline_depth = 0
        # Calls simulated inline (user functions, dunders, generators): the original code would make each a
        # frame of its own, hooked and guarded (see native.py: such a frame is not switched to native).
        self.inlined_calls = 0
        self.top_resolver: Any = None  # how the translated frame resolves globals
        self.side_effects = SideEffects()
        # Every generator a generator function made during simulation (`check_abandoned_generators`).
        self.simulated_generators: list[Any] = []
        # Exceptions raised (for the user's code) during simulation, by id: the exception and the number of the
        # translated frame's instruction that was running (`top_step`). Such an exception has no traceback in
        # simulation: reading it runs natively (`handlers.exceptions.traceback_of_raised`).
        self.raised_exceptions: dict[int, tuple[BaseException, int]] = {}
        self.top_step = 0
        # Blocks entered before the frame started (a resume function's) that the simulation ended: the
        # generated code leaves them for real before running the graph.
        self.block_exits: list[VariableBase] = []
        self._query_guards: list[tuple[Callable[[], Any], Any]] = []
        if self.amp_state.enabled:
            self.add_query_guard(amp_lists_and_promotion, amp_lists_and_promotion())
        self._pins: list[tuple[VariableBase, int, int]] = []
        self._expr_guards: list[tuple[VariableBase, str, bool]] = []  # (variable, template, data only)
        # Inside `constant_fold`'s data-only computation: a symbolic number pinned there is pinned as data.
        self.reading_data = False
        # (a tensor changed in place, a built-in layer called after the change): they must share no memory
        self._apart_from_layers: list[tuple[TensorVariable, LayerCall]] = []
        self._symbolic_guards: list[tuple[Callable[[GuardBuilder], str], str]] = []
        self._rendered_guards: list[tuple[VariableBase, Callable[[GuardBuilder, str], str]]] = []
        self.known_objects: dict[int, tuple[Any, VariableBase]] = {}  # id -> (object kept alive, variable)
        # One CellVariable per real closure cell, however it is reached (the frame's own free variables,
        # the closure of an inlined function): a ``nonlocal`` store through one must be read through all.
        self.known_cells: dict[int, tuple[Any, VariableBase]] = {}
        self._aliases: list[tuple[VariableBase, Tracker]] = []  # (variable, another path to its object)
        # Variables of known objects reached so far only as items of containers nothing has read (see
        # `reached_again`): id -> (variable, the item paths reaching it, its own first).
        self._unread_only: dict[int, tuple[VariableBase, list[Tracker]]] = {}
        self._distinct: list[tuple[VariableBase, VariableBase]] = []  # objects the simulation found not identical
        # tensors from outside the frame used as dict keys (`container.TensorKey`): distinct, and guarded so
        self.tensor_keys_from_outside: list[VariableBase] = []
        # Tensors from outside the frame made to require gradients before the program (`_set_stop_gradient`).
        self.made_to_require_grad: list[TensorVariable] = []
        # Tensors from outside the frame given a gradient hook, registered after the program (`register_hook`).
        self.hooked_tensors: list[TensorVariable] = []
        # cells of classes built during simulation -> the simulated cells they stand for (variables/classes.py)
        self.class_cells: dict[int, tuple[Any, VariableBase]] = {}
        # Symbols of tensors that may be views of a tensor changed in place later (see variables/inplace.py):
        # their recorded value is out of date, so using one makes the frame run eagerly.
        self.stale_symbols: set[Symbol] = set()
        # The tensor variable holding each symbol (the first one made for it, or the tensor an in-place op rebound
        # to it): the base of a view changed in place is found by its symbol (`inplace.reshaped_view_base`).
        self.symbol_owners: dict[Symbol, TensorVariable] = {}
        # Results of in-place changes of a view whose base keeps its gradient node (`inplace.propagate_to_base`):
        # no longer a view of that base, so they must not leave the frame (eager's would still alias the base).
        self.unaliased_views: set[Symbol] = set()
        # Names of the attributes `load_attribute` read from a class (not an instance dict) through an object
        # the guard has no path to (``type(self).n``), so with no value guard of their own: a class guarded
        # member by member keeps them even when they keep changing (guard.class_lookup_checks). (A read
        # through a path is guarded by value like an instance attribute, which a symbolic int may relax.)
        self.class_attribute_reads: set[str] = set()

    # -- symbols and guards ------------------------------------------------------------------------------
    def new_symbol(self, meta: MetaInfo) -> Symbol:
        symbol = Symbol(f"var_{self._counter}")
        self._counter += 1
        self.metas[symbol] = meta
        return symbol

    def add_guard(self, var: VariableBase, data_only: bool = False) -> None:
        """Guard ``var`` (and what it was derived from): the simulation depended on its value.

        ``data_only``: its value was only an operand of a computation of plain values (the text of an
        f-string, a sum), whose result is a variable of its own: a later decision on that result guards it,
        which marks this one as deciding too (`decided`).

        Only recorded here; the expressions are written by `build_guard`, when every variable knows how it
        was used (e.g. whether an array's contents were read)."""
        if not data_only:
            self._mark_decided(var)
        if id(var) in self._guarded:
            return
        pin_operands = getattr(var, "pin_operands", None)
        if pin_operands is not None:  # (deferred text: its symbolic numbers are pinned by reading their values)
            pin_operands(data_only)
        for source in var.tracker.inputs:
            self.add_guard(source, data_only=True)  # (marked above when ``var`` decides)
        self._guarded[id(var)] = var

    def add_type_guard(self, var: VariableBase) -> None:
        """Guard ``var``'s exact type only: the simulation used its value for something the generated code
        computes again from the value it reads (the text of a number, `deferred_text.py`)."""
        self._type_guarded.setdefault(id(var), var)

    def guard_read(self, var: VariableBase) -> None:
        """Guard a value read from the frame's inputs (a global, an attribute, an item, a closure cell). A
        number is guarded as data only: reading it decides nothing, its uses guard it where they decide."""
        self.add_guard(var, data_only=type(var) is ConstantVariable and type(var.value) in (int, float))

    def _mark_decided(self, var: VariableBase) -> None:
        """``var`` and what it was derived from decided something."""
        pending = [var]
        while pending:
            current = pending.pop()
            if id(current) in self._decided or id(current) in self._expressed:
                continue
            self._decided[id(current)] = current
            pending.extend(current.tracker.inputs)

    def determined_by_expression(self, var: VariableBase) -> None:
        """``var``'s value is what a symbolic guard checks (`add_symbolic_guard`): a decision on it depends
        on that expression only."""
        self._expressed[id(var)] = var

    def guarded_for_data_only(self, var: VariableBase) -> bool:
        """``var`` was guarded, only ever as an operand of computations of plain values (`add_guard`)."""
        return id(var) in self._guarded and id(var) not in self._decided

    def pins(self, var: VariableBase, _seen: set[int] | None = None) -> bool:
        """Whether this translation's guard determines ``var`` (the value it has at a graph break, handed to
        a resume function): it was guarded, or computed from guarded values and constants only. A tensor
        counts as determined (its meta follows from the guarded inputs')."""
        seen = set() if _seen is None else _seen
        if id(var) in seen or isinstance(var, TensorVariable) or id(var) in self._guarded \
                or isinstance(var.tracker, ConstTracker):
            return True
        if not isinstance(var.tracker, DummyTracker):
            return False  # read from the frame (a local, a global, an attribute) and never guarded
        seen.add(id(var))
        return all(self.pins(source, seen) for source in (*var.tracker.inputs, *var.children()))

    def build_guard(self) -> Guard:
        builder = self.guard_builder
        for container in list(self.side_effects.mutated.values()):
            self.add_guard(container)  # written back: its identity relations are guarded (_identity_guards)
        cell_paths = self._written_cell_paths()
        for path in cell_paths:
            self.add_guard(path)
        for var in self._guarded.values():
            if isinstance(var.tracker, (DummyTracker, ConstTracker)) or not var.tracker.is_traceable():
                continue  # (no path to it: what it was derived from is guarded instead, see `add_guard`)
            if isinstance(var, TensorVariable) and isinstance(var.tracker, LocalTracker):
                builder.tensor_arguments.add(var.tracker.name)
            for expr in var.make_guards(builder, builder.expr_of(var)):
                builder.add(expr)
        for var in self._type_guarded.values():
            if id(var) not in self._guarded and var.tracker.is_traceable():
                builder.add(f"type({builder.expr_of(var)}) is {builder.constant(var.get_py_type())}")
        builder.add(autograd_state_check(builder, self.state))
        self._identity_guards(builder)
        self._written_back_tensor_guards(builder)
        self._made_to_require_grad_guards(builder)
        if len(cell_paths) > 1:
            ids = ", ".join(f"id({builder.expr_of(path)})" for path in cell_paths)
            builder.add(f"len({{{ids}}}) == {len(cell_paths)}")
        apart_checks: dict[int, str] = {}
        for var, call in self._apart_from_layers:
            check = apart_checks.get(id(call))
            if check is None:
                check = apart_checks[id(call)] = self._apart_check(builder, call)
            builder.add(check.format(builder.expr_of(var)))
        for var, template, data_only in self._expr_guards:
            if var.tracker.is_traceable():
                check = template.format(builder.expr_of(var))
                builder.add(check)
                if data_only:  # (a symbolic number pinned only to be formatted, computed with: `Guard.widened`)
                    builder.note_number_checks([check], data_only=self.guarded_for_data_only(var))
        for tensor, dim, size in self._pins:
            builder.add(f"{builder.expr_of(tensor)}.shape[{dim}] == {size}")
        for render, template in self._symbolic_guards:
            builder.add(template.format(render(builder)))
        for var, render_check in self._rendered_guards:
            if var.tracker.is_traceable():
                builder.add(render_check(builder, builder.expr_of(var)))
        for query, answer in self._query_guards:
            builder.add(f"{builder.constant(query)}() == {builder.constant(answer)}")
        return builder.build()

    def _apart_check(self, builder: GuardBuilder, call: LayerCall) -> str:
        """The check (``{}`` for the tensor) that a tensor shares no memory with the layer of ``call``: cheap
        (`ApartFromParameters`) when the guard holds the layer's tree by identity, else the walk of it."""
        from .variables.layer import LayerVariable

        if call.is_alive() and any(isinstance(var, LayerVariable) and var.in_program and var.value is call.layer
                                   and not isinstance(var.tracker, (DummyTracker, ConstTracker))  # (`build_guard`)
                                   and var.tracker.is_traceable() for var in self._guarded.values()):
            return f"{builder.constant(ApartFromParameters(call.layer))}({{}})"
        return f"{builder.constant(tensor_apart_from_layer)}({{}}, {builder.constant(call)})"

    def _written_cell_paths(self) -> list[VariableBase]:
        """The real closure cells the simulation took as distinct, when one of them is written
        (``nonlocal``): a write must not reach, at a later call, a cell simulated as another one. (A function
        is guarded by its code, not its identity, so its cells may be other objects then; cells simulated as
        one are guarded to still be one by `UserFunctionVariable._guard_shared_cell`.)"""
        if not self.side_effects.cells_written():
            return []
        return [cell.path for _, cell in self.known_cells.values()
                if cell.path is not None and cell.path.tracker.is_traceable()]

    def reached_again(self, known: VariableBase, tracker: Tracker) -> bool:
        """The object of ``known`` (one variable per real tensor or mutable container, `known_objects`) is
        reached again, by ``tracker``'s path. True: the caller uses ``known``; False: the caller makes a
        variable of its own for this path, which replaces ``known`` (`note_object`).

        The simulation then treats both paths as one object, which the guard must check, but only once it
        matters: a container reached from the frame has a variable for each item, whether the frame reads
        its items or not. A path into such a container that nothing has read yet is guarded when it is
        read (`contents_read`). And a variable so far reached only through such containers (``xs[k]``
        made before the argument ``t`` is the same tensor) gives way to one for the new path, so that its
        guards (and dynamic dimensions) are the new path's. Without this, a loop body function receiving
        the items of a list it also keeps (``for t in xs: ...; use(xs)``) would be guarded on ``xs[k] is
        t``, and translated again for every item."""
        if not tracker.is_traceable() or _path_key(tracker) == _path_key(known.tracker):
            return True
        holder = _unread_holder(tracker)
        if holder is not None:
            holder.unread_paths.append((known, tracker))  # type: ignore[union-attr]
            unread_only = self._unread_only.get(id(known))
            if unread_only is not None:
                unread_only[1].append(tracker)
            return True
        if id(known) in self._unread_only:
            return False
        if not known.tracker.is_traceable() and not isinstance(known, TensorVariable):
            # A real container met first through a computed value (no path the guard could check it by, e.g.
            # read from a class reached without one): the path found now becomes its path.
            was_guarded = self._guarded.pop(id(known), None) is not None
            known.tracker = tracker
            if was_guarded:
                self.add_guard(known)
            return True
        self.add_alias(known, tracker)
        return True

    def note_object(self, value: Any, var: VariableBase) -> None:
        """``var`` is the variable of the real object ``value`` (see `reached_again`)."""
        previous = self.known_objects.get(id(value))
        self.known_objects[id(value)] = (value, var)
        var.outside_object = True  # (see SideEffects.mutate)
        if previous is not None and previous[0] is value and previous[1] is not var:
            replaced = self._unread_only.pop(id(previous[1]), None)
            if replaced is not None:  # it stood only in unread containers: ``var`` takes its places there
                old = replaced[0]
                for path in replaced[1]:
                    holder, key = path.slot()  # type: ignore[misc]
                    holder._items[key] = var  # type: ignore[union-attr]
                    holder.unread_paths = [(var if held is old else held, at)  # type: ignore[union-attr]
                                           for held, at in holder.unread_paths]  # type: ignore[union-attr]
        holder = _unread_holder(var.tracker)
        if holder is not None:
            holder.unread_paths.append((var, var.tracker))  # type: ignore[union-attr]
            self._unread_only[id(var)] = (var, [var.tracker])

    def contents_read(self, holder: VariableBase, key: Any = ALL_ITEMS) -> None:
        """The simulation reads the items of ``holder`` (`ItemsReadTracked`), or only its item ``key``: the
        paths into them that reach known objects are guarded from now on."""
        paths: list[tuple[VariableBase, Tracker]] = holder.unread_paths  # type: ignore[attr-defined]
        if key is ALL_ITEMS:
            holder.unread_paths = None  # type: ignore[attr-defined]
        else:
            read_now = [tracker.slot()[1] == key for _, tracker in paths]  # type: ignore[index]
            holder.unread_paths = [entry for entry, read in zip(paths, read_now) if not read]  # type: ignore
            paths = [entry for entry, read in zip(paths, read_now) if read]
        for var, tracker in paths:
            self._unread_only.pop(id(var), None)
            if tracker is not var.tracker:
                self.add_alias(var, tracker)

    def add_alias(self, var: VariableBase, tracker: Tracker) -> None:
        """The object of ``var`` is also reached by ``tracker``'s path (e.g. one list passed as two
        arguments): the simulation treats both as one object, so the guard checks they still are."""
        self._aliases.append((var, tracker))
        for source in tracker.inputs:  # the path's own steps are checked before it is followed
            self.add_guard(source)

    def add_distinct(self, lhs: VariableBase, rhs: VariableBase) -> None:
        """``lhs is rhs`` was answered False for two objects from outside the frame: guard that they still
        are two objects."""
        self.add_guard(lhs)
        self.add_guard(rhs)
        self._distinct.append((lhs, rhs))

    def _identity_guards(self, builder: GuardBuilder) -> None:
        """Which guarded mutable objects are the same object and which are distinct.

        A list, dict or plain instance is guarded by type and content, not identity, yet the simulation
        relies on how they alias: a mutation through one path is seen through another only when they are
        one object (``f(x, a, a)`` then ``f(x, a, b)`` must not share a translation)."""
        groups: dict[int, list[VariableBase]] = {}
        for var in self._guarded.values():
            obj = _mutable_object(var)
            if obj is not None:
                groups.setdefault(id(obj), []).append(var)
        for same in groups.values():
            first = builder.expr_of(same[0])
            for other in same[1:]:
                builder.add(f"{builder.expr_of(other)} is {first}")
        for var, tracker in self._aliases:  # (always: e.g. ``return a, b`` rebuilds both from ``a``'s path)
            builder.add(f"{tracker.guard_expr(builder)} is {builder.expr_of(var)}")
        for lhs, rhs in self._distinct:
            builder.add(f"{builder.expr_of(lhs)} is not {builder.expr_of(rhs)}")
        if len(groups) > 1:
            ids = ", ".join(f"id({builder.expr_of(same[0])})" for same in groups.values())
            builder.add(f"len({{{ids}}}) == {len(groups)}")

    def _written_back_tensor_guards(self, builder: GuardBuilder) -> None:
        """A tensor from outside the frame that is changed in place must share its memory with no other tensor
        the frame reads (not the same object, nor a view of it or its base): the simulation treats them as
        independent values. It must not be a leaf requiring grad either (that breaks the graph: eager raises)."""
        changed = self.side_effects.changed_tensors()
        if not changed:
            return
        tensors = [var for var in self._guarded.values()
                   if isinstance(var, TensorVariable) and var.tracker.is_traceable() and var.value is not None]
        for var in changed:
            expr = builder.expr_of(var)
            if not var.input_meta.stop_gradient and not var.data_written_back:
                builder.add(f"{expr}.is_leaf is False")
            for other in tensors:
                if other is not var:
                    builder.add(f"not {expr}._is_shared_buffer_with({builder.expr_of(other)})")

    def _made_to_require_grad_guards(self, builder: GuardBuilder) -> None:
        """A tensor from outside the frame made to require gradients is no other tensor the frame reads: that
        one, simulated with its own (old) flag, would be the same object with the new flag."""
        tensors = [var for var in self._guarded.values()
                   if isinstance(var, TensorVariable) and var.tracker.is_traceable() and var.value is not None]
        for var in self.made_to_require_grad:
            for other in tensors:
                if other is not var:
                    builder.add(f"{builder.expr_of(var)} is not {builder.expr_of(other)}")

    def check_not_stale(self, var: TensorVariable) -> None:
        if var.symbol in self.stale_symbols:
            raise FallbackError("a tensor that may be a view of a tensor changed in place later is used "
                                "(views are not simulated)", self.location)

    def add_expr_guard(self, var: VariableBase, template: str, data_only: bool = False) -> None:
        """A guard written by hand around ``var``'s expression (``{}`` stands for it); ``data_only`` as in
        `add_guard`, for the pin of a symbolic number's value."""
        self.add_guard(var, data_only=data_only)
        self._expr_guards.append((var, template, data_only))

    def add_rendered_guard(self, var: VariableBase, render: Callable[[GuardBuilder, str], str]) -> None:
        """A check of ``var`` that needs the guard's constants (a helper function): ``render(builder, expr)``
        writes it around ``var``'s expression."""
        self.add_guard(var)
        self._rendered_guards.append((var, render))

    def add_symbolic_guard(self, render: Callable[[GuardBuilder], str], template: str,
                           *symbolic: SymbolicIntVariable) -> None:
        """A decision on symbolic ints (``n > 3``): ``render`` writes the expression over the inputs,
        ``template`` the check around it (``{}`` or ``not {}``). The inputs it reads are guarded too."""
        for var in symbolic:
            for source, _ in var.sources:
                self.add_guard(source, data_only=True)  # (the decision is the expression, checked as such)
        self._symbolic_guards.append((render, template))

    def add_namespace_guard(self, render: Callable[[GuardBuilder], str]) -> None:
        """A check of the frame's namespaces rather than of one of its values (a name still undefined in its
        globals and builtins): ``render(builder)`` writes it."""
        self._symbolic_guards.append((render, "{}"))

    def pin_dimension(self, tensor: VariableBase, dim: int) -> None:
        """A dynamic dimension of an input was used as a Python value: guard its value for this entry."""
        self._pins.append((tensor, dim, tensor.value.shape[dim]))
        self.add_guard(tensor)

    def add_query_guard(self, query: Callable[[], Any], answer: Any) -> None:
        """The simulation used ``query()`` (a read of global state): re-ask it at every call."""
        if (query, answer) not in self._query_guards:
            self._query_guards.append((query, answer))

    # -- recording ---------------------------------------------------------------------------------------
    def _to_sir_arg(self, var: VariableBase) -> Any:
        if isinstance(var, SymbolicIntVariable):
            var = var.tensor  # a symbolic int is passed as its 0-D tensor (Paddle takes those in shapes)
        if isinstance(var, SymbolicSliceVariable):
            return slice(*(self._to_sir_arg(part) for part in var.parts))
        if isinstance(var, TensorVariable):
            self.check_not_stale(var)
            if var.tracker.is_traceable() and not var.is_rebound and var.symbol not in self.inputs:
                self.add_guard(var, data_only=True)  # (a program input: its values are the program's data)
                self.inputs[var.symbol] = var
            return var.symbol
        if isinstance(var, SequenceVariable):
            var.length()  # (the program is made for this many items: a list from outside guards its length)
            items = [self._to_sir_arg(item) for item in var.items]
            # A named tuple reaches the program as itself: the callee may tell it by its class
            # (``MultiHeadAttention`` takes a ``Cache`` and a ``StaticCache`` apart with ``isinstance``); a
            # `paddle.Size` holding a symbolic dimension as a plain list (a Size holds ints only).
            if issubclass(var.py_type, tuple):
                return var.py_type._make(items) if is_namedtuple_class(var.py_type) else tuple(items)
            if var.py_type is not list and any(isinstance(item, Symbol) for item in items):
                return list(items)
            return var.py_type(items)
        if isinstance(var, DictVariable):
            from .variables.container import has_tensor_key

            if any(has_tensor_key(key) for key in var.items):
                raise FallbackError("a dict keyed by tensors passed to a Paddle API is not simulated")
            return {key: self._to_sir_arg(item) for key, item in var.items.items()}
        if getattr(var, "created", False):
            raise FallbackError("an object created during simulation passed to a Paddle API")
        if isinstance(var, NumpyArrayVariable) and var.varies():
            # (a batch sliced from a dataset, ``paddle.to_tensor(x[i:i + 20])``: baked into the program, its
            # contents would be guarded, translated again for each batch until the cache limit)
            raise BreakGraphError("a numpy array whose contents change between calls, passed to a Paddle API, "
                                  "runs natively")
        if hasattr(var, "needs_identity"):
            var.needs_identity = True  # the very object is embedded in the program
        self.add_guard(var)
        return var.get_py_value()

    def call_tensor_op(self, kind: str, name: str, target: Any, args: list[VariableBase],
                       kwargs: dict[str, VariableBase]) -> VariableBase:
        """Record one statement; returns variables for its outputs, with meta inferred statically."""
        self.pending_warnings: tuple = ()  # (set by `_infer_cached` for a layer)
        if kind in ("layer", "pylayer") and self.reads_state_changed_in_frame(target):
            raise BreakGraphError(f"{name} called after a tensor it may read was changed in the frame (in place, "
                                  "or a layer's buffer rebound): runs natively")
        if kind == "api":
            sparse_gradients.check_function_call(self, target, args, kwargs)
            _check_no_new_leaf_requiring_grad(self, name, target, args, kwargs)
        if kind in ("api", "method"):
            _check_operands_eager_differentiates(self, name, kind, target, args, kwargs)
        if kind in ("api", "method"):
            self._pin_counted_axis(name, target, args, kwargs)
        op_amp = self._op_amp()
        # An op making a tensor without a dtype (``paddle.zeros([3])``, a layer built in the frame) makes it of the
        # default dtype as the program is built: a later ``paddle.set_default_dtype`` must translate again.
        self.add_query_guard(paddle.get_default_dtype, paddle.get_default_dtype())
        # (a symbolic float is a tensor only as an operator's operand, made so by `apply_operator`)
        args, kwargs = pin_floats(list(args)), pin_floats(dict(kwargs))
        symbolic = contains_symbolic(list(args)) or contains_symbolic(kwargs)
        if symbolic and kind not in ("api", "method"):
            # A layer's own code would see a 0-D tensor where the user passed an int: pass the int.
            args, kwargs, symbolic = pin_all(list(args)), pin_all(dict(kwargs)), False
        elif symbolic and target not in TAKES_SCALAR_TENSORS:
            args, kwargs = pin_direct(list(args), dict(kwargs))
            symbolic = contains_symbolic(args) or contains_symbolic(kwargs)
        n_inputs = len(self.inputs)
        try:
            sir_args, sir_kwargs, out_meta, weight = self._convert_and_infer(kind, name, target, args, kwargs,
                                                                             op_amp)
            if symbolic and not self._symbolic_meta_agrees(kind, name, target, args, kwargs, sir_args,
                                                           sir_kwargs, out_meta, op_amp):
                raise FallbackError(f"{name}: its static meta with a symbolic int is not this call's")
        except FallbackError as failure:
            if symbolic:
                # The API does not take a tensor where the int goes (a failure on zeros of its meta is no proof
                # of a user error either): pass the int; a real error shows again.
                args, kwargs = pin_all(list(args)), pin_all(dict(kwargs))
                if len(self.inputs) > n_inputs:
                    self.inputs = dict(list(self.inputs.items())[:n_inputs])
                try:
                    sir_args, sir_kwargs, out_meta, weight = self._convert_and_infer(kind, name, target, args,
                                                                                     kwargs, op_amp)
                except FallbackError as again:
                    # (``F.fold(p, output_sizes=x.shape[2:])``: the sizes pinned, static inference still
                    # rejects the -1 of ``p``: pinned too below)
                    failure = again
                else:
                    failure = None
            if failure is not None:
                if isinstance(failure, UserCodeError) or not self._pin_dynamic_tensors(name, [*args,
                                                                                           *kwargs.values()]):
                    raise failure
                # (static inference rejected a -1 where it checks a number, ``F.pixel_unshuffle``'s width:
                # inferred again with the dynamic dimensions pinned; a real error shows again)
                if len(self.inputs) > n_inputs:
                    self.inputs = dict(list(self.inputs.items())[:n_inputs])
                sir_args, sir_kwargs, out_meta, weight = self._convert_and_infer(kind, name, target, args,
                                                                                 kwargs, op_amp)
        if self._dynamic_meta_untrusted(kind, name, target, sir_args, sir_kwargs, out_meta, op_amp):
            self._pin_dynamic_tensors(name, [*args, *kwargs.values()])
            sir_args, sir_kwargs, out_meta, weight = self._convert_and_infer(kind, name, target, args, kwargs,
                                                                             op_amp)
        if not self.grad_mode:  # under no_grad eager outputs never require gradients
            out_meta = map_structure(lambda m: MetaInfo(m.shape, m.dtype, True), out_meta)
        outputs = map_structure(lambda meta: TensorVariable(meta, self, DummyTracker()), out_meta)
        if kind in ("api", "method"):  # (a layer may hand back its input itself, e.g. ``nn.Identity``)
            for output in leaves(outputs):
                if isinstance(output, TensorVariable):
                    output.fresh = True
        function = self.current_executor.code.co_name if self.current_executor is not None else None
        self.statements.append(Statement(kind, name, target, sir_args, sir_kwargs,
                                         plain(map_structure(lambda var: var.symbol, outputs)), self.location,
                                         function, no_grad=not self.grad_mode, weight=weight, amp=op_amp,
                                         frames=self._user_frames(),
                                         warnings=self.pending_warnings if kind == "layer" else ()))
        return self._wrap_outputs(outputs)

    def _dynamic_meta_untrusted(self, kind: str, name: str, target: Any, sir_args: tuple, sir_kwargs: dict,
                                out_meta: Any, amp: AmpState) -> bool:
        """Whether the op's static meta inference is wrong for a dynamic dimension of its inputs: inferred again
        with every dynamic dimension given a size (`DYNAMIC_PROBE_SIZE`), an output dimension inferred as a
        number from -1 comes out another number (``paddle.fft.rfft`` of ``[2, -1]`` gives ``[2, 1]``: n // 2 + 1
        of -1; the program built with it drops a later ``[..., :3]`` as a no-op: a wrong shape, silently), or
        an output's rank or dtype differs. The program would be built by the same static inference, so the
        dimensions must be numbers for this op (`_pin_dynamic_tensors`). A probe the op rejects proves nothing."""
        def sized(leaf: Any) -> Any:
            if not isinstance(leaf, Symbol):
                return leaf
            meta = self.metas[leaf]
            if -1 not in meta.shape:
                return meta
            return MetaInfo(tuple(DYNAMIC_PROBE_SIZE if dim < 0 else dim for dim in meta.shape), meta.dtype,
                            meta.stop_gradient)

        # (A layer with sublayers is not checked: its static build may grow with a size, an RNN unrolled.)
        checked = kind in ("api", "method") or (kind == "layer" and isinstance(target, LayerCall)
                                                 and target.is_alive() and not target.layer.sublayers())
        if not checked or not any(isinstance(leaf, Symbol) and -1 in self.metas[leaf].shape
                                  for leaf in leaves((sir_args, sir_kwargs))):
            return False
        sized_args, sized_kwargs = map_structure(sized, sir_args), {k: map_structure(sized, v)
                                                                    for k, v in sir_kwargs.items()}
        try:
            probe, _ = self._infer(kind, name, target, sized_args, sized_kwargs, amp, eager_check=False)
        except FallbackError:
            return False
        if not _metas_fit(out_meta, probe, static_sizes=True):
            return True

        def meta_of(leaf: Any) -> Any:
            return self.metas[leaf] if isinstance(leaf, Symbol) else leaf

        return _bakes_dynamic_sizes(kind, target, map_structure(meta_of, sir_args),
                                    {k: map_structure(meta_of, v) for k, v in sir_kwargs.items()},
                                    sized_args, sized_kwargs, amp)

    def _pin_dynamic_tensors(self, name: str, args: list[VariableBase]) -> bool:
        """Every dynamic dimension of the tensors among ``args`` becomes a number: an input's is pinned (its value
        guarded), a computed tensor's breaks the graph (its size is known only when the program runs). False:
        there was none."""
        pinned = False
        for var in _variable_leaves(args):
            if isinstance(var, TensorVariable) and -1 in var.meta.shape:
                if var.is_rebound:  # (its symbol is computed from the -1 of the input in the program)
                    raise BreakGraphError(f"{name} of a dynamic dimension of a tensor changed in place")
                if var.value is None:
                    raise BreakGraphError(f"{name} needs the dynamic dimensions of a computed tensor as numbers "
                                          "(its static meta inference is wrong for them): runs natively")
                var.concrete_shape()
                pinned = True
        return pinned

    def _pin_counted_axis(self, name: str, target: Any, args: list[VariableBase],
                          kwargs: dict[str, VariableBase]) -> None:
        """An op giving one output per index along an axis (``unbind``) needs that dimension as a number: a
        dynamic one is pinned (an input's: its value is guarded) or breaks the graph (a computed tensor's, or
        an input's changed in place)."""
        found = counted_axis(target, args, kwargs)
        if found is None or not isinstance(found[0], TensorVariable):
            return
        tensor, axis = found
        if -1 not in tensor.meta.shape:
            return
        axis = axis.get_py_value() if isinstance(axis, VariableBase) else axis
        if isinstance(axis, int) and -len(tensor.meta.shape) <= axis < len(tensor.meta.shape) \
                and tensor.meta.shape[axis] == -1:
            if tensor.is_rebound:  # (its symbol is computed from the -1 of the input in the program)
                raise BreakGraphError(f"{name} of a dynamic dimension of a tensor changed in place")
            tensor.concrete_shape()

    def layer_state_changed_in_frame(self, layer: Any) -> bool:
        """Whether the frame changed, before calling the built-in ``layer``, state its forward reads through
        the very variables a simulation of that forward reads: an attribute stored on the layer or a sublayer
        (a rebound buffer, a ``training`` flag) or one of their parameters or buffers changed in place or made
        to require gradients (one variable per tensor from outside: the statement's outputs would be inferred
        from the old flag). Its forward is simulated then (`simulate_forward`); a change
        through another tensor sharing memory with the layer's is not seen that way
        (`reads_state_changed_in_frame` breaks the graph for it)."""
        changed = [*self.side_effects.changed_tensors(), *self.made_to_require_grad]
        if not changed and not self.side_effects.has_attr_stores():
            return False  # (the common case: nothing to look for in the layer's tree)
        layers = layer.sublayers(include_self=True)
        if self.side_effects.has_attr_stores() and any(self.side_effects.has_attrs_of(sub) for sub in layers):
            return True
        own = {id(tensor) for sub in layers for store in ("_parameters", "_buffers")
               for tensor in (sub.__dict__.get(store) or {}).values() if tensor is not None}
        return any(var.value is not None and id(var.value) in own for var in changed)

    def may_have_read(self, var: TensorVariable) -> bool:
        """Whether a statement recorded so far may have read the tensor of ``var`` (from outside the frame)
        other than as a graph input: one that may read any tensor (`Statement.may_read_any_tensor`), or a
        built-in layer reading it as one of its parameters or buffers. A layer found apart from the tensor stays so at later calls (guarded: the same path may
        reach one of its parameters then)."""
        for statement in self.statements:
            if statement.may_read_any_tensor():
                return True
            target = statement.target
            if not isinstance(target, LayerCall):
                continue
            if not tensor_apart_from_layer(var.value, target):
                return True
            self._keep_apart_from_layer(var, target)
        return False

    def _keep_apart_from_layer(self, var: TensorVariable, call: LayerCall) -> None:
        """Guards that the tensor reached as ``var`` stays apart from the layer of ``call``."""
        self.add_guard(var)
        self._apart_from_layers.append((var, call))

    def reads_state_changed_in_frame(self, target: Any) -> bool:
        """Whether a built-in layer's (or a PyLayer's) statement may read, inside the program, a tensor the frame
        changed in place, a buffer it rebound, or any attribute it stored on the layer or a sublayer: the program
        would see the old value (all are written back after it). A built-in layer reads only its own parameters
        and buffers (and its sublayers'); a PyLayer's forward may read anything."""
        if isinstance(target, LayerCall) and self.layer_state_changed_in_frame(target.layer):
            return True  # (e.g. a ``training`` flag ``eval()`` stored: the program would miss it)
        changed = self.side_effects.changed_tensors()
        if not changed and not self.side_effects.tensor_stored_on_a_layer():
            return False
        if not isinstance(target, LayerCall) or self.side_effects.tensor_stored_on_a_layer(target.layer):
            return True
        for var in changed:
            if var.value is None or not var.tracker.is_traceable() or not tensor_apart_from_layer(var.value, target):
                return True
        # The changed tensors are none of the layer's (checked again at every call: the layer's parameters
        # may be replaced, the tensor reached by the same path may be another one).
        for var in changed:
            self._keep_apart_from_layer(var, target)
        return False

    def _convert_and_infer(self, kind: str, name: str, target: Any, args: list[VariableBase],
                           kwargs: dict[str, VariableBase], amp: AmpState) -> tuple[tuple, dict, Any, int]:
        sir_args = tuple(self._to_sir_arg(a) for a in args)
        sir_kwargs = {k: self._to_sir_arg(v) for k, v in kwargs.items()}

        def meta_of(leaf: Any) -> Any:
            return self.metas[leaf] if isinstance(leaf, Symbol) else leaf

        meta_args = map_structure(meta_of, sir_args)
        meta_kwargs = {k: map_structure(meta_of, v) for k, v in sir_kwargs.items()}
        out_meta, weight = self._infer(kind, name, target, meta_args, meta_kwargs, amp)
        return sir_args, sir_kwargs, out_meta, weight

    def _symbolic_meta_agrees(self, kind: str, name: str, target: Any, args: list[VariableBase],
                              kwargs: dict[str, VariableBase], sir_args: tuple, sir_kwargs: dict, out_meta: Any,
                              amp: AmpState) -> bool:
        """Whether the outputs inferred with the symbolic ints as 0-D tensors fit those of this call's values
        (same structure, ranks and dtypes; a static dimension equal). Some static APIs infer less than their
        eager form from a tensor in a shape (``F.affine_grid(theta, [n, c, h, w])`` gives a rank-5 grid where
        eager's has rank 4): the int is then passed instead (pinned; a dimension of a computed tensor cannot
        be, the graph breaks there), or every op after it is mis-inferred and the frame falls back."""
        from .variables.symbolic_int import SymbolicIntVariable

        from .variables.inplace import DYNAMIC_STAND_IN

        values: dict[Symbol, int] = {}
        stand_in = False
        for var in _variable_leaves([*args, *kwargs.values()]):
            if isinstance(var, SymbolicIntVariable):
                # (a dimension of a computed tensor has no value here: a stand-in size shows ranks and dtypes)
                values[var.tensor.symbol] = DYNAMIC_STAND_IN if var.known is None else var.known
                stand_in = stand_in or var.known is None

        def concrete(leaf: Any) -> Any:
            if isinstance(leaf, Symbol):
                return values[leaf] if leaf in values else self.metas[leaf]
            return leaf

        try:
            expected, _ = self._infer(kind, name, target, map_structure(concrete, sir_args),
                                      {k: map_structure(concrete, v) for k, v in sir_kwargs.items()}, amp)
        except FallbackError:
            return True  # (the int is not taken either: nothing better known)
        return _metas_fit(out_meta, expected, static_sizes=not stand_in)

    def _op_amp(self) -> AmpState:
        """The AMP state the next statement's ops are built under (off where eager would not cast)."""
        if not self.amp_state.enabled:
            return AMP_OFF
        place = paddle.base.framework._current_expected_place()
        self.add_query_guard(paddle.base.framework._current_expected_place, place)
        return op_amp_state(self.amp_state)

    def _infer(self, kind: str, name: str, target: Any, args: tuple, kwargs: dict,
               amp: AmpState = AMP_OFF, eager_check: bool = True) -> tuple[Any, int]:
        """Output metas of the call, and how many ops it puts in a program (a layer is many ops).
        ``eager_check=False``: a failure is never checked against an eager run (a probe's sizes)."""
        if amp.enabled or ambient_amp_enabled():
            with amp_applied(amp):
                return self._infer_cached(kind, name, target, args, kwargs, amp, eager_check)
        return self._infer_cached(kind, name, target, args, kwargs, amp, eager_check)

    def _infer_cached(self, kind: str, name: str, target: Any, args: tuple, kwargs: dict,
                      amp: AmpState, eager_check: bool = True) -> tuple[Any, int]:
        key, by_identity = _meta_key(kind, target, args, kwargs, amp)
        if key is not None and key in _meta_cache:
            owner, cached = _meta_cache[key]
            if owner is None or owner() is target:
                self.pending_warnings = _layer_warnings.get(key, ())
                return cached
        call = _static_callable(kind, target)
        op_count: list[int] = []
        layer_warnings: list[LayerWarning] | None = [] if kind == "layer" else None
        configuration = _configuration(kind, target) if key is not None else None
        try:
            result = infer_meta(call, args, kwargs, to_static=(kind == "layer"), op_count=op_count,
                                layer_warnings=layer_warnings)
        except MetaInferenceError as exc:
            if kind != "layer" and eager_check and _fails_eagerly(call, args, kwargs, _divides(target)):
                # (a layer is not run: its state)
                raise UserCodeError(f"user code raised in {name}: {exc}", self.location) from None
            raise FallbackError(f"{name}: {exc}", self.location) from None
        if _rejects_mixed_float_dtypes(kind, call, args, kwargs):
            raise UserCodeError(f"user code raised in {name}: its inputs mix floating dtypes", self.location)
        # An api/method call counts as one op; a layer or PyLayer as the kernels it adds to the program.
        weight = max(1, op_count[0]) if op_count and kind in ("layer", "pylayer") else 1
        answer = (result, weight)
        if layer_warnings:
            self.pending_warnings = tuple(layer_warnings)
            if key is not None:
                _layer_warnings[key] = self.pending_warnings
        # Not memoized when the forward rewrote its layer's configuration (``BatchNorm1D``'s 'NCL' data format
        # becomes 'NCHW' on the first call): an alike layer that never ran must run it too before its guard
        # snapshots the configuration, or the snapshot would be stale after the first run (a miss).
        if key is not None and configuration == _configuration(kind, target):
            _meta_cache[key] = (_reference(target) if by_identity else None, answer)
        return answer

    def _user_frames(self) -> tuple[tuple[str, int, str], ...]:
        """The simulated call stack now, outermost first (see `Statement.frames`)."""
        frames = []
        executor = self.current_executor
        while executor is not None:
            if executor.lineno:
                frames.append((executor.code.co_filename, executor.lineno, executor.code.co_name))
            executor = executor.parent
        return tuple(reversed(frames))

    def _wrap_outputs(self, outputs: Any) -> VariableBase:
        if is_namedtuple(outputs):  # e.g. ``paddle.topk``'s TopKRetType: unpacked or read by field name
            from .variables.container import NamedTupleVariable

            return NamedTupleVariable.of_class(type(outputs), [self._wrap_outputs(o) for o in outputs], self)
        if type(outputs) is tuple:
            return TupleVariable([self._wrap_outputs(o) for o in outputs], self, DummyTracker())
        if type(outputs) is list:
            return ListVariable([self._wrap_outputs(o) for o in outputs], self, DummyTracker())
        return outputs

    def truncate(self, n_statements: int, n_inputs: int) -> None:
        """Drop what was recorded after a checkpoint (an instruction that turned out to break the graph)."""
        del self.statements[n_statements:]
        if len(self.inputs) > n_inputs:
            self.inputs = dict(list(self.inputs.items())[:n_inputs])

    def run_user_python(self, fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]) -> Any:
        """Run a pure Python computation of user code on known values (constant folding)."""
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            # Eager execution of the frame raises the same exception, with the user's traceback.
            raise UserCodeError(f"user code raised {type(exc).__name__}: {exc}", self.location,
                                original=exc) from None

    def build_sir(self, outputs: list[Symbol]) -> StatementIR:
        from .variables.inplace import OldValueVariable

        inputs = list(self.inputs)
        made_differentiable = tuple(i for i, symbol in enumerate(inputs)
                                    if isinstance(self.inputs[symbol], OldValueVariable))
        return StatementIR(self.name, inputs, list(self.statements), outputs, dict(self.metas),
                           grad_enabled=self.grad_enabled, written_back=self._written_back(inputs, outputs),
                           made_differentiable=made_differentiable)

    def _written_back(self, inputs: list[Symbol], outputs: list[Symbol]) -> tuple[tuple[int, int, int, bool], ...]:
        """`StatementIR.written_back`: the outputs that are final values of tensors from outside changed in place
        (with the input the caller's tensor is given as: its constant one, or the one standing for it made to
        require grad, `OldValueVariable`, when the op changing it is its only reader)."""
        from .variables.inplace import OldValueVariable, saver_in_graph

        found = []
        for var in self.side_effects.changed_tensors():
            if var.symbol not in outputs:
                continue
            given = [i for i, symbol in enumerate(inputs) if symbol == var.history[0] or (
                isinstance(self.inputs[symbol], OldValueVariable) and self.inputs[symbol].source is var)]
            if given:
                found.append((outputs.index(var.symbol), given[0], len(var.history) - 1,
                              saver_in_graph(var) is not None))
        return tuple(sorted(found))

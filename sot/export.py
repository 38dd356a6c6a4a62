"""`sot.export`: save the graph sot captured from one call, for inference with ``paddle.jit.load``.

How it works:

1. The call is translated afresh (the function's code object is copied, so an existing cache entry of the
   user's function is neither used nor disturbed) with ``min_graph_size=0``, listening to translations the
   way `sot.explain` does. The frame of ``fn`` must come out as one compiled graph, and nothing in the call
   may break the graph or fall back; otherwise `ExportError` lists every break and fallback with its reason
   and user ``file:line``.
2. While that call runs, the compiled program records the tensors it is called with and returns. Each SIR
   input is then either one of the example input tensors (it becomes an input of the saved model) or
   something the graph read from elsewhere: a parameter used directly (``paddle.matmul(x, self.w)``), a
   buffer, a global tensor. Those are baked into the saved model as persistable variables. Parameters and
   buffers of built-in layers the SIR calls as ``layer`` statements (Linear, Conv2D, BatchNorm...) are
   baked the same way, since the layer is called inside the program.
3. A small `paddle.nn.Layer` replays the SIR (`run_sir`, the interpreter sot compiles with) on those
   values; ``paddle.jit.save`` builds it with ``to_static(full_graph=True)`` and saves program and
   parameters. A ``pylayer`` statement is rebuilt with ``static_pylayer`` as in sot's own programs.

The saved model takes the tensors of ``example_inputs`` (flattened, in order; also one the graph does not
read, in which case the program is saved unpruned) as inputs, with their shapes and dtypes, and returns the
tensors of the function's result (flattened, in order, also through a ``dict`` subclass such as a
``ModelOutput`` and a dataclass; a single tensor when there is one). Non-tensor
arguments are constants of the graph (sot guarded them), as are non-tensor results (dropped from the
outputs). A Layer is exported in the mode it is in: call ``.eval()`` first for inference (dropout off, batch
norm on running statistics).
"""
from __future__ import annotations

import collections
import dataclasses
import types
from typing import Any, Callable, Iterator

import paddle

from .errors import SotError
from .symbolic.build_warnings import build_warnings_ignored
from .symbolic.compile import BUILD_LOCK
from .symbolic.pytree import leaves
from .symbolic.sir import LayerCall
from .symbolic.zero_sign import holds_unrepresentable_zero


class ExportError(SotError):
    """``sot.export`` could not capture the call as one whole graph; ``problems`` says why and where."""

    def __init__(self, message: str, problems: list[ExportProblem] | None = None) -> None:
        super().__init__(message)
        self.problems = problems or []


@dataclasses.dataclass
class ExportProblem:
    """One reason the call was not captured whole."""

    kind: str  # "graph break", "fallback", "eager frame", ...
    function: str
    location: str | None
    reason: str

    def __str__(self) -> str:
        return f"{self.kind} in {self.function} at {self.location or '?'}: {self.reason}"


@dataclasses.dataclass
class ExportedProgram:
    """What `export` saved: load it with ``paddle.jit.load(path)``."""

    path: str
    sir: Any  # the StatementIR that was saved
    input_spec: list[paddle.static.InputSpec]
    num_outputs: int
    baked: list[str]  # names of the parameters/buffers read directly by the graph, saved with it

    def __str__(self) -> str:
        inputs = ", ".join(f"{list(s.shape)} {str(s.dtype).replace('paddle.', '')}" for s in self.input_spec)
        return (f"sot.export: {self.path} ({len(self.sir)} statements; inputs: {inputs or 'none'}; "
                f"{self.num_outputs} output(s))")


# -- translating one call ---------------------------------------------------------------------------------
def _fresh_function(function: types.FunctionType) -> types.FunctionType:
    """A copy of ``function`` with a new (equal) code object: a translation of its own, no cache entry."""
    copy = types.FunctionType(function.__code__.replace(), function.__globals__, function.__name__,
                              function.__defaults__, function.__closure__)
    copy.__kwdefaults__ = function.__kwdefaults__
    copy.__qualname__ = function.__qualname__
    copy.__dict__.update(function.__dict__)
    return copy


class _Target:
    """The callable to translate for ``fn``, with a fresh code object for its frame."""

    def __init__(self, fn: Any) -> None:
        fn = getattr(fn, "__sot_translated__", fn)
        self.layer: paddle.nn.Layer | None = None
        self._saved_forward: Any = None
        if isinstance(fn, paddle.nn.Layer):
            self.layer = fn
            forward = fn.forward
            function = getattr(forward, "__func__", None)
            if not isinstance(function, types.FunctionType):
                raise TypeError(f"sot.export: the forward of {type(fn).__name__} is not a Python method")
            self.function = _fresh_function(function)
            self.name = f"{type(fn).__name__}.forward"
        elif isinstance(fn, types.MethodType) and isinstance(fn.__func__, types.FunctionType):
            self.function = _fresh_function(fn.__func__)
            self.callable = types.MethodType(self.function, fn.__self__)
            self.name = fn.__func__.__qualname__
        elif isinstance(fn, types.FunctionType):
            self.function = self.callable = _fresh_function(fn)
            self.name = fn.__qualname__
        else:
            raise TypeError(f"sot.export expects a Python function, a bound method or a paddle.nn.Layer, got "
                            f"{type(fn).__name__}")
        self.code = self.function.__code__

    def __enter__(self) -> Callable[..., Any]:
        layer = self.layer
        if layer is None:
            return self.callable
        # ``Layer.__call__`` (hooks and all) calls ``self.forward``: an instance attribute overrides it.
        self._saved_forward = layer.__dict__.get("forward")
        object.__setattr__(layer, "forward", types.MethodType(self.function, layer))
        return layer

    def __exit__(self, *exc: Any) -> None:
        if self.layer is not None:
            if self._saved_forward is not None:
                object.__setattr__(self.layer, "forward", self._saved_forward)
            else:
                del self.layer.__dict__["forward"]


def _recording_class(base: type) -> type:
    """A subclass of ``CompiledProgram`` (or `ProgramParts`) whose calls remember their inputs and outputs."""

    class Recording(base):  # type: ignore[misc, valid-type]
        def __call__(self, inputs: list) -> list:
            outputs = base.__call__(self, inputs)
            self.__dict__.setdefault("_sot_export_calls", []).append((list(inputs), list(outputs)))
            return outputs

    Recording.__name__ = Recording.__qualname__ = base.__name__
    return Recording


def _describe(code: types.CodeType | None) -> str:
    from .opcode_translator.transform import describe_code

    return describe_code(code) if code is not None else "?"


def _capture(fn: Any, example_inputs: tuple) -> tuple[Any, Any, list, list, Any]:
    """Translate one call; return (target, translation, program inputs, program outputs, result)."""
    from .config import config
    from .opcode_translator.callback import add_listener, remove_listener
    from .symbolic.compile import CompiledProgram
    from .symbolic.gradient_parts import ProgramParts
    from .translate import symbolic_translate

    target = _Target(fn)
    records: list[tuple[types.CodeType, Any]] = []
    swapped: list[tuple[Any, type]] = []

    def listen(translation: Any, frame: Any) -> None:
        records.append((frame.code, translation))
        program = translation.program
        if isinstance(program, (CompiledProgram, ProgramParts)) and not any(p is program for p, _ in swapped):
            try:  # never let an export problem escape into the frame callback
                program.__class__ = _recording_class(type(program))
            except TypeError:
                return  # not recorded: reported below as a graph that did not run
            swapped.append((program, type(program).__mro__[1]))

    add_listener(listen)
    try:
        with config.patch(min_graph_size=0), target as callable_:
            result = symbolic_translate(callable_, training=False)(*example_inputs)
    finally:
        remove_listener(listen)
        calls: dict[int, list] = {}
        for program, cls in swapped:
            calls[id(program)] = program.__dict__.pop("_sot_export_calls", [])
            program.__class__ = cls

    problems: list[ExportProblem] = []
    separate: list[ExportProblem] = []  # only worth reporting when nothing broke (resume functions do this)
    own: list[Any] = []
    for code, translation in records:
        failure = translation.failure
        if translation.kind in ("break", "fallback"):
            kind = "graph break" if translation.kind == "break" or translation.is_break else "fallback"
            location = str(failure.location) if failure is not None and failure.location else None
            reason = failure.reason if failure is not None else "unknown"
            problems.append(ExportProblem(kind, _describe(code), location, reason))
        elif code is target.code:
            own.append(translation)
        elif translation.sir is not None and translation.sir.statements:
            where = f"{code.co_filename}:{code.co_firstlineno}"
            separate.append(ExportProblem("separate frame", _describe(code), where,
                                          f"{len(translation.sir)} tensor op(s) ran in a frame of their own, "
                                          "outside the graph of the exported function"))
    problems = problems or separate
    if problems:
        lines = "\n".join(f"  - {p}" for p in problems)
        raise ExportError(f"sot.export: {target.name} was not captured as one whole graph "
                          f"({len(problems)} problem(s)):\n{lines}", problems)
    if not own:
        raise ExportError(f"sot.export: {target.name} was not translated (is it skipped, e.g. by "
                          "sot.skip_function or the skip-files policy?)")
    translation = own[-1]
    if len(own) > 1 or translation.kind != "compiled" or translation.program is None:
        if translation.kind == "eager":
            raise ExportError(f"sot.export: {target.name} performs no tensor operation on its inputs: "
                              "there is no graph to export")
        raise ExportError(f"sot.export: {target.name} was translated {len(own)} times in one call "
                          f"(last: {translation.kind}); expected exactly one compiled graph")
    if holds_unrepresentable_zero(translation.sir):
        raise ExportError(f"sot.export: a constant of the graph of {target.name} is a float zero of the sign a "
                          "static program cannot hold (see sot/symbolic/zero_sign.py): the saved model would "
                          "compute with the other sign")
    program_calls = calls.get(id(translation.program), [])
    if len(program_calls) != 1:
        raise ExportError(f"sot.export: the compiled graph of {target.name} ran {len(program_calls)} times "
                          "in one call; expected once")
    inputs, outputs = program_calls[0]
    return target, translation, inputs, outputs, result


# -- the layer that is saved ------------------------------------------------------------------------------
@paddle.jit.not_to_static
def _replay(owner: _ExportedGraph, feeds: tuple) -> Any:
    from .symbolic.sir import run_sir

    def value(source: tuple[str, Any]) -> Any:
        kind, key = source
        if kind == "feed":
            return feeds[key]
        return getattr(owner, key)  # a parameter or buffer, converted to a static value by to_static

    values = run_sir(owner._sot_sir, [value(source) for source in owner._sot_inputs])
    results: list[Any] = []
    for kind, key in owner._sot_results:
        result = values[key] if kind == "output" else value((kind, key))
        if kind != "output" or any(result is seen for seen in results) or _defined_by_scale(result):
            # An input returned as is needs an op producing it; ``paddle.jit.save`` keeps one output per
            # distinct value; and Paddle's ``normalize_pir_program`` replaces a fetched value made by a
            # ``scale`` op of factor 1 with the op's input, dropping its bias (``x + 1`` would save as
            # ``x``): a copy keeps every output what the graph computed.
            result = paddle.assign(result)
        results.append(result)
    return results[0] if len(results) == 1 else tuple(results)


def _defined_by_scale(value: Any) -> bool:
    get_op = getattr(value, "get_defining_op", None)
    if get_op is None:
        return False
    op = get_op()
    return op is not None and op.name() == "pd_op.scale"


class _ExportedGraph(paddle.nn.Layer):
    """The captured SIR as a Layer: built-in layers it calls are sublayers, tensors it reads are its
    parameters and persistable buffers, so ``paddle.jit.save`` stores all of them with the program."""

    def __init__(self, sir: Any, inputs: list[tuple[str, Any]], results: list[tuple[str, Any]],
                 constants: dict[str, paddle.Tensor], layers: list[paddle.nn.Layer]) -> None:
        super().__init__()
        object.__setattr__(self, "_sot_sir", sir)
        object.__setattr__(self, "_sot_inputs", inputs)
        object.__setattr__(self, "_sot_results", results)
        for index, layer in enumerate(layers):
            self.add_sublayer(f"layer_{index}", layer)
        for name, tensor in constants.items():
            if isinstance(tensor, paddle.base.framework.EagerParamBase):
                self.add_parameter(name, tensor)
            else:
                self.register_buffer(name, tensor, persistable=True)

    def forward(self, *feeds: Any) -> Any:  # replaced by `_with_arity` (to_static needs named arguments)
        return _replay(self, feeds)


def _with_arity(n_feeds: int) -> type:
    """`_ExportedGraph` whose ``forward`` takes ``input_0, ..., input_{n-1}``."""
    names = ", ".join(f"input_{i}" for i in range(n_feeds))
    params = f"self, {names}" if names else "self"
    source = f"def forward({params}):\n    return _replay(self, ({names}{',' if names else ''}))\n"
    namespace: dict[str, Any] = {"_replay": _replay}
    exec(compile(source, "<sot.export>", "exec"), namespace)
    forward = paddle.jit.not_to_static(namespace["forward"])  # traced as is, like sot's own SIR runner
    return type("ExportedGraph", (_ExportedGraph,), {"forward": forward, "__module__": __name__})


def _statement_layers(sir: Any) -> list[paddle.nn.Layer]:
    found: dict[int, paddle.nn.Layer] = {}
    for stmt in sir.statements:
        for leaf in leaves((stmt.target, stmt.args, stmt.kwargs)):
            if isinstance(leaf, LayerCall):
                leaf = leaf.layer
            if isinstance(leaf, paddle.nn.Layer):
                found.setdefault(id(leaf), leaf)
    return list(found.values())


def _result_leaves(result: Any) -> Iterator[Any]:
    """The leaves of what the function returns, also through the structures models return: a ``dict``
    subclass (an HF/PaddleNLP ``ModelOutput``: its items, in order) and a dataclass (its fields)."""
    for leaf in leaves(result):
        if isinstance(leaf, dict):
            mapping_type = collections.OrderedDict if isinstance(leaf, collections.OrderedDict) else dict
            yield from _result_leaves(list(mapping_type.values(leaf)))  # (the items, past the class's methods)
        elif dataclasses.is_dataclass(leaf) and not isinstance(leaf, type):
            yield from _result_leaves([getattr(leaf, field.name) for field in dataclasses.fields(leaf)])
        else:
            yield leaf


def _build(translation: Any, inputs: list, outputs: list, result: Any, example_inputs: tuple) -> \
        tuple[_ExportedGraph, list[paddle.static.InputSpec], list[str]]:
    sir = translation.sir
    feeds = [leaf for leaf in leaves(list(example_inputs)) if isinstance(leaf, paddle.Tensor)]

    def feed_index(tensor: Any) -> int | None:
        return next((i for i, feed in enumerate(feeds) if feed is tensor), None)

    constants: dict[str, paddle.Tensor] = {}
    constant_names: dict[int, str] = {}

    def constant(tensor: paddle.Tensor) -> str:
        name = constant_names.get(id(tensor))
        if name is None:
            name = constant_names[id(tensor)] = f"const_{len(constants)}"
            constants[name] = tensor
        return name

    sources: list[tuple[str, Any]] = []
    for symbol, tensor in zip(sir.inputs, inputs):
        index = feed_index(tensor)
        if index is not None:
            sources.append(("feed", index))
        elif isinstance(tensor, paddle.Tensor):
            sources.append(("const", constant(tensor)))
        else:
            raise ExportError(f"sot.export: input {symbol} of the graph is a {type(tensor).__name__}, "
                              "not a tensor")
    results: list[tuple[str, Any]] = []
    for leaf in _result_leaves(result):
        if not isinstance(leaf, paddle.Tensor):
            continue
        position = next((i for i, out in enumerate(outputs) if out is leaf), None)
        if position is not None:
            results.append(("output", position))
        elif feed_index(leaf) is not None:
            results.append(("feed", feed_index(leaf)))
        else:
            results.append(("const", constant(leaf)))
    if not results:
        raise ExportError("sot.export: the function returns no tensor; there is nothing to save as outputs")
    layer = _with_arity(len(feeds))(sir, sources, results, constants, _statement_layers(sir))
    specs = [paddle.static.InputSpec(list(feed.shape), feed.dtype, f"input_{i}") for i, feed in enumerate(feeds)]
    baked = [getattr(tensor, "name", name) for name, tensor in constants.items()]
    return layer, specs, baked


def export(fn_or_layer: Any, *example_inputs: Any, path: str) -> ExportedProgram:
    """Translate one call of ``fn_or_layer(*example_inputs)``; if it is captured as one whole graph, save
    that graph with ``paddle.jit.save`` to ``path`` (``paddle.jit.load(path)`` runs it), else raise
    `ExportError` listing every graph break and fallback with its reason and ``file:line``."""
    if not isinstance(path, str) or not path:
        raise ValueError("sot.export needs path=... (a directory/prefix string, as for paddle.jit.save)")
    if not paddle.in_dynamic_mode():
        raise RuntimeError("sot.export must be called in dynamic (eager) mode")
    target, translation, inputs, outputs, result = _capture(fn_or_layer, example_inputs)
    layer, specs, baked = _build(translation, inputs, outputs, result, example_inputs)
    # Saving builds a static program through Paddle's process-wide default programs, switching this thread to
    # static mode meanwhile, as sot's own builds do: one build at a time, and threads starting meanwhile start
    # in dygraph mode (`BUILD_LOCK`).
    with BUILD_LOCK, build_warnings_ignored():
        # Paddle refuses to prune a program with an input no output depends on; such an input (an unused
        # argument, a tensor passed twice) stays an input of the saved model, so skip pruning then.
        used = {key for kind, key in layer._sot_inputs + layer._sot_results if kind == "feed"}
        paddle.jit.save(layer, path, input_spec=specs, skip_prune_program=len(used) < len(specs))
    return ExportedProgram(path, translation.sir, specs, len(layer._sot_results), baked)


export.ExportError = ExportError  # type: ignore[attr-defined]  # ``sot.export`` is this function

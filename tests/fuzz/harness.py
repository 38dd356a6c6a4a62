"""Run a generated program eagerly and translated, and compare everything observable.

For each program: the eager runs on input sets A and B are the oracle; then, after ``sot.reset()`` and under
the program's ``min_graph_size``, the translated function runs on A, A (cache hit), B (guards) and A again,
each time on fresh copies of the inputs and with the module globals reset in place. Compared: the return
value (tensors to a tolerance but the sign of zeros exactly, with dtype, shape and ``stop_gradient``;
identity with the inputs and aliasing inside the result), the raised exception (type and message), printed
output, the inputs after the call (lists, dicts, object attributes, tensors mutated in place), the module
globals, and the gradients of ``w`` (and of the parameter of ``GATE``) after ``backward()`` of the returned
differentiable tensors.
"""
from __future__ import annotations

import contextlib
import dataclasses
import io
import linecache
import math
import re
import signal
import traceback
import types
from typing import Any, Iterator

import numpy as np
import paddle

import sot
from sot.symbolic.compile import forced_way

from .generator import PRELUDE, InputSet, Program, generate

RTOL, ATOL = 1e-4, 1e-5
TIMEOUT = 30  # seconds for one program (all its runs)


class Timeout(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    def on_alarm(signum: int, frame: Any) -> None:
        raise Timeout(f"program did not finish within {seconds}s")

    try:
        previous = signal.signal(signal.SIGALRM, on_alarm)
    except ValueError:  # not the main thread
        yield
        return
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def load_module(source: str, name: str) -> dict[str, Any]:
    filename = f"<fuzz {name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace: dict[str, Any] = {"__name__": f"fuzz_{name.replace('-', '_')}", "__builtins__": __builtins__}
    exec(compile(source, filename, "exec"), namespace)
    return namespace


def tensor(values: list[float], stop_gradient: bool = True) -> paddle.Tensor:
    t = paddle.to_tensor(np.array(values, dtype="float32"))
    t.stop_gradient = stop_gradient
    return t


def prepare(ns: dict[str, Any], inputs: InputSet) -> dict[str, Any]:
    """Reset the module globals in place and build fresh argument values."""
    ns["COUNTER"] = 0
    ns["GLIST"][:] = []
    ns["GDICT"].clear()
    ns["GSCALE"] = inputs.gscale
    ns["GT"] = None
    if "GCACHE" in ns:  # (the programs from generator.CACHES_FROM on)
        ns["GCACHE"].clear()
    ns["ADD"] = ns["make_adder"](inputs.adder)
    if "GATE" in ns:  # (the programs from generator.OPS_FROM on)
        gate = ns["GATE"]
        gate.train()
        gate.scale = 2.0
        with paddle.no_grad():
            gate.alpha.set_value(paddle.full([1], 0.5))
        gate.alpha.clear_gradient(False)
    gobj = ns["GOBJ"]
    gobj.__dict__.clear()
    gobj.__dict__.update(a=inputs.gobj_a, t=paddle.ones([inputs.n_elems]), items=[inputs.gobj_a])
    obj = ns["Obj"](inputs.obj_a, tensor(inputs.obj_t))
    args = dict(x=tensor(inputs.x), y=tensor(inputs.y), w=tensor(inputs.w, stop_gradient=False), n=inputs.n,
                s=inputs.s, lst=list(inputs.lst), d=dict(inputs.d), obj=obj, tl=[tensor(t) for t in inputs.tl])
    shaped = inputs.shaped
    if shaped is not None:  # (the programs from generator.SHAPES_FROM on)
        args.update(xm=tensor(shaped.xm), xs=tensor(shaped.xs), wm=tensor(shaped.wm, stop_gradient=False),
                    ix=paddle.to_tensor(np.array(shaped.ix, dtype="int64")),
                    ci=paddle.to_tensor(np.array(shaped.ci, dtype="int32")))
    return args


class Snapshot:
    """Turns values into comparable trees, recording identity: a value met twice becomes an alias of the first
    path; the call's own arguments and module objects become references by name."""

    def __init__(self, known: dict[int, str]) -> None:
        self.known = known
        self.seen: dict[int, str] = {}
        self.keep: list[Any] = []  # keep ids stable while snapshotting

    def __call__(self, value: Any, path: str = "") -> Any:
        if id(value) in self.known and not isinstance(value, (int, float, str, bool, type(None))):
            ref = ("ref", self.known[id(value)])
            if isinstance(value, (list, dict, paddle.Tensor)) or hasattr(value, "__dict__"):
                return ref  # its contents are compared through the state snapshot
        if isinstance(value, (list, dict, paddle.Tensor)) or hasattr(value, "__dict__"):
            if id(value) in self.seen:
                return ("alias", self.seen[id(value)])
            self.seen[id(value)] = path or "<root>"
            self.keep.append(value)
        if isinstance(value, paddle.Tensor):
            return ("tensor", str(value.dtype), tuple(value.shape), value.numpy().copy(), value.stop_gradient)
        if isinstance(value, (list, tuple)):
            return (type(value).__name__, [self(v, f"{path}[{i}]") for i, v in enumerate(value)])
        if isinstance(value, dict):
            return ("dict", [(k, self(v, f"{path}[{k!r}]")) for k, v in value.items()])
        if isinstance(value, (bool, int, float, str, type(None))):
            return value
        if isinstance(value, (set, frozenset)):  # (the iteration order of a rebuilt set is a known bug: see
            return (type(value).__name__, sorted(map(repr, value)))  # test_a_set_built_in_the_frame_...)
        if hasattr(value, "__dict__"):
            return (type(value).__name__, self(dict(vars(value)), f"{path}.__dict__"))
        return ("repr", type(value).__name__, repr(value))


@dataclasses.dataclass
class Outcome:
    result: Any
    error: tuple[str, str] | None
    stdout: str
    state: Any
    grad: Any
    where: tuple | None = None  # (function, line) of each frame of the program's own file for an exception
    tb: str = ""

    def brief(self) -> str:
        if self.error:
            return f"raised {self.error[0]}: {self.error[1]}"
        return "returned"


def normalize_message(message: str) -> str:
    """Paddle names tensors with a global counter (``generated_tensor_13``), and a backward refused after an
    in-place change quotes the tensor's version counters, which a module parameter (``GATE.alpha``) carries
    from one run to the next: neither is part of the behaviour."""
    message = re.sub(r"generated_tensor_\d+", "generated_tensor_N", message)
    return re.sub(r"(version is |expected version is |tensor_version:|wrapper_version_snapshot:)\d+", r"\1N",
                  message)


def run_once(fn: Any, ns: dict[str, Any], inputs: InputSet) -> Outcome:
    args = prepare(ns, inputs)
    known = {id(v): name for name, v in args.items()}
    known.update({id(ns[g]): g for g in ("GLIST", "GDICT", "GOBJ")})
    out = io.StringIO()
    error = None
    where, tb_text = None, ""
    result: Any = None
    with contextlib.redirect_stdout(out):
        try:
            result = fn(**args)
        except Timeout:
            raise
        except Exception as exc:  # noqa: BLE001 - every user exception is part of the behaviour
            error = (type(exc).__name__, normalize_message(str(exc)))
            tb_text = traceback.format_exc()
            user_frames = [fs for fs in traceback.extract_tb(exc.__traceback__)
                           if fs.filename == fn_filename(fn)]
            where = tuple((fs.name, fs.lineno) for fs in user_frames) or None
    snap = Snapshot(known)
    result_tree = snap(result) if error is None else None
    state_snap = Snapshot({})
    state = {name: state_snap(args[name], name) for name in ("x", "y", "w", "lst", "d", "obj", "tl",
                                                             "xm", "xs", "wm", "ix", "ci") if name in args}
    state.update({g: state_snap(ns[g], g) for g in ("COUNTER", "GLIST", "GDICT", "GOBJ", "GT", "GSCALE", "GCACHE")
                  if g in ns})
    if "GATE" in ns:
        gate = ns["GATE"]
        state["GATE"] = (state_snap(gate.alpha, "GATE.alpha"), gate.scale, gate.training)
    grad: Any = None
    if error is None:
        grad = gradient_of(result, args["w"])
        if "wm" in args:  # (backward ran once: it filled both gradients)
            grad = (grad, None if args["wm"].grad is None else args["wm"].grad.numpy().copy())
        if "GATE" in ns:
            alpha_grad = ns["GATE"].alpha.grad
            grad = (grad, None if alpha_grad is None else alpha_grad.numpy().copy())
    return Outcome(result_tree, error, normalize_message(out.getvalue()), state, grad, where, tb_text)


def fn_filename(fn: Any) -> str:
    fn = getattr(fn, "__sot_translated__", fn)
    return fn.__code__.co_filename


def gradient_of(result: Any, w: paddle.Tensor) -> Any:
    """``backward()`` of the sum of every differentiable float tensor returned: the gradient of ``w``."""
    found: list[paddle.Tensor] = []

    def walk(v: Any) -> None:
        if isinstance(v, paddle.Tensor):
            if not v.stop_gradient and v.dtype == paddle.float32 and all(id(v) != id(f) for f in found):
                found.append(v)
        elif isinstance(v, (list, tuple)):
            for item in v:
                walk(item)
        elif isinstance(v, dict):
            for item in v.values():
                walk(item)

    walk(result)
    if not found:
        return None
    try:
        total = found[0].sum()
        for t in found[1:]:
            total = total + t.sum()
        total.backward()
    except Exception as exc:  # noqa: BLE001
        return ("backward raised", type(exc).__name__, normalize_message(str(exc)))
    return None if w.grad is None else w.grad.numpy().copy()


def diff(actual: Any, expected: Any, path: str = "", signed_zeros: bool = True) -> str | None:
    """The first difference between two snapshot trees, or None. ``signed_zeros``: -0.0 differs from 0.0 (not
    for gradients: a program's backward is Paddle's static autodiff, whose formulas may give a zero of the
    other sign where eager's gives one, as they may round differently)."""
    if isinstance(expected, np.ndarray) or isinstance(actual, np.ndarray):
        if not (isinstance(expected, np.ndarray) and isinstance(actual, np.ndarray)):
            return f"{path}: {actual!r} != {expected!r}"
        if actual.shape != expected.shape:
            return f"{path}: shape {actual.shape} != {expected.shape}"
        if not np.allclose(actual, expected, rtol=RTOL, atol=ATOL, equal_nan=True):
            return f"{path}: {actual} != {expected}"
        both_zero = (actual == 0) & (expected == 0)
        if signed_zeros and np.any(np.signbit(actual[both_zero]) != np.signbit(expected[both_zero])):
            return f"{path}: the sign of a zero differs: {actual} != {expected}"
        return None
    if type(actual) is not type(expected):
        return f"{path}: {actual!r} ({type(actual).__name__}) != {expected!r} ({type(expected).__name__})"
    if isinstance(expected, float):
        if math.isnan(expected) and math.isnan(actual):
            return None
        if not math.isclose(actual, expected, rel_tol=RTOL, abs_tol=ATOL) and actual != expected:
            return f"{path}: {actual!r} != {expected!r}"
        if signed_zeros and actual == expected == 0 and math.copysign(1, actual) != math.copysign(1, expected):
            return f"{path}: the sign of a zero differs: {actual!r} != {expected!r}"
        return None
    if isinstance(expected, (list, tuple)):
        if len(actual) != len(expected):
            return f"{path}: length {len(actual)} != {len(expected)}: {short(actual)} != {short(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            found = diff(a, e, f"{path}/{i}", signed_zeros)
            if found:
                return found
        return None
    if actual != expected:
        return f"{path}: {actual!r} != {expected!r}"
    return None


def short(value: Any, limit: int = 300) -> str:
    text = repr(value)
    return text if len(text) < limit else text[:limit] + "..."


def compare(actual: Outcome, expected: Outcome) -> str | None:
    if actual.error != expected.error:
        return f"exception: translated {actual.brief()} but eager {expected.brief()}\n{actual.tb}"
    if actual.where != expected.where:
        return (f"exception-line: {expected.brief()}, the innermost user frame of the traceback is "
                f"{actual.where} but eager {expected.where}\n{actual.tb}")
    if actual.stdout != expected.stdout:
        return f"stdout:\n--- translated ---\n{actual.stdout}--- eager ---\n{expected.stdout}"
    found = diff(actual.result, expected.result, "result")
    if found:
        return found
    for name in expected.state:
        found = diff(actual.state[name], expected.state[name], f"state.{name}")
        if found:
            return found
    return diff(actual.grad, expected.grad, "grad", signed_zeros=False)


@dataclasses.dataclass
class Failure:
    program: Program
    run: str
    message: str

    @property
    def kind(self) -> str:
        """What differed, coarsely (the reducer keeps a candidate only if it fails the same way)."""
        if self.message.startswith("exception-line"):
            return "exception-line"
        if self.message.startswith("exception"):
            return "exception"
        return re.split(r"[:/\[ ]", self.message, maxsplit=1)[0]

    def __str__(self) -> str:
        body = self.program.source.replace(PRELUDE, "# <PRELUDE of tests/fuzz/generator.py>\n")
        return (f"fuzz seed {self.program.seed} (min_graph_size={self.program.min_graph_size}), {self.run}: "
                f"{self.message}\n--- program (reproduce: python -m tests.fuzz.run --seed "
                f"{self.program.seed}) ---\n{body}{self.program.describe_inputs()}\n")


@dataclasses.dataclass
class InternalErrors:
    """Fallbacks whose reason is an internal error of the translator (results still correct)."""

    messages: list[str] = dataclasses.field(default_factory=list)

    def __call__(self, translation: Any, frame: Any) -> None:
        failure = getattr(translation, "failure", None)
        if failure is not None and "internal error" in str(failure):
            self.messages.append(str(failure))


@contextlib.contextmanager
def watch_internal_errors() -> Iterator[InternalErrors]:
    errors = InternalErrors()
    try:
        from sot.opcode_translator.callback import add_listener, remove_listener
    except ImportError:  # the listener hook is internal: without it we just don't watch
        yield errors
        return
    add_listener(errors)
    try:
        yield errors
    finally:
        remove_listener(errors)



def check_program(program: Program, timeout: int = TIMEOUT, way: str | None = None) -> Failure | None:
    """The first difference between the program run eagerly and translated, or None. ``way``: every compiled
    graph runs as its static program ("compiled") or as the eager replay of its statements ("eager"), instead
    of the cost model's choice (`sot.symbolic.compile.forced_way`)."""
    ns = load_module(program.source, f"seed-{program.seed}")
    fn = ns["f"]
    sets = dict(zip("ABC", program.inputs))
    try:
        with time_limit(timeout):
            expected = {name: run_once(fn, ns, sets[name]) for name in sorted(set(program.runs))}
            sot.reset()
            with sot.config.patch(min_graph_size=program.min_graph_size), warnings_quiet(), \
                    (forced_way(way) if way is not None else contextlib.nullcontext()):
                translated = sot.symbolic_translate(fn)
                for index, name in enumerate(program.runs):
                    try:
                        actual = run_once(translated, ns, sets[name])
                    except Timeout:
                        raise
                    except BaseException as exc:  # noqa: BLE001 - e.g. a SystemError from the hook
                        return Failure(program, f"translated run {index + 1} (input set {name}){_ran(way)}",
                                       f"harness error {type(exc).__name__}: {exc}\n{traceback.format_exc()}")
                    problem = compare(actual, expected[name])
                    if problem:
                        return Failure(program, f"translated run {index + 1} (input set {name}){_ran(way)}",
                                       problem)
    except Timeout as exc:
        return Failure(program, "timeout", str(exc))
    finally:
        sot.reset()
    return None


@contextlib.contextmanager
def warnings_quiet() -> Iterator[None]:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _ran(way: str | None) -> str:
    return "" if way is None else f", every graph run {way}"


def check_seed(seed: int, way: str | None = None) -> Failure | None:
    return check_program(generate(seed), way=way)


def eager_only(program: Program) -> list[tuple[str, str] | None]:
    """The eager outcome of each input set (used to tune the generator: how many programs raise)."""
    ns = load_module(program.source, f"seed-{program.seed}")
    return [run_once(ns["f"], ns, s).error for s in program.inputs]


def make_function(source: str, name: str = "f") -> types.FunctionType:
    return load_module(source, "regression")[name]

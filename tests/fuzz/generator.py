"""A seeded generator of random Python programs over Paddle tensors and Python values.

``generate(seed)`` returns a `Program`: the source of a module defining ``f`` (plus helpers) and two input
sets. The same seed always gives the same program and inputs.

Every generated program is valid Python that terminates: fresh variable names are never shadowed, names
assigned inside a block are only used inside it, loops are bounded (``range`` of a small int, ``while`` on a
counter incremented first, ``for`` over a list whose body cannot mutate any list, or over a copy), helpers
only call helpers defined before them. Exceptions are part of the game: risky operations (an integer
division by a value that may be zero, an index that may be out of range, a missing key, ``max`` of an empty
list, a ``raise`` under a condition...) appear with a per-program probability; the eager run is the oracle.

Types the generator tracks (all tensors of one input set share one 1-D shape ``[N]``):
``T`` a float32 tensor of shape [N], ``T0`` a 0-d float32 tensor, ``I`` int, ``F`` float, ``B`` bool,
``L`` list of ints, ``D`` dict str -> int, ``TL`` list of ``T``, ``O`` an ``Obj`` instance, ``S`` set of ints.

Seeds from `EXTENDED_FROM` on also have signed zeros among their float inputs and constants, and use sets (set comprehensions, set algebra and mutation), generator
functions (``yield``, ``yield from``, consumed by ``sum``/``list``/``for``), ``with`` blocks of a user
context manager (which may swallow an exception) and closures that rebind a nonlocal tensor or mutate a
captured list. Smaller seeds keep the programs they had when they were first run (each new choice has weight
0 there, so it draws nothing from the seed's random stream).

Seeds from `WITH_BREAKS_FROM` on also enter ``with`` blocks of a generator-based ``contextlib.contextmanager``
(``scoped``, which may swallow an error and binds a value with ``as``), of ``paddle.no_grad()`` alone and of
several managers at once, and put graph breaks (``psdb.breakgraph()``, ``.item()``, a branch on a tensor)
inside ``with`` blocks and inside ``except``/``finally`` handlers. Every draw these make is guarded by
``self.breaks_in_blocks``, so seeds below it draw exactly what they drew before.

Seeds from `MORE_FROM` on also write what everyday model code has: ``while`` loops left by ``break`` or
``continue`` on a tensor's value (``.item()``, ``bool()``, ``float()``), closure factories whose inner function
rebinds a nonlocal tensor, dict comprehensions over ``enumerate``/``zip``, the shape, dtype and size of tensors
formatted into strings (f-strings, ``%``, ``str.format``), in-place tensor methods (``add_``, ``scale_``,
``multiply_``, ``clip_``, item and slice assignment) on arguments and on the items of a list of tensors (also
under ``paddle.no_grad()`` on the parameter ``w``), star unpacking, ``try``/``finally`` with ``return`` in the
``try`` (in ``f`` and in nested helpers), a user class ``Bag`` with ``__getitem__``, ``__len__`` and a property,
``isinstance`` checks, ``enumerate``/``zip``/``reversed`` over lists of tensors, ``min``/``max``/``sum``/
``any``/``all`` of Python numbers, ``sum`` of tensors, and the global ``GSCALE`` rebound. All their draws are
weighted by ``self.m`` (0 below it) or guarded by ``self.more``.

Seeds from `CACHES_FROM` on also keep dicts of tensors (built, updated, iterated, read with ``get``), a module
cache of tensors ``GCACHE`` filled on a miss (memoization), augmented assignments to attributes and list items,
the introspection of tensors (``numel``, ``len``, ``shape[-1]``, ``tolist``, iteration over the items),
reversed and ``None`` indexing, a subclass ``Obj2`` of ``Obj`` overriding through ``super()``, walrus bindings
and exceptions chained with ``raise ... from``. (Weights ``self.c``.)

Seeds from `OPS_FROM` on also use tensor operations whose results change dtype or shape on the way (``argmax``,
``argsort`` and tensor indices, ``topk``, ``sort``, boolean masks and ``masked_select``, ``nonzero``, ``unbind``,
casts, ``unsqueeze``/``transpose``/``matmul``, softmax, ``std``/``norm``/``logsumexp``), a module
``paddle.nn.Layer`` ``GATE`` with a parameter (its gradient is compared too), a callable object ``Affine`` with a
keyword-only argument, helpers called with star and keyword arguments, ``functools.partial``, lambdas binding a
loop variable through a default argument, chained comparisons, ``divmod`` and bitwise integer operators,
``getattr`` with a default, and ``match`` statements (literals, captures with guards, sequence and mapping
patterns). (Weights ``self.o``.)

Seeds from `SHAPES_FROM` on also take 2-D and 3-D tensors (``xm`` [B, K], ``xs`` [B, L, K], ``wm`` [K, K] whose
gradient is compared, int64 labels ``ix`` [B], int32 ``ci`` [B, L]) whose sizes change between the input sets,
and a third input set C with a batch size neither A nor B had (runs A, A, B, A, C: guards, cache misses,
dynamic dimensions). Their grammar, which tracks every tensor's symbolic shape, is `shapes.ShapedGrammar`
(weights ``self.g``).
"""
from __future__ import annotations

import dataclasses
import random
from typing import Callable

from .shapes import SHAPED_PARAMS, ShapedGrammar

PRELUDE = '''\
import math
import paddle
import paddle.nn.functional as F
from sot import psdb

COUNTER = 0
GLIST = []
GDICT = {}
GSCALE = 1.0
GT = None


class FuzzError(Exception):
    pass


class Obj:
    def __init__(self, a, t):
        self.a = a
        self.t = t
        self.items = [a]

    def bump(self, k):
        self.a += k
        return self.a

    @property
    def double(self):
        return self.a * 2

    def scale(self, t):
        return t * self.a


def make_adder(k):
    def add(v):
        return v + k
    return add


ADD = make_adder(1)
GOBJ = Obj(0, None)
'''

KEYS = ("a", "b", "c")
MISSING_KEY = "z"
PARAMS = {"x": "T", "y": "T", "w": "T", "n": "I", "s": "F", "lst": "L", "d": "D", "obj": "O", "tl": "TL"}
GLOBAL_READABLE = {"GLIST": "L", "GDICT": "D", "GOBJ": "O"}
EXTENDED_FROM = 10_000  # the first seed whose programs use the constructs added after seeds 0-9999 were run
WITH_BREAKS_FROM = 80_000  # the first seed with generator managers and breaks inside with/except/finally blocks
CACHES_FROM = 120_000  # the first seed with dicts of tensors, GCACHE, Obj2, tensor introspection...
MORE_FROM = 100_000  # the first seed with tensor-valued loop exits, in-place tensor methods, Bag, star unpacking...
OPS_FROM = 140_000  # the first seed with dtype/shape-changing tensor ops, GATE, Affine, match, star/keyword calls...
SHAPES_FROM = 200_000  # the first seed with 2-D/3-D tensors whose sizes change between input sets (shapes.py)

# Module code of the extended programs (after PRELUDE).
EXTENDED_PRELUDE = '''

class Track:
    """A user context manager: logs entering and leaving into GLIST; may swallow the generator's errors."""

    def __init__(self, tag, swallow=False):
        self.tag = tag
        self.swallow = swallow

    def __enter__(self):
        GLIST.append(self.tag)
        return self

    def __exit__(self, kind, value, tb):
        GLIST.append(-self.tag if kind is None else 100 + self.tag)
        return self.swallow and kind is not None and issubclass(kind, (ValueError, IndexError, KeyError,
                                                                       ZeroDivisionError, FuzzError))


def count_up(k):
    for i in range(k % 4):
        yield i * 2 + 1


def count_both(k, lst):
    yield from count_up(k)
    yield len(lst)
'''

# Module code of the programs from WITH_BREAKS_FROM on (after EXTENDED_PRELUDE).
WITH_BREAKS_PRELUDE = '''

import contextlib


@contextlib.contextmanager
def scoped(tag, swallow=False):
    """A generator-based context manager: logs into GLIST around its block; may swallow the generator's errors."""
    GLIST.append(tag)
    try:
        yield tag * 10
    except (ValueError, IndexError, KeyError, ZeroDivisionError, FuzzError):
        GLIST.append(200 + tag)
        if not swallow:
            raise
    finally:
        GLIST.append(-tag)
'''


# Module code of the programs from MORE_FROM on (after WITH_BREAKS_PRELUDE).
MORE_PRELUDE = '''

KEYS3 = ("a", "b", "c")


class Bag:
    """A user container of tensors: indexing wraps around, scales by ``k``; empty, it gives ``base``."""

    def __init__(self, ts, base, k):
        self.ts = list(ts)
        self.base = base
        self.k = k

    def __getitem__(self, i):
        if not self.ts:
            return self.base
        return self.ts[i % len(self.ts)] * self.k

    def __len__(self):
        return len(self.ts)

    @property
    def total(self):
        return self.k + len(self.ts)


def make_acc(start):
    """A closure factory: the returned function accumulates into a nonlocal tensor."""
    acc = start

    def push(t):
        nonlocal acc
        acc = acc + t
        return acc
    return push


def guarded(t, k):
    """try/finally with returns inside the try: the finally block always logs."""
    try:
        if k > 2:
            return t * 2
        if k < 0:
            return t - 1
        GLIST.append(k)
        return t + k
    finally:
        GLIST.append(-100 - k)
'''


# Module code of the programs from CACHES_FROM on (after MORE_PRELUDE).
CACHES_PRELUDE = '''

GCACHE = {}


class Obj2(Obj):
    """A subclass overriding a method and a property through super()."""

    def scale(self, t):
        return super().scale(t) + 1

    @property
    def double(self):
        return super().double + 1

    def bump(self, k):
        return super().bump(k * 2)


def cached(key, t):
    """Memoization in a module dict: the first call with ``key`` stores ``t * 2``."""
    if key not in GCACHE:
        GCACHE[key] = t * 2
    return GCACHE[key]
'''


# Module code of the programs from OPS_FROM on (after CACHES_PRELUDE).
OPS_PRELUDE = '''

import functools


class Gate(paddle.nn.Layer):
    """A layer with one parameter and a plain attribute (the harness resets both before each run)."""

    def __init__(self):
        super().__init__()
        self.alpha = self.create_parameter([1], default_initializer=paddle.nn.initializer.Constant(0.5))
        self.scale = 2.0

    def forward(self, t):
        return F.sigmoid(t * self.alpha) * self.scale


GATE = Gate()


class Affine:
    """A callable object with a keyword-only argument."""

    def __init__(self, k, b=0.0):
        self.k = k
        self.b = b

    def __call__(self, t, *, shift=0.0):
        return t * self.k + (self.b + shift)
'''


@dataclasses.dataclass
class ShapedInputs:
    """The shaped parameters of one call (seeds from SHAPES_FROM on): sizes B, K, L and nested lists."""

    b: int
    k: int
    l: int  # noqa: E741
    xm: list[list[float]]
    xs: list[list[list[float]]]
    wm: list[list[float]]
    ix: list[int]
    ci: list[list[int]]


@dataclasses.dataclass
class InputSet:
    """Values of one call; tensors as (shape, values) so every run builds fresh copies."""

    n_elems: int
    x: list[float]
    y: list[float]
    w: list[float]
    n: int
    s: float
    lst: list[int]
    d: dict[str, int]
    obj_a: int
    obj_t: list[float]
    tl: list[list[float]]
    gscale: float
    adder: int
    gobj_a: int
    shaped: ShapedInputs | None = None  # (the seeds from SHAPES_FROM on)


@dataclasses.dataclass
class Program:
    seed: int
    source: str
    inputs: list[InputSet]  # [A, B] (and C from SHAPES_FROM on)
    min_graph_size: int
    # the translated runs: first call, cache hit, the other input set (guards), back to the first
    runs: tuple[str, ...] = ("A", "A", "B", "A")

    def describe_inputs(self) -> str:
        def fields(s: InputSet) -> dict:
            found = dataclasses.asdict(s)
            if found["shaped"] is None:  # (older seeds print what they printed before)
                del found["shaped"]
            return found

        return "\n".join(f"# input set {'ABC'[i]}: {fields(s)}" for i, s in enumerate(self.inputs))


@dataclasses.dataclass
class Helper:
    name: str
    arg_types: list[str]
    ret: str
    mutates: bool  # mutates a list or dict (forbidden while iterating a live list/dict)
    params: list[str] = dataclasses.field(default_factory=list)  # parameter names (keyword calls)


class Gen(ShapedGrammar):
    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.r = random.Random(seed)
        self.names = 0
        self.scopes: list[dict[str, str]] = []
        self.helpers: list[Helper] = []
        self.no_mut = 0  # > 0 while inside a loop over a live list or dict
        self.in_loop = 0
        self.in_helper = False
        self.budget = 0
        self.local_floor = 1
        # per-program knobs
        self.risk = self.r.choice([0.0, 0.0, 0.01, 0.03, 0.06])
        self.p_try = self.r.choice([0.0, 0.0, 0.05, 0.1])
        self.p_tensor_branch = self.r.choice([0.0, 0.2, 0.4])
        self.max_depth = self.r.choice([1, 2, 3])
        self.extended = seed >= EXTENDED_FROM
        self.x = 1.0 if self.extended else 0.0  # the weight factor of the extended choices
        self.breaks_in_blocks = seed >= WITH_BREAKS_FROM
        if self.breaks_in_blocks:  # (no draw: older seeds keep their stream)
            self.p_try = max(self.p_try, 0.05)
        self.more = seed >= MORE_FROM
        self.m = 1.0 if self.more else 0.0  # the weight factor of the choices added from MORE_FROM on
        self.caches = seed >= CACHES_FROM
        self.c = 1.0 if self.caches else 0.0  # the weight factor of the choices added from CACHES_FROM on
        self.ops = seed >= OPS_FROM
        self.o = 1.0 if self.ops else 0.0  # the weight factor of the choices added from OPS_FROM on
        self.shaped = seed >= SHAPES_FROM
        self.g = 1.0 if self.shaped else 0.0  # the weight factor of the shaped-tensor choices (shapes.py)

    # -- names and scopes -------------------------------------------------------------------------------
    def fresh(self, prefix: str = "v") -> str:
        self.names += 1
        return f"{prefix}{self.names}"

    def vars_of(self, ty: str) -> list[str]:
        found = []
        for scope in self.scopes:
            found.extend(name for name, t in scope.items() if t == ty)
        return found

    def declare(self, name: str, ty: str) -> None:
        self.scopes[-1][name] = ty

    def chance(self, p: float) -> bool:
        return self.r.random() < p

    def pick(self, options: list[tuple[float, Callable[[], str]]]) -> str:
        total = sum(w for w, _ in options if w > 0)
        x = self.r.random() * total
        for weight, make in options:
            if weight <= 0:
                continue
            x -= weight
            if x <= 0:
                return make()
        return options[-1][1]()

    def helpers_returning(self, ty: str) -> list[Helper]:
        return [h for h in self.helpers if h.ret == ty and not (self.no_mut and h.mutates)]

    def call_helper(self, h: Helper, d: int) -> str:
        args = [self.expr(t, d - 1) for t in h.arg_types]
        if self.ops and h.params and self.chance(0.3):  # (no draw below OPS_FROM)
            style = self.r.choice(["star", "keywords", "dict"])
            if style == "star":
                return f"{h.name}(*[{', '.join(args)}])" if len(args) > 1 else f"{h.name}(*({args[0]},))"
            if style == "keywords":
                return f"{h.name}({args[0]}, " + ", ".join(
                    f"{name}={a}" for name, a in list(zip(h.params, args))[1:][::-1]) + ")" \
                    if len(args) > 1 else f"{h.name}({h.params[0]}={args[0]})"
            return f"{h.name}(**{{" + ", ".join(f"{name!r}: {a}" for name, a in zip(h.params, args)) + "})"
        return f"{h.name}({', '.join(args)})"

    # -- expressions --------------------------------------------------------------------------------------
    def expr(self, ty: str, d: int) -> str:
        return getattr(self, f"e_{ty}")(max(d, 0))

    def small_int(self) -> str:
        return str(self.r.choice([-2, -1, 0, 1, 1, 2, 2, 3, 4, 5]))

    def e_T(self, d: int) -> str:
        leaves = self.vars_of("T")
        if d == 0 or self.chance(0.25):
            return self.r.choice(leaves)
        s = d - 1
        tls = self.vars_of("TL")
        helpers = self.helpers_returning("T")
        return self.pick([
            (3, lambda: f"({self.e_T(s)} + {self.e_Tany(s)})"),
            (2, lambda: f"({self.e_T(s)} - {self.e_Tany(s)})"),
            (2, lambda: f"({self.e_T(s)} * {self.e_num(s)})"),
            (1, lambda: f"({self.e_num(s)} * {self.e_T(s)})"),
            (1, lambda: f"({self.e_T(s)} * {self.e_T(s)})"),
            (2, lambda: f"paddle.tanh({self.e_T(s)})"),
            (1, lambda: f"F.relu({self.e_T(s)})"),
            (1, lambda: f"{self.e_T(s)}.clip(-2.0, 2.0)"),
            (1, lambda: f"({self.e_T(s)} / ({self.e_T(s)}.abs() + 1))"),
            (1, lambda: f"paddle.maximum({self.e_T(s)}, {self.e_T(s)})"),
            (1, lambda: f"paddle.where({self.e_T(s)} > {self.e_F(0)}, {self.e_T(s)}, {self.e_T(s)})"),
            (1, lambda: f"(-{self.e_T(s)})"),
            (0.5, lambda: f"({self.e_T(s)} ** 2)"),
            (1, lambda: f"{self.e_O(0)}.t" if self.vars_of("O") else "x"),
            (1, lambda: self.safe_tl_index(tls)),
            (self.risk * 3, lambda: f"{self.r.choice(tls)}[{self.e_I(0)}]"),
            (2 if helpers else 0, lambda: self.call_helper(self.r.choice(helpers), d)),
            (1 if self.vars_of("LAMT") else 0, lambda: f"{self.r.choice(self.vars_of('LAMT'))}({self.e_T(s)})"),
            (0.5, lambda: f"ADD({self.e_T(s)})"),
            (0.7, lambda: f"{self.e_O(0)}.scale({self.e_T(s)})"),
            (0.5, lambda: f"paddle.full_like({self.e_T(s)}, {self.e_F(0)})"),
            (0.5, lambda: f"({self.e_T(s)} * GSCALE)"),
            (0.4, lambda: f"paddle.flip({self.e_T(s)}, axis=0)"),
            (0.4, lambda: f"{self.e_T(s)}.cumsum(0)"),
            (0.3, lambda: f"paddle.concat([{self.e_T(s)}, {self.e_T(s)}])[:{self.r.choice(leaves)}.shape[0]]"),
            (0.3, lambda: f"paddle.ones_like({self.e_T(s)})"),
            (0.3, lambda: f"{self.e_T(s)}.detach()"),
            (0.4, lambda: f"({self.e_T(s)} if {self.e_B(s)} else {self.e_T(s)})"),
            (0.3, lambda: f"paddle.sum(paddle.stack([{self.e_T(s)}, {self.e_T(s)}]), axis=0)"),
            (0.5 * self.m, lambda: f"sum({self.e_TL(s)}, {self.e_T(s)})"),
            (0.6 * self.m if self.vars_of("BAG") else 0,
             lambda: f"{self.r.choice(self.vars_of('BAG'))}[{self.e_I(s)}]"),
            (0.3 * self.m, lambda: f"Bag({self.e_TL(s)}, {self.e_T(s)}, {self.e_I(0)})[{self.e_I(0)}]"),
            (0.4 * self.m if not self.no_mut else 0, lambda: f"guarded({self.e_T(s)}, {self.e_I(s)})"),
            (0.3 * self.m, lambda: f"({self.e_T(s)} if isinstance({self.r.choice(self.vars_of('T'))}, "
                                   f"paddle.Tensor) else {self.e_T(s)})"),
            (0.3 * self.m, lambda: f"{self.e_T(s)}.reshape([-1, 1]).squeeze(-1)"),
            (0.6 * self.c if self.vars_of("DT") else 0,
             lambda: f"{self.r.choice(self.vars_of('DT'))}.get({self.r.choice(KEYS)!r}, {self.e_T(s)})"),
            (0.3 * self.c if self.vars_of("DT") else 0,
             lambda: f"sum({self.r.choice(self.vars_of('DT'))}.values(), {self.e_T(s)})"),
            (0.5 * self.c if not self.no_mut else 0, lambda: f"cached({self.e_I(s) + ' % 3'}, {self.e_T(s)})"),
            (0.3 * self.c, lambda: f"{self.e_T(s)}[::-1]"),
            (0.3 * self.c, lambda: f"{self.e_T(s)}[None][0]"),
            (0.3 * self.c, lambda: f"Obj2({self.e_I(0)}, {self.e_T(s)}).scale({self.e_T(s)})"),
            (0.4 * self.o, lambda: f"F.softmax({self.e_T(s)}, axis=0)"),
            (0.4 * self.o, lambda: f"paddle.sort({self.e_T(s)}, descending={self.r.choice([True, False])})"),
            (0.4 * self.o, lambda: (lambda t: f"{self.e_T(s)}[paddle.argsort({t})]")(self.r.choice(leaves))),
            (0.3 * self.o, lambda: f"paddle.gather({self.e_T(s)}, paddle.argsort({self.e_T(s)}, descending=True))"),
            (0.3 * self.o, lambda: f"paddle.roll({self.e_T(s)}, {self.small_int()})"),
            (0.4 * self.o, lambda: f"{self.e_T(s)}.masked_fill({self.e_T(s)} > {self.e_F(0)}, {self.e_F(0)})"),
            (0.4 * self.o, lambda: f"(({self.e_T(s)} > {self.e_F(0)}).astype('float32') * {self.e_T(s)})"),
            (0.3 * self.o, lambda: f"paddle.where({self.e_T(s)} > 0, {self.e_T(s)}, {self.e_F(0)})"),
            (0.3 * self.o, lambda: f"{self.e_T(s)}.unsqueeze(0).transpose([1, 0]).squeeze(1)"),
            (0.3 * self.o, lambda: f"paddle.matmul({self.e_T(s)}.unsqueeze(1), {self.e_T(s)}.unsqueeze(0)).sum(0)"),
            (0.3 * self.o, lambda: f"paddle.stack(list({self.e_T(s)}.unbind()))"),
            (0.3 * self.o, lambda: f"paddle.stack([{(c := self.fresh('c'))} * 2 for {c} in {self.e_T(s)}.unbind()])"),
            (0.3 * self.o, lambda: (lambda t, k: f"paddle.concat([{t}[:{k}], {t}[{k}:]])")(
                self.e_T(s), f"{self.e_I(0)} % {self.r.choice(leaves)}.shape[0]")),
            (0.3 * self.o, lambda: f"{self.e_T(s)}.cast('int64').cast('float32')"),
            (0.2 * self.o, lambda: f"{self.e_T(s)}.floor()"),
            (0.3 * self.o, lambda: f"paddle.topk({self.e_T(s)}, k=1)[0].expand_as({self.r.choice(leaves)})"),
            (0.5 * self.o, lambda: f"GATE({self.e_T(s)})"),
            (0.4 * self.o, lambda: f"Affine({self.e_F(0)}, b={self.e_F(0)})({self.e_T(s)}, shift={self.e_F(s)})"),
            (1 * self.o if self.vars_of("LAMTL") else 0,
             lambda: f"{self.r.choice(self.vars_of('LAMTL'))}[{self.e_I(s)} % 3]({self.e_T(s)})"),
        ])

    def safe_tl_index(self, tls: list[str]) -> str:
        tl = self.r.choice(tls)
        return f"({tl}[{self.e_I(0)} % len({tl})] if {tl} else {self.r.choice(self.vars_of('T'))})"

    def e_T0(self, d: int) -> str:
        leaves = self.vars_of("T0")
        if (d == 0 or self.chance(0.2)) and leaves:
            return self.r.choice(leaves)
        s = max(d - 1, 0)
        tvars = self.vars_of("T")
        return self.pick([
            (3, lambda: f"{self.e_T(s)}.sum()"),
            (2, lambda: f"{self.e_T(s)}.mean()"),
            (1, lambda: f"{self.e_T(s)}.max()"),
            (1, lambda: f"paddle.dot({self.e_T(s)}, {self.e_T(s)})"),
            (1, lambda: (lambda t: f"{t}[{self.e_I(0)} % {t}.shape[0]]")(self.r.choice(tvars))),
            (self.risk * 3, lambda: f"{self.r.choice(tvars)}[{self.e_I(0)}]"),
            (1 if d > 0 else 0, lambda: f"({self.e_T0(s)} + {self.e_T0(s)})"),
            (1 if d > 0 else 0, lambda: f"({self.e_T0(s)} * {self.e_num(s)})"),
            (1 if d > 0 else 0, lambda: f"paddle.tanh({self.e_T0(s)})"),
            (0.5, lambda: f"paddle.to_tensor({self.e_F(0)})"),
            (0.3, lambda: f"paddle.to_tensor({self.e_I(0)}, dtype='float32')"),
            (0.3 * self.o, lambda: f"paddle.logsumexp({self.e_T(s)})"),
            (0.3 * self.o, lambda: f"{self.e_T(s)}.norm()"),
            (0.3 * self.o, lambda: f"{self.e_T(s)}.std()"),
            (0.4 * self.o, lambda: (lambda t: f"{t}[{t} > {self.e_F(0)}].sum()")(self.r.choice(tvars))),
            (0.4 * self.o, lambda: f"paddle.masked_select({self.e_T(s)}, {self.e_T(s)} < {self.e_F(0)}).sum()"),
            (0.3 * self.o, lambda: f"paddle.topk({self.e_T(s)}, k=1)[0].sum()"),
            (0.3 * self.o, lambda: f"({self.e_T(s)} @ {self.e_T(s)})"),
            (0.3 * self.o, lambda: (lambda t: f"{t}.unbind()[{self.e_I(0)} % {t}.shape[0]]")(self.r.choice(tvars))),
            (0.3 * self.o, lambda: f"paddle.prod({self.e_T(s)}.clip(-1.5, 1.5))"),
            *self.shaped_T0(),
        ])

    def e_Tany(self, d: int) -> str:
        return self.e_T0(d) if self.chance(0.3) else self.e_T(d)

    def e_num(self, d: int) -> str:
        return self.e_I(d) if self.chance(0.5) else self.e_F(d)

    def e_I(self, d: int) -> str:
        leaves = self.vars_of("I")
        if d == 0 or self.chance(0.3):
            return self.r.choice(leaves) if leaves and self.chance(0.7) else self.small_int()
        s = d - 1
        ls, ds, os_ = self.vars_of("L"), self.vars_of("D"), self.vars_of("O")
        helpers = self.helpers_returning("I")
        key = self.r.choice(KEYS)
        return self.pick([
            (3, lambda: f"({self.e_I(s)} + {self.e_I(s)})"),
            (2, lambda: f"({self.e_I(s)} - {self.e_I(s)})"),
            (1, lambda: f"({self.e_I(s)} * {self.r.choice([2, 3, -1])})"),
            (1, lambda: f"({self.e_I(s)} // (abs({self.e_I(s)}) + 1))"),
            (1, lambda: f"({self.e_I(s)} % {self.r.choice([2, 3, 5])})"),
            (self.risk * 10, lambda: f"({self.e_I(s)} // {self.e_I(s)})"),
            (self.risk * 5, lambda: f"({self.e_I(s)} % {self.e_I(s)})"),
            (2, lambda: f"len({self.e_L(s)})"),
            (1, lambda: (lambda l_: f"({l_}[{self.e_I(0)} % len({l_})] if {l_} else 0)")(self.r.choice(ls))),
            (self.risk * 10, lambda: f"{self.e_L(s)}[{self.e_I(s)}]"),
            (1, lambda: f"{self.r.choice(ds)}.get({key!r}, {self.small_int()})"),
            (self.risk * 8, lambda: f"{self.e_D(s)}[{self.r.choice(KEYS + (MISSING_KEY,))!r}]"),
            (1, lambda: f"{self.r.choice(os_)}.a"),
            (0.5, lambda: f"{self.r.choice(os_)}.double"),
            (0.7, lambda: f"{self.r.choice(os_)}.bump({self.e_I(s)})"),
            (1, lambda: f"min({self.e_I(s)}, {self.e_I(s)})"),
            (1, lambda: f"max({self.e_I(s)}, {self.e_I(s)})"),
            (0.5, lambda: f"abs({self.e_I(s)})"),
            (1, lambda: f"sum({self.e_L(s)})"),
            (self.risk * 5, lambda: f"max({self.e_L(s)})"),
            (0.5, lambda: f"int({self.e_F(s)})"),
            (0.5, lambda: f"({self.e_I(s)} if {self.e_B(s)} else {self.e_I(s)})"),
            (0.5, lambda: f"len({self.r.choice(self.vars_of('TL'))})"),
            (0.7, lambda: f"{self.r.choice(self.vars_of('T'))}.shape[0]"),
            (0.5, lambda: f"{self.e_L(s)}.count({self.e_I(0)})"),
            (self.risk * 4, lambda: f"{self.e_L(s)}.index({self.e_I(0)})"),
            (0.3, lambda: f"sum(c * 2 for c in {self.e_L(s)})"),
            (0.3, lambda: f"len({self.e_D(s)})"),
            (self.p_tensor_branch, lambda: f"int({self.e_T0(s)} > 0)"),
            (self.p_tensor_branch * 0.5, lambda: f"int({self.e_T0(s)}.item() * 3)"),
            (2 if helpers else 0, lambda: self.call_helper(self.r.choice(helpers), d)),
            (1 if self.vars_of("LAMI") else 0, lambda: f"{self.r.choice(self.vars_of('LAMI'))}({self.e_I(s)})"),
            (0.3, lambda: "COUNTER"),
            (0.3, lambda: f"ADD({self.e_I(s)})"),
            (0.6 * self.x, lambda: f"len({self.e_S(s)})"),
            (0.4 * self.x, lambda: f"sum({self.e_S(s)})"),
            (self.risk * 3 * self.x, lambda: f"max({self.e_S(s)})"),
            (0.5 * self.x, lambda: f"sum(count_up({self.e_I(s)}))"),
            (0.3 * self.x, lambda: f"sum(count_both({self.e_I(s)}, {self.e_L(s)}))"),
            (0.3 * self.x, lambda: f"next(count_up({self.e_I(s)}), -1)"),
            (0.5 * self.m, lambda: f"min({self.e_L(s)}, default={self.small_int()})"),
            (0.5 * self.m, lambda: f"max({self.e_I(s)}, {self.e_I(s)}, {self.e_I(s)})"),
            (0.4 * self.m, lambda: f"sum({self.e_L(s)}, {self.e_I(s)})"),
            (0.4 * self.m, lambda: f"len(str({self.r.choice(self.vars_of('T'))}.shape))"),
            (0.3 * self.m, lambda: f"{self.r.choice(self.vars_of('T'))}.size"),
            (0.3 * self.m, lambda: f"{self.r.choice(self.vars_of('T'))}.ndim"),
            (0.5 * self.m if self.vars_of("BAG") else 0, lambda: f"len({self.r.choice(self.vars_of('BAG'))})"),
            (0.4 * self.m if self.vars_of("BAG") else 0, lambda: f"{self.r.choice(self.vars_of('BAG'))}.total"),
            (0.3 * self.m, lambda: f"sum(1 for {(c := self.fresh('c'))} in {self.e_TL(s)} "
                                   f"if isinstance({c}, paddle.Tensor))"),
            (0.3 * self.m, lambda: f"len([{(c := self.fresh('c'))} for {c} in reversed({self.e_TL(s)})])"),
            (0.3 * self.c, lambda: f"int({self.r.choice(self.vars_of('T'))}.numel())"),
            (0.3 * self.c, lambda: f"len({self.r.choice(self.vars_of('T'))})"),
            (0.3 * self.c, lambda: f"{self.r.choice(self.vars_of('T'))}.shape[-1]"),
            (0.4 * self.c if self.vars_of("DT") else 0, lambda: f"len({self.r.choice(self.vars_of('DT'))})"),
            (0.3 * self.c, lambda: "len(GCACHE)"),
            (0.3 * self.c, lambda: f"Obj2({self.e_I(s)}, {self.r.choice(self.vars_of('T'))}).double"),
            (0.4 * self.o, lambda: f"int({self.r.choice(self.vars_of('T'))}.argmax())"),
            (0.3 * self.o, lambda: f"{self.r.choice(self.vars_of('T'))}.argmin().item()"),
            (0.4 * self.o, lambda: f"int(({self.r.choice(self.vars_of('T'))} > {self.e_F(0)}).sum())"),
            (0.4 * self.o, lambda: f"paddle.nonzero({self.r.choice(self.vars_of('T'))} > {self.e_F(0)}).shape[0]"),
            (0.3 * self.o, lambda: f"len(paddle.masked_select({self.e_T(s)}, {self.e_T(s)} > 0))"),
            (0.4 * self.o, lambda: f"divmod({self.e_I(s)}, {self.r.choice([2, 3, -2])})[{self.r.choice([0, 1])}]"),
            (0.2 * self.o, lambda: f"sum(divmod({self.e_I(s)}, {self.e_I(s)}))"),
            (0.5 * self.o, lambda: f"({self.e_I(s)} {self.r.choice(['&', '|', '^'])} {self.e_I(s)})"),
            (0.3 * self.o, lambda: f"({self.e_I(s)} << {self.r.choice([1, 2])})"),
            (0.3 * self.o, lambda: f"({self.e_I(s)} >> 1)"),
            (0.3 * self.o, lambda: f"getattr({self.r.choice(os_)}, 'extra', {self.e_I(s)})"),
            (0.3 * self.o, lambda: f"len({self.r.choice(self.vars_of('T'))}.unbind())"),
            *self.shaped_I(),
        ])

    def e_F(self, d: int) -> str:
        leaves = self.vars_of("F")
        if d == 0 or self.chance(0.3):
            return self.r.choice(leaves) if leaves and self.chance(0.6) else \
                self.r.choice(["0.5", "1.5", "-0.25", "2.0", "0.0", "3.0"] + ["-0.0"] * self.extended)
        s = d - 1
        return self.pick([
            (2, lambda: f"({self.e_F(s)} + {self.e_num(s)})"),
            (1, lambda: f"({self.e_F(s)} - {self.e_num(s)})"),
            (1, lambda: f"({self.e_F(s)} * {self.r.choice(['0.5', '2.0', '-1.0'])})"),
            (1, lambda: f"({self.e_I(s)} / (abs({self.e_I(s)}) + 1))"),
            (self.risk * 8, lambda: f"({self.e_num(s)} / {self.e_I(s)})"),
            (self.risk * 4, lambda: f"({self.e_F(s)} / {self.e_F(s)})"),
            (1, lambda: f"float({self.e_I(s)})"),
            (0.5, lambda: f"math.sqrt(abs({self.e_F(s)}))"),
            (0.5, lambda: f"round({self.e_F(s)}, 2)"),
            (0.5, lambda: "GSCALE"),
            (self.p_tensor_branch, lambda: f"float({self.e_T0(s)})"),
            (self.p_tensor_branch * 0.5, lambda: f"{self.e_T0(s)}.item()"),
            (0.3, lambda: f"({self.e_F(s)} if {self.e_B(s)} else {self.e_F(s)})"),
            (0.4 * self.m, lambda: f"max({self.e_F(s)}, {self.e_F(s)})"),
            (0.4 * self.m, lambda: f"min([{self.e_F(s)}, {self.e_F(s)}, {self.e_F(0)}])"),
            (0.3 * self.m, lambda: f"sum([{self.e_F(s)}, {self.e_F(s)}])"),
            (self.p_tensor_branch * self.m, lambda: f"{self.e_T(s)}.max().item()"),
            (self.p_tensor_branch * self.c, lambda: f"round(sum({self.e_T(s)}.tolist()), 3)"),
            (0.3 * self.o, lambda: "GATE.scale"),
            (self.p_tensor_branch * self.o, lambda: f"float({self.e_T(s)}.norm())"),
        ])

    def e_B(self, d: int) -> str:
        s = max(d - 1, 0)
        ops = ["<", "<=", ">", ">=", "==", "!="]
        return self.pick([
            (3, lambda: f"{self.e_I(s)} {self.r.choice(ops)} {self.e_I(s)}"),
            (1, lambda: f"{self.e_F(s)} {self.r.choice(ops[:4])} {self.e_num(s)}"),
            (1, lambda: f"{self.r.choice(KEYS + (MISSING_KEY,))!r} in {self.e_D(s)}"),
            (1, lambda: f"{self.e_I(s)} in {self.e_L(s)}"),
            (1 if d > 0 else 0, lambda: f"not ({self.e_B(s)})"),
            (1 if d > 0 else 0, lambda: f"({self.e_B(s)}) and ({self.e_B(s)})"),
            (1 if d > 0 else 0, lambda: f"({self.e_B(s)}) or ({self.e_B(s)})"),
            (1, lambda: f"len({self.e_L(s)}) > {self.r.choice([0, 1, 2, 3])}"),
            (0.5, lambda: f"hasattr({self.r.choice(self.vars_of('O'))}, 'extra')"),
            (0.5, lambda: f"isinstance({self.e_num(s)}, int)"),
            (self.p_tensor_branch * 3, lambda: f"{self.e_T0(s)} > {self.e_F(0)}"),
            (self.p_tensor_branch, lambda: f"({self.e_T(s)} > 0).any()"),
            (0.3, lambda: f"{self.r.choice(self.vars_of('T'))}.shape[0] > 3"),
            (0.3, lambda: f"{self.r.choice(self.vars_of('T'))}.stop_gradient"),
            (0.3, lambda: f"bool({self.e_L(s)})"),
            (0.7 * self.x, lambda: f"{self.e_I(s)} in {self.e_S(s)}"),
            (0.3 * self.x, lambda: f"{self.e_S(s)} <= {self.e_S(s)}"),
            (0.2 * self.x, lambda: f"bool({self.e_S(s)})"),
            (0.4 * self.m, lambda: f"any({(c := self.fresh('c'))} > {self.e_I(0)} for {c} in {self.e_L(s)})"),
            (0.4 * self.m, lambda: f"all({(c := self.fresh('c'))} % 2 == 0 for {c} in {self.e_L(s)})"),
            (0.2 * self.m, lambda: f"any({self.e_L(s)})"),
            (0.4 * self.m, self.isinstance_test),
            (self.p_tensor_branch * self.m, lambda: f"bool(({self.e_T(s)} > {self.e_F(0)}).all())"),
            (self.p_tensor_branch * self.m, lambda: f"{self.e_T0(s)}.item() > {self.e_F(0)}"),
            (0.6 * self.o, lambda: f"{self.e_I(s)} {self.r.choice(ops[:4])} {self.e_I(s)} "
                                   f"{self.r.choice(ops[:4])} {self.e_I(s)}"),
            (0.3 * self.o, lambda: f"{self.r.choice(self.vars_of('T'))}.dtype == paddle.float32"),
            (self.p_tensor_branch * self.o, lambda: f"bool(paddle.all({self.e_T(s)} > {self.e_F(0)}))"),
            (0.3 * self.o, lambda: f"paddle.is_tensor({self.r.choice(self.vars_of('T'))})"),
            (0.3 * self.o, lambda: f"GATE.training"),
            *self.shaped_B(),
        ])

    def isinstance_test(self) -> str:
        value = self.r.choice(self.vars_of(self.r.choice(["T", "L", "D", "O", "TL"])) or ["GLIST"])
        kind = self.r.choice(["paddle.Tensor", "list", "(list, tuple)", "dict", "Obj", "int", "float"])
        return f"isinstance({value}, {kind})"

    def e_L(self, d: int) -> str:
        leaves = self.vars_of("L")
        if d == 0 or self.chance(0.35):
            return self.r.choice(leaves)
        s = d - 1
        c = self.fresh("c")
        return self.pick([
            (2, lambda: f"[{', '.join(self.e_I(s) for _ in range(self.r.randint(0, 3)))}]"),
            (2, lambda: f"[{c} * 2 for {c} in {self.e_L(s)}]"),
            (2, lambda: f"[{c} for {c} in {self.e_L(s)} if {c} % 2 == {self.r.choice([0, 1])}]"),
            (1, lambda: f"list(range({self.e_I(s)} % 5))"),
            (0 if self.growing() else 1, lambda: f"({self.e_L(s)} + {self.e_L(s)})"),
            (1, lambda: f"{self.e_L(s)}[1:]"),
            (0.5, lambda: f"{self.e_L(s)}[::-1]"),
            (1, lambda: f"sorted({self.e_L(s)})"),
            (0.5, lambda: f"list({self.e_D(s)}.values())"),
            (0.5, lambda: f"{self.r.choice(self.vars_of('O'))}.items"),
            (0.5, lambda: f"list(map(lambda {c}: {c} + 1, {self.e_L(s)}))"),
            (0.3, lambda: f"[{c} for {c} in range(3)]"),
            (0.3, lambda: f"[len({self.r.choice(self.vars_of('TL'))})]"),
            (0.7 * self.x, lambda: f"sorted({self.e_S(s)})"),
            (0.5 * self.x, lambda: f"list(count_up({self.e_I(s)}))"),
            (0.3 * self.x, lambda: f"[{c} + 1 for {c} in count_both({self.e_I(s)}, {self.e_L(s)})]"),
        ])

    def e_S(self, d: int) -> str:
        leaves = self.vars_of("S")
        if leaves and (d == 0 or self.chance(0.4)):
            return self.r.choice(leaves)
        s = max(d - 1, 0)
        c = self.fresh("c")
        return self.pick([
            (2, lambda: f"set({self.e_L(s)})"),
            (1, lambda: "{" + ", ".join(self.e_I(s) for _ in range(self.r.randint(1, 3))) + "}"),
            (2, lambda: f"{{{c} % 3 for {c} in {self.e_L(s)}}}"),
            *[(1 if d > 0 else 0, lambda op=op: f"({self.e_S(s)} {op} {self.e_S(s)})") for op in "|&-"],
            (0.5, lambda: f"set({self.e_D(s)}.values())"),
            (0.5, lambda: f"set(count_up({self.e_I(s)}))"),
        ])

    def e_D(self, d: int) -> str:
        leaves = self.vars_of("D")
        if d == 0 or self.chance(0.4):
            return self.r.choice(leaves)
        s = d - 1
        k, v = self.fresh("k"), self.fresh("c")
        return self.pick([
            (2, lambda: "{" + ", ".join(f"{key!r}: {self.e_I(s)}" for key in
                                        self.r.sample(KEYS, self.r.randint(0, 3))) + "}"),
            (2, lambda: f"{{{k}: {v} * 2 for {k}, {v} in {self.e_D(s)}.items()}}"),
            (1, lambda: f"dict({self.e_D(s)})"),
            (1, lambda: f"{{**{self.e_D(s)}, {self.r.choice(KEYS)!r}: {self.e_I(s)}}}"),
            (0.7 * self.m, lambda: f"{{{k}: {v} for {v}, {k} in "
                                   f"enumerate({self.r.choice(['KEYS3', 'sorted(' + self.e_D(s) + ')'])})}}"),
            (0.5 * self.m, lambda: f"{{{k}: {v} + 1 for {k}, {v} in zip(KEYS3, {self.e_L(s)})}}"),
            (0.4 * self.m, lambda: f"{{{k}: len({v}) for {k}, {v} in zip(KEYS3, [{self.e_L(s)}, {self.e_L(s)}])}}"),
        ])

    def e_TL(self, d: int) -> str:
        leaves = self.vars_of("TL")
        if d == 0 or self.chance(0.4):
            return self.r.choice(leaves)
        s = d - 1
        c = self.fresh("c")
        return self.pick([
            (2, lambda: f"[{', '.join(self.e_T(s) for _ in range(self.r.randint(0, 3)))}]"),
            (2, lambda: f"[{c} * 2 for {c} in {self.e_TL(s)}]"),
            (1, lambda: f"[{self.e_T(s)} * {c} for {c} in range({self.e_I(0)} % 4)]"),
            (1, lambda: f"{self.e_TL(s)}[1:]"),
            (1 * self.x if self.vars_of("GENT") else 0,
             lambda: f"list({self.r.choice(self.vars_of('GENT'))}({self.e_TL(s)}))"),
            (0.5 * self.m, lambda: f"list(reversed({self.e_TL(s)}))"),
            (0.4 * self.m, lambda: f"[{c} * {k} for {k}, {c} in enumerate({self.e_TL(s)})]"
             if (k := self.fresh("c")) else ""),
            (0.4 * self.m, lambda: f"[{c} + {k} for {c}, {k} in zip({self.e_TL(s)}, {self.e_TL(s)})]"
             if (k := self.fresh("c")) else ""),
        ])

    def e_O(self, d: int) -> str:
        leaves = self.vars_of("O")
        if d == 0 or self.chance(0.8):
            return self.r.choice(leaves)
        if self.caches and self.chance(0.5):
            return f"Obj2({self.e_I(d - 1)}, {self.e_T(d - 1)})"
        return f"Obj({self.e_I(d - 1)}, {self.e_T(d - 1)})"

    # -- statements ---------------------------------------------------------------------------------------
    def block(self, ind: int, n: int, new_scope: bool = True) -> list[str]:
        if new_scope:
            self.scopes.append({})
        lines: list[str] = []
        for _ in range(n):
            lines += self.stmt(ind)
        if not lines:
            lines = [" " * ind + "pass"]
        if new_scope:
            self.scopes.pop()
        return lines

    def assignable(self, ty: str) -> list[str]:
        """Names of this function (a helper must not rebind its closure variables: they would become local)."""
        found = []
        for scope in self.scopes[self.local_floor:]:
            found.extend(name for name, t in scope.items() if t == ty and name not in GLOBAL_READABLE)
        return found

    def growing(self) -> bool:
        """Inside a loop or a helper (which loops may call), lists must not double: only literals extend."""
        return bool(self.in_loop or self.in_helper)

    def list_arg(self) -> str:
        if self.growing():
            return f"[{', '.join(self.e_I(1) for _ in range(self.r.randint(0, 2)))}]"
        return self.e_L(1)

    def stmt(self, ind: int) -> list[str]:
        self.budget -= 1
        p = " " * ind
        depth = ind // 4 - 1
        e = self.expr
        nest = 1.0 if depth < self.max_depth and self.budget > 0 else 0.0
        mut = 0.0 if self.no_mut else 1.0
        ls, ds, os_, tls = self.vars_of("L"), self.vars_of("D"), self.vars_of("O"), self.vars_of("TL")
        key = self.r.choice(KEYS)
        risky_key = self.r.choice(KEYS + (MISSING_KEY,))
        options: list[tuple[float, Callable[[], list[str]]]] = [
            (6, lambda: self.s_assign(p)),
            (3, lambda: self.s_reassign(p)),
            (2, lambda: self.s_augassign(p)),
            (1.5 * mut, lambda: [p + self.r.choice([
                f"{self.r.choice(ls)}.append({e('I', 2)})",
                f"{self.r.choice(ls)}.insert({self.small_int()}, {e('I', 1)})",
                f"{self.r.choice(ls)}.extend({self.list_arg()})",
                (lambda t_: f"{t_} += {self.list_arg()}" if t_ else "pass")(self.assignable("L")[:1] and
                                                                         self.r.choice(self.assignable("L"))),
                f"{self.r.choice(ls)}.sort()",
                f"{self.r.choice(ls)}.reverse()",
                f"{self.r.choice(ls)}[:] = {self.list_arg()}",
                f"{self.r.choice(os_)}.items.append({e('I', 1)})",
                "GLIST.append(" + e("I", 1) + ")",
            ])]),
            (0.7 * mut, lambda: (lambda l_: [p + f"if {l_}:", p + f"    {l_}[{e('I', 1)} % len({l_})] = {e('I', 1)}"])(
                self.r.choice(ls))),
            (0.5 * mut, lambda: (lambda l_: [p + f"if {l_}:", p + f"    {l_}.pop()"])(self.r.choice(ls))),
            (self.risk * 10 * mut, lambda: [p + self.r.choice([
                f"{self.r.choice(ls)}.pop()",
                f"{self.r.choice(ls)}[{e('I', 1)}] = {e('I', 1)}",
                f"del {self.r.choice(ls)}[{e('I', 1)}]",
                f"{self.r.choice(ls)}.remove({e('I', 0)})",
                f"del {self.r.choice(ds)}[{risky_key!r}]",
            ])]),
            (1.5 * mut, lambda: [p + self.r.choice([
                f"{self.r.choice(ds)}[{key!r}] = {e('I', 2)}",
                f"{self.r.choice(ds)}.pop({risky_key!r}, None)",
                f"{self.r.choice(ds)}.update({e('D', 1)})",
                f"{self.r.choice(ds)}.setdefault({key!r}, {e('I', 1)})",
                f"GDICT[{key!r}] = {e('I', 1)}",
            ])]),
            (0.5 * mut, lambda: [p + f"{self.r.choice(tls)}.append({e('T', 1)})"]),
            (0.3 * mut, lambda: (lambda t_: [p + f"if {t_}:", p + f"    {t_}[0] = {e('T', 1)}"])(self.r.choice(tls))),
            (2, lambda: [p + self.r.choice([
                f"{self.r.choice(os_)}.a = {e('I', 2)}",
                f"{self.r.choice(os_)}.t = {e('T', 2)}",
                f"{self.r.choice(os_)}.extra = {e('I', 1)}",
                f"setattr({self.r.choice(os_)}, 'a', {e('I', 1)})",
                f"{self.r.choice(os_)}.bump({e('I', 1)})",
            ])]),
            (self.risk * 3, lambda: [p + f"del {self.r.choice(os_)}.extra"]),
            (1.5, lambda: [p + self.r.choice([
                f"COUNTER += {e('I', 1)}",
                f"GT = {e('T', 2)}",
                f"GOBJ.a = {e('I', 1)}",
            ])]),
            (2, lambda: self.s_print(p)),
            (0.3, lambda: [p + f"{self.r.choice(self.vars_of('T'))}[0] = {e('F', 1)}"]),
            (0.2, lambda: [p + f"{self.r.choice(self.vars_of('T'))}.add_({e('T', 1)})"]),
            (0.5, lambda: [p + "psdb.breakgraph()"]),
            (self.risk * 5, lambda: [p + f"if {e('B', 2)}:", p + f"    raise {self.r.choice(['ValueError', 'FuzzError', 'KeyError'])}(f\"bad {{{e('I', 1)}}}\")"]),
            (self.risk * 3, lambda: [p + f"assert {e('B', 2)}, f\"assert {{{e('I', 1)}}}\""]),
            (0.5 if not self.in_helper else 0, lambda: [p + f"if {e('B', 2)}:", p + f"    return {self.return_expr()}"]),
            (0.7 if self.in_loop else 0, lambda: [p + f"if {e('B', 1)}:", p + "    " + self.r.choice(["break", "continue"])]),
            (4 * nest, lambda: self.s_if(ind)),
            (2.5 * nest, lambda: self.s_for(ind)),
            (1 * nest, lambda: self.s_while(ind)),
            (self.p_try * 30 * nest, lambda: self.s_try(ind)),
            (1 * nest, lambda: self.s_no_grad(ind)),
            (1.2 * nest * mut * self.x, lambda: self.s_with(ind)),  # (Track appends to GLIST)
            (1.5 * mut * self.x if self.vars_of("S") else 0, lambda: [p + self.r.choice([
                f"{self.r.choice(self.vars_of('S'))}.add({e('I', 1)})",
                f"{self.r.choice(self.vars_of('S'))}.discard({e('I', 1)})",
                f"{self.r.choice(self.vars_of('S'))}.update({self.list_arg()})",
                f"{self.r.choice(self.vars_of('S'))}.intersection_update({e('S', 1)})",
                f"{self.r.choice(self.vars_of('S'))}.difference_update({e('L', 1)})",
            ])]),
            (self.risk * 5 * mut * self.x if self.vars_of("S") else 0,
             lambda: [p + f"{self.r.choice(self.vars_of('S'))}.remove({e('I', 1)})"]),
            (1.2 * nest * self.m, lambda: self.s_while_tensor(ind)),
            (1.5 * self.m, lambda: self.s_inplace_tensor(ind)),
            (0.8 * self.m, lambda: self.s_star_unpack(p)),
            (0.6 * nest * self.m if not self.in_helper else 0, lambda: self.s_try_finally_return(ind)),
            (0.5 * self.m, lambda: self.s_bag(p)),
            (0.4 * self.m, lambda: self.s_make_acc(p)),
            (0.5 * self.m, lambda: [p + self.r.choice(["GSCALE = GSCALE * 0.5", "GSCALE += 1.0",
                                                       f"GSCALE = float({e('I', 1)})"])]),
            (0.5 * self.m, lambda: [p + f"GT = {e('T', 1)} if GT is None else GT + {e('T', 1)}"]),
            (0.8 * self.c, lambda: self.s_tensor_dict(p)),
            (1.0 * self.c * mut if self.vars_of("DT") else 0, lambda: self.s_tensor_dict_change(p)),
            (0.6 * nest * self.c if self.vars_of("DT") else 0, lambda: self.s_tensor_dict_loop(ind)),
            (0.8 * self.c, lambda: self.s_aug_target(p)),
            (0.5 * nest * self.c, lambda: self.s_tensor_items_loop(ind)),
            (0.5 * nest * self.c, lambda: self.s_walrus(ind)),
            (self.p_try * 10 * nest * self.c, lambda: self.s_raise_from(ind)),
            (1.2 * nest * self.o, lambda: self.s_match(ind)),
            (0.4 * self.o, lambda: self.s_lambdas_with_defaults(p)),
            (0.3 * self.o, lambda: self.s_partial(p)),
            (0.4 * self.o, lambda: [p + self.r.choice(["GATE.scale = GATE.scale * 0.5", f"GATE.scale = {self.e_F(1)}",
                                                       "GATE.eval()", "GATE.train()"])]),
            (0.2 * self.o, lambda: [p + "with paddle.no_grad():",
                                    p + f"    GATE.alpha.{self.r.choice(['scale_(0.5)', 'add_(paddle.ones([1]))'])}"]),
        ]
        options += self.shaped_stmts(ind, nest)
        helpers = [h for h in self.helpers if not (self.no_mut and h.mutates)]
        if helpers:
            options.append((1, lambda: [p + self.call_helper(self.r.choice(helpers), 2)]))
        total = sum(w for w, _ in options if w > 0)
        x = self.r.random() * total
        for weight, make in options:
            if weight <= 0:
                continue
            x -= weight
            if x <= 0:
                return make()
        return options[0][1]()

    def s_assign(self, p: str) -> list[str]:
        ty = self.r.choice(["T", "T", "T", "T0", "I", "I", "F", "L", "D", "TL", "O"] + ["S"] * self.extended)
        value = self.expr(ty, self.r.randint(1, 3))
        name = self.fresh()
        self.declare(name, ty)
        return [p + f"{name} = {value}"]

    def s_reassign(self, p: str) -> list[str]:
        ty = self.r.choice(["T", "T", "T0", "I", "I", "F", "L", "D"])
        targets = self.assignable(ty)
        if not targets:
            return self.s_assign(p)
        return [p + f"{self.r.choice(targets)} = {self.expr(ty, self.r.randint(1, 3))}"]

    def s_augassign(self, p: str) -> list[str]:
        ty = self.r.choice(["T", "T", "T0", "I", "I", "F"])
        targets = self.assignable(ty)
        if not targets:
            return self.s_assign(p)
        target = self.r.choice(targets)
        op = self.r.choice(["+=", "-=", "*="])
        value = {"T": lambda: self.e_Tany(1), "T0": lambda: self.e_T0(1), "I": lambda: self.e_I(1),
                 "F": lambda: self.e_num(1)}[ty]()
        return [p + f"{target} {op} {value}"]

    def s_print(self, p: str) -> list[str]:
        tag = f"p{self.fresh('')}"
        e = self.expr
        return [p + self.r.choice([
            f"print({tag!r}, {e('I', 2)}, {e('L', 1)})",
            f'print(f"{tag} {{{e("I", 1)}}} {{{e("F", 1)}:.3f}}")',
            f"print({tag!r}, sorted({e('D', 1)}.items()))",
            f"print({tag!r}, {self.r.choice(self.vars_of('T'))}.shape, len({self.r.choice(self.vars_of('TL'))}))",
            f"print({tag!r}, {self.r.choice(self.vars_of('O'))}.a, COUNTER, sep='|')",
            f'print(f"{tag} {{float({e("T0", 1)}):.2f}}")',
        ] + (self.shape_prints(tag) if self.more else []))]

    def shape_prints(self, tag: str) -> list[str]:
        """Prints formatting the shape, dtype and size of a tensor (seeds from MORE_FROM on)."""
        t = self.r.choice(self.vars_of("T"))
        return [
            f'print(f"{tag} {{{t}.shape}} {{{t}.dtype}} {{list({t}.shape)}}")',
            f"print('{tag} %d %s' % ({t}.shape[0], tuple({t}.shape)))",
            f"print('{tag} {{}} {{}}'.format({t}.shape, {t}.size))",
            f"print({tag!r}, str({t}.shape), repr({t}.shape[0]), {t}.ndim)",
            f'print(f"{tag} {{[tuple(c.shape) for c in {self.r.choice(self.vars_of("TL"))}]}}")',
        ]

    def s_if(self, ind: int) -> list[str]:
        p = " " * ind
        lines = [p + f"if {self.e_B(2)}:"] + self.block(ind + 4, self.r.randint(1, 3))
        if self.chance(0.3):
            lines += [p + f"elif {self.e_B(2)}:"] + self.block(ind + 4, self.r.randint(1, 2))
        if self.chance(0.5):
            lines += [p + "else:"] + self.block(ind + 4, self.r.randint(1, 3))
        return lines

    def loop_body(self, ind: int, header: list[str], scope: dict[str, str], live: bool) -> list[str]:
        self.scopes.append(scope)
        self.in_loop += 1
        self.no_mut += live
        lines = header + self.block(ind + 4, self.r.randint(1, 3), new_scope=False)
        self.no_mut -= live
        self.in_loop -= 1
        self.scopes.pop()
        return lines

    def s_for(self, ind: int) -> list[str]:
        p = " " * ind
        a, b = self.fresh("e"), self.fresh("e")
        live = self.chance(0.5)
        wrap = (lambda s: s) if live else (lambda s: f"list({s})")
        kind = self.r.choice(["list", "range", "enumerate", "dict", "tensors", "zip"]
                             + ["set", "generator"] * self.extended
                             + ["enum_tensors", "reversed_tensors", "zip_tensors"] * self.more)
        if kind == "enum_tensors":
            return self.loop_body(ind, [p + f"for {a}, {b} in enumerate({wrap(self.e_TL(1))}):"],
                                  {a: "I", b: "T"}, live)
        if kind == "reversed_tensors":
            return self.loop_body(ind, [p + f"for {a} in reversed({wrap(self.e_TL(1))}):"], {a: "T"}, live)
        if kind == "zip_tensors":
            return self.loop_body(ind, [p + f"for {a}, {b} in zip({wrap(self.e_TL(1))}, {self.e_TL(1)}[::-1]):"],
                                  {a: "T", b: "T"}, live)
        if kind == "set":
            return self.loop_body(ind, [p + f"for {a} in {wrap(self.e_S(1))}:"], {a: "I"}, live)
        if kind == "generator":
            source = self.r.choice([f"count_up({self.e_I(1)})", f"count_both({self.e_I(1)}, {self.e_L(1)})"])
            return self.loop_body(ind, [p + f"for {a} in {source}:"], {a: "I"}, False)
        if kind == "list":
            return self.loop_body(ind, [p + f"for {a} in {wrap(self.e_L(1))}:"], {a: "I"}, live)
        if kind == "range":
            return self.loop_body(ind, [p + f"for {a} in range({self.e_I(1)} % 4):"], {a: "I"}, False)
        if kind == "enumerate":
            return self.loop_body(ind, [p + f"for {a}, {b} in enumerate({wrap(self.e_L(1))}):"],
                                  {a: "I", b: "I"}, live)
        if kind == "dict":
            return self.loop_body(ind, [p + f"for {a}, {b} in {wrap(self.e_D(1) + '.items()')}:"],
                                  {b: "I"}, live)
        if kind == "tensors":
            return self.loop_body(ind, [p + f"for {a} in {wrap(self.e_TL(1))}:"], {a: "T"}, live)
        return self.loop_body(ind, [p + f"for {a}, {b} in zip({wrap(self.e_L(1))}, {wrap(self.e_TL(1))}):"],
                              {a: "I", b: "T"}, live)

    def s_while(self, ind: int) -> list[str]:
        p = " " * ind
        counter = self.fresh("w")
        header = [p + f"{counter} = 0", p + f"while {counter} < {self.r.choice(['2', '3', self.e_I(1) + ' % 4'])}:",
                  p + f"    {counter} += 1"]
        return self.loop_body(ind, header, {}, False)  # the counter is never reassigned

    def s_try(self, ind: int) -> list[str]:
        p = " " * ind
        exc = self.fresh("ex")
        caught = self.r.choice(["ZeroDivisionError", "IndexError", "KeyError", "(ZeroDivisionError, IndexError, "
                                "KeyError, ValueError)", "Exception", "(ValueError, FuzzError)"])
        saved, self.risk = self.risk, max(self.risk, 0.1)
        lines = [p + "try:"] + self.block(ind + 4, self.r.randint(1, 3))
        self.risk = saved
        self.scopes.append({})
        handler = [p + f"    print('caught', type({exc}).__name__, {exc})"] if self.chance(0.6) else []
        lines += [p + f"except {caught} as {exc}:"] + handler + \
            self.with_break(self.block(ind + 4, self.r.randint(0, 2)), ind + 4)
        self.scopes.pop()
        if self.chance(0.3):
            lines += [p + "else:"] + self.block(ind + 4, 1)
        if self.chance(0.3):
            lines += [p + "finally:"] + self.with_break(self.block(ind + 4, 1), ind + 4)
        return lines

    def s_while_tensor(self, ind: int) -> list[str]:
        """A bounded ``while`` loop left early (``break``) or skipping ahead (``continue``) on a tensor's
        value read with ``.item()``, ``bool()`` or ``float()``; or with such a value in its condition."""
        p = " " * ind
        counter = self.fresh("w")
        bound = self.r.choice(["3", "4", f"{self.e_I(1)} % 5"])
        if self.chance(0.3):
            header = [p + f"{counter} = 0",
                      p + f"while {counter} < {bound} and {self.tensor_test(1)}:", p + f"    {counter} += 1"]
            return self.loop_body(ind, header, {}, False)
        header = [p + f"{counter} = 0", p + f"while {counter} < {bound}:", p + f"    {counter} += 1"]
        lines = self.loop_body(ind, header, {}, False)
        self.scopes.append({})
        exit_ = [p + f"    if {self.tensor_test(1)}:", p + f"        {self.r.choice(['break', 'continue'])}"]
        self.scopes.pop()
        at = self.r.choice([i for i in range(3, len(lines) + 1)
                            if i == len(lines) or len(lines[i]) - len(lines[i].lstrip(" ")) == ind + 4
                            and not lines[i].lstrip().startswith(("else", "elif", "except", "finally"))])
        return lines[:at] + exit_ + lines[at:]

    def tensor_test(self, d: int) -> str:
        return self.r.choice([
            f"{self.e_T0(d)}.item() > {self.e_F(0)}",
            f"bool({self.e_T0(d)} < {self.e_F(0)})",
            f"float({self.e_T(d)}.sum()) > {self.e_F(0)}",
            f"bool(({self.e_T(d)} > 0).any())",
        ])

    def s_inplace_tensor(self, ind: int) -> list[str]:
        """An in-place tensor method or item assignment on an argument, a local or an item of a tensor list;
        or an update of the parameter ``w`` under ``paddle.no_grad()`` (an optimizer's step)."""
        p = " " * ind
        ts = [t for t in self.vars_of("T") if t != "w"] or ["x"]
        tl = self.r.choice(self.vars_of("TL"))
        target = self.r.choice([self.r.choice(ts), self.r.choice(ts), f"{tl}[{self.e_I(0)} % len({tl})]"])
        guard = [p + f"if {tl}:"] if target.startswith(f"{tl}[") else []
        q = p + "    " if guard else p
        if "w" in self.vars_of("T") and self.chance(0.15):
            return [p + "with paddle.no_grad():",
                    p + "    w." + self.r.choice([f"add_({self.e_T(1)} * 0.1)", "scale_(0.5)",
                                                  f"subtract_({self.e_T(1)})"])]
        op = self.r.choice([
            f"add_({self.e_T(1)})", f"scale_({self.r.choice(['2.0', '0.5', '-1.0'])})",
            f"multiply_({self.e_T(1)})", f"subtract_({self.e_T(1)})", "clip_(-1.0, 1.0)",
            f"[{self.e_I(0)} % {target}.shape[0]] = {self.e_F(1)}", f"[1:] = {self.e_T(1)}[1:]",
            f"[:] = {self.e_T(1)}", "[0] += 1.0", f"[::2] *= {self.e_F(0)}",
        ])
        sep = "" if op.startswith("[") else "."
        return guard + [q + f"{target}{sep}{op}"]

    def s_star_unpack(self, p: str) -> list[str]:
        a, b = self.fresh(), self.fresh()
        kind = self.r.choice(["L", "L", "TL", "TL_last"])
        if kind == "L":
            source = self.e_L(1) if self.chance(self.risk * 5) else f"[{self.e_I(1)}] + {self.e_L(1)}"
            self.declare(a, "I")
            self.declare(b, "L")
            return [p + f"{a}, *{b} = {source}"]
        if kind == "TL":
            line = p + f"{a}, *{b} = [{self.e_T(1)}] + {self.e_TL(1)}"
            self.declare(a, "T")
            self.declare(b, "TL")
            return [line]
        line = p + f"*{a}, {b} = ({self.e_T(1)}, *{self.e_TL(1)}, {self.e_T(1)})"
        self.declare(a, "TL")
        self.declare(b, "T")
        return [line]

    def s_try_finally_return(self, ind: int) -> list[str]:
        """``try`` holding a conditional ``return`` of ``f``, and a ``finally`` with a visible effect."""
        p = " " * ind
        lines = [p + "try:"] + self.block(ind + 4, self.r.randint(0, 2))
        lines += [p + f"    if {self.e_B(2)}:", p + f"        return {self.return_expr()}"]
        lines += self.block(ind + 4, self.r.randint(0, 1)) if self.chance(0.5) else []
        lines += [p + "finally:", p + "    " + self.r.choice([
            f"print('fin', {self.e_I(1)})", "COUNTER += 1", f"print('fin', {self.r.choice(self.vars_of('T'))}.shape)"]
            + [f"GLIST.append({self.e_I(1)})"] * (not self.no_mut))]
        return lines

    def s_bag(self, p: str) -> list[str]:
        name = self.fresh("bag")
        line = p + f"{name} = Bag({self.e_TL(1)}, {self.e_T(1)}, {self.e_I(1)})"
        self.declare(name, "BAG")
        return [line]

    def s_tensor_dict(self, p: str) -> list[str]:
        name = self.fresh("dt")
        keys = self.r.sample(KEYS, self.r.randint(1, 3))
        line = p + f"{name} = {{" + ", ".join(f"{k!r}: {self.e_T(1)}" for k in keys) + "}"
        self.declare(name, "DT")
        return [line]

    def s_tensor_dict_change(self, p: str) -> list[str]:
        dt = self.r.choice(self.vars_of("DT"))
        return [p + self.r.choice([
            f"{dt}[{self.r.choice(KEYS)!r}] = {self.e_T(1)}",
            f"{dt}.update({self.r.choice(KEYS)}={self.e_T(1)})",
            f"{dt}.setdefault({self.r.choice(KEYS)!r}, {self.e_T(1)})",
            f"{dt}.pop({self.r.choice(KEYS)!r}, None)",
            f"GCACHE[{self.r.choice(KEYS)!r}] = {dt}.get({self.r.choice(KEYS)!r}, {self.e_T(0)})",
        ])]

    def s_tensor_dict_loop(self, ind: int) -> list[str]:
        p = " " * ind
        k, v = self.fresh("e"), self.fresh("e")
        dt = self.r.choice(self.vars_of("DT"))
        source = self.r.choice([f"{dt}.items()", f"sorted({dt}.items())", f"list({dt}.items())"])
        live = source.startswith(dt)
        return self.loop_body(ind, [p + f"for {k}, {v} in {source}:"], {v: "T"}, live)

    def s_aug_target(self, p: str) -> list[str]:
        tl = self.r.choice(self.vars_of("TL"))
        options = [
            [f"{self.e_O(0)}.t {self.r.choice(['+=', '-=', '*='])} {self.e_Tany(1)}"],
            [f"{self.e_O(0)}.a {self.r.choice(['+=', '-='])} {self.e_I(1)}"],
            [f"GOBJ.a -= {self.e_I(1)}"],
        ]
        if not self.no_mut:
            options.append([f"if {tl}:", f"    {tl}[{self.e_I(0)} % len({tl})] += {self.e_Tany(1)}"])
        return [p + line for line in self.r.choice(options)]

    def s_tensor_items_loop(self, ind: int) -> list[str]:
        """``for item in tensor``: 0-d items of a 1-D tensor."""
        p = " " * ind
        a = self.fresh("e")
        return self.loop_body(ind, [p + f"for {a} in {self.e_T(1)}:"], {a: "T0"}, False)

    def s_walrus(self, ind: int) -> list[str]:
        p = " " * ind
        name = self.fresh("v")
        ty = self.r.choice(["I", "T0"])
        test = f"(({name} := {self.e_I(1)}) > {self.small_int()})" if ty == "I" else \
            f"(({name} := {self.e_T0(1)}) > {self.e_F(0)})"
        lines = [p + f"if {test}:"] + self.block(ind + 4, self.r.randint(1, 2))
        self.declare(name, ty)
        return lines

    def s_raise_from(self, ind: int) -> list[str]:
        """An error wrapped into a FuzzError with ``raise ... from``, maybe caught again outside."""
        p = " " * ind
        exc = self.fresh("ex")
        saved, self.risk = self.risk, max(self.risk, 0.15)
        lines = [p + "try:"] + self.block(ind + 4, self.r.randint(1, 2))
        self.risk = saved
        lines += [p + f"except (ValueError, IndexError, KeyError, ZeroDivisionError) as {exc}:",
                  p + f"    raise FuzzError(f\"wrapped {{type({exc}).__name__}}\") from {exc}"]
        if self.chance(0.5):
            outer = self.fresh("ex")
            lines = [p + "try:"] + ["    " + line for line in lines] + \
                [p + f"except FuzzError as {outer}:",
                 p + f"    print('chained', {outer}, type({outer}.__cause__).__name__)"]
        return lines

    def s_match(self, ind: int) -> list[str]:
        """A ``match`` statement on an int (literal alternatives, a capture with a guard), a list (sequence
        patterns with a star capture) or a dict of ints (mapping patterns)."""
        p = " " * ind
        kind = self.r.choice(["int", "list", "dict"])
        cases: list[tuple[str, dict[str, str]]]
        if kind == "int":
            subject = self.e_I(2)
            k = self.fresh("m")
            cases = [(f"{self.small_int()} | {self.small_int()}", {}),
                     (f"int({k}) if {k} > {self.small_int()}", {k: "I"})]
        elif kind == "list":
            subject = self.e_L(1)
            a, b = self.fresh("m"), self.fresh("m")
            cases = [("[]", {}), (f"[{a}]", {a: "I"}), (f"[{a}, *{b}] if {a} > 0", {a: "I", b: "L"}),
                     (f"[_, {a}, *_]", {a: "I"})]
            cases = self.r.sample(cases, self.r.randint(1, 3))
        else:
            subject = self.e_D(1)
            a, b = self.fresh("m"), self.fresh("m")
            cases = [(f"{{{self.r.choice(KEYS)!r}: {a}}}", {a: "I"}),
                     (f"{{{self.r.choice(KEYS)!r}: {a}, **{b}}} if len({b}) > 0", {a: "I", b: "D"}),
                     (f"{{{self.r.choice(KEYS)!r}: {self.small_int()}}}", {})]
            cases = self.r.sample(cases, self.r.randint(1, 2))
        lines = [p + f"match {subject}:"]
        for pattern, scope in cases:
            self.scopes.append(scope)
            lines += [p + f"    case {pattern}:"] + self.block(ind + 8, self.r.randint(1, 2), new_scope=False)
            self.scopes.pop()
        if self.chance(0.7):
            lines += [p + "    case _:"] + self.block(ind + 8, self.r.randint(1, 2))
        return lines

    def s_lambdas_with_defaults(self, p: str) -> list[str]:
        """Three lambdas made in a comprehension, each binding the loop variable through a default."""
        name, c = self.fresh("lams"), self.fresh("c")
        body = self.r.choice([f"t * {c}", f"t + {c} * {self.e_F(0)}", f"paddle.tanh(t) * {c} - t"])
        line = p + f"{name} = [lambda t, {c}={c}: {body} for {c} in range(1, 4)]"
        self.declare(name, "LAMTL")
        return [line]

    def s_partial(self, p: str) -> list[str]:
        name = self.fresh("lam")
        line = p + f"{name} = " + self.r.choice([
            f"functools.partial(paddle.clip, min={self.e_F(0)}, max=3.0)",
            f"functools.partial(paddle.scale, scale={self.e_F(0)}, bias={self.e_F(0)})",
            f"functools.partial(Affine({self.e_F(0)}), shift={self.e_F(0)})",
            "functools.partial(F.leaky_relu, negative_slope=0.1)",
        ])
        self.declare(name, "LAMT")
        return [line]

    def s_make_acc(self, p: str) -> list[str]:
        name = self.fresh("lam")
        line = p + f"{name} = make_acc({self.e_T(1)})"
        self.declare(name, "LAMT")
        return [line]

    def s_with(self, ind: int) -> list[str]:
        """A block under the user context manager ``Track``; one that swallows errors gets riskier code."""
        if self.breaks_in_blocks:
            return self.s_with_managers(ind)
        p = " " * ind
        swallow = self.chance(0.4)
        manager = f"Track({self.r.randint(1, 9)}{', True' if swallow else ''})"
        if self.chance(0.3):
            manager += ", paddle.no_grad()"
        saved = self.risk
        if swallow:
            self.risk = max(self.risk, 0.1)
        lines = [p + f"with {manager}:"] + self.block(ind + 4, self.r.randint(1, 3))
        self.risk = saved
        return lines

    def s_with_managers(self, ind: int) -> list[str]:
        """A ``with`` of one to three managers among ``Track``, the generator-based ``scoped`` (maybe bound
        with ``as``) and ``paddle.no_grad()``, whose block may hold a graph break."""
        p = " " * ind
        managers, swallow, scope = [], False, {}
        for _ in range(self.r.choice([1, 1, 1, 2, 2, 3])):
            kind = self.r.choice(["track", "scoped", "scoped", "no_grad"])
            if kind == "no_grad":
                managers.append("paddle.no_grad()")
                continue
            quiet = self.chance(0.4)
            swallow = swallow or quiet
            if kind == "track":
                managers.append(f"Track({self.r.randint(1, 9)}{', True' if quiet else ''})")
                continue
            manager = f"scoped({self.r.randint(1, 9)}{', True' if quiet else ''})"
            if self.chance(0.5):
                name = self.fresh("cm")
                manager += f" as {name}"
                scope[name] = "I"
            managers.append(manager)
        saved = self.risk
        if swallow:
            self.risk = max(self.risk, 0.1)
        self.scopes.append(scope)
        body = self.with_break(self.block(ind + 4, self.r.randint(1, 3)), ind + 4)
        self.scopes.pop()
        self.risk = saved
        return [p + f"with {', '.join(managers)}:"] + body

    def break_stmt(self, p: str) -> list[str]:
        """A statement that breaks the graph: an explicit break, a tensor's value read, a branch on a tensor."""
        return self.pick([
            (2, lambda: [p + "psdb.breakgraph()"]),
            (1, lambda: [p + f"COUNTER += int({self.e_T0(1)}.item() > 0)"]),
            (1, lambda: [p + f"print('brk', round(float({self.e_T0(1)}), 3))"]),
            (1, lambda: [p + f"if {self.e_T0(1)} > {self.e_F(0)}:", p + f"    COUNTER += {self.e_I(1)}"]),
        ])

    def with_break(self, lines: list[str], ind: int) -> list[str]:
        """``lines`` (a block at indent ``ind``) with a graph break inserted before one of its statements or
        at its end, for the seeds from WITH_BREAKS_FROM on (half of the time)."""
        if not self.breaks_in_blocks or not self.chance(0.5):
            return lines
        continuation = ("else", "elif", "except", "finally")
        spots = [i for i, line in enumerate(lines) if len(line) - len(line.lstrip(" ")) == ind
                 and not line.lstrip().startswith(continuation)] + [len(lines)]
        at = self.r.choice(spots)
        return lines[:at] + self.break_stmt(" " * ind) + lines[at:]

    def s_no_grad(self, ind: int) -> list[str]:
        p = " " * ind
        return [p + "with paddle.no_grad():"] + self.with_break(self.block(ind + 4, self.r.randint(1, 3)), ind + 4)

    def return_expr(self) -> str:
        picks = []
        for _ in range(self.r.randint(1, 4)):
            ty = self.r.choice(["T", "T", "T0", "I", "F", "L", "D", "TL", "O"] + ["S"] * self.extended
                               + ["G", "G", "G"] * self.shaped)
            if ty == "G":
                picks.append(self.shaped_return() if self.g_visible() else self.e_T(1))
            elif ty == "O":
                picks.append(f"{self.e_O(0)}.a")
            elif self.chance(0.5) and self.vars_of(ty):
                picks.append(self.r.choice(self.vars_of(ty)))
            else:
                picks.append(self.expr(ty, 1))
        if len(picks) == 1 and self.chance(0.5):
            return picks[0]
        if self.chance(0.2):
            return "{" + ", ".join(f"'r{i}': {v}" for i, v in enumerate(picks)) + "}"
        return "(" + ", ".join(picks) + ",)"

    # -- functions ----------------------------------------------------------------------------------------
    def helper_def(self, name: str, ind: int, nested: bool) -> list[str]:
        """A helper taking 1-3 typed arguments and returning one typed value."""
        p = " " * ind
        n_args = self.r.randint(1, 3)
        arg_types = [self.r.choice(["T", "T", "I", "F", "L", "TL"]) for _ in range(n_args)]
        args = [self.fresh("a") for _ in arg_types]
        ret = self.r.choice(["T", "T", "I", "T0"])
        scope = dict(zip(args, arg_types))
        if not nested:  # module level: only module globals are visible besides the arguments
            outer, self.scopes = self.scopes, [dict(GLOBAL_READABLE), scope]
        else:
            outer = None
            self.scopes.append(scope)
        prologue: list[str] = []
        if not self.vars_of("T"):
            t = self.fresh("h")
            prologue.append(p + f"    {t} = paddle.ones([1])")
            self.scopes[-1][t] = "T"
        if not self.vars_of("TL"):
            t = self.fresh("h")
            prologue.append(p + f"    {t} = []")
            self.scopes[-1][t] = "TL"
        saved = self.in_helper, self.in_loop, self.no_mut, self.local_floor
        self.in_helper, self.in_loop, self.no_mut, self.local_floor = True, 0, 0, len(self.scopes) - 1
        globals_line = [p + ("    global COUNTER, GT, GSCALE" if self.more else "    global COUNTER, GT")]
        body = self.block(ind + 4, self.r.randint(0, 3), new_scope=False)
        ret_value = self.expr(ret, 2)
        self.in_helper, self.in_loop, self.no_mut, self.local_floor = saved
        if outer is not None:
            self.scopes = outer
        else:
            self.scopes.pop()
        text = "\n".join(body + [ret_value])
        mutates = any(tok in text for tok in (".append(", ".insert(", ".extend(", "+=", ".sort(", ".reverse(",
                                              "[:] =", ".pop(", "del ", ".update(", ".setdefault(", "] =",
                                              ".remove(", "with Track", "guarded(")) \
            or any(h.mutates and f"{h.name}(" in text for h in self.helpers)
        self.helpers.append(Helper(name, arg_types, ret, mutates, args))
        return [p + f"def {name}({', '.join(args)}):"] + globals_line + prologue + body + [p + f"    return {ret_value}"]

    def extended_closures(self) -> list[str]:
        """Closures of the extended programs: one rebinding a nonlocal tensor, one appending to a captured
        list, a generator of tensors (maybe through ``yield from``)."""
        lines: list[str] = []
        if self.chance(0.4):
            acc, push, t = self.fresh("tacc"), self.fresh("push"), self.fresh("a")
            lines += [f"    {acc} = {self.e_T(1)}", f"    def {push}({t}):", f"        nonlocal {acc}",
                      f"        {acc} = {acc} {self.r.choice(['+', '*', '-'])} {t}", f"        return {acc}"]
            self.declare(acc, "T")
            self.helpers.append(Helper(push, ["T"], "T", False))
        if self.chance(0.4):
            log, note, k = self.fresh("log"), self.fresh("note"), self.fresh("a")
            lines += [f"    {log} = []", f"    def {note}({k}):", f"        {log}.append({k})",
                      f"        return len({log})"]
            self.declare(log, "L")
            self.helpers.append(Helper(note, ["I"], "I", True))
        if self.chance(0.5):
            gen, ts, t = self.fresh("gen"), self.fresh("a"), self.fresh("t")
            body = self.r.choice([[f"        for {t} in {ts}:", f"            yield {t} * 2"],
                                  [f"        yield from ({t} + 1 for {t} in {ts})", "        yield x"]])
            lines += [f"    def {gen}({ts}):"] + body
            self.declare(gen, "GENT")
        return lines

    def generate(self) -> str:
        lines = [PRELUDE + (EXTENDED_PRELUDE if self.extended else "")
                 + (WITH_BREAKS_PRELUDE if self.breaks_in_blocks else "") + (MORE_PRELUDE if self.more else "")
                 + (CACHES_PRELUDE if self.caches else "") + (OPS_PRELUDE if self.ops else ""), ""]
        # module-level helpers
        self.scopes = []
        for _ in range(self.r.randint(0, 2)):
            self.budget = 4
            lines += self.helper_def(self.fresh("gh"), 0, nested=False) + ["", ""]
        params = dict(PARAMS, **SHAPED_PARAMS) if self.shaped else PARAMS
        self.scopes = [dict(GLOBAL_READABLE), dict(params)]
        lines.append(f"def f({', '.join(params)}):")
        lines.append("    global COUNTER, GT, GSCALE" if self.more else "    global COUNTER, GT")
        # closures and nested helpers
        if self.chance(0.4):
            acc = self.fresh("acc")
            lines.append(f"    {acc} = {self.e_I(1)}")
            self.declare(acc, "I")
            bump = self.fresh("bump")
            k = self.fresh("a")
            lines += [f"    def {bump}({k}):", f"        nonlocal {acc}", f"        {acc} += {k}",
                      f"        return {acc}"]
            self.helpers.append(Helper(bump, ["I"], "I", False))
        if self.extended:
            lines += self.extended_closures()
        for _ in range(self.r.randint(0, 2)):
            self.budget = 3
            lines += self.helper_def(self.fresh("h"), 4, nested=True)
        if self.chance(0.3):
            lam = self.fresh("lam")
            lines.append(f"    {lam} = lambda t: {self.r.choice(['t * 2', 't + x', 'paddle.tanh(t) * s'])}")
            self.declare(lam, "LAMT")
        if self.chance(0.3):
            lam = self.fresh("lam")
            lines.append(f"    {lam} = lambda k: {self.r.choice(['k + 1', 'k * n', 'k - len(lst)'])}")
            self.declare(lam, "LAMI")
        self.budget = self.r.randint(6, 22)
        while self.budget > 0:
            lines += self.stmt(4)
        lines.append(f"    return {self.return_expr()}")
        return "\n".join(lines) + "\n"


def _vec(r: random.Random, n: int) -> list[float]:
    return [round(r.uniform(-2, 2), 3) for _ in range(n)]


def make_inputs(r: random.Random, n_elems: int, extended: bool = False) -> InputSet:
    """Random inputs; ``extended``: some float values are signed zeros."""
    inputs = InputSet(
        n_elems=n_elems,
        x=_vec(r, n_elems), y=_vec(r, n_elems), w=_vec(r, n_elems),
        n=r.randint(-3, 6), s=round(r.uniform(-2, 2), 2),
        lst=[r.randint(-3, 6) for _ in range(r.randint(0, 5))],
        d={k: r.randint(-3, 6) for k in KEYS if r.random() < 0.7},
        obj_a=r.randint(-2, 4), obj_t=_vec(r, n_elems),
        tl=[_vec(r, n_elems) for _ in range(r.randint(0, 3))],
        gscale=r.choice([1.0, 2.0, 0.5]), adder=r.choice([1, 2]), gobj_a=r.randint(0, 3),
    )
    if extended:
        for values in (inputs.x, inputs.y, inputs.w, inputs.obj_t, *inputs.tl):
            values[:] = [r.choice([0.0, -0.0]) if r.random() < 0.15 else v for v in values]
        if r.random() < 0.2:
            inputs.s = r.choice([0.0, -0.0])
    return inputs


def make_shaped(r: random.Random, b: int, k: int, l: int) -> ShapedInputs:  # noqa: E741
    return ShapedInputs(b=b, k=k, l=l, xm=[_vec(r, k) for _ in range(b)],
                        xs=[[_vec(r, k) for _ in range(l)] for _ in range(b)],
                        wm=[[round(r.uniform(-1, 1), 3) for _ in range(k)] for _ in range(k)],
                        ix=[r.randrange(k) for _ in range(b)], ci=[[r.randrange(4) for _ in range(l)] for _ in range(b)])


def add_shaped_inputs(r: random.Random, first: InputSet, second: InputSet) -> None:
    """The shaped parameters of both sets: set B mostly has another batch size, sometimes another length or
    width (set B is a copy of A when the generator chose the same values again)."""
    b, k, l = r.choice([1, 2, 3, 3, 4, 5]), r.choice([2, 3, 4]), r.choice([2, 3, 4, 5])  # noqa: E741
    first.shaped = make_shaped(r, b, k, l)
    if second is first:
        return
    if r.random() < 0.25:
        second.shaped = dataclasses.replace(first.shaped)
        return
    b2 = r.choice([v for v in (1, 2, 3, 4, 5, 6) if v != b]) if r.random() < 0.7 else b
    l2 = r.choice([2, 3, 4, 5, 6]) if r.random() < 0.4 else l
    k2 = r.choice([2, 3, 4, 5]) if r.random() < 0.15 else k
    second.shaped = make_shaped(r, b2, k2, l2)


def make_third_shaped(r: random.Random, first: ShapedInputs, second: ShapedInputs) -> ShapedInputs:
    """Set C (the last run): a batch size neither A nor B had, when the cache may hold an entry whose sizes
    became dynamic after B's miss; sometimes also another length."""
    b = r.choice([v for v in (1, 2, 3, 4, 5, 6, 7) if v not in (first.b, second.b)])
    l = r.choice([2, 3, 4, 5, 6, 7]) if r.random() < 0.4 else second.l  # noqa: E741
    return make_shaped(r, b, second.k if r.random() < 0.8 else first.k, l)


def generate(seed: int) -> Program:
    gen = Gen(seed)
    source = gen.generate()
    r = random.Random(seed * 7919 + 1)
    extended = seed >= EXTENDED_FROM
    first = make_inputs(r, r.choice([3, 4, 5]), extended)
    if r.random() < 0.3:
        second = first  # the same values again: pure cache hits
    else:
        second = make_inputs(r, first.n_elems if r.random() < 0.6 else r.choice([2, 3, 4, 5, 6]), extended)
    min_graph_size = 0 if seed % 2 == 0 else 10
    if seed < SHAPES_FROM:
        return Program(seed, source, [first, second], min_graph_size)
    shaped_r = random.Random(seed * 7919 + 2)
    add_shaped_inputs(shaped_r, first, second)
    third = make_inputs(shaped_r, shaped_r.choice([2, 3, 4, 5, 6, 7]), extended)
    third.shaped = make_third_shaped(shaped_r, first.shaped, second.shaped)
    return Program(seed, source, [first, second, third], min_graph_size, runs=("A", "A", "B", "A", "C"))

"""The shaped-tensor grammar of the fuzz generator: 2-D and 3-D tensors whose sizes change between input sets.

Seeds from `generator.SHAPES_FROM` on give ``f`` five more parameters: ``xm`` float32 [B, K], ``xs`` float32
[B, L, K], ``wm`` float32 [K, K] (requires grad: its gradient is compared), ``ix`` int64 [B] with values in
[0, K) (class labels) and ``ci`` int32 [B, L] with values in [0, 4). The sizes B, K, L are drawn per input set,
and set B usually has another batch size (sometimes another length or width) than set A: the translated runs
A, A, B, A meet guards on shapes, cache misses and dynamic dimensions.

The generator tracks the symbolic shape of every such tensor: type ``"G" + shape`` where a shape is a string of
dims (``B``, ``K``, ``L`` or ``1``) out of `SHAPES`, so every operation it writes is valid at every size:
broadcasting, reductions with ``axis``/``keepdim``, ``concat``/``stack``/``split``/``chunk``/``unbind``,
transposes, ``reshape`` with ``-1`` and sizes read from ``.shape`` (shape arithmetic in slices too),
``matmul``/``bmm``/``F.linear``, ``gather``/``index_select``/``take_along_axis`` with int64 indices (``ix``,
permutations from ``arange``/``argsort``), ``one_hot``/``embedding``, float64 and int32 tensors mixed in through
casts, ``paddle.where``, ``cumsum``, comparisons to bool tensors, losses (``cross_entropy``, ``mse_loss``), loops
over ``range(x.shape[0])`` and over the rows of a tensor, branches on sizes, item assignment with masks.

Templates are strings with placeholders in angle brackets, filled recursively (`ShapedGrammar.fill`):
``<G:BK>`` a float32 expression of shape [B, K], ``<V1:BK>`` a cheap leaf of that shape (the same text for
every ``<V1:..>`` of one template), ``<C:BK>`` a bool tensor, ``<D:B>`` a Python int equal to the size B,
``<P:B>`` an int64 permutation of range(B), ``<F>`` a float, ``<N>`` an int or float, ``<I>`` an int,
``<Z>`` a 0-d float32 tensor.
"""
from __future__ import annotations

import re
from typing import Callable

SHAPES = ("BK", "BLK", "B", "K", "KK", "BL", "B1", "1K", "LK", "BLL", "KB", "L")
SHAPE_WEIGHTS = (4, 3, 2, 1, 1, 2, 1, 1, 1, 1, 1, 1)
SHAPED_PARAMS = {"xm": "GBK", "xs": "GBLK", "wm": "GKK", "ix": "IX", "ci": "CI"}

# Leaves of every shape built from the parameters (used at depth 0 besides the variables of the shape).
LEAVES = {
    "BK": ["xm", "xs.mean(1)", "xs[:, 0]", "paddle.matmul(xm, wm)"],
    "BLK": ["xs", "(xs * 1.0)"],
    "B": ["xm[:, 0]", "xm.sum(-1)", "ix.astype('float32')"],
    "K": ["wm[0]", "xm.mean(0)", "wm.sum(0)"],
    "KK": ["wm", "wm.T"],
    "BL": ["xs.mean(-1)", "ci.astype('float32')", "xs[:, :, -1]"],
    "B1": ["xm[:, :1]", "xm.sum(1, keepdim=True)"],
    "1K": ["wm[:1]", "xm.mean(0, keepdim=True)"],
    "LK": ["xs[0]", "xs.mean(0)"],
    "BLL": ["paddle.matmul(xs, xs, transpose_y=True)"],
    "KB": ["xm.T", "xm.transpose([1, 0])"],
    "L": ["xs[0, :, 0]", "paddle.arange(xs.shape[1]).astype('float32')", "ci[0].astype('float32')"],
}

# Python ints equal to a size, read from the parameters' shapes.
DIM_SOURCES = {
    "B": ["xm.shape[0]", "len(xm)", "xs.shape[0]", "ix.shape[0]", "len(ci)"],
    "K": ["xm.shape[1]", "wm.shape[0]", "xs.shape[-1]", "len(wm)", "wm.shape[-1]"],
    "L": ["xs.shape[1]", "ci.shape[1]", "ci.shape[-1]", "xs.shape[-2]"],
    "1": ["1"],
}

# Operands that broadcast against a shape: (operand shape, how it is written).
BROADCASTS = {
    "BK": [("B1", "{}"), ("1K", "{}"), ("K", "{}"), ("B", "{}.unsqueeze(-1)"), ("K", "{}.unsqueeze(0)")],
    "BLK": [("K", "{}"), ("LK", "{}"), ("BK", "{}.unsqueeze(1)"), ("BL", "{}.unsqueeze(-1)"),
            ("B1", "{}.unsqueeze(-1)")],
    "BL": [("B1", "{}"), ("L", "{}"), ("B", "{}.unsqueeze(1)")],
    "KK": [("K", "{}"), ("1K", "{}"), ("K", "{}.unsqueeze(1)")],
    "BLL": [("BL", "{}.unsqueeze(1)"), ("BL", "{}.unsqueeze(-1)"), ("L", "{}")],
    "LK": [("K", "{}"), ("1K", "{}"), ("L", "{}.unsqueeze(1)")],
    "KB": [("B", "{}"), ("K", "{}.unsqueeze(1)"), ("1K", "{}.T")],
    "B1": [("1K", "{}.sum(-1, keepdim=True)")],
    "B": [], "K": [], "L": [], "1K": [("K", "{}")],
}

# Shape-specific expressions: products, transposes, indexing with int64 tensors, casts of int tensors, creation.
SPECIFIC = {
    "BK": ["paddle.matmul(<G:BK>, <G:KK>)", "(<G:BK> @ <G:KK>.T)", "F.linear(<G:BK>, <G:KK>)",
           "paddle.matmul(<G:BL>, <G:LK>)", "paddle.matmul(<G:KB>, <G:KK>, transpose_x=True)", "<G:KB>.T",
           "<G:KB>.t()", "paddle.index_select(<G:KK>, ix)", "<G:KK>[ix]", "F.embedding(ix, <G:KK>)",
           "F.one_hot(ix, <D:K>)", "(F.one_hot(ix, <D:K>) * <G:BK>)", "<G:B1>.expand([<D:B>, <D:K>])",
           "paddle.broadcast_to(<G:K>, [<D:B>, <D:K>])", "<G:1K>.tile([<D:B>, 1])", "paddle.expand_as(<G:1K>, <V1:BK>)",
           "<G:BLK>.flatten(1).reshape([<D:B>, <D:L>, <D:K>]).sum(1)",
           "paddle.gather(<G:KK>, ix)"],
    "BLK": ["paddle.matmul(<G:BLL>, <G:BLK>)", "(<G:BLK> @ <G:KK>)", "F.linear(<G:BLK>, <G:KK>)",
            "paddle.bmm(F.softmax(<G:BLL>, axis=-1), <G:BLK>)",
            "<G:BLK>.reshape([-1, <D:K>]).reshape([<D:B>, -1, <D:K>])",
            "paddle.tanh(<G:BLK>.reshape([-1, <D:K>])).reshape([<D:B>, <D:L>, -1])",
            "(<V1:BLK> * paddle.arange(<V1:BLK>.shape[1]).astype('float32').unsqueeze(-1))",
            "<G:BLK>.flatten(0, 1).reshape(<V1:BLK>.shape)", "paddle.reshape(<G:BLK>, [<D:B>, <D:L>, <D:K>])"],
    "BLL": ["paddle.matmul(<G:BLK>, <G:BLK>, transpose_y=True)", "(<G:BLK> @ <G:BLK>.transpose([0, 2, 1]))",
            "<G:BLL>.transpose([0, 2, 1])", "paddle.tril(<G:BLL>)",
            "<G:BLL>.masked_fill(paddle.triu(paddle.ones([<D:L>, <D:L>]), 1).astype('bool'), -1e4)"],
    "KK": ["paddle.eye(<D:K>)", "<G:KK>.T", "paddle.matmul(<G:KB>, <G:BK>)",
           "paddle.matmul(<G:BK>, <G:BK>, transpose_x=True)", "paddle.triu(<G:KK>)", "(<G:KK> @ <G:KK>)"],
    "KB": ["<G:BK>.T", "<G:BK>.transpose([1, 0])", "paddle.matmul(<G:KK>, <G:KB>)"],
    "LK": ["(<G:LK> @ <G:KK>)", "<G:BLK>[<I> % <D:B>]", "<G:BLK>[-1]"],
    "B": ["paddle.take_along_axis(<G:BK>, ix.unsqueeze(1), axis=1).squeeze(1)", "paddle.gather(<G:K>, ix)",
          "<G:K>[ix]", "<G:BK>.argmax(axis=1).astype('float32')", "(<G:BK>.argmax(axis=-1) == ix).astype('float32')",
          "(<G:BK> @ <G:K>)", "(<G:BK> * <G:BK>).sum(-1)", "<G:BL>[:, <D:L> - 1]"],
    "B1": ["paddle.take_along_axis(<G:BK>, ix.unsqueeze(-1), axis=-1)", "paddle.topk(<G:BK>, k=1, axis=1)[0]",
           "paddle.bmm(<G:BLK>, <G:BK>.unsqueeze(-1)).sum(1)"],
    "BL": ["(ci % 2).astype('float32') * <G:BL>", "paddle.cast(ci * 2 - 3, 'float32')",
           "paddle.where(ci > 1, <G:BL>, <G:BL>)", "<G:BL> * (ci.astype('int64') + ix.unsqueeze(1)).astype('float32')",
           "(<G:BL> > 0).astype('int32').cumsum(axis=1).astype('float32')",
           "paddle.bmm(<G:BLK>, <G:BK>.unsqueeze(-1)).squeeze(-1)"],
    "K": ["paddle.linspace(0.0, 1.0, <D:K>)", "paddle.arange(<D:K>, dtype='float32')", "(<G:B> @ <G:BK>)",
          "<G:BK>[<I> % <D:B>]", "<G:BK>[<D:B> - 1]"],
    "L": ["paddle.arange(<D:L>).astype('float32')", "paddle.linspace(-1.0, 1.0, <D:L>)", "<G:BL>[-1]"],
    "1K": ["<G:BK>[-1:]", "<G:BK>[:1]"],
}

PERMUTATIONS = ["paddle.arange(<D:{x}>)", "paddle.arange(<D:{x}> - 1, -1, -1)", "(paddle.arange(<D:{x}>) + 1) % <D:{x}>",
                "paddle.flip(paddle.arange(<D:{x}>), 0)"]
REDUCERS = ["sum", "mean", "max", "min", "amax", "logsumexp", "prod"]
TOKEN = re.compile(r"<([A-Z])(\d?)(?::([A-Z1]+))?>")


def _reductions() -> dict[str, list[tuple[str, int, bool]]]:
    """For each shape, the (source shape, axis, keepdim) whose reduction gives it."""
    found: dict[str, list[tuple[str, int, bool]]] = {s: [] for s in SHAPES}
    for src in SHAPES:
        for axis in range(len(src)):
            dropped, kept = src[:axis] + src[axis + 1:], src[:axis] + "1" + src[axis + 1:]
            if dropped in found:
                found[dropped].append((src, axis, False))
            if kept in found and kept != src:
                found[kept].append((src, axis, True))
    return found


REDUCTIONS = _reductions()


class ShapedGrammar:
    """Mixed into the generator's `Gen`: expressions, conditions and statements over shaped tensors. Every
    weight is multiplied by ``self.g`` (0 for the seeds before SHAPES_FROM: they draw nothing new)."""

    r: object
    g: float

    # -- helpers ----------------------------------------------------------------------------------------
    def g_visible(self) -> bool:
        """The shaped parameters are in scope (not in a module-level helper)."""
        return self.g > 0 and bool(self.vars_of("IX"))

    def g_weight(self) -> float:
        return self.g if self.g_visible() else 0.0

    def pick_shape(self) -> str:
        return self.r.choices(SHAPES, weights=SHAPE_WEIGHTS)[0]

    def axis(self, shape: str) -> int:
        """A random axis of ``shape``, negative half of the time."""
        i = self.r.randrange(len(shape))
        return i - len(shape) if self.chance(0.5) else i

    def g_leaf(self, shape: str) -> str:
        names = self.vars_of("G" + shape)
        if names and self.chance(0.6):
            return self.r.choice(names)
        return self.r.choice(LEAVES[shape])

    def dim(self, letter: str) -> str:
        found = list(DIM_SOURCES[letter])
        if letter != "1":
            for shape in SHAPES:
                for name in self.vars_of("G" + shape):
                    found += [f"{name}.shape[{i}]" for i, c in enumerate(shape) if c == letter]
        return self.r.choice(found)

    def fill(self, template: str, d: int) -> str:
        """Fill the placeholders of ``template`` (see the module docstring) with expressions of depth < d."""
        s = max(d - 1, 0)
        same: dict[str, str] = {}

        def one(match: re.Match) -> str:
            kind, tag, shape = match.group(1), match.group(2), match.group(3)
            if kind == "V":
                key = tag + ":" + shape
                if key not in same:
                    same[key] = self.g_leaf(shape)
                return same[key]
            makers: dict[str, Callable[[], str]] = {
                "G": lambda: self.e_G(shape, s), "C": lambda: self.e_C(shape, s), "D": lambda: self.dim(shape),
                "P": lambda: self.permutation(shape, s), "F": lambda: self.e_F(0), "N": lambda: self.e_num(0),
                "I": lambda: self.e_I(1), "Z": lambda: self.e_T0(s),
            }
            return makers[kind]()

        return TOKEN.sub(one, template)

    def permutation(self, letter: str, d: int) -> str:
        options = [p.format(x=letter) for p in PERMUTATIONS]
        if letter in SHAPES:
            options += [f"paddle.argsort(<G:{letter}>)", f"paddle.argsort(<G:{letter}>, descending=True)"]
        if letter == "1":
            options = ["paddle.zeros([1], dtype='int64')"]
        return self.fill(self.r.choice(options), d)

    # -- expressions --------------------------------------------------------------------------------------
    def e_G(self, shape: str, d: int) -> str:
        """A float32 tensor of ``shape``."""
        if d <= 0 or self.chance(0.25):
            return self.g_leaf(shape)
        n = len(shape)
        ax = self.axis(shape)
        ax2 = self.r.randrange(n + 1)
        j = self.r.randrange(2)
        k = self.r.choice([1, -1, 2])
        red = self.r.choice(REDUCERS)
        g, v = f"<G:{shape}>", f"<V1:{shape}>"
        dims = ", ".join(f"<D:{c}>" for c in shape)
        templates: list[tuple[float, str]] = [
            (3, f"({g} + {g})"), (2, f"({g} - {g})"), (2, f"({g} * {g})"), (2, f"({g} * <N>)"),
            (1, f"({g} + <Z>)"), (2, f"paddle.tanh({g})"), (1, f"F.relu({g})"), (1, f"F.sigmoid({g})"),
            (0.5, f"paddle.exp({g}.clip(-3.0, 3.0))"), (0.5, f"({g} ** 2)"), (0.5, f"(-{g})"), (0.5, f"{g}.abs()"),
            (0.3, f"F.gelu({g})"), (1, f"({g} / ({g}.abs() + 1))"), (0.5, f"paddle.maximum({g}, {g})"),
            (1, f"paddle.where(<C:{shape}>, {g}, {g})"), (0.5, f"paddle.where(<C:{shape}>, {g}, <F>)"),
            (0.7, f"{g}.masked_fill(<C:{shape}>, <F>)"), (0.7, f"({g} * <C:{shape}>.astype('float32'))"),
            (0.6, f"{g}.cumsum(axis={ax})"), (0.4, f"paddle.flip({g}, axis=[{ax}])"),
            (0.4, f"paddle.roll({g}, {k}, axis={ax})"), (0.6, f"F.softmax({g}, axis={ax})"),
            (0.6, f"({v} - {v}.mean(axis={ax}, keepdim=True))"),
            (0.4, f"({v} / ({v}.var(axis={ax}, keepdim=True, unbiased=False) + 1.0))"),
            (0.4, f"F.layer_norm({v}, {v}.shape[-1:])"), (0.3, f"F.normalize({g}, axis={ax})"),
            (0.4, f"paddle.sort({g}, axis={ax}, descending={self.r.choice([True, False])})"),
            (0.6, f"paddle.index_select({g}, <P:{shape[ax]}>, axis={ax})"),
            (0.4, f"paddle.gather({g}, <P:{shape[ax]}>, axis={ax})"),
            (0.5, f"paddle.take_along_axis({g}, paddle.argsort({g}, axis={ax}), axis={ax})"),
            (0.5, f"paddle.chunk(paddle.concat([{g}, {g}], axis={ax}), 2, axis={ax})[{j}]"),
            (0.4, f"paddle.split(paddle.concat([{v}, {g}], axis={ax}), [{v}.shape[{ax}], -1], axis={ax})[{j}]"),
            (0.4, f"paddle.concat(paddle.split({v}, {v}.shape[{ax}], axis={ax})[::-1], axis={ax})"),
            (0.5, f"paddle.stack([{g}, {g}], axis={ax2}).{red if red != 'logsumexp' else 'sum'}(axis={ax2})"),
            (0.4, (lambda c, i: f"paddle.stack([{c} * {i} for {i}, {c} in enumerate({g}.unbind({ax}))], axis={ax})")(
                self.fresh("c"), self.fresh("c"))),
            (0.3, (lambda c: f"paddle.stack([{c} * 2.0 for {c} in {g}])")(self.fresh("c"))),
            (0.4, f"paddle.concat([{v}[:<D:{shape[0]}> // 2] * 2.0, {v}[<D:{shape[0]}> // 2:]], axis=0)"),
            (0.3, f"{g}[::-1]"), (0.3, f"{g}.unsqueeze({ax2}).squeeze({ax2})"), (0.2, f"{g}.detach()"),
            (0.4, f"{g}.reshape([-1]).reshape([{dims}])"), (0.3, f"paddle.full([{dims}], <F>)"),
            (0.3, f"paddle.zeros_like({g})"), (0.3, f"paddle.ones([{dims}])"),
            (0.5, f"({g}.astype('float64') * {g}.astype('float64')).astype('float32')"),
            (0.3, f"paddle.cast(paddle.tanh({g}.astype('float64')), 'float32')"),
            (0.2, f"({g} + {g}.astype('float64')).astype('float32')"),
            (0.4, f"({g} + ({g} > <F>).astype('int32').astype('float32'))"),
            (0.5, f"{g}.squeeze().reshape([{dims}])"), (0.3, f"paddle.reshape({g}, {v}.shape)"),
            (0.3, f"paddle.zeros({v}.shape)"), (0.3, f"{g}.expand_as({v})"),
            (0.3, f"paddle.concat([{v}[-(<D:{shape[0]}> // 2):], {v}[:-(<D:{shape[0]}> // 2) or None]], axis=0)"),
            (0.3, f"({g} * ({v}.shape[0] == 1))"),
            (0.3, f"paddle.unsqueeze({g}, [0, {n + 1}]).squeeze([0, {n + 1}])"),
        ]
        if n >= 2:
            templates += [(0.3, f"paddle.concat([{v}[:, :<D:{shape[1]}> // 2], {v}[:, <D:{shape[1]}> // 2:] * 0.5], "
                                f"axis=1)"),
                          (0.3, f"{g}[:, ::-1]")]
        templates += [(2, f"({g} {self.r.choice('+-*')} {fmt.format(f'<G:{other}>')})")
                      for other, fmt in BROADCASTS.get(shape, [])]
        templates += [(1, t) for t in SPECIFIC.get(shape, [])]
        for src, axis, keep in REDUCTIONS[shape]:
            a = axis - len(src) if self.chance(0.5) else axis
            call = f"paddle.logsumexp(<G:{src}>, axis={a}" if red == "logsumexp" else f"<G:{src}>.{red}(axis={a}"
            templates.append((1, call + (", keepdim=True)" if keep else ")")))
            if keep:
                templates.append((0.3, f"paddle.topk(<G:{src}>, k=1, axis={a})[0]"))
            else:
                index = "<I> % " + f"<D:{src[axis]}>" if src[axis] != "1" else "0"
                templates.append((0.5, f"<G:{src}>[{', '.join([':'] * axis + [index])}]"))
        for i, c in enumerate(shape):
            if c == "1" and shape[:i] + shape[i + 1:] in SHAPES:
                templates.append((0.7, f"<G:{shape[:i] + shape[i + 1:]}>.unsqueeze({i})"))
        return self.pick([(w, lambda t=t: self.fill(t, d)) for w, t in templates])

    def e_C(self, shape: str, d: int) -> str:
        """A bool tensor of ``shape``."""
        s = max(d - 1, 0)
        g = f"<G:{shape}>"
        templates: list[tuple[float, str]] = [
            (3, f"({g} > <F>)"), (1, f"({g} < {g})"), (1, f"({g} >= <G:{shape}>.mean())"),
            (0.5, f"paddle.isfinite({g})"), (0.5, f"paddle.equal({g}, {g})"),
            (1 if d > 0 else 0, f"paddle.logical_and(<C:{shape}>, <C:{shape}>)"),
            (1 if d > 0 else 0, f"paddle.logical_or(<C:{shape}>, <C:{shape}>)"),
            (1 if d > 0 else 0, f"paddle.logical_not(<C:{shape}>)"),
        ]
        templates += [(1, f"({g} <= {fmt.format(f'<G:{other}>')})") for other, fmt in BROADCASTS.get(shape, [])]
        for src, axis, keep in REDUCTIONS[shape] if d > 0 else []:
            kind = self.r.choice(["any", "all"])
            templates.append((0.5, f"<C:{src}>.{kind}(axis={axis}{', keepdim=True' if keep else ''})"))
        if shape == "BL":
            templates += [(1, "(ci > 1)"), (1, "(ci == <I> % 4)")]
        if shape == "B":
            templates += [(1, "(<G:BK>.argmax(axis=1) == ix)"), (1, "(ix > <I>)")]
        return self.pick([(w, lambda t=t: self.fill(t, s + 1)) for w, t in templates])

    def shaped_T0(self) -> list[tuple[float, Callable[[], str]]]:
        """0-d tensors from shaped ones: sums, losses, accuracy (for ``e_T0``)."""
        gw = self.g_weight()
        if not gw:
            return []
        shape = self.pick_shape()
        g = f"<G:{shape}>"
        templates = [(2, f"{g}.sum()"), (2, f"{g}.mean()"), (0.5, f"{g}.squeeze().sum()"), (1, "F.cross_entropy(<G:BK>, ix)"),
                     (1, f"F.mse_loss({g}, {g})"), (0.5, "(<G:BK>.argmax(axis=-1) == ix).astype('float32').mean()"),
                     (0.5, f"paddle.masked_select({g}, <C:{shape}>).sum()"), (0.5, f"{g}.max()"),
                     (0.4, f"F.binary_cross_entropy_with_logits({g}, ({g} > 0).astype('float32'))"),
                     (0.3, f"{g}.astype('float64').sum().astype('float32')")]
        return [(w * gw, lambda t=t: self.fill(t, 2)) for w, t in templates]

    def shaped_I(self) -> list[tuple[float, Callable[[], str]]]:
        """Python ints from shapes (and, on tensor branches, from values) for ``e_I``."""
        gw = self.g_weight()
        if not gw:
            return []
        shape = self.pick_shape()
        letter = self.r.choice("BKL")
        templates = [(2, f"<D:{letter}>"), (0.5, f"<V1:{shape}>.ndim"), (0.5, f"len(<G:{shape}>.squeeze().shape)"),
                     (0.3, f"paddle.nonzero(<C:{shape}>).shape[0]"), (0.3, f"len(paddle.masked_select(<G:{shape}>, <C:{shape}>))"),
                     (0.3, f"int(<C:{shape}>.sum())"), (0.3, f"sum(<V1:{shape}>.shape)"), (0.5, f"<V1:{shape}>.size"),
                     (0.5, f"len(<V1:{shape}>)"), (0.4, f"(<D:{letter}> * <D:{self.r.choice('BKL')}>)"),
                     (0.3, f"len(<V1:{shape}>.unbind({self.axis(shape)}))"),
                     (self.p_tensor_branch, f"int(<C:{shape}>.sum())"),
                     (self.p_tensor_branch * 0.5, "int(<G:B>.argmax())")]
        return [(w * gw, lambda t=t: self.fill(t, 1)) for w, t in templates]

    def shaped_B(self) -> list[tuple[float, Callable[[], str]]]:
        """Tests of sizes (and, on tensor branches, of values) for ``e_B``."""
        gw = self.g_weight()
        if not gw:
            return []
        a, b = self.pick_shape(), self.pick_shape()
        letter = self.r.choice("BKL")
        templates = [(2, f"<D:{letter}> > {self.r.choice([1, 2, 3])}"), (1, f"<D:{letter}> == <D:{self.r.choice('BKL')}>"),
                     (0.5, f"<V1:{a}>.shape == <V2:{b}>.shape"), (0.5, f"len(<V1:{a}>) % 2 == 0"),
                     (0.3, f"<V1:{a}>.dtype == paddle.float32"),
                     (self.p_tensor_branch, f"bool(<C:{a}>.any())")]
        return [(w * gw, lambda t=t: self.fill(t, 1)) for w, t in templates]

    def shaped_stmts(self, ind: int, nest: float) -> list[tuple[float, Callable[[], list[str]]]]:
        """Statements over shaped tensors for ``stmt``."""
        gw = self.g_weight()
        if not gw:
            return []
        p = " " * ind
        return [
            (16 * gw, lambda: self.s_assign_g(p)),
            (1.2 * gw, lambda: self.s_inplace_g(p)),
            (0.5 * gw, lambda: self.s_shape_cache(p)),
            (6 * gw, lambda: self.s_reassign_g(p)),
            (4 * nest * gw, lambda: self.s_for_shape(ind)),
            (1.5 * gw, lambda: self.s_setitem_g(p)),
            (0.6 * gw, lambda: self.s_print_g(p)),
        ]

    def s_assign_g(self, p: str) -> list[str]:
        shape = self.pick_shape()
        value = self.e_G(shape, self.r.randint(1, 3))
        name = self.fresh("g")
        self.declare(name, "G" + shape)
        return [p + f"{name} = {value}"]

    def s_reassign_g(self, p: str) -> list[str]:
        shape = self.pick_shape()
        targets = self.assignable("G" + shape)
        targets = [t for t in targets if t not in SHAPED_PARAMS] or [t for t in targets if t != "wm"]
        if not targets:
            return self.s_assign_g(p)
        target = self.r.choice(targets)
        op = self.r.choice(["=", "+=", "-=", "*=", "= 0.5 *"])
        if op.startswith("= 0.5"):
            return [p + f"{target} = {target} * 0.5 + {self.e_G(shape, 2)}"]
        other = self.r.choice([("", "{}")] + [(o, f) for o, f in BROADCASTS.get(shape, [])]) if op != "=" \
            else ("", "{}")
        value = self.e_G(other[0] or shape, 2)
        return [p + f"{target} {op} {other[1].format(value)}"]

    def s_for_shape(self, ind: int) -> list[str]:
        """A loop whose trip count is a size: over ``range(x.shape[i])``, the rows of a tensor, ``unbind``."""
        p = " " * ind
        a, b = self.fresh("e"), self.fresh("e")
        rowed = [s for s in SHAPES if len(s) >= 2 and s[1:] in SHAPES]
        shape = self.r.choice(rowed)
        kind = self.r.choice(["range", "enumerate", "unbind"])
        if kind == "range":
            source = self.g_leaf(shape)
            header = [p + f"for {a} in range({self.dim(shape[0])}):", p + f"    {b} = {source}[{a}]"]
            return self.loop_body(ind, header, {a: "I", b: "G" + shape[1:]}, False)
        if kind == "enumerate":
            header = [p + f"for {a}, {b} in enumerate({self.e_G(shape, 1)}):"]
            return self.loop_body(ind, header, {a: "I", b: "G" + shape[1:]}, False)
        axis = self.r.randrange(len(shape))
        rest = shape[:axis] + shape[axis + 1:]
        if rest not in SHAPES:
            axis, rest = 0, shape[1:]
        header = [p + f"for {b} in {self.e_G(shape, 1)}.unbind({axis}):"]
        return self.loop_body(ind, header, {b: "G" + rest}, False)

    def s_setitem_g(self, p: str) -> list[str]:
        """Item assignment: on a clone (a new local), on the input ``xm``/``xs`` (visible to the caller), with
        an int, a slice or a bool mask."""
        shape = self.r.choice(["BK", "BLK", "BL", "KK", "B"])
        if shape in ("BK", "BLK") and self.chance(0.4):
            target = "xm" if shape == "BK" else "xs"
            lines = []
        else:
            target = self.fresh("g")
            lines = [p + f"{target} = {self.e_G(shape, 1)}.clone()"]
            self.declare(target, "G" + shape)
        rest = shape[1:]
        kind = self.r.choice(["row", "value", "mask", "column"])
        if kind == "row" and rest in SHAPES:
            lines.append(p + f"{target}[{self.e_I(1)} % {self.dim(shape[0])}] = {self.e_G(rest, 1)}")
        elif kind == "mask":
            lines.append(p + f"{target}[{self.e_C(shape, 1)}] = {self.e_F(0)}")
        elif kind == "column" and len(shape) >= 2:
            lines.append(p + f"{target}[:, {self.r.choice([0, -1])}] = {self.e_F(1)}")
        else:
            lines.append(p + f"{target}[{self.r.choice([0, -1])}] = {self.e_F(1)}")
        return lines

    def s_inplace_g(self, p: str) -> list[str]:
        """In-place methods on a clone, some changing its shape on the way (``unsqueeze_``, ``reshape_``)."""
        shape = self.pick_shape()
        name = self.fresh("g")
        lines = [p + f"{name} = {self.e_G(shape, 1)}.clone()"]
        self.declare(name, "G" + shape)
        dims = ", ".join(self.dim(c) for c in shape)
        return lines + [p + line for line in self.r.choice([
            [f"{name}.add_({self.e_G(shape, 1)})"], [f"{name}.scale_({self.e_F(0)})"],
            [f"{name}.unsqueeze_(0)", f"{name}.squeeze_(0)"], [f"{name}.reshape_([-1])", f"{name}.reshape_([{dims}])"],
            [f"{name}.clip_(-1.0, 1.0)"], [f"{name}.multiply_({self.e_G(shape, 1)})"],
        ])]

    def s_shape_cache(self, p: str) -> list[str]:
        """A module cache keyed by a size (``GCACHE`` exists from CACHES_FROM on): filled on a miss."""
        shape = self.pick_shape()
        key = f"({self.dim(self.r.choice(shape.replace('1', '') or 'B'))}, {shape!r})"
        return [p + f"if {key} not in GCACHE:", p + f"    GCACHE[{key}] = {self.e_G(shape, 1)}",
                p + f"COUNTER += len(GCACHE)"]

    def s_print_g(self, p: str) -> list[str]:
        tag = f"p{self.fresh('')}"
        v = self.g_leaf(self.pick_shape())
        return [p + self.r.choice([
            f"print({tag!r}, {v}.shape, {v}.dtype)",
            f'print(f"{tag} {{tuple({v}.shape)}} {{{v}.shape[0] * 2}}")',
            f"print({tag!r}, {self.dim('B')}, {self.dim('L')}, {self.dim('K')})",
            f"print({tag!r}, [list(c.shape) for c in paddle.split({v}, {v}.shape[0])])",
        ])]

    def shaped_return(self) -> str:
        shape = self.pick_shape()
        names = self.vars_of("G" + shape)
        if names and self.chance(0.6):
            return self.r.choice(names)
        return self.e_G(shape, 1)

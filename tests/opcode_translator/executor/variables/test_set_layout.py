"""Sets built or changed in a translated frame iterate, and ``pop()``, as the eager ones do.

A set's iteration order follows from its hash table, which depends on the exact operations that made it, not
only on its elements: ``{-3, 5}`` and ``{5, -3}`` are equal but iterate in their insertion order, since -3 and
5 fall in the same slot of the smallest table (so do -1 and -2, whose hashes are equal). Each function below is
run eagerly and translated on generated values chosen to collide, and the results are compared with sets
pictured in their iteration order (`_conformance.observe`), with no fallback (every set is simulated)."""
from __future__ import annotations

import itertools
import random

import paddle
import pytest
from _conformance import check

import sot
from sot.eval_frame_ext import clone_set_layout

# Values whose hashes collide modulo 8 or 32 (the table sizes of sets of up to 4 and up to 20 elements), and
# -1 / -2 (equal hashes); a float equal to an int is the same element.
COLLIDING = (-3, 5, 13, -1, -2, 0, 8, 32, 8.0, 2.5)
TRIPLES = [(-3, 5, 13), (13, 5, -3), (-1, -2, 0), (-2, -1, 8), (0, 8, 32), (32, 8.0, 0), (5, -3, 2.5),
           (8, 0, -1)]


def literal(x, a, b, c):
    return x + 1, {a, b, c}, [v for v in {c, a}]


def adds_and_removals(x, a, b, c):
    s = set()
    s.add(a)
    s.add(b)
    s.discard(a)
    s.add(c)
    s.add(a)
    s.remove(b)
    return x + 1, s, list(s)


def comprehension(x, a, b, c):
    return x + 1, {v * 8 for v in (a, b, c)}, {v for v in (c, b, a, a + 16)}


def binary_operators(x, a, b, c):
    s, t = {a, b}, {b, c, a + 32}
    return x + 1, s | t, t | s, s & t, t - s, s ^ t


def in_place_operators(x, a, b, c):
    s = {a, b, c}
    s -= {b}
    s |= {a + 8, c + 16, b}
    s ^= {a, c + 40}
    s &= {c + 16, b, a + 8, 99}
    t = {a, b}
    t -= t
    t |= {c, a}
    return x + 1, s, t


def pops(x, a, b, c):
    s = {a, b, c, a + 8, b - 8}
    first = s.pop()
    s.add(first)
    second = s.pop()
    return x + 1, first, second, s.pop(), s


def updates_from_each_kind(x, a, b, c):
    s = {a}
    s.update({c: 0, b: 1, a + 32: 2})
    t = {b}
    t.update({a, c, c + 8})
    u = {c}
    u.update([a, b], (c + 24,))
    v = {a, b, c, a + 8, c - 8}
    v.difference_update({b: 0}, [c])
    v.symmetric_difference_update([a + 16, a, b, b + 8])
    v.intersection_update({a + 8, a + 16, b, b + 8, c - 8}, (b + 8, a + 16, c - 8, a + 8))
    w = {a, b}
    w.symmetric_difference_update({c: 1, a: 2, c + 32: 3})
    w.difference_update(w)
    return x + 1, s, t, u, v, w, {*t, *s}, {*[b, a], c}


def copies(x, a, b, c):
    s = set(range(6))  # (6 elements: ``set(s)`` of them makes a smaller table than s has)
    s.add(a)
    s.add(b)
    s.discard(3)
    s.add(c)
    frozen = frozenset(s)
    return x + 1, set(s), s.copy(), frozen, list(frozen), s.union({c + 64}), s


def the_set_itself_as_operand(x, a, b, c):
    s = set()
    for v in (a, b, c, a + 8, b + 16, 7, 17, 0, 2, 3):
        s.add(v)
    s.discard(b)
    return x + 1, s & s, s | s, s.union(s), s.intersection(s), s - s, s.issubset(s), {*s}, set(frozenset(s))


def iteration_order_reaches_tensors(x, a, b, c):
    for v in {a, b, c, a - 8}:
        x = x * 2 + v
    return x


CASES = [literal, adds_and_removals, comprehension, binary_operators, in_place_operators, pops,
         updates_from_each_kind, copies, the_set_itself_as_operand, iteration_order_reaches_tensors]


@pytest.mark.parametrize("fn", CASES, ids=[fn.__name__ for fn in CASES])
def test_sets_made_in_the_frame_keep_the_eager_layout(fn, compile_all) -> None:
    check(fn, *[lambda t=t: (paddle.ones([2]), *t) for t in TRIPLES])


def test_every_pair_of_colliding_values(compile_all) -> None:
    """All ordered pairs of the colliding values, in one frame built set (one translation per pair)."""
    def pair(x, a, b):
        s = {a, b}
        s.add(a - 16)
        return x + 1, s, s.pop()

    with sot.config.patch(cache_limit=100):
        check(pair, *[lambda a=a, b=b: (paddle.ones([2]), a, b)
                      for a, b in itertools.permutations(COLLIDING[:7], 2)], calls=1)


def received_set(x, s):
    return x + 1, list(s), s | {5}, s


def test_a_received_set_is_guarded_by_its_order_and_returned_as_itself(compile_all) -> None:
    """Equal sets laid out otherwise iterate otherwise: the guard tells them apart (the first call's order,
    folded into the program, is not reused), and the set itself is returned (not a rebuilt one)."""
    fast = sot.symbolic_translate(received_set)
    for s in ({-3, 5}, {5, -3}, {-1, -2}, {-2, -1}, {-3, 5}):
        expected = received_set(paddle.ones([1]), s)
        got = fast(paddle.ones([1]), s)
        assert got[1] == expected[1] and list(got[2]) == list(expected[2]) and got[3] is s


def test_clone_set_layout_keeps_order_and_later_behaviour() -> None:
    s = set()
    for v in (7, 17, 0, 2, 3, -3, 5, 13):  # (added one by one, 17 lands past 7 in the 32-slot table)
        s.add(v)
    for v in (2, 5):
        s.discard(v)
    s.pop()
    clone = clone_set_layout(s)
    assert clone == s and clone is not s and list(clone) == list(s)
    assert list(set(s)) != list(s)  # (what a copy does, which is why the clone is needed: else this test is moot)
    for target in (s, clone):
        target.update((29, -11, 45))
    assert list(clone) == list(s) and clone.pop() == s.pop()
    with pytest.raises(TypeError):
        clone_set_layout(frozenset(s))


def received_frozenset(x, fs):
    return x + 1, list(fs)


def test_a_received_frozenset_is_guarded_by_its_order(compile_all) -> None:
    check(received_frozenset, lambda: (paddle.ones([1]), frozenset((-3, 5))),
          lambda: (paddle.ones([1]), frozenset((5, -3))), lambda: (paddle.ones([1]), frozenset((-1, -2))))


def tuples_as_elements(x, a, b, c):
    seen = set()
    for pair in ((a, b), (b, c), (a, b), (c, a), (a + 8, b)):
        seen.add(pair)
    seen.discard((b, c))
    first, second = seen.pop()
    return x + first + second, seen, {(a, 1.5), (b, None)} | seen, [p for p in seen]


def test_sets_of_tuples_are_simulated_too(compile_all) -> None:
    check(tuples_as_elements, *[lambda t=t: (paddle.ones([2]), *t) for t in TRIPLES])


# -- generated sequences of set operations ----------------------------------------------------------------------
_ELEMENTS = ("a", "b", "c", "a + 8", "b - 16", "c + 32", "-1", "-2", "0", "8.0", "(a, b)", "(c, 1)")
_STEPS = (
    "s.add({v})", "t.add({v})", "s.discard({v})", "t.discard({w})", "out.append(s.pop()) if s else None",
    "out.append(t.pop()) if t else None", "s |= {{{v}, {w}}}", "t -= {{{v}}}", "s ^= {{{v}, {w}}}",
    "s &= {{{v}, {w}}} | s", "t = s | t", "t = s & t", "t = s - t", "t = s.copy()", "t = set(s)",
    "t = {{*s, *t}}", "t.update([{v}, {w}])", "t.update({{{v}: 0, {w}: 1}})", "s.update(t)",
    "s.difference_update([{v}])", "t.symmetric_difference_update({{{v}, {w}}})", "out.append(list(s))",
    "x = x + len(t)", "t = set(frozenset(t))", "s = {{e for e in t if e != 0}}", "out.append([e for e in t])",
)


def _generated_function(seed: int):
    """A function of ``(x, a, b, c)`` doing 3 to 11 random set operations on colliding values (a fixed seed:
    the same program on every run)."""
    rng = random.Random(seed)
    lines = ["def generated(x, a, b, c):", f"    s = {{{', '.join(rng.sample(_ELEMENTS, 3))}}}", "    t = set()",
             "    out = []"]
    for _ in range(rng.randrange(3, 12)):
        lines.append("    " + rng.choice(_STEPS).format(v=rng.choice(_ELEMENTS), w=rng.choice(_ELEMENTS)))
    lines.append("    return x + 1, s, t, out")
    namespace: dict = {}
    exec(compile("\n".join(lines), f"<set program {seed}>", "exec"), namespace)
    return namespace["generated"]


@pytest.mark.parametrize("seed", range(25))
def test_generated_sequences_of_set_operations(seed, compile_all) -> None:
    """(Before sets kept their layout, about a third of such programs, without ``set()`` and tuples, which
    were not simulated then, returned a set in another order or popped another element.)"""
    check(_generated_function(seed), *[lambda t=t: (paddle.ones([1]), *t) for t in TRIPLES[:3]])

"""A local that a loop with a graph break in its body binds only inside the body, and that is read after the
loop (``loss`` printed after a training loop) or is live at the loop head through a ``with`` block, is carried
between the items as `runtime.UNBOUND` (transform._emit_loop): the loop runs natively around its translated
body instead of the frame falling back, and a loop that never binds it raises eager's UnboundLocalError."""
from __future__ import annotations

import numpy as np
import paddle
import pytest

import sot


def _outcome(fn, *args):
    try:
        result = fn(*args)
    except Exception as exc:  # noqa: BLE001 (compared with eager's)
        return type(exc), str(exc)
    return result.numpy().tolist() if isinstance(result, paddle.Tensor) else result


def _check(fn, *args, capsys=None):
    expected = _outcome(fn, *args)
    printed = capsys.readouterr().out if capsys else None
    got = _outcome(sot.symbolic_translate(fn), *args)
    if capsys:
        assert capsys.readouterr().out == printed
    assert got == expected


def train(w, steps):
    for step in range(steps):
        with paddle.amp.auto_cast(level="O1"):  # (its exit could swallow an exception before ``loss = ...``)
            loss = (w * step).sum()
        print(f"step {step} loss {loss.item():.3f}")
    return loss


def epochs(w, steps):
    for epoch in range(2):
        for i in range(steps):
            loss = w.sum() * i
            print("i", i)
        print("epoch", epoch, float(loss))
    return loss


@pytest.mark.parametrize("fn", [train, epochs])
def test_a_local_bound_in_the_body_and_read_after_the_loop(fn, capsys):
    _check(fn, paddle.ones([2]), 3, capsys=capsys)
    stats = sot.stats()
    assert stats.fallbacks == 0 and stats.graph_breaks >= 1, stats


@pytest.mark.parametrize("fn", [train, epochs])
def test_a_loop_that_never_runs_leaves_it_unbound(fn, capsys):
    _check(fn, paddle.ones([2]), 3, capsys=capsys)
    _check(fn, paddle.ones([2]), 0, capsys=capsys)  # UnboundLocalError, as eagerly


def test_a_local_bound_only_before_a_break_still_gives_the_eager_result(capsys):
    def find(w, n):
        for i in range(n):
            print(i)
            if i > 1:
                found = w * i
                break
        return found

    for n in (4, 2):
        _check(find, paddle.ones([2]), n, capsys=capsys)


def test_the_item_values_reach_the_body_every_iteration(capsys):
    def running_mean(xs, w):
        for count, x in enumerate(xs, 1):
            mean = (x * w).mean() if count == 1 else mean + ((x * w).mean() - mean) / count
            print(count, float(mean))
        return mean

    xs = [paddle.to_tensor(np.full([2], v, "float32")) for v in (1.0, 3.0, 8.0)]
    _check(running_mean, xs, paddle.ones([2]), capsys=capsys)
    assert sot.stats().fallbacks == 0, sot.stats()


def evaluate_after_training(xs):
    for x in xs:
        y = x * 2
        print("value", float(y.sum()))
    with paddle.no_grad():  # (``out`` is live at the loop head through this block's exits)
        out = xs[0] + 1
    print(out.numpy())
    return out


def test_a_local_the_body_never_names_is_handed_through_it(capsys):
    """``out``, unbound at the loop and never named in its body (bound after the loop, inside a ``with``),
    passes through the body function as it came: no fallback (the body was required to bind it)."""
    xs = [paddle.ones([2]), paddle.full([2], 3.0)]
    _check(evaluate_after_training, xs, capsys=capsys)
    assert sot.stats().fallbacks == 0
    assert _outcome(sot.symbolic_translate(evaluate_after_training), []) == \
        _outcome(evaluate_after_training, [])  # (an empty list: eager's IndexError)


def comprehension_variable_unbound_before_it(w):
    try:
        ys = [print(i) or w * (1 / (i - 1)) for i in range(2)]  # (i == 1 raises ZeroDivisionError)
    except ZeroDivisionError:
        ys = None
    try:
        return i, ys
    except UnboundLocalError:
        i = "unbound"  # (a local of the function: a read of it raises UnboundLocalError, not NameError)
        return i, ys


def comprehension_variable_bound_before_it(w):
    i = "outer"
    try:
        ys = [print(i) or w * (1 / (i - 1)) for i in range(2)]
    except ZeroDivisionError:
        ys = None
    return i, ys


@pytest.mark.parametrize("fn", [comprehension_variable_unbound_before_it, comprehension_variable_bound_before_it])
def test_an_exception_leaving_a_comprehension_with_a_break_puts_its_variable_back(fn, capsys):
    """3.12+ (PEP 709): the inlined comprehension saves its variable's outer value (a NULL when unbound) and
    its cleanup handler puts it back when an exception leaves an item. With the break (``print``), its body
    runs natively in a function receiving the saved values: the NULL used to arrive as None, so the user's
    handler found ``i`` bound to None instead of unbound."""
    _check(fn, paddle.ones([2]), capsys=capsys)
    stats = sot.stats()
    assert stats.fallbacks == 0 and stats.graph_breaks >= 1, stats

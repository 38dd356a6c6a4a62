"""A call run with a recomputing backward (`higher_order.run_with_recomputed_backward`: here, an input that
requires gradients) computes its forward again in backward; a batch norm there must not update its running
statistics a second time: eager's backward leaves them as the forward did. Paddle's ``recompute`` of such a
model, whose backward does update them again, runs natively (`variables/recompute.py`)."""
from __future__ import annotations

import numpy as np
import paddle
import paddle.nn as nn
from paddle.distributed.fleet.utils import recompute

import sot
from sot.symbolic.compile import _compiled, changed_in_place


def model_and_input() -> tuple:
    paddle.seed(3)
    model = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1D(3))
    x = paddle.to_tensor(np.arange(12, dtype="float32").reshape(4, 3))
    x.stop_gradient = False
    return model, x


def test_backward_leaves_the_running_statistics_as_eager(compile_all: None) -> None:
    def f(model: nn.Layer, x: paddle.Tensor) -> paddle.Tensor:
        return model(x)

    translated = sot.symbolic_translate(f)
    for _ in range(2):
        (model, x), (e_model, e_x) = model_and_input(), model_and_input()
        out, e_out = translated(model, x), f(e_model, e_x)
        (out * out).sum().backward()
        (e_out * e_out).sum().backward()
        for name in ("_mean", "_variance"):
            np.testing.assert_allclose(getattr(model[1], name).numpy(), getattr(e_model[1], name).numpy(),
                                       rtol=1e-6, err_msg=name)
        np.testing.assert_allclose(x.grad.numpy(), e_x.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_a_recomputed_batch_norm_updates_its_statistics_in_backward_as_eager(compile_all: None) -> None:
    def f(model: nn.Layer, x: paddle.Tensor) -> paddle.Tensor:
        return recompute(model, x)

    translated = sot.symbolic_translate(f)
    for _ in range(2):
        (model, x), (e_model, e_x) = model_and_input(), model_and_input()
        translated(model, x).sum().backward()
        f(e_model, e_x).sum().backward()
        np.testing.assert_allclose(model[1]._mean.numpy(), e_model[1]._mean.numpy(), rtol=1e-6)
        np.testing.assert_allclose(x.grad.numpy(), e_x.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_the_statistics_put_back_keep_the_inplace_version_an_eager_batch_norm_saw(compile_all: None) -> None:
    """The layer's batch norm runs eagerly first (its node keeps the running statistics and checks their version
    in backward), then in a translated call with a recomputing backward, which puts the statistics back after
    recomputing: by a copy bumping no version, or the eager node refuses a backward eager allows."""
    def f(norm: nn.Layer, x: paddle.Tensor) -> paddle.Tensor:
        return norm(x) * 2.0

    def run(call) -> list:  # noqa: ANN001
        paddle.seed(5)
        norm = nn.BatchNorm1D(3)
        x = paddle.to_tensor(np.arange(12, dtype="float32").reshape(4, 3), stop_gradient=False)
        first = norm(x * 1.5)
        out = call(norm, x)
        (first.sum() + (out * out).sum()).backward()
        return [out.numpy(), x.grad.numpy(), norm._mean.numpy(), norm._mean._inplace_version()]

    translated = sot.symbolic_translate(f)
    for _ in range(2):
        for got, want in zip(run(translated), run(f)):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert sot.stats().fallbacks == 0 and sot.stats().graph_breaks == 0, sot.stats()


def test_an_api_batch_norm_updates_the_statistics_it_is_given_once(compile_all: None) -> None:
    """``F.batch_norm`` in training mode, called with running statistics that are inputs of the program (an
    ``api`` statement, as a simulated layer's forward records it): the program's in-place op updates them once
    per call, and neither the recomputing backward (an input requiring grad) nor the eager refusal probe of its
    first call updates them again (`CompiledProgram.state_its_forward_may_update`)."""
    def f(x: paddle.Tensor, mean: paddle.Tensor, variance: paddle.Tensor) -> paddle.Tensor:
        return paddle.nn.functional.batch_norm(x * 2.0, mean, variance, training=True) * 3.0

    def run(call) -> list:  # noqa: ANN001
        x = paddle.to_tensor(np.arange(12, dtype="float32").reshape(4, 3) ** 1.5, stop_gradient=False)
        mean, variance = paddle.zeros([3]), paddle.ones([3])
        got = []
        for step in range(3):
            out = call(x + step, mean, variance)
            (out * out).sum().backward(retain_graph=True)
            (out * out * out).sum().backward()
            got += [out.numpy(), mean.numpy(), variance.numpy()]
        return got + [x.grad.numpy()]

    translated = sot.symbolic_translate(f)
    for got, want in zip(run(translated), run(f)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert sot.stats().fallbacks == 0 and sot.stats().graph_breaks == 0, sot.stats()


def test_the_tensors_changed_in_place_are_read_from_the_program(compile_all: None) -> None:
    """`changed_in_place`: the inputs an ``api`` statement's in-place op writes (``F.batch_norm``'s running
    statistics, not its input or its affine parameters), the tensors a layer statement's program holds and
    writes (a batch norm layer's statistics), and nothing of a program without in-place ops."""
    def functional(x: paddle.Tensor, mean: paddle.Tensor, variance: paddle.Tensor, weight: paddle.Tensor
                   ) -> paddle.Tensor:
        return paddle.nn.functional.batch_norm(x, mean, variance, weight=weight, training=True) + 1.0

    def layer(norm: nn.Layer, x: paddle.Tensor) -> paddle.Tensor:
        return norm(x) + 1.0

    def plain(x: paddle.Tensor) -> paddle.Tensor:
        return x * 2.0 + 1.0

    x = paddle.ones([4, 3])
    norm = nn.BatchNorm1D(3)
    sot.symbolic_translate(functional)(x, paddle.zeros([3]), paddle.ones([3]), paddle.ones([3]))
    sot.symbolic_translate(layer)(norm, x)
    sot.symbolic_translate(plain)(x)
    programs = {program.sir.name: program for program in _compiled.values()}
    found = {name: changed_in_place(programs[name]._program, programs[name].sir)
             for name in ("functional", "layer", "plain")}
    sir = programs["functional"].sir
    assert [sir.inputs[i] for i in found["functional"][0]] == sir.inputs[1:3] and found["functional"][1] == ()
    assert found["layer"][0] == () and {id(t) for t in found["layer"][1]} == {id(norm._mean), id(norm._variance)}
    assert found["plain"] == ((), ())

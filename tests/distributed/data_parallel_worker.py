"""Trains a small model wrapped in ``paddle.DataParallel`` for 3 steps, eagerly or through sot, in every
process started by ``paddle.distributed.spawn`` (gloo, CPU); run as a script by test_data_parallel.py.

``python data_parallel_worker.py OUT_DIR MODE`` with MODE one of ``eager``, ``layer`` (the DataParallel
layer itself given to ``sot.symbolic_translate``), ``step`` (a translated training-step function that
calls it) or ``unused`` (as ``layer``, for a model with a sublayer its forward never uses, wrapped with
``find_unused_parameters=True``). Each rank saves its final parameters, its per-step losses and ``sot.stats()`` to OUT_DIR.
"""
from __future__ import annotations

import json
import os
import sys
import warnings

import numpy as np
import paddle
import paddle.distributed as dist

STEPS = 3
BATCH = 6  # per process


class Net(paddle.nn.Layer):
    def __init__(self, with_unused: bool = False) -> None:
        super().__init__()
        self.fc1 = paddle.nn.Linear(4, 16)
        self.norm = paddle.nn.LayerNorm(16)
        self.fc2 = paddle.nn.Linear(16, 2)
        if with_unused:
            self.unused = paddle.nn.Linear(4, 2)  # no gradient: the reducer must not wait for it

    def forward(self, x):
        hidden = paddle.nn.functional.gelu(self.norm(self.fc1(x)))
        return self.fc2(hidden) * 2 + x[:, :2]


def make_model(with_unused: bool = False) -> Net:
    paddle.seed(2024)
    return Net(with_unused)


def batch(step: int, rank: int) -> tuple[paddle.Tensor, paddle.Tensor]:
    """This rank's slice of the global batch of ``step`` (rank r holds rows r*BATCH to (r+1)*BATCH)."""
    rng = np.random.RandomState(100 + step)
    x = rng.randn(2 * BATCH, 4).astype("float32")
    y = rng.randn(2 * BATCH, 2).astype("float32")
    rows = slice(rank * BATCH, (rank + 1) * BATCH) if rank >= 0 else slice(None)
    return paddle.to_tensor(x[rows]), paddle.to_tensor(y[rows])


def loss_of(model, x, y):
    return paddle.nn.functional.mse_loss(model(x), y)


def train(out_dir: str, mode: str) -> None:
    warnings.simplefilter("ignore")
    dist.init_parallel_env()
    rank = dist.get_rank()
    import sot

    model = make_model(with_unused=mode == "unused")
    dp_model = paddle.DataParallel(model, find_unused_parameters=mode == "unused")
    opt = paddle.optimizer.Momentum(0.1, momentum=0.9, parameters=dp_model.parameters())
    if mode == "eager":
        step = loss_of
    elif mode in ("layer", "unused"):
        fast = sot.symbolic_translate(dp_model)
        step = lambda _, x, y: paddle.nn.functional.mse_loss(fast(x), y)  # noqa: E731
    else:
        step = sot.symbolic_translate(loss_of)
    losses = []
    with sot.config.patch(min_graph_size=0):
        for i in range(STEPS):
            x, y = batch(i, rank)
            loss = step(dp_model, x, y)
            loss.backward()
            opt.step()
            opt.clear_grad()
            losses.append(float(loss))
    np.savez(os.path.join(out_dir, f"{mode}_rank{rank}.npz"), *[p.numpy() for p in model.parameters()])
    stats = sot.stats()
    with open(os.path.join(out_dir, f"{mode}_rank{rank}.json"), "w") as record:
        json.dump({"losses": losses, "translate_count": stats.translate_count, "fallbacks": stats.fallbacks,
                   "graph_breaks": stats.graph_breaks, "compiled_graphs": stats.compiled_graphs}, record)
    leave_without_library_finalizers()


def leave_without_library_finalizers() -> None:
    """Ends this rank once every rank has saved its results, skipping the C libraries' exit handlers.

    Rank 0 hosts Paddle's TCP store, whose daemon thread aborts when a peer's connection closes while rank 0
    is already running its libraries' finalizers (Paddle 3.3.1: an abort in ``LibUVClient::readCallback``
    of ``LibUVMasterDaemon``, then a SIGSEGV in ``_dl_fini`` freeing MKL's or OpenBLAS's buffers; the
    results were saved): 4 crashes in about 150 runs of the step mode under load, 0 in 80 since. ``os._exit``
    after a barrier leaves no window for it; an exception in training still exits with an error, as before.
    """
    dist.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    dist.spawn(train, args=(sys.argv[1], sys.argv[2]), nprocs=2, backend="gloo")

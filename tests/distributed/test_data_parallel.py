"""``paddle.DataParallel`` on 2 CPU processes (gloo) with sot: training matches a single-process run.

DataParallel's own ``forward`` is Paddle framework code: it runs natively (a graph break when a translated
function calls it), so its reducer sees the real outputs and the gradient all-reduce hooks fire; the
wrapped model's ``forward`` is translated. Each rank holds half of every global batch; averaged gradients
make the parameters after 3 steps equal those of one process training on the whole batch.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import paddle
import pytest

import sot

from .data_parallel_worker import STEPS, batch, loss_of, make_model

WORKER = Path(__file__).with_name("data_parallel_worker.py")
ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::UserWarning")]


def single_process_parameters(with_unused: bool) -> list[np.ndarray]:
    model = make_model(with_unused)
    opt = paddle.optimizer.Momentum(0.1, momentum=0.9, parameters=model.parameters())
    for i in range(STEPS):
        x, y = batch(i, -1)  # the whole global batch
        loss_of(model, x, y).backward()
        opt.step()
        opt.clear_grad()
    return [p.numpy() for p in model.parameters()]


def run_two_processes(out_dir: Path, mode: str) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
               GLOG_minloglevel="2")
    proc = subprocess.run([sys.executable, str(WORKER), str(out_dir), mode], env=env, cwd=str(out_dir),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


@pytest.mark.parametrize("mode", ["layer", "step", "unused"])
def test_data_parallel_training_matches_a_single_process(tmp_path: Path, mode: str) -> None:
    expected = single_process_parameters(with_unused=mode == "unused")
    run_two_processes(tmp_path, mode)
    for rank in (0, 1):
        params = np.load(tmp_path / f"{mode}_rank{rank}.npz")
        got = [params[f"arr_{i}"] for i in range(len(params.files))]
        assert len(got) == len(expected)
        for actual, want in zip(got, expected):
            np.testing.assert_allclose(actual, want, rtol=1e-5, atol=1e-6)
        record = json.loads((tmp_path / f"{mode}_rank{rank}.json").read_text())
        # The model's forward was translated and compiled; nothing fell back.
        assert record["translate_count"] >= 1 and record["compiled_graphs"] >= 1, record
        assert record["fallbacks"] == 0, record

"""`python -m sot run` on realistic training scripts (tests/cli_scripts/): the same stdout, exit code and
files as plain Python, a summary at exit, and Python's own traceback when the script fails."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).parent / "cli_scripts"
TIMEOUT = 600


def _env() -> dict:
    env = dict(os.environ, GLOG_minloglevel="2")
    for name in ("SOT_STRICT_MODE", "SOT_LOG_LEVEL", "SOT_MIN_GRAPH_SIZE", "SOT_CACHE_LIMIT"):
        env.pop(name, None)
    # the sot of this checkout (run from a temporary directory, the interpreter would find an installed one)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[1]),
                                                      env.get("PYTHONPATH")]))
    return env


def _run(directory: Path, translated: bool, *args: str) -> subprocess.CompletedProcess:
    prefix = [sys.executable, "-m", "sot", "run"] if translated else [sys.executable]
    return subprocess.run([*prefix, *args], cwd=directory, env=_env(), capture_output=True, text=True,
                          timeout=TIMEOUT)


def _both(tmp_path: Path, script: str, *args: str) -> tuple[subprocess.CompletedProcess, ...]:
    """The script run plainly then translated, each in a directory of its own (same relative paths)."""
    results = []
    for mode in ("plain", "sot"):
        directory = tmp_path / mode
        directory.mkdir()
        shutil.copy(SCRIPTS / script, directory / script)
        results.append(_run(directory, mode == "sot", script, *args))
    return tuple(results)


def _summary(stderr: str) -> str:
    start = stderr.find("== sot run summary:")
    assert start >= 0, stderr
    return stderr[start:]


@pytest.mark.parametrize("script, args", [
    ("train_cli.py", ("--epochs", "2", "--steps", "6")),
    ("data_pipeline.py", ()),
    ("data_pipeline.py", ("--workers", "2")),  # forked worker processes inherit the frame callback
    ("optim_tricks.py", ()),
    ("custom_model.py", ()),
    pytest.param("vision_zoo.py", (), marks=pytest.mark.slow),
])
def test_a_script_prints_the_same_as_plain_python(tmp_path: Path, script: str, args: tuple):
    plain, translated = _both(tmp_path, script, *args)
    assert plain.returncode == 0, plain.stderr
    assert translated.returncode == 0, translated.stderr
    assert translated.stdout == plain.stdout
    summary = _summary(translated.stderr)
    assert f"{script} (exited normally" in summary or f"{script} (called sys.exit(0)" in summary
    assert int(re.search(r"^frames translated: (\d+)", summary, re.M).group(1)) > 0
    # No frame falls back: training loops over a DataLoader, numpy Generator draws and array slices run
    # natively at graph breaks, a loss printed after its loop is carried between the items.
    assert int(re.search(r"^fallbacks: +(\d+)", summary, re.M).group(1)) == 0, summary


def test_training_resumed_from_a_checkpoint_writes_the_same_files(tmp_path: Path):
    outputs = {}
    for mode in ("plain", "sot"):
        directory = tmp_path / mode
        (directory / "ckpt").mkdir(parents=True)
        shutil.copy(SCRIPTS / "eval_ckpt.py", directory)
        first = _run(directory, mode == "sot", "eval_ckpt.py", "ckpt", "--epochs", "3")
        resumed = _run(directory, mode == "sot", "eval_ckpt.py", "ckpt", "--epochs", "12", "--resume")
        assert first.returncode == resumed.returncode == 0, first.stderr + resumed.stderr
        outputs[mode] = first.stdout + resumed.stdout
        if mode == "sot":  # (the training loop slices numpy batches, then prints the loss after its loop)
            for run in (first, resumed):
                assert int(re.search(r"^fallbacks: +(\d+)", _summary(run.stderr), re.M).group(1)) == 0, run.stderr
        assert "resume from 3" in resumed.stdout and "same eval True" in resumed.stdout
    assert outputs["sot"] == outputs["plain"]
    names = sorted(os.listdir(tmp_path / "plain" / "ckpt"))
    assert names == sorted(os.listdir(tmp_path / "sot" / "ckpt"))
    for name in names:
        assert (tmp_path / "plain" / "ckpt" / name).read_bytes() == (tmp_path / "sot" / "ckpt" / name).read_bytes(), name


BROKEN_THEN_RAISING = """
    import paddle


    def helper(n):
        if n == 0:
            raise KeyError("deep")
        print("helper", n)  # a graph break: the rest of helper is a resume function
        return helper(n - 1)


    def main():
        x = paddle.ones([2])
        print("first", float(x.sum()))  # graph breaks
        x = x * 2
        print("second", float(x.sum()))
        try:
            helper(2)
        except KeyError as exc:
            raise ValueError("failed <on purpose>") from exc


    if __name__ == "__main__":
        main()
"""


def _frames(stderr: str) -> list[str]:
    return re.findall(r'^  File ".*", line \d+, in \S+$', stderr, re.M)


def test_a_traceback_shows_each_user_frame_once_as_python_does(tmp_path: Path):
    """A frame split by graph breaks runs as pieces calling one another: the traceback printed at exit
    shows the frame once, at the line that raised, like plain Python (recursion still shows each call)."""
    for mode in ("plain", "sot"):
        (tmp_path / mode).mkdir()
        (tmp_path / mode / "fails.py").write_text(textwrap.dedent(BROKEN_THEN_RAISING).lstrip())
    plain = _run(tmp_path / "plain", False, "fails.py")
    translated = _run(tmp_path / "sot", True, "fails.py")
    assert plain.returncode == translated.returncode == 1
    assert translated.stdout == plain.stdout
    expected = [line.replace("/plain/", "/sot/") for line in _frames(plain.stderr)]
    assert len(expected) == 6, plain.stderr  # main + 3 x helper, then <module> + main
    assert _frames(translated.stderr) == expected, translated.stderr


WARNS_IN_TRAINING = """
    import paddle


    def step(bn, x):
        return (bn(x) * 2).sum()


    def other(x):
        for _ in range(12):
            x = x * 0.5 + 1
        return x.sum()


    if __name__ == "__main__":
        bn = paddle.nn.BatchNorm1D(4)
        x = paddle.arange(12, dtype="float32").reshape([3, 4])
        print(float(step(bn, x)))
        print(float(other(x)))  # translated after the warning was shown
        print(float(step(bn, x)))
"""


def test_a_library_warning_is_shown_once_as_in_plain_python(tmp_path: Path):
    """BatchNorm warns at every training forward; the default filter shows it once per place. Building a
    program under ``warnings.catch_warnings()`` changed the filters' version, which made every module's
    ``__warningregistry__`` forget what it showed: eager showed the warning again after each translation
    (`symbolic.build_warnings`)."""
    (tmp_path / "warns.py").write_text(textwrap.dedent(WARNS_IN_TRAINING).lstrip())
    plain = _run(tmp_path, False, "warns.py")
    translated = _run(tmp_path, True, "warns.py")
    assert translated.stdout == plain.stdout
    message = "When training, we now always track global mean and variance."
    assert plain.stderr.count(message) == 1
    assert translated.stderr.count(message) == 1, translated.stderr


PROGRESS_LINE = """
    import sys

    import paddle


    def progress(step, total, loss):
        sys.stdout.write(f"\\\\r{step}/{total} loss={loss:.4f}")


    if __name__ == "__main__":
        w = paddle.ones([3])
        for step in range(12):
            loss = float((w * step).sum())
            progress(step + 1, 12, loss)
        print()
"""


def test_a_progress_function_called_with_new_numbers_each_step_is_not_retranslated_each_time(tmp_path: Path):
    """A helper that only formats Python numbers has no graph to specialize for their values: translating it
    again for each step's numbers costs a translation per call and ends at the cache limit's warning."""
    (tmp_path / "progress.py").write_text(textwrap.dedent(PROGRESS_LINE).lstrip())
    plain = _run(tmp_path, False, "progress.py")
    translated = _run(tmp_path, True, "progress.py")
    assert translated.stdout == plain.stdout
    assert "cache limit" not in translated.stderr, translated.stderr

"""`python -m sot run|explain|report`, each run in a subprocess on small scripts written to tmp_path."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

TIMEOUT = 600
REPO_ROOT = str(Path(__file__).resolve().parents[1])


def _sot(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, GLOG_minloglevel="2", PYTHONWARNINGS="ignore")
    for name in ("SOT_STRICT_MODE", "SOT_LOG_LEVEL", "SOT_MIN_GRAPH_SIZE", "SOT_CACHE_LIMIT"):
        env.pop(name, None)
    # the sot of this checkout (run from tmp_path, the interpreter would find an installed one first)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO_ROOT, env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "sot", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=TIMEOUT)


def _write(directory: Path, name: str, source: str) -> Path:
    path = directory / name
    path.write_text(textwrap.dedent(source).lstrip(), encoding="utf-8")
    return path


def _line(path: Path, marker: str) -> int:
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if marker in line:
            return number
    raise AssertionError(f"{marker!r} not in {path}")


def _field(summary: str, name: str) -> str:
    match = re.search(rf"^{re.escape(name)}:\s+(\S+)", summary, re.M)
    assert match, f"no {name!r} in:\n{summary}"
    return match.group(1)


def _summary(stderr: str) -> str:
    start = stderr.find("== sot run summary:")
    assert start >= 0, stderr
    return stderr[start:]


GOOD = """
    import sys

    import numpy as np
    import paddle

    import sibling  # the script's directory is on sys.path


    def model(x, w):
        y = paddle.matmul(x, w)
        y = paddle.nn.functional.relu(y)
        for _ in range(10):
            y = y * 0.5 + 1
        return y.sum()


    def main():
        x = paddle.to_tensor(np.arange(6, dtype="float32").reshape([2, 3]))
        w = paddle.ones([3, 4])
        results = [float(model(x, w)) for _ in range(3)]
        print("name", __name__, "argv", sys.argv[1:], "sibling", sibling.VALUE, "result", results[-1])


    if __name__ == "__main__":
        main()
"""

FOO = """
    import sys

    import paddle


    class Foo:
        def __new__(cls):
            obj = object.__new__(cls)
            obj.k = 2
            return obj


    def uses_foo(x):
        y = x * 2
        f = Foo()  # unsupported: a class with its own __new__ (built natively)
        return y + f.k


    if __name__ == "__main__":
        uses_foo(paddle.ones([2], dtype="float32"))
        out = uses_foo(paddle.ones([2], dtype="float64"))
        print("out", out.numpy().tolist())
        if len(sys.argv) > 1:
            if sys.argv[1] == "raise":
                raise ValueError("the script failed <on purpose>")
            sys.exit(int(sys.argv[1]))
"""


@pytest.fixture
def scripts(tmp_path: Path) -> Path:
    _write(tmp_path, "sibling.py", "VALUE = 42\n")
    _write(tmp_path, "good.py", GOOD)
    _write(tmp_path, "foo.py", FOO)
    return tmp_path


# -- run ----------------------------------------------------------------------------------------------------
def test_run_translatable_script(scripts: Path):
    proc = _sot("run", "good.py", "--flag", "value", cwd=scripts)
    assert proc.returncode == 0, proc.stderr
    # Runs as __main__ with sys.argv = [script, args...] and the script's directory importable.
    assert "name __main__ argv ['--flag', 'value'] sibling 42 result" in proc.stdout, proc.stdout
    summary = _summary(proc.stderr)
    assert "good.py (exited normally, exit code 0)" in summary
    assert int(_field(summary, "frames translated")) >= 1
    assert int(_field(summary, "graphs compiled")) >= 1
    assert int(_field(summary, "cache hits")) >= 2  # model() called three times with the same inputs
    assert float(_field(summary, "time translating")) > 0
    # main() itself breaks at print() / float(); model() is translated without a break or a fallback.
    assert not re.search(r"^  (graph break|fallback) .* in model\b", summary, re.M), summary


def test_run_same_result_as_plain_python(scripts: Path):
    plain = subprocess.run([sys.executable, "good.py"], cwd=scripts, capture_output=True, text=True,
                           env=dict(os.environ, GLOG_minloglevel="2"), timeout=TIMEOUT)
    assert plain.returncode == 0, plain.stderr
    translated = _sot("run", "good.py", cwd=scripts)
    assert translated.stdout == plain.stdout


def test_run_reports_unsupported_construct(scripts: Path):
    proc = _sot("run", "foo.py", cwd=scripts)
    assert proc.returncode == 0, proc.stderr
    assert "out [4.0, 4.0]" in proc.stdout
    summary = _summary(proc.stderr)
    line = _line(scripts / "foo.py", "f = Foo()")
    assert int(_field(summary, "graph breaks")) + int(_field(summary, "fallbacks")) >= 1
    # Deduplicated with a count: translated twice (float32, then float64), failing at the same line each time.
    pattern = rf"^  (graph break|fallback)\s+x2\s+\S*foo\.py:{line}\s+in uses_foo: .*Foo"
    assert re.search(pattern, summary, re.M), summary


def test_run_exit_code_of_sys_exit(scripts: Path):
    proc = _sot("run", "foo.py", "3", cwd=scripts)
    assert proc.returncode == 3, proc.stderr
    summary = _summary(proc.stderr)
    assert "called sys.exit(3), exit code 3" in summary
    assert "frames translated" in summary and "time translating" in summary


def test_run_failing_script(scripts: Path):
    proc = _sot("run", "foo.py", "raise", cwd=scripts)
    assert proc.returncode == 1
    traceback_at = proc.stderr.find("Traceback (most recent call last)")
    assert traceback_at >= 0, proc.stderr
    assert "ValueError: the script failed <on purpose>" in proc.stderr
    assert f'foo.py", line {_line(scripts / "foo.py", "raise ValueError")}' in proc.stderr
    assert "sot/cli.py" not in proc.stderr  # our own frames are not in the user's traceback
    summary_at = proc.stderr.find("== sot run summary:")
    assert summary_at > traceback_at
    assert "raised ValueError, exit code 1" in proc.stderr


def test_run_sys_exit_message_and_double_dash(tmp_path: Path):
    _write(tmp_path, "bye.py", """
        import sys
        print("args", sys.argv)
        sys.exit("bye <now>")
    """)
    proc = _sot("run", "--", "bye.py", "-h", cwd=tmp_path)
    assert proc.returncode == 1
    assert "args ['bye.py', '-h']" in proc.stdout
    assert "bye <now>" in proc.stderr
    assert "frames translated: 0" in proc.stderr


def test_run_usage_errors(tmp_path: Path):
    missing = _sot("run", "missing.py", cwd=tmp_path)
    assert missing.returncode == 2
    assert "missing.py" in missing.stderr and "Traceback" not in missing.stderr
    nothing = _sot("run", cwd=tmp_path)
    assert nothing.returncode == 2 and "give the script" in nothing.stderr
    no_command = _sot(cwd=tmp_path)
    assert no_command.returncode == 2 and "run" in no_command.stderr


# -- explain ------------------------------------------------------------------------------------------------
EXPLAINED = """
    import paddle


    def model(x, w):
        y = paddle.matmul(x, w)
        for _ in range(10):
            y = y + 1
        return y


    def model_example_inputs():
        return (paddle.ones([2, 3]), paddle.ones([3, 4]))


    def no_arguments():
        return paddle.ones([2]) * 3


    def needs_two(a, b):
        return a + b


    class Net(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.fc = paddle.nn.Linear(3, 3)

        def forward(self, x):
            return paddle.nn.functional.relu(self.fc(x))


    net = Net()
    EXAMPLE_INPUTS = [paddle.ones([2, 3])]
    not_callable = 3

    if __name__ == "__main__":
        raise SystemExit("explain must import the script, not run it as __main__")
"""


def test_explain_function_with_its_example_inputs(tmp_path: Path):
    script = _write(tmp_path, "explained.py", EXPLAINED)
    proc = _sot("explain", "explained.py:model", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "== sot.explain: model ==" in out
    assert "SIR model(" in out and "paddle.matmul" in out
    assert f"{script}:{_line(script, 'y = y + 1')}" in out  # statements carry the user's file:line
    assert "x.shape == [2, 3]" in out  # guards


def test_explain_layer_instance_with_generic_inputs(tmp_path: Path):
    _write(tmp_path, "explained.py", EXPLAINED)
    proc = _sot("explain", "explained.py:net", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Net.forward" in proc.stdout and "relu" in proc.stdout


def test_explain_function_without_arguments(tmp_path: Path):
    _write(tmp_path, "explained.py", EXPLAINED)
    proc = _sot("explain", "explained.py:no_arguments", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "== sot.explain: no_arguments ==" in proc.stdout


def test_explain_script_parsing_its_command_line_at_import(tmp_path: Path):
    """The imported script sees ``sys.argv == [script]``, not sot's own arguments (a module-level argparse
    would reject ``explain script.py:model``)."""
    _write(tmp_path, "with_args.py", """
        import argparse, sys
        import paddle

        parser = argparse.ArgumentParser()
        parser.add_argument("--scale", type=float, default=2.0)
        ARGS = parser.parse_args()
        ARGV = list(sys.argv)

        def model(x):
            return x * ARGS.scale + 1

        def example_inputs():
            return (paddle.ones([2, 3]),)
    """)
    proc = _sot("explain", "with_args.py:model", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "== sot.explain: model ==" in proc.stdout and "SIR model(" in proc.stdout


@pytest.mark.parametrize("target, message", [
    ("explained.py:missing", "has no attribute 'missing'"),
    ("explained.py:not_callable", "not a function"),
    ("explained.py:needs_two", "needs_two_example_inputs"),
    ("explained.py", "expected script.py:function"),
    ("nowhere.py:model", "nowhere.py"),
])
def test_explain_errors(tmp_path: Path, target: str, message: str):
    _write(tmp_path, "explained.py", EXPLAINED)
    proc = _sot("explain", target, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_explain_missing_inputs(tmp_path: Path):
    _write(tmp_path, "plain.py", """
        import paddle

        def f(x):
            return x + 1
    """)
    proc = _sot("explain", "plain.py:f", cwd=tmp_path)
    assert proc.returncode == 2
    assert "no example inputs for f" in proc.stderr and "f_example_inputs" in proc.stderr


# -- report -------------------------------------------------------------------------------------------------
def test_report_command_writes_html(scripts: Path):
    proc = _sot("report", "foo.py", "-o", "out/report.html", cwd=scripts)
    assert proc.returncode == 0, proc.stderr
    page = (scripts / "out" / "report.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    assert "foo.py" in page and "Foo()" in page
    assert re.search(r'class="line (break|fail)"', page), "the Foo() line is not marked"
    assert "report written to" in proc.stderr and "== sot run summary:" in proc.stderr


def test_report_command_options_and_exit_code(scripts: Path):
    proc = _sot("report", "-o", "first.html", "good.py", cwd=scripts)
    assert proc.returncode == 0, proc.stderr
    page = (scripts / "first.html").read_text(encoding="utf-8")
    assert 'class="line graph"' in page and "SIR model(" in page
    # -o right after the script, then the script's own arguments after --.
    proc = _sot("report", "foo.py", "-o", "second.html", "--", "3", cwd=scripts)
    assert proc.returncode == 3
    assert (scripts / "second.html").exists()


MAIN_MODULE = """
    import sys
    print(type(__builtins__).__name__, __builtins__.len([1, 2]), __annotations__)
    print(__file__)
    print(sys.path[0])
    try:
        import beside_the_working_directory
    except ImportError:
        print("not importable")

    def hook(kind, value, tb):
        print("custom hook:", kind.__name__, value)

    sys.excepthook = hook
    raise RuntimeError("uncaught")
"""


def test_run_sets_up_main_as_python_does(tmp_path: Path):
    """``__builtins__`` the module, ``__annotations__``, ``__file__`` as given (absolute, not normalised),
    the script's directory instead of the working directory on ``sys.path``, and the script's
    ``sys.excepthook`` for its uncaught exception: all as ``python script.py``."""
    scripts, work = tmp_path / "scripts", tmp_path / "work"
    scripts.mkdir()
    work.mkdir()
    _write(scripts, "main_module.py", MAIN_MODULE)
    _write(work, "beside_the_working_directory.py", "VALUE = 1\n")
    env = dict(os.environ, GLOG_minloglevel="2", PYTHONWARNINGS="ignore")
    plain = subprocess.run([sys.executable, "../scripts/main_module.py"], cwd=work, env=env, capture_output=True,
                           text=True, timeout=TIMEOUT)
    translated = _sot("run", "../scripts/main_module.py", cwd=work)
    assert plain.stdout.splitlines()[-1] == "custom hook: RuntimeError uncaught"
    assert translated.stdout == plain.stdout, translated.stderr
    assert translated.returncode == plain.returncode == 1


def test_run_a_script_making_warnings_errors_past_the_cache_limit(tmp_path: Path):
    """sot's cache-limit warning is its own diagnostic: a script turning warnings into errors still runs."""
    _write(tmp_path, "bar.py", """
        import sys, warnings
        warnings.simplefilter("error")

        class Bar:
            def __init__(self, total):
                self.total, self.n = total, 0

            def update(self):
                self.n += 1
                filled = int(20 * self.n / self.total)
                sys.stdout.write("#" * filled + "\\n")
                if self.n == self.total:
                    sys.stdout.write("done\\n")

        bar = Bar(12)
        for _ in range(12):
            bar.update()
        print("ok")
    """)
    proc = _sot("run", "bar.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-2:] == ["done", "ok"]
    assert "reached the cache limit" in proc.stderr

"""The command line: ``python -m sot run|explain|report``.

* ``run script.py [args]``: runs an unchanged script as ``__main__`` (like ``python -m cProfile``) with the
  frame callback installed for the main thread, then prints a summary to stderr; the exit code is the
  script's.
* ``explain script.py:function``: imports the script as a module and prints ``sot.explain`` of one call of the
  function, with the script's example inputs.
* ``report [-o report.html] script.py [-o report.html] [--] [args]``: runs the script like ``run`` and writes
  the HTML report of the whole run.
"""
from __future__ import annotations

import argparse
import builtins
import importlib.util
import inspect
import os
import sys
import types
from typing import Any, NoReturn, Sequence

USAGE_ERROR = 2

_DESCRIPTION = """sot: a bytecode-level JIT for PaddlePaddle.

commands:
  run script.py [args...]            run a script with translation on; summary on stderr at exit
  explain script.py:function         sot.explain of one call of a function of the script
  report script.py -o report.html    the HTML report of a whole run of the script
"""


class UsageError(Exception):
    """A mistake in the command line or in what it names: message on stderr, exit code 2."""


def _fail(message: str) -> NoReturn:
    raise UsageError(message)


# -- running a script -------------------------------------------------------------------------------------
class ScriptOutcome:
    """How the script ended: its exit code and, if it raised, the exception."""

    def __init__(self) -> None:
        self.exit_code = 0
        self.description = "exited normally"


def _check_script(path: str) -> str:
    if not os.path.exists(path):
        _fail(f"can't open file {path!r}: no such file")
    if os.path.isdir(path):
        _fail(f"{path!r} is a directory; give the script to run")
    return path


def _exit_code_of(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # what Python does with sys.exit("message")
    return 1


def _merge_resumed_frames(exc: BaseException | None, seen: set[int] | None = None) -> None:
    """Drop from the traceback of ``exc`` (and of the exceptions it chains) each entry of a translated frame
    whose next entry is the same user frame resumed after a graph break: Python shows that frame once, at
    the line where it raised, not once per piece it was split into."""
    from .opcode_translator.frame_groups import same_activation

    seen = set() if seen is None else seen
    if exc is None or id(exc) in seen:
        return
    seen.add(id(exc))
    head = exc.__traceback__
    while head is not None and head.tb_next is not None and same_activation(head.tb_next.tb_frame,
                                                                            head.tb_frame):
        head = head.tb_next
    entry = head
    while entry is not None:
        following = entry.tb_next
        while following is not None and following.tb_next is not None and \
                same_activation(following.tb_next.tb_frame, following.tb_frame):
            following = following.tb_next
        entry.tb_next = following
        entry = following
    if head is not exc.__traceback__:
        exc.__traceback__ = head
    _merge_resumed_frames(exc.__cause__, seen)
    _merge_resumed_frames(exc.__context__, seen)


def _print_user_traceback(exc: BaseException, filename: str) -> None:
    """The traceback as Python would print it, without our own frames above the script's, and with each
    user frame once however many pieces graph breaks split it into."""
    _merge_resumed_frames(exc)
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != filename:
        tb = tb.tb_next
    if tb is None:
        tb = exc.__traceback__
    # (the script's own hook, if it set one; Python's printing otherwise, which reads the exception's own
    # traceback: trimmed first)
    sys.excepthook(type(exc), exc.with_traceback(tb), tb)


def run_script(path: str, args: Sequence[str], recorder: Any) -> ScriptOutcome:
    """Run ``path`` as ``__main__`` with ``sys.argv = [path, *args]``, the script's directory first on
    ``sys.path`` and ``recorder``'s timed frame callback installed for this thread."""
    from .eval_frame_ext import set_callback

    # As ``python path``: ``__file__`` made absolute but not normalised, the builtins module, empty
    # annotations, and the script's real directory in place of the ``-m`` run's working directory first on
    # ``sys.path`` (a module beside the working directory does not import).
    filename = path if os.path.isabs(path) else os.path.join(os.getcwd(), path)
    with open(filename, "rb") as source_file:
        source = source_file.read()
    code = compile(source, filename, "exec", dont_inherit=True)
    module = types.ModuleType("__main__")
    module.__dict__.update(__file__=filename, __builtins__=builtins, __cached__=None, __spec__=None,
                           __loader__=None, __package__=None, __annotations__={})
    saved = sys.argv[:], sys.path[:], sys.modules.get("__main__")
    sys.argv = [path, *args]
    script_dir = os.path.dirname(os.path.realpath(filename))
    if sys.path and os.path.abspath(sys.path[0] or os.curdir) == os.getcwd():
        sys.path[0] = script_dir
    else:
        sys.path.insert(0, script_dir)
    sys.modules["__main__"] = module
    outcome = ScriptOutcome()
    with recorder:
        previous = recorder.install()
        try:
            exec(code, module.__dict__)
        except SystemExit as exc:
            set_callback(previous)
            outcome.exit_code = _exit_code_of(exc)
            outcome.description = f"called sys.exit({exc.code!r})"
        except KeyboardInterrupt as exc:
            set_callback(previous)
            _print_user_traceback(exc, filename)
            outcome.exit_code = 130
            outcome.description = "interrupted (KeyboardInterrupt)"
        except BaseException as exc:  # noqa: BLE001 - the script's own error, reported like Python does
            set_callback(previous)
            _print_user_traceback(exc, filename)
            outcome.exit_code = 1
            outcome.description = f"raised {type(exc).__name__}"
        finally:
            set_callback(previous)
            sys.argv, sys.path[:], main = saved[0], saved[1], saved[2]
            if main is not None:
                sys.modules["__main__"] = main
    return outcome


def _summary(script: str, outcome: ScriptOutcome, recorder: Any) -> str:
    head = f"== sot run summary: {script} ({outcome.description}, exit code {outcome.exit_code}) =="
    return "\n".join([head, *recorder.summary_lines()])


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed stream must not hide the summary or the exit code
            pass


def cmd_run(script: str, args: Sequence[str]) -> int:
    from .report import Recorder

    _check_script(script)
    recorder = Recorder()
    outcome = run_script(script, args, recorder)
    _flush()
    print(_summary(script, outcome, recorder), file=sys.stderr, flush=True)
    return outcome.exit_code


def cmd_report(script: str, args: Sequence[str], output: str) -> int:
    from .report import Recorder, write_html

    _check_script(script)
    output = os.path.abspath(output)  # the script may change directory
    recorder = Recorder()
    outcome = run_script(script, args, recorder)
    _flush()
    title = f"sot report: {os.path.basename(script)}"
    command = " ".join(["python -m sot report", script, *args])
    path = write_html(recorder, output, title, [f"{command}: {outcome.description}, exit code "
                                                f"{outcome.exit_code}, {recorder.finished - recorder.started:.3f} s"])
    print(_summary(script, outcome, recorder), file=sys.stderr)
    print(f"sot: report written to {os.path.abspath(path)}", file=sys.stderr, flush=True)
    return outcome.exit_code


# -- explain ----------------------------------------------------------------------------------------------
def import_script(path: str) -> types.ModuleType:
    """Import ``path`` as a module (named after the file, not ``__main__``), its directory on sys.path."""
    filename = os.path.abspath(_check_script(path))
    name = os.path.splitext(os.path.basename(filename))[0]
    if not name.isidentifier() or name in sys.modules:
        name = "_sot_script_" + "".join(c if c.isalnum() else "_" for c in name)
    spec = importlib.util.spec_from_file_location(name, filename)
    if spec is None or spec.loader is None:
        _fail(f"cannot import {path!r} as a Python module")
    module = importlib.util.module_from_spec(spec)
    directory = os.path.dirname(filename)
    if directory not in sys.path:
        sys.path.insert(0, directory)
    sys.modules[name] = module
    # The script sees the command line it would see run alone without arguments (a module-level
    # ``argparse`` parse must not read sot's own ``explain script.py:function``).
    saved_argv, sys.argv = sys.argv, [path]
    try:
        spec.loader.exec_module(module)
    finally:
        sys.argv = saved_argv
    return module


def _find(module: types.ModuleType, dotted: str, script: str) -> Any:
    value: Any = module
    walked = []
    for part in dotted.split("."):
        if not hasattr(value, part):
            owner = script if not walked else f"{'.'.join(walked)} (in {script})"
            names = _explainable_names(module)
            hint = f"; callables defined there: {', '.join(names)}" if names and not walked else ""
            _fail(f"{owner} has no attribute {part!r}{hint}")
        value = getattr(value, part)
        walked.append(part)
    if not callable(value):
        _fail(f"{dotted} in {script} is not a function, method or Layer (its type is {type(value).__name__})")
    return value


def _explainable_names(module: types.ModuleType) -> list[str]:
    """Functions defined by the script and its Layer instances, for error messages."""
    import paddle

    names = []
    for name, value in vars(module).items():
        if name.startswith("_") or name.lower().endswith("example_inputs"):
            continue
        if isinstance(value, paddle.nn.Layer) or (
                isinstance(value, types.FunctionType) and value.__module__ == module.__name__):
            names.append(name)
    return sorted(names)


def _signature_target(fn: Any) -> Any:
    import paddle

    return fn.forward if isinstance(fn, paddle.nn.Layer) else fn


def _accepts(fn: Any, args: tuple) -> str | None:
    """None when ``fn(*args)`` binds to the signature of ``fn``, else why not."""
    try:
        signature = inspect.signature(_signature_target(fn))
    except (TypeError, ValueError):
        return None  # cannot tell: let the call decide
    try:
        signature.bind(*args)
    except TypeError as exc:
        return str(exc)
    return None


def example_inputs(module: types.ModuleType, dotted: str, fn: Any, script: str) -> tuple:
    """The arguments to explain ``fn`` with: ``<function>_example_inputs``, then ``example_inputs`` /
    ``EXAMPLE_INPUTS`` (a tuple or list of arguments, or a zero-argument callable returning one)."""
    last = dotted.rsplit(".", 1)[-1]
    candidates = list(dict.fromkeys([f"{dotted.replace('.', '_')}_example_inputs", f"{last}_example_inputs",
                                     "example_inputs", "EXAMPLE_INPUTS"]))
    for name in candidates:
        if not hasattr(module, name):
            continue
        value = getattr(module, name)
        if callable(value):
            try:
                value = value()
            except TypeError as exc:
                if "argument" in str(exc):
                    _fail(f"{name} in {script} must take no argument (it is called to get the inputs): {exc}")
                raise
        if not isinstance(value, (tuple, list)):
            _fail(f"{name} in {script} must be (or return) a tuple or list of the positional arguments of "
                  f"{dotted}, got {type(value).__name__}")
        mismatch = _accepts(fn, tuple(value))
        if mismatch is None:
            return tuple(value)
        if name.endswith("_example_inputs") or _accepts(fn, ()) is not None:
            hint = "" if name.endswith("_example_inputs") else f"; define {candidates[0]}() for it"
            _fail(f"the {len(value)} example input(s) of {name} in {script} do not fit {dotted}: {mismatch}{hint}")
        break  # generic inputs meant for other functions; this one takes no argument
    if _accepts(fn, ()) is None:
        return ()
    _fail(f"no example inputs for {dotted} in {script}: define {candidates[0]}() returning a tuple of its "
          f"arguments, or example_inputs / EXAMPLE_INPUTS (a tuple or list of arguments, or a zero-argument "
          f"function returning one)")


def cmd_explain(target: str) -> int:
    script, sep, dotted = target.rpartition(":")
    if not sep or not script or not dotted:
        _fail(f"expected script.py:function, got {target!r}")
    _check_script(script)
    filename = os.path.abspath(script)
    try:
        module = import_script(script)
    except UsageError:
        raise
    except Exception as exc:  # noqa: BLE001 - the script's own error at import
        _print_user_traceback(exc, filename)
        print(f"python -m sot explain: error: importing {script} raised {type(exc).__name__}", file=sys.stderr)
        return 1
    fn = _find(module, dotted, script)
    args = example_inputs(module, dotted, fn, script)

    import sot

    try:
        text = str(sot.explain(fn, *args))
    except Exception as exc:  # noqa: BLE001 - the function's own error
        _print_user_traceback(exc, filename)
        print(f"python -m sot explain: error: calling {dotted} raised {type(exc).__name__}", file=sys.stderr)
        return 1
    print(text)
    return 0


# -- argument parsing ---------------------------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sot", description=_DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", metavar="{run,explain,report}")
    run = sub.add_parser("run", help="run a script with translation on, summary at exit",
                         description="Run an unchanged script as __main__ with translation on for every frame "
                                     "the skip policy lets through; print a summary to stderr at exit. The exit "
                                     "code is the script's.")
    run.add_argument("script", nargs="?", help="the Python script to run")
    run.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the script")
    explain = sub.add_parser("explain", help="sot.explain of a function of a script",
                             description="Import the script as a module and print sot.explain of one call of "
                                         "FUNCTION (a dotted path to a module-level function, callable or Layer), "
                                         "with the inputs of <function>_example_inputs(), example_inputs or "
                                         "EXAMPLE_INPUTS defined by the script.")
    explain.add_argument("target", metavar="script.py:function")
    report = sub.add_parser("report", help="the HTML report of a whole run of a script",
                            description="Run the script like `run` and write an HTML report. -o may also come "
                                        "right after the script; use -- before script arguments that could be "
                                        "taken for -o.")
    report.add_argument("-o", "--output", default=None, help="the HTML file to write (default sot-report.html)")
    report.add_argument("script", nargs="?", help="the Python script to run")
    report.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the script")
    return parser


def _split_report_args(output: str | None, rest: list[str]) -> tuple[str, list[str]]:
    """``-o FILE`` / ``--output FILE`` / ``--output=FILE`` right after the script are ours; then an optional
    ``--``; the rest goes to the script."""
    rest = list(rest)
    while rest:
        if rest[0] in ("-o", "--output"):
            if len(rest) < 2:
                _fail(f"{rest[0]} needs a file name")
            output = rest[1]
            rest = rest[2:]
        elif rest[0].startswith("--output="):
            output = rest[0].split("=", 1)[1]
            rest = rest[1:]
        elif rest[0].startswith("-o") and len(rest[0]) > 2:
            output = rest[0][2:]
            rest = rest[1:]
        else:
            break
    if rest and rest[0] == "--":
        rest = rest[1:]
    return output or "sot-report.html", rest


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _parser()
    options = parser.parse_args(argv)
    try:
        if options.command in ("run", "report") and not options.script:
            _fail("give the script to run: python -m sot " + options.command + " script.py [args...]")
        if options.command == "run":
            args = options.args[1:] if options.args[:1] == ["--"] else options.args
            return cmd_run(options.script, args)
        if options.command == "explain":
            return cmd_explain(options.target)
        if options.command == "report":
            output, args = _split_report_args(options.output, options.args)
            return cmd_report(options.script, args, output)
        parser.print_help(sys.stderr)
        return USAGE_ERROR
    except UsageError as exc:
        print(f"python -m sot {options.command}: error: {exc}", file=sys.stderr)
        return USAGE_ERROR


__all__ = ["main", "run_script", "import_script", "example_inputs", "UsageError"]

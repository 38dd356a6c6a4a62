"""Shrink a failing fuzz program: delete lines and blocks while it still fails the same way.

    python -m tests.fuzz.reduce SEED [--min-graph-size 0]

Deletes one statement (with its block) at a time, replacing an emptied block with ``pass``; keeps a deletion
when the program still compiles, its eager runs raise no NameError/UnboundLocalError the original didn't, and
the translated runs still differ from eager with the same kind of difference. Then tries fewer translated runs
and a single input set. Prints the reduced program (the prelude is shared, see generator.PRELUDE).
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import re
import sys

os.environ.setdefault("GLOG_minloglevel", "2")

import warnings  # noqa: E402

warnings.filterwarnings("ignore", message="No ccache found")

from .generator import PRELUDE, Program, generate  # noqa: E402
from .harness import Failure, check_program, eager_only, time_limit  # noqa: E402

BAD_EAGER = ("NameError", "UnboundLocalError", "SyntaxError")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _block_end(lines: list[str], i: int) -> int:
    j = i + 1
    while j < len(lines) and (not lines[j].strip() or _indent(lines[j]) > _indent(lines[i])):
        j += 1
    return j


def _delete(lines: list[str], i: int) -> list[str] | None:
    """``lines`` without the statement at ``i`` (and its block); an emptied block gets a ``pass``."""
    line = lines[i]
    if re.fullmatch(r"\s*w\d+ \+= 1", line):  # a while loop's counter: deleting it would loop forever
        return None
    if not line.strip() or line.startswith(("def f(", "    global")) or \
            (line.strip().startswith("return") and _indent(line) == 4):
        return None
    end = _block_end(lines, i)
    rest = lines[:i] + lines[end:]
    if i > 0 and lines[i - 1].rstrip().endswith(":") and \
            (i >= len(rest) or _indent(rest[i]) <= _indent(lines[i - 1])):
        rest = rest[:i] + [" " * _indent(line) + "pass"] + rest[i:]
    return rest


def _unwrap(lines: list[str], i: int) -> list[str] | None:
    """``lines`` with the header at ``i`` (if/for/while/with/try) replaced by its body."""
    line = lines[i]
    if not line.rstrip().endswith(":") or line.lstrip().startswith("def ") or _indent(line) < 4:
        return None
    end = _block_end(lines, i)
    if end <= i + 1:
        return None
    body = [b[4:] if b.startswith(" " * (_indent(line) + 4)) else b for b in lines[i + 1:end]]
    return lines[:i] + body + lines[end:]


class Reducer:
    def __init__(self, program: Program, failure: Failure) -> None:
        self.program = program
        self.kind = failure.kind
        self.bad_eager_ok = {e[0] for e in eager_only(program) if e} & set(BAD_EAGER)
        self.checks = 0

    def fails(self, candidate: Program) -> Failure | None:
        self.checks += 1
        try:
            compile(candidate.source, "<candidate>", "exec")
            with time_limit(5):
                eager = eager_only(candidate)
        except Exception:  # noqa: BLE001 - an invalid candidate
            return None
        if any(e and e[0] in BAD_EAGER and e[0] not in self.bad_eager_ok for e in eager):
            return None
        failure = check_program(candidate, timeout=10)
        return failure if failure is not None and failure.kind == self.kind else None

    def run(self) -> tuple[Program, Failure]:
        current = self.program
        last = self.fails(current)
        assert last is not None, "the program does not fail"
        for runs in (("A",), ("A", "A"), ("B",), ("A", "B"), ("A", "C"), ("B", "C"), ("A", "B", "C")):
            candidate = dataclasses.replace(current, runs=runs)
            found = self.fails(candidate)
            if found:
                current, last = candidate, found
                break
        changed = True
        while changed:
            changed = False
            for edit in (_delete, _unwrap):
                lines = current.source[len(PRELUDE):].split("\n")
                for i in range(len(lines) - 1, -1, -1):  # backwards: an edit leaves earlier indices valid
                    if i >= len(lines):
                        continue
                    edited = edit(lines, i)
                    if edited is None or edited == lines:
                        continue
                    candidate = dataclasses.replace(current, source=PRELUDE + "\n".join(edited))
                    found = self.fails(candidate)
                    if found:
                        current, last, changed, lines = candidate, found, True, edited
                print(f"... {len(lines)} lines after {self.checks} checks", file=sys.stderr, flush=True)
        return current, last


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz.reduce")
    parser.add_argument("seed", type=int)
    parser.add_argument("--min-graph-size", type=int)
    args = parser.parse_args(argv)
    program = generate(args.seed)
    if args.min_graph_size is not None:
        program.min_graph_size = args.min_graph_size
    failure = check_program(program)
    if failure is None:
        print(f"seed {args.seed} does not fail")
        return 0
    reduced, last = Reducer(program, failure).run()
    print(last)
    print(f"# runs: {reduced.runs}")
    return 1


if __name__ == "__main__":
    sys.exit(main())

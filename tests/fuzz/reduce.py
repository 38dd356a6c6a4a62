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
import sys

os.environ.setdefault("GLOG_minloglevel", "2")

import warnings  # noqa: E402

warnings.filterwarnings("ignore", message="No ccache found")

from .generator import PRELUDE, Program, generate  # noqa: E402
from .harness import Failure, check_program, eager_only  # noqa: E402

BAD_EAGER = ("NameError", "UnboundLocalError", "SyntaxError")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _block_end(lines: list[str], i: int) -> int:
    j = i + 1
    while j < len(lines) and (not lines[j].strip() or _indent(lines[j]) > _indent(lines[i])):
        j += 1
    return j


def _candidates(lines: list[str]) -> list[list[str]]:
    out = []
    for i in range(len(lines) - 1, -1, -1):
        line = lines[i]
        if not line.strip() or line.startswith(("def f(", "    global")) or line.strip().startswith("return") \
                and _indent(line) == 4:
            continue
        end = _block_end(lines, i)
        rest = lines[:i] + lines[end:]
        # an emptied block gets a ``pass``
        if i > 0 and lines[i - 1].rstrip().endswith(":") and (i >= len(rest) or _indent(rest[i]) <= _indent(lines[i - 1])):
            rest = rest[:i] + [" " * _indent(line) + "pass"] + rest[i:]
        out.append(rest)
        # also: keep the body, drop the header (unwrap an if/for/while/with/try)
        if line.rstrip().endswith(":") and end > i + 1:
            body = [b[4:] if b.startswith(" " * (_indent(line) + 4)) else b for b in lines[i + 1:end]]
            out.append(lines[:i] + body + lines[end:])
    return out


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
            eager = eager_only(candidate)
        except Exception:  # noqa: BLE001 - an invalid candidate
            return None
        if any(e and e[0] in BAD_EAGER and e[0] not in self.bad_eager_ok for e in eager):
            return None
        failure = check_program(candidate)
        return failure if failure is not None and failure.kind == self.kind else None

    def run(self) -> tuple[Program, Failure]:
        current = self.program
        last = self.fails(current)
        assert last is not None, "the program does not fail"
        for runs in (("A",), ("A", "A"), ("B",), ("A", "B")):
            candidate = dataclasses.replace(current, runs=runs)
            found = self.fails(candidate)
            if found:
                current, last = candidate, found
                break
        changed = True
        while changed:
            changed = False
            body = current.source[len(PRELUDE):].split("\n")
            for lines in _candidates(body):
                candidate = dataclasses.replace(current, source=PRELUDE + "\n".join(lines))
                found = self.fails(candidate)
                if found:
                    current, last, changed = candidate, found, True
                    break
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

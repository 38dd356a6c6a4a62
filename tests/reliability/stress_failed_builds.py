"""Program traces that raise, each followed by traces of the same layer that work (see `program_registries`).

    python -m tests.reliability.stress_failed_builds            # inside sot's build sections: runs clean
    python -m tests.reliability.stress_failed_builds bare       # Paddle alone: crashes within a few rounds

A ``to_static`` trace that raises leaves its entry in Paddle's parameter recorder (keyed by ``id`` of its
program, holding values of that program, which is freed with the exception). A later trace whose program gets
the same address inherits the entry and wires the dead program's parameter values into its own program. Bare,
on Paddle 3.3 / Python 3.11 this aborted at the third round ("Destroyed a op_result that is still in use by
pd_op.matmul", or a broadcast error from a freed value's shape); under valgrind (default allocator, so that
CPython reuses the program's address) memcheck reports "Invalid read ... pir::Value::type() ... inside a block
of size 168 free'd ... pir::Program::~Program()" at the third round. Inside `compile.BUILD_LOCK` sections, as
sot's builds run, the entry is dropped when the section ends and every round runs.
"""
from __future__ import annotations

import contextlib
import gc
import os
import sys

os.environ.setdefault("GLOG_minloglevel", "2")
sys.path.insert(0, os.getcwd())  # (run from the repository root)

import paddle  # noqa: E402
import paddle.nn as nn  # noqa: E402
from paddle.static import InputSpec  # noqa: E402

from sot.symbolic.compile import BUILD_LOCK  # noqa: E402

ROUNDS = 30


def main(argv: list[str]) -> int:
    bare = argv[:1] == ["bare"]
    section = contextlib.nullcontext if bare else lambda: BUILD_LOCK
    layer = nn.Linear(3, 3)
    fail = [True]

    @paddle.jit.not_to_static
    def traced(inputs: list) -> list:
        y = layer(inputs[0])
        if fail[0]:
            raise ValueError("the trace fails")
        return [y * 2]

    specs = [[InputSpec([2, 3], "float32", stop_gradient=False)]]
    for round_ in range(ROUNDS):
        fail[0] = True
        with section():
            try:
                paddle.jit.to_static(traced, input_spec=specs, full_graph=True).get_concrete_program(
                    [paddle.ones([2, 3])])
            except Exception:  # noqa: BLE001 - the failing trace
                pass
        gc.collect()
        fail[0] = False
        with section():
            _, runner = paddle.jit.to_static(traced, input_spec=specs, full_graph=True).get_concrete_program(
                [paddle.ones([2, 3])])
        x = paddle.ones([2, 3])
        x.stop_gradient = False
        out = runner.sot_call([x])[0]
        out.sum().backward()
        expected = (layer(x) * 2).numpy()
        assert (out.numpy() == expected).all(), f"round {round_}: wrong result"
        del runner, out
        gc.collect()
    print(f"{ROUNDS} rounds of a failing trace then a working one: all ran")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""A tensor that does not require grad, changed in place by an op with a differentiable operand, as eager leaves it.

Eagerly, ``c.add_(w)`` on a tensor ``c`` with ``stop_gradient=True`` and ``w`` requiring grad makes ``c`` require
grad at that op, before recording it: the op's gradient node then leads to ``c`` as it was, so the gradient of
``c``'s value before the op reaches ``c`` itself. For a leaf, ``c.grad`` accumulates it (its accumulation node
writes the ``grad`` its autograd metadata holds, which the in-place op's new history leaves in place); for a tensor
made to stop gradients by hand, the gradient goes on through its own gradient node.

The simulation gives such a program an input standing for ``c`` requiring grad, read by that op only
(`sot.opcode_translator.executor.variables.inplace.OldValueVariable`; ``StatementIR.made_differentiable`` lists
them), besides the constant input of ``c`` that earlier reads of ``c`` read. The generated code passes ``c``
itself in both places; `made_differentiable` makes ``c`` require grad for the call, and gives the constant
places a detached alias of it (same memory and inplace version, no gradient). The program's gradient for the
input then reaches ``c`` as eager's op's does (through `gradient_flags.fed`'s view of a leaf), and the write-back of
``c``'s new value (`runtime.write_back_tensor`) gives ``c`` its new history, as the in-place op did.

If the call fails (a user error the program's kernel raises), the original code reruns natively: ``c``'s flag is
put back first, or eager's in-place op would refuse ``c`` as a leaf requiring grad.
"""
from __future__ import annotations

from typing import Any, Callable

import paddle


def call_made_differentiable(run: Callable[[list], Any], inputs: list, indexes: tuple[int, ...]) -> Any:
    """``run(inputs)`` with the tensors of ``inputs[indexes]`` made to require grad (and their other places given
    a detached alias); their flags put back if it raises."""
    inputs = list(inputs)
    changed: list[paddle.Tensor] = []
    for index in indexes:
        tensor = inputs[index]
        for other, value in enumerate(inputs):
            if value is tensor and other not in indexes:
                inputs[other] = tensor.detach()
        if tensor.stop_gradient:
            tensor.stop_gradient = False
            changed.append(tensor)
    try:
        return run(inputs)
    except BaseException:
        for tensor in changed:
            tensor.stop_gradient = True
        raise

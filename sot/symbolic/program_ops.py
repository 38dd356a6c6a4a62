"""Reading a built static program: the ops of a partial program's forward, nested blocks included.

Several decisions are read from what Paddle built rather than from the SIR (what an op writes in place, whether
it draws random numbers, whether Paddle would crash on it): they all walk the same ops."""
from __future__ import annotations

from typing import Any, Callable, Iterator

# The attribute `sir._divide_as_eager` sets on the ``full`` op filling the divisor of ``tensor / number``.
NUMBER_DIVISOR_MARK = "sot_number_divisor"


def forward_ops(program: Any) -> Iterator[Any]:
    """Every op of the forward program ``program`` (a ``PartialProgramLayer``) was built from, those of the
    blocks nested in control-flow ops included. Reads Paddle 3.3's layout: raises on another one (callers
    catch and fall back)."""
    pending = list(program._origin_main_program.global_block().ops)
    while pending:
        op = pending.pop()
        for block in op.blocks():
            pending.extend(block.ops)
        yield op


def buffers_read_per_output_gradient(program: Any) -> list[frozenset[str] | None]:
    """For each forward output of ``program`` (a ``PartialProgramLayer``; in ``fo_names`` order), the names of
    the backward program's forward values (``bx``/``bo``/``bm``/``bp``) whose data the grad ops the gradient of
    that output reaches read (None for an output the backward program takes no gradient of: not known). Eager
    only checks what the nodes a ``backward()`` runs keep (an output whose gradient never reaches the op
    keeping a tensor does not read it), and only the tensors they keep the data of (an operand an op needs the
    shape of only, ``is_no_need_buffer``, is not checked).

    An op is reached when one of its operands (those of its nested blocks included) depends on the output's
    gradient. What a reached op reads counts, and so does what the ops computing its other operands from
    forward values alone read (a decomposed backward may compute from a forward value before the gradient
    arrives; eager's node reads the value when the gradient reaches it). Raises on another Paddle's layout
    (callers catch and keep the coarser plan)."""
    attrs = program.train_program.program_attr
    output_names, gradient_names = list(attrs["fo_names"]), list(attrs["bo_g_names"])
    if len(output_names) != len(gradient_names):
        raise ValueError("output gradients do not match the outputs")
    block = program.train_program.backward_program.global_block()
    kwarg_name = {value.id: name for name, value in block.kwargs().items()}
    gradient_ids = {block.kwargs()[name].id for name in gradient_names if name in block.kwargs()}
    ops = list(block.ops)
    producer = {result.id: op for op in ops for result in op.results()}
    operands = {id(op): list(_operands_with_nested(op)) for op in ops}

    forward_defining = _forward_defining_ops(program)

    def defining_op(value: Any) -> Any:
        """The op computing ``value``: in the backward program, or the forward's for a forward value."""
        return forward_defining.get(kwarg_name[value.id]) if value.id in kwarg_name else value.get_defining_op()

    def own_reads(op: Any) -> set[str]:
        """The forward values ``op`` (nested ops included) reads the data of."""
        return {kwarg_name[value.id] for reader, value in operands[id(op)]
                if value.id in kwarg_name and value.id not in gradient_ids and not reader.is_no_need_buffer(value)
                and not _reads_shape_only(reader, value, defining_op)}

    # The ops depending on any output's gradient (the others compute from forward values only).
    depends_on_gradient: set[int] = set()
    flowing = set(gradient_ids)
    for op in ops:
        if any(value.id in flowing for _, value in operands[id(op)]):
            depends_on_gradient.add(id(op))
            flowing.update(result.id for result in op.results())

    memo: dict[int, frozenset[str]] = {}

    def reads_before_gradient(op: Any) -> frozenset[str]:
        """What ``op`` and the gradient-free ops computing its operands read."""
        if id(op) not in memo:
            found = set(own_reads(op))
            for _, value in operands[id(op)]:
                source = producer.get(value.id)
                if source is not None and id(source) not in depends_on_gradient:
                    found |= reads_before_gradient(source)
            memo[id(op)] = frozenset(found)
        return memo[id(op)]

    per_output: list[frozenset[str] | None] = []
    for gradient_name in gradient_names:
        if gradient_name not in block.kwargs():
            per_output.append(None)  # (no gradient of it in the program: not known, the caller's plan stays)
            continue
        reached = {block.kwargs()[gradient_name].id}
        read: set[str] = set()
        for op in ops:
            if any(value.id in reached for _, value in operands[id(op)]):
                reached.update(result.id for result in op.results())
                read |= reads_before_gradient(op)
        per_output.append(frozenset(read))
    return per_output


def _divisor_is_a_number(divide_grad: Any, defining_op: Callable[[Any], Any]) -> bool:
    """The divisor of ``divide_grad``'s forward division is a Python number (its ``full`` op is marked)."""
    source = defining_op(divide_grad.operand_source(1))
    return source is not None and source.name() == "pd_op.full" and source.has_attr(NUMBER_DIVISOR_MARK)


# Grad ops reading an operand for its shape only (not its data) under a condition, where Paddle's op definition
# says it reads it (``is_no_need_buffer`` is false): op name -> (operand index, condition on the grad op, given
# a function from a value to the op computing it, the forward's for a forward value). Such an operand is read
# only when eager's node keeps it too: eager refuses a backward after an in-place change of what it keeps.
# * ``divide_grad(x, y, out, out_grad)``: Paddle's kernel computes ``dx = out_grad / y`` and
#   ``dy = -out_grad * out / y``, reading ``x``'s dims only (broadcasting). Eager's division by a tensor keeps
#   ``x`` anyway (``DivideGradNode``; ``w / t`` refuses after ``w`` changes), but its division by a Python number
#   is ``div_scale``, whose node keeps nothing; programs divide by a tensor filled with the number instead
#   (eager's rounding, `sir._divide_as_eager`), whose ``full`` is marked to tell it from a user's tensor.
_SHAPE_ONLY_OPERANDS: dict[str, tuple[int, Callable[[Any, Callable[[Any], Any]], bool]]] = {
    "pd_op.divide_grad": (0, _divisor_is_a_number),
}


def _reads_shape_only(reader: Any, value: Any, defining_op: Callable[[Any], Any]) -> bool:
    """``reader`` (a grad op) needs only the shape of its operand ``value`` (`_SHAPE_ONLY_OPERANDS`)."""
    entry = _SHAPE_ONLY_OPERANDS.get(reader.name())
    if entry is None:
        return False
    operand, condition = entry
    return reader.num_operands() > operand and reader.operand_source(operand).id == value.id \
        and condition(reader, defining_op)


def _forward_defining_ops(program: Any) -> dict[str, Any]:
    """The op of the forward program computing each forward value handed to the backward program, by the name
    the backward program knows it by (``builtin.shadow_output``'s ``output_name``; inputs are ``pd_op.data``)."""
    found: dict[str, Any] = {}
    for op in program.train_program.forward_program.global_block().ops:
        if op.name() == "builtin.shadow_output":
            found[op.attrs()["output_name"]] = op.operand_source(0).get_defining_op()
        elif op.name() == "pd_op.data":
            found[op.attrs()["name"]] = op
    return found


def _operands_with_nested(op: Any) -> Iterator[tuple[Any, Any]]:
    """(reading op, value) for each operand of ``op`` and of the ops of its nested blocks (a control-flow op's
    body reads values of the enclosing block directly)."""
    pending = [op]
    while pending:
        current = pending.pop()
        for value in current.operands_source():
            yield current, value
        for nested in current.blocks():
            pending.extend(nested.ops)

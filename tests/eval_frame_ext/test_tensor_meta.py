"""tensor_matches with and without the C++ reader of tensor meta (sot/eval_frame_ext/tensor_meta.py): the
same answer as the Python checks it stands for, for every kind of tensor, type and wanted meta."""
from __future__ import annotations

import itertools

import paddle
import pytest

from sot.eval_frame_ext import dtype_matches, tensor_matches, tensor_meta
from sot.opcode_translator.executor.dynamic_shape import shape_matches

try:
    from sot.eval_frame_ext import _tensor_meta
except ImportError:  # not built: only the attribute reads are tested
    _tensor_meta = None


@pytest.fixture
def reader(tensor_meta_reader):
    """Each test runs with the C++ reader installed (when it can be) and without it."""
    return tensor_meta_reader


def reference(x, cls, shape, dtype, stop_gradient) -> bool:
    """What the guard's Python parts say."""
    shape_ok = shape_matches(x.shape, shape) if isinstance(shape, tuple) else x.shape == shape
    return (type(x) is cls and x.stop_gradient is stop_gradient and dtype_matches(x.dtype, dtype)
            and bool(shape_ok))


class ShapeLies(paddle.Tensor):
    """A subclass whose shape and dtype are not the C++ tensor's."""

    @property
    def shape(self):
        return [5, 5]

    @property
    def dtype(self):
        return paddle.int8


class Plain(paddle.Tensor):
    pass


class Intercepts(paddle.Tensor):
    def __getattribute__(self, name):
        if name == "shape":
            return [9]
        return super().__getattribute__(name)


def _tensors():
    out = {
        "2d": paddle.ones([2, 3]),
        "scalar": paddle.to_tensor(1.5),
        "int64": paddle.arange(6),
        "empty_dim": paddle.ones([0, 3]),
        "ones_dims": paddle.ones([1, 1, 4]),
        "4d": paddle.ones([2, 3, 4, 5]),
        "5d": paddle.ones([2, 1, 3, 2, 2], dtype="float16"),
        "view": paddle.ones([4, 6])[:, 1:3],
        "parameter": paddle.nn.Linear(3, 4).weight,
        "undefined": paddle.Tensor(),
        "sparse": paddle.sparse.sparse_coo_tensor([[0, 1], [1, 0]], [1.0, 2.0], [2, 2]),
    }
    try:  # a distributed tensor (one process, one rank)
        import paddle.distributed as dist

        mesh = dist.ProcessMesh([0], dim_names=["x"])
        out["dist"] = dist.shard_tensor(paddle.ones([4, 6]), mesh, [dist.Replicate()])
    except Exception:  # pragma: no cover - a build without distributed support
        pass
    for name, cls in (("lies", ShapeLies), ("plain_subclass", Plain), ("intercepts", Intercepts)):
        base = paddle.ones([2, 3])
        try:
            out[name] = cls(base)
        except Exception:  # pragma: no cover - how a subclass instance is made differs between versions
            continue
    return out


TENSORS = _tensors()


def _wanted(x):
    shape = list(x.shape)
    shapes = [shape, shape[:-1], shape + [1], [d + 1 for d in shape], [-1] * len(shape),
              tuple(-1 if d >= 2 else d for d in shape), tuple([-1] * len(shape)), (5, 5), [5, 5], [9]]
    dtypes = [tensor_meta.canonical_dtype(x.dtype), x.dtype, paddle.float32, paddle.int64, paddle.int8,
              paddle.float16]
    return shapes, dtypes


@pytest.mark.parametrize("name", sorted(TENSORS))
def test_same_answer_as_the_python_checks(reader, name):
    x = TENSORS[name]
    shapes, dtypes = _wanted(x)
    for cls, shape, dtype, sg in itertools.product([type(x), paddle.Tensor], shapes, dtypes, [True, False]):
        assert tensor_matches(x, cls, shape, dtype, sg) == reference(x, cls, shape, dtype, sg), (shape, dtype, sg)


def test_each_dtype(reader):
    for dtype in ["float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64", "uint8", "bool",
                  "complex64", "complex128"]:
        x = paddle.zeros([3], dtype=dtype)
        for want in ["float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64", "uint8",
                     "bool", "complex64", "complex128"]:
            want_dtype = tensor_meta.canonical_dtype(paddle.zeros([1], dtype=want).dtype)
            assert tensor_matches(x, paddle.Tensor, [3], want_dtype, True) == (dtype == want), (dtype, want)


def test_the_ir_the_guard_was_made_under(reader):
    """A dtype object of one IR never matches a tensor read under the other, as ``x.dtype`` would not."""
    x = paddle.ones([2, 3])
    pir_dtype = tensor_meta.canonical_dtype(x.dtype)
    assert tensor_matches(x, paddle.Tensor, [2, 3], pir_dtype, True)
    paddle.set_flags({"FLAGS_enable_pir_api": False})
    try:
        legacy_dtype = tensor_meta.canonical_dtype(x.dtype)
        assert type(legacy_dtype) is not type(pir_dtype)
        assert x.dtype is not x.dtype  # (a new object at every read: identity cannot be the check)
        assert tensor_matches(x, paddle.Tensor, [2, 3], legacy_dtype, True)
        assert not tensor_matches(x, paddle.Tensor, [2, 3], pir_dtype, True)
    finally:
        paddle.set_flags({"FLAGS_enable_pir_api": True})
    assert not tensor_matches(x, paddle.Tensor, [2, 3], legacy_dtype, True)
    assert tensor_matches(x, paddle.Tensor, [2, 3], pir_dtype, True)


def test_a_patched_getter_is_seen(reader):
    """A property patched onto paddle.Tensor is what the guard reads from then on (the type's version)."""
    x = paddle.ones([2, 3])
    assert tensor_matches(x, paddle.Tensor, [2, 3], paddle.float32, True)
    original = paddle.Tensor.__dict__["shape"]
    paddle.Tensor.shape = property(lambda self: [7])
    try:
        assert not tensor_matches(x, paddle.Tensor, [2, 3], paddle.float32, True)
        assert tensor_matches(x, paddle.Tensor, [7], paddle.float32, True)
    finally:
        paddle.Tensor.shape = original
    assert tensor_matches(x, paddle.Tensor, [2, 3], paddle.float32, True)


def test_subclass_first_then_tensor(reader):
    """Checking a subclass that lies about its meta first changes nothing for plain tensors (and back)."""
    if "lies" not in TENSORS:
        pytest.skip("no subclass instance")
    lies, x = TENSORS["lies"], paddle.ones([2, 3])
    for _ in range(3):
        assert tensor_matches(lies, ShapeLies, [5, 5], paddle.int8, True)
        assert not tensor_matches(lies, ShapeLies, [2, 3], paddle.float32, True)
        assert tensor_matches(x, paddle.Tensor, [2, 3], paddle.float32, True)
        assert not tensor_matches(x, paddle.Tensor, [5, 5], paddle.int8, True)


@pytest.mark.skipif(_tensor_meta is None, reason="the C++ tensor-meta reader is not built")
def test_reader_reads_only_what_it_can():
    assert tensor_meta.install(), tensor_meta.status()
    read = _tensor_meta.read
    assert read(paddle.Tensor, paddle.ones([2, 3])) == (int(paddle.float32), [2, 3])
    assert read(paddle.Tensor, paddle.ones([2, 3, 4, 5]))[1] is None  # (a layout autotuning may permute)
    assert read(paddle.Tensor, TENSORS["sparse"]) == (None, None)
    if "dist" in TENSORS:
        assert read(paddle.Tensor, TENSORS["dist"]) == (None, None)


@pytest.mark.skipif(_tensor_meta is None, reason="the C++ tensor-meta reader is not built")
def test_calibration_refuses_a_wrong_layout_or_reading():
    assert tensor_meta.install(), tensor_meta.status()
    try:
        with pytest.raises(RuntimeError):
            _tensor_meta.calibrate(int, [(paddle.ones([2]), int(paddle.float32), [2])])
        with pytest.raises(RuntimeError):  # a sample that does not read as claimed
            _tensor_meta.calibrate(paddle.Tensor, [(paddle.ones([2]), int(paddle.float32), [3])])
        with pytest.raises(RuntimeError):
            _tensor_meta.calibrate(paddle.Tensor, [(paddle.ones([2]), int(paddle.int64), [2])])
        # refused: the reader tells nothing until calibrated again
        assert _tensor_meta.read(paddle.Tensor, paddle.ones([2])) == (None, None)
        assert tensor_matches(paddle.ones([2]), paddle.Tensor, [2], paddle.float32, True)
    finally:
        tensor_meta.uninstall()
        assert tensor_meta.install(), tensor_meta.status()


def test_commit_mismatch_keeps_the_getters(monkeypatch):
    if _tensor_meta is None:
        pytest.skip("the C++ tensor-meta reader is not built")
    tensor_meta.uninstall()
    monkeypatch.setattr(paddle.version, "commit", "0" * 40)
    try:
        assert not tensor_meta.install()
        assert "commit" in tensor_meta.status()
        assert tensor_matches(paddle.ones([2]), paddle.Tensor, [2], paddle.float32, True)
    finally:
        monkeypatch.undo()
        assert tensor_meta.install(), tensor_meta.status()


def test_fresh_inplace_versions_restart_the_others_at_zero_and_leave_the_given_alone():
    """`tensor_meta.fresh_inplace_versions`: each tensor not given gets a counter of its own at 0; a given one (an
    input handed back by a run) keeps its counter. (The shared counters of program outputs:
    test_inputs_changed_in_place.py.)"""
    if not tensor_meta.install():
        pytest.skip(f"the C++ tensor-meta reader is not installed: {tensor_meta.status()}")
    fresh, given = paddle.ones([3]), paddle.ones([2])
    for tensor in (fresh, fresh, given):
        tensor._bump_inplace_version()
    tensor_meta.fresh_inplace_versions([fresh, given], [given])
    assert (fresh._inplace_version(), given._inplace_version()) == (0, 1)
    fresh._bump_inplace_version()
    assert fresh._inplace_version() == 1

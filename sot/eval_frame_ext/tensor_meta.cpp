/*
 * tensor_meta.cpp -- a tensor's dtype and shape read from its C++ tensor, for the guards.
 *
 * Why: a cache hit checks every input tensor's meta (tensor_guard.c). Through Paddle's Python getters,
 * `x.dtype` converts the C++ dtype to a Python enum object (a pybind11 cast) and `x.shape` builds a vector
 * and a paddle.Size list, only for the guard to compare them with constants and drop them: most of a small
 * graph's guard cost. Here both are read from the `paddle::Tensor` inside the Python object (its
 * `impl_`, a phi::TensorBase, through its virtual dims()/dtype()/layout()), and nothing is allocated.
 *
 * What the reading relies on, and how each is made safe:
 * - The Python object's layout (PyObject_HEAD, then the paddle::Tensor, then the dict and weak-reference
 *   slots) and paddle::Tensor's own (private members, reached with the standard explicit-instantiation
 *   idiom): laid out by the headers of the Paddle this was built against. `PADDLE_COMMIT` names it; the
 *   Python side (tensor_meta.py) installs the reader only under that very Paddle, and `calibrate` checks the
 *   type's sizes and offsets and reads sample tensors of known meta before anything is trusted.
 * - Which tensors: only a defined tensor whose implementation is exactly the dense tensor class (its vtable
 *   pointer is the one of the calibration samples). Undefined tensors, distributed tensors, the
 *   vocabulary/string compat tensors, sparse ones: `read` says it cannot tell, and the guard reads the
 *   Python attributes as before. No C++ exception can come from here (only virtual getters of a dense
 *   tensor are called; none throws).
 * - The shape getter permutes the dims of a 4-D tensor whose layout is the one layout autotuning wants
 *   (paddle.incubate.autotune); that state is not visible from here, so a 4-D tensor in NCHW or NHWC
 *   layout has its shape read by the getter (its dtype still here).
 * - Which Python object `x.dtype` gives depends on FLAGS_enable_pir_api (a DataType or a VarType):
 *   `pir_api` reads the flag itself (exported by Paddle's libcommon), so the guard can tell which kind
 *   the getter would have made.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>
#include <memory>

#include "paddle/phi/api/include/tensor.h"
#include "paddle/phi/core/dense_tensor.h"
#include "paddle/phi/core/tensor_base.h"

extern "C" {
#include "tensor_meta_api.h"
}

namespace paddle_flags {
extern bool FLAGS_enable_pir_api;  // defined (and exported) by Paddle's libcommon
}

namespace {

/* `paddle::Tensor::impl_` is private: a pointer to it is taken in an explicit template instantiation
 * (where access is not checked) and handed out through a friend function. */
struct ImplMember {
    using type = std::shared_ptr<phi::TensorBase> paddle::Tensor::*;
    friend type impl_member(ImplMember);
};

template <typename Tag, typename Tag::type Member>
struct ExposeMember {
    friend typename Tag::type impl_member(Tag) { return Member; }
};

template struct ExposeMember<ImplMember, &paddle::Tensor::impl_>;

/* `phi::DenseTensor::inplace_version_counter_` is protected: reached the same way, to give a tensor a counter
 * of its own (`fresh_inplace_versions`). */
struct CounterMember {
    using type = std::shared_ptr<phi::DenseTensor::InplaceVersion> phi::DenseTensor::*;
    friend type counter_member(CounterMember);
};

template <typename Tag, typename Tag::type Member>
struct ExposeCounter {
    friend typename Tag::type counter_member(Tag) { return Member; }
};

template struct ExposeCounter<CounterMember, &phi::DenseTensor::inplace_version_counter_>;

/* Paddle's eager tensor object (paddle/fluid/pybind/eager.h, not shipped with the wheel): checked against
 * the type's __basicsize__, __dictoffset__ and __weakrefoffset__ by `calibrate`. */
struct TensorObject {
    PyObject_HEAD
    paddle::Tensor tensor;
    PyObject *dict;
    PyObject *weakrefs;
};

/* The vtable pointer of the dense tensor class (from a calibration sample); null until calibrated, when
 * `read` tells nothing. */
const void *dense_vtable = nullptr;

inline phi::TensorBase *tensor_impl(PyObject *x)
{
    const paddle::Tensor &tensor = reinterpret_cast<TensorObject *>(x)->tensor;
    return (tensor.*impl_member(ImplMember{})).get();
}

inline const void *vtable_of(const phi::TensorBase *base)
{
    return *reinterpret_cast<const void *const *>(base);
}

int read_meta(PyObject *x, int *dtype, int *rank, int64_t *dims)
{
    phi::TensorBase *base = tensor_impl(x);
    if (base == nullptr || dense_vtable == nullptr || vtable_of(base) != dense_vtable) {
        return 0;
    }
    *dtype = static_cast<int>(base->dtype());
    const common::DDim &ddim = base->dims();
    int n = ddim.size();
    if (n < 0 || n > SOT_TENSOR_META_MAX_RANK) {
        return SOT_TENSOR_META_DTYPE;
    }
    if (n == 4) {
        common::DataLayout layout = base->layout();
        if (layout == common::DataLayout::NCHW || layout == common::DataLayout::NHWC) {
            return SOT_TENSOR_META_DTYPE;  // (the getter may permute it: see the top of the file)
        }
    }
    *rank = n;
    for (int i = 0; i < n; i++) {
        dims[i] = ddim[i];
    }
    return SOT_TENSOR_META_DTYPE | SOT_TENSOR_META_SHAPE;
}

int pir_api()
{
    return paddle_flags::FLAGS_enable_pir_api ? 1 : 0;
}

const sot_tensor_meta_api api = {SOT_TENSOR_META_API_VERSION, read_meta, pir_api};

PyObject *fail(const char *message)
{
    dense_vtable = nullptr;
    PyErr_SetString(PyExc_RuntimeError, message);
    return nullptr;
}

/* calibrate(tensor_type, samples): samples a list of (tensor, dtype code, dims list), made by the Python
 * getters, dense and of a rank other than 4; the first gives the dense class. Raises RuntimeError (and
 * leaves the reader telling nothing) when the layout or a sample's reading differs. */
PyObject *calibrate(PyObject *module, PyObject *args)
{
    PyObject *type_obj = nullptr;
    PyObject *samples = nullptr;
    if (!PyArg_ParseTuple(args, "O!O!:calibrate", &PyType_Type, &type_obj, &PyList_Type, &samples)) {
        return nullptr;
    }
    dense_vtable = nullptr;
    auto *type = reinterpret_cast<PyTypeObject *>(type_obj);
    if (type->tp_basicsize != static_cast<Py_ssize_t>(sizeof(TensorObject))
        || type->tp_dictoffset != static_cast<Py_ssize_t>(offsetof(TensorObject, dict))
        || type->tp_weaklistoffset != static_cast<Py_ssize_t>(offsetof(TensorObject, weakrefs))) {
        return fail("the tensor type is not laid out as this build of sot's _tensor_meta expects");
    }
    Py_ssize_t count = PyList_GET_SIZE(samples);
    if (count == 0) {
        return fail("no calibration sample");
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *sample = PyList_GET_ITEM(samples, i);
        PyObject *tensor = nullptr;
        PyObject *want_dims = nullptr;
        int want_dtype = 0;
        if (!PyTuple_Check(sample) || !PyArg_ParseTuple(sample, "OiO!", &tensor, &want_dtype, &PyList_Type,
                                                         &want_dims)) {
            dense_vtable = nullptr;
            return nullptr;
        }
        if (!PyObject_TypeCheck(tensor, type)) {
            return fail("a calibration sample is not a tensor");
        }
        phi::TensorBase *base = tensor_impl(tensor);
        if (base == nullptr) {
            return fail("a calibration sample is undefined");
        }
        if (i == 0) {
            dense_vtable = vtable_of(base);
        }
        int dtype = -1, rank = -1;
        int64_t dims[SOT_TENSOR_META_MAX_RANK];
        int got = read_meta(tensor, &dtype, &rank, dims);
        if (got != (SOT_TENSOR_META_DTYPE | SOT_TENSOR_META_SHAPE) || dtype != want_dtype
            || rank != PyList_GET_SIZE(want_dims)) {
            return fail("a calibration sample's dtype or rank reads differently from the C++ tensor");
        }
        for (int k = 0; k < rank; k++) {
            long long want = PyLong_AsLongLong(PyList_GET_ITEM(want_dims, k));
            if (want == -1 && PyErr_Occurred()) {
                dense_vtable = nullptr;
                return nullptr;
            }
            if (dims[k] != want) {
                return fail("a calibration sample's shape reads differently from the C++ tensor");
            }
        }
    }
    Py_RETURN_NONE;
}

/* fresh_inplace_versions(tensor_type, tensors, given): give each dense tensor of the sequence `tensors` that is
 * not one of `given` (the run's inputs, handed back as they are) an inplace-version counter of its own, at 0, as
 * a new eager tensor starts. Only for tensors nothing has saved yet (a snapshot of the old counter would then
 * differ): the outputs of a program run, straight from it. Why: the outputs of Paddle's run_program share the
 * data of the program runner's scope variables, and with it their counter (`DenseTensor::ShareDataWith`),
 * which every later run's output of that variable shares again: an in-place change of one call's output
 * bumped the version of every other call's, and an eager op that saved one of them (a snapshot of its
 * version) refused a backward eager allows. Returns how many tensors got one (0 until calibrated). On every
 * compiled call: the filtering is done here rather than in Python. */
PyObject *fresh_inplace_versions(PyObject *module, PyObject *args)
{
    PyObject *type_obj = nullptr;
    PyObject *tensors = nullptr;
    PyObject *given = nullptr;
    if (!PyArg_ParseTuple(args, "O!OO:fresh_inplace_versions", &PyType_Type, &type_obj, &tensors, &given)) {
        return nullptr;
    }
    if (dense_vtable == nullptr) {
        return PyLong_FromLong(0);
    }
    PyObject *outs = PySequence_Fast(tensors, "fresh_inplace_versions: tensors must be a sequence");
    if (outs == nullptr) {
        return nullptr;
    }
    PyObject *ins = PySequence_Fast(given, "fresh_inplace_versions: given must be a sequence");
    if (ins == nullptr) {
        Py_DECREF(outs);
        return nullptr;
    }
    auto *type = reinterpret_cast<PyTypeObject *>(type_obj);
    Py_ssize_t n_outs = PySequence_Fast_GET_SIZE(outs), n_ins = PySequence_Fast_GET_SIZE(ins);
    PyObject **out_items = PySequence_Fast_ITEMS(outs), **in_items = PySequence_Fast_ITEMS(ins);
    long done = 0;
    for (Py_ssize_t i = 0; i < n_outs; i++) {
        PyObject *x = out_items[i];
        bool handed_back = false;
        for (Py_ssize_t k = 0; k < n_ins && !handed_back; k++) {
            handed_back = in_items[k] == x;
        }
        if (handed_back || !PyObject_TypeCheck(x, type)) {
            continue;
        }
        phi::TensorBase *base = tensor_impl(x);
        if (base == nullptr || vtable_of(base) != dense_vtable) {
            continue;
        }
        auto *dense = static_cast<phi::DenseTensor *>(base);
        dense->*counter_member(CounterMember{}) = std::make_shared<phi::DenseTensor::InplaceVersion>();
        done++;
    }
    Py_DECREF(ins);
    Py_DECREF(outs);
    return PyLong_FromLong(done);
}

/* read(x) -> (dtype code or None, dims list or None): what `read` tells of x, for tests. */
PyObject *py_read(PyObject *module, PyObject *args)
{
    PyObject *type_obj = nullptr;
    PyObject *x = nullptr;
    if (!PyArg_ParseTuple(args, "O!O:read", &PyType_Type, &type_obj, &x)) {
        return nullptr;
    }
    if (!PyObject_TypeCheck(x, reinterpret_cast<PyTypeObject *>(type_obj))) {
        PyErr_SetString(PyExc_TypeError, "read: not an instance of the tensor type");
        return nullptr;
    }
    int dtype = 0, rank = 0;
    int64_t dims[SOT_TENSOR_META_MAX_RANK];
    int got = read_meta(x, &dtype, &rank, dims);
    PyObject *shape = Py_None;
    Py_INCREF(shape);
    if (got & SOT_TENSOR_META_SHAPE) {
        Py_DECREF(shape);
        shape = PyList_New(rank);
        if (shape == nullptr) {
            return nullptr;
        }
        for (int k = 0; k < rank; k++) {
            PyObject *dim = PyLong_FromLongLong(dims[k]);
            if (dim == nullptr) {
                Py_DECREF(shape);
                return nullptr;
            }
            PyList_SET_ITEM(shape, k, dim);
        }
    }
    if (got & SOT_TENSOR_META_DTYPE) {
        return Py_BuildValue("(iN)", dtype, shape);
    }
    return Py_BuildValue("(ON)", Py_None, shape);
}

PyMethodDef methods[] = {
    {"calibrate", calibrate, METH_VARARGS,
     "calibrate(tensor_type, samples): check the layout and the readings of (tensor, dtype, dims) samples "
     "before the reader tells anything (RuntimeError when they differ)."},
    {"fresh_inplace_versions", fresh_inplace_versions, METH_VARARGS,
     "fresh_inplace_versions(tensor_type, tensors, given) -> count: give each dense tensor not in given an "
     "inplace-version counter of its own, at 0 (see tensor_meta.cpp)."},
    {"read", py_read, METH_VARARGS,
     "read(tensor_type, x) -> (dtype code or None, dims or None): what the reader tells of x (for tests)."},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "sot.eval_frame_ext._tensor_meta",
    "A tensor's dtype and shape read from its C++ tensor, for sot's guards (see tensor_meta.cpp).",
    -1,
    methods,
};

}  // namespace

PyMODINIT_FUNC PyInit__tensor_meta(void)
{
    PyObject *module = PyModule_Create(&module_def);
    if (module == nullptr) {
        return nullptr;
    }
    PyObject *capsule = PyCapsule_New(const_cast<sot_tensor_meta_api *>(&api), SOT_TENSOR_META_CAPSULE, nullptr);
    if (capsule == nullptr || PyModule_AddObject(module, "api", capsule) < 0) {
        Py_XDECREF(capsule);
        Py_DECREF(module);
        return nullptr;
    }
    if (PyModule_AddStringConstant(module, "PADDLE_COMMIT", SOT_PADDLE_COMMIT) < 0) {
        Py_DECREF(module);
        return nullptr;
    }
    return module;
}

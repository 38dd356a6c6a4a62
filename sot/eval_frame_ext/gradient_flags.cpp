/*
 * gradient_flags.cpp -- eager's autograd flags on the gradients a compiled program hands over, in C++.
 *
 * Why (sot/symbolic/gradient_flags.py says it in full): a compiled program's backward hands its gradients
 * over without autograd metadata; stored as a parameter's `grad` (or a retained one) they read
 * `stop_gradient=True` where eager's read False. Two things give them eager's flag, and both were Python:
 * - a gradient hook on each parameter, run by the parameter's accumulation node before the gradient is
 *   accumulated: a Python hook costs Paddle's PyTensorHook (GIL, a Python tensor made and cast back, the
 *   call) per parameter per backward pass. Here the hook is a C++ function registered as Paddle's own
 *   CppTensorHook (`egr_utils_api::RegisterGradientHookForTensor`, the way `retain_grads` registers its
 *   hook): no Python at all in the backward pass.
 * - an eager view (an extra op and grad node) of every non-leaf input of a call, so that a retained gradient
 *   or a gradient hook on that input sees a gradient made by an eager node. Paddle keeps no Python-readable
 *   note of `retain_grads()`; its AutogradMeta does (`retain_grads_`), and the hooks of the node that made
 *   the input are in its `gradient_hooks_` (run in id order). Here `fed` reads them: the view is made only
 *   for an input whose gradient something observes (a retain hook, any hook but sot's own version check)
 *   before the C++ flag hook would run; any other non-leaf input gets the flag hook on its slot (once),
 *   which flags the gradient before a hook or a `retain_grads()` registered after the call sees it.
 * `fed` also does, for every input that requires grad, what the Python loop did (a view of a leaf that is
 * not a parameter, the hook of a parameter), reading the flags from the C++ tensor.
 *
 * What this relies on. Paddle's wheel ships no headers of its eager autograd (paddle/fluid/eager), so its
 * classes are not included: the exported functions used are declared here with their signatures (the
 * linker checks the names), and the few members read are reached at the offsets this Paddle build lays
 * them at (read from its disassembly: `tensor_properties_set_stop_gradient` writes `stop_gradient_` at
 * 0x38, `RetainGradForTensor` reads `retain_grads_` at 0x3d, `RegisterGradientHookForTensor` reads the
 * slot and rank at 0x28 and 0x30, `GradNodeBase::RegisterGradientHook` inserts into `gradient_hooks_` at
 * 0x2f8; `PyTensorHook` holds its Python callable at 8, `CppTensorHook` its std::function at 8). Made
 * safe as tensor_meta.cpp is: the module is used only with the Paddle build it was compiled against
 * (`PADDLE_COMMIT`), `calibrate` checks the tensor type's layout, and the Python side checks every reading
 * on sample tensors (a retained one, a hooked one, a parameter) before it uses the module. Hooks are told
 * apart by the name of their dynamic type (RTTI: `typeid` of the TensorHook object).
 *
 * Links Paddle's libpaddle.so (paddle/base: the eager functions) and libphi_core.so (paddle::Tensor's).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <tuple>
#include <typeinfo>

#include "paddle/phi/api/include/tensor.h"

/* Paddle's eager autograd, as exported by libpaddle.so (declarations with the signatures of its headers). */
namespace egr {
class AutogradMeta;
class GradNodeBase;
class TensorHook;

class EagerUtils {
 public:
    static AutogradMeta *autograd_meta(paddle::Tensor *target);  // made when the tensor has none
    static AutogradMeta *nullable_autograd_meta(const paddle::Tensor &target);
    static bool IsLeafTensor(const paddle::Tensor &target);
};

namespace egr_utils_api {
int64_t RegisterGradientHookForTensor(const paddle::Tensor &tensor,
                                      const std::function<paddle::Tensor(const paddle::Tensor &)> &hook);
}  // namespace egr_utils_api
}  // namespace egr

namespace {

/* egr::AutogradMeta's members up to the flags (its layout in this Paddle build; see the top of the file). */
struct AutogradMetaLayout {
    void *vptr;
    std::shared_ptr<paddle::Tensor> grad;
    std::shared_ptr<egr::GradNodeBase> grad_node;
    std::size_t out_slot_id;
    std::size_t out_rank;
    int stop_gradient;  // -1: never set (reads True), 0: False, 1: True
    bool persistable;
    bool retain_grads;
};

/* egr::GradNodeBase::gradient_hooks_: hook id -> (slot, rank, hook), run in id order. */
using HookMap = std::map<int64_t, std::tuple<std::size_t, std::size_t, std::shared_ptr<egr::TensorHook>>>;
constexpr std::size_t kGradientHooksOffset = 0x2f8;

/* The hooks' classes (their std::type_info names) and where each keeps what it calls. */
constexpr const char *kCppTensorHookName = "N3egr13CppTensorHookE";
constexpr const char *kPyTensorHookName = "N6paddle6pybind12PyTensorHookE";
constexpr std::size_t kHookPayloadOffset = 8;  // CppTensorHook::fn_, PyTensorHook::py_func_

using HookFunction = std::function<paddle::Tensor(const paddle::Tensor &)>;
using HookPointer = paddle::Tensor (*)(const paddle::Tensor &);

/* Paddle's eager tensor object (paddle/fluid/pybind/eager.h): checked by `calibrate` as tensor_meta.cpp's. */
struct TensorObject {
    PyObject_HEAD
    paddle::Tensor tensor;
    PyObject *dict;
    PyObject *weakrefs;
};

PyTypeObject *tensor_type = nullptr;     // paddle.Tensor, once calibrated
PyTypeObject *parameter_type = nullptr;  // EagerParamBase
PyObject *internal_hook_types = nullptr;  // a tuple of types: Python hooks of these exact types see no flag

/* The hook: the gradient about to be accumulated or seen by the next hooks, flagged as eager's are. A
 * gradient without metadata (the program's) gets metadata reading stop_gradient=False, as an eager grad
 * node gives its outputs; one with metadata is left as it is (an eager gradient reads False already; a
 * tensor an earlier hook returned instead, detached, reads True as eager's would). */
paddle::Tensor with_eager_flag(const paddle::Tensor &grad)
{
    paddle::Tensor flagged(grad);
    if (!flagged.defined() || egr::EagerUtils::nullable_autograd_meta(flagged) != nullptr) {
        return flagged;
    }
    auto *meta = reinterpret_cast<AutogradMetaLayout *>(egr::EagerUtils::autograd_meta(&flagged));
    meta->stop_gradient = 0;
    return flagged;
}

const HookFunction &flag_hook()
{
    static const HookFunction hook(&with_eager_flag);
    return hook;
}

inline paddle::Tensor &tensor_of(PyObject *object)
{
    return reinterpret_cast<TensorObject *>(object)->tensor;
}

inline AutogradMetaLayout *meta_of(const paddle::Tensor &tensor)
{
    return reinterpret_cast<AutogradMetaLayout *>(egr::EagerUtils::nullable_autograd_meta(tensor));
}

inline const HookMap &hooks_of(const egr::GradNodeBase *node)
{
    return *reinterpret_cast<const HookMap *>(reinterpret_cast<const char *>(node) + kGradientHooksOffset);
}

enum class HookKind { kFlag, kInternal, kObserving };

HookKind kind_of(const egr::TensorHook *hook)
{
    if (hook == nullptr) {
        return HookKind::kInternal;
    }
    const auto *object = reinterpret_cast<const char *>(hook);
    const auto *type = (*reinterpret_cast<const std::type_info *const *const *>(object))[-1];
    const char *name = type->name();
    if (std::strcmp(name, kCppTensorHookName) == 0) {
        const auto *function = reinterpret_cast<const HookFunction *>(object + kHookPayloadOffset);
        const HookPointer *target = function->target<HookPointer>();
        return target != nullptr && *target == &with_eager_flag ? HookKind::kFlag : HookKind::kObserving;
    }
    if (std::strcmp(name, kPyTensorHookName) == 0 && internal_hook_types != nullptr) {
        PyObject *callable = *reinterpret_cast<PyObject *const *>(object + kHookPayloadOffset);
        for (Py_ssize_t i = 0; callable != nullptr && i < PyTuple_GET_SIZE(internal_hook_types); i++) {
            if (Py_TYPE(callable) == reinterpret_cast<PyTypeObject *>(PyTuple_GET_ITEM(internal_hook_types, i))) {
                return HookKind::kInternal;
            }
        }
    }
    return HookKind::kObserving;
}

/* How the hooks at the tensor's slot of its grad node stand (they run in id order): whether one observes
 * the gradient (a retain hook, a user's hook), whether one does before the flag hook (or without it: the
 * input then needs a view), whether the flag hook is there. */
struct SlotHooks {
    bool observed = false;
    bool observed_unflagged = false;
    bool flagged = false;
};

SlotHooks slot_hooks(const AutogradMetaLayout *meta)
{
    SlotHooks found;
    const egr::GradNodeBase *node = meta->grad_node.get();
    if (node == nullptr) {
        return found;
    }
    for (const auto &entry : hooks_of(node)) {
        const auto &[slot, rank, hook] = entry.second;
        if (slot != meta->out_slot_id || rank != meta->out_rank) {
            continue;
        }
        switch (kind_of(hook.get())) {
            case HookKind::kFlag: found.flagged = true; break;
            case HookKind::kObserving:
                found.observed = true;
                found.observed_unflagged |= !found.flagged;
                break;
            case HookKind::kInternal: break;
        }
    }
    return found;
}

/* Registers the flag hook at the tensor's slot unless it is there (its id in `*hook_id`, else -1); false
 * when the tensor has no grad node. */
bool ensure_flag_hook(const paddle::Tensor &tensor, const AutogradMetaLayout *meta, int64_t *hook_id = nullptr)
{
    if (meta->grad_node == nullptr) {
        return false;
    }
    int64_t id = -1;
    if (!slot_hooks(meta).flagged) {
        id = egr::egr_utils_api::RegisterGradientHookForTensor(tensor, flag_hook());
    }
    if (hook_id != nullptr) {
        *hook_id = id;
    }
    return true;
}

PyObject *not_calibrated()
{
    PyErr_SetString(PyExc_RuntimeError, "sot._gradient_flags: not calibrated");
    return nullptr;
}

/* The tensor of a Python object, or null with TypeError. */
paddle::Tensor *tensor_arg(PyObject *object)
{
    if (tensor_type == nullptr) {
        not_calibrated();
        return nullptr;
    }
    if (!PyObject_TypeCheck(object, tensor_type)) {
        PyErr_SetString(PyExc_TypeError, "sot._gradient_flags: a paddle.Tensor is expected");
        return nullptr;
    }
    return &tensor_of(object);
}

/* A parameter's accumulation node gets the flag hook (once): 1 (registered now, its id in `*hook_id`, or
 * there already, -1), 0 (no node), -1 (a Python error). The stop_gradient setter makes the node of a tensor
 * that has none, as `_register_grad_hook` would. */
int hook_parameter(PyObject *object, const AutogradMetaLayout *meta, int64_t *hook_id = nullptr)
{
    paddle::Tensor &tensor = tensor_of(object);
    if (meta == nullptr || meta->grad_node == nullptr) {
        PyObject *flag = PyObject_GetAttrString(object, "stop_gradient");
        if (flag == nullptr) {
            return -1;
        }
        int set = PyObject_SetAttrString(object, "stop_gradient", flag);  // (makes the node)
        Py_DECREF(flag);
        if (set < 0) {
            return -1;
        }
        meta = meta_of(tensor);
        if (meta == nullptr) {
            return 0;
        }
    }
    return ensure_flag_hook(tensor, meta, hook_id) ? 1 : 0;
}

/* keep_eager_flags(parameter) -> int | None: the id of the flag hook registered on the leaf's accumulation
 * node now, -1 when it was there already, None for a tensor that is no leaf (or has no node). */
PyObject *py_keep_eager_flags(PyObject *, PyObject *object)
{
    paddle::Tensor *tensor = tensor_arg(object);
    if (tensor == nullptr) {
        return nullptr;
    }
    try {
        if (!egr::EagerUtils::IsLeafTensor(*tensor)) {
            Py_RETURN_NONE;
        }
        int64_t hook_id = -1;
        int hooked = hook_parameter(object, meta_of(*tensor), &hook_id);
        if (hooked < 0) {
            return nullptr;
        }
        if (hooked == 0) {
            Py_RETURN_NONE;
        }
        return PyLong_FromLongLong(hook_id);
    } catch (const std::exception &error) {
        PyErr_Format(PyExc_RuntimeError, "sot._gradient_flags: %s", error.what());
        return nullptr;
    }
}

/* The view of a tensor an input is fed as: reshape(x, x.shape). New reference, or null. */
PyObject *view_of(PyObject *reshape, PyObject *object)
{
    PyObject *shape = PyObject_GetAttrString(object, "shape");
    if (shape == nullptr) {
        return nullptr;
    }
    PyObject *view = PyObject_CallFunctionObjArgs(reshape, object, shape, nullptr);
    Py_DECREF(shape);
    return view;
}

/* fed(inputs: list, grad_inputs: list of int, non_leaves: bool, reshape) -> list: what
 * sot.symbolic.gradient_flags.fed says; `inputs` itself when nothing is replaced. */
PyObject *py_fed(PyObject *, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4 || !PyList_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "fed(inputs: list, grad_inputs, non_leaves, reshape)");
        return nullptr;
    }
    if (tensor_type == nullptr) {
        return not_calibrated();
    }
    PyObject *inputs = args[0];
    int non_leaves = PyObject_IsTrue(args[2]);
    if (non_leaves < 0) {
        return nullptr;
    }
    PyObject *indexes = PySequence_Fast(args[1], "fed: grad_inputs must be a sequence");
    if (indexes == nullptr) {
        return nullptr;
    }
    PyObject *result = nullptr;  // a copy of inputs, made at the first replacement
    Py_ssize_t count = PySequence_Fast_GET_SIZE(indexes);
    PyObject **items = PySequence_Fast_ITEMS(indexes);
    try {
        for (Py_ssize_t k = 0; k < count; k++) {
            Py_ssize_t index = PyLong_AsSsize_t(items[k]);
            if (index == -1 && PyErr_Occurred()) {
                goto fail;
            }
            if (index < 0 || index >= PyList_GET_SIZE(inputs)) {
                PyErr_SetString(PyExc_IndexError, "fed: a grad input index is out of range");
                goto fail;
            }
            PyObject *object = PyList_GET_ITEM(inputs, index);
            if (!PyObject_TypeCheck(object, tensor_type)) {
                continue;
            }
            const paddle::Tensor &tensor = tensor_of(object);
            AutogradMetaLayout *meta = meta_of(tensor);
            if (meta == nullptr || meta->stop_gradient != 0) {
                continue;  // (stop_gradient reads True)
            }
            bool view;
            if (egr::EagerUtils::IsLeafTensor(tensor)) {
                if (PyObject_TypeCheck(object, parameter_type)) {
                    if (hook_parameter(object, meta) < 0) {
                        goto fail;
                    }
                    continue;
                }
                view = true;
            } else {
                if (!non_leaves) {
                    continue;
                }
                SlotHooks hooks = slot_hooks(meta);
                view = hooks.observed_unflagged;
                if (!view) {
                    if (!hooks.flagged) {
                        egr::egr_utils_api::RegisterGradientHookForTensor(tensor, flag_hook());
                    }
                    continue;
                }
            }
            if (result == nullptr) {
                result = PyList_GetSlice(inputs, 0, PyList_GET_SIZE(inputs));
                if (result == nullptr) {
                    goto fail;
                }
            }
            PyObject *fed_tensor = view_of(args[3], object);
            if (fed_tensor == nullptr) {
                goto fail;
            }
            PyList_SetItem(result, index, fed_tensor);  // (steals the reference, releases the old item)
        }
    } catch (const std::exception &error) {
        PyErr_Format(PyExc_RuntimeError, "sot._gradient_flags: %s", error.what());
        goto fail;
    }
    Py_DECREF(indexes);
    if (result == nullptr) {
        Py_INCREF(inputs);
        return inputs;
    }
    return result;
fail:
    Py_DECREF(indexes);
    Py_XDECREF(result);
    return nullptr;
}

/* gradient_observed(tensor) -> bool: a non-leaf's gradient is retained or hooked by something other than
 * sot's version check and the flag hook (False for a leaf and a tensor without metadata). */
PyObject *py_gradient_observed(PyObject *, PyObject *object)
{
    paddle::Tensor *tensor = tensor_arg(object);
    if (tensor == nullptr) {
        return nullptr;
    }
    AutogradMetaLayout *meta = meta_of(*tensor);
    if (meta == nullptr || egr::EagerUtils::IsLeafTensor(*tensor)) {
        Py_RETURN_FALSE;
    }
    return PyBool_FromLong(meta->retain_grads || slot_hooks(meta).observed);
}

/* slot_hooks(tensor) -> (retained, python callables, flag hooks, other C++ hooks): what is registered at
 * the tensor's slot of its grad node, for the calibration and the tests. */
PyObject *py_slot_hooks(PyObject *, PyObject *object)
{
    paddle::Tensor *tensor = tensor_arg(object);
    if (tensor == nullptr) {
        return nullptr;
    }
    AutogradMetaLayout *meta = meta_of(*tensor);
    PyObject *callables = PyList_New(0);
    if (callables == nullptr) {
        return nullptr;
    }
    long flags = 0, others = 0;
    if (meta != nullptr && meta->grad_node != nullptr) {
        for (const auto &entry : hooks_of(meta->grad_node.get())) {
            const auto &[slot, rank, hook] = entry.second;
            if (slot != meta->out_slot_id || rank != meta->out_rank || hook == nullptr) {
                continue;
            }
            const auto *hook_object = reinterpret_cast<const char *>(hook.get());
            const char *name = (*reinterpret_cast<const std::type_info *const *const *>(hook_object))[-1]->name();
            if (std::strcmp(name, kPyTensorHookName) == 0) {
                PyObject *callable = *reinterpret_cast<PyObject *const *>(hook_object + kHookPayloadOffset);
                if (PyList_Append(callables, callable) < 0) {
                    Py_DECREF(callables);
                    return nullptr;
                }
            } else if (kind_of(hook.get()) == HookKind::kFlag) {
                flags++;
            } else {
                others++;
            }
        }
    }
    return Py_BuildValue("(ONll)", meta != nullptr && meta->retain_grads ? Py_True : Py_False, callables,
                         flags, others);
}

/* stop_gradient_code(tensor) -> int | None: the flag as the C++ tensor keeps it (-1 unset, 0, 1); None
 * without metadata. For the calibration. */
PyObject *py_stop_gradient_code(PyObject *, PyObject *object)
{
    paddle::Tensor *tensor = tensor_arg(object);
    if (tensor == nullptr) {
        return nullptr;
    }
    AutogradMetaLayout *meta = meta_of(*tensor);
    if (meta == nullptr) {
        Py_RETURN_NONE;
    }
    return PyLong_FromLong(meta->stop_gradient);
}

/* calibrate(tensor_type, parameter_type, internal_hook_types: tuple of types): checks the tensor type's
 * layout and keeps the types. Raises RuntimeError (the module then tells nothing) when it differs. */
PyObject *py_calibrate(PyObject *, PyObject *args)
{
    PyObject *tensor = nullptr, *parameter = nullptr, *internal = nullptr;
    if (!PyArg_ParseTuple(args, "O!O!O!:calibrate", &PyType_Type, &tensor, &PyType_Type, &parameter,
                          &PyTuple_Type, &internal)) {
        return nullptr;
    }
    tensor_type = nullptr;
    auto *type = reinterpret_cast<PyTypeObject *>(tensor);
    if (type->tp_basicsize != static_cast<Py_ssize_t>(sizeof(TensorObject))
        || type->tp_dictoffset != static_cast<Py_ssize_t>(offsetof(TensorObject, dict))
        || type->tp_weaklistoffset != static_cast<Py_ssize_t>(offsetof(TensorObject, weakrefs))) {
        PyErr_SetString(PyExc_RuntimeError, "the tensor type is not laid out as sot's _gradient_flags expects");
        return nullptr;
    }
    if (!PyType_IsSubtype(reinterpret_cast<PyTypeObject *>(parameter), type)) {
        PyErr_SetString(PyExc_RuntimeError, "the parameter type is no tensor type");
        return nullptr;
    }
    Py_INCREF(tensor);
    Py_INCREF(parameter);
    Py_INCREF(internal);
    Py_XSETREF(internal_hook_types, internal);
    parameter_type = reinterpret_cast<PyTypeObject *>(parameter);
    tensor_type = type;
    Py_RETURN_NONE;
}

PyObject *py_uncalibrate(PyObject *, PyObject *)
{
    tensor_type = nullptr;
    Py_RETURN_NONE;
}

PyMethodDef methods[] = {
    {"calibrate", py_calibrate, METH_VARARGS,
     "calibrate(tensor_type, parameter_type, internal_hook_types): check the tensor layout, keep the types."},
    {"uncalibrate", py_uncalibrate, METH_NOARGS, "uncalibrate(): tell nothing until calibrated again."},
    {"fed", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(py_fed)), METH_FASTCALL,
     "fed(inputs, grad_inputs, non_leaves, reshape) -> list: see sot.symbolic.gradient_flags.fed."},
    {"keep_eager_flags", py_keep_eager_flags, METH_O,
     "keep_eager_flags(parameter) -> hook id | -1 | None: give a leaf's accumulation node the flag hook."},
    {"gradient_observed", py_gradient_observed, METH_O,
     "gradient_observed(tensor) -> bool: a non-leaf's gradient is retained or seen by a hook."},
    {"slot_hooks", py_slot_hooks, METH_O,
     "slot_hooks(tensor) -> (retained, python hooks, flag hooks, other C++ hooks) at the tensor's slot."},
    {"stop_gradient_code", py_stop_gradient_code, METH_O,
     "stop_gradient_code(tensor) -> -1 | 0 | 1 | None: the flag as the C++ tensor keeps it."},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "sot.eval_frame_ext._gradient_flags",
    "Eager's autograd flags on the gradients of compiled programs, in C++ (see gradient_flags.cpp).",
    -1,
    methods,
};

}  // namespace

PyMODINIT_FUNC PyInit__gradient_flags(void)
{
    PyObject *module = PyModule_Create(&module_def);
    if (module == nullptr) {
        return nullptr;
    }
    if (PyModule_AddStringConstant(module, "PADDLE_COMMIT", SOT_PADDLE_COMMIT) < 0) {
        Py_DECREF(module);
        return nullptr;
    }
    return module;
}

/*
 * autograd_errors.cpp -- a gradient hook whose failure is Paddle's own error.
 *
 * Why: eager autograd refuses a backward that reads a tensor changed in place
 * since the forward. Its grad nodes keep saved tensors in TensorWrappers, whose
 * version check throws a C++ PermissionDenied error, raised by backward() as a
 * RuntimeError. A compiled program's grad node keeps plain references, so sot
 * checks the versions in a gradient hook on the program's outputs
 * (sot/symbolic/compile.py). But Paddle calls a Python hook through the C API
 * and wraps whatever it raises in an External error: an OSError in Python. No
 * Python exception type passes through that wrapper; a C++ exception does (the
 * hook caller has no handler: it propagates through the grad node to
 * backward()'s own handler, which maps Paddle's error codes to Python types,
 * PermissionDenied to RuntimeError, like the TensorWrapper check's).
 *
 * So the hook handed to Paddle is a `PermissionDeniedHook`: a C object whose
 * vectorcall runs the Python check to completion, then, when the check reports a
 * violation, throws Paddle's `common::enforce::EnforceNotMet` with the
 * PermissionDenied code. The only frames between the throw and Paddle's caller
 * are CPython's C call helpers (PyObject_CallFunctionObjArgs ->
 * object_vacall -> our vectorcall), which hold no resources on that path; the
 * exception crosses them with their DWARF unwind tables. The module refuses to
 * import where those tables are missing (an unwinder without them would abort
 * the process): sot then keeps the Python hook (the same message, as OSError).
 *
 * A throw leaks the Python object of the gradient the caller passed (Paddle
 * releases its reference after the call returns): one gradient per refused
 * backward, which is a user error.
 *
 * Only Paddle's autograd engine may call the hook: a throw into Python code
 * (the interpreter's frames) would not be caught cleanly. The objects are made
 * and registered by compile.py only, never handed to user code.
 *
 * Built only when Paddle's C++ headers are found (setup.py); links Paddle's
 * libcommon, where EnforceNotMet lives. The exception object is laid out by
 * those headers: `PADDLE_COMMIT` names the Paddle build they came from, and
 * sot uses the hook with that build only.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstddef>
#include <string>

#include <unwind.h>

#include "paddle/common/enforce.h"

namespace {

/* libgcc's lookup of the unwind table entry covering an address (not in
 * <unwind.h>; exported by libgcc_s and by LLVM's libunwind). */
struct DwarfEhBases {
    void *tbase;
    void *dbase;
    void *func;
};
extern "C" const void *_Unwind_Find_FDE(void *pc, DwarfEhBases *bases);

/* Whether CPython's call helpers between Paddle and the hook can be unwound
 * through (probed on exported functions of the same source file as the static
 * object_vacall: a build with unwind tables has them for every function). */
bool interpreter_has_unwind_tables()
{
    void *helpers[] = {
        reinterpret_cast<void *>(&PyObject_CallFunctionObjArgs),
        reinterpret_cast<void *>(&PyObject_CallObject),
        reinterpret_cast<void *>(&PyObject_Vectorcall),
    };
    for (void *helper : helpers) {
        DwarfEhBases bases;
        if (_Unwind_Find_FDE(static_cast<char *>(helper) + 1, &bases) == nullptr) {
            return false;
        }
    }
    return true;
}

struct PermissionDeniedHook {
    PyObject_HEAD
    PyObject *check;  /* check(grad) -> None | (summary: str, file: str, line: int) */
    vectorcallfunc vectorcall;
};

/* Runs `check(grad)`; None: the gradient passes unchanged. A (summary, file,
 * line) tuple: throws Paddle's PermissionDenied error, whose message is
 * "(PermissionDenied) <summary> (at <file>:<line>)". */
PyObject *hook_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PyObject *verdict = PyObject_Vectorcall(reinterpret_cast<PermissionDeniedHook *>(self)->check, args,
                                            nargsf, kwnames);
    if (verdict == nullptr || verdict == Py_None) {
        return verdict;
    }
    const char *summary = nullptr;
    const char *file = nullptr;
    int line = 0;
    if (!PyTuple_Check(verdict)
        || !PyArg_ParseTuple(verdict, "ssi;a PermissionDeniedHook check returns None or (summary, file, line)",
                             &summary, &file, &line)) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "a PermissionDeniedHook check returns None or (summary, file, line)");
        }
        Py_DECREF(verdict);
        return nullptr;
    }
    /* (copied before the tuple that owns the buffers is released) */
    const std::string summary_text(summary), file_text(file);
    Py_DECREF(verdict);
    throw ::common::enforce::EnforceNotMet(::common::errors::PermissionDenied(summary_text.c_str()),
                                           file_text.c_str(), line);
}

void hook_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    Py_CLEAR(reinterpret_cast<PermissionDeniedHook *>(self)->check);
    PyObject_GC_Del(self);
}

int hook_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(reinterpret_cast<PermissionDeniedHook *>(self)->check);
    return 0;
}

int hook_clear(PyObject *self)
{
    Py_CLEAR(reinterpret_cast<PermissionDeniedHook *>(self)->check);
    return 0;
}

PyObject *hook_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *check = nullptr;
    static const char *keywords[] = {"check", nullptr};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O:PermissionDeniedHook", const_cast<char **>(keywords),
                                     &check)) {
        return nullptr;
    }
    if (!PyCallable_Check(check)) {
        PyErr_SetString(PyExc_TypeError, "PermissionDeniedHook: check must be callable");
        return nullptr;
    }
    auto *hook = PyObject_GC_New(PermissionDeniedHook, type);
    if (hook == nullptr) {
        return nullptr;
    }
    Py_INCREF(check);
    hook->check = check;
    hook->vectorcall = hook_vectorcall;
    PyObject_GC_Track(hook);
    return reinterpret_cast<PyObject *>(hook);
}

PyTypeObject PermissionDeniedHook_Type = {PyVarObject_HEAD_INIT(nullptr, 0)};

PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "sot.eval_frame_ext._autograd_errors",
    "Gradient hooks that fail with Paddle's own PermissionDenied error (see autograd_errors.cpp).",
    -1,
};

}  // namespace

PyMODINIT_FUNC PyInit__autograd_errors(void)
{
    if (!interpreter_has_unwind_tables()) {
        PyErr_SetString(PyExc_ImportError,
                        "sot._autograd_errors: this Python has no unwind tables for its call helpers");
        return nullptr;
    }
    PyTypeObject &type = PermissionDeniedHook_Type;
    type.tp_name = "sot.eval_frame_ext._autograd_errors.PermissionDeniedHook";
    type.tp_doc = "PermissionDeniedHook(check): a gradient hook for Paddle's autograd engine only. "
                  "check(grad) returns None (pass) or (summary, file, line): Paddle's backward() then "
                  "raises its own PermissionDenied error (a RuntimeError) with that message.";
    type.tp_basicsize = sizeof(PermissionDeniedHook);
    type.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL;
    type.tp_vectorcall_offset = offsetof(PermissionDeniedHook, vectorcall);
    type.tp_call = PyVectorcall_Call;
    type.tp_new = hook_new;
    type.tp_dealloc = hook_dealloc;
    type.tp_traverse = hook_traverse;
    type.tp_clear = hook_clear;
    if (PyType_Ready(&type) < 0) {
        return nullptr;
    }
    PyObject *module = PyModule_Create(&module_def);
    if (module == nullptr) {
        return nullptr;
    }
    Py_INCREF(&type);
    if (PyModule_AddObject(module, "PermissionDeniedHook", reinterpret_cast<PyObject *>(&type)) < 0) {
        Py_DECREF(&type);
        Py_DECREF(module);
        return nullptr;
    }
    if (PyModule_AddStringConstant(module, "PADDLE_COMMIT", SOT_PADDLE_COMMIT) < 0) {
        Py_DECREF(module);
        return nullptr;
    }
    return module;
}

/*
 * tensor_guard.c -- a tensor's meta guard in one C call (tensor_matches).
 *
 * `type(x) is cls and x.stop_gradient is sg and dtype_matches(x.dtype, dtype) and x.shape == shape` (or the
 * shape matches a pattern with -1 for a dynamic dimension): the check of every input tensor on every cache
 * hit. Paddle's getters of dtype and shape make Python objects only to be compared and dropped; when the
 * optional C++ extension _tensor_meta is installed (tensor_meta.py: only under the Paddle it was built
 * against, after a calibration), dtype and shape are read from the C++ tensor instead, for the tensors it
 * can read exactly like the getters (see tensor_meta.cpp); any other tensor, and any type whose `dtype` or
 * `shape` is not paddle.Tensor's own getter, is read through the attributes, as the Python check does.
 */
#include "frame_compat.h"  /* (includes Python.h; sot_type_version_valid) */

#include <string.h>

#include "guard_program.h"
#include "tensor_meta_api.h"

static PyObject *str_shape = NULL;
static PyObject *str_dtype = NULL;
static PyObject *str_stop_gradient = NULL;

/* 1 if `shape` (a list, e.g. paddle.Size) matches `want`: a list is
 * compared item by item; a tuple is a pattern where -1 stands for any size
 * but 0 and 1 (a dynamic dimension). 0 if not, -1 on error. */
static int
shape_matches(PyObject *shape, PyObject *want)
{
    if (!PyList_Check(shape)) {
        return PyObject_RichCompareBool(shape, want, Py_EQ);
    }
    int pattern = PyTuple_Check(want);
    if (!pattern && !PyList_Check(want)) {
        return PyObject_RichCompareBool(shape, want, Py_EQ);
    }
    Py_ssize_t n = PyList_GET_SIZE(shape);
    if (n != PySequence_Fast_GET_SIZE(want)) {
        return 0;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *have = PyList_GET_ITEM(shape, i);
        PyObject *expect = PySequence_Fast_GET_ITEM(want, i);
        /* (the pattern's -1 first: a dimension equal to -1 itself is no size) */
        if (pattern && PyLong_CheckExact(expect) && PyLong_AsLong(expect) == -1) {
            long size = PyLong_AsLong(have);
            if (size == -1 && PyErr_Occurred()) {
                return -1;
            }
            if (size < 2) {
                return 0;
            }
            continue;
        }
        if (have == expect) {
            continue;
        }
        int eq = PyObject_RichCompareBool(have, expect, Py_EQ);
        if (eq <= 0) {
            return eq;
        }
    }
    return 1;
}

/* The dims read from the C++ tensor against `want` (as shape_matches): 1, 0, or -2 when `want` is not a
 * list or tuple of exact ints (then compared the generic way). */
static int
dims_match(int rank, const int64_t *dims, PyObject *want)
{
    int pattern = PyTuple_CheckExact(want);
    if (!pattern && !PyList_CheckExact(want)) {
        return -2;
    }
    Py_ssize_t n = pattern ? PyTuple_GET_SIZE(want) : PyList_GET_SIZE(want);
    PyObject **items = pattern ? ((PyTupleObject *)want)->ob_item : ((PyListObject *)want)->ob_item;
    if (n != rank) {
        /* (a differing rank fails either way, unless an item is no int: then the generic way decides) */
        for (Py_ssize_t i = 0; i < n; i++) {
            if (!PyLong_CheckExact(items[i])) {
                return -2;
            }
        }
        return 0;
    }
    int result = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyLong_CheckExact(items[i])) {
            return -2;
        }
        int overflow = 0;
        long long expect = PyLong_AsLongLongAndOverflow(items[i], &overflow);
        if (overflow) {
            result = 0;  /* no dimension is that large */
            continue;
        }
        if (pattern && expect == -1) {
            if (dims[i] < 2) {
                result = 0;
            }
        }
        else if (dims[i] != expect) {
            result = 0;
        }
    }
    return result;
}

/* The C getters of the tensor type's shape, dtype and stop_gradient, looked
 * up once per type version: calling a getter directly skips the generic
 * attribute lookup (about a third of each read). The type's version tag
 * changes whenever its dict does (e.g. a monkeypatched property), which
 * makes the getters be looked up again, so the read is always what
 * `x.name` would give. `native`: the type is paddle.Tensor or a subclass
 * whose dtype and shape are paddle.Tensor's own getters, read with the
 * generic attribute lookup: the C++ reader may stand for them. The state
 * depends on the type only (never on a tensor), and a type is found by its
 * pointer and version tag together, so a subclass has its own entry. */
typedef struct {
    PyTypeObject *type;     /* borrowed: only compared, with its version tag */
    unsigned int version;
    PyGetSetDef *getters[3];
    int native;
} meta_getters_t;

/* A few types at once: a guard checks inputs (Tensor) and parameters
 * (EagerParamBase) in turn, and one slot made every check look its getters up
 * again. Filled round-robin. */
#define SOT_META_TYPES 4
static meta_getters_t meta_getters[SOT_META_TYPES];
static int meta_getters_next = 0;

enum { META_SHAPE = 0, META_DTYPE = 1, META_STOP_GRADIENT = 2 };

/* The C++ reader (NULL when _tensor_meta is not installed), paddle.Tensor (strong) and its own dtype and
 * shape getters. */
static const sot_tensor_meta_api *meta_api = NULL;
static PyTypeObject *meta_tensor_type = NULL;
static PyGetSetDef *native_getters[3];

/* The wanted dtype objects the reader's codes stand for: (object (strong), phi::DataType code, made by
 * the getter under FLAGS_enable_pir_api or not). Registered by tensor_meta.py: the DataType members and
 * the VarType members, which the guards hold (guard.py makes every dtype constant one of them). Found by
 * identity; anything else is compared the generic way. */
typedef struct {
    PyObject *dtype;
    int code;
    int pir;
} dtype_entry_t;

#define SOT_DTYPE_ENTRIES 128
static dtype_entry_t dtype_entries[SOT_DTYPE_ENTRIES];
static int dtype_entry_count = 0;

/* The entry found last: a model's tensors mostly want one dtype, which would otherwise be searched for
 * in every check (float32 is the 11th entry). Reset with the table. */
static int dtype_entry_last = 0;

static const dtype_entry_t *
find_dtype(PyObject *want)
{
    if (dtype_entry_last < dtype_entry_count && dtype_entries[dtype_entry_last].dtype == want) {
        return &dtype_entries[dtype_entry_last];
    }
    for (int i = 0; i < dtype_entry_count; i++) {
        if (dtype_entries[i].dtype == want) {
            dtype_entry_last = i;
            return &dtype_entries[i];
        }
    }
    return NULL;
}

static PyGetSetDef *
find_getter(PyTypeObject *type, PyObject *name)
{
    PyObject *descr = PyObject_GetAttr((PyObject *)type, name);
    if (descr == NULL) {
        PyErr_Clear();
        return NULL;
    }
    PyGetSetDef *def = NULL;
    if (Py_IS_TYPE(descr, &PyGetSetDescr_Type)) {
        def = ((PyGetSetDescrObject *)descr)->d_getset;
        if (def->get == NULL) {
            def = NULL;
        }
    }
    Py_DECREF(descr);
    return def;
}

/* The cache entry of `type` (looked up again when its version changed), or NULL to read attributes
 * generically (a type without a valid version tag, or one that overrides __getattribute__: its getters
 * are not what `x.name` reads). */
static meta_getters_t *
meta_getters_for(PyTypeObject *type)
{
    unsigned int version = sot_type_version_valid(type);
    if (version != 0) {
        for (int i = 0; i < SOT_META_TYPES; i++) {
            if (meta_getters[i].type == type && meta_getters[i].version == version) {
                return &meta_getters[i];
            }
        }
    }
    PyObject *names[3] = {str_shape, str_dtype, str_stop_gradient};
    PyGetSetDef *found[3];
    for (int i = 0; i < 3; i++) {
        found[i] = find_getter(type, names[i]);
    }
    /* (the lookups give the type a valid version tag when it can have one) */
    version = sot_type_version_valid(type);
    if (version == 0) {
        return NULL;
    }
    meta_getters_t *slot = NULL;
    for (int i = 0; i < SOT_META_TYPES && slot == NULL; i++) {
        if (meta_getters[i].type == type) {
            slot = &meta_getters[i];  /* the same type with a new version tag */
        }
    }
    if (slot == NULL) {
        slot = &meta_getters[meta_getters_next];
        meta_getters_next = (meta_getters_next + 1) % SOT_META_TYPES;
    }
    int generic = type->tp_getattro == PyObject_GenericGetAttr;
    slot->type = type;
    slot->version = version;
    for (int i = 0; i < 3; i++) {
        slot->getters[i] = generic ? found[i] : NULL;
    }
    slot->native = generic && meta_api != NULL && meta_tensor_type != NULL
                   && PyType_IsSubtype(type, meta_tensor_type)
                   && found[META_SHAPE] != NULL && found[META_SHAPE] == native_getters[META_SHAPE]
                   && found[META_DTYPE] != NULL && found[META_DTYPE] == native_getters[META_DTYPE];
    return slot;
}

/* x.<name> (new reference), through its getter when known. */
static PyObject *
read_meta(PyObject *x, meta_getters_t *slot, int which, PyObject *name)
{
    if (slot != NULL && slot->getters[which] != NULL) {
        PyGetSetDef *def = slot->getters[which];
        return def->get(x, def->closure);
    }
    return PyObject_GetAttr(x, name);
}

/* dtype_matches(have, want): the same object, or equal objects of the same type (a VarType is made anew
 * by every read of `x.dtype` under the legacy IR, a DataType is one object per value). 1, 0 or -1. */
static int
dtype_equal(PyObject *have, PyObject *want)
{
    if (have == want) {
        return 1;
    }
    if (Py_TYPE(have) != Py_TYPE(want)) {
        return 0;
    }
    return PyObject_RichCompareBool(have, want, Py_EQ);
}

PyDoc_STRVAR(dtype_matches_doc,
"dtype_matches($module, have, want, /)\n--\n\n"
"What a tensor guard asks of x.dtype: have is want, or both are of the\n"
"same type and equal.");

PyObject *
sot_m_dtype_matches(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "dtype_matches expects 2 arguments");
        return NULL;
    }
    int ok = dtype_equal(args[0], args[1]);
    return ok < 0 ? NULL : PyBool_FromLong(ok);
}

/* The dtype and shape checks through the C++ reader: 1, 0, or -2 when it cannot tell (the caller then
 * reads the attributes). */
static int
meta_matches_native(PyObject *x, PyObject *shape_want, PyObject *dtype_want)
{
    const dtype_entry_t *entry = find_dtype(dtype_want);
    if (entry == NULL) {
        return -2;
    }
    int code = 0, rank = 0;
    int64_t dims[SOT_TENSOR_META_MAX_RANK];
    int got = meta_api->read(x, &code, &rank, dims);
    if (!(got & SOT_TENSOR_META_DTYPE)) {
        return -2;
    }
    /* Under the other IR the getter makes the other kind of dtype object: never the one wanted. */
    if (entry->pir != meta_api->pir_api() || entry->code != code) {
        return 0;
    }
    if (!(got & SOT_TENSOR_META_SHAPE)) {
        return -2;
    }
    return dims_match(rank, dims, shape_want);
}

/* The check itself on args[0..4] = (x, cls, shape, dtype, stop_gradient):
 * 1, 0, or -1 on error. Also run directly by the guard program. */
int
sot_tensor_matches(PyObject *const *args)
{
    PyObject *x = args[0];
    if ((PyObject *)Py_TYPE(x) != args[1]) {
        return 0;
    }
    meta_getters_t *slot = meta_getters_for(Py_TYPE(x));
    PyObject *sg = read_meta(x, slot, META_STOP_GRADIENT, str_stop_gradient);
    if (sg == NULL) {
        return -1;
    }
    int ok = sg == args[4];
    Py_DECREF(sg);
    if (!ok) {
        return 0;
    }
    if (slot != NULL && slot->native) {
        int native = meta_matches_native(x, args[2], args[3]);
        if (native != -2) {
            return native;
        }
    }
    PyObject *dtype = read_meta(x, slot, META_DTYPE, str_dtype);
    if (dtype == NULL) {
        return -1;
    }
    ok = dtype_equal(dtype, args[3]);
    Py_DECREF(dtype);
    if (ok > 0) {
        PyObject *shape = read_meta(x, slot, META_SHAPE, str_shape);
        if (shape == NULL) {
            return -1;
        }
        ok = shape_matches(shape, args[2]);
        Py_DECREF(shape);
    }
    return ok;
}

PyDoc_STRVAR(tensor_matches_doc,
"tensor_matches($module, x, cls, shape, dtype, stop_gradient, /)\n--\n\n"
"The tensor-meta guard in one call: type(x) is cls and x.stop_gradient is\n"
"stop_gradient and dtype_matches(x.dtype, dtype) and x.shape == shape (a\n"
"list), or x's shape matches the pattern shape (a tuple, -1 for a dimension\n"
"of any size but 0 and 1). Saves the bytecode of four separate checks per tensor.");

PyObject *
sot_m_tensor_matches(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "tensor_matches expects 5 arguments");
        return NULL;
    }
    int ok = sot_tensor_matches(args);
    if (ok < 0) {
        return NULL;
    }
    return PyBool_FromLong(ok);
}

static void
forget_meta_reader(void)
{
    meta_api = NULL;
    Py_CLEAR(meta_tensor_type);
    for (int i = 0; i < dtype_entry_count; i++) {
        Py_CLEAR(dtype_entries[i].dtype);
    }
    dtype_entry_count = 0;
    dtype_entry_last = 0;
    memset(meta_getters, 0, sizeof(meta_getters));  /* (`native` depends on the reader) */
}

PyDoc_STRVAR(set_tensor_meta_doc,
"_set_tensor_meta($module, api, tensor_type, dtypes, /)\n--\n\n"
"Install the C++ reader of _tensor_meta (its `api` capsule) for instances of\n"
"tensor_type (paddle.Tensor) and its subclasses that keep its dtype and\n"
"shape getters; `dtypes` maps each dtype object a guard may want to\n"
"(phi::DataType code, made under the PIR API). None for `api`: read the\n"
"attributes again. Only sot's tensor_meta.py calls it.");

PyObject *
sot_m_set_tensor_meta(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "_set_tensor_meta expects 3 arguments");
        return NULL;
    }
    forget_meta_reader();
    if (args[0] == Py_None) {
        Py_RETURN_NONE;
    }
    const sot_tensor_meta_api *api = PyCapsule_GetPointer(args[0], SOT_TENSOR_META_CAPSULE);
    if (api == NULL) {
        return NULL;
    }
    if (api->version != SOT_TENSOR_META_API_VERSION) {
        PyErr_SetString(PyExc_ValueError, "_set_tensor_meta: the reader's interface version differs");
        return NULL;
    }
    if (!PyType_Check(args[1]) || !PyDict_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "_set_tensor_meta(api, tensor_type, {dtype: (code, pir)})");
        return NULL;
    }
    if (PyDict_GET_SIZE(args[2]) > SOT_DTYPE_ENTRIES) {
        PyErr_SetString(PyExc_ValueError, "_set_tensor_meta: too many dtypes");
        return NULL;
    }
    PyTypeObject *type = (PyTypeObject *)args[1];
    PyGetSetDef *shape = find_getter(type, str_shape);
    PyGetSetDef *dtype = find_getter(type, str_dtype);
    if (shape == NULL || dtype == NULL) {
        PyErr_SetString(PyExc_ValueError, "_set_tensor_meta: the tensor type has no C getters of shape and dtype");
        return NULL;
    }
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(args[2], &pos, &key, &value)) {
        int code, pir;
        if (!PyTuple_Check(value) || !PyArg_ParseTuple(value, "ip", &code, &pir)) {
            forget_meta_reader();
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_TypeError, "_set_tensor_meta: a dtype maps to (code, pir)");
            }
            return NULL;
        }
        dtype_entries[dtype_entry_count].dtype = Py_NewRef(key);
        dtype_entries[dtype_entry_count].code = code;
        dtype_entries[dtype_entry_count].pir = pir;
        dtype_entry_count++;
    }
    native_getters[META_SHAPE] = shape;
    native_getters[META_DTYPE] = dtype;
    meta_tensor_type = (PyTypeObject *)Py_NewRef(args[1]);
    meta_api = api;
    Py_RETURN_NONE;
}

PyMethodDef sot_tensor_guard_methods[] = {
    {"tensor_matches", (PyCFunction)(void (*)(void))sot_m_tensor_matches, METH_FASTCALL, tensor_matches_doc},
    {"dtype_matches", (PyCFunction)(void (*)(void))sot_m_dtype_matches, METH_FASTCALL, dtype_matches_doc},
    {"_set_tensor_meta", (PyCFunction)(void (*)(void))sot_m_set_tensor_meta, METH_FASTCALL, set_tensor_meta_doc},
    {NULL, NULL, 0, NULL},
};

int
sot_tensor_guard_init(PyObject *module)
{
    if (str_shape == NULL) {
        str_shape = PyUnicode_InternFromString("shape");
        str_dtype = PyUnicode_InternFromString("dtype");
        str_stop_gradient = PyUnicode_InternFromString("stop_gradient");
        if (str_shape == NULL || str_dtype == NULL || str_stop_gradient == NULL) {
            return -1;
        }
    }
    return PyModule_AddFunctions(module, sot_tensor_guard_methods);
}

/*
 * guard_program.c -- a cache entry's guard checks run as one C call.
 *
 * A guard is a chain of checks over paths from the frame's inputs
 * (`self._sub_layers['features'].training is False`, `type(a0) is Tensor`,
 * `tensor_matches(a0, ...)`). Run as generated Python, every check pays for
 * the bytecode of its path and test; a model with hundreds of sublayers
 * has about a thousand of them (identity, training flag and two hook dicts
 * per layer). GuardProgram runs the same checks as a flat list of register
 * instructions built once per entry (by sot/opcode_translator/executor/
 * guard.py, which keeps in Python whatever it cannot express here).
 *
 * Every instruction does exactly what the Python expression does
 * (PyObject_GetAttr is `x.name`, PyObject_GetItem is `x[k]`, a weak
 * reference is dereferenced as calling it would, `==` is PyObject_RichCompare
 * followed by a truth test), so a program passes exactly when the Python
 * chain would. An exception propagates (the hook counts it as a failure and
 * clears it, as for a Python guard; a RecursionError keeps its meaning).
 *
 * Registers: [arguments | constants | work]. Arguments and constants are
 * borrowed; work registers own their value and are released at the end.
 */
#include "frame_compat.h"  /* (includes Python.h; the type version helpers) */

#include <stddef.h>
#include <string.h>

#include "guard_program.h"

enum {
    GP_ATTR = 0,        /* w[dst] = r[a].<r[b]>                          */
    GP_ITEM = 1,        /* w[dst] = r[a][r[b]]                           */
    GP_DEREF = 2,       /* w[dst] = r[a]()  (r[a] an exact weakref.ref)   */
    GP_TYPE = 3,        /* w[dst] = type(r[a])                           */
    GP_LEN = 4,         /* w[dst] = len(r[a])                            */
    GP_CALL = 5,        /* w[dst] = r[a](*r[args[b:b+c]])                */
    GP_IS = 6,          /* w[dst] = r[a] is r[b]                         */
    GP_IS_NOT = 7,
    GP_EQ = 8,          /* w[dst] = r[a] == r[b]                         */
    GP_NE = 9,
    GP_IN = 10,         /* w[dst] = r[a] in r[b]                         */
    GP_NOT_IN = 11,
    GP_NOT = 12,        /* w[dst] = not r[a]                             */
    GP_TEST = 13,       /* fail unless r[a] is true                      */
    GP_TEST_IS = 14,    /* fail unless r[a] is r[b]                      */
    GP_TEST_IS_NOT = 15,
    GP_TEST_NOT = 16,   /* fail unless r[a] is false                     */
    GP_TEST_IS_REF = 17,/* fail unless r[a] is r[b]()  (an exact weakref) */
    GP_TEST_ITEMS_EQ = 18, /* fail unless tuple(r[a]) == r[b]  (a tuple)   */
    GP_TEST_TENSOR = 19,   /* fail unless tensor_matches(*r[args[b:b+5]])  */
    GP_TEST_ATTRS = 20,    /* fail unless every (name, want, how) of r[b]   */
                           /* holds for r[a] (see attrs_match)              */
    GP_TEST_TYPE_VERSION = 21, /* fail unless r[a] is a type whose version */
                               /* tag is r[b] (a nonzero int constant; see */
                               /* sot_type_version, frame_compat.h)        */
    GP_OP_COUNT = 22,
};

/* How GP_TEST_ATTRS compares an attribute with what it wants. */
enum { GP_ATTR_EQ = 0, GP_ATTR_IS = 1, GP_ATTR_FALSY = 2 };

typedef struct {
    int op;
    int dst;
    int a;
    int b;
    int c;
    /* GP_ATTR's inline cache: for this type (borrowed: only compared, with
     * its version tag) `x.name` is a plain read of the instance dict.
     * GP_TEST_TYPE_VERSION keeps the wanted tag in cache_version. */
    PyTypeObject *cache_type;
    unsigned int cache_version;
    int cache_plain;
} gp_instr;

struct gp_attr_check {
    PyObject *name;
    PyObject *want;
    int how;
};

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *dict;          /* attributes set by the owner (e.g. .guard) */
    PyObject *consts;        /* tuple */
    Py_ssize_t nargs;
    Py_ssize_t nregs;        /* arguments + constants + work registers */
    Py_ssize_t ninstr;
    gp_instr *code;
    int *call_args;          /* register indices of GP_CALL arguments */
    Py_ssize_t ncall_args;
    /* The (name, want, how) triples of every GP_TEST_ATTRS, flattened (read
     * from their constant tuples once, not at every run); each instruction's
     * run starts at index `c` and ends at an entry whose name is NULL. The
     * objects are borrowed from `consts`. */
    struct gp_attr_check *attr_checks;
} GuardProgram;

#define GP_STACK_REGS 64

/* The referent of an exact weakref.ref, or None when it is dead
 * (borrowed; what calling the reference returns). */
static inline PyObject *
weakref_target(PyObject *ref)
{
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *obj;
    if (PyWeakref_GetRef(ref, &obj) <= 0) {
        PyErr_Clear();
        return Py_None;
    }
    Py_DECREF(obj);  /* still alive: the caller's register holds it */
    return obj;
#else
    return PyWeakref_GET_OBJECT(ref);
#endif
}

static inline PyObject *
as_bool(int v)
{
    if (v < 0) {
        return NULL;
    }
    return Py_NewRef(v ? Py_True : Py_False);
}

static PyObject *str_getattribute = NULL;

/* 1 if instances of `tp` read attributes generically: object.__getattribute__
 * (descriptors, then the instance dict, then the type), with at most a
 * Python __getattr__ for what that does not find. Python's own read of such
 * a type then goes through slot_tp_getattr_hook, which looks up
 * __getattr__ and __getattribute__ on the type on every read: the program
 * skips those lookups (cached per instruction and type version). */
static int
reads_generically(PyTypeObject *tp)
{
    if (tp->tp_getattro == PyObject_GenericGetAttr) {
        return 1;
    }
    PyObject *getattribute = _PyType_Lookup(tp, str_getattribute);
    return getattribute != NULL && Py_IS_TYPE(getattribute, &PyWrapperDescr_Type)
           && ((PyWrapperDescrObject *)getattribute)->d_wrapped == (void *)PyObject_GenericGetAttr;
}

/* x.name (new reference), as PyObject_GetAttr. For a type that reads
 * generically, the generic read is tried first without raising; only a
 * name it does not find takes the full way (and so reaches __getattr__).
 * (A descriptor that raises AttributeError then runs twice, once per way.) */
static PyObject *
gp_getattr(gp_instr *in, PyObject *obj, PyObject *name)
{
    PyTypeObject *tp = Py_TYPE(obj);
    unsigned int version = sot_type_version_valid(tp);
    if (in->cache_type != tp || in->cache_version != version || version == 0) {
        int plain = reads_generically(tp);
        version = sot_type_version_valid(tp);  /* (the lookup may have assigned one) */
        if (version == 0) {
            return PyObject_GetAttr(obj, name);
        }
        in->cache_type = tp;
        in->cache_version = version;
        in->cache_plain = plain;
    }
    if (in->cache_plain) {
        PyObject *value = _PyObject_GenericGetAttrWithDict(obj, name, NULL, 1);
        if (value != NULL || PyErr_Occurred()) {
            return value;
        }
    }
    return PyObject_GetAttr(obj, name);
}

/* tuple(obj) == want (`want` a tuple) without building the tuple: the
 * items are compared in order as tuple comparison does (identity first,
 * then ==), and the first difference in an item or in the length ends it.
 * Only for dicts, lists and tuples, whose iteration runs no Python code
 * (so stopping early changes nothing); anything else is made a tuple.
 * 1, 0, or -1 on error. */
static int
items_equal(PyObject *obj, PyObject *want)
{
    Py_ssize_t n = PyTuple_GET_SIZE(want);
    if (PyTuple_CheckExact(obj) || PyList_CheckExact(obj)) {
        PyObject *seq = PySequence_Fast(obj, "");
        if (seq == NULL) {
            return -1;
        }
        int same = PySequence_Fast_GET_SIZE(seq) == n;
        for (Py_ssize_t i = 0; same && i < n && i < PySequence_Fast_GET_SIZE(seq); i++) {
            PyObject *item = Py_NewRef(PySequence_Fast_GET_ITEM(seq, i));
            same = PyObject_RichCompareBool(item, PyTuple_GET_ITEM(want, i), Py_EQ);
            Py_DECREF(item);
        }
        Py_DECREF(seq);
        return same;
    }
    /* A dict, or a C subclass of it (OrderedDict): iterating runs no Python code. */
    int plain_dict = PyDict_Check(obj) && (Py_TYPE(obj)->tp_iter == PyDict_Type.tp_iter
                                           || !PyType_HasFeature(Py_TYPE(obj), Py_TPFLAGS_HEAPTYPE));
    if (!plain_dict) {
        PyObject *items = PySequence_Tuple(obj);
        if (items == NULL) {
            return -1;
        }
        int same = PyObject_RichCompareBool(items, want, Py_EQ);
        Py_DECREF(items);
        return same;
    }
    PyObject *it = PyObject_GetIter(obj);
    if (it == NULL) {
        return -1;
    }
    Py_ssize_t i = 0;
    int same = 1;
    PyObject *item;
    while (same > 0 && (item = PyIter_Next(it)) != NULL) {
        same = i < n ? PyObject_RichCompareBool(item, PyTuple_GET_ITEM(want, i), Py_EQ) : 0;
        Py_DECREF(item);
        i++;
    }
    Py_DECREF(it);
    if (same < 0 || PyErr_Occurred()) {
        return -1;
    }
    return same && i == n;
}

/* The truth of `v` as the `and` chain takes it: 1, 0, or -1 on error. */
static inline int
gp_truth(PyObject *v)
{
    if (v == Py_True) {
        return 1;
    }
    if (v == Py_False || v == Py_None) {
        return 0;
    }
    return PyObject_IsTrue(v);
}

/* `obj.name == want and obj.name2 is want2 and not obj.name3 ...` for the
 * (name, want, how) entries from `check` up to the closing NULL name, in
 * order, stopping at the first that does not hold: the checks of a layer's
 * configuration, training flag and hook dicts in one instruction. Every
 * attribute is read through the instruction's cache (one object, one
 * type). 1, 0, or -1. */
static int
attrs_match(gp_instr *in, PyObject *obj, const struct gp_attr_check *check)
{
    for (; check->name != NULL; check++) {
        PyObject *value = gp_getattr(in, obj, check->name);
        if (value == NULL) {
            return -1;
        }
        int ok;
        switch (check->how) {
        case GP_ATTR_IS:
            ok = value == check->want;
            break;
        case GP_ATTR_FALSY:
            ok = gp_truth(value);
            ok = ok < 0 ? ok : !ok;
            break;
        default: {  /* GP_ATTR_EQ */
            PyObject *equal = PyObject_RichCompare(value, check->want, Py_EQ);
            ok = equal == NULL ? -1 : gp_truth(equal);
            Py_XDECREF(equal);
        }
        }
        Py_DECREF(value);
        if (ok <= 0) {
            return ok;
        }
    }
    return 1;
}

/* Run the program on `regs` (arguments and constants filled in). Returns
 * 1 (pass), 0 (fail) or -1 (exception set). */
static int
gp_run(GuardProgram *self, PyObject **regs)
{
    PyObject *stack_args[8];
    for (Py_ssize_t pc = 0; pc < self->ninstr; pc++) {
        gp_instr *in = &self->code[pc];
        PyObject *value = NULL;
        switch (in->op) {
        case GP_ATTR:
            value = gp_getattr(in, regs[in->a], regs[in->b]);
            break;
        case GP_ITEM: {
            PyObject *container = regs[in->a];
            if (PyDict_CheckExact(container)) {
                value = PyDict_GetItemWithError(container, regs[in->b]);
                if (value == NULL) {
                    /* A missing key: `d[k]` raises KeyError, a failure. */
                    return PyErr_Occurred() ? -1 : 0;
                }
                Py_INCREF(value);
            }
            else {
                value = PyObject_GetItem(container, regs[in->b]);
            }
            break;
        }
        case GP_DEREF:
            value = Py_NewRef(weakref_target(regs[in->a]));
            break;
        case GP_TYPE:
            value = Py_NewRef((PyObject *)Py_TYPE(regs[in->a]));
            break;
        case GP_LEN: {
            Py_ssize_t n = PyObject_Length(regs[in->a]);
            value = n < 0 ? NULL : PyLong_FromSsize_t(n);
            break;
        }
        case GP_CALL: {
            Py_ssize_t n = in->c;
            PyObject **argv = stack_args + 1;
            PyObject **heap = NULL;
            if (n + 1 > (Py_ssize_t)(sizeof(stack_args) / sizeof(stack_args[0]))) {
                heap = PyMem_New(PyObject *, n + 1);
                if (heap == NULL) {
                    PyErr_NoMemory();
                    return -1;
                }
                argv = heap + 1;
            }
            for (Py_ssize_t i = 0; i < n; i++) {
                argv[i] = regs[self->call_args[in->b + i]];
            }
            value = PyObject_Vectorcall(regs[in->a], argv,
                                        (size_t)n | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
            PyMem_Free(heap);
            break;
        }
        case GP_IS:
            value = as_bool(regs[in->a] == regs[in->b]);
            break;
        case GP_IS_NOT:
            value = as_bool(regs[in->a] != regs[in->b]);
            break;
        case GP_EQ:
            value = PyObject_RichCompare(regs[in->a], regs[in->b], Py_EQ);
            break;
        case GP_NE:
            value = PyObject_RichCompare(regs[in->a], regs[in->b], Py_NE);
            break;
        case GP_IN:
            value = as_bool(PySequence_Contains(regs[in->b], regs[in->a]));
            break;
        case GP_NOT_IN: {
            int r = PySequence_Contains(regs[in->b], regs[in->a]);
            value = as_bool(r < 0 ? r : !r);
            break;
        }
        case GP_NOT: {
            int r = PyObject_IsTrue(regs[in->a]);
            value = as_bool(r < 0 ? r : !r);
            break;
        }
        case GP_TEST: {
            PyObject *v = regs[in->a];
            if (v == Py_True) {
                continue;
            }
            if (v == Py_False || v == Py_None) {
                return 0;
            }
            int r = PyObject_IsTrue(v);
            if (r <= 0) {
                return r;
            }
            continue;
        }
        case GP_TEST_IS:
            if (regs[in->a] != regs[in->b]) {
                return 0;
            }
            continue;
        case GP_TEST_IS_NOT:
            if (regs[in->a] == regs[in->b]) {
                return 0;
            }
            continue;
        case GP_TEST_NOT: {
            PyObject *v = regs[in->a];
            if (v == Py_False || v == Py_None) {
                continue;
            }
            if (v == Py_True) {
                return 0;
            }
            int r = PyObject_IsTrue(v);
            if (r != 0) {
                return r < 0 ? -1 : 0;
            }
            continue;
        }
        case GP_TEST_TENSOR: {
            PyObject *argv[5];
            for (int i = 0; i < 5; i++) {
                argv[i] = regs[self->call_args[in->b + i]];
            }
            int r = sot_tensor_matches(argv);
            if (r <= 0) {
                return r;
            }
            continue;
        }
        case GP_TEST_ITEMS_EQ: {
            int r = items_equal(regs[in->a], regs[in->b]);
            if (r <= 0) {
                return r;
            }
            continue;
        }
        case GP_TEST_IS_REF:
            if (regs[in->a] != weakref_target(regs[in->b])) {
                return 0;
            }
            continue;
        case GP_TEST_ATTRS: {
            int r = attrs_match(in, regs[in->a], &self->attr_checks[in->c]);
            if (r <= 0) {
                return r;
            }
            continue;
        }
        case GP_TEST_TYPE_VERSION: {
            PyObject *tp = regs[in->a];
            if (!PyType_Check(tp)) {  /* what type_version() raises */
                PyErr_SetString(PyExc_TypeError, "type_version() argument must be a type");
                return -1;
            }
            if (sot_type_version((PyTypeObject *)tp) != in->cache_version) {
                return 0;
            }
            continue;
        }
        default:
            PyErr_SetString(PyExc_SystemError, "sot guard program: bad instruction");
            return -1;
        }
        if (value == NULL) {
            return -1;
        }
        Py_XSETREF(regs[in->dst], value);
    }
    return 1;
}

static PyObject *
gp_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    GuardProgram *self = (GuardProgram *)op;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != self->nargs || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) != 0)) {
        PyErr_Format(PyExc_TypeError, "sot guard program takes %zd positional arguments, got %zd",
                     self->nargs, nargs);
        return NULL;
    }
    PyObject *stack_regs[GP_STACK_REGS];
    PyObject **regs = stack_regs;
    if (self->nregs > GP_STACK_REGS) {
        regs = PyMem_New(PyObject *, self->nregs);
        if (regs == NULL) {
            return PyErr_NoMemory();
        }
    }
    if (self->consts == NULL) {  /* cleared by the garbage collector */
        PyErr_SetString(PyExc_ReferenceError, "sot guard program was cleared");
        return NULL;
    }
    Py_ssize_t nconsts = PyTuple_GET_SIZE(self->consts);
    Py_ssize_t work = nargs + nconsts;
    memcpy(regs, args, nargs * sizeof(PyObject *));
    memcpy(regs + nargs, &PyTuple_GET_ITEM(self->consts, 0), nconsts * sizeof(PyObject *));
    memset(regs + work, 0, (self->nregs - work) * sizeof(PyObject *));
    /* The program may run user code (a __getattr__, __eq__): keep itself alive. */
    Py_INCREF(op);
    int ok = gp_run(self, regs);
    for (Py_ssize_t i = work; i < self->nregs; i++) {
        Py_XDECREF(regs[i]);
    }
    Py_DECREF(op);
    if (regs != stack_regs) {
        PyMem_Free(regs);
    }
    if (ok < 0) {
        return NULL;
    }
    return Py_NewRef(ok ? Py_True : Py_False);
}

/* Register `reg` is a constant tuple of (exact str, object, how) triples,
 * `how` an exact int among GP_ATTR_EQ, GP_ATTR_IS and GP_ATTR_FALSY. */
static int
attrs_spec_ok(Py_ssize_t nargs, Py_ssize_t first_work, PyObject *consts, int reg)
{
    if (reg < nargs || reg >= first_work) {
        return 0;
    }
    PyObject *spec = PyTuple_GET_ITEM(consts, reg - nargs);
    if (!PyTuple_CheckExact(spec)) {
        return 0;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(spec); i++) {
        PyObject *item = PyTuple_GET_ITEM(spec, i);
        if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 3
            || !PyUnicode_CheckExact(PyTuple_GET_ITEM(item, 0))
            || !PyLong_CheckExact(PyTuple_GET_ITEM(item, 2))) {
            return 0;
        }
        long how = PyLong_AsLong(PyTuple_GET_ITEM(item, 2));
        if (how != GP_ATTR_EQ && how != GP_ATTR_IS && how != GP_ATTR_FALSY) {
            PyErr_Clear();
            return 0;
        }
    }
    return 1;
}

/* GuardProgram(nargs, consts, nwork, code, call_args): `code` a sequence of
 * (op, dst, a, b, c) int tuples; `dst` counts from the first work
 * register, `a`/`b` are absolute register numbers; `call_args` the register
 * numbers GP_CALL instructions take their arguments from. */
static PyObject *
gp_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    Py_ssize_t nargs, nwork;
    PyObject *consts, *code, *call_args;
    static char *kwlist[] = {"nargs", "consts", "nwork", "code", "call_args", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "nO!nOO:GuardProgram", kwlist, &nargs,
                                     &PyTuple_Type, &consts, &nwork, &code, &call_args)) {
        return NULL;
    }
    PyObject *code_seq = PySequence_Fast(code, "code must be a sequence");
    if (code_seq == NULL) {
        return NULL;
    }
    PyObject *args_seq = PySequence_Fast(call_args, "call_args must be a sequence");
    if (args_seq == NULL) {
        Py_DECREF(code_seq);
        return NULL;
    }
    GuardProgram *self = NULL;
    Py_ssize_t nconsts = PyTuple_GET_SIZE(consts);
    Py_ssize_t ninstr = PySequence_Fast_GET_SIZE(code_seq);
    Py_ssize_t ncall = PySequence_Fast_GET_SIZE(args_seq);
    if (nargs < 0 || nwork < 0) {
        PyErr_SetString(PyExc_ValueError, "negative register count");
        goto fail;
    }
    Py_ssize_t nregs = nargs + nconsts + nwork;
    self = (GuardProgram *)type->tp_alloc(type, 0);
    if (self == NULL) {
        goto fail;
    }
    self->vectorcall = gp_vectorcall;
    self->consts = Py_NewRef(consts);
    self->nargs = nargs;
    self->nregs = nregs;
    self->ninstr = ninstr;
    self->ncall_args = ncall;
    self->code = PyMem_New(gp_instr, ninstr > 0 ? ninstr : 1);
    self->call_args = PyMem_New(int, ncall > 0 ? ncall : 1);
    if (self->code == NULL || self->call_args == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < ncall; i++) {
        long r = PyLong_AsLong(PySequence_Fast_GET_ITEM(args_seq, i));
        if (r == -1 && PyErr_Occurred()) {
            goto fail;
        }
        if (r < 0 || r >= nregs) {
            PyErr_SetString(PyExc_ValueError, "call argument register out of range");
            goto fail;
        }
        self->call_args[i] = (int)r;
    }
    Py_ssize_t first_work = nargs + nconsts;
    for (Py_ssize_t i = 0; i < ninstr; i++) {
        int f[5];
        PyObject *item = PySequence_Fast_GET_ITEM(code_seq, i);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 5) {
            PyErr_SetString(PyExc_ValueError, "an instruction is a tuple (op, dst, a, b, c)");
            goto fail;
        }
        for (int k = 0; k < 5; k++) {
            long v = PyLong_AsLong(PyTuple_GET_ITEM(item, k));
            if (v == -1 && PyErr_Occurred()) {
                goto fail;
            }
            f[k] = (int)v;
        }
        gp_instr *in = &self->code[i];
        in->cache_type = NULL;
        in->cache_version = 0;
        in->cache_plain = 0;
        in->op = f[0];
        in->dst = (int)(f[1] + first_work);
        in->a = f[2];
        in->b = f[3];
        in->c = f[4];
        int writes = in->op < GP_TEST;
        int uses_b = in->op == GP_ATTR || in->op == GP_ITEM || (in->op >= GP_IS && in->op <= GP_NOT_IN)
                     || in->op == GP_TEST_IS || in->op == GP_TEST_IS_NOT || in->op == GP_TEST_IS_REF
                     || in->op == GP_TEST_ITEMS_EQ || in->op == GP_TEST_ATTRS
                     || in->op == GP_TEST_TYPE_VERSION;
        if (in->op < 0 || in->op >= GP_OP_COUNT
            || (writes && (f[1] < 0 || in->dst >= nregs))
            || in->a < 0 || in->a >= nregs
            || (uses_b && (in->b < 0 || in->b >= nregs))
            || (in->op == GP_CALL && (in->b < 0 || in->c < 0 || in->b + in->c > ncall))
            || (in->op == GP_TEST_TENSOR && (in->b < 0 || in->c != 5 || in->b + 5 > ncall))) {
            PyErr_Format(PyExc_ValueError, "bad guard instruction %zd", i);
            goto fail;
        }
        /* Operands that must be constants of a given kind (checked once here). */
        if (in->op == GP_ATTR && (in->b < nargs || in->b >= first_work
                                  || !PyUnicode_CheckExact(PyTuple_GET_ITEM(consts, in->b - nargs)))) {
            PyErr_Format(PyExc_ValueError, "guard instruction %zd: an attribute name must be a str", i);
            goto fail;
        }
        if (in->op == GP_TEST_ITEMS_EQ && (in->b < nargs || in->b >= first_work
                                           || !PyTuple_CheckExact(PyTuple_GET_ITEM(consts, in->b - nargs)))) {
            PyErr_Format(PyExc_ValueError, "guard instruction %zd: not a tuple constant", i);
            goto fail;
        }
        if (in->op == GP_TEST_ATTRS && !attrs_spec_ok(nargs, first_work, consts, in->b)) {
            PyErr_Format(PyExc_ValueError, "guard instruction %zd: not a tuple of (str, object, how) triples",
                         i);
            goto fail;
        }
        if (in->op == GP_TEST_TYPE_VERSION) {
            /* The wanted tag: a nonzero int constant (0 is no version). */
            PyObject *want = in->b >= nargs && in->b < first_work ? PyTuple_GET_ITEM(consts, in->b - nargs) : NULL;
            unsigned long tag = want != NULL && PyLong_CheckExact(want) ? PyLong_AsUnsignedLong(want) : 0;
            if (tag == (unsigned long)-1 && PyErr_Occurred()) {
                PyErr_Clear();
                tag = 0;
            }
            if (tag == 0 || tag > 0xFFFFFFFFUL) {
                PyErr_Format(PyExc_ValueError, "guard instruction %zd: not a nonzero type version constant", i);
                goto fail;
            }
            in->cache_version = (unsigned int)tag;
        }
        if (in->op == GP_DEREF || in->op == GP_TEST_IS_REF) {
            int ref = in->op == GP_DEREF ? in->a : in->b;
            if (ref < nargs || ref >= first_work
                || !PyWeakref_CheckRefExact(PyTuple_GET_ITEM(consts, ref - nargs))) {
                PyErr_Format(PyExc_ValueError, "guard instruction %zd: not a weakref.ref constant", i);
                goto fail;
            }
        }
    }
    /* The GP_TEST_ATTRS triples, flattened (checked above). */
    Py_ssize_t nchecks = 0;
    for (Py_ssize_t i = 0; i < ninstr; i++) {
        if (self->code[i].op == GP_TEST_ATTRS) {
            nchecks += PyTuple_GET_SIZE(PyTuple_GET_ITEM(consts, self->code[i].b - nargs)) + 1;
        }
    }
    self->attr_checks = PyMem_New(struct gp_attr_check, nchecks > 0 ? nchecks : 1);
    if (self->attr_checks == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    Py_ssize_t next = 0;
    for (Py_ssize_t i = 0; i < ninstr; i++) {
        gp_instr *in = &self->code[i];
        if (in->op != GP_TEST_ATTRS) {
            continue;
        }
        PyObject *spec = PyTuple_GET_ITEM(consts, in->b - nargs);
        in->c = (int)next;
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(spec); k++) {
            PyObject *item = PyTuple_GET_ITEM(spec, k);
            self->attr_checks[next].name = PyTuple_GET_ITEM(item, 0);
            self->attr_checks[next].want = PyTuple_GET_ITEM(item, 1);
            self->attr_checks[next].how = (int)PyLong_AsLong(PyTuple_GET_ITEM(item, 2));
            next++;
        }
        self->attr_checks[next].name = NULL;  /* the end of this instruction's checks */
        self->attr_checks[next].want = NULL;
        self->attr_checks[next].how = 0;
        next++;
    }
    Py_DECREF(code_seq);
    Py_DECREF(args_seq);
    return (PyObject *)self;

fail:
    Py_DECREF(code_seq);
    Py_DECREF(args_seq);
    Py_XDECREF(self);
    return NULL;
}

static int
gp_traverse(PyObject *op, visitproc visit, void *arg)
{
    GuardProgram *self = (GuardProgram *)op;
    Py_VISIT(self->dict);
    Py_VISIT(self->consts);
    return 0;
}

static int
gp_clear(PyObject *op)
{
    GuardProgram *self = (GuardProgram *)op;
    Py_CLEAR(self->dict);
    Py_CLEAR(self->consts);
    return 0;
}

static void
gp_dealloc(PyObject *op)
{
    GuardProgram *self = (GuardProgram *)op;
    PyObject_GC_UnTrack(op);
    gp_clear(op);
    PyMem_Free(self->code);
    PyMem_Free(self->call_args);
    PyMem_Free(self->attr_checks);
    Py_TYPE(op)->tp_free(op);
}

static PyObject *
gp_get_ninstr(PyObject *op, void *closure)
{
    return PyLong_FromSsize_t(((GuardProgram *)op)->ninstr);
}

static PyObject *
gp_get_consts(PyObject *op, void *closure)
{
    GuardProgram *self = (GuardProgram *)op;
    if (self->consts == NULL) {
        Py_RETURN_NONE;
    }
    return Py_NewRef(self->consts);
}

static PyGetSetDef gp_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {"instruction_count", gp_get_ninstr, NULL, "number of instructions", NULL},
    {"consts", gp_get_consts, NULL, "the constant registers", NULL},
    {NULL},
};

PyDoc_STRVAR(gp_doc,
"GuardProgram(nargs, consts, nwork, code, call_args)\n--\n\n"
"A cache entry's guard checks as one C call: program(*args) is True when\n"
"every check passes. Built by sot's guard compiler (guard.py); each\n"
"instruction does what the Python expression it comes from does.");

PyTypeObject GuardProgram_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "sot.eval_frame_ext._eval_frame.GuardProgram",
    .tp_basicsize = sizeof(GuardProgram),
    .tp_dealloc = gp_dealloc,
    .tp_vectorcall_offset = offsetof(GuardProgram, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = gp_doc,
    .tp_traverse = gp_traverse,
    .tp_clear = gp_clear,
    .tp_getset = gp_getset,
    .tp_dictoffset = offsetof(GuardProgram, dict),
    .tp_new = gp_new,
};

/* Opcode names for the Python side, so the two cannot drift apart. */
int
sot_guard_program_add_opcodes(PyObject *module)
{
    if (str_getattribute == NULL) {
        str_getattribute = PyUnicode_InternFromString("__getattribute__");
        if (str_getattribute == NULL) {
            return -1;
        }
    }
    static const struct { const char *name; int op; } names[] = {
        {"ATTR", GP_ATTR}, {"ITEM", GP_ITEM}, {"DEREF", GP_DEREF}, {"TYPE", GP_TYPE},
        {"LEN", GP_LEN}, {"CALL", GP_CALL}, {"IS", GP_IS}, {"IS_NOT", GP_IS_NOT},
        {"EQ", GP_EQ}, {"NE", GP_NE}, {"IN", GP_IN}, {"NOT_IN", GP_NOT_IN}, {"NOT", GP_NOT},
        {"TEST", GP_TEST}, {"TEST_IS", GP_TEST_IS}, {"TEST_IS_NOT", GP_TEST_IS_NOT},
        {"TEST_NOT", GP_TEST_NOT}, {"TEST_IS_REF", GP_TEST_IS_REF}, {"TEST_ITEMS_EQ", GP_TEST_ITEMS_EQ},
        {"TEST_TENSOR", GP_TEST_TENSOR}, {"TEST_ATTRS", GP_TEST_ATTRS},
        {"TEST_TYPE_VERSION", GP_TEST_TYPE_VERSION},
    };
    PyObject *ops = PyDict_New();
    if (ops == NULL) {
        return -1;
    }
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        PyObject *v = PyLong_FromLong(names[i].op);
        if (v == NULL || PyDict_SetItemString(ops, names[i].name, v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(ops);
            return -1;
        }
        Py_DECREF(v);
    }
    int rc = PyModule_AddObjectRef(module, "GUARD_OPCODES", ops);
    Py_DECREF(ops);
    return rc;
}

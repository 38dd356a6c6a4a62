/*
 * frame_compat.h -- the one place where CPython version differences live.
 *
 * eval_frame.c is written against the small vocabulary declared here:
 *
 *   sot_frame_t                  the type the PEP 523 hook receives
 *   sot_frame_code / _globals / _builtins
 *   sot_frame_closure_ref(f)     the function's closure tuple (new reference)
 *   sot_frame_is_fresh(f)        owned by the thread and not started yet
 *   sot_thread_is_traced(ts)     a trace or profile function (or, 3.12+, a
 *                                sys.monitoring tool) is active
 *   sot_frame_collect_args(...)  the argument values, in signature order
 *   sot_frames_left(ts)          Python frames left before RecursionError
 *   sot_code_nargs(co)           number of argument slots of a code object
 *   sot_eval_default(...)        the interpreter's own frame evaluator
 *   SOT_CODE_*_EXTRA             the code-object extra-slot API
 *   sot_type_version_valid(tp)   a type's method-cache version tag, 0 if none
 *   sot_type_version(tp)         the same, assigning a tag when it has none
 *
 * and the per-version functions implemented in frame_3XX.c (one file per
 * family of frame layouts; setup.py compiles exactly one of them):
 *
 *   sot_arg_map_build()          where each argument goes in a new code
 *   sot_shadow_run()             run a new code in place of a frame
 *   sot_frame_discard()          dispose of a frame the hook did not evaluate
 *
 * Families:
 *   3.10       PyFrameObject; frame_310.c
 *   3.11       _PyInterpreterFrame (f_func, f_code, prev_instr); frame_311.c
 *   3.12-3.13  _PyInterpreterFrame popped by the eval loop itself
 *              (3.12: f_funcobj, f_code, prev_instr;
 *               3.13: f_funcobj, f_executable, instr_ptr); frame_312.c
 */
#ifndef SOT_FRAME_COMPAT_H
#define SOT_FRAME_COMPAT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stddef.h>

/* ------------------------------------------------------------------ */
/* Version selection                                                   */
/* ------------------------------------------------------------------ */

#if PY_VERSION_HEX >= 0x030A0000 && PY_VERSION_HEX < 0x030B0000
#  define SOT_PY310 1
#elif PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
#  define SOT_PY311 1
#  define SOT_INTERP_FRAME 1
#elif PY_VERSION_HEX >= 0x030C0000 && PY_VERSION_HEX < 0x030E0000
#  define SOT_PY312_FAMILY 1
#  define SOT_INTERP_FRAME 1
#  if PY_VERSION_HEX >= 0x030D0000
#    define SOT_PY313 1
#  endif
#else
#  error "sot.eval_frame_ext: unsupported Python version (supported: 3.10, 3.11, 3.12, 3.13)"
#endif

#ifdef Py_GIL_DISABLED
#  error "sot.eval_frame_ext: free-threaded CPython builds are not supported"
#endif

#ifdef SOT_PY310
#  include <frameobject.h>     /* PyFrameObject, PyFrame_New */
#else
/* Internal headers: Py_BUILD_CORE is defined only around them. */
#  ifndef Py_BUILD_CORE
#    define Py_BUILD_CORE 1
#    define SOT_DEFINED_PY_BUILD_CORE 1
#  endif
#  include <internal/pycore_frame.h>
#  include <internal/pycore_code.h>
#  ifdef SOT_DEFINED_PY_BUILD_CORE
#    undef Py_BUILD_CORE
#    undef SOT_DEFINED_PY_BUILD_CORE
#  endif
#endif

/* ------------------------------------------------------------------ */
/* Compiler helpers                                                    */
/* ------------------------------------------------------------------ */

#if defined(_MSC_VER)
#  define SOT_THREAD_LOCAL __declspec(thread)
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#  define SOT_THREAD_LOCAL _Thread_local
#else
#  define SOT_THREAD_LOCAL __thread
#endif

#if defined(__GNUC__)
#  define SOT_LIKELY(x) __builtin_expect(!!(x), 1)
#  define SOT_UNLIKELY(x) __builtin_expect(!!(x), 0)
#  define SOT_NOINLINE __attribute__((noinline))
#else
#  define SOT_LIKELY(x) (x)
#  define SOT_UNLIKELY(x) (x)
#  define SOT_NOINLINE
#endif

/* Code flags of frames that are never hooked. */
#define SOT_NEVER_HOOK_FLAGS \
    (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE)

/* Number of argument slots: positional (incl. positional-only),
 * keyword-only, then *args and **kwargs if present. Same on every
 * supported version. */
static inline int
sot_code_nargs(PyCodeObject *co)
{
    return co->co_argcount + co->co_kwonlyargcount
           + ((co->co_flags & CO_VARARGS) ? 1 : 0)
           + ((co->co_flags & CO_VARKEYWORDS) ? 1 : 0);
}

#ifdef SOT_PY312_FAMILY
/* 3.12+: a sys.monitoring tool (PEP 669) has events enabled, for every
 * thread of the interpreter: cProfile and coverage's sysmon core use it
 * instead of a profile or trace function. (frame_312.c) */
int sot_thread_is_monitored(PyThreadState *tstate);
#else
#  define sot_thread_is_monitored(tstate) 0
#endif

/* 1 if the thread has a trace or profile function: sys.settrace or
 * sys.setprofile (pdb, cProfile, a user's tracer) or a C tracer installed with
 * PyEval_SetTrace (coverage.py). The hook then lets every frame of the thread
 * run as written: the tool must see the user's own lines and calls, not a
 * translation, and its own callback must never be translated. (The fields
 * are the same on every supported version; 3.12+ adds sys.monitoring.) */
static inline int
sot_thread_is_traced(PyThreadState *tstate)
{
    return tstate->c_tracefunc != NULL || tstate->c_profilefunc != NULL
           || sot_thread_is_monitored(tstate);
}

/* How many more Python frames the thread may push before RecursionError.
 * (3.12: while the hook is installed every Python call goes through it and
 * costs two units of the C recursion limit, which then binds first: 747
 * frames deep at the default limits, measured.) */
static inline int
sot_frames_left(PyThreadState *tstate)
{
#if defined(SOT_PY310)
    return Py_GetRecursionLimit() - tstate->recursion_depth;
#elif defined(SOT_PY311)
    return tstate->recursion_remaining;
#elif defined(SOT_PY313)
    return tstate->py_recursion_remaining;
#else
    int c_frames = tstate->c_recursion_remaining / 2;
    return c_frames < tstate->py_recursion_remaining ? c_frames : tstate->py_recursion_remaining;
#endif
}

/* 1 if two name strings are equal, 0 if not, -1 with an exception set. */
static inline int
sot_same_name(PyObject *a, PyObject *b)
{
    if (a == b) {
        return 1;
    }
    return PyObject_RichCompareBool(a, b, Py_EQ);
}

/* ------------------------------------------------------------------ */
/* Code extra slot                                                     */
/* ------------------------------------------------------------------ */

#if PY_VERSION_HEX >= 0x030C0000
#  define SOT_REQUEST_CODE_EXTRA_INDEX(free_fn) PyUnstable_Eval_RequestCodeExtraIndex(free_fn)
#  define SOT_CODE_GET_EXTRA(code, index, out) PyUnstable_Code_GetExtra((code), (index), (out))
#  define SOT_CODE_SET_EXTRA(code, index, value) PyUnstable_Code_SetExtra((code), (index), (value))
#else
#  define SOT_REQUEST_CODE_EXTRA_INDEX(free_fn) _PyEval_RequestCodeExtraIndex(free_fn)
#  define SOT_CODE_GET_EXTRA(code, index, out) _PyCode_GetExtra((code), (index), (out))
#  define SOT_CODE_SET_EXTRA(code, index, value) _PyCode_SetExtra((code), (index), (value))
#endif

/* ------------------------------------------------------------------ */
/* 3.10: the hook receives a PyFrameObject                             */
/* ------------------------------------------------------------------ */
#ifdef SOT_PY310

/* f_localsplus layout: co_nlocals locals (arguments first), then one slot
 * per cell variable (the cells are already created when the hook runs; an
 * argument that is also a cell lives in its cell, see co_cell2arg, and its
 * local slot is empty), then one slot per free variable (the closure's
 * cells, already copied). */
typedef PyFrameObject sot_frame_t;

static inline PyCodeObject *
sot_frame_code(sot_frame_t *f)
{
    return f->f_code;
}

static inline PyObject *
sot_frame_globals(sot_frame_t *f)
{
    return f->f_globals;
}

static inline PyObject *
sot_frame_builtins(sot_frame_t *f)
{
    return f->f_builtins;
}

static inline Py_ssize_t
sot310_ncells(PyCodeObject *co)
{
    return PyTuple_GET_SIZE(co->co_cellvars);
}

static inline Py_ssize_t
sot310_nfree(PyCodeObject *co)
{
    return PyTuple_GET_SIZE(co->co_freevars);
}

/* The function's closure: the frame does not know its function, so the
 * tuple is rebuilt from the frame's free-variable slots (the same cell
 * objects as the function's __closure__). Py_None when there are none (no
 * allocation). New reference, or NULL with an exception set. */
static inline PyObject *
sot_frame_closure_ref(sot_frame_t *f)
{
    PyCodeObject *co = f->f_code;
    Py_ssize_t nfree = sot310_nfree(co);
    if (SOT_LIKELY(nfree == 0)) {
        Py_INCREF(Py_None);
        return Py_None;
    }
    PyObject **free = f->f_localsplus + co->co_nlocals + sot310_ncells(co);
    PyObject *t = PyTuple_New(nfree);
    if (t == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < nfree; i++) {
        Py_INCREF(free[i]);
        PyTuple_SET_ITEM(t, i, free[i]);
    }
    return t;
}

static inline int
sot_frame_is_fresh(sot_frame_t *f)
{
    return f->f_state == FRAME_CREATED && f->f_lasti < 0;
}

/* Store the n argument values (borrowed) into dst. An argument that is
 * also a cell is read from its cell. Returns -1 (no exception set) if a
 * value is missing. */
static inline int
sot_frame_collect_args(sot_frame_t *f, int n, PyObject **dst)
{
    PyCodeObject *co = f->f_code;
    PyObject **src = f->f_localsplus;
    for (int i = 0; i < n; i++) {
        dst[i] = src[i];
    }
    if (co->co_cell2arg != NULL) {
        PyObject **cells = src + co->co_nlocals;
        Py_ssize_t ncells = sot310_ncells(co);
        for (Py_ssize_t k = 0; k < ncells; k++) {
            Py_ssize_t a = co->co_cell2arg[k];
            if (a != CO_CELL_NOT_AN_ARG && a < n) {
                dst[a] = PyCell_GET(cells[k]);
            }
        }
    }
    for (int i = 0; i < n; i++) {
        if (SOT_UNLIKELY(dst[i] == NULL)) {
            return -1;
        }
    }
    return 0;
}

static inline PyObject *
sot_eval_default(PyThreadState *tstate, sot_frame_t *f, int throwflag)
{
    return _PyEval_EvalFrameDefault(tstate, f, throwflag);
}

/* The caller of the hook (_PyEval_Vector) releases the frame. */
static inline void
sot_frame_discard(PyThreadState *tstate, sot_frame_t *f)
{
    (void)tstate;
    (void)f;
}

#endif /* SOT_PY310 */

/* ------------------------------------------------------------------ */
/* 3.11-3.13: the hook receives a _PyInterpreterFrame                  */
/* ------------------------------------------------------------------ */
#ifdef SOT_INTERP_FRAME

typedef struct _PyInterpreterFrame sot_frame_t;

#ifdef SOT_PY313
#  define SOT_FRAME_CODE(f) ((PyCodeObject *)(f)->f_executable)
#  define SOT_FRAME_SET_CODE(f, co) ((f)->f_executable = (PyObject *)(co))
#else
#  define SOT_FRAME_CODE(f) ((f)->f_code)
#  define SOT_FRAME_SET_CODE(f, co) ((f)->f_code = (co))
#endif

#ifdef SOT_PY311
#  define SOT_FRAME_FUNC(f) ((f)->f_func)
#else
#  define SOT_FRAME_FUNC(f) ((PyFunctionObject *)(f)->f_funcobj)
#endif

/* Mark a frame as not started: 3.11/3.12 keep a pointer to the code unit
 * before the next instruction, 3.13 to the next instruction itself. */
#ifdef SOT_PY313
#  define SOT_FRAME_SET_UNSTARTED(f, co) ((f)->instr_ptr = _PyCode_CODE(co))
#  define SOT_FRAME_IS_UNSTARTED(f, co) ((f)->instr_ptr == _PyCode_CODE(co))
#else
#  define SOT_FRAME_SET_UNSTARTED(f, co) ((f)->prev_instr = _PyCode_CODE(co) - 1)
#  define SOT_FRAME_IS_UNSTARTED(f, co) ((f)->prev_instr == _PyCode_CODE(co) - 1)
#endif

static inline PyCodeObject *
sot_frame_code(sot_frame_t *f)
{
    return SOT_FRAME_CODE(f);
}

static inline PyObject *
sot_frame_globals(sot_frame_t *f)
{
    return f->f_globals;
}

static inline PyObject *
sot_frame_builtins(sot_frame_t *f)
{
    return f->f_builtins;
}

/* The function's __closure__ tuple itself (or Py_None). New reference. */
static inline PyObject *
sot_frame_closure_ref(sot_frame_t *f)
{
    PyFunctionObject *func = SOT_FRAME_FUNC(f);
    PyObject *closure = NULL;
    if (func != NULL && PyFunction_Check((PyObject *)func)) {
        closure = func->func_closure;
    }
    if (closure == NULL) {
        closure = Py_None;
    }
    Py_INCREF(closure);
    return closure;
}

/* True for a frame that the thread owns and that has not executed any
 * instruction yet: the only kind the hook may replace. */
static inline int
sot_frame_is_fresh(sot_frame_t *f)
{
    return f->owner == FRAME_OWNED_BY_THREAD
           && SOT_FRAME_IS_UNSTARTED(f, SOT_FRAME_CODE(f));
}

/* Store the n argument values (borrowed) into dst. At frame start an
 * argument that is also a cell still holds its plain value (MAKE_CELL has
 * not run). Returns -1 (no exception set) if a slot is empty. */
static inline int
sot_frame_collect_args(sot_frame_t *f, int n, PyObject **dst)
{
    PyObject **src = f->localsplus;
    for (int i = 0; i < n; i++) {
        if (SOT_UNLIKELY(src[i] == NULL)) {
            return -1;
        }
        dst[i] = src[i];
    }
    return 0;
}

static inline PyObject *
sot_eval_default(PyThreadState *tstate, sot_frame_t *f, int throwflag)
{
    return _PyEval_EvalFrameDefault(tstate, f, throwflag);
}

/* Argument map shared by 3.11-3.13 (see sot_arg_map_build): at frame start
 * cells and free variables are not created yet, so locals are matched by
 * name over co_localsplusnames, skipping free-variable slots. */
static inline int
sot_localsplus_arg_map(PyCodeObject *orig, PyCodeObject *target, int nargs, int *map)
{
    PyObject *onames = orig->co_localsplusnames;
    PyObject *tnames = target->co_localsplusnames;
    const char *tkinds = PyBytes_AS_STRING(target->co_localspluskinds);
    int ntarget = target->co_nlocalsplus;

    if (nargs > orig->co_nlocalsplus) {
        PyErr_SetString(PyExc_SystemError, "sot: argument count exceeds locals");
        return -1;
    }
    for (int i = 0; i < nargs; i++) {
        PyObject *name = PyTuple_GET_ITEM(onames, i);
        map[i] = -1;
        for (int j = 0; j < ntarget; j++) {
            if (tkinds[j] & CO_FAST_FREE) {
                continue;
            }
            int eq = sot_same_name(PyTuple_GET_ITEM(tnames, j), name);
            if (eq < 0) {
                return -1;
            }
            if (eq) {
                map[i] = j;
                break;
            }
        }
    }
    return 0;
}

/* The shadow frame's locals (3.11-3.13): all empty but the arguments, copied
 * (new references) to the slots the argument map gives them. */
static inline void
sot_localsplus_copy_args(PyObject **dst, int nlocals, PyObject **src, const int *map, int nargs)
{
    memset(dst, 0, (size_t)nlocals * sizeof(PyObject *));
    for (int i = 0; i < nargs; i++) {
        int j = map[i];
        if (j >= 0) {
            Py_XINCREF(src[i]);
            dst[j] = src[i];
        }
    }
}

#ifdef SOT_PY311
/* The caller of the hook (_PyEval_Vector) clears and pops the frame. */
static inline void
sot_frame_discard(PyThreadState *tstate, sot_frame_t *f)
{
    (void)tstate;
    (void)f;
}
#endif

#endif /* SOT_INTERP_FRAME */

/* ------------------------------------------------------------------ */
/* Per-version functions (frame_3XX.c)                                 */
/* ------------------------------------------------------------------ */

/* For each of the nargs argument slots of `orig`, find the slot of the
 * same name in `target` (a plain local or cell, never a free variable) and
 * store its index in map[i], or -1 if `target` has no such local. (The
 * index is in the version's own numbering of the frame's locals.)
 * Returns 0, or -1 with an exception set. */
int sot_arg_map_build(PyCodeObject *orig, PyCodeObject *target, int nargs,
                      int *map);

/* Run `target` instead of the (not yet started) frame `orig`: a shadow
 * frame gets orig's function (closure), globals and builtins, and the
 * argument values of orig copied into the slots given by `map` (from
 * sot_arg_map_build). The shadow frame is evaluated and released (a frame
 * object that escaped takes over its data). `orig` itself is left as it
 * is: release it with sot_frame_discard(). Returns the result, or NULL
 * with an exception set. */
PyObject *sot_shadow_run(PyThreadState *tstate, sot_frame_t *orig,
                         PyCodeObject *target, const int *map, int nargs);

#ifdef SOT_PY312_FAMILY
/* The hook decided not to evaluate `orig` (its shadow ran, or the callback
 * raised): the eval loop pops the frame it is given on 3.12+, so the hook
 * must clear the frame and pop it off the thread's data stack itself.
 * (A no-op on 3.10 and 3.11, where the hook's caller does it.) */
void sot_frame_discard(PyThreadState *tstate, sot_frame_t *orig);
#endif


/* ------------------------------------------------------------------ */
/* Type version tags                                                   */
/* ------------------------------------------------------------------ */
/*
 * CPython gives a type a version tag (tp_version_tag) for its method cache
 * and invalidates it whenever the type or a base of it changes (an
 * attribute set or deleted, __bases__ reassigned); a new tag is never one a
 * type had before. So "the tag is still V" means "no class lookup through
 * this type can give another answer than when it was V". How validity is
 * marked differs:
 *   3.10-3.12  Py_TPFLAGS_VALID_VERSION_TAG (3.10 keeps the stale number)
 *   3.13       tp_version_tag != 0 (the flag is no longer maintained)
 * and how a tag is obtained for a type that has none:
 *   3.10-3.11  _PyType_Lookup assigns one on its way (for a cacheable,
 *              i.e. interned, name)
 *   3.12+      PyUnstable_Type_AssignVersionTag; 3.13 refuses (0) after
 *              about a thousand modifications of the type (3.12 only
 *              when the global tag counter runs out).
 * 0 always means "no valid tag": a caller must not treat it as a version.
 */
static inline unsigned int
sot_type_version_valid(PyTypeObject *tp)
{
#if PY_VERSION_HEX >= 0x030D0000
    return tp->tp_version_tag;
#else
    return (tp->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) ? tp->tp_version_tag : 0;
#endif
}

static inline unsigned int
sot_type_version(PyTypeObject *tp)
{
    unsigned int tag = sot_type_version_valid(tp);
    if (SOT_LIKELY(tag != 0)) {
        return tag;
    }
#if PY_VERSION_HEX >= 0x030C0000
    if (!PyUnstable_Type_AssignVersionTag(tp)) {
        return 0;
    }
#else
    static PyObject *probe = NULL;  /* an interned name: the method cache takes only those */
    if (probe == NULL) {
        probe = PyUnicode_InternFromString("__sot_type_version_probe__");
        if (probe == NULL) {
            PyErr_Clear();
            return 0;
        }
    }
    (void)_PyType_Lookup(tp, probe);  /* borrowed result, never set an error */
#endif
    return sot_type_version_valid(tp);
}

#endif /* SOT_FRAME_COMPAT_H */

/*
 * frame_compat.h -- the one place where CPython version differences live.
 *
 * eval_frame.c is written against the small vocabulary declared here:
 *
 *   sot_frame_t                  the type the PEP 523 hook receives
 *   sot_frame_code / _globals / _builtins / _function / _closure
 *   sot_frame_localsplus(f)      the locals array (arguments first)
 *   sot_frame_is_fresh(f)        owned by the thread and not started yet
 *   sot_frame_collect_args(...)  the argument values, in signature order
 *   sot_code_nargs(co)           number of argument slots of a code object
 *   sot_eval_default(...)        the interpreter's own frame evaluator
 *   SOT_CODE_*_EXTRA             the code-object extra-slot API
 *
 * and the per-version functions implemented in frame_3XX.c (one file per
 * family of frame layouts; setup.py compiles exactly one of them):
 *
 *   sot_arg_map_build()          where each argument goes in a new code
 *   sot_shadow_run()             run a new code in place of a frame
 *
 * Currently implemented: CPython 3.11 (frame_311.c).
 */
#ifndef SOT_FRAME_COMPAT_H
#define SOT_FRAME_COMPAT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* ------------------------------------------------------------------ */
/* Version selection                                                   */
/* ------------------------------------------------------------------ */

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
#  define SOT_PY311 1
#else
#  error "sot.eval_frame_ext: unsupported Python version (supported: 3.11)"
#endif

/* Internal headers: Py_BUILD_CORE is defined only around them. */
#ifndef Py_BUILD_CORE
#  define Py_BUILD_CORE 1
#  define SOT_DEFINED_PY_BUILD_CORE 1
#endif
#include <internal/pycore_frame.h>
#include <internal/pycore_code.h>
#ifdef SOT_DEFINED_PY_BUILD_CORE
#  undef Py_BUILD_CORE
#  undef SOT_DEFINED_PY_BUILD_CORE
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

/* ------------------------------------------------------------------ */
/* 3.11                                                                */
/* ------------------------------------------------------------------ */
#ifdef SOT_PY311

typedef struct _PyInterpreterFrame sot_frame_t;

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

/* The function being called (borrowed). */
static inline PyObject *
sot_frame_function(sot_frame_t *f)
{
    return (PyObject *)f->f_func;
}

/* The function's __closure__ tuple, or NULL (borrowed). */
static inline PyObject *
sot_frame_closure(sot_frame_t *f)
{
    return f->f_func != NULL ? f->f_func->func_closure : NULL;
}

/* The frame's locals array (arguments first). */
static inline PyObject **
sot_frame_localsplus(sot_frame_t *f)
{
    return f->localsplus;
}

/* True for a frame that the thread owns and that has not executed any
 * instruction yet: the only kind the hook may replace. */
static inline int
sot_frame_is_fresh(sot_frame_t *f)
{
    return f->owner == FRAME_OWNED_BY_THREAD
           && f->prev_instr == _PyCode_CODE(f->f_code) - 1;
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

#define SOT_REQUEST_CODE_EXTRA_INDEX(free_fn) _PyEval_RequestCodeExtraIndex(free_fn)
#define SOT_CODE_GET_EXTRA(code, index, out) _PyCode_GetExtra((code), (index), (out))
#define SOT_CODE_SET_EXTRA(code, index, value) _PyCode_SetExtra((code), (index), (value))

#endif /* SOT_PY311 */

/* ------------------------------------------------------------------ */
/* Per-version functions (frame_3XX.c)                                 */
/* ------------------------------------------------------------------ */

/* For each of the nargs argument slots of `orig`, find the slot of the
 * same name in `target` (a plain local or cell, never a free variable) and
 * store its index in map[i], or -1 if `target` has no such local.
 * Returns 0, or -1 with an exception set. */
int sot_arg_map_build(PyCodeObject *orig, PyCodeObject *target, int nargs,
                      int *map);

/* Run `target` instead of the (not yet started) frame `orig`: a shadow
 * frame gets orig's function, globals and builtins, and the argument
 * values of orig copied into the slots given by `map` (from
 * sot_arg_map_build). The shadow frame is evaluated and cleared (a frame
 * object that escaped takes over its data). `orig` itself is left
 * untouched: its owner clears it as usual. Returns the result, or NULL
 * with an exception set. */
PyObject *sot_shadow_run(PyThreadState *tstate, sot_frame_t *orig,
                         PyCodeObject *target, const int *map, int nargs);

#endif /* SOT_FRAME_COMPAT_H */

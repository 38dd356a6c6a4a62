/*
 * frame_312.c -- CPython 3.12 and 3.13: shadow frames on the data stack.
 *
 * From 3.12 on, the eval loop clears and pops the frame it is given when
 * that frame returns or raises. So
 *
 *   - a shadow frame must live where the interpreter pops frames from: it is
 *     pushed on the thread's data stack (right above the original frame),
 *     and _PyEval_EvalFrameDefault clears and pops it, including handing
 *     its data over to a frame object that escaped;
 *   - the original frame, which the hook does not evaluate, must be cleared
 *     and popped by the hook (sot_frame_discard), after its shadow ran or
 *     when the callback raised.
 *
 * 3.12 and 3.13 differ in small ways, all behind frame_compat.h macros
 * (f_code vs f_executable, prev_instr vs instr_ptr) and in what libpython
 * exports: 3.13 exports _PyEval_FrameClearAndPop, 3.12 exports neither it
 * nor the frame clearing and data-stack routines, so small equivalents are
 * written here for 3.12. Pushing is done here on both (the interpreter's
 * push routine is not exported); the chunk layout is the interpreter's own
 * (_PyStackChunk, allocated with the object arena allocator), so that the
 * eval loop can pop a shadow frame that starts a new chunk.
 */
#include "frame_compat.h"

#include <string.h>

/* PyInterpreterState's layout, for its sys.monitoring state (see
 * sot_thread_is_monitored). On 3.12 the public objimpl.h defines
 * _PyGC_FINALIZED as a macro that the internal pycore_gc.h (included by
 * pycore_interp.h) defines again as a function: drop the public one. */
#undef _PyGC_FINALIZED
#ifndef Py_BUILD_CORE
#  define Py_BUILD_CORE 1
#  define SOT_DEFINED_PY_BUILD_CORE 1
#endif
#include <internal/pycore_interp.h>
#ifdef SOT_DEFINED_PY_BUILD_CORE
#  undef Py_BUILD_CORE
#  undef SOT_DEFINED_PY_BUILD_CORE
#endif

#ifdef SOT_PY313
/* Exported by libpython 3.13 (declared in internal/pycore_ceval.h, which
 * is not included to keep the set of internal headers small). */
PyAPI_FUNC(void) _PyEval_FrameClearAndPop(PyThreadState *tstate, _PyInterpreterFrame *frame);
#endif

/* Size of a new data-stack chunk (bytes), and slots kept free in it above
 * the shadow frame for the frames it calls. */
#define SOT_CHUNK_BYTES (16 * 1024)
#define SOT_CHUNK_SPARE_SLOTS 1000

int
sot_thread_is_monitored(PyThreadState *tstate)
{
    /* The events some sys.monitoring tool asked for in every code object:
     * cProfile, coverage's sysmon core and (internally) sys.settrace and
     * sys.setprofile register here. */
    const unsigned char *tools = (const unsigned char *)&tstate->interp->monitors;
    size_t n = sizeof(_Py_GlobalMonitors);
    if (n >= 8 && n <= 16) {
        /* (asked on every hooked frame: two overlapping 8-byte words, 15
         * bytes on 3.12 and 3.13, instead of a call of memcmp) */
        uint64_t head, tail;
        memcpy(&head, tools, 8);
        memcpy(&tail, tools + n - 8, 8);
        return (head | tail) != 0;
    }
    static const _Py_GlobalMonitors none;
    return memcmp(tools, &none, sizeof(none)) != 0;
}

int
sot_arg_map_build(PyCodeObject *orig, PyCodeObject *target, int nargs, int *map)
{
    return sot_localsplus_arg_map(orig, target, nargs, map);
}

/* ------------------------------------------------------------------ */
/* Data stack                                                          */
/* ------------------------------------------------------------------ */

/* Reserve `slots` pointer-sized slots on the thread's data stack for a
 * frame. Returns NULL with an exception set on failure. */
static _PyInterpreterFrame *
sot_push_frame(PyThreadState *tstate, int slots)
{
    if (SOT_LIKELY(_PyThreadState_HasStackSpace(tstate, slots))) {
        _PyInterpreterFrame *f = (_PyInterpreterFrame *)tstate->datastack_top;
        tstate->datastack_top += slots;
        return f;
    }
    /* Start a new chunk; the frame goes at its very beginning, which is how
     * the interpreter's pop knows to free the chunk again. */
    size_t need = sizeof(_PyStackChunk) + (size_t)(slots + SOT_CHUNK_SPARE_SLOTS) * sizeof(PyObject *);
    size_t bytes = SOT_CHUNK_BYTES;
    while (bytes < need) {
        bytes *= 2;
    }
    /* The allocator the interpreter frees chunks with (fetched each time:
     * it can be replaced with PyObject_SetArenaAllocator). */
    PyObjectArenaAllocator arena;
    PyObject_GetArenaAllocator(&arena);
    _PyStackChunk *chunk = (_PyStackChunk *)arena.alloc(arena.ctx, bytes);
    if (chunk == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    _PyStackChunk *current = tstate->datastack_chunk;
    chunk->previous = current;
    chunk->size = bytes;
    chunk->top = 0;
    if (current != NULL) {
        current->top = (size_t)(tstate->datastack_top - &current->data[0]);
    }
    tstate->datastack_chunk = chunk;
    tstate->datastack_limit = (PyObject **)((char *)chunk + bytes);
    tstate->datastack_top = &chunk->data[0] + slots;
    return (_PyInterpreterFrame *)&chunk->data[0];
}

/* ------------------------------------------------------------------ */
/* Shadow frames                                                       */
/* ------------------------------------------------------------------ */

PyObject *
sot_shadow_run(PyThreadState *tstate, sot_frame_t *orig,
               PyCodeObject *target, const int *map, int nargs)
{
    int nlocals = target->co_nlocalsplus;
    _PyInterpreterFrame *sh = sot_push_frame(tstate, target->co_framesize);
    if (sh == NULL) {
        return NULL;
    }
    /* The function supplies the closure read by COPY_FREE_VARS. */
    Py_INCREF(orig->f_funcobj);
    sh->f_funcobj = orig->f_funcobj;
    Py_INCREF(target);
    SOT_FRAME_SET_CODE(sh, target);
    sh->f_globals = orig->f_globals;
    sh->f_builtins = orig->f_builtins;
    /* NULL for function frames, except for exec() of a function's code. */
    Py_XINCREF(orig->f_locals);
    sh->f_locals = orig->f_locals;
    sh->frame_obj = NULL;
    sh->previous = NULL;            /* linked by the eval loop */
    SOT_FRAME_SET_UNSTARTED(sh, target);
    sh->stacktop = nlocals;
    sh->return_offset = 0;
    sh->owner = FRAME_OWNED_BY_THREAD;

    sot_localsplus_copy_args(sh->localsplus, nlocals, orig->localsplus, map, nargs);
    /* Evaluates, clears and pops the shadow frame. */
    return _PyEval_EvalFrameDefault(tstate, sh, 0);
}

/* ------------------------------------------------------------------ */
/* Releasing the original frame                                        */
/* ------------------------------------------------------------------ */

#ifdef SOT_PY313

void
sot_frame_discard(PyThreadState *tstate, sot_frame_t *orig)
{
    _PyEval_FrameClearAndPop(tstate, orig);
}

#else /* 3.12 */

/* Pop a frame pushed on the thread's data stack (the topmost one). */
static void
sot_pop_frame(PyThreadState *tstate, _PyInterpreterFrame *f)
{
    _PyStackChunk *chunk = tstate->datastack_chunk;
    PyObject **base = (PyObject **)f;
    if (base == &chunk->data[0] && chunk->previous != NULL) {
        /* The frame started this chunk: free the chunk. */
        _PyStackChunk *previous = chunk->previous;
        tstate->datastack_chunk = previous;
        tstate->datastack_top = &previous->data[previous->top];
        tstate->datastack_limit = (PyObject **)((char *)previous + previous->size);
        PyObjectArenaAllocator arena;
        PyObject_GetArenaAllocator(&arena);
        arena.free(arena.ctx, chunk, chunk->size);
    }
    else {
        tstate->datastack_top = base;
    }
}

/* A frame object of the original frame outlives it. This cannot happen
 * with frames as the hook gets them (never linked into the thread's frame
 * chain, so nothing could create their frame object), but is handled for
 * safety: the frame's data moves into the frame object. */
static void
sot_hand_over_to_frame_object(PyFrameObject *fo, _PyInterpreterFrame *f)
{
    size_t used = offsetof(_PyInterpreterFrame, localsplus)
                  + (size_t)(f->stacktop > 0 ? f->stacktop : 0) * sizeof(PyObject *);
    _PyInterpreterFrame *dst = (_PyInterpreterFrame *)fo->_f_frame_data;
    memcpy(dst, f, used);
    Py_INCREF(dst->f_code);     /* the caller releases f's reference */
    fo->f_frame = dst;
    dst->owner = FRAME_OWNED_BY_FRAME_OBJECT;
    dst->frame_obj = NULL;
    dst->previous = NULL;
    PyCodeObject *co = dst->f_code;
    if (dst->prev_instr < _PyCode_CODE(co) + co->_co_firsttraceable) {
        dst->prev_instr = _PyCode_CODE(co) + co->_co_firsttraceable;
    }
    if (!PyObject_GC_IsTracked((PyObject *)fo)) {
        PyObject_GC_Track((PyObject *)fo);
    }
}

void
sot_frame_discard(PyThreadState *tstate, sot_frame_t *orig)
{
    PyFrameObject *fo = orig->frame_obj;
    int handed_over = 0;
    if (fo != NULL) {
        orig->frame_obj = NULL;
        if (Py_REFCNT(fo) > 1) {
            sot_hand_over_to_frame_object(fo, orig);
            handed_over = 1;
        }
        Py_DECREF(fo);
    }
    if (!handed_over) {
        int top = orig->stacktop;
        for (int i = 0; i < top; i++) {
            Py_XDECREF(orig->localsplus[i]);
        }
        Py_XDECREF(orig->f_locals);
        Py_DECREF(orig->f_funcobj);
    }
    Py_DECREF(orig->f_code);
    sot_pop_frame(tstate, orig);
}

#endif /* 3.12 */

/*
 * frame_311.c -- CPython 3.11 only: shadow frames and frame objects.
 *
 * A shadow frame is an _PyInterpreterFrame (on the thread's data stack when
 * its chunk has room, else on the heap) that runs a new code object in
 * place of a frame the hook was handed before that frame executed
 * anything. It borrows the original frame's function (for the
 * closure, which the new code's COPY_FREE_VARS prologue reads), globals
 * and builtins, and gets copies of the argument values.
 *
 * The eval loop does not clear an entry frame on 3.11 (its caller does), so
 * this file also clears the shadow afterwards. Three interpreter routines
 * that do this job are not exported by libpython 3.11 (frame clearing,
 * handing a frame's data over to its frame object, and lazily creating a
 * frame object), so small equivalents are written here.
 */
#include "frame_compat.h"

#include <stddef.h>
#include <string.h>

/* Bytes needed for a frame holding `slots` locals-plus-stack entries. */
#define SOT_FRAME_BYTES(slots) \
    (offsetof(_PyInterpreterFrame, localsplus) + (size_t)(slots) * sizeof(PyObject *))

/* A frame is "incomplete" while its prologue (before the first traceable
 * instruction) is still running; such frames are hidden from f_back. */
static inline int
sot_is_incomplete(_PyInterpreterFrame *f)
{
    return f->owner != FRAME_OWNED_BY_GENERATOR
           && f->prev_instr < _PyCode_CODE(f->f_code) + f->f_code->_co_firsttraceable;
}

int
sot_arg_map_build(PyCodeObject *orig, PyCodeObject *target, int nargs, int *map)
{
    return sot_localsplus_arg_map(orig, target, nargs, map);
}

/* Our equivalent of lazily creating the frame object of an interpreter
 * frame. Returns a borrowed reference, or NULL with an exception set. Any
 * exception already pending is preserved. */
static PyFrameObject *
sot_frame_object_of(_PyInterpreterFrame *f)
{
    if (f->frame_obj != NULL) {
        return f->frame_obj;
    }
    PyObject *etype, *evalue, *etb;
    PyErr_Fetch(&etype, &evalue, &etb);

    PyCodeObject *co = f->f_code;
    PyFrameObject *fo = PyObject_GC_NewVar(PyFrameObject, &PyFrame_Type,
                                           co->co_nlocalsplus + co->co_stacksize);
    if (fo == NULL) {
        Py_XDECREF(etype);
        Py_XDECREF(evalue);
        Py_XDECREF(etb);
        return NULL;
    }
    fo->f_back = NULL;
    fo->f_trace = NULL;
    fo->f_lineno = 0;
    fo->f_trace_lines = 1;
    fo->f_trace_opcodes = 0;
    fo->f_fast_as_locals = 0;
    /* Point at the interpreter frame; its owner is not the frame object,
     * so deallocating `fo` never touches the frame's contents. */
    fo->f_frame = f;

    if (f->frame_obj != NULL) {
        /* The allocation ran the GC, and something it triggered created
         * the frame object meanwhile: keep that one. */
        Py_DECREF(fo);
    }
    else {
        f->frame_obj = fo;
    }
    PyErr_Restore(etype, evalue, etb);
    return f->frame_obj;
}

/* The frame object `fo` outlives the shadow frame `sh`: move the frame's
 * data (and the references it holds) into the frame object's own storage,
 * link f_back to the caller's frame object, and let the GC see it. */
static void
sot_hand_over_to_frame_object(PyFrameObject *fo, _PyInterpreterFrame *sh)
{
    size_t used = SOT_FRAME_BYTES(sh->stacktop);
    _PyInterpreterFrame *dst = (_PyInterpreterFrame *)fo->_f_frame_data;

    memcpy(dst, sh, used);
    fo->f_frame = dst;
    dst->owner = FRAME_OWNED_BY_FRAME_OBJECT;
    dst->frame_obj = NULL;
    if (sot_is_incomplete(dst)) {
        /* Failed inside its prologue: present it as having started. */
        dst->prev_instr = _PyCode_CODE(dst->f_code) + dst->f_code->_co_firsttraceable;
    }

    _PyInterpreterFrame *prev = dst->previous;
    while (prev != NULL && sot_is_incomplete(prev)) {
        prev = prev->previous;
    }
    dst->previous = NULL;
    if (prev != NULL && fo->f_back == NULL) {
        PyFrameObject *back = sot_frame_object_of(prev);
        if (back == NULL) {
            /* Out of memory: the frame just loses its f_back. */
            PyErr_Clear();
        }
        else {
            Py_INCREF(back);
            fo->f_back = back;
        }
    }
    if (!PyObject_GC_IsTracked((PyObject *)fo)) {
        PyObject_GC_Track((PyObject *)fo);
    }
}

/* Release everything the shadow frame holds (its memory is the caller's).
 * The shadow is no longer linked into the thread's frame chain. */
static void
sot_shadow_clear(_PyInterpreterFrame *sh)
{
    PyFrameObject *fo = sh->frame_obj;
    if (fo != NULL) {
        sh->frame_obj = NULL;
        if (Py_REFCNT(fo) > 1) {
            /* Still referenced (traceback, sys._getframe(), ...). */
            sot_hand_over_to_frame_object(fo, sh);
            Py_DECREF(fo);
            return;
        }
        /* Only we hold it; the frame data is not owned by it. */
        Py_DECREF(fo);
    }
    int top = sh->stacktop;
    for (int i = 0; i < top; i++) {
        Py_XDECREF(sh->localsplus[i]);
    }
    Py_XDECREF(sh->f_locals);
    Py_DECREF(sh->f_func);
    Py_DECREF(sh->f_code);
}

PyObject *
sot_shadow_run(PyThreadState *tstate, sot_frame_t *orig,
               PyCodeObject *target, const int *map, int nargs)
{
    int nlocals = target->co_nlocalsplus;
    /* The shadow goes on the thread's data stack, above the original frame,
     * as the interpreter pushes a frame (cheaper than an allocation, and in
     * memory the cache holds), when the current chunk has room; else on the
     * heap. libpython 3.11 exports neither the push that makes a new chunk
     * nor the pop, so only the bump within a chunk is done here. Every frame
     * the shadow calls is popped when it returns, so the top is back at the
     * shadow's end then, and moves back to its start. */
    size_t slots = (size_t)(nlocals + target->co_stacksize) + FRAME_SPECIALS_SIZE;
    int on_stack = _PyThreadState_HasStackSpace(tstate, slots);
    _PyInterpreterFrame *sh;
    if (SOT_LIKELY(on_stack)) {
        sh = (_PyInterpreterFrame *)tstate->datastack_top;
        tstate->datastack_top += slots;
    }
    else {
        sh = (_PyInterpreterFrame *)PyMem_Malloc(SOT_FRAME_BYTES(nlocals + target->co_stacksize));
        if (sh == NULL) {
            return PyErr_NoMemory();
        }
    }
    Py_INCREF(orig->f_func);
    sh->f_func = orig->f_func;
    sh->f_globals = orig->f_globals;
    sh->f_builtins = orig->f_builtins;
    /* NULL for function frames, except for exec() of a function's code. */
    Py_XINCREF(orig->f_locals);
    sh->f_locals = orig->f_locals;
    Py_INCREF(target);
    sh->f_code = target;
    sh->frame_obj = NULL;
    sh->previous = NULL;
    sh->prev_instr = _PyCode_CODE(target) - 1;
    sh->stacktop = nlocals;
    sh->is_entry = false;
    sh->owner = FRAME_OWNED_BY_THREAD;

    sot_localsplus_copy_args(sh->localsplus, nlocals, orig->localsplus, map, nargs);

    PyObject *result = _PyEval_EvalFrameDefault(tstate, sh, 0);
    sot_shadow_clear(sh);
    if (SOT_LIKELY(on_stack)) {
        assert(tstate->datastack_top == (PyObject **)sh + slots);
        tstate->datastack_top = (PyObject **)sh;
    }
    else {
        PyMem_Free(sh);
    }
    return result;
}

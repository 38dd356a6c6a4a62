/*
 * frame_310.c -- CPython 3.10 only: shadow frames are PyFrameObjects.
 *
 * On 3.10 the hook receives a complete PyFrameObject: its cells are already
 * created (an argument that is also a cell was moved into its cell and its
 * local slot emptied, see co_cell2arg) and its free-variable slots hold the
 * closure's cells. The shadow frame for a new code object is made with
 * PyFrame_New and filled section by section:
 *
 *   locals       argument values copied by name (plain locals of `target`)
 *   cells        a new cell per cell variable of `target`; one named like an
 *                argument of `orig` starts out holding that argument's value
 *   free vars    orig's free-variable cells (the co_freevars are the same)
 *
 * The frame's f_back is the caller's frame (PyFrame_New links it to the
 * thread's current frame, which is still the caller while the hook runs).
 * The original frame is released by the hook's caller as usual.
 */
#include "frame_compat.h"

/* In the map, a target slot index >= co_nlocals means cell number
 * (index - co_nlocals). */

int
sot_arg_map_build(PyCodeObject *orig, PyCodeObject *target, int nargs, int *map)
{
    PyObject *onames = orig->co_varnames;
    PyObject *tcells = target->co_cellvars;
    PyObject *tvars = target->co_varnames;

    if (nargs > orig->co_nlocals || nargs > PyTuple_GET_SIZE(onames)) {
        PyErr_SetString(PyExc_SystemError, "sot: argument count exceeds locals");
        return -1;
    }
    for (int i = 0; i < nargs; i++) {
        PyObject *name = PyTuple_GET_ITEM(onames, i);
        map[i] = -1;
        /* A cell first: a target argument that is also a cell lives in its
         * cell, not in its local slot. */
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(tcells); k++) {
            int eq = sot_same_name(PyTuple_GET_ITEM(tcells, k), name);
            if (eq < 0) {
                return -1;
            }
            if (eq) {
                map[i] = target->co_nlocals + (int)k;
                break;
            }
        }
        if (map[i] >= 0) {
            continue;
        }
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(tvars) && j < target->co_nlocals; j++) {
            int eq = sot_same_name(PyTuple_GET_ITEM(tvars, j), name);
            if (eq < 0) {
                return -1;
            }
            if (eq) {
                map[i] = (int)j;
                break;
            }
        }
    }
    return 0;
}

/* Put `value` (borrowed, not NULL) into slot `j` of the shadow frame. */
static inline void
sot_place(PyObject **dst, int nlocals, int j, PyObject *value)
{
    Py_INCREF(value);
    if (j < nlocals) {
        Py_XSETREF(dst[j], value);
    }
    else {
        /* A fresh cell of the shadow frame. */
        PyObject *cell = dst[j];
        PyObject *old = PyCell_GET(cell);
        PyCell_SET(cell, value);
        Py_XDECREF(old);
    }
}

PyObject *
sot_shadow_run(PyThreadState *tstate, sot_frame_t *orig,
               PyCodeObject *target, const int *map, int nargs)
{
    PyCodeObject *oco = orig->f_code;
    PyFrameObject *sh = PyFrame_New(tstate, target, orig->f_globals, orig->f_locals);
    if (sh == NULL) {
        return NULL;
    }
    if (sh->f_builtins != orig->f_builtins) {
        /* PyFrame_New derives builtins from the globals; keep the
         * function's own. */
        Py_INCREF(orig->f_builtins);
        Py_SETREF(sh->f_builtins, orig->f_builtins);
    }

    int tnlocals = target->co_nlocals;
    Py_ssize_t tncells = PyTuple_GET_SIZE(target->co_cellvars);
    Py_ssize_t tnfree = PyTuple_GET_SIZE(target->co_freevars);
    PyObject **dst = sh->f_localsplus;

    /* Cells of the new code (PyFrame_New leaves every slot empty). */
    for (Py_ssize_t k = 0; k < tncells; k++) {
        PyObject *cell = PyCell_New(NULL);
        if (cell == NULL) {
            Py_DECREF(sh);
            return NULL;
        }
        dst[tnlocals + k] = cell;
    }

    /* Arguments: plain ones from orig's local slots, then the ones that are
     * cells of orig from their cells. */
    PyObject **src = orig->f_localsplus;
    for (int i = 0; i < nargs; i++) {
        if (map[i] >= 0 && src[i] != NULL) {
            sot_place(dst, tnlocals, map[i], src[i]);
        }
    }
    if (oco->co_cell2arg != NULL) {
        PyObject **ocells = src + oco->co_nlocals;
        Py_ssize_t oncells = PyTuple_GET_SIZE(oco->co_cellvars);
        for (Py_ssize_t k = 0; k < oncells; k++) {
            Py_ssize_t a = oco->co_cell2arg[k];
            if (a == CO_CELL_NOT_AN_ARG || a >= nargs || map[a] < 0) {
                continue;
            }
            PyObject *value = PyCell_GET(ocells[k]);
            if (value != NULL) {
                sot_place(dst, tnlocals, map[a], value);
            }
        }
    }

    /* Free variables: the same cells as orig's (same co_freevars). */
    PyObject **ofree = src + oco->co_nlocals + PyTuple_GET_SIZE(oco->co_cellvars);
    PyObject **tfree = dst + tnlocals + tncells;
    for (Py_ssize_t k = 0; k < tnfree; k++) {
        Py_XINCREF(ofree[k]);
        tfree[k] = ofree[k];
    }

    PyObject *result = _PyEval_EvalFrameDefault(tstate, sh, 0);
    /* A frame object that escaped (traceback, sys._getframe) lives on. */
    Py_DECREF(sh);
    return result;
}

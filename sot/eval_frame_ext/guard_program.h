/* guard_program.h -- GuardProgram: a cache entry's guard checks as one C call (guard_program.c). */
#ifndef SOT_GUARD_PROGRAM_H
#define SOT_GUARD_PROGRAM_H

#include <Python.h>

extern PyTypeObject GuardProgram_Type;

/* The tensor-meta check of tensor_matches (tensor_guard.c) on its 5
 * arguments: 1, 0, or -1 on error. */
int sot_tensor_matches(PyObject *const *args);

/* Adds tensor_matches, dtype_matches and _set_tensor_meta (tensor_guard.c) to the module; -1 on error. */
int sot_tensor_guard_init(PyObject *module);

/* Adds GUARD_OPCODES (name -> opcode) to the module; -1 on error. */
int sot_guard_program_add_opcodes(PyObject *module);

#endif

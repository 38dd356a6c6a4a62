/* guard_program.h -- GuardProgram: a cache entry's guard checks as one C call (guard_program.c). */
#ifndef SOT_GUARD_PROGRAM_H
#define SOT_GUARD_PROGRAM_H

#include <Python.h>

extern PyTypeObject GuardProgram_Type;

/* Adds GUARD_OPCODES (name -> opcode) to the module; -1 on error. */
int sot_guard_program_add_opcodes(PyObject *module);

#endif

/* tensor_meta_api.h -- what the optional C++ extension _tensor_meta (tensor_meta.cpp) hands to the guard
 * code of _eval_frame (tensor_guard.c), through a capsule: plain C, so the C extension needs no C++ nor
 * Paddle headers. */
#ifndef SOT_TENSOR_META_API_H
#define SOT_TENSOR_META_API_H

#include <stdint.h>

#define SOT_TENSOR_META_CAPSULE "sot.eval_frame_ext._tensor_meta.api"
#define SOT_TENSOR_META_API_VERSION 1
/* The largest rank read (Paddle's DDim::kMaxRank). */
#define SOT_TENSOR_META_MAX_RANK 9

/* What `read` could tell (bits of its result). */
#define SOT_TENSOR_META_DTYPE 1
#define SOT_TENSOR_META_SHAPE 2

typedef struct {
    int version;  /* SOT_TENSOR_META_API_VERSION */
    /* Reads the dtype (a phi::DataType value) and the dims of the C++ tensor inside `x`, an instance of
     * paddle.Tensor or of a subclass (the caller checks, and that the type's `dtype` and `shape` are
     * paddle.Tensor's own getters). The result says which of them are what the Python getters give
     * (`x.dtype` as a phi::DataType, `x.shape`); 0 when neither is (an undefined tensor, a distributed
     * tensor, any tensor implementation but a dense one): the caller then reads the attributes. Never
     * raises, never calls Python. */
    int (*read)(PyObject *x, int *dtype, int *rank, int64_t *dims);
    /* Paddle's FLAGS_enable_pir_api: whether `x.dtype` is a DataType (true) or a VarType (false). */
    int (*pir_api)(void);
} sot_tensor_meta_api;

#endif

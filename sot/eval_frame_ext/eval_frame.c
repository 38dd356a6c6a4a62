/*
 * eval_frame.c -- the version-neutral part of sot's PEP 523 hook.
 *
 * While at least one thread has a callback, the interpreter's frame
 * evaluation function is sot_eval_hook. For each new frame of a thread that
 * has a callback it
 *
 *   1. lets the frame run normally if it is not eligible (generator or
 *      coroutine code, module/class body, throw, not owned by the thread,
 *      the thread is inside the callback or a guard right now, or it has a
 *      trace or profile function: debuggers, profilers and coverage see
 *      the code as written);
 *   2. looks the frame's code up in its cache record (kept in the code
 *      object's extra slot): a SKIP mark means "run normally"; otherwise
 *      each entry's guard is called as guard(globals, closure, *args),
 *      most recently hit first, and the first one that returns true has its
 *      code run in a shadow frame (see frame_compat.h), or the frame
 *      itself when that code is the frame's own (an identity entry);
 *   3. on a miss, calls callback(code, globals, builtins, closure, args),
 *      which returns None (run normally), SKIP (never again until
 *      reset_cache) or (guard, new_code) (cache it and run new_code now).
 *
 * An entry marked hook-free (nothing its code calls would be translated)
 * runs with the thread's callback suspended: when no other thread has one,
 * the interpreter's own evaluation function is back for the frames it
 * calls, at full eager speed (see callback_suspend, call_with_callback).
 *
 * A guard or the callback failing with RecursionError (the user's stack is
 * nearly full) makes the frame run normally: neither a hit nor a miss.
 *
 * Everything that depends on the interpreter's frame layout is in
 * frame_compat.h and frame_3XX.c.
 */
#include "frame_compat.h"
#include "guard_program.h"

#include <string.h>

/* ------------------------------------------------------------------ */
/* State                                                               */
/* ------------------------------------------------------------------ */

/* Per thread, in one thread-local struct: in a shared library every access
 * to a thread-local variable computes its address through __tls_get_addr
 * (a call), so each function takes the struct's address once (`T`) and
 * reads and writes the fields through it. */
typedef struct {
    /* The callback reference is owned by the thread's CallbackSlot (kept in
     * the thread-state dict, so that it is released when the thread ends);
     * these are borrowed copies for a cheap check. */
    PyObject *callback;
    PyObject *slot;
    /* The thread's callback while it is suspended for a hook-free entry
     * (see callback_suspend), else NULL. Borrowed: the suspending C call
     * holds a reference until the suspension ends. */
    PyObject *suspended;
    /* Non-zero while this thread runs the callback or a guard. */
    int busy;
} sot_thread_state;

static SOT_THREAD_LOCAL sot_thread_state tls_state = {NULL, NULL, NULL, 0};

static inline sot_thread_state *
sot_tls(void)
{
    sot_thread_state *t = &tls_state;
#if defined(__GNUC__)
    /* Hide where the pointer comes from: GCC would otherwise recompute the
     * address (another __tls_get_addr call) after every call it makes
     * rather than keep it in a register. */
    __asm__("" : "+r"(t));
#endif
    return t;
}

/* Global; only touched with the GIL held. */
static Py_ssize_t extra_index = -1;
static uint64_t cache_generation = 1;
static unsigned long long hit_counter = 0;
static Py_ssize_t threads_with_callback = 0;
static PyObject *skip_sentinel = NULL;
static PyObject *slot_key = NULL;

/* Small argument arrays live on the C stack. */
#define SOT_STACK_ARGS 16

/* ------------------------------------------------------------------ */
/* Cache records (one per code object, in its extra slot)              */
/* ------------------------------------------------------------------ */

typedef struct sot_entry {
    struct sot_entry *next;
    Py_ssize_t refs;        /* one for the list, one per user in progress */
    int linked;             /* still in its record's list */
    int owns_code;          /* 0 when code is the record's own code object */
    PyObject *guard;        /* strong */
    PyCodeObject *code;     /* strong, except for an identity translation:
                               the record lives exactly as long as its code,
                               and a strong self-reference would make the
                               code immortal */
    int frames;             /* Python frames the code needs on top of its own
                               (see frames_fit) */
    int hook_free;          /* nothing the code calls needs the hook: the
                               thread's callback is suspended while it runs
                               (see callback_suspend) */
    PyObject *relaxed;      /* NULL: the guard runs on every call. Else the
                               code is right whatever the inputs (see
                               relaxed_guard_doc) and the full guard runs on
                               every SOT_RELAXED_PERIOD-th hit only: on the
                               calls between, `relaxed` runs instead (a
                               cheaper guard), or nothing when it is Py_True.
                               Strong. */
    int countdown;          /* relaxed hits left before the next full guard */
    int nargs;
    int map[1];             /* nargs entries: argument i -> slot in code */
} sot_entry;

/* Hits of a relaxed entry per full guard check (see sot_entry.relaxed). */
#define SOT_RELAXED_PERIOD 32

typedef struct {
    uint64_t generation;    /* entries/skip are valid for this generation */
    uint64_t version;       /* bumped on every change of the list */
    int skipped;
    Py_ssize_t size;
    sot_entry *head;        /* most recently hit first */
} sot_record;

static void
entry_decref(sot_entry *e)
{
    if (--e->refs > 0) {
        return;
    }
    PyObject *guard = e->guard;
    PyObject *relaxed = e->relaxed;
    PyCodeObject *code = e->owns_code ? e->code : NULL;
    PyMem_Free(e);
    Py_DECREF(guard);
    Py_XDECREF(relaxed);
    Py_XDECREF(code);
}

/* Empty a record. The list is detached first, so that code run by the
 * decrefs finds a consistent (empty) record. */
static void
record_clear(sot_record *r)
{
    sot_entry *e = r->head;
    r->head = NULL;
    r->size = 0;
    r->skipped = 0;
    r->version++;
    r->generation = cache_generation;
    while (e != NULL) {
        sot_entry *next = e->next;
        e->linked = 0;
        e->next = NULL;
        entry_decref(e);
        e = next;
    }
}

/* Extra-slot free function: the code object is being destroyed. */
static void
record_free(void *p)
{
    sot_record *r = (sot_record *)p;
    if (r == NULL) {
        return;
    }
    record_clear(r);
    PyMem_Free(r);
}

static sot_record *record_get_slow(PyCodeObject *code, sot_record *r, int create);

/* The current-generation record of `code`. With create == 0, returns NULL
 * (no exception) for a code never seen. Returns NULL with an exception set
 * on failure. Inline: the hook looks up every new frame's record, and most
 * of them are found as they are (a SKIP mark, or entries). */
static inline sot_record *
record_get(PyCodeObject *code, int create)
{
    void *p = NULL;
    if (SOT_UNLIKELY(SOT_CODE_GET_EXTRA((PyObject *)code, extra_index, &p) < 0)) {
        return NULL;
    }
    sot_record *r = (sot_record *)p;
    if (SOT_LIKELY(r != NULL && r->generation == cache_generation)) {
        return r;
    }
    return record_get_slow(code, r, create);
}

/* record_get for a code never seen or whose record is of an older generation. */
static SOT_NOINLINE sot_record *
record_get_slow(PyCodeObject *code, sot_record *r, int create)
{
    if (r == NULL) {
        if (!create) {
            return NULL;
        }
        r = (sot_record *)PyMem_Calloc(1, sizeof(sot_record));
        if (r == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        r->generation = cache_generation;
        if (SOT_CODE_SET_EXTRA((PyObject *)code, extra_index, r) < 0) {
            PyMem_Free(r);
            return NULL;
        }
        return r;
    }
    if (r->generation != cache_generation) {
        record_clear(r);
    }
    return r;
}

static void
record_push_front(sot_record *r, sot_entry *e)
{
    e->next = r->head;
    e->linked = 1;
    r->head = e;
    r->size++;
    r->version++;
}

static void
record_move_to_front(sot_record *r, sot_entry *e)
{
    if (r->head == e || !e->linked) {
        return;
    }
    sot_entry **pp = &r->head;
    while (*pp != NULL && *pp != e) {
        pp = &(*pp)->next;
    }
    if (*pp == NULL) {
        return;
    }
    *pp = e->next;
    e->next = r->head;
    r->head = e;
    r->version++;
}

/* Validate a (guard, new_code[, frames]) result and make an entry for it
 * (refs=1). */
static sot_entry *
entry_new(PyCodeObject *orig, PyObject *guard, PyObject *new_code, int frames, int hook_free,
          PyObject *relaxed, int nargs)
{
    if (relaxed == Py_None || relaxed == Py_False) {
        relaxed = NULL;
    }
    if (relaxed != NULL && relaxed != Py_True && !PyCallable_Check(relaxed)) {
        PyErr_Format(PyExc_TypeError,
                     "sot eval-frame callback: the relaxed guard of an entry must be None, "
                     "True or callable, not %.100s", Py_TYPE(relaxed)->tp_name);
        return NULL;
    }
    if (!PyCallable_Check(guard)) {
        PyErr_Format(PyExc_TypeError,
                     "sot eval-frame callback: the guard of the returned (guard, code) "
                     "pair must be callable, not %.100s", Py_TYPE(guard)->tp_name);
        return NULL;
    }
    if (!PyCode_Check(new_code)) {
        PyErr_Format(PyExc_TypeError,
                     "sot eval-frame callback: the code of the returned (guard, code) "
                     "pair must be a code object, not %.100s", Py_TYPE(new_code)->tp_name);
        return NULL;
    }
    PyCodeObject *target = (PyCodeObject *)new_code;
    if (target->co_flags & SOT_NEVER_HOOK_FLAGS) {
        PyErr_Format(PyExc_ValueError,
                     "sot eval-frame callback: the new code for %U must not be a "
                     "generator or coroutine code", orig->co_name);
        return NULL;
    }
    if (!(target->co_flags & CO_OPTIMIZED)) {
        PyErr_Format(PyExc_ValueError,
                     "sot eval-frame callback: the new code for %U must be a function "
                     "code (CO_OPTIMIZED), not a module or class body", orig->co_name);
        return NULL;
    }
    PyObject *ofree = PyObject_GetAttrString((PyObject *)orig, "co_freevars");
    if (ofree == NULL) {
        return NULL;
    }
    PyObject *tfree = PyObject_GetAttrString(new_code, "co_freevars");
    if (tfree == NULL) {
        Py_DECREF(ofree);
        return NULL;
    }
    int same = PyObject_RichCompareBool(ofree, tfree, Py_EQ);
    if (same == 0) {
        PyErr_Format(PyExc_ValueError,
                     "sot eval-frame callback: the new code for %U must have the same "
                     "free variables as the original, in the same order (the closure "
                     "of the original function is reused): original co_freevars=%R, "
                     "new co_freevars=%R", orig->co_name, ofree, tfree);
    }
    Py_DECREF(ofree);
    Py_DECREF(tfree);
    if (same <= 0) {
        return NULL;
    }

    size_t bytes = offsetof(sot_entry, map) + (size_t)(nargs > 0 ? nargs : 1) * sizeof(int);
    sot_entry *e = (sot_entry *)PyMem_Malloc(bytes);
    if (e == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    if (sot_arg_map_build(orig, target, nargs, e->map) < 0) {
        PyMem_Free(e);
        return NULL;
    }
    e->next = NULL;
    e->refs = 1;
    e->linked = 0;
    e->nargs = nargs;
    e->frames = frames;
    e->hook_free = hook_free;
    Py_XINCREF(relaxed);
    e->relaxed = relaxed;
    e->countdown = 0;
    Py_INCREF(guard);
    e->guard = guard;
    e->owns_code = (target != orig);
    if (e->owns_code) {
        Py_INCREF(new_code);
    }
    e->code = target;
    return e;
}

/* ------------------------------------------------------------------ */
/* The hook                                                            */
/* ------------------------------------------------------------------ */

/* 1 if the thread's recursion limit leaves room for the frames an entry's
 * code needs on top of its own. The new code may do in one frame what the
 * original does in several (calls inlined into one graph, a recursion
 * unrolled), or need frames the original does not (the runner of a compiled
 * program): near the limit the frame runs as written instead, so that
 * RecursionError comes where it comes eagerly, and only from the user's own
 * calls. */
static inline int
frames_fit(PyThreadState *tstate, sot_entry *e)
{
    return e->frames <= 0 || sot_frames_left(tstate) > e->frames;
}

/* Outcome of a guard that could not run because the stack is full. */
#define SOT_GUARD_OUT_OF_STACK (-2)

/* Clear a RecursionError (returns 1), or leave any other exception or none
 * alone (returns 0). The stack being full near the user's recursion limit
 * says nothing about the frame: the hook then runs it as written, which
 * fails exactly where eager code fails. */
static int
clear_recursion_error(void)
{
    if (PyErr_Occurred() && PyErr_ExceptionMatches(PyExc_RecursionError)) {
        PyErr_Clear();
        return 1;
    }
    return 0;
}

/* Call one guard with the hook disabled for this thread. 1: pass,
 * 0: fail (an exception counts as a failure and is cleared),
 * SOT_GUARD_OUT_OF_STACK: it raised RecursionError (cleared). */
static int
guard_call(PyObject *guard, PyObject **argv, Py_ssize_t argc)
{
    sot_thread_state *T = sot_tls();
    int saved = T->busy;
    T->busy = 1;
    PyObject *res = PyObject_Vectorcall(guard, argv,
                                        (size_t)argc | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    int ok;
    if (res == NULL) {
        ok = -1;
    }
    else if (res == Py_True) {
        ok = 1;
    }
    else if (res == Py_False || res == Py_None) {
        ok = 0;
    }
    else {
        ok = PyObject_IsTrue(res);
    }
    Py_XDECREF(res);
    T->busy = saved;
    if (ok < 0) {
        ok = clear_recursion_error() ? SOT_GUARD_OUT_OF_STACK : 0;
        PyErr_Clear();
    }
    return ok;
}

/* Find the first entry whose guard passes; returns it with an extra
 * reference, or NULL (no exception) on a miss. *out_of_stack is set when a
 * guard could not run for lack of stack (then NULL, and no miss). */
static sot_entry *
guard_scan(sot_record *r, PyObject **argv, Py_ssize_t argc, int *out_of_stack)
{
    sot_entry *e = r->head;
    while (e != NULL) {
        uint64_t version = r->version;
        e->refs++;
        int ok;
        if (e->relaxed != NULL && e->countdown > 0) {
            /* (the relaxed check is a part of the guard: when it fails, so would the guard) */
            ok = e->relaxed == Py_True ? 1 : guard_call(e->relaxed, argv, argc);
            if (ok == 1) {
                e->countdown--;
            }
        }
        else {
            ok = guard_call(e->guard, argv, argc);
            if (ok == 1) {
                e->countdown = SOT_RELAXED_PERIOD;
            }
        }
        if (ok == SOT_GUARD_OUT_OF_STACK) {
            entry_decref(e);
            *out_of_stack = 1;
            return NULL;
        }
        if (ok) {
            record_move_to_front(r, e);
            return e;
        }
        if (r->version != version) {
            /* The list changed while the guard ran (another thread, or
             * reset_cache() called from the guard): give up, a miss. */
            entry_decref(e);
            return NULL;
        }
        sot_entry *next = e->next;
        entry_decref(e);
        e = next;
    }
    return NULL;
}

/* Outcome of sot_eval_hooked. */
#define SOT_RUN_DEFAULT 0   /* caller evaluates the original frame */
#define SOT_DONE 1          /* *result holds the frame's result (or NULL) */
#define SOT_RUN_HOOK_FREE 2 /* caller evaluates the original frame with the
                               thread's callback suspended (a hook-free
                               identity entry passed its guard) */

static PyObject *callback_suspend(sot_thread_state *T);
static PyObject *callback_resume(sot_thread_state *T, PyObject *callback, PyObject *result);

/* Run an entry's code in a shadow of `frame`; a hook-free entry's with the
 * thread's callback suspended. */
static PyObject *
shadow_run_entry(PyThreadState *tstate, sot_frame_t *frame, sot_entry *e)
{
    if (!e->hook_free) {
        return sot_shadow_run(tstate, frame, e->code, e->map, e->nargs);
    }
    sot_thread_state *T = sot_tls();
    PyObject *callback = callback_suspend(T);
    return callback_resume(T, callback, sot_shadow_run(tstate, frame, e->code, e->map, e->nargs));
}

static PyObject *
call_callback(PyCodeObject *co, sot_frame_t *frame, PyObject *closure,
              PyObject **args, int nargs)
{
    PyObject *tuple = PyTuple_New(nargs);
    if (tuple == NULL) {
        return NULL;
    }
    for (int i = 0; i < nargs; i++) {
        Py_INCREF(args[i]);
        PyTuple_SET_ITEM(tuple, i, args[i]);
    }
    sot_thread_state *T = sot_tls();
    PyObject *callback = T->callback;
    Py_INCREF(callback);
    PyObject *cargs[6] = {
        NULL, (PyObject *)co, sot_frame_globals(frame), sot_frame_builtins(frame),
        closure, tuple,
    };
    int saved = T->busy;
    T->busy = 1;
    PyObject *res = PyObject_Vectorcall(callback, cargs + 1,
                                        5 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    T->busy = saved;
    Py_DECREF(callback);
    Py_DECREF(tuple);
    return res;
}

/* Handle a miss: ask the callback, then act on its answer. `args` are the
 * nargs argument values (borrowed). */
static int
sot_eval_miss(PyThreadState *tstate, sot_frame_t *frame, PyCodeObject *co,
              PyObject *closure, PyObject **args, int nargs, PyObject **result)
{
    PyObject *res = call_callback(co, frame, closure, args, nargs);
    if (res == NULL) {
        if (clear_recursion_error()) {
            return SOT_RUN_DEFAULT;  /* no room to even start the callback */
        }
        *result = NULL;
        return SOT_DONE;
    }
    if (res == Py_None) {
        Py_DECREF(res);
        return SOT_RUN_DEFAULT;
    }
    if (res == skip_sentinel) {
        Py_DECREF(res);
        sot_record *r = record_get(co, 1);
        if (r == NULL) {
            *result = NULL;
            return SOT_DONE;
        }
        r->skipped = 1;
        return SOT_RUN_DEFAULT;
    }
    Py_ssize_t size = PyTuple_Check(res) ? PyTuple_GET_SIZE(res) : 0;
    if (size < 2 || size > 5 || (size >= 3 && !PyLong_Check(PyTuple_GET_ITEM(res, 2)))
        || (size >= 4 && !PyBool_Check(PyTuple_GET_ITEM(res, 3)))) {
        PyErr_Format(PyExc_TypeError,
                     "sot eval-frame callback must return None, SKIP or a "
                     "(guard, code), (guard, code, frames: int), "
                     "(guard, code, frames: int, hook_free: bool) or "
                     "(guard, code, frames: int, hook_free: bool, relaxed) tuple, not %.100R", res);
        Py_DECREF(res);
        *result = NULL;
        return SOT_DONE;
    }
    int hook_free = size >= 4 && PyTuple_GET_ITEM(res, 3) == Py_True;
    PyObject *relaxed = size == 5 ? PyTuple_GET_ITEM(res, 4) : NULL;
    int frames = 0;
    if (size >= 3) {
        long value = PyLong_AsLong(PyTuple_GET_ITEM(res, 2));
        if (value == -1 && PyErr_Occurred()) {
            Py_DECREF(res);
            *result = NULL;
            return SOT_DONE;
        }
        frames = value < 0 ? 0 : (value > INT_MAX ? INT_MAX : (int)value);
    }
    sot_entry *e = entry_new(co, PyTuple_GET_ITEM(res, 0), PyTuple_GET_ITEM(res, 1), frames,
                             hook_free, relaxed, nargs);
    Py_DECREF(res);
    if (e == NULL) {
        *result = NULL;
        return SOT_DONE;
    }
    /* The callback may have run reset_cache(): fetch the record again. */
    sot_record *r = record_get(co, 1);
    if (r == NULL) {
        entry_decref(e);
        *result = NULL;
        return SOT_DONE;
    }
    record_push_front(r, e);
    if (!frames_fit(tstate, e)) {
        return SOT_RUN_DEFAULT;  /* (the callback itself ran with extra room) */
    }
    e->refs++;
    *result = shadow_run_entry(tstate, frame, e);
    entry_decref(e);
    return SOT_DONE;
}

/* The frame of `co`, whose record `r` has no SKIP mark: its cache lookup,
 * or the callback on a miss. */
static SOT_NOINLINE int
sot_eval_hooked(PyThreadState *tstate, sot_frame_t *frame, PyCodeObject *co,
                sot_record *r, PyObject **result)
{
    int nargs = sot_code_nargs(co);
    PyObject *stack_buf[SOT_STACK_ARGS + 3];
    PyObject **buf = stack_buf;
    if (nargs + 3 > SOT_STACK_ARGS + 3) {
        buf = (PyObject **)PyMem_Malloc((size_t)(nargs + 3) * sizeof(PyObject *));
        if (buf == NULL) {
            *result = PyErr_NoMemory();
            return SOT_DONE;
        }
    }
    int outcome = SOT_RUN_DEFAULT;
    /* buf[0] is scratch space for PY_VECTORCALL_ARGUMENTS_OFFSET. */
    PyObject **argv = buf + 1;
    PyObject *closure = sot_frame_closure_ref(frame);
    if (closure == NULL) {
        *result = NULL;
        outcome = SOT_DONE;
        goto done;
    }
    argv[0] = sot_frame_globals(frame);
    argv[1] = closure;
    if (sot_frame_collect_args(frame, nargs, argv + 2) < 0) {
        goto done;
    }

    /* Cache lookup. */
    if (r->head != NULL) {
        int out_of_stack = 0;
        sot_entry *hit = guard_scan(r, argv, nargs + 2, &out_of_stack);
        if (out_of_stack) {
            goto done;  /* run the frame as written */
        }
        if (hit != NULL && !frames_fit(tstate, hit)) {
            entry_decref(hit);
            goto done;  /* run the frame as written */
        }
        if (hit != NULL) {
            hit_counter++;
            if (!hit->owns_code) {
                /* An identity entry (the original code runs natively behind
                 * its guard): evaluate the frame itself, no shadow needed. */
                if (hit->hook_free) {
                    outcome = SOT_RUN_HOOK_FREE;
                }
                entry_decref(hit);
                goto done;
            }
            Py_CLEAR(closure);
            if (buf != stack_buf) {
                PyMem_Free(buf);
                buf = stack_buf;
            }
            *result = shadow_run_entry(tstate, frame, hit);
            entry_decref(hit);
            outcome = SOT_DONE;
            goto done;
        }
    }

    /* Miss: ask the callback. */
    outcome = sot_eval_miss(tstate, frame, co, closure, argv + 2, nargs, result);

done:
    Py_XDECREF(closure);
    if (buf != stack_buf) {
        PyMem_Free(buf);
    }
    return outcome;
}

/* ------------------------------------------------------------------ */
/* One traceback entry per user frame                                  */
/* ------------------------------------------------------------------ */

/* same_activation(inner_frame, outer_frame) -> bool, set by
 * set_traceback_merger: whether two frames of consecutive traceback entries
 * are pieces of one call of a user function split by graph breaks (its
 * resume functions, loop bodies). NULL: tracebacks are left alone. */
static PyObject *continues_predicate = NULL;

static int
same_function(PyCodeObject *a, PyCodeObject *b)
{
    if (a == b) {
        return 1;
    }
    return a->co_firstlineno == b->co_firstlineno
        && PyUnicode_Compare(a->co_name, b->co_name) == 0
        && PyUnicode_Compare(a->co_filename, b->co_filename) == 0;
}

/* Whether the traceback entry `tb` (of a frame of the function of `co`) is
 * followed by a later piece of the same call (same_activation). Called with
 * no exception pending; leaves none. */
static int
continued_by_next(PyCodeObject *co, PyTracebackObject *tb)
{
    if (tb->tb_next == NULL || tb->tb_frame == NULL || tb->tb_next->tb_frame == NULL) {
        return 0;
    }
    PyCodeObject *outer = PyFrame_GetCode(tb->tb_frame);
    PyCodeObject *inner = PyFrame_GetCode(tb->tb_next->tb_frame);
    int continued = 0;
    if (same_function(outer, co) && same_function(inner, co)) {
        sot_thread_state *T = sot_tls();
        int saved = T->busy;
        T->busy = 1;  /* (the predicate's own frames are not hooked) */
        PyObject *answer = PyObject_CallFunctionObjArgs(continues_predicate, (PyObject *)tb->tb_next->tb_frame,
                                                        (PyObject *)tb->tb_frame, NULL);
        T->busy = saved;
        if (answer == NULL) {
            PyErr_Clear();  /* (the traceback stays as it is) */
        }
        continued = answer == Py_True;
        Py_XDECREF(answer);
    }
    Py_DECREF(outer);
    Py_DECREF(inner);
    return continued;
}

/* The traceback entry to keep in place of `head` (a new reference), or NULL
 * to keep `head`: the first entry after it that no later piece of the same
 * call follows, when `head` (an entry of the frame of `co`) is followed by
 * one. Eager shows the call once, at the line where it raised, not once per
 * piece graph breaks split it into (some pieces run without the hook, a
 * native re-raise: their entries go with the frame's own). */
static PyObject *
continued_entry(PyCodeObject *co, PyObject *head)
{
    if (head == NULL || !PyTraceBack_Check(head)) {
        return NULL;
    }
    PyTracebackObject *tb = (PyTracebackObject *)head;
    while (continued_by_next(co, tb)) {
        tb = tb->tb_next;
    }
    return tb == (PyTracebackObject *)head ? NULL : Py_NewRef((PyObject *)tb);
}

/* A hooked frame of `co` ends with an exception: drop its traceback entry
 * when the next one continues it (continued_entry). */
static void
merge_continued_entry(PyCodeObject *co)
{
    if (continues_predicate == NULL || !PyErr_Occurred()) {
        return;
    }
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *exc = PyErr_GetRaisedException();
    PyObject *head = PyException_GetTraceback(exc);
    PyObject *next = continued_entry(co, head);
    if (next != NULL) {
        PyException_SetTraceback(exc, next);
        Py_DECREF(next);
    }
    Py_XDECREF(head);
    PyErr_SetRaisedException(exc);
#else
    PyObject *type, *value, *head;
    PyErr_Fetch(&type, &value, &head);
    PyObject *next = continued_entry(co, head);
    if (next != NULL) {
        if (value != NULL && PyExceptionInstance_Check(value)) {
            PyObject *own = PyException_GetTraceback(value);
            if (own == head) {
                PyException_SetTraceback(value, next);
            }
            Py_XDECREF(own);
        }
        Py_XSETREF(head, next);
    }
    PyErr_Restore(type, value, head);
#endif
}

PyDoc_STRVAR(set_traceback_merger_doc,
"set_traceback_merger($module, same_activation, /)\n--\n\n"
"same_activation(inner_frame, outer_frame) -> bool, or None: when a hooked\n"
"frame ends with an exception and the next traceback entry is the same\n"
"function, the frame's own entry is dropped if same_activation() says the\n"
"two are pieces of one call split by graph breaks (a resume function, a\n"
"loop body).");

static PyObject *
m_set_traceback_merger(PyObject *module, PyObject *predicate)
{
    if (predicate != Py_None && !PyCallable_Check(predicate)) {
        PyErr_SetString(PyExc_TypeError, "set_traceback_merger expects a callable or None");
        return NULL;
    }
    Py_XSETREF(continues_predicate, predicate == Py_None ? NULL : Py_NewRef(predicate));
    Py_RETURN_NONE;
}

/* The result of a hooked frame of `co` (a frame sot translated, or runs
 * natively behind a guard): on an exception, one traceback entry per user
 * frame. Steals the reference to `co` the hook took (the frame, which held
 * one, may be gone). */
static inline PyObject *
hooked_result(PyCodeObject *co, PyObject *result)
{
    if (SOT_UNLIKELY(result == NULL)) {
        merge_continued_entry(co);
    }
    Py_DECREF(co);
    return result;
}

static PyObject *
sot_eval_hook(PyThreadState *tstate, sot_frame_t *frame, int throwflag)
{
    sot_thread_state *T = sot_tls();
    if (T->callback == NULL || T->busy || throwflag || sot_thread_is_traced(tstate)) {
        return sot_eval_default(tstate, frame, throwflag);
    }
    PyCodeObject *co = sot_frame_code(frame);
    if ((co->co_flags & SOT_NEVER_HOOK_FLAGS) || !(co->co_flags & CO_OPTIMIZED)
        || !sot_frame_is_fresh(frame)) {
        return sot_eval_default(tstate, frame, throwflag);
    }
    PyObject *result;
    int outcome;
    sot_record *r = record_get(co, 1);
    if (SOT_UNLIKELY(r == NULL)) {
        result = NULL;
        outcome = SOT_DONE;
    }
    else if (r->skipped) {
        /* Most frames a translated call makes are library code marked SKIP:
         * decided here, without sot_eval_hooked's argument buffer. */
        return sot_eval_default(tstate, frame, throwflag);
    }
    else {
        outcome = sot_eval_hooked(tstate, frame, co, r, &result);
    }
    Py_INCREF(co);  /* (for hooked_result) */
    if (outcome == SOT_DONE) {
        /* The original frame was not evaluated (its shadow ran instead, or
         * the callback failed): release it. */
        sot_frame_discard(tstate, frame);
        return hooked_result(co, result);
    }
    if (outcome == SOT_RUN_HOOK_FREE) {
        PyObject *callback = callback_suspend(T);
        return hooked_result(co, callback_resume(T, callback, sot_eval_default(tstate, frame, throwflag)));
    }
    return hooked_result(co, sot_eval_default(tstate, frame, throwflag));
}

/* ------------------------------------------------------------------ */
/* Per-thread callback slot                                            */
/* ------------------------------------------------------------------ */

/* Owns a thread's callback; lives in the thread-state dict, so a thread
 * that ends with a callback set still gives up its share of the hook. */
typedef struct {
    PyObject_HEAD
    PyObject *callback;
    unsigned long thread_id;
    PyInterpreterState *interp;
} CallbackSlot;

static void
hook_acquire(PyInterpreterState *interp)
{
    if (threads_with_callback++ == 0) {
        _PyInterpreterState_SetEvalFrameFunc(interp, sot_eval_hook);
    }
}

static void
hook_release(PyInterpreterState *interp)
{
    if (--threads_with_callback == 0) {
        _PyInterpreterState_SetEvalFrameFunc(interp, _PyEval_EvalFrameDefault);
    }
}

static int callback_set(PyObject *callback);

/* Suspension: while an entry known not to need the hook runs (nothing it
 * calls would be translated), the thread's callback is taken off its slot,
 * so that, when no other thread has one, the interpreter's own frame
 * evaluation runs everything the entry calls (CPython 3.11+ then also
 * inlines Python-to-Python calls again). The callback stays the thread's
 * logical callback (get_callback, set_callback's previous value), and
 * call_with_callback re-installs it for one call (a trampoline to a resume
 * function, which must still be translated). A set_callback meanwhile ends
 * the suspension: its choice stays. Returns a new reference to the
 * suspended callback for callback_resume, or NULL when there is none. */
static PyObject *
callback_suspend(sot_thread_state *T)
{
    CallbackSlot *s = (CallbackSlot *)T->slot;
    if (T->callback == NULL || s == NULL) {
        return NULL;
    }
    PyObject *callback = s->callback;   /* the slot's reference moves to the caller */
    PyInterpreterState *interp = s->interp;
    s->callback = NULL;
    s->interp = NULL;
    T->callback = NULL;
    T->suspended = callback;
    if (interp != NULL) {
        hook_release(interp);
    }
    return callback;
}

/* Set this thread's callback to `callback` after a call that returned
 * `result` (NULL with its exception pending, which is kept): returns
 * `result`, or NULL with the error when the callback could not be set. */
static PyObject *
callback_set_after(PyObject *callback, PyObject *result)
{
    PyObject *etype = NULL, *evalue = NULL, *etb = NULL;
    if (result == NULL) {
        PyErr_Fetch(&etype, &evalue, &etb);
    }
    if (callback_set(callback) < 0) {
        Py_CLEAR(result);
        Py_XDECREF(etype);
        Py_XDECREF(evalue);
        Py_XDECREF(etb);
    }
    else if (result == NULL) {
        PyErr_Restore(etype, evalue, etb);
    }
    return result;
}

/* End the suspension callback_suspend returned `callback` for (unless a
 * set_callback already ended it), on any exit path of the frame: `result`
 * is the frame's result (NULL with its exception pending), returned. */
static PyObject *
callback_resume(sot_thread_state *T, PyObject *callback, PyObject *result)
{
    if (callback == NULL) {
        return result;
    }
    if (T->suspended == callback) {
        CallbackSlot *s = (CallbackSlot *)T->slot;
        if (SOT_LIKELY(s != NULL && s->callback == NULL && s->interp == NULL)) {
            /* The slot is as callback_suspend left it (the usual case): the
             * reference the suspension held goes back to it, and nothing can
             * fail, so a pending exception stays as it is. What callback_set
             * does, without its checks. */
            T->suspended = NULL;
            s->callback = callback;
            T->callback = callback;
            s->interp = PyInterpreterState_Get();
            hook_acquire(s->interp);
            return result;
        }
        result = callback_set_after(callback, result);
    }
    Py_DECREF(callback);
    return result;
}

static void
slot_dealloc(PyObject *self)
{
    sot_thread_state *T = sot_tls();
    CallbackSlot *s = (CallbackSlot *)self;
    if (s->thread_id == PyThread_get_thread_ident() && T->slot == self) {
        T->callback = NULL;
        T->slot = NULL;
    }
    PyObject *callback = s->callback;
    s->callback = NULL;
    if (s->interp != NULL) {
        hook_release(s->interp);
    }
    Py_TYPE(self)->tp_free(self);
    Py_XDECREF(callback);
}

static PyTypeObject CallbackSlot_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "sot.eval_frame_ext._eval_frame._CallbackSlot",
    .tp_basicsize = sizeof(CallbackSlot),
    .tp_dealloc = slot_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .tp_doc = "Owns the eval-frame callback of one thread (internal).",
};

/* Set this thread's callback (NULL or None to remove). 0 or -1. */
static int
callback_set(PyObject *callback)
{
    sot_thread_state *T = sot_tls();
    if (callback == Py_None) {
        callback = NULL;
    }
    if (callback != NULL && !PyCallable_Check(callback)) {
        PyErr_Format(PyExc_TypeError, "callback must be callable or None, not %.100s",
                     Py_TYPE(callback)->tp_name);
        return -1;
    }
    T->suspended = NULL;  /* an explicit choice ends a suspension */
    /* The slot stays in the thread-state dict once made: symbolic_translate sets and clears the
     * callback around every call, and making a slot and a dict entry each time cost more than the
     * rest of a cache hit. Clearing only empties it and gives up its share of the hook. */
    if (callback == NULL) {
        if (T->slot == NULL) {
            return 0;
        }
        CallbackSlot *s = (CallbackSlot *)T->slot;
        PyObject *old = s->callback;
        PyInterpreterState *interp = s->interp;
        T->callback = NULL;
        s->callback = NULL;
        s->interp = NULL;
        if (interp != NULL) {
            hook_release(interp);
        }
        Py_XDECREF(old);
        return 0;
    }
    if (T->slot != NULL) {
        CallbackSlot *s = (CallbackSlot *)T->slot;
        PyObject *old = s->callback;
        Py_INCREF(callback);
        s->callback = callback;
        T->callback = callback;
        if (s->interp == NULL) {
            s->interp = PyInterpreterState_Get();
            hook_acquire(s->interp);
        }
        Py_XDECREF(old);
        return 0;
    }
    PyObject *dict = PyThreadState_GetDict();
    if (dict == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_RuntimeError, "no thread state dict");
        }
        return -1;
    }
    CallbackSlot *s = PyObject_New(CallbackSlot, &CallbackSlot_Type);
    if (s == NULL) {
        return -1;
    }
    Py_INCREF(callback);
    s->callback = callback;
    s->thread_id = PyThread_get_thread_ident();
    s->interp = NULL;
    if (PyDict_SetItem(dict, slot_key, (PyObject *)s) < 0) {
        Py_DECREF(s);
        return -1;
    }
    /* The dict owns the slot now. */
    s->interp = PyInterpreterState_Get();
    hook_acquire(s->interp);
    T->slot = (PyObject *)s;
    T->callback = callback;
    Py_DECREF(s);
    return 0;
}

/* ------------------------------------------------------------------ */
/* Module functions                                                    */
/* ------------------------------------------------------------------ */

PyDoc_STRVAR(set_callback_doc,
"set_callback($module, callback, /)\n--\n\n"
"Set the eval-frame callback of the current thread (None removes it) and\n"
"return the previous one (or None).\n\n"
"The callback is called as callback(code, globals, builtins, closure, args)\n"
"for each new function frame of this thread whose code has no cache entry\n"
"with a passing guard, and returns None, SKIP or a (guard, new_code) pair.\n"
"The frame evaluation hook is installed while any thread has a callback.");

/* The thread's callback, suspended or not (borrowed), or Py_None. */
static PyObject *
logical_callback(void)
{
    sot_thread_state *T = sot_tls();
    if (T->callback != NULL) {
        return T->callback;
    }
    return T->suspended != NULL ? T->suspended : Py_None;
}

static PyObject *
m_set_callback(PyObject *module, PyObject *callback)
{
    PyObject *prev = logical_callback();
    Py_INCREF(prev);
    if (callback_set(callback) < 0) {
        Py_DECREF(prev);
        return NULL;
    }
    return prev;
}

PyDoc_STRVAR(get_callback_doc,
"get_callback($module, /)\n--\n\n"
"Return the eval-frame callback of the current thread, or None.");

static PyObject *
m_get_callback(PyObject *module, PyObject *unused)
{
    PyObject *cb = logical_callback();
    Py_INCREF(cb);
    return cb;
}

PyDoc_STRVAR(callback_active_doc,
"callback_active($module, /)\n--\n\n"
"True if this thread's callback is set and not suspended: new frames of\n"
"this thread go to the hook. While a hook-free cache entry runs, its\n"
"callback is suspended (get_callback() still returns it).");

static PyObject *
m_callback_active(PyObject *module, PyObject *unused)
{
    return PyBool_FromLong(sot_tls()->callback != NULL);
}

PyDoc_STRVAR(call_with_callback_doc,
"call_with_callback($module, fn, /, *args)\n--\n\n"
"fn(*args), with this thread's callback re-installed for the call if a\n"
"hook-free entry suspended it (and suspended again afterwards, unless the\n"
"call changed it). The trampolines of native code call resume functions\n"
"through it: a path taken for the first time is still translated.");

static PyObject *
m_call_with_callback(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1) {
        PyErr_SetString(PyExc_TypeError, "call_with_callback expects a callable");
        return NULL;
    }
    sot_thread_state *T = sot_tls();
    PyObject *callback = T->suspended;
    if (callback == NULL) {
        return PyObject_Vectorcall(args[0], args + 1, (size_t)(nargs - 1), NULL);
    }
    Py_INCREF(callback);
    if (callback_set(callback) < 0) {
        Py_DECREF(callback);
        return NULL;
    }
    PyObject *result = PyObject_Vectorcall(args[0], args + 1, (size_t)(nargs - 1), NULL);
    if (T->callback == callback) {
        /* The suspending frame still holds its own reference. */
        Py_XDECREF(callback_suspend(T));
    }
    Py_DECREF(callback);
    return result;
}

PyDoc_STRVAR(reset_cache_doc,
"reset_cache($module, /)\n--\n\n"
"Forget every cache entry and SKIP mark of every code object.");

static PyObject *
m_reset_cache(PyObject *module, PyObject *unused)
{
    cache_generation++;
    Py_RETURN_NONE;
}

static int
check_code(PyObject *code)
{
    if (!PyCode_Check(code)) {
        PyErr_Format(PyExc_TypeError, "expected a code object, not %.100s",
                     Py_TYPE(code)->tp_name);
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(cache_size_doc,
"cache_size($module, code, /)\n--\n\n"
"Number of cache entries of a code object.");

static PyObject *
m_cache_size(PyObject *module, PyObject *code)
{
    if (check_code(code) < 0) {
        return NULL;
    }
    sot_record *r = record_get((PyCodeObject *)code, 0);
    if (r == NULL && PyErr_Occurred()) {
        return NULL;
    }
    return PyLong_FromSsize_t(r != NULL ? r->size : 0);
}

PyDoc_STRVAR(cache_entries_doc,
"cache_entries($module, code, /)\n--\n\n"
"The cache entries of a code object as a list of (guard, new_code),\n"
"most recently hit first.");

static PyObject *
m_cache_entries(PyObject *module, PyObject *code)
{
    if (check_code(code) < 0) {
        return NULL;
    }
    sot_record *r = record_get((PyCodeObject *)code, 0);
    if (r == NULL && PyErr_Occurred()) {
        return NULL;
    }
    PyObject *list = PyList_New(0);
    if (list == NULL || r == NULL) {
        return list;
    }
    for (sot_entry *e = r->head; e != NULL; e = e->next) {
        PyObject *item = PyTuple_Pack(2, e->guard, (PyObject *)e->code);
        if (item == NULL || PyList_Append(list, item) < 0) {
            Py_XDECREF(item);
            Py_DECREF(list);
            return NULL;
        }
        Py_DECREF(item);
    }
    return list;
}

PyDoc_STRVAR(is_skipped_doc,
"is_skipped($module, code, /)\n--\n\n"
"True if the callback returned SKIP for this code since the last reset_cache().");

static PyObject *
m_is_skipped(PyObject *module, PyObject *code)
{
    if (check_code(code) < 0) {
        return NULL;
    }
    sot_record *r = record_get((PyCodeObject *)code, 0);
    if (r == NULL && PyErr_Occurred()) {
        return NULL;
    }
    return PyBool_FromLong(r != NULL && r->skipped);
}

PyDoc_STRVAR(hit_count_doc,
"hit_count($module, /)\n--\n\n"
"Number of frames served from the cache (a guard passed) since import.");

static PyObject *
m_hit_count(PyObject *module, PyObject *unused)
{
    return PyLong_FromUnsignedLongLong(hit_counter);
}

PyDoc_STRVAR(hook_installed_doc,
"_hook_installed($module, /)\n--\n\n"
"True if sot's frame evaluation function is installed on the interpreter\n"
"(for tests).");

static PyObject *
m_hook_installed(PyObject *module, PyObject *unused)
{
    _PyFrameEvalFunction f = _PyInterpreterState_GetEvalFrameFunc(PyInterpreterState_Get());
    return PyBool_FromLong(f == sot_eval_hook);
}

PyDoc_STRVAR(type_version_doc,
"type_version($module, cls, /)\n--\n\n"
"The version tag of the type cls (CPython's method-cache tag, assigned if it\n"
"has none): it changes whenever an attribute of cls or of a base is set or\n"
"deleted, and a new one is never an old one. 0 when cls has no valid tag\n"
"(3.13+ stop giving one to a type modified about a thousand times): no\n"
"version to guard by.");

static PyObject *
m_type_version(PyObject *module, PyObject *cls)
{
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "type_version() argument must be a type");
        return NULL;
    }
    return PyLong_FromUnsignedLong(sot_type_version((PyTypeObject *)cls));
}

PyDoc_STRVAR(clone_set_layout_doc,
"clone_set_layout($module, s, /)\n--\n\n"
"A new set equal to the set s with the very same hash table: same size,\n"
"same slot for every element, same deleted-entry markers and the same\n"
"pop() position. A set's iteration order (and what later adds, removals\n"
"and pop() do) follows from its table, which set(s) and s.copy() lay out\n"
"anew; the translator keeps the sets of a simulated frame as real sets\n"
"built by the frame's own operations and rebuilds the escaping ones with\n"
"this, so that they iterate as the eagerly built ones would.");

static PyObject *
m_clone_set_layout(PyObject *module, PyObject *arg)
{
    if (!PySet_CheckExact(arg)) {
        PyErr_SetString(PyExc_TypeError, "clone_set_layout expects a set");
        return NULL;
    }
    PySetObject *source = (PySetObject *)arg;
    PySetObject *clone = (PySetObject *)PySet_New(NULL);
    if (clone == NULL) {
        return NULL;
    }
    if (source->mask != clone->mask) { /* bigger than the built-in small table */
        setentry *table = PyMem_New(setentry, (size_t)source->mask + 1);
        if (table == NULL) {
            Py_DECREF(clone);
            return PyErr_NoMemory();
        }
        clone->table = table;
        clone->mask = source->mask;
    }
    for (Py_ssize_t i = 0; i <= source->mask; i++) {
        setentry entry = source->table[i];
        /* A deleted entry holds the shared dummy key, not counted as a reference, with hash -1 (which no
         * element's hash can be: Python maps -1 to -2). */
        if (entry.key != NULL && entry.hash != -1) {
            Py_INCREF(entry.key);
        }
        clone->table[i] = entry;
    }
    clone->fill = source->fill;
    clone->used = source->used;
    clone->finger = source->finger;
    return (PyObject *)clone;
}

PyDoc_STRVAR(replace_entry_code_doc,
"replace_entry_code($module, code, guard, new_code, hook_free=False, relaxed=None, /)\n--\n\n"
"Make the cache entry of `code` whose guard is `guard` run `new_code` from\n"
"now on (the original `code` itself to run it natively behind the same\n"
"guard), with this thread's callback suspended while it runs if hook_free,\n"
"and its guard relaxed as `relaxed` says (see the module's documentation).\n"
"`new_code` is checked as a callback's would be. Returns False when\n"
"no such entry exists (e.g. after reset_cache()). A frame already running\n"
"the entry's previous code finishes with it.");

static PyObject *
m_replace_entry_code(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 3 || nargs > 5) {
        PyErr_SetString(PyExc_TypeError, "replace_entry_code expects 3 to 5 arguments");
        return NULL;
    }
    int hook_free = nargs >= 4 ? PyObject_IsTrue(args[3]) : 0;
    PyObject *relaxed = nargs == 5 ? args[4] : NULL;
    if (hook_free < 0) {
        return NULL;
    }
    if (check_code(args[0]) < 0) {
        return NULL;
    }
    PyCodeObject *code = (PyCodeObject *)args[0];
    sot_record *r = record_get(code, 0);
    if (r == NULL) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        Py_RETURN_FALSE;
    }
    sot_entry *e = r->head;
    while (e != NULL && e->guard != args[1]) {
        e = e->next;
    }
    if (e == NULL) {
        Py_RETURN_FALSE;
    }
    /* Validated and mapped as a new entry would be; then its code and map move into `e`. */
    sot_entry *fresh = entry_new(code, args[1], args[2], e->frames, hook_free, relaxed, e->nargs);
    if (fresh == NULL) {
        return NULL;
    }
    PyCodeObject *old = e->owns_code ? e->code : NULL;
    PyObject *old_relaxed = e->relaxed;
    e->code = fresh->code;
    e->owns_code = fresh->owns_code;
    e->hook_free = hook_free;
    e->relaxed = fresh->relaxed;  /* (its reference moves too) */
    fresh->relaxed = NULL;
    if (e->relaxed == NULL || old_relaxed == NULL) {
        e->countdown = 0;  /* the next hit runs the full guard */
    }
    memcpy(e->map, fresh->map, (size_t)(e->nargs > 0 ? e->nargs : 1) * sizeof(int));
    fresh->owns_code = 0;  /* its reference to the code now belongs to `e` */
    entry_decref(fresh);
    Py_XDECREF(old);
    Py_XDECREF(old_relaxed);
    Py_RETURN_TRUE;
}

static PyMethodDef module_methods[] = {
    {"replace_entry_code", (PyCFunction)(void (*)(void))m_replace_entry_code, METH_FASTCALL,
     replace_entry_code_doc},
    {"clone_set_layout", (PyCFunction)m_clone_set_layout, METH_O, clone_set_layout_doc},
    {"type_version", (PyCFunction)m_type_version, METH_O, type_version_doc},
    {"set_callback", (PyCFunction)m_set_callback, METH_O, set_callback_doc},
    {"set_traceback_merger", (PyCFunction)m_set_traceback_merger, METH_O, set_traceback_merger_doc},
    {"get_callback", (PyCFunction)m_get_callback, METH_NOARGS, get_callback_doc},
    {"callback_active", (PyCFunction)m_callback_active, METH_NOARGS, callback_active_doc},
    {"call_with_callback", (PyCFunction)(void (*)(void))m_call_with_callback, METH_FASTCALL,
     call_with_callback_doc},
    {"reset_cache", (PyCFunction)m_reset_cache, METH_NOARGS, reset_cache_doc},
    {"cache_size", (PyCFunction)m_cache_size, METH_O, cache_size_doc},
    {"cache_entries", (PyCFunction)m_cache_entries, METH_O, cache_entries_doc},
    {"is_skipped", (PyCFunction)m_is_skipped, METH_O, is_skipped_doc},
    {"hit_count", (PyCFunction)m_hit_count, METH_NOARGS, hit_count_doc},
    {"_hook_installed", (PyCFunction)m_hook_installed, METH_NOARGS, hook_installed_doc},
    {NULL, NULL, 0, NULL},
};

/* ------------------------------------------------------------------ */
/* CallWithCallback: calls a target with a callback set for the call,   */
/* as a C call (no Python frame of its own)                            */
/* ------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    PyObject *callback;     /* strong; NULL until bound */
    PyObject *target;       /* strong; NULL until bound */
} CallWithCallback;

static PyObject *
cwc_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    /* (the arguments are a subclass's, for its __init__) */
    return type->tp_alloc(type, 0);
}

static int
cwc_traverse(PyObject *op, visitproc visit, void *arg)
{
    CallWithCallback *self = (CallWithCallback *)op;
    Py_VISIT(self->callback);
    Py_VISIT(self->target);
    return 0;
}

static int
cwc_clear(PyObject *op)
{
    CallWithCallback *self = (CallWithCallback *)op;
    Py_CLEAR(self->callback);
    Py_CLEAR(self->target);
    return 0;
}

/* (a Python subclass's instances come here through subtype_dealloc, which
 * releases the reference to their heap type itself) */
static void
cwc_dealloc(PyObject *op)
{
    PyObject_GC_UnTrack(op);
    cwc_clear(op);
    Py_TYPE(op)->tp_free(op);
}

/* target(*args, **kwargs) with the thread's callback set to `callback` for
 * the call and the previous one (suspended or not) back afterwards, on every
 * exit path: what `previous = set_callback(cb); try: return target(...)
 * finally: set_callback(previous)` does, without its Python frame. */
static PyObject *
cwc_call(PyObject *op, PyObject *args, PyObject *kwargs)
{
    CallWithCallback *self = (CallWithCallback *)op;
    if (self->target == NULL) {
        PyErr_Format(PyExc_TypeError, "%.100s object is not bound to a callable yet",
                     Py_TYPE(op)->tp_name);
        return NULL;
    }
    PyObject *callback = self->callback;
    sot_thread_state *T = sot_tls();
    CallbackSlot *s = (CallbackSlot *)T->slot;
    if (SOT_LIKELY(s != NULL && s->callback == NULL && s->interp == NULL && T->suspended == NULL
                   && callback != Py_None)) {
        /* The usual call: no callback before it (neither set nor suspended),
         * and the thread's slot made by an earlier call. What set_callback
         * does on the way in and out, without its checks (the callback was
         * checked when bound). */
        PyInterpreterState *interp = PyInterpreterState_Get();
        Py_INCREF(callback);
        s->callback = callback;
        T->callback = callback;
        s->interp = interp;
        hook_acquire(interp);
        PyObject *result = PyObject_Call(self->target, args, kwargs);
        if (SOT_LIKELY(result != NULL && T->slot == (PyObject *)s && T->callback == callback
                       && s->callback == callback && s->interp == interp && T->suspended == NULL)) {
            /* Nothing changed it meanwhile: back to no callback. (A failed
             * call takes the general way, which keeps its exception aside
             * while the callback's reference is dropped.) */
            s->callback = NULL;
            T->callback = NULL;
            s->interp = NULL;
            hook_release(interp);
            Py_DECREF(callback);  /* the slot's reference */
            return result;
        }
        /* (the slot's reference is dropped there, whichever callback it holds now) */
        return callback_set_after(Py_None, result);
    }
    /* Called from a frame that runs with its callback suspended (a hook-free
     * entry): borrowed, that frame holds a reference. */
    PyObject *suspended = T->suspended;
    PyObject *previous = m_set_callback(NULL, callback);
    if (previous == NULL) {
        return NULL;
    }
    PyObject *result = callback_set_after(previous, PyObject_Call(self->target, args, kwargs));
    if (suspended != NULL && previous == suspended && T->callback == suspended && T->suspended == NULL) {
        /* Suspended again, as call_with_callback leaves it: the rest of that
         * frame keeps running without the hook. */
        Py_XDECREF(callback_suspend(T));
    }
    Py_DECREF(previous);
    return result;
}

static PyObject *
cwc_bind(PyObject *op, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "_sot_bind expects (callback, target)");
        return NULL;
    }
    if (!PyCallable_Check(args[1]) || (args[0] != Py_None && !PyCallable_Check(args[0]))) {
        PyErr_SetString(PyExc_TypeError, "_sot_bind expects a callable (or None) callback and a callable target");
        return NULL;
    }
    CallWithCallback *self = (CallWithCallback *)op;
    Py_XSETREF(self->callback, Py_NewRef(args[0]));
    Py_XSETREF(self->target, Py_NewRef(args[1]));
    Py_RETURN_NONE;
}

static PyMethodDef cwc_methods[] = {
    {"_sot_bind", (PyCFunction)(void (*)(void))cwc_bind, METH_FASTCALL,
     "_sot_bind(callback, target): what a call of this object calls, and with which callback."},
    {NULL, NULL, 0, NULL},
};

PyDoc_STRVAR(cwc_doc,
"CallWithCallback()\n--\n\n"
"Once bound with _sot_bind(callback, target), a call of this object is\n"
"target(*args, **kwargs) with this thread's callback set to `callback` for\n"
"the call (None: no callback), the previous one back afterwards. A C call:\n"
"no Python frame of its own. A base class (sot's TranslatedLayer).");

static PyTypeObject CallWithCallback_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "sot.eval_frame_ext._eval_frame.CallWithCallback",
    .tp_basicsize = sizeof(CallWithCallback),
    .tp_dealloc = cwc_dealloc,
    .tp_call = cwc_call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = cwc_doc,
    .tp_traverse = cwc_traverse,
    .tp_clear = cwc_clear,
    .tp_methods = cwc_methods,
    .tp_new = cwc_new,
};

/* ------------------------------------------------------------------ */
/* callback_installed: a context manager with no Python frames, so the  */
/* callback never sees the code that installs or removes it.           */
/* ------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    PyObject *callback;
    PyObject *previous;     /* set while entered */
    int entered;
} Scope;

static PyObject *
scope_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"callback", NULL};
    PyObject *callback;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O:callback_installed", kwlist, &callback)) {
        return NULL;
    }
    if (callback != Py_None && !PyCallable_Check(callback)) {
        PyErr_Format(PyExc_TypeError, "callback must be callable or None, not %.100s",
                     Py_TYPE(callback)->tp_name);
        return NULL;
    }
    Scope *self = (Scope *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    Py_INCREF(callback);
    self->callback = callback;
    self->previous = NULL;
    self->entered = 0;
    return (PyObject *)self;
}

static void
scope_dealloc(PyObject *op)
{
    Scope *self = (Scope *)op;
    Py_XDECREF(self->callback);
    Py_XDECREF(self->previous);
    Py_TYPE(op)->tp_free(op);
}

static PyObject *
scope_enter(PyObject *op, PyObject *unused)
{
    Scope *self = (Scope *)op;
    if (self->entered) {
        PyErr_SetString(PyExc_RuntimeError, "callback_installed is not re-entrant");
        return NULL;
    }
    PyObject *prev = m_set_callback(NULL, self->callback);
    if (prev == NULL) {
        return NULL;
    }
    Py_XSETREF(self->previous, prev);
    self->entered = 1;
    Py_INCREF(self->callback);
    return self->callback;
}

static PyObject *
scope_exit(PyObject *op, PyObject *const *args, Py_ssize_t nargs)
{
    Scope *self = (Scope *)op;
    if (self->entered) {
        PyObject *prev = self->previous;
        self->previous = NULL;
        self->entered = 0;
        int rc = callback_set(prev != NULL ? prev : Py_None);
        Py_XDECREF(prev);
        if (rc < 0) {
            return NULL;
        }
    }
    Py_RETURN_FALSE;
}

static PyMethodDef scope_methods[] = {
    {"__enter__", (PyCFunction)scope_enter, METH_NOARGS,
     "Install the callback for this thread; returns the callback."},
    {"__exit__", (PyCFunction)(void (*)(void))scope_exit, METH_FASTCALL,
     "Restore the callback that was installed before __enter__."},
    {NULL, NULL, 0, NULL},
};

PyDoc_STRVAR(scope_doc,
"callback_installed(callback)\n--\n\n"
"Context manager: set the eval-frame callback of the current thread on\n"
"entry and restore the previous one on exit. Implemented in C, so the\n"
"callback never sees the frames of the context manager itself.");

static PyTypeObject Scope_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "sot.eval_frame_ext._eval_frame.callback_installed",
    .tp_basicsize = sizeof(Scope),
    .tp_dealloc = scope_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = scope_doc,
    .tp_methods = scope_methods,
    .tp_new = scope_new,
};

/* ------------------------------------------------------------------ */
/* SKIP sentinel                                                       */
/* ------------------------------------------------------------------ */

static PyObject *
skip_repr(PyObject *self)
{
    return PyUnicode_FromString("SKIP");
}

static PyObject *
skip_reduce(PyObject *self, PyObject *unused)
{
    return PyUnicode_FromString("SKIP");
}

static PyMethodDef skip_methods[] = {
    {"__reduce__", skip_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject SkipType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "sot.eval_frame_ext._eval_frame.SkipType",
    .tp_basicsize = sizeof(PyObject),
    .tp_repr = skip_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .tp_doc = "Type of the SKIP sentinel: returned by a callback, the code is "
              "never hooked again (until reset_cache()).",
    .tp_methods = skip_methods,
};

/* ------------------------------------------------------------------ */
/* Module                                                              */
/* ------------------------------------------------------------------ */

PyDoc_STRVAR(module_doc,
"PEP 523 frame evaluation hook of sot (per-thread callback, per-code cache\n"
"of (guard, code) entries, shadow-frame execution).");

static struct PyModuleDef eval_frame_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "sot.eval_frame_ext._eval_frame",
    .m_doc = module_doc,
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC
PyInit__eval_frame(void)
{
    if (PyType_Ready(&CallbackSlot_Type) < 0 || PyType_Ready(&Scope_Type) < 0
        || PyType_Ready(&CallWithCallback_Type) < 0
        || PyType_Ready(&SkipType) < 0
        || PyType_Ready(&GuardProgram_Type) < 0) {
        return NULL;
    }
    if (extra_index < 0) {
        extra_index = SOT_REQUEST_CODE_EXTRA_INDEX(record_free);
        if (extra_index < 0) {
            PyErr_SetString(PyExc_RuntimeError,
                            "sot: no code-object extra slot left (_PyEval_RequestCodeExtraIndex)");
            return NULL;
        }
    }
    if (skip_sentinel == NULL) {
        skip_sentinel = PyType_GenericAlloc(&SkipType, 0);
        if (skip_sentinel == NULL) {
            return NULL;
        }
    }
    if (slot_key == NULL) {
        slot_key = PyUnicode_InternFromString("sot.eval_frame_ext.callback_slot");
        if (slot_key == NULL) {
            return NULL;
        }
    }
    PyObject *m = PyModule_Create(&eval_frame_module);
    if (m == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(m, "SKIP", skip_sentinel) < 0
        || PyModule_AddObjectRef(m, "callback_installed", (PyObject *)&Scope_Type) < 0
        || PyModule_AddObjectRef(m, "CallWithCallback", (PyObject *)&CallWithCallback_Type) < 0
        || PyModule_AddObjectRef(m, "GuardProgram", (PyObject *)&GuardProgram_Type) < 0
        || PyModule_AddIntConstant(m, "RELAXED_GUARD_PERIOD", SOT_RELAXED_PERIOD) < 0
        || sot_guard_program_add_opcodes(m) < 0
        || sot_tensor_guard_init(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

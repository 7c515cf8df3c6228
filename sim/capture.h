/*
 * capture.h: the simulator's stream-capture state, shared by capture.c (the
 * sequences and their streams), capture_rules.c (what other calls may do
 * during a capture) and capture_api.c / capture_deps.c (the entry points).
 * All of it is process-local and guarded by g_sim.cap_lock.
 */
#ifndef TGS_SIM_CAPTURE_H
#define TGS_SIM_CAPTURE_H

#include "sim.h"

#pragma GCC visibility push(hidden)

struct cap_node {
    CUgraphNode node;
    CUgraphNode *deps;
    size_t ndeps;
};

struct sim_capture {
    uint64_t id;
    int mode;
    int status;                 /* CU_STREAM_CAPTURE_STATUS_ACTIVE or _INVALIDATED */
    pthread_t thread;           /* that began it */
    struct CUctx_st *ctx;
    struct CUstream_st *origin;
    CUgraph graph;
    int own_graph;              /* created at begin (destroyed if the capture fails) */
    struct CUstream_st **streams;
    size_t nstreams, streams_cap;
    struct cap_node *nodes;     /* the captured nodes and their dependencies */
    size_t nnodes, nodes_cap;
    struct sim_capture *next;
};

void cap_lock(void);
void cap_unlock(void);
int cap_grow(void **arr, size_t *cap, size_t need, size_t elem);
struct sim_capture *cap_find(uint64_t id);
void cap_invalidate(struct sim_capture *c);
/* Replace (add = 0) or extend (add = 1) a stream's dependency set. */
int cap_set_deps(struct CUstream_st *s, const CUgraphNode *deps, size_t n, int add);
int cap_join(struct sim_capture *c, struct CUstream_st *s, const CUgraphNode *deps, size_t n);
/* A capture with a blocking stream of ctx: the legacy stream is unusable. */
struct sim_capture *cap_blocking(struct CUctx_st *ctx);
CUresult cap_legacy_locked(struct CUctx_st *ctx); /* IMPLICIT, invalidating, or SUCCESS */
void cap_leave(struct CUstream_st *s);
/* The stream object that holds s's capture state: obj itself, none for the
 * legacy stream, and for the per-thread default stream (which has no object
 * in the simulator) a hidden one per thread and context, made if create. */
struct CUstream_st *cap_stream(CUstream s, int ptsz, struct CUctx_st *ctx,
                               struct CUstream_st *obj, int create);
void cap_unlink(struct sim_capture *c); /* ends c: its streams leave; the caller frees c */

#pragma GCC visibility pop

#endif /* TGS_SIM_CAPTURE_H */

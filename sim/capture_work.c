/*
 * capture_work.c: the work stream capture records as graph nodes (graph.h's
 * struct sim_gwork) for the copy, memset and host-function calls: each
 * builds the node's work and hands it to sim_capture_take.  All return 1
 * when capture handled the call (*res says how), 0 when it is to run as
 * usual (no capture in progress, or the stream does not capture).
 */
#include "graph.h"

static int take(CUstream s, int ptsz, const struct sim_gwork *w, CUresult *res)
{
    if (!sim_capture_any())
        return 0;
    struct CUctx_st *ctx;
    struct CUstream_st *obj;
    if (sim_stream_resolve(s, &ctx, &obj) != CUDA_SUCCESS)
        return 0; /* the caller's own checks report it */
    return sim_capture_take(s, ptsz, ctx, obj, w, res);
}

int sim_capture_copy3d(CUstream s, int ptsz, const CUDA_MEMCPY3D *c, CUresult *res)
{
    if (!sim_capture_any())
        return 0;
    struct sim_gwork w = {.type = CU_GRAPH_NODE_TYPE_MEMCPY};
    w.u.copy = *c;
    return take(s, ptsz, &w, res);
}

static void side(CUmemorytype t, uintptr_t p, CUmemorytype *type, const void **host,
                 CUdeviceptr *dev)
{
    *type = t;
    if (t == CU_MEMORYTYPE_HOST)
        *host = (const void *)p;
    else
        *dev = (CUdeviceptr)p;
}

int sim_capture_copy(CUstream s, int ptsz, CUmemorytype dt, uintptr_t dst, CUmemorytype st,
                     uintptr_t src, size_t n, CUresult *res)
{
    if (!sim_capture_any())
        return 0;
    CUDA_MEMCPY3D c = {0};
    const void *dh = NULL;
    side(dt, dst, &c.dstMemoryType, &dh, &c.dstDevice);
    c.dstHost = (void *)(uintptr_t)dh;
    side(st, src, &c.srcMemoryType, &c.srcHost, &c.srcDevice);
    c.WidthInBytes = n;
    c.Height = c.Depth = 1;
    return sim_capture_copy3d(s, ptsz, &c, res);
}

int sim_capture_fill(CUstream s, int ptsz, CUdeviceptr dst, size_t pitch, unsigned int v,
                     size_t width, size_t height, unsigned int elem, CUresult *res)
{
    if (!sim_capture_any())
        return 0;
    struct sim_gwork w = {.type = CU_GRAPH_NODE_TYPE_MEMSET};
    w.u.memset = (CUDA_MEMSET_NODE_PARAMS){.dst = dst, .pitch = pitch, .value = v,
                                           .elementSize = elem, .width = width,
                                           .height = height};
    return take(s, ptsz, &w, res);
}

int sim_capture_host(CUstream s, int ptsz, CUhostFn fn, void *data, CUresult *res)
{
    if (!sim_capture_any())
        return 0;
    struct sim_gwork w = {.type = CU_GRAPH_NODE_TYPE_HOST};
    w.u.host = (CUDA_HOST_NODE_PARAMS){.fn = fn, .userData = data};
    return take(s, ptsz, &w, res);
}

int sim_capture_step(CUstream s, int ptsz, const struct sim_gwork *w, CUresult *res)
{
    return take(s, ptsz, w, res);
}

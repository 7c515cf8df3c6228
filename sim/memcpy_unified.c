/*
 * memcpy_unified.c: copies between unified addresses (cuMemcpy, Peer,
 * DtoD async).  Either side may be device memory, page-locked host memory
 * or plain host memory; a side inside a known region must fit in it.  Like
 * every copy here the bytes move at once: a synchronous copy first waits
 * for the context's queued work, an asynchronous one checks its stream.
 */
#include <string.h>

#include "sim.h"

/* A pointer inside a known region must have n bytes there; other pointers
 * are plain host memory (unified addressing), and must not be NULL. */
static int side_ok(CUdeviceptr p, size_t n)
{
    struct sim_region reg;
    if (sim_region_find(p, &reg))
        return p != 0;
    return n <= reg.size - (p - reg.base);
}

/* how: SYNC, PT (a _ptds/_ptsz variant).  During stream capture an
 * asynchronous copy into a capturing stream becomes a memcpy node; a
 * synchronous one is refused on the legacy stream while a blocking stream
 * of the context captures, and as a potentially unsafe call. */
#define SYNC SIM_HOW_SYNC
#define PT SIM_HOW_PT

static CUresult copy(CUdeviceptr dst, CUdeviceptr src, size_t n, int how, CUstream s)
{
    int sync = how & SYNC;
    CUresult r = sim_copy_order(how, s, 1);
    if (r != CUDA_SUCCESS)
        return r;
    if (n == 0)
        return CUDA_SUCCESS;
    if (!side_ok(dst, n) || !side_ok(src, n))
        return CUDA_ERROR_INVALID_VALUE;
    if (!sync && sim_capture_copy(s, (how & PT) != 0, CU_MEMORYTYPE_UNIFIED, dst,
                                  CU_MEMORYTYPE_UNIFIED, src, n, &r))
        return r;
    memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    return CUDA_SUCCESS;
}

static CUresult peer_ctx_ok(CUcontext a, CUcontext b)
{
    return sim_handle_ok(a, SIM_K_CTX) && sim_handle_ok(b, SIM_K_CTX) ? CUDA_SUCCESS
                                                                      : CUDA_ERROR_INVALID_CONTEXT;
}

CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
    return copy(dst, src, ByteCount, SYNC, NULL);
}
CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
    return copy(dst, src, ByteCount, SYNC | PT, NULL);
}
CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{
    return copy(dst, src, ByteCount, 0, hStream);
}
CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{
    return copy(dst, src, ByteCount, PT, hStream);
}
static CUresult dtod_async(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                           CUstream hStream, int how)
{
    if (ByteCount && (!sim_mem_range_ok(dstDevice, ByteCount) ||
                      !sim_mem_range_ok(srcDevice, ByteCount)))
        return sim_check_init() ? sim_check_init() : CUDA_ERROR_INVALID_VALUE;
    return copy(dstDevice, srcDevice, ByteCount, how, hStream);
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                              CUstream hStream)
{
    return dtod_async(dstDevice, srcDevice, ByteCount, hStream, 0);
}
CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                   size_t ByteCount, CUstream hStream)
{
    return dtod_async(dstDevice, srcDevice, ByteCount, hStream, PT);
}

static CUresult peer(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                     CUcontext srcContext, size_t ByteCount, int how, CUstream hStream)
{
    CUresult r = sim_check_init();
    if (r == CUDA_SUCCESS)
        r = peer_ctx_ok(dstContext, srcContext);
    return r != CUDA_SUCCESS ? r : copy(dstDevice, srcDevice, ByteCount, how, hStream);
}
CUresult cuMemcpyPeer(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                      CUcontext srcContext, size_t ByteCount)
{
    return peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, SYNC, NULL);
}
CUresult cuMemcpyPeer_ptds(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                           CUcontext srcContext, size_t ByteCount)
{
    return peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, SYNC | PT, NULL);
}
CUresult cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                           CUcontext srcContext, size_t ByteCount, CUstream hStream)
{
    return peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, 0, hStream);
}
CUresult cuMemcpyPeerAsync_ptsz(CUdeviceptr dstDevice, CUcontext dstContext,
                                CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount,
                                CUstream hStream)
{
    return peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, PT, hStream);
}

/* Batched copies (CUDA 12.8): each pair copied in order; attrs[k] applies
 * from copy attrsIdxs[k] on (the first must start at 0, the rest increase). */
static CUresult batch(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                      CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs,
                      size_t *failIdx, CUstream s, int how)
{
    if (failIdx)
        *failIdx = SIZE_MAX;
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!count || !dsts || !srcs || !sizes || !numAttrs || !attrs || !attrsIdxs ||
        numAttrs > count || attrsIdxs[0] != 0)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t k = 0; k < numAttrs; k++)
        if ((k && attrsIdxs[k] <= attrsIdxs[k - 1]) || attrsIdxs[k] >= count ||
            attrs[k].srcAccessOrder == CU_MEMCPY_SRC_ACCESS_ORDER_INVALID ||
            attrs[k].srcAccessOrder > CU_MEMCPY_SRC_ACCESS_ORDER_ANY)
            return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count; i++)
        if ((r = copy(dsts[i], srcs[i], sizes[i], how, s)) != CUDA_SUCCESS) {
            if (failIdx)
                *failIdx = i;
            return r;
        }
    return CUDA_SUCCESS;
}

CUresult cuMemcpyBatchAsync(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                            CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs,
                            size_t *failIdx, CUstream hStream)
{
    return batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx, hStream, 0);
}
CUresult cuMemcpyBatchAsync_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
                                 size_t count, CUmemcpyAttributes *attrs, size_t *attrsIdxs,
                                 size_t numAttrs, size_t *failIdx, CUstream hStream)
{
    return batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx, hStream, PT);
}
CUresult cuMemcpyBatchAsync_v2(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                               CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs,
                               CUstream hStream)
{
    return batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, NULL, hStream, 0);
}
CUresult cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
                                    size_t count, CUmemcpyAttributes *attrs, size_t *attrsIdxs,
                                    size_t numAttrs, CUstream hStream)
{
    return batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, NULL, hStream, PT);
}

/*
 * copy3d.c: the descriptor copies (cuMemcpy2D, cuMemcpy3D and their async
 * forms; graph memcpy nodes).  Host, device and unified sides with pitches
 * and offsets; a side that is a CUDA array has no backing bytes in the
 * simulator (arrays are accounted, not stored): NOT_SUPPORTED.
 */
#include <string.h>

#include "sim.h"

/* Base address of a side, or 0 with *err set.  An array side also gives
 * its pitch, height and size (0 for the others). */
static uintptr_t side(CUmemorytype t, const void *host, CUdeviceptr dev, CUarray arr,
                      size_t *pitch, size_t *height, size_t *bytes, CUresult *err)
{
    unsigned char *data;
    *bytes = 0;
    switch (t) {
    case CU_MEMORYTYPE_HOST:
        return (uintptr_t)host;
    case CU_MEMORYTYPE_DEVICE:
    case CU_MEMORYTYPE_UNIFIED:
        return (uintptr_t)dev;
    case CU_MEMORYTYPE_ARRAY:
        if (sim_array_layout(arr, &data, bytes, pitch, height)) {
            *err = CUDA_ERROR_INVALID_HANDLE;
            return 0;
        }
        return (uintptr_t)data;
    default:
        *err = CUDA_ERROR_INVALID_VALUE;
        return 0;
    }
}

/* A device side must lie inside one allocation, an array side inside the
 * array, over the whole span. */
static int span_ok(CUmemorytype t, uintptr_t base, size_t bytes, uintptr_t first, size_t span)
{
    if (t == CU_MEMORYTYPE_ARRAY)
        return first - base <= bytes && span <= bytes - (first - base);
    if (t != CU_MEMORYTYPE_DEVICE)
        return first != 0;
    return sim_mem_range_ok(first, span);
}

CUresult sim_copy3d(const CUDA_MEMCPY3D *c)
{
    CUresult err = CUDA_ERROR_INVALID_VALUE;
    if (!c)
        return err;
    size_t sap = 0, sah = 0, sab, dap = 0, dah = 0, dab;
    uintptr_t s = side(c->srcMemoryType, c->srcHost, c->srcDevice, c->srcArray, &sap, &sah,
                       &sab, &err);
    uintptr_t d = side(c->dstMemoryType, c->dstHost, c->dstDevice, c->dstArray, &dap, &dah,
                       &dab, &err);
    if (!s || !d)
        return err;
    size_t w = c->WidthInBytes, h = c->Height ? c->Height : 1, dep = c->Depth ? c->Depth : 1;
    if (w == 0)
        return CUDA_SUCCESS;
    size_t sp = sap ? sap : c->srcPitch ? c->srcPitch : w;
    size_t dp = dap ? dap : c->dstPitch ? c->dstPitch : w;
    size_t sh = sah ? sah : c->srcHeight ? c->srcHeight : h;
    size_t dh = dah ? dah : c->dstHeight ? c->dstHeight : h;
    if (sp < w || dp < w || sh < h || dh < h)
        return CUDA_ERROR_INVALID_VALUE;
    uintptr_t s0 = s + c->srcXInBytes + c->srcY * sp + c->srcZ * sp * sh;
    uintptr_t d0 = d + c->dstXInBytes + c->dstY * dp + c->dstZ * dp * dh;
    size_t sspan = (dep - 1) * sp * sh + (h - 1) * sp + w;
    size_t dspan = (dep - 1) * dp * dh + (h - 1) * dp + w;
    if (!span_ok(c->srcMemoryType, s, sab, s0, sspan) ||
        !span_ok(c->dstMemoryType, d, dab, d0, dspan))
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t z = 0; z < dep; z++)
        for (size_t y = 0; y < h; y++)
            memmove((void *)(d0 + z * dp * dh + y * dp), (const void *)(s0 + z * sp * sh + y * sp),
                    w);
    return CUDA_SUCCESS;
}

static void from2d(const CUDA_MEMCPY2D *p, CUDA_MEMCPY3D *c)
{
    memset(c, 0, sizeof *c);
    c->srcXInBytes = p->srcXInBytes;
    c->srcY = p->srcY;
    c->srcMemoryType = p->srcMemoryType;
    c->srcHost = p->srcHost;
    c->srcDevice = p->srcDevice;
    c->srcArray = p->srcArray;
    c->srcPitch = p->srcPitch;
    c->dstXInBytes = p->dstXInBytes;
    c->dstY = p->dstY;
    c->dstMemoryType = p->dstMemoryType;
    c->dstHost = p->dstHost;
    c->dstDevice = p->dstDevice;
    c->dstArray = p->dstArray;
    c->dstPitch = p->dstPitch;
    c->WidthInBytes = p->WidthInBytes;
    c->Height = p->Height;
    c->Depth = 1;
}

/* how: SYNC, PT (a _ptds/_ptsz variant).  During stream capture an
 * asynchronous copy into a capturing stream becomes a memcpy node (checked
 * when the graph runs); a synchronous one is refused on the legacy stream
 * while a blocking stream of the context captures, and as a potentially
 * unsafe call. */
#define SYNC SIM_HOW_SYNC
#define PT SIM_HOW_PT

static CUresult run(const CUDA_MEMCPY3D *c, int how, CUstream s)
{
    int sync = how & SYNC;
    CUresult r = sim_copy_order(how, s, 1);
    if (r != CUDA_SUCCESS)
        return r;
    if (!sync && c && sim_capture_copy3d(s, (how & PT) != 0, c, &r))
        return r;
    return sim_copy3d(c);
}

static CUresult run2d(const CUDA_MEMCPY2D *p, int how, CUstream s)
{
    CUDA_MEMCPY3D c;
    if (!p)
        return sim_check_init() ? sim_check_init() : CUDA_ERROR_INVALID_VALUE;
    from2d(p, &c);
    return run(&c, how, s);
}

CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *pCopy) { return run2d(pCopy, SYNC, NULL); }
CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *pCopy) { return run2d(pCopy, SYNC | PT, NULL); }
CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *pCopy) { return run2d(pCopy, SYNC, NULL); }
CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D *pCopy)
{
    return run2d(pCopy, SYNC | PT, NULL);
}
CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *pCopy, CUstream hStream)
{
    return run2d(pCopy, 0, hStream);
}
CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *pCopy, CUstream hStream)
{
    return run2d(pCopy, PT, hStream);
}
CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D *pCopy) { return run(pCopy, SYNC, NULL); }
CUresult cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D *pCopy) { return run(pCopy, SYNC | PT, NULL); }
CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *pCopy, CUstream hStream)
{
    return run(pCopy, 0, hStream);
}
CUresult cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D *pCopy, CUstream hStream)
{
    return run(pCopy, PT, hStream);
}

/* The peer form: the same fields, with contexts where 3D has reserved ones. */
static CUresult peer(const CUDA_MEMCPY3D_PEER *p, int how, CUstream s)
{
    if (!p)
        return sim_check_init() ? sim_check_init() : CUDA_ERROR_INVALID_VALUE;
    if ((p->srcContext && !sim_handle_ok(p->srcContext, SIM_K_CTX)) ||
        (p->dstContext && !sim_handle_ok(p->dstContext, SIM_K_CTX)))
        return sim_check_init() ? sim_check_init() : CUDA_ERROR_INVALID_CONTEXT;
    CUDA_MEMCPY3D c;
    _Static_assert(sizeof c == sizeof *p, "CUDA_MEMCPY3D_PEER mirrors CUDA_MEMCPY3D");
    memcpy(&c, p, sizeof c);
    c.reserved0 = c.reserved1 = NULL;
    return run(&c, how, s);
}

CUresult cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER *pCopy) { return peer(pCopy, SYNC, NULL); }
CUresult cuMemcpy3DPeer_ptds(const CUDA_MEMCPY3D_PEER *pCopy)
{
    return peer(pCopy, SYNC | PT, NULL);
}
CUresult cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER *pCopy, CUstream hStream)
{
    return peer(pCopy, 0, hStream);
}
CUresult cuMemcpy3DPeerAsync_ptsz(const CUDA_MEMCPY3D_PEER *pCopy, CUstream hStream)
{
    return peer(pCopy, PT, hStream);
}

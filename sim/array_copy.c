/*
 * array_copy.c: copies to and from CUDA arrays.  The 1D forms (HtoA, AtoH,
 * DtoA, AtoD, AtoA) address an array's bytes by offset, row after row; the
 * array sides of 2D/3D descriptor copies are handled by copy3d.c through
 * sim_array_layout().  Like every copy here the bytes move at once.
 */
#include <string.h>

#include "sim.h"

/* how: SYNC, PT (a _ptds/_ptsz variant); see memcpy.c for the capture rules. */
#define SYNC SIM_HOW_SYNC
#define PT SIM_HOW_PT

static CUresult order(int how, CUstream s)
{
    return sim_copy_order(how, s, 1);
}

/* An asynchronous array copy into a capturing stream: a memcpy node. */
static int captured(CUarray a, size_t off, const void *h, size_t n, int to_array, int how,
                    CUstream s, CUresult *res)
{
    if ((how & SYNC) || !sim_capture_any() || !h)
        return 0;
    CUDA_MEMCPY3D c = {0};
    if (to_array) {
        c.dstMemoryType = CU_MEMORYTYPE_ARRAY;
        c.dstArray = a;
        c.dstXInBytes = off;
        c.srcMemoryType = CU_MEMORYTYPE_HOST;
        c.srcHost = h;
    } else {
        c.srcMemoryType = CU_MEMORYTYPE_ARRAY;
        c.srcArray = a;
        c.srcXInBytes = off;
        c.dstMemoryType = CU_MEMORYTYPE_HOST;
        c.dstHost = (void *)(uintptr_t)h;
    }
    c.WidthInBytes = n;
    c.Height = c.Depth = 1;
    return sim_capture_copy3d(s, (how & PT) != 0, &c, res);
}

/* The bytes [off, off + n) of array a, or NULL. */
static unsigned char *array_span(CUarray a, size_t off, size_t n, CUresult *err)
{
    unsigned char *data;
    size_t bytes, row, height;
    if (sim_array_layout(a, &data, &bytes, &row, &height)) {
        *err = CUDA_ERROR_INVALID_HANDLE;
        return NULL;
    }
    if (off > bytes || n > bytes - off) {
        *err = CUDA_ERROR_INVALID_VALUE;
        return NULL;
    }
    return data + off;
}

static CUresult copy(void *dst, const void *src, size_t n)
{
    if (n)
        memmove(dst, src, n);
    return CUDA_SUCCESS;
}

/* n bytes between host memory h and array a at off, into the array when to_array. */
static CUresult host_array(CUarray a, size_t off, void *h, size_t n, int to_array, int how,
                           CUstream s)
{
    CUresult r = order(how, s);
    if (r != CUDA_SUCCESS)
        return r;
    unsigned char *p = array_span(a, off, n, &r);
    if (!p)
        return r;
    if (captured(a, off, h, n, to_array, how, s, &r))
        return r;
    if (!h)
        return CUDA_ERROR_INVALID_VALUE;
    return to_array ? copy(p, h, n) : copy(h, p, n);
}

static CUresult htoa(CUarray a, size_t off, const void *h, size_t n, int how, CUstream s)
{
    return host_array(a, off, (void *)(uintptr_t)h, n, 1, how, s);
}

static CUresult atoh(void *h, CUarray a, size_t off, size_t n, int how, CUstream s)
{
    return host_array(a, off, h, n, 0, how, s);
}

CUresult cuMemcpyHtoA_v2(CUarray dstArray, size_t dstOffset, const void *srcHost, size_t ByteCount)
{
    return htoa(dstArray, dstOffset, srcHost, ByteCount, SYNC, NULL);
}
CUresult cuMemcpyHtoA_v2_ptds(CUarray dstArray, size_t dstOffset, const void *srcHost,
                              size_t ByteCount)
{
    return htoa(dstArray, dstOffset, srcHost, ByteCount, SYNC | PT, NULL);
}
CUresult cuMemcpyHtoAAsync_v2(CUarray dstArray, size_t dstOffset, const void *srcHost,
                              size_t ByteCount, CUstream hStream)
{
    return htoa(dstArray, dstOffset, srcHost, ByteCount, 0, hStream);
}
CUresult cuMemcpyHtoAAsync_v2_ptsz(CUarray dstArray, size_t dstOffset, const void *srcHost,
                                   size_t ByteCount, CUstream hStream)
{
    return htoa(dstArray, dstOffset, srcHost, ByteCount, PT, hStream);
}
CUresult cuMemcpyAtoH_v2(void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount)
{
    return atoh(dstHost, srcArray, srcOffset, ByteCount, SYNC, NULL);
}
CUresult cuMemcpyAtoH_v2_ptds(void *dstHost, CUarray srcArray, size_t srcOffset,
                              size_t ByteCount)
{
    return atoh(dstHost, srcArray, srcOffset, ByteCount, SYNC | PT, NULL);
}
CUresult cuMemcpyAtoHAsync_v2(void *dstHost, CUarray srcArray, size_t srcOffset,
                              size_t ByteCount, CUstream hStream)
{
    return atoh(dstHost, srcArray, srcOffset, ByteCount, 0, hStream);
}
CUresult cuMemcpyAtoHAsync_v2_ptsz(void *dstHost, CUarray srcArray, size_t srcOffset,
                                   size_t ByteCount, CUstream hStream)
{
    return atoh(dstHost, srcArray, srcOffset, ByteCount, PT, hStream);
}

/* The device side of a DtoA/AtoD copy: CUDA_SUCCESS when [p, p + n) is allocated. */
static CUresult device_range(CUdeviceptr p, size_t n)
{
    if (n && !sim_mem_range_ok(p, n))
        return sim_check_init() ? sim_check_init() : CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

static CUresult dtoa(CUarray dstArray, size_t dstOffset, CUdeviceptr srcDevice,
                     size_t ByteCount, int how)
{
    CUresult r = device_range(srcDevice, ByteCount);
    if (r != CUDA_SUCCESS)
        return r;
    return htoa(dstArray, dstOffset, (const void *)(uintptr_t)srcDevice, ByteCount, how, NULL);
}
CUresult cuMemcpyDtoA_v2(CUarray dstArray, size_t dstOffset, CUdeviceptr srcDevice,
                         size_t ByteCount)
{
    return dtoa(dstArray, dstOffset, srcDevice, ByteCount, SYNC);
}
CUresult cuMemcpyDtoA_v2_ptds(CUarray dstArray, size_t dstOffset, CUdeviceptr srcDevice,
                              size_t ByteCount)
{
    return dtoa(dstArray, dstOffset, srcDevice, ByteCount, SYNC | PT);
}

static CUresult atod(CUdeviceptr dstDevice, CUarray srcArray, size_t srcOffset,
                     size_t ByteCount, int how)
{
    CUresult r = device_range(dstDevice, ByteCount);
    if (r != CUDA_SUCCESS)
        return r;
    return atoh((void *)(uintptr_t)dstDevice, srcArray, srcOffset, ByteCount, how, NULL);
}
CUresult cuMemcpyAtoD_v2(CUdeviceptr dstDevice, CUarray srcArray, size_t srcOffset,
                         size_t ByteCount)
{
    return atod(dstDevice, srcArray, srcOffset, ByteCount, SYNC);
}
CUresult cuMemcpyAtoD_v2_ptds(CUdeviceptr dstDevice, CUarray srcArray, size_t srcOffset,
                              size_t ByteCount)
{
    return atod(dstDevice, srcArray, srcOffset, ByteCount, SYNC | PT);
}

static CUresult atoa(CUarray dstArray, size_t dstOffset, CUarray srcArray, size_t srcOffset,
                     size_t ByteCount, int how)
{
    CUresult r = order(how, NULL);
    if (r != CUDA_SUCCESS)
        return r;
    unsigned char *d = array_span(dstArray, dstOffset, ByteCount, &r);
    if (!d)
        return r;
    unsigned char *s = array_span(srcArray, srcOffset, ByteCount, &r);
    return s ? copy(d, s, ByteCount) : r;
}
CUresult cuMemcpyAtoA_v2(CUarray dstArray, size_t dstOffset, CUarray srcArray, size_t srcOffset,
                         size_t ByteCount)
{
    return atoa(dstArray, dstOffset, srcArray, srcOffset, ByteCount, SYNC);
}
CUresult cuMemcpyAtoA_v2_ptds(CUarray dstArray, size_t dstOffset, CUarray srcArray,
                              size_t srcOffset, size_t ByteCount)
{
    return atoa(dstArray, dstOffset, srcArray, srcOffset, ByteCount, SYNC | PT);
}

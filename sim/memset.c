/*
 * memset.c: the memsets beyond D8/D32 (memcpy.c): 16-bit, asynchronous
 * and 2D (pitched) ones.  They write the bytes at once; an asynchronous one
 * checks its stream, a synchronous one orders after the context's work.
 */
#include <string.h>

#include "sim.h"

/* Fill a Height x Width (elements of elem bytes) block at pitch bytes. */
CUresult sim_fill(CUdeviceptr dst, size_t pitch, unsigned int v, size_t width, size_t height,
                  size_t elem)
{
    if (elem != 1 && elem != 2 && elem != 4)
        return CUDA_ERROR_INVALID_VALUE;
    if (width == 0 || height == 0)
        return CUDA_SUCCESS;
    if (width > SIZE_MAX / elem || (dst % elem) || (height > 1 && pitch < width * elem) ||
        (height > 1 && pitch > SIZE_MAX / height))
        return CUDA_ERROR_INVALID_VALUE;
    size_t span = (height - 1) * pitch + width * elem;
    if (!sim_mem_range_ok(dst, span))
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t y = 0; y < height; y++) {
        unsigned char *row = (unsigned char *)(uintptr_t)(dst + y * pitch);
        if (elem == 1) {
            memset(row, (int)(v & 0xff), width);
        } else if (elem == 2) {
            uint16_t h = (uint16_t)v;
            for (size_t i = 0; i < width; i++)
                memcpy(row + 2 * i, &h, 2);
        } else {
            for (size_t i = 0; i < width; i++)
                memcpy(row + 4 * i, &v, 4);
        }
    }
    return CUDA_SUCCESS;
}

/* how: SYNC, PT (a _ptds/_ptsz variant: the per-thread default stream).
 * During stream capture an asynchronous memset into a capturing stream
 * becomes a memset node; a synchronous one may not touch the legacy stream
 * while a blocking stream of the context captures. */
#define SYNC SIM_HOW_SYNC
#define PT SIM_HOW_PT

static CUresult fill(CUdeviceptr dst, size_t pitch, unsigned int v, size_t width, size_t height,
                     size_t elem, int how, CUstream s)
{
    int sync = how & SYNC;
    CUresult r = sim_copy_order(how, s, 0);
    if (r != CUDA_SUCCESS)
        return r;
    if (!sync && sim_capture_any()) {
        if ((elem != 1 && elem != 2 && elem != 4) || !sim_mem_range_ok(dst, 1))
            return CUDA_ERROR_INVALID_VALUE;
        if (sim_capture_fill(s, (how & PT) != 0, dst, pitch, v, width, height,
                             (unsigned int)elem, &r))
            return r;
    }
    return sim_fill(dst, pitch, v, width, height, elem);
}

#define LINEAR(name, T, elem, how)                                                            \
    CUresult name(CUdeviceptr d, T v, size_t n) { return fill(d, 0, v, n, 1, elem, how, NULL); }
#define LINEAR_ASYNC(name, T, elem, how)                                                      \
    CUresult name(CUdeviceptr d, T v, size_t n, CUstream s)                                   \
    {                                                                                         \
        return fill(d, 0, v, n, 1, elem, how, s);                                             \
    }
#define PLANE(name, T, elem, how)                                                             \
    CUresult name(CUdeviceptr d, size_t pitch, T v, size_t w, size_t h)                       \
    {                                                                                         \
        return fill(d, pitch, v, w, h, elem, how, NULL);                                      \
    }
#define PLANE_ASYNC(name, T, elem, how)                                                       \
    CUresult name(CUdeviceptr d, size_t pitch, T v, size_t w, size_t h, CUstream s)           \
    {                                                                                         \
        return fill(d, pitch, v, w, h, elem, how, s);                                         \
    }

LINEAR(cuMemsetD16_v2, unsigned short, 2, SYNC)
LINEAR(cuMemsetD16_v2_ptds, unsigned short, 2, SYNC | PT)
LINEAR_ASYNC(cuMemsetD8Async, unsigned char, 1, 0)
LINEAR_ASYNC(cuMemsetD8Async_ptsz, unsigned char, 1, PT)
LINEAR_ASYNC(cuMemsetD16Async, unsigned short, 2, 0)
LINEAR_ASYNC(cuMemsetD16Async_ptsz, unsigned short, 2, PT)
LINEAR_ASYNC(cuMemsetD32Async, unsigned int, 4, 0)
LINEAR_ASYNC(cuMemsetD32Async_ptsz, unsigned int, 4, PT)
PLANE(cuMemsetD2D8_v2, unsigned char, 1, SYNC)
PLANE(cuMemsetD2D8_v2_ptds, unsigned char, 1, SYNC | PT)
PLANE(cuMemsetD2D16_v2, unsigned short, 2, SYNC)
PLANE(cuMemsetD2D16_v2_ptds, unsigned short, 2, SYNC | PT)
PLANE(cuMemsetD2D32_v2, unsigned int, 4, SYNC)
PLANE(cuMemsetD2D32_v2_ptds, unsigned int, 4, SYNC | PT)
PLANE_ASYNC(cuMemsetD2D8Async, unsigned char, 1, 0)
PLANE_ASYNC(cuMemsetD2D8Async_ptsz, unsigned char, 1, PT)
PLANE_ASYNC(cuMemsetD2D16Async, unsigned short, 2, 0)
PLANE_ASYNC(cuMemsetD2D16Async_ptsz, unsigned short, 2, PT)
PLANE_ASYNC(cuMemsetD2D32Async, unsigned int, 4, 0)
PLANE_ASYNC(cuMemsetD2D32Async_ptsz, unsigned int, 4, PT)

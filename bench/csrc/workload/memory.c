/*
 * The device footprint: allocated once at setup (whole or in chunks, like a
 * caching allocator's segments) or step by step during the loop (ramp.c),
 * as device memory or managed memory (--managed, --prefer-device: the
 * published TGS scheme), filled with a memset and signed per chunk, checked
 * with a small host round trip so a broken copy path fails loudly, and
 * verified again before it is freed (wl_mem_verify: evictions must not lose
 * data).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "workload.h"

#define WL_CHECK_BYTES 4096
#define WL_FILL 0xA5
#define WL_SIG_BYTES 16
#define WL_SIG_MIN_CHUNK (4 * WL_CHECK_BYTES)   /* signature clear of the round trip */

static double wl_mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

uint64_t wl_mem_chunk_size(const struct wl_footprint *m, size_t i)
{
    return i + 1 < m->nchunks ? m->chunk : m->bytes - m->chunk * (uint64_t)i;
}

/* Chunk i's signature, written in its middle (chunks of WL_SIG_MIN_CHUNK bytes or more). */
static void wl_signature(size_t i, unsigned char *sig)
{
    for (size_t k = 0; k < WL_SIG_BYTES; k++)
        sig[k] = (unsigned char)(i * 31 + k * 7 + 0x5B);
}

static uint64_t wl_sig_offset(uint64_t size)
{
    return (size / 2) & ~(uint64_t)(WL_SIG_BYTES - 1);
}

static void wl_mem_roundtrip(struct wl_run *run)
{
    struct wl_footprint *m = &run->mem;
    unsigned char out[WL_CHECK_BYTES], back[WL_CHECK_BYTES];
    size_t n = m->chunk < WL_CHECK_BYTES ? (size_t)m->chunk : WL_CHECK_BYTES;
    unsigned char last = 0;

    for (size_t i = 0; i < n; i++)
        out[i] = (unsigned char)(i * 7 + 3);
    WL_CU(run, memcpy_htod, m->chunks[0], out, n);
    WL_CU(run, memcpy_dtoh, back, m->chunks[0], n);
    if (memcmp(out, back, n) != 0)
        wl_die(run, "device memory round trip mismatch (%zu bytes HtoD then DtoH)", n);
    m->roundtrip = 1;

    /* The memset must have reached the far end of the footprint too. */
    uint64_t last_size = wl_mem_chunk_size(m, m->nchunks - 1);
    WL_CU(run, memcpy_dtoh, &last, m->chunks[m->nchunks - 1] + last_size - 1, 1);
    if (last != WL_FILL)
        wl_die(run, "device memory check failed: last byte 0x%02x after memset 0x%02x",
               last, WL_FILL);
}

static CUresult wl_advise_device(struct wl_run *run, CUdeviceptr p, size_t size)
{
    if (run->drv.mem_advise_v2) {
        CUmemLocation loc = {CU_MEM_LOCATION_TYPE_DEVICE, (int)run->dev};
        return run->drv.mem_advise_v2(p, size, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, loc);
    }
    if (run->drv.mem_advise)
        return run->drv.mem_advise(p, size, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, run->dev);
    wl_die(run, "--prefer-device: the driver provides no cuMemAdvise");
}

CUresult wl_mem_alloc_chunk(struct wl_run *run, size_t i, uint64_t size, double *us)
{
    struct wl_footprint *m = &run->mem;
    CUresult rc;
    double t0 = wl_mono_s();
    if (run->cfg.managed) {
        if (!run->drv.mem_alloc_managed)
            wl_die(run, "--managed: the driver provides no cuMemAllocManaged");
        rc = run->drv.mem_alloc_managed(&m->chunks[i], (size_t)size, CU_MEM_ATTACH_GLOBAL);
    } else {
        rc = run->drv.mem_alloc(&m->chunks[i], (size_t)size);
    }
    *us = (wl_mono_s() - t0) * 1e6;
    if (rc != CUDA_SUCCESS) {
        m->chunks[i] = 0;
        return rc;
    }
    if (run->cfg.prefer_device) {
        CUresult a = wl_advise_device(run, m->chunks[i], (size_t)size);
        if (a != CUDA_SUCCESS)
            wl_die_cu(run, run->drv.mem_advise_v2 ? "cuMemAdvise_v2" : "cuMemAdvise", a);
    }
    WL_CU(run, memset_d8, m->chunks[i], WL_FILL, (size_t)size);
    if (size >= WL_SIG_MIN_CHUNK) {
        unsigned char sig[WL_SIG_BYTES];
        wl_signature(i, sig);
        WL_CU(run, memcpy_htod, m->chunks[i] + wl_sig_offset(size), sig, WL_SIG_BYTES);
    }
    m->allocated = i + 1;
    m->held += size;
    return CUDA_SUCCESS;
}

void wl_mem_setup(struct wl_run *run)
{
    struct wl_footprint *m = &run->mem;
    uint64_t bytes = run->cfg.mem_bytes;
    uint64_t chunk = run->cfg.alloc_chunk && run->cfg.alloc_chunk < bytes
                         ? run->cfg.alloc_chunk : bytes;

    WL_CU(run, mem_get_info, &m->free_before, &m->total);
    m->free_after = m->free_before;
    m->bytes = bytes;
    m->chunk = chunk;
    if (!bytes)
        return;
    m->nchunks = (size_t)((bytes + chunk - 1) / chunk);
    m->chunks = calloc(m->nchunks, sizeof *m->chunks);
    if (!m->chunks)
        wl_die(run, "out of host memory for %zu chunk handles", m->nchunks);
    if (run->cfg.ramp_every_ms > 0)
        return;     /* allocated step by step during the loop (ramp.c) */
    for (size_t i = 0; i < m->nchunks; i++) {
        double us;
        CUresult rc = wl_mem_alloc_chunk(run, i, wl_mem_chunk_size(m, i), &us);
        if (rc != CUDA_SUCCESS)
            wl_die_cu(run, run->cfg.managed ? "cuMemAllocManaged" : "cuMemAlloc_v2", rc);
    }
    wl_mem_roundtrip(run);
    WL_CU(run, mem_get_info, &m->free_after, &m->total);
}

/* Whether chunk i still holds its fill, signature and (chunk 0) round-trip pattern. */
static int wl_chunk_intact(struct wl_run *run, size_t i)
{
    struct wl_footprint *m = &run->mem;
    uint64_t size = wl_mem_chunk_size(m, i);
    unsigned char buf[WL_CHECK_BYTES], sig[WL_SIG_BYTES];
    unsigned char last = 0;
    WL_CU(run, memcpy_dtoh, &last, m->chunks[i] + size - 1, 1);
    if (last != WL_FILL)
        return 0;
    if (i == 0 && m->roundtrip) {
        size_t n = size < WL_CHECK_BYTES ? (size_t)size : WL_CHECK_BYTES;
        WL_CU(run, memcpy_dtoh, buf, m->chunks[0], n);
        for (size_t k = 0; k < n; k++)
            if (buf[k] != (unsigned char)(k * 7 + 3))
                return 0;
    }
    if (size >= WL_SIG_MIN_CHUNK) {
        wl_signature(i, sig);
        WL_CU(run, memcpy_dtoh, buf, m->chunks[i] + wl_sig_offset(size), WL_SIG_BYTES);
        if (memcmp(buf, sig, WL_SIG_BYTES) != 0)
            return 0;
        WL_CU(run, memcpy_dtoh, buf, m->chunks[i] + wl_sig_offset(size) - 1, 1);
        if (buf[0] != WL_FILL)
            return 0;
    }
    return 1;
}

void wl_mem_verify(struct wl_run *run)
{
    struct wl_footprint *m = &run->mem;
    size_t bad = 0, first_bad = 0;
    if (!m->allocated || m->freed)
        return;
    for (size_t i = 0; i < m->allocated; i++) {
        if (!wl_chunk_intact(run, i) && bad++ == 0)
            first_bad = i;
    }
    struct wl_json j;
    wl_json_begin(&j, "check", run->cfg.name);
    wl_json_bool(&j, "ok", bad == 0);
    wl_json_uint(&j, "chunks", m->allocated);
    wl_json_uint(&j, "bytes", m->held);
    wl_json_uint(&j, "bad_chunks", bad);
    wl_json_num(&j, "mono_s", wl_mono_s());
    wl_json_emit(&j);
    if (bad)
        wl_die(run, "data lost: %zu of %zu chunks changed (first: chunk %zu)", bad,
               m->allocated, first_bad);
}

void wl_mem_release(struct wl_run *run)
{
    struct wl_footprint *m = &run->mem;
    for (size_t i = 0; i < m->allocated; i++)
        if (m->chunks[i])
            WL_CU(run, mem_free, m->chunks[i]);
    free(m->chunks);
    m->chunks = NULL;
    m->nchunks = 0;
    m->allocated = 0;
    m->held = 0;
}

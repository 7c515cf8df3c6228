/*
 * The device footprint: allocated once (whole or in chunks, like a caching
 * allocator's segments), touched with a memset, and checked with a small
 * host round trip so a broken copy path fails loudly instead of silently.
 */
#include <stdlib.h>
#include <string.h>

#include "workload.h"

#define WL_CHECK_BYTES 4096
#define WL_FILL 0xA5

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

    /* The memset must have reached the far end of the footprint too. */
    uint64_t last_size = m->bytes - (uint64_t)(m->nchunks - 1) * m->chunk;
    WL_CU(run, memcpy_dtoh, &last, m->chunks[m->nchunks - 1] + last_size - 1, 1);
    if (last != WL_FILL)
        wl_die(run, "device memory check failed: last byte 0x%02x after memset 0x%02x",
               last, WL_FILL);
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
    for (size_t i = 0; i < m->nchunks; i++) {
        uint64_t size = i + 1 < m->nchunks ? chunk : bytes - chunk * (uint64_t)i;
        WL_CU(run, mem_alloc, &m->chunks[i], (size_t)size);
        WL_CU(run, memset_d8, m->chunks[i], WL_FILL, (size_t)size);
    }
    wl_mem_roundtrip(run);
    WL_CU(run, mem_get_info, &m->free_after, &m->total);
}

void wl_mem_release(struct wl_run *run)
{
    struct wl_footprint *m = &run->mem;
    for (size_t i = 0; i < m->nchunks; i++)
        if (m->chunks[i])
            WL_CU(run, mem_free, m->chunks[i]);
    free(m->chunks);
    m->chunks = NULL;
    m->nchunks = 0;
}

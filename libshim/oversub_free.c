/*
 * libshim/oversub_free.c: cuMemFreeAsync of a cuMemAllocAsync that oversub.c
 * made managed memory.  The memory may be in use by work queued on the
 * stream, and managed memory has no stream-ordered free: an event is recorded
 * on the stream and the pointer freed (cuMemFree_v2, ledger released) once
 * the event has completed, seen by the next synchronize, stream-ordered
 * allocation or free of the process; an allocation that the ledger would
 * refuse first waits for the pending ones.  Without an event (creation or
 * record failed, or a capture in progress) the free waits for the stream.
 */
#include <stdlib.h>

#include "shim.h"

#define TGS_CU_EVENT_DISABLE_TIMING 2u

static struct tgs_oversub *ov(void) { return &tgs_g.oversub; }

static CUresult free_now(uint64_t ptr)
{
    CUresult r = tgs_g.real.cuMemFree_v2 ? tgs_g.real.cuMemFree_v2(ptr) : CUDA_ERROR_NOT_SUPPORTED;
    uint64_t b;
    if (r == CUDA_SUCCESS && tgs_ptrmap_take(&tgs_g.ptrs, TGS_KIND_DPTR, ptr, &b))
        tgs_mem_release(b);
    return r;
}

/* An event recorded after the stream's work, or NULL. */
static CUevent mark(CUstream stream, int ptsz)
{
    CUevent ev = NULL;
    if (tgs_capture_any() || !tgs_g.real.cuEventCreate || !tgs_g.real.cuEventDestroy_v2 ||
        !tgs_g.real.cuEventQuery || !tgs_g.real.cuEventSynchronize ||
        tgs_g.real.cuEventCreate(&ev, TGS_CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
        return NULL;
    CUresult r = ptsz ? (tgs_g.real.cuEventRecord_ptsz
                             ? tgs_g.real.cuEventRecord_ptsz(ev, stream)
                             : CUDA_ERROR_NOT_SUPPORTED)
                      : (tgs_g.real.cuEventRecord ? tgs_g.real.cuEventRecord(ev, stream)
                                                  : CUDA_ERROR_NOT_SUPPORTED);
    if (r != CUDA_SUCCESS) {
        tgs_g.real.cuEventDestroy_v2(ev);
        return NULL;
    }
    return ev;
}

static int defer(uint64_t ptr, CUevent ev)
{
    struct tgs_oversub *o = ov();
    pthread_mutex_lock(&o->free_mu);
    if (o->npend == o->cappend) {
        size_t cap = o->cappend ? o->cappend * 2 : 16;
        struct tgs_ofree *p = realloc(o->pend, cap * sizeof *p);
        if (!p) {
            pthread_mutex_unlock(&o->free_mu);
            return -1;
        }
        o->pend = p;
        o->cappend = cap;
    }
    o->pend[o->npend] = (struct tgs_ofree){ .ptr = ptr, .ev = ev };
    __atomic_store_n(&o->npend, o->npend + 1, __ATOMIC_RELAXED); /* read unlocked */
    pthread_mutex_unlock(&o->free_mu);
    return 0;
}

int tgs_oversub_reap(int wait)
{
    struct tgs_oversub *o = ov();
    int freed = 0;
    if (!__atomic_load_n(&o->npend, __ATOMIC_RELAXED))
        return 0;
    pthread_mutex_lock(&o->free_mu);
    for (size_t i = 0; i < o->npend;) {
        struct tgs_ofree *f = &o->pend[i];
        CUresult q = wait ? tgs_g.real.cuEventSynchronize(f->ev) : tgs_g.real.cuEventQuery(f->ev);
        if (q == CUDA_ERROR_NOT_READY) {
            i++;
            continue;
        }
        /* done (or the event broke with its context: nothing of it runs any more) */
        if (free_now(f->ptr) != CUDA_SUCCESS)
            tgs_log(TGS_LOG_INFO, "oversubscription: deferred free of a stream-ordered "
                                  "allocation failed");
        tgs_g.real.cuEventDestroy_v2(f->ev);
        o->pend[i] = o->pend[o->npend - 1];
        __atomic_store_n(&o->npend, o->npend - 1, __ATOMIC_RELAXED);
        freed++;
    }
    pthread_mutex_unlock(&o->free_mu);
    return freed;
}

int tgs_oversub_free_async(CUdeviceptr dptr, CUstream stream, int ptsz, CUresult *r)
{
    uint64_t b;
    tgs_oversub_reap(0);
    if (!tgs_ptrmap_get(&tgs_g.ptrs, TGS_KIND_ASYNC_MANAGED, (uint64_t)dptr, &b))
        return 0;
    CUevent ev = mark(stream, ptsz);
    if (ev) {
        tgs_ptrmap_take(&tgs_g.ptrs, TGS_KIND_ASYNC_MANAGED, (uint64_t)dptr, &b);
        tgs_oversub_forget(dptr);
        if (defer((uint64_t)dptr, ev) == 0) {
            *r = CUDA_SUCCESS;
            return 1;
        }
        tgs_g.real.cuEventSynchronize(ev); /* no room to remember it: wait here */
        tgs_g.real.cuEventDestroy_v2(ev);
        *r = free_now(dptr);
        return 1;
    }
    CUresult s = ptsz ? (tgs_g.real.cuStreamSynchronize_ptsz
                             ? tgs_g.real.cuStreamSynchronize_ptsz(stream)
                             : CUDA_ERROR_NOT_SUPPORTED)
                      : (tgs_g.real.cuStreamSynchronize ? tgs_g.real.cuStreamSynchronize(stream)
                                                        : CUDA_ERROR_NOT_SUPPORTED);
    if (s != CUDA_SUCCESS) { /* a bad stream: the pointer stays allocated, as the driver would */
        *r = s;
        return 1;
    }
    tgs_ptrmap_take(&tgs_g.ptrs, TGS_KIND_ASYNC_MANAGED, (uint64_t)dptr, &b);
    tgs_oversub_forget(dptr);
    *r = free_now(dptr);
    return 1;
}

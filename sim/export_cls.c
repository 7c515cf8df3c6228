/*
 * export_cls.c: context-local storage, the CONTEXT_LOCAL_STORAGE export table
 * the CUDA runtime keeps its per-context state in.  put(ctx, key, value,
 * destructor), delete(ctx, key), get(&value, ctx, key); a NULL context is the
 * current one; get of a key never put is CUDA_ERROR_INVALID_HANDLE.  When a
 * context is destroyed (cuCtxDestroy, the primary context's last release or
 * a reset), each entry's destructor runs with (ctx, key, value), as the
 * runtime expects before its state goes.
 */
#include <stdlib.h>

#include "export_tables.h"
#include "sim.h"

struct sim_cls {
    struct sim_cls *next;
    void *key;
    void *value;
    void (*dtor)(CUcontext, void *, void *);
};

static struct sim_cls **find(struct CUctx_st *c, void *key)
{
    struct sim_cls **p = &c->cls;
    while (*p && (*p)->key != key)
        p = &(*p)->next;
    return p;
}

CUresult sim_cls_put(CUcontext ctx, void *key, void *value, void (*dtor)(CUcontext, void *, void *))
{
    struct CUctx_st *c;
    CUresult r = sim_ctx_or_current(ctx, &c);
    if (r != CUDA_SUCCESS)
        return r;
    struct sim_cls *fresh = malloc(sizeof *fresh);
    if (!fresh)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&g_sim.lock);
    struct sim_cls **p = find(c, key);
    if (*p) {
        (*p)->value = value;
        (*p)->dtor = dtor;
        pthread_mutex_unlock(&g_sim.lock);
        free(fresh);
        return CUDA_SUCCESS;
    }
    *fresh = (struct sim_cls){.next = NULL, .key = key, .value = value, .dtor = dtor};
    *p = fresh;
    pthread_mutex_unlock(&g_sim.lock);
    return CUDA_SUCCESS;
}

CUresult sim_cls_delete(CUcontext ctx, void *key)
{
    struct CUctx_st *c;
    CUresult r = sim_ctx_or_current(ctx, &c);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&g_sim.lock);
    struct sim_cls **p = find(c, key), *gone = *p;
    if (gone)
        *p = gone->next;
    pthread_mutex_unlock(&g_sim.lock);
    free(gone);
    return CUDA_SUCCESS;
}

CUresult sim_cls_get(void **value, CUcontext ctx, void *key)
{
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUctx_st *c;
    CUresult r = sim_ctx_or_current(ctx, &c);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&g_sim.lock);
    struct sim_cls *e = *find(c, key);
    if (e)
        *value = e->value;
    pthread_mutex_unlock(&g_sim.lock);
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* The destructors run without the lock: they may call back into the driver. */
void sim_cls_destroy(struct CUctx_st *c)
{
    pthread_mutex_lock(&g_sim.lock);
    struct sim_cls *e = c->cls;
    c->cls = NULL;
    pthread_mutex_unlock(&g_sim.lock);
    while (e) {
        struct sim_cls *next = e->next;
        if (e->dtor)
            e->dtor(c, e->key, e->value);
        free(e);
        e = next;
    }
}

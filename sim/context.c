/*
 * context.c: primary and created contexts and the per-thread current
 * context stack.  Each context owns one shared context slot: the unit the
 * device time-slices between.
 */
#include <stdlib.h>

#include "export_tables.h"
#include "sim.h"

static struct CUctx_st *ctx_new(int dev, int primary, unsigned int flags)
{
    struct CUctx_st *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    dev = sim_phys(dev); /* the state file's device (visible.c) */
    c->slot = sim_ctx_slot_alloc(dev);
    if (c->slot < 0) {
        sim_log(TGS_LOG_ERROR, "no free context slot (max %d contexts in all)", SIM_MAX_CTXS);
        free(c);
        return NULL;
    }
    c->obj.kind = SIM_K_CTX;
    c->dev = dev;
    c->primary = primary;
    c->flags = flags;
    sim_handle_add(c);
    return c;
}

static void ctx_free(struct CUctx_st *c)
{
    sim_ctx_sync(c);
    sim_cls_destroy(c); /* the runtime's per-context state goes first */
    sim_event_times_ctx_gone(c);
    sim_handle_del(c);
    sim_ctx_slot_free(c->slot);
    c->obj.kind = 0;
    free(c);
}

static void pop_if_current(struct CUctx_st *c)
{
    struct sim_thread *t = &g_sim_thread;
    if (t->depth > 0 && t->stack[t->depth - 1] == c)
        t->depth--;
}

CUresult sim_current_ctx(struct CUctx_st **out)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    struct sim_thread *t = &g_sim_thread;
    if (t->depth == 0 || !sim_handle_ok(t->stack[t->depth - 1], SIM_K_CTX))
        return CUDA_ERROR_INVALID_CONTEXT;
    *out = t->stack[t->depth - 1];
    return CUDA_SUCCESS;
}

int sim_current_dev(void)
{
    struct CUctx_st *c;
    return sim_current_ctx(&c) == CUDA_SUCCESS ? sim_ord(c->dev) : -1;
}

CUresult sim_ctx_sync(struct CUctx_st *ctx)
{
    sim_wait_seq(ctx, sim_ctx_tail(ctx));
    return CUDA_SUCCESS;
}

struct CUctx_st *sim_primary_ctx(CUdevice dev)
{
    pthread_mutex_lock(&g_sim.lock);
    struct CUctx_st *c = g_sim.primary[dev];
    pthread_mutex_unlock(&g_sim.lock);
    return c;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    CUresult r = sim_check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUctx_st *c = sim_primary_ctx(dev);
    if (!c) {
        struct CUctx_st *n = ctx_new(dev, 1, g_sim.primary_flags[dev]);
        if (!n)
            return CUDA_ERROR_OUT_OF_MEMORY;
        pthread_mutex_lock(&g_sim.lock);
        if (!g_sim.primary[dev]) {
            g_sim.primary[dev] = n;
            n = NULL;
        }
        c = g_sim.primary[dev];
        pthread_mutex_unlock(&g_sim.lock);
        if (n) /* another thread won the race */
            ctx_free(n);
    }
    pthread_mutex_lock(&g_sim.lock);
    g_sim.primary_refs[dev]++;
    pthread_mutex_unlock(&g_sim.lock);
    *pctx = c;
    return CUDA_SUCCESS;
}

static CUresult primary_drop(CUdevice dev, int all)
{
    CUresult r = sim_check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    struct CUctx_st *dead = NULL;
    pthread_mutex_lock(&g_sim.lock);
    if (!all && g_sim.primary_refs[dev] <= 0) {
        pthread_mutex_unlock(&g_sim.lock);
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    g_sim.primary_refs[dev] = all ? 0 : g_sim.primary_refs[dev] - 1;
    if (g_sim.primary_refs[dev] == 0) {
        dead = g_sim.primary[dev];
        g_sim.primary[dev] = NULL;
    }
    pthread_mutex_unlock(&g_sim.lock);
    if (dead) {
        pop_if_current(dead);
        ctx_free(dead);
    }
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) { return primary_drop(dev, 0); }
CUresult cuDevicePrimaryCtxRelease(CUdevice dev) { return primary_drop(dev, 0); }
CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) { return primary_drop(dev, 1); }
CUresult cuDevicePrimaryCtxReset(CUdevice dev) { return primary_drop(dev, 1); }

CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    CUresult r = sim_check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!flags || !active)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_sim.lock);
    *flags = g_sim.primary_flags[dev];
    *active = g_sim.primary[dev] != NULL;
    pthread_mutex_unlock(&g_sim.lock);
    return CUDA_SUCCESS;
}

CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    CUresult r = sim_check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_thread *t = &g_sim_thread;
    if (t->depth >= SIM_MAX_STACK)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct CUctx_st *c = ctx_new(dev, 0, flags);
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    t->stack[t->depth++] = c;
    *pctx = c;
    return CUDA_SUCCESS;
}

CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    return cuCtxCreate_v2(pctx, flags, dev);
}

CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
                        unsigned int flags, CUdevice dev)
{
    if (numParams < 0 || (numParams > 0 && !paramsArray))
        return CUDA_ERROR_INVALID_VALUE;
    return cuCtxCreate_v2(pctx, flags, dev);
}

CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams, unsigned int flags,
                        CUdevice dev)
{
    if (ctxCreateParams && ctxCreateParams->numExecAffinityParams < 0)
        return CUDA_ERROR_INVALID_VALUE;
    return cuCtxCreate_v2(pctx, flags, dev);
}

CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!sim_handle_ok(ctx, SIM_K_CTX) || ctx->primary)
        return CUDA_ERROR_INVALID_CONTEXT;
    pop_if_current(ctx);
    ctx_free(ctx);
    return CUDA_SUCCESS;
}

CUresult cuCtxDestroy(CUcontext ctx) { return cuCtxDestroy_v2(ctx); }

CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!sim_handle_ok(ctx, SIM_K_CTX))
        return CUDA_ERROR_INVALID_CONTEXT;
    struct sim_thread *t = &g_sim_thread;
    if (t->depth >= SIM_MAX_STACK)
        return CUDA_ERROR_OUT_OF_MEMORY;
    t->stack[t->depth++] = ctx;
    return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent(CUcontext ctx) { return cuCtxPushCurrent_v2(ctx); }

CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    struct sim_thread *t = &g_sim_thread;
    if (t->depth == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    struct CUctx_st *c = t->stack[--t->depth];
    if (pctx)
        *pctx = c;
    return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent(CUcontext *pctx) { return cuCtxPopCurrent_v2(pctx); }

CUresult cuCtxSetCurrent(CUcontext ctx)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    struct sim_thread *t = &g_sim_thread;
    if (!ctx) {
        if (t->depth > 0)
            t->depth--;
        return CUDA_SUCCESS;
    }
    if (!sim_handle_ok(ctx, SIM_K_CTX))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (t->depth == 0)
        t->depth = 1;
    t->stack[t->depth - 1] = ctx;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_thread *t = &g_sim_thread;
    *pctx = t->depth > 0 ? t->stack[t->depth - 1] : NULL;
    return CUDA_SUCCESS;
}

CUresult sim_ctx_or_current(CUcontext ctx, struct CUctx_st **out)
{
    if (!ctx)
        return sim_current_ctx(out);
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!sim_handle_ok(ctx, SIM_K_CTX))
        return CUDA_ERROR_INVALID_CONTEXT;
    *out = ctx;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
    struct CUctx_st *c;
    CUresult r = sim_ctx_or_current(ctx, &c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    *device = sim_ord(c->dev);
    return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice *device) { return cuCtxGetDevice_v2(device, NULL); }

CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
    struct CUctx_st *c;
    CUresult r = sim_ctx_or_current(ctx, &c);
    if (r == CUDA_SUCCESS)
        r = sim_capture_check_ctx(c); /* not while one of its streams captures */
    return r != CUDA_SUCCESS ? r : sim_ctx_sync(c);
}

CUresult cuCtxSynchronize(void) { return cuCtxSynchronize_v2(NULL); }

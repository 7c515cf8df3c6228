/*
 * export_tables.c: cuGetExportTable, the driver's private tables that the
 * CUDA runtime (cudart, also linked statically into cuBLAS, cuBLASLt and
 * cuDNN) asks for by UUID.  A table is an array of function pointers; in all
 * but CONTEXT_LOCAL_STORAGE slot 0 holds the table's size in bytes.
 *
 * What each slot does is what the runtime was seen to need
 * (docs/simulator.md, "The CUDA runtime"); a slot nobody was seen to call
 * answers CUDA_ERROR_NOT_SUPPORTED, which the runtime accepts.  An unknown
 * UUID is CUDA_ERROR_INVALID_VALUE with a NULL table, as on the real driver.
 */
#include <string.h>

#include "export_tables.h"
#include "sim.h"

/* One stub per table and slot, so the log says which slot the runtime called. */
#define SLOT_STUB(t, i)                                                                     \
    static CUresult stub_##t##_##i(void)                                                    \
    {                                                                                       \
        sim_log(TGS_LOG_INFO, "cuGetExportTable: %s slot %d: not supported", #t, i);       \
        return CUDA_ERROR_NOT_SUPPORTED;                                                    \
    }
#define SLOT_STUBS(X, t)                                                                      \
    X(t, 0) X(t, 1) X(t, 2) X(t, 3) X(t, 4) X(t, 5) X(t, 6) X(t, 7) X(t, 8) X(t, 9) X(t, 10) \
    X(t, 11) X(t, 12) X(t, 13) X(t, 14) X(t, 15) X(t, 16) X(t, 17) X(t, 18) X(t, 19)        \
    X(t, 20) X(t, 21) X(t, 22) X(t, 23) X(t, 24) X(t, 25)
#define SLOT_STUB_PTR(t, i) (void *)stub_##t##_##i,
#define TABLE_STUBS(name, ...) SLOT_STUBS(SLOT_STUB, name)
SIM_EXPORT_TABLES(TABLE_STUBS)
#define TABLE_STUB_ROW(name, ...) {SLOT_STUBS(SLOT_STUB_PTR, name)},
#define SLOTS_MAX 26
static void *const slot_stubs[SIM_EXPORT_NTABLES][SLOTS_MAX] = {SIM_EXPORT_TABLES(TABLE_STUB_ROW)};
#define TABLE_FITS(name, nslots, ...) _Static_assert(nslots <= SLOTS_MAX, #name " has a stub a slot");
SIM_EXPORT_TABLES(TABLE_FITS)

/* CUDART_INTERFACE ------------------------------------------------------- */

/* nvcc's fatbin wrapper {magic 0x466243B1, version, fatbin, unused} or a fatbin: loaded
 * as cuModuleLoadData loads it; the extra arguments (callbacks, options) change nothing. */
static CUresult cudart_module_from_wrapper(CUmodule *mod, const void *wrapper)
{
    return sim_module_load_current(mod, wrapper, 0);
}

static CUresult cudart_module_from_wrapper_ext(CUmodule *mod, const void *wrapper, void *a3,
                                               void *a4, unsigned int a5)
{
    (void)a3, (void)a4, (void)a5;
    return sim_module_load_current(mod, wrapper, 0);
}

static CUresult cudart_module_from_fatbin(const void *fatbin, CUmodule *mod, void *a3, void *a4,
                                          unsigned int a5)
{
    (void)a3, (void)a4, (void)a5;
    return sim_module_load_current(mod, fatbin, 0);
}

/* The device's primary context: the runtime's first call takes one reference, which it
 * keeps (a program's own release cannot destroy the context under the runtime); later
 * calls take none, unless a reset destroyed the context meanwhile. */
static CUresult cudart_primary_ctx(CUcontext *pctx, CUdevice dev)
{
    CUresult r = sim_check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_sim.lock);
    int held = g_sim.runtime_retained[dev];
    g_sim.runtime_retained[dev] = 1;
    pthread_mutex_unlock(&g_sim.lock);
    struct CUctx_st *c = held ? sim_primary_ctx(dev) : NULL;
    if (c) {
        *pctx = c;
        return CUDA_SUCCESS;
    }
    return cuDevicePrimaryCtxRetain(pctx, dev);
}

static void cudart_notify(uintptr_t arg) { (void)arg; }

/* The real driver loads its PTX compiler and NVVM here; the simulator has none to load. */
static CUresult cudart_load_compilers(void) { return CUDA_SUCCESS; }

/* CTX_CREATE_BYPASS: a context made as cuCtxCreate_v2 makes one */
static CUresult ctx_create_bypass(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    return cuCtxCreate_v2(pctx, flags, dev);
}

/* TOOLS_TLS: the calling thread's current context (cuBLASLt) ------------- */

static CUresult tools_current_ctx(CUcontext *out)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUctx_st *c = NULL;
    if (sim_current_ctx(&c) != CUDA_SUCCESS)
        c = NULL;
    *out = c;
    return CUDA_SUCCESS;
}

/* TOOLS_RUNTIME_CALLBACK_HOOKS: scratch buffers the runtime writes into --- */

static uint32_t hook_buf1[1024], hook_buf2[16];

static void hooks_buffer1(void **p, size_t *n)
{
    if (p)
        *p = hook_buf1;
    if (n)
        *n = 1024;
}

static void hooks_buffer2(void **p, size_t *n)
{
    if (p)
        *p = hook_buf2;
    if (n)
        *n = 14;
}

/* INTEGRITY_CHECK --------------------------------------------------------- */

static CUresult integrity_check(uint32_t version, uint64_t unix_seconds, uint64_t out[2])
{
    return sim_integrity_digest(version, unix_seconds, out);
}

/* CONTEXT_CHECKS: "the context is fine" ----------------------------------- */

static CUresult context_check(CUcontext ctx, uint32_t *out, const void **aux)
{
    (void)ctx, (void)aux;
    if (out)
        *out = 0;
    return CUDA_SUCCESS;
}

static uint32_t context_check3(void) { return 0; }

/* CONTEXT_ID (cuBLASLt): a context's unique id, as cuCtxGetId ------------ */

static CUresult context_id(CUcontext ctx, unsigned long long *out)
{
    return cuCtxGetId(ctx, out);
}

/* The tables -------------------------------------------------------------- */

struct export_table {
    unsigned char uuid[16];
    size_t nslots;
    void **slots;
};

#define SIM_EXPORT_STORAGE(name, nslots, ...) static void *tbl_##name[nslots];
SIM_EXPORT_TABLES(SIM_EXPORT_STORAGE)
#undef SIM_EXPORT_STORAGE

static struct export_table tables[SIM_EXPORT_NTABLES] = {
#define SIM_EXPORT_ROW(name, nslots, ...) [SIM_EXPORT_##name] = {{__VA_ARGS__}, nslots, tbl_##name},
    SIM_EXPORT_TABLES(SIM_EXPORT_ROW)
#undef SIM_EXPORT_ROW
};

static void set(enum sim_export_table t, size_t slot, void *fn) { tables[t].slots[slot] = fn; }

static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void tables_fill(void)
{
    for (int t = 0; t < SIM_EXPORT_NTABLES; t++) {
        for (size_t i = 0; i < tables[t].nslots; i++)
            tables[t].slots[i] = slot_stubs[t][i];
        if (t != SIM_EXPORT_CONTEXT_LOCAL_STORAGE)
            tables[t].slots[0] = (void *)(uintptr_t)(tables[t].nslots * sizeof(void *));
    }
    set(SIM_EXPORT_CUDART_INTERFACE, 1, (void *)cudart_module_from_wrapper);
    set(SIM_EXPORT_CUDART_INTERFACE, 2, (void *)cudart_primary_ctx);
    set(SIM_EXPORT_CUDART_INTERFACE, 6, (void *)cudart_module_from_wrapper_ext);
    set(SIM_EXPORT_CUDART_INTERFACE, 7, (void *)cudart_notify);
    set(SIM_EXPORT_CUDART_INTERFACE, 8, (void *)cudart_module_from_fatbin);
    set(SIM_EXPORT_CUDART_INTERFACE, 12, (void *)cudart_load_compilers);
    set(SIM_EXPORT_CTX_CREATE_BYPASS, 1, (void *)ctx_create_bypass);
    set(SIM_EXPORT_TOOLS_TLS, 2, (void *)tools_current_ctx);
    set(SIM_EXPORT_TOOLS_RUNTIME_CALLBACK_HOOKS, 2, (void *)hooks_buffer1);
    set(SIM_EXPORT_TOOLS_RUNTIME_CALLBACK_HOOKS, 6, (void *)hooks_buffer2);
    set(SIM_EXPORT_CONTEXT_LOCAL_STORAGE, 0, (void *)sim_cls_put);
    set(SIM_EXPORT_CONTEXT_LOCAL_STORAGE, 1, (void *)sim_cls_delete);
    set(SIM_EXPORT_CONTEXT_LOCAL_STORAGE, 2, (void *)sim_cls_get);
    set(SIM_EXPORT_INTEGRITY_CHECK, 1, (void *)integrity_check);
    set(SIM_EXPORT_CONTEXT_CHECKS, 2, (void *)context_check);
    set(SIM_EXPORT_CONTEXT_CHECKS, 3, (void *)context_check3);
    set(SIM_EXPORT_CONTEXT_ID, 4, (void *)context_id);
}

void *const *sim_export_table_address(enum sim_export_table t)
{
    pthread_once(&tables_once, tables_fill);
    return tables[t].slots;
}

CUresult cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId)
{
    if (!ppExportTable || !pExportTableId)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_once(&tables_once, tables_fill);
    for (int t = 0; t < SIM_EXPORT_NTABLES; t++) {
        if (memcmp(tables[t].uuid, pExportTableId->bytes, 16) == 0) {
            *ppExportTable = tables[t].slots;
            return CUDA_SUCCESS;
        }
    }
    sim_log(TGS_LOG_INFO, "cuGetExportTable: unknown table %02x%02x%02x%02x-...",
            (unsigned char)pExportTableId->bytes[0], (unsigned char)pExportTableId->bytes[1],
            (unsigned char)pExportTableId->bytes[2], (unsigned char)pExportTableId->bytes[3]);
    *ppExportTable = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

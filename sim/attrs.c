/*
 * attrs.c: function and kernel attributes, with the values an sm_90
 * (H100-class) compiler output typically has: 32 registers, no static
 * shared/constant/local memory, 48 KiB of dynamic shared memory unless
 * raised (up to the device's 227 KiB opt-in).  What the real driver lets a
 * program set can be set and reads back; the rest is INVALID_VALUE.
 */
#include <string.h>

#include "sim.h"

#define SIM_MAX_DYN_SMEM_OPTIN 232448
#define SIM_FUNC_REGS 32

static int default_attr(int a)
{
    switch (a) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return 1024;
    case CU_FUNC_ATTRIBUTE_NUM_REGS: return SIM_FUNC_REGS;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION: return 90;
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION: return 90;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: return 49152;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT: return -1;
    default: return 0;
    }
}

int sim_func_attr(const struct CUfunc_st *f, int a)
{
    return f->attr_set[a] ? f->attr[a] : default_attr(a);
}

static CUresult check_set(int a, int v)
{
    switch (a) {
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
        return v >= 0 && v <= SIM_MAX_DYN_SMEM_OPTIN ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
        return v >= -1 && v <= 100 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
        return v >= 0 && v <= 8 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
        return v == 0 || v == 1 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
        return v >= 0 && v <= 2 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    default:
        return CUDA_ERROR_INVALID_VALUE; /* read-only */
    }
}

/* The function behind h, once the driver is initialised. */
static CUresult func_of(CUfunction h, struct CUfunc_st **f)
{
    CUresult r = sim_check_init();
    return r != CUDA_SUCCESS ? r : sim_func_resolve(h, f);
}

static int bad_attr(CUfunction_attribute a)
{
    return (int)a < 0 || a >= CU_FUNC_ATTRIBUTE_MAX;
}

static int bad_cache(CUfunc_cache c)
{
    return (int)c < 0 || c > CU_FUNC_CACHE_PREFER_EQUAL;
}

CUresult cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!pi || bad_attr(attrib))
        return CUDA_ERROR_INVALID_VALUE;
    struct CUfunc_st *f;
    if ((r = sim_func_resolve(hfunc, &f)) != CUDA_SUCCESS)
        return r;
    *pi = sim_func_attr(f, attrib);
    return CUDA_SUCCESS;
}

CUresult cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value)
{
    struct CUfunc_st *f;
    CUresult r = func_of(hfunc, &f);
    if (r != CUDA_SUCCESS)
        return r;
    if (bad_attr(attrib) || check_set(attrib, value))
        return CUDA_ERROR_INVALID_VALUE;
    f->attr[attrib] = value;
    f->attr_set[attrib] = 1;
    return CUDA_SUCCESS;
}

CUresult cuFuncSetCacheConfig(CUfunction hfunc, CUfunc_cache config)
{
    struct CUfunc_st *f;
    CUresult r = func_of(hfunc, &f);
    if (r != CUDA_SUCCESS)
        return r;
    if (bad_cache(config))
        return CUDA_ERROR_INVALID_VALUE;
    f->cache_config = config;
    return CUDA_SUCCESS;
}

static CUresult kernel_check(CUkernel k, CUdevice dev)
{
    CUresult r = sim_check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    return sim_handle_ok(k, SIM_K_KERNEL) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuKernelGetAttribute(int *pi, CUfunction_attribute attrib, CUkernel kernel, CUdevice dev)
{
    CUresult r = kernel_check(kernel, dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pi || bad_attr(attrib))
        return CUDA_ERROR_INVALID_VALUE;
    *pi = kernel->attr_set[attrib] ? kernel->attr[attrib] : default_attr(attrib);
    return CUDA_SUCCESS;
}

CUresult cuKernelSetAttribute(CUfunction_attribute attrib, int val, CUkernel kernel, CUdevice dev)
{
    CUresult r = kernel_check(kernel, dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (bad_attr(attrib) || check_set(attrib, val))
        return CUDA_ERROR_INVALID_VALUE;
    kernel->attr[attrib] = val;
    kernel->attr_set[attrib] = 1;
    /* and on the functions already made from it */
    for (size_t i = 0; i < kernel->lib->nmods; i++)
        for (size_t j = 0; j < kernel->lib->mods[i]->nfuncs; j++) {
            struct CUfunc_st *f = kernel->lib->mods[i]->funcs[j];
            if (!strcmp(f->name, kernel->name)) {
                f->attr[attrib] = val;
                f->attr_set[attrib] = 1;
            }
        }
    return CUDA_SUCCESS;
}

CUresult cuKernelSetCacheConfig(CUkernel kernel, CUfunc_cache config, CUdevice dev)
{
    CUresult r = kernel_check(kernel, dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (bad_cache(config))
        return CUDA_ERROR_INVALID_VALUE;
    kernel->cache_config = config;
    return CUDA_SUCCESS;
}

/* The parameter layout the image declares (PTX parameter lists, a cubin's
 * EIATTR_KPARAM_INFO); NOT_SUPPORTED where the image does not say. */
static CUresult param_info(const struct sim_image *img, const char *name, size_t i,
                           size_t *off, size_t *size)
{
    const struct sim_sym *s = sim_image_find(img, name, SIM_SYM_KERNEL);
    if (!s || !s->params_known)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (!off || !size || i >= s->nparams)
        return CUDA_ERROR_INVALID_VALUE;
    *off = s->params[i].offset;
    *size = s->params[i].size;
    return CUDA_SUCCESS;
}

CUresult cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t *paramOffset,
                            size_t *paramSize)
{
    struct CUfunc_st *f;
    CUresult r = func_of(func, &f);
    if (r != CUDA_SUCCESS)
        return r;
    return param_info(&f->mod->img, f->name, paramIndex, paramOffset, paramSize);
}

CUresult cuKernelGetParamInfo(CUkernel kernel, size_t paramIndex, size_t *paramOffset,
                              size_t *paramSize)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!sim_handle_ok(kernel, SIM_K_KERNEL))
        return CUDA_ERROR_INVALID_HANDLE;
    return param_info(&kernel->lib->img, kernel->name, paramIndex, paramOffset, paramSize);
}

/* Shared-memory bank size (deprecated since sm_50: the banks are 4 bytes
 * whatever is asked; the setting is accepted and reads back). */
CUresult cuFuncSetSharedMemConfig(CUfunction hfunc, CUsharedconfig config)
{
    struct CUfunc_st *f;
    CUresult r = func_of(hfunc, &f);
    if (r != CUDA_SUCCESS)
        return r;
    return (unsigned)config <= CU_SHARED_MEM_CONFIG_EIGHT_BYTE_BANK_SIZE
               ? CUDA_SUCCESS
               : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuCtxSetSharedMemConfig(CUsharedconfig config)
{
    struct CUctx_st *ctx;
    CUresult r = sim_current_ctx(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    if ((unsigned)config > CU_SHARED_MEM_CONFIG_EIGHT_BYTE_BANK_SIZE)
        return CUDA_ERROR_INVALID_VALUE;
    g_sim.shared_config = (int)config;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetSharedMemConfig(CUsharedconfig *pConfig)
{
    struct CUctx_st *ctx;
    CUresult r = sim_current_ctx(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pConfig)
        return CUDA_ERROR_INVALID_VALUE;
    *pConfig = g_sim.shared_config ? (CUsharedconfig)g_sim.shared_config
                                   : CU_SHARED_MEM_CONFIG_FOUR_BYTE_BANK_SIZE;
    return CUDA_SUCCESS;
}

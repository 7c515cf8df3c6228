/*
 * link.c: the JIT linker (cuLinkCreate ... cuLinkComplete).  Each input is
 * parsed as strictly as a module image (PTX, cubin, fatbin; an object or a
 * library archive is NOT_SUPPORTED, NVVM IR too).  cuLinkComplete writes
 * one cubin whose symbol table holds every kernel and global of the inputs
 * (and their cost annotations): cuModuleLoadData takes it like any cubin.
 * The output lives until cuLinkDestroy, as with the real linker.
 */
#include <stdlib.h>
#include <string.h>

#include "sim.h"

struct CUlinkState_st {
    struct sim_obj obj;
    struct sim_image img;
    int ninputs;
    void *out;
};

CUresult cuLinkCreate_v2(unsigned int numOptions, CUjit_option *options, void **optionValues,
                         CUlinkState *stateOut)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    struct CUctx_st *ctx;
    if ((r = sim_current_ctx(&ctx)) != CUDA_SUCCESS)
        return r;
    if (!stateOut || (numOptions && (!options || !optionValues)))
        return CUDA_ERROR_INVALID_VALUE;
    struct CUlinkState_st *s = calloc(1, sizeof *s);
    if (!s)
        return CUDA_ERROR_OUT_OF_MEMORY;
    s->obj.kind = SIM_K_LINK;
    sim_handle_add(s);
    *stateOut = s;
    return CUDA_SUCCESS;
}

static CUresult add(CUlinkState state, CUjitInputType type, const void *data, size_t size)
{
    switch (type) {
    case CU_JIT_INPUT_CUBIN:
    case CU_JIT_INPUT_PTX:
    case CU_JIT_INPUT_FATBINARY:
        break;
    case CU_JIT_INPUT_OBJECT:
    case CU_JIT_INPUT_LIBRARY:
    case CU_JIT_INPUT_NVVM:
        return CUDA_ERROR_NOT_SUPPORTED;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    struct sim_image img;
    CUresult r = sim_image_parse(data, size, &img);
    if (r == CUDA_ERROR_INVALID_IMAGE && type == CU_JIT_INPUT_PTX)
        r = CUDA_ERROR_INVALID_PTX;
    if (r != CUDA_SUCCESS)
        return r;
    if (sim_image_merge(&state->img, &img))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    sim_image_free(&img);
    state->ninputs++;
    return r;
}

CUresult cuLinkAddData_v2(CUlinkState state, CUjitInputType type, void *data, size_t size,
                          const char *name, unsigned int numOptions, CUjit_option *options,
                          void **optionValues)
{
    (void)name;
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!sim_handle_ok(state, SIM_K_LINK))
        return CUDA_ERROR_INVALID_HANDLE;
    if (!data || !size || (numOptions && (!options || !optionValues)))
        return CUDA_ERROR_INVALID_VALUE;
    if (type == CU_JIT_INPUT_PTX) { /* text: no NUL needed within size */
        char *t = malloc(size + 1);
        if (!t)
            return CUDA_ERROR_OUT_OF_MEMORY;
        memcpy(t, data, size);
        t[size] = 0;
        r = add(state, type, t, size);
        free(t);
        return r;
    }
    return add(state, type, data, size);
}

CUresult cuLinkAddFile_v2(CUlinkState state, CUjitInputType type, const char *path,
                          unsigned int numOptions, CUjit_option *options, void **optionValues)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!sim_handle_ok(state, SIM_K_LINK))
        return CUDA_ERROR_INVALID_HANDLE;
    if (!path || (numOptions && (!options || !optionValues)))
        return CUDA_ERROR_INVALID_VALUE;
    void *data;
    size_t n;
    if ((r = sim_read_file(path, &data, &n)) != CUDA_SUCCESS)
        return r;
    r = n ? add(state, type, data, n) : CUDA_ERROR_INVALID_IMAGE;
    free(data);
    return r;
}

CUresult cuLinkComplete(CUlinkState state, void **cubinOut, size_t *sizeOut)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!sim_handle_ok(state, SIM_K_LINK))
        return CUDA_ERROR_INVALID_HANDLE;
    if (!cubinOut || !sizeOut)
        return CUDA_ERROR_INVALID_VALUE;
    if (!state->ninputs)
        return CUDA_ERROR_INVALID_IMAGE;
    free(state->out);
    size_t n;
    state->out = sim_image_write_elf(&state->img, &n);
    if (!state->out)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *cubinOut = state->out;
    *sizeOut = n;
    return CUDA_SUCCESS;
}

CUresult cuLinkDestroy(CUlinkState state)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!sim_handle_ok(state, SIM_K_LINK))
        return CUDA_ERROR_INVALID_HANDLE;
    sim_handle_del(state);
    sim_image_free(&state->img);
    free(state->out);
    state->obj.kind = 0;
    free(state);
    return CUDA_SUCCESS;
}

/* The CUDA 5.5 entry points: the same arguments as the _v2 ones. */
CUresult cuLinkCreate(unsigned int numOptions, CUjit_option *options, void **optionValues,
                      CUlinkState *stateOut)
{
    return cuLinkCreate_v2(numOptions, options, optionValues, stateOut);
}

CUresult cuLinkAddData(CUlinkState state, CUjitInputType type, void *data, size_t size,
                       const char *name, unsigned int numOptions, CUjit_option *options,
                       void **optionValues)
{
    return cuLinkAddData_v2(state, type, data, size, name, numOptions, options, optionValues);
}

CUresult cuLinkAddFile(CUlinkState state, CUjitInputType type, const char *path,
                       unsigned int numOptions, CUjit_option *options, void **optionValues)
{
    return cuLinkAddFile_v2(state, type, path, numOptions, options, optionValues);
}

/*
 * host_mem.c: page-locked host memory (cuMemAllocHost, cuMemHostAlloc,
 * cuMemHostRegister) and pointer attributes.  With unified addressing a
 * host allocation's device pointer is its host address; the simulator
 * keeps host ranges in its region table (not counted against device
 * memory), so copies and kernels may use them, and cuPointerGetAttribute
 * tells every kind of pointer apart.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "sim.h"

#define HOST_MEMORY_ALREADY_REGISTERED ((CUresult)712)
#define HOST_MEMORY_NOT_REGISTERED ((CUresult)713)

static CUresult host_alloc(void **pp, size_t bytesize, unsigned int flags)
{
    struct CUctx_st *ctx;
    CUresult r = sim_current_ctx(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pp || bytesize == 0 || (flags & ~7u))
        return CUDA_ERROR_INVALID_VALUE;
    size_t size = (bytesize + 4095) & ~(size_t)4095;
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (sim_region_add_host((uint64_t)(uintptr_t)p, size, SIM_R_HOST, flags, ctx->dev)) {
        munmap(p, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *pp = p;
    return CUDA_SUCCESS;
}

CUresult cuMemAllocHost_v2(void **pp, size_t bytesize) { return host_alloc(pp, bytesize, 0); }

CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    return host_alloc(pp, bytesize, Flags);
}

CUresult cuMemFreeHost(void *p)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    struct sim_region reg;
    if (sim_region_take((uint64_t)(uintptr_t)p, 1 << SIM_R_HOST, &reg))
        return CUDA_ERROR_INVALID_VALUE;
    munmap(p, reg.size);
    sim_res_remove(reg.mslot);
    return CUDA_SUCCESS;
}

CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    struct CUctx_st *ctx;
    if ((r = sim_current_ctx(&ctx)) != CUDA_SUCCESS)
        return r;
    if (!p || bytesize == 0 || (Flags & ~15u))
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_region reg;
    uint64_t b = (uint64_t)(uintptr_t)p;
    if (!sim_region_find(b, &reg) || !sim_region_find(b + bytesize - 1, &reg))
        return HOST_MEMORY_ALREADY_REGISTERED;
    return sim_region_add_host(b, bytesize, SIM_R_HOST_REG, Flags, ctx->dev)
               ? CUDA_ERROR_OUT_OF_MEMORY
               : CUDA_SUCCESS;
}

CUresult cuMemHostUnregister(void *p)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    struct sim_region reg;
    if (!p || sim_region_take((uint64_t)(uintptr_t)p, 1 << SIM_R_HOST_REG, &reg))
        return HOST_MEMORY_NOT_REGISTERED;
    sim_res_remove(reg.mslot);
    return CUDA_SUCCESS;
}

static int host_region(void *p, struct sim_region *reg)
{
    return !sim_region_find((uint64_t)(uintptr_t)p, reg) &&
           (reg->kind == SIM_R_HOST || reg->kind == SIM_R_HOST_REG);
}

CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    struct sim_region reg;
    if (!pdptr || Flags || !host_region(p, &reg))
        return CUDA_ERROR_INVALID_VALUE;
    *pdptr = (CUdeviceptr)(uintptr_t)p; /* unified addressing */
    return CUDA_SUCCESS;
}

CUresult cuMemHostGetFlags(unsigned int *pFlags, void *p)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    struct sim_region reg;
    if (!pFlags || !host_region(p, &reg))
        return CUDA_ERROR_INVALID_VALUE;
    *pFlags = reg.flags | CU_MEMHOSTALLOC_DEVICEMAP;
    return CUDA_SUCCESS;
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    struct sim_region reg;
    if (sim_region_find(dptr, &reg) || reg.kind == SIM_R_HOST || reg.kind == SIM_R_HOST_REG)
        return CUDA_ERROR_NOT_FOUND;
    if (pbase)
        *pbase = reg.base;
    if (psize)
        *psize = reg.size;
    return CUDA_SUCCESS;
}

/* One attribute of a known region (found) or of unknown memory (!found). */
static CUresult attr(void *data, CUpointer_attribute a, CUdeviceptr ptr, int found,
                     const struct sim_region *reg)
{
    int host = found && (reg->kind == SIM_R_HOST || reg->kind == SIM_R_HOST_REG);
    int dev = found && reg->dev >= 0 ? sim_ord(reg->dev) : sim_current_dev();
    struct CUctx_st *ctx = NULL;
    switch (a) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        if (!found || sim_current_ctx(&ctx) != CUDA_SUCCESS)
            return CUDA_ERROR_INVALID_VALUE;
        *(CUcontext *)data = ctx;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        if (!found)
            return CUDA_ERROR_INVALID_VALUE;
        *(unsigned int *)data = host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        if (!found || (a == CU_POINTER_ATTRIBUTE_HOST_POINTER && !host &&
                       reg->kind != SIM_R_MANAGED))
            return CUDA_ERROR_INVALID_VALUE;
        if (a == CU_POINTER_ATTRIBUTE_DEVICE_POINTER)
            *(CUdeviceptr *)data = ptr;
        else
            *(void **)data = (void *)(uintptr_t)ptr;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
        if (!found)
            return CUDA_ERROR_INVALID_VALUE;
        *(int *)data = a == CU_POINTER_ATTRIBUTE_SYNC_MEMOPS ? 1 : 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
        if (!found)
            return CUDA_ERROR_INVALID_VALUE;
        *(unsigned long long *)data = reg->base;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *(int *)data = found && reg->kind == SIM_R_MANAGED;
        return found ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        if (!found)
            return CUDA_ERROR_INVALID_VALUE;
        *(int *)data = dev;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
        if (!found)
            return CUDA_ERROR_INVALID_VALUE;
        *(void **)data = (void *)(uintptr_t)reg->base;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
        if (!found)
            return CUDA_ERROR_INVALID_VALUE;
        *(size_t *)data = reg->size;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED:
        *(int *)data = found;
        return found ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
        if (!found)
            return CUDA_ERROR_INVALID_VALUE;
        *(unsigned long long *)data =
            reg->kind == SIM_R_VMM_MAP ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
        if (!found)
            return CUDA_ERROR_INVALID_VALUE;
        *(unsigned int *)data = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
        if (!found)
            return CUDA_ERROR_INVALID_VALUE;
        *(void **)data = NULL;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!data)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_region reg;
    int found = !sim_region_find(ptr, &reg);
    return attr(data, attribute, ptr, found, &reg);
}

/* Unlike the single query, unknown (plain host) memory is not an error
 * here: its attributes read as zero, as the real driver answers. */
CUresult cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes,
                                void **data, CUdeviceptr ptr)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!numAttributes || !attributes || !data)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_region reg;
    int found = !sim_region_find(ptr, &reg);
    for (unsigned int i = 0; i < numAttributes; i++) {
        if (!data[i])
            continue;
        if (attr(data[i], attributes[i], ptr, found, &reg) != CUDA_SUCCESS) {
            if ((int)attributes[i] < 1 || attributes[i] > CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID)
                return CUDA_ERROR_INVALID_VALUE;
            memset(data[i], 0, attributes[i] == CU_POINTER_ATTRIBUTE_MEMORY_TYPE ||
                                       attributes[i] == CU_POINTER_ATTRIBUTE_ACCESS_FLAGS
                                   ? sizeof(unsigned int)
                               : attributes[i] == CU_POINTER_ATTRIBUTE_IS_MANAGED ||
                                       attributes[i] == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL ||
                                       attributes[i] == CU_POINTER_ATTRIBUTE_MAPPED ||
                                       attributes[i] == CU_POINTER_ATTRIBUTE_SYNC_MEMOPS
                                   ? sizeof(int)
                                   : sizeof(void *));
            if (attributes[i] == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)
                *(int *)data[i] = -2; /* as the real driver says for host memory */
        }
    }
    return CUDA_SUCCESS;
}

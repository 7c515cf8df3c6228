/*
 * vmm.c: virtual memory management (cuMemCreate / AddressReserve / Map /
 * SetAccess ...).  A physical allocation is a memfd, so every mapping of it
 * shows the same bytes; it counts against device capacity from cuMemCreate
 * until it is released and unmapped everywhere.  Mappings are readable and
 * writable at once (access rights are validated, not enforced).  Sharing:
 * an allocation created with the POSIX file-descriptor handle type exports
 * a duplicate of its memfd, and importing such a descriptor (in this or
 * another process) maps the same bytes; the importer does not count the
 * memory again.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>

#include "sim.h"

#define GRANULARITY (2ull << 20)

struct sim_vmm {
    struct sim_obj obj;
    int fd;
    int dev;
    int released; /* no handle reference left (refs == 0) */
    int refs;     /* cuMemCreate / Import / RetainAllocationHandle, less cuMemRelease */
    int maps;
    int imported; /* counted by the exporter, not here */
    unsigned int handle_types;
    uint64_t size;
};

static CUresult check_prop(const CUmemAllocationProp *prop)
{
    if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
        prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    if (prop->location.id < 0 || prop->location.id >= sim_nvis())
        return CUDA_ERROR_INVALID_DEVICE;
    return CUDA_SUCCESS;
}

CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                       CUmemAllocationGranularity_flags option)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!granularity || (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
                         option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
        return CUDA_ERROR_INVALID_VALUE;
    r = check_prop(prop);
    if (r == CUDA_SUCCESS)
        *granularity = GRANULARITY;
    return r;
}

static void vmm_free(struct sim_vmm *h)
{
    sim_handle_del(h);
    close(h->fd);
    if (!h->imported)
        sim_mem_account(h->dev, -(int64_t)h->size, 0);
    h->obj.kind = 0;
    free(h);
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                     const CUmemAllocationProp *prop, unsigned long long flags)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!handle || !size || size % GRANULARITY || flags)
        return CUDA_ERROR_INVALID_VALUE;
    if ((r = check_prop(prop)) != CUDA_SUCCESS)
        return r;
    struct sim_vmm *h = calloc(1, sizeof *h);
    if (!h)
        return CUDA_ERROR_OUT_OF_MEMORY;
    h->dev = sim_phys(prop->location.id); /* checked by check_prop; physical (visible.c) */
    h->size = size;
    h->refs = 1;
    h->handle_types = prop->requestedHandleTypes;
    h->fd = memfd_create("tgs-sim-vmm", MFD_CLOEXEC);
    if (h->fd < 0 || ftruncate(h->fd, (off_t)size) != 0 ||
        sim_mem_account(h->dev, (int64_t)size, 0) != CUDA_SUCCESS) {
        if (h->fd >= 0)
            close(h->fd);
        free(h);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    h->obj.kind = SIM_K_VMM;
    sim_handle_add(h);
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)h;
    return CUDA_SUCCESS;
}

static struct sim_vmm *vmm_get(CUmemGenericAllocationHandle handle)
{
    struct sim_vmm *h = (struct sim_vmm *)(uintptr_t)handle;
    return sim_handle_ok(h, SIM_K_VMM) ? h : NULL;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    struct sim_vmm *h = vmm_get(handle);
    if (!h || h->released)
        return CUDA_ERROR_INVALID_VALUE;
    if (--h->refs > 0)
        return CUDA_SUCCESS;
    h->released = 1;
    if (h->maps == 0)
        vmm_free(h);
    return CUDA_SUCCESS;
}

CUresult cuMemExportToShareableHandle(void *shareableHandle, CUmemGenericAllocationHandle handle,
                                      CUmemAllocationHandleType handleType,
                                      unsigned long long flags)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    struct sim_vmm *h = vmm_get(handle);
    if (!h || h->released || !shareableHandle || flags)
        return CUDA_ERROR_INVALID_VALUE;
    if (handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return CUDA_ERROR_NOT_SUPPORTED; /* Windows and fabric handles */
    if (!(h->handle_types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
        return CUDA_ERROR_INVALID_VALUE; /* not requested at cuMemCreate */
    int fd = fcntl(h->fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *(int *)shareableHandle = fd;
    return CUDA_SUCCESS;
}

CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
                                        CUmemAllocationHandleType shHandleType)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!handle)
        return CUDA_ERROR_INVALID_VALUE;
    if (shHandleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return CUDA_ERROR_NOT_SUPPORTED;
    int src = (int)(intptr_t)osHandle;
    struct stat st;
    if (src < 0 || fstat(src, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
        (uint64_t)st.st_size % GRANULARITY)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_vmm *h = calloc(1, sizeof *h);
    if (!h)
        return CUDA_ERROR_OUT_OF_MEMORY;
    h->fd = fcntl(src, F_DUPFD_CLOEXEC, 0);
    if (h->fd < 0) {
        free(h);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    int dev = sim_current_dev();
    h->dev = sim_phys(dev >= 0 ? dev : 0);
    h->size = (uint64_t)st.st_size;
    h->refs = 1;
    h->imported = 1;
    h->handle_types = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    h->obj.kind = SIM_K_VMM;
    sim_handle_add(h);
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)h;
    return CUDA_SUCCESS;
}

CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    struct sim_region reg;
    if (!handle || sim_region_find((uint64_t)(uintptr_t)addr, &reg) ||
        reg.kind != SIM_R_VMM_MAP)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_vmm *h = reg.vmm;
    if (h->released) /* mapped, but every handle was released: give one back */
        h->released = 0;
    h->refs++;
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)h;
    return CUDA_SUCCESS;
}

CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                CUmemGenericAllocationHandle handle)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    struct sim_vmm *h = vmm_get(handle);
    if (!h || h->released || !prop)
        return CUDA_ERROR_INVALID_VALUE;
    memset(prop, 0, sizeof *prop);
    prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop->requestedHandleTypes = (CUmemAllocationHandleType)h->handle_types;
    prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop->location.id = sim_ord(h->dev);
    return CUDA_SUCCESS;
}

CUresult cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location,
                        CUdeviceptr ptr)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    struct sim_region reg;
    if (!flags || !location || location->type != CU_MEM_LOCATION_TYPE_DEVICE ||
        sim_region_find(ptr, &reg) || reg.kind != SIM_R_VMM_MAP)
        return CUDA_ERROR_INVALID_VALUE;
    if (location->id < 0 || location->id >= sim_nvis())
        return CUDA_ERROR_INVALID_DEVICE;
    *flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE; /* mappings are always read-write here */
    return CUDA_SUCCESS;
}

/* Index of the reservation that contains [p, p + n), or -1. */
static long find_reserve(uint64_t p, uint64_t n)
{
    for (size_t i = 0; i < g_sim.nreserves; i++) {
        const struct sim_span *s = &g_sim.reserves[i];
        if (p >= s->base && p - s->base <= s->size && n <= s->size - (p - s->base))
            return (long)i;
    }
    return -1;
}

CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags)
{
    (void)addr; /* a hint only */
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!ptr || !size || size % GRANULARITY || flags || (alignment & (alignment - 1)))
        return CUDA_ERROR_INVALID_VALUE;
    if (alignment < GRANULARITY)
        alignment = GRANULARITY;
    size_t span = size + alignment;
    char *p = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return CUDA_ERROR_OUT_OF_MEMORY;
    uintptr_t a = ((uintptr_t)p + alignment - 1) & ~(uintptr_t)(alignment - 1);
    if (a > (uintptr_t)p)
        munmap(p, a - (uintptr_t)p);
    size_t tail = (size_t)((uintptr_t)p + span - (a + size));
    if (tail)
        munmap((void *)(a + size), tail);
    pthread_mutex_lock(&g_sim.lock);
    if (g_sim.nreserves == g_sim.reserves_cap) {
        size_t cap = g_sim.reserves_cap ? 2 * g_sim.reserves_cap : 16;
        struct sim_span *n = realloc(g_sim.reserves, cap * sizeof *n);
        if (!n) {
            pthread_mutex_unlock(&g_sim.lock);
            munmap((void *)a, size);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        g_sim.reserves = n;
        g_sim.reserves_cap = cap;
    }
    g_sim.reserves[g_sim.nreserves++] = (struct sim_span){a, size};
    pthread_mutex_unlock(&g_sim.lock);
    *ptr = a;
    return CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&g_sim.lock);
    long i = find_reserve(ptr, size);
    int ok = i >= 0 && g_sim.reserves[i].base == ptr && g_sim.reserves[i].size == size;
    if (ok)
        g_sim.reserves[i] = g_sim.reserves[--g_sim.nreserves];
    pthread_mutex_unlock(&g_sim.lock);
    if (!ok)
        return CUDA_ERROR_INVALID_VALUE;
    munmap((void *)(uintptr_t)ptr, size);
    return CUDA_SUCCESS;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    struct sim_vmm *h = vmm_get(handle);
    if (!h || h->released || flags || !size || size % GRANULARITY || offset % GRANULARITY ||
        offset > h->size || size > h->size - offset)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_sim.lock);
    long i = find_reserve(ptr, size);
    pthread_mutex_unlock(&g_sim.lock);
    if (i < 0 || sim_mem_range_ok(ptr, 1) || sim_mem_range_ok(ptr + size - 1, 1))
        return CUDA_ERROR_INVALID_VALUE; /* outside a reservation or already mapped */
    void *p = mmap((void *)(uintptr_t)ptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                   h->fd, (off_t)offset);
    if (p == MAP_FAILED)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (sim_region_add(ptr, size, SIM_R_VMM_MAP, h->dev, h) != 0) {
        mmap(p, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    h->maps++;
    return CUDA_SUCCESS;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    struct sim_region reg;
    if (sim_region_take(ptr, 1 << SIM_R_VMM_MAP, &reg) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (reg.size != size) {
        sim_region_add(reg.base, reg.size, reg.kind, reg.dev, reg.vmm);
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* Back to a reserved, inaccessible range. */
    mmap((void *)(uintptr_t)ptr, size, PROT_NONE,
         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
    struct sim_vmm *h = reg.vmm;
    if (--h->maps == 0 && h->released)
        vmm_free(h);
    return CUDA_SUCCESS;
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    /* the range may span several mappings side by side (PyTorch's expandable
     * segments set access over all the chunks they mapped at once) */
    if (!desc || !count || !size || !sim_mem_range_covered(ptr, size))
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count; i++) {
        if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE)
            return CUDA_ERROR_INVALID_VALUE;
        if (desc[i].location.id < 0 || desc[i].location.id >= sim_nvis())
            return CUDA_ERROR_INVALID_DEVICE;
        if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE &&
            desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
            desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

/*
 * libshim/nvml_real.c: finding the real NVML behind the NVML hooks.
 *
 * Two routes reach NVML.  A program linked with -lnvidia-ml calls through its
 * PLT, which binds to the shim's exported hooks (LD_PRELOAD comes first); a
 * hook then finds the real function as the next definition after the shim
 * (RTLD_NEXT) or in an already loaded libnvidia-ml.so.1 (RTLD_NOLOAD).  A
 * program that loads NVML at run time (pynvml, nvidia-smi) looks its entry
 * points up with dlsym: dlsym_hook.c hands each lookup of an "nv" name here;
 * for a hooked name the real function found is kept and the hook returned.
 * The shim never loads NVML into a process that did not load it: a lookup
 * that finds only the shim's own export (no NVML loaded) answers NULL, as it
 * would without the shim.
 */
#include <dlfcn.h>
#include <string.h>

#include "nvml_shim.h"

static const char *const names[TGS_NVML_NHOOKS] = {
#define TGS_NVML_NAME(name) #name,
    TGS_NVML_HOOKED(TGS_NVML_NAME)
#undef TGS_NVML_NAME
};

static void *const hooks[TGS_NVML_NHOOKS] = {
#define TGS_NVML_ADDR(name) (void *)&name,
    TGS_NVML_HOOKED(TGS_NVML_ADDR)
#undef TGS_NVML_ADDR
};

static int index_of(const char *name)
{
    if (strncmp(name, "nvmlDeviceGet", 13) != 0)
        return -1;
    for (int i = 0; i < TGS_NVML_NHOOKS; i++)
        if (strcmp(name, names[i]) == 0)
            return i;
    return -1;
}

static void *(*real_dlsym(void))(void *, const char *)
{
    void *(*ds)(void *, const char *) = __atomic_load_n(&tgs_g.real_dlsym, __ATOMIC_ACQUIRE);
    if (!ds) {
        tgs_real_bootstrap();
        ds = __atomic_load_n(&tgs_g.real_dlsym, __ATOMIC_ACQUIRE);
    }
    return ds;
}

/* The identity queries, from the library that defines fn (already loaded:
 * RTLD_NOLOAD; the reference taken keeps it mapped while we use it). */
static void resolve_helpers(void *fn)
{
    if (__atomic_load_n(&tgs_g.nvml.get_uuid, __ATOMIC_ACQUIRE))
        return;
    void *(*ds)(void *, const char *) = real_dlsym();
    Dl_info di;
    void *h = NULL;
    if (ds && dladdr(fn, &di) && di.dli_fname && di.dli_fname[0])
        h = dlopen(di.dli_fname, RTLD_NOLOAD | RTLD_LAZY);
    if (!h)
        return;
    __atomic_store_n(&tgs_g.nvml.by_uuid, ds(h, "nvmlDeviceGetHandleByUUID"), __ATOMIC_RELEASE);
    __atomic_store_n(&tgs_g.nvml.get_index, ds(h, "nvmlDeviceGetIndex"), __ATOMIC_RELEASE);
    __atomic_store_n(&tgs_g.nvml.get_uuid, ds(h, "nvmlDeviceGetUUID"), __ATOMIC_RELEASE);
}

/* Keep p as hook id's real function unless another one is kept already;
 * returns the kept one. */
static void *keep(int id, void *p)
{
    void *expect = NULL;
    if (__atomic_compare_exchange_n(&tgs_g.nvml.real[id], &expect, p, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE)) {
        resolve_helpers(p);
        return p;
    }
    return expect;
}

void *tgs_nvml_real(int id)
{
    void *p = __atomic_load_n(&tgs_g.nvml.real[id], __ATOMIC_ACQUIRE);
    if (TGS_LIKELY(p != NULL))
        return p;
    void *(*ds)(void *, const char *) = real_dlsym();
    if (!ds)
        return NULL;
    p = ds(RTLD_NEXT, names[id]);
    if (!p || p == hooks[id]) {
        void *h = dlopen("libnvidia-ml.so.1", RTLD_NOLOAD | RTLD_LAZY);
        p = h ? ds(h, names[id]) : NULL;
    }
    if (!p || p == hooks[id])
        return NULL;
    return keep(id, p);
}

void *tgs_nvml_substitute(const char *name, void *p)
{
    int id = index_of(name);
    if (id < 0)
        return p;
    if (p == hooks[id]) { /* found the shim's own export (RTLD_DEFAULT, RTLD_NEXT) */
        if (tgs_nvml_real(id))
            return p;
        /* no NVML loaded: NULL, and a lookup that fails last, so that
         * dlerror() has its message (callers read it after a NULL) */
        void *(*ds)(void *, const char *) = real_dlsym();
        if (ds)
            (void)ds(RTLD_NEXT, name); /* not a tail call: "next" after the shim */
        return NULL;
    }
    return keep(id, p) == p ? hooks[id] : p; /* a second NVML library passes through */
}

static void *helper(void **slot)
{
    void *f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (!f) {
        for (int i = 0; i < TGS_NVML_NHOOKS && !__atomic_load_n(&tgs_g.nvml.get_uuid,
                                                                __ATOMIC_ACQUIRE); i++) {
            void *p = __atomic_load_n(&tgs_g.nvml.real[i], __ATOMIC_ACQUIRE);
            if (p)
                resolve_helpers(p);
        }
        f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    }
    return f;
}

nvmlReturn_t tgs_nvml_uuid(nvmlDevice_t dev, char *uuid, unsigned int len)
{
    nvmlReturn_t (*f)(nvmlDevice_t, char *, unsigned int) =
        (nvmlReturn_t (*)(nvmlDevice_t, char *, unsigned int))helper(&tgs_g.nvml.get_uuid);
    return f ? f(dev, uuid, len) : NVML_ERROR_FUNCTION_NOT_FOUND;
}

nvmlReturn_t tgs_nvml_index(nvmlDevice_t dev, unsigned int *index)
{
    nvmlReturn_t (*f)(nvmlDevice_t, unsigned int *) =
        (nvmlReturn_t (*)(nvmlDevice_t, unsigned int *))helper(&tgs_g.nvml.get_index);
    return f ? f(dev, index) : NVML_ERROR_FUNCTION_NOT_FOUND;
}

nvmlReturn_t tgs_nvml_by_uuid(const char *uuid, nvmlDevice_t *dev)
{
    nvmlReturn_t (*f)(const char *, nvmlDevice_t *) =
        (nvmlReturn_t (*)(const char *, nvmlDevice_t *))helper(&tgs_g.nvml.by_uuid);
    return f ? f(uuid, dev) : NVML_ERROR_FUNCTION_NOT_FOUND;
}

/*
 * libshim/dlsym_hook.c: dlsym and dlvsym overrides.  A program (or cudart)
 * that looks up a hooked driver symbol gets the hook whenever the real lookup
 * would have returned the real driver's function of that name: on a libcuda
 * handle, RTLD_DEFAULT or RTLD_NEXT alike.  Everything else passes through.
 *
 * Limitation: RTLD_NEXT is resolved relative to the shim, not the caller
 * (glibc finds "next" from the return address); the two differ only for a
 * caller loaded after the shim that defines the symbol itself.
 */
#include <dlfcn.h>

#include "shim.h"

static void *substitute(const char *name, void *p)
{
    if (!p || tgs_tls.in_init)
        return p;
    if (name && name[0] == 'n' && name[1] == 'v')
        return tgs_nvml_substitute(name, p); /* NVML view (nvml_real.c) */
    int i = tgs_hook_index(name);
    if (i < 0)
        return p;
    tgs_ensure_init();
    if (!__atomic_load_n(&tgs_g.ready, __ATOMIC_ACQUIRE))
        return p;
    void *hook = tgs_hook_for_real(p);
    return hook ? hook : p;
}

TGS_EXPORT void *dlsym(void *handle, const char *name)
{
    void *(*real)(void *, const char *) = __atomic_load_n(&tgs_g.real_dlsym, __ATOMIC_ACQUIRE);
    if (TGS_UNLIKELY(!real)) {
        tgs_real_bootstrap();
        real = __atomic_load_n(&tgs_g.real_dlsym, __ATOMIC_ACQUIRE);
        if (!real)
            return NULL;
    }
    return substitute(name, real(handle, name));
}

TGS_EXPORT void *dlvsym(void *handle, const char *name, const char *version)
{
    void *(*real)(void *, const char *, const char *) =
        __atomic_load_n(&tgs_g.real_dlvsym, __ATOMIC_ACQUIRE);
    if (TGS_UNLIKELY(!real)) {
        tgs_real_bootstrap();
        real = __atomic_load_n(&tgs_g.real_dlvsym, __ATOMIC_ACQUIRE);
        if (!real)
            return NULL;
    }
    return substitute(name, real(handle, name, version));
}

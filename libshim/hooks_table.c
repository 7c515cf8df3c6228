/* libshim/hooks_table.c: which symbols are hooked, their hooks and the real
 * addresses they replace (for cuGetProcAddress and dlsym substitution). */
#include <string.h>

#include "shim.h"

static const char *const hook_names[TGS_NHOOKS] = {
#define TGS_HOOK_NAME(name) #name,
    TGS_HOOKED(TGS_HOOK_NAME)
#undef TGS_HOOK_NAME
};

static void *const hook_addrs[TGS_NHOOKS] = {
#define TGS_HOOK_ADDR(name) (void *)&name,
    TGS_HOOKED(TGS_HOOK_ADDR)
#undef TGS_HOOK_ADDR
};

void tgs_hooks_resolve_real(void)
{
    if (!tgs_g.real.handle)
        return;
    for (int i = 0; i < TGS_NHOOKS; i++)
        tgs_g.hook_real[i] = tgs_g.real_dlsym(tgs_g.real.handle, hook_names[i]);
}

int tgs_hook_index(const char *name)
{
    if (!name || name[0] != 'c' || name[1] != 'u')
        return -1;
    for (int i = 0; i < TGS_NHOOKS; i++)
        if (strcmp(name, hook_names[i]) == 0)
            return i;
    return -1;
}

void *tgs_hook_by_name(const char *name)
{
    int i = tgs_hook_index(name);
    return i < 0 ? NULL : hook_addrs[i];
}

/* The hook of exactly the variant whose real address this is, or NULL. */
void *tgs_hook_for_real(void *real_fn)
{
    if (!real_fn)
        return NULL;
    for (int i = 0; i < TGS_NHOOKS; i++)
        if (tgs_g.hook_real[i] == real_fn)
            return hook_addrs[i];
    return NULL;
}

/* Debug/test query: how many times the hook `symbol` ran (TGS_DEBUG_HITS=1),
 * or -1 if `symbol` is not hooked. */
TGS_EXPORT long long tgs_shim_debug_hits(const char *symbol)
{
    int i = tgs_hook_index(symbol);
    return i < 0 ? -1 : (long long)__atomic_load_n(&tgs_g.hits[i], __ATOMIC_RELAXED);
}

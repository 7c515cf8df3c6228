/*
 * handles.c: the set of live handles, so that a stale or garbage handle is
 * answered with CUDA_ERROR_INVALID_HANDLE instead of being dereferenced.
 * Open addressing on the pointer value; callers need not hold g_sim.lock.
 */
#include <stdlib.h>

#include "sim.h"

#define TOMB ((void *)1)

static size_t hash_ptr(const void *p, size_t cap)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)x & (cap - 1);
}

static void rehash(size_t cap)
{
    void **old = g_sim.handles;
    size_t oldcap = g_sim.handles_cap;
    void **nt = calloc(cap, sizeof *nt);
    if (!nt)
        return; /* keep the old table; inserts may fail later, lookups still work */
    for (size_t i = 0; i < oldcap; i++) {
        void *h = old[i];
        if (h && h != TOMB) {
            size_t j = hash_ptr(h, cap);
            while (nt[j])
                j = (j + 1) & (cap - 1);
            nt[j] = h;
        }
    }
    free(old);
    g_sim.handles = nt;
    g_sim.handles_cap = cap;
    g_sim.handles_tomb = 0;
}

void sim_handle_add(void *h)
{
    pthread_mutex_lock(&g_sim.lock);
    if ((g_sim.handles_len + g_sim.handles_tomb + 1) * 2 >= g_sim.handles_cap)
        rehash(g_sim.handles_cap ? g_sim.handles_cap * 2 : 256);
    if (g_sim.handles_cap) {
        size_t j = hash_ptr(h, g_sim.handles_cap);
        while (g_sim.handles[j] && g_sim.handles[j] != TOMB)
            j = (j + 1) & (g_sim.handles_cap - 1);
        if (g_sim.handles[j] == TOMB)
            g_sim.handles_tomb--;
        g_sim.handles[j] = h;
        g_sim.handles_len++;
    }
    pthread_mutex_unlock(&g_sim.lock);
}

static size_t find(const void *h)
{
    if (!g_sim.handles_cap)
        return (size_t)-1;
    size_t j = hash_ptr(h, g_sim.handles_cap);
    while (g_sim.handles[j]) {
        if (g_sim.handles[j] == h)
            return j;
        j = (j + 1) & (g_sim.handles_cap - 1);
    }
    return (size_t)-1;
}

void sim_handle_del(void *h)
{
    pthread_mutex_lock(&g_sim.lock);
    size_t j = find(h);
    if (j != (size_t)-1) {
        g_sim.handles[j] = TOMB;
        g_sim.handles_len--;
        g_sim.handles_tomb++;
    }
    pthread_mutex_unlock(&g_sim.lock);
}

int sim_handle_ok(const void *h, uint32_t kind)
{
    if (!h || h == TOMB)
        return 0;
    pthread_mutex_lock(&g_sim.lock);
    int ok = find(h) != (size_t)-1 && ((const struct sim_obj *)h)->kind == kind;
    pthread_mutex_unlock(&g_sim.lock);
    return ok;
}

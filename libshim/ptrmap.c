/* libshim/ptrmap.c: allocation -> bytes charged, so a free returns exactly
 * what its allocation took.  Open addressing, mutex-protected (allocation
 * paths only, never launches). */
#include <stdlib.h>
#include <string.h>

#include "shim.h"

static size_t slot_of(uint64_t key, uint32_t kind, size_t cap)
{
    uint64_t x = key ^ ((uint64_t)kind << 56);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)x & (cap - 1);
}

static void insert(struct tgs_ptr_entry *tab, size_t cap, const struct tgs_ptr_entry *e)
{
    size_t i = slot_of(e->key, e->kind, cap);
    while (tab[i].used)
        i = (i + 1) & (cap - 1);
    tab[i] = *e;
}

static int grow(struct tgs_ptrmap *m)
{
    size_t ncap = m->cap ? m->cap * 2 : 256;
    struct tgs_ptr_entry *nt = calloc(ncap, sizeof(*nt));
    if (!nt)
        return -1;
    for (size_t i = 0; i < m->cap; i++)
        if (m->tab[i].used)
            insert(nt, ncap, &m->tab[i]);
    free(m->tab);
    m->tab = nt;
    m->cap = ncap;
    return 0;
}

void tgs_ptrmap_put(struct tgs_ptrmap *m, uint32_t kind, uint64_t key, uint64_t bytes)
{
    pthread_mutex_lock(&m->mu);
    if ((m->count + 1) * 2 > m->cap && grow(m) != 0) {
        pthread_mutex_unlock(&m->mu);
        tgs_log(TGS_LOG_WARN, "out of host memory for the allocation map; a free will not be "
                              "credited");
        return;
    }
    struct tgs_ptr_entry e = { key, bytes, kind, 1 };
    insert(m->tab, m->cap, &e);
    m->count++;
    pthread_mutex_unlock(&m->mu);
}

int tgs_ptrmap_take(struct tgs_ptrmap *m, uint32_t kind, uint64_t key, uint64_t *bytes)
{
    int found = 0;
    pthread_mutex_lock(&m->mu);
    if (m->cap) {
        size_t i = slot_of(key, kind, m->cap);
        while (m->tab[i].used) {
            if (m->tab[i].key == key && m->tab[i].kind == kind) {
                *bytes = m->tab[i].bytes;
                found = 1;
                /* backward-shift deletion keeps probe chains intact */
                size_t j = i;
                for (;;) {
                    m->tab[i].used = 0;
                    for (;;) {
                        j = (j + 1) & (m->cap - 1);
                        if (!m->tab[j].used)
                            goto done;
                        size_t k = slot_of(m->tab[j].key, m->tab[j].kind, m->cap);
                        if ((i <= j) ? (i < k && k <= j) : (i < k || k <= j))
                            continue;
                        break;
                    }
                    m->tab[i] = m->tab[j];
                    i = j;
                }
            }
            i = (i + 1) & (m->cap - 1);
        }
    }
done:
    if (found)
        m->count--;
    pthread_mutex_unlock(&m->mu);
    return found;
}

int tgs_ptrmap_get(struct tgs_ptrmap *m, uint32_t kind, uint64_t key, uint64_t *bytes)
{
    int found = 0;
    pthread_mutex_lock(&m->mu);
    if (m->cap) {
        for (size_t i = slot_of(key, kind, m->cap); m->tab[i].used; i = (i + 1) & (m->cap - 1)) {
            if (m->tab[i].key == key && m->tab[i].kind == kind) {
                *bytes = m->tab[i].bytes;
                found = 1;
                break;
            }
        }
    }
    pthread_mutex_unlock(&m->mu);
    return found;
}

void tgs_ptrmap_reset(struct tgs_ptrmap *m)
{
    free(m->tab);
    m->tab = NULL;
    m->cap = m->count = 0;
}

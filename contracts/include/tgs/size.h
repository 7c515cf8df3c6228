/*
 * tgs/size.h: the one grammar of byte sizes, read by the shim (TGS_MEM_LIMIT,
 * libshim/options.c), the simulated driver (TGS_SIM_MEM, TGS_SIM_HOST_MEM,
 * sim/env.c) and the workload (--mem, bench/csrc/workload/args.c).  The tools
 * read the same grammar in Python (intercept/sizes.py); both run the vectors
 * of tests/abi/size_vectors.json.  Documented once, in docs/usage.md "Sizes".
 *
 *   size   := ws* number ws* unit? ws*        at most 40 characters
 *   number := digit{1,20} ("." digit{1,20})?  ASCII digits
 *   unit   := B | K | KB | KiB | M | MB | MiB | G | GB | GiB | T | TB | TiB
 *   ws     := space | tab
 *
 * Units are case-insensitive and all binary (KB = KiB = 1024 bytes), as GPU
 * memory is counted.  A fraction needs a unit above B and rounds down to a
 * byte (1.5GiB = 1610612736); one that comes to less than a byte is refused,
 * since a limit would read it as 0.  At most 2^63 - 1 bytes.  A limit also takes
 * the word "unlimited" (any case); there 0 means unlimited too.
 */
#ifndef TGS_SIZE_H
#define TGS_SIZE_H

#include <stdint.h>
#include <string.h>

#define TGS_SIZE_MAX_LEN 40
#define TGS_SIZE_MAX ((uint64_t)INT64_MAX)
#define TGS_SIZE_UNLIMITED UINT64_MAX
#define TGS_SIZE_EXAMPLES "512MiB, 1.5GiB, 8G or 4096"

static inline int tgs_size_ws_(char c)
{
    return c == ' ' || c == '\t';
}

static inline char tgs_size_lower_(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

/* digit{1,20} at *p into *v (advancing *p, *ndig = digits read); -1 if none or too many. */
static inline int tgs_size_digits_(const char **p, unsigned __int128 *v, int *ndig)
{
    int n = 0;
    *v = 0;
    while (**p >= '0' && **p <= '9') {
        if (++n > 20)
            return -1;
        *v = *v * 10 + (unsigned)(**p - '0');
        (*p)++;
    }
    *ndig = n;
    return n ? 0 : -1;
}

/* The shift of the unit word at *p (up to the end or a blank; advancing *p), -1 if it
 * names no unit.  No unit at all is bytes. */
static inline int tgs_size_unit_(const char **p)
{
    static const struct { const char *name; int shift; } units[] = {
        { "kib", 10 }, { "mib", 20 }, { "gib", 30 }, { "tib", 40 },
        { "kb", 10 }, { "mb", 20 }, { "gb", 30 }, { "tb", 40 },
        { "k", 10 }, { "m", 20 }, { "g", 30 }, { "t", 40 }, { "b", 0 },
    };
    char word[4];
    size_t n = 0;
    while ((*p)[n] && !tgs_size_ws_((*p)[n])) {
        if (n == 3)
            return -1;
        word[n] = tgs_size_lower_((*p)[n]);
        n++;
    }
    word[n] = '\0';
    if (n == 0)
        return 0;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(word, units[i].name) == 0) {
            *p += n;
            return units[i].shift;
        }
    }
    return -1;
}

/* Bytes for s into *out: 0, or -1 when s is not a size (nothing written). */
static inline int tgs_size_parse(const char *s, uint64_t *out)
{
    if (!s || strlen(s) > TGS_SIZE_MAX_LEN)
        return -1;
    const char *p = s;
    while (tgs_size_ws_(*p))
        p++;
    unsigned __int128 whole, frac = 0;
    int nwhole, nfrac = 0;
    if (tgs_size_digits_(&p, &whole, &nwhole) != 0)
        return -1;
    if (*p == '.') {
        p++;
        if (tgs_size_digits_(&p, &frac, &nfrac) != 0)
            return -1;
    }
    while (tgs_size_ws_(*p))
        p++;
    int shift = tgs_size_unit_(&p);
    if (shift < 0)
        return -1;
    while (tgs_size_ws_(*p))
        p++;
    if (*p)
        return -1;
    if (nfrac && shift == 0)
        return -1; /* a fraction of a byte, or no unit at all */
    /* exact: whole * 2^shift + floor(frac * 2^shift / 10^nfrac); < 2^107, no overflow */
    unsigned __int128 pow10 = 1;
    for (int i = 0; i < nfrac; i++)
        pow10 *= 10;
    unsigned __int128 v = (whole << shift) + (frac << shift) / pow10;
    if (v > TGS_SIZE_MAX || (v == 0 && frac))
        return -1; /* too large, or a fraction of less than a byte (not 0: see above) */
    *out = (uint64_t)v;
    return 0;
}

/* A limit: a size, 0 or "unlimited" (TGS_SIZE_UNLIMITED); -1 otherwise. */
static inline int tgs_limit_parse(const char *s, uint64_t *out)
{
    if (!s || strlen(s) > TGS_SIZE_MAX_LEN)
        return -1;
    const char *p = s;
    while (tgs_size_ws_(*p))
        p++;
    static const char word[] = "unlimited";
    size_t n = 0;
    while (n < sizeof word - 1 && tgs_size_lower_(p[n]) == word[n])
        n++;
    if (n == sizeof word - 1) {
        p += n;
        while (tgs_size_ws_(*p))
            p++;
        if (*p)
            return -1;
        *out = TGS_SIZE_UNLIMITED;
        return 0;
    }
    uint64_t v;
    if (tgs_size_parse(s, &v) != 0)
        return -1;
    *out = v ? v : TGS_SIZE_UNLIMITED;
    return 0;
}

#endif /* TGS_SIZE_H */

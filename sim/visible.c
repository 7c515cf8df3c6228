/*
 * visible.c: CUDA_VISIBLE_DEVICES, read at cuInit as the real driver reads
 * it.  A comma-separated list; each entry is a physical ordinal (decimal) or
 * a device UUID "GPU-..." (a unique prefix is enough, case-insensitive).  The
 * list stops at the first invalid entry (unknown, ambiguous, repeated, empty);
 * an empty list, or one whose first entry is invalid, leaves no devices
 * (cuInit succeeds, cuDeviceGetCount gives 0).  Unset: every device in order.
 *
 * CUdevice values are visible ordinals at the API; the shared state file is
 * indexed by physical device: a context keeps its physical device (ctx->dev),
 * and sim_phys/sim_ord translate at the entry points.  The simulated NVML
 * does not read this (NVML ignores it on a real system).
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sim.h"

void sim_uuid_bytes(int phys, unsigned char out[16])
{
    /* stable per state file and device: splitmix64 of the file's seed */
    uint64_t x = g_sim.st->hdr.uuid_seed + 0x9e3779b97f4a7c15ull * (uint64_t)(phys + 1);
    for (int i = 0; i < 2; i++) {
        uint64_t z = (x += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        memcpy(out + 8 * i, &z, 8);
    }
    out[6] = (unsigned char)((out[6] & 0x0f) | 0x40); /* RFC 4122 v4 shape */
    out[8] = (unsigned char)((out[8] & 0x3f) | 0x80);
}

static void uuid_string(int phys, char *out, size_t n)
{
    unsigned char b[16];
    sim_uuid_bytes(phys, b);
    snprintf(out, n,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
             b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
}

/* The physical device an entry names, or -1 (unknown, ambiguous, malformed). */
static int entry_device(const char *e, size_t len)
{
    int n = sim_ndev();
    if (len == 0 || len > 63)
        return -1;
    if (strncasecmp(e, "GPU-", 4) == 0) {
        int found = -1;
        for (int d = 0; d < n; d++) {
            char u[64];
            uuid_string(d, u, sizeof u);
            if (strlen(u) >= len && strncasecmp(u, e, len) == 0) {
                if (found >= 0)
                    return -1; /* a prefix of two UUIDs */
                found = d;
            }
        }
        return found;
    }
    int v = 0;
    for (size_t i = 0; i < len; i++) {
        if (e[i] < '0' || e[i] > '9')
            return -1;
        v = v * 10 + (e[i] - '0');
        if (v >= n)
            return -1;
    }
    return v;
}

void sim_visible_init(void)
{
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    int n = sim_ndev();
    g_sim.nvis = 0;
    if (!v) {
        for (int d = 0; d < n; d++)
            g_sim.vis[g_sim.nvis++] = d;
        return;
    }
    const char *p = v;
    while (g_sim.nvis < n) {
        size_t len = strcspn(p, ",");
        int d = entry_device(p, len);
        for (int k = 0; d >= 0 && k < g_sim.nvis; k++)
            if (g_sim.vis[k] == d)
                d = -1; /* a device listed twice */
        if (d < 0)
            break;
        g_sim.vis[g_sim.nvis++] = d;
        if (!p[len])
            break;
        p += len + 1;
    }
    sim_log(TGS_LOG_DEBUG, "CUDA_VISIBLE_DEVICES=%s: %d of %d devices visible", v, g_sim.nvis,
            n);
}

int sim_ord(int phys)
{
    for (int k = 0; k < g_sim.nvis; k++)
        if (g_sim.vis[k] == phys)
            return k;
    return -1;
}

/* libshim/options.c: every TGS_* variable the shim reads, read once, here. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "shim.h"
#include "tgs/log_level.h"
#include "tgs/size.h"

static void copy_env(char *dst, size_t cap, const char *name)
{
    const char *v = getenv(name);
    dst[0] = '\0';
    if (!v)
        return;
    if (strlen(v) >= cap) {
        tgs_log(TGS_LOG_ERROR, "%s is too long, ignored", name);
        return;
    }
    strcpy(dst, v);
}

/* A whole number of milliseconds, 0-600000, from the environment (def when unset or bad). */
static uint64_t env_ms(const char *name, uint64_t def)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return def;
    char *end = NULL;
    unsigned long long ms = strtoull(v, &end, 10);
    if (end && !*end && ms <= 600000)
        return ms;
    tgs_log(TGS_LOG_ERROR, "%s=%s is not 0-600000 (milliseconds); using %llu", name, v,
            (unsigned long long)def);
    return def;
}

void tgs_options_load(struct tgs_options *o)
{
    o->log_level = TGS_LOG_WARN;
    const char *lv = getenv("TGS_LOG_LEVEL");
    int level = tgs_log_level_parse(lv);
    o->log_level = level < 0 ? TGS_LOG_WARN : level;
    if (level < 0)
        tgs_log(TGS_LOG_ERROR, "TGS_LOG_LEVEL=%s is not one of " TGS_LOG_LEVEL_GRAMMAR
                "; using warn", lv);

    copy_env(o->segment_path, sizeof(o->segment_path), "TGS_SEGMENT");
    copy_env(o->ctl_path, sizeof(o->ctl_path), "TGS_CTL");
    copy_env(o->pub_path, sizeof(o->pub_path), "TGS_PUB");
    copy_env(o->pub_dir, sizeof(o->pub_dir), "TGS_PUB_DIR");
    copy_env(o->device_path, sizeof(o->device_path), "TGS_DEVICE_SEG");
    copy_env(o->real_libcuda, sizeof(o->real_libcuda), "TGS_REAL_LIBCUDA");
    copy_env(o->parts, sizeof(o->parts), "TGS_PARTS");

    /* a limit (tgs/size.h): 0 and "unlimited" mean none, as unset does */
    o->mem_limit = TGS_QUOTA_UNLIMITED;
    const char *ml = getenv("TGS_MEM_LIMIT");
    if (ml && *ml) {
        uint64_t v;
        if (tgs_limit_parse(ml, &v) == 0)
            o->mem_limit = v == TGS_SIZE_UNLIMITED ? TGS_QUOTA_UNLIMITED : v;
        else
            tgs_log(TGS_LOG_ERROR,
                    "TGS_MEM_LIMIT=%s is not a size (" TGS_SIZE_EXAMPLES " or unlimited); "
                    "no static limit", ml);
    }

    const char *dr = getenv("TGS_DRAIN");
    o->drain = !(dr && strcmp(dr, "0") == 0);
    o->drain_settle_ns = 50000;
    const char *st = getenv("TGS_DRAIN_SETTLE_US");
    if (st && *st) {
        char *end = NULL;
        unsigned long long us = strtoull(st, &end, 10);
        if (end && !*end && us <= 1000000)
            o->drain_settle_ns = us * 1000ull;
        else
            tgs_log(TGS_LOG_ERROR, "TGS_DRAIN_SETTLE_US=%s is not 0-1000000; using 50", st);
    }

    const char *fb = getenv("TGS_FIT_BUDGET");
    o->fit_budget = !fb || !*fb ? TGS_FIT_BUDGET_BOUND
                    : strcmp(fb, "0") == 0 ? TGS_FIT_BUDGET_OFF
                    : strcmp(fb, "gap") == 0 ? TGS_FIT_BUDGET_GAP : TGS_FIT_BUDGET_BOUND;

    copy_env(o->fit_trace, sizeof(o->fit_trace), "TGS_FIT_TRACE");

    /* how long a process of a registered job waits for a free slot (or a usable .seg)
     * before its CUDA work is refused (attach.c) */
    o->slot_wait_ns = env_ms("TGS_SLOT_WAIT_MS", 3000) * 1000000ull;
    /* oversubscription (oversub_watch.c): how often a synchronize looks at device memory,
     * and the longest the thrashing guard holds one synchronize (0: no guard) */
    o->oversub_check_ns = env_ms("TGS_OVERSUB_CHECK_MS", 10) * 1000000ull;
    o->oversub_pause_ns = env_ms("TGS_OVERSUB_PAUSE_MS", 10000) * 1000000ull;
    /* the watcher thread's period (oversub_hold.c; 0: no watcher, synchronizes look only) */
    o->oversub_watch_ns = env_ms("TGS_OVERSUB_WATCH_MS", 2) * 1000000ull;

    const char *dh = getenv("TGS_DEBUG_HITS");
    o->debug_hits = dh && strcmp(dh, "1") == 0;
}

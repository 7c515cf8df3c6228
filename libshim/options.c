/*
 * libshim/options.c: every TGS_* variable the shim reads, declared once in
 * TGS_OPTIONS and read once, by tgs_options_load, into tgs_g.opt.  Unset or
 * empty is the default.  A malformed value gives one "tgs: " line naming the
 * variable, the value and the default used, which then applies.
 * docs/segment.md "Environment variables" lists the same variables
 * (tests/shim/test_options.py checks both ways).
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"
#include "tgs/log_level.h"
#include "tgs/size.h"

/*
 * X(variable, field of struct tgs_options, kind, default, range, help)
 *
 *   PATH   a string of fewer than sizeof(field) characters (range "")
 *   SIZE   a limit, tgs/size.h's grammar; bytes, TGS_QUOTA_UNLIMITED = none (range "")
 *   MS     a whole number of milliseconds within range "lo-hi"; stored in ns
 *   US     a whole number of microseconds within range "lo-hi"; stored in ns
 *   BOOL   0 or 1 (range "0|1")
 *   ENUM   one of range's '|'-separated names (case-sensitive); stored as its index
 *   LEVEL  tgs/log_level.h's grammar (any case); range is its TGS_LOG_LEVEL_GRAMMAR
 *
 * The default is a string in the variable's own grammar.  TGS_LOG_LEVEL comes
 * first: the lines about the others obey it.
 */
#define TGS_OPTIONS(X) \
    X(TGS_LOG_LEVEL, log_level, LEVEL, "warn", "error|warn|info|debug", \
      "what the shim logs on stderr") \
    X(TGS_SEGMENT, segment_path, PATH, "", "", \
      "the job segment (.seg); unset: no job limits") \
    X(TGS_CTL, ctl_path, PATH, "", "", \
      "the job's control segment (.ctl); unset: TGS_SEGMENT with .seg -> .ctl") \
    X(TGS_PUB, pub_path, PATH, "", "", \
      "the job's own publish page; unset: <TGS_PUB_DIR>/<job>.pub") \
    X(TGS_PUB_DIR, pub_dir, PATH, "", "", \
      "the directory of every job's publish page; unset: <segment dir>/pub") \
    X(TGS_DEVICE_SEG, device_path, PATH, "", "", \
      "the device segment; unset: <segment dir>/device-<index>.seg") \
    X(TGS_PARTS, parts, PATH, "", "", \
      "a multi-device job's parts' .seg paths, ';'-separated, in device order") \
    X(TGS_REAL_LIBCUDA, real_libcuda, PATH, "", "", \
      "the real driver; unset: libcuda.so.1") \
    X(TGS_MEM_LIMIT, mem_limit, SIZE, "unlimited", "", \
      "static per-process quota without a job segment; 0 or unlimited: none") \
    X(TGS_DRAIN, drain, BOOL, "1", "0|1", \
      "GPU-side drain detection for production jobs (drain.c)") \
    X(TGS_DRAIN_SETTLE_US, drain_settle_ns, US, "50", "0-1000000", \
      "how long the GPU must stay drained before production counts as idle") \
    X(TGS_DRAIN_SETTLE_MAX_US, drain_settle_max_ns, US, "2000", "0-1000000", \
      "the most the adaptive settle grows to (drain.c)") \
    X(TGS_DRAIN_POLL_US, drain_poll_ns, US, "0", "0-100000", \
      "soon after an idle, how often the drain helper looks for the next busy period; 0: woken") \
    X(TGS_FIT_BUDGET, fit_budget, ENUM, "bound", "0|gap|bound", \
      "FIT's overrun budget: bound, gap only, or none (fit.c)") \
    X(TGS_FIT_TRACE, fit_trace, PATH, "", "", \
      "a file that gets one line per FIT-gated launch (fit.c)") \
    X(TGS_SLOT_WAIT_MS, slot_wait_ns, MS, "3000", "0-600000", \
      "longest wait for a free slot of a registered job before CUDA work is refused") \
    X(TGS_OVERSUB_CHECK_MS, oversub_check_ns, MS, "10", "0-600000", \
      "how often a synchronize looks at device memory (oversub_watch.c)") \
    X(TGS_OVERSUB_PAUSE_MS, oversub_pause_ns, MS, "10000", "0-600000", \
      "longest hold of one synchronize by the thrashing guard; 0: no guard") \
    X(TGS_OVERSUB_WATCH_MS, oversub_watch_ns, MS, "2", "0-600000", \
      "the oversubscription watcher's period; 0: no watcher (oversub_hold.c)") \
    X(TGS_DEBUG_HITS, debug_hits, BOOL, "0", "0|1", \
      "1: count hook calls for tgs_shim_debug_hits (tests; slow launch path)")

enum opt_kind { OPT_PATH, OPT_SIZE, OPT_MS, OPT_US, OPT_BOOL, OPT_ENUM, OPT_LEVEL };

struct opt_def {
    const char *name;
    size_t off, width;          /* the field in struct tgs_options */
    enum opt_kind kind;
    const char *def, *range, *help;
};

/* the width of each kind's field (0: a char array of any size) */
#define OPT_W_PATH 0
#define OPT_W_SIZE sizeof(uint64_t)
#define OPT_W_MS sizeof(uint64_t)
#define OPT_W_US sizeof(uint64_t)
#define OPT_W_BOOL sizeof(int)
#define OPT_W_ENUM sizeof(int)
#define OPT_W_LEVEL sizeof(int)
#define OPT_FIELD_SIZE(field) sizeof(((struct tgs_options *)0)->field)

#define OPT_CHECK(var, field, kind, def, range, help) \
    _Static_assert(OPT_W_##kind == 0 || OPT_FIELD_SIZE(field) == OPT_W_##kind, \
                   #var ": the field's type does not fit its kind");
TGS_OPTIONS(OPT_CHECK)
#undef OPT_CHECK
_Static_assert(TGS_FIT_BUDGET_OFF == 0 && TGS_FIT_BUDGET_GAP == 1 && TGS_FIT_BUDGET_BOUND == 2,
               "TGS_FIT_BUDGET's range lists its values in the enum's order");

static const struct opt_def opt_defs[] = {
#define OPT_ROW(var, field, kind, def, range, help) \
    { #var, offsetof(struct tgs_options, field), OPT_FIELD_SIZE(field), OPT_##kind, \
      def, range, help },
    TGS_OPTIONS(OPT_ROW)
#undef OPT_ROW
};

/* "lo-hi" of a range into *lo, *hi. */
static void range_bounds(const char *range, uint64_t *lo, uint64_t *hi)
{
    char *end = NULL;
    *lo = strtoull(range, &end, 10);
    *hi = end && *end == '-' ? strtoull(end + 1, NULL, 10) : *lo;
}

/* The index of v among range's '|'-separated names, -1 if none. */
static int range_index(const char *range, const char *v)
{
    size_t n = strlen(v);
    int i = 0;
    for (const char *p = range;; i++) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && strncmp(p, v, n) == 0)
            return i;
        if (!bar)
            return -1;
        p = bar + 1;
    }
}

/* A whole decimal number within lo-hi, digits only (no sign, no blanks); hi < 2^60. */
static int parse_uint(const char *v, uint64_t lo, uint64_t hi, uint64_t *out)
{
    uint64_t x = 0;
    if (!*v)
        return -1;
    for (const char *p = v; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        x = x * 10 + (uint64_t)(*p - '0');
        if (x > hi)
            return -1;
    }
    if (x < lo)
        return -1;
    *out = x;
    return 0;
}

/* v in d's grammar into the field at dst: 0, or -1 (dst untouched). */
static int opt_parse(const struct opt_def *d, const char *v, char *dst)
{
    uint64_t u, lo, hi;
    int i;
    switch (d->kind) {
    case OPT_PATH:
        if (strlen(v) >= d->width)
            return -1;
        memcpy(dst, v, strlen(v) + 1);
        return 0;
    case OPT_SIZE:
        if (tgs_limit_parse(v, &u) != 0)
            return -1;
        u = u == TGS_SIZE_UNLIMITED ? TGS_QUOTA_UNLIMITED : u;
        memcpy(dst, &u, sizeof(u));
        return 0;
    case OPT_MS:
    case OPT_US:
        range_bounds(d->range, &lo, &hi);
        if (parse_uint(v, lo, hi, &u) != 0)
            return -1;
        u *= d->kind == OPT_MS ? 1000000ull : 1000ull;
        memcpy(dst, &u, sizeof(u));
        return 0;
    case OPT_BOOL:
    case OPT_ENUM:
        i = range_index(d->range, v);
        break;
    case OPT_LEVEL:
        i = tgs_log_level_parse(v);
        break;
    default:
        return -1;
    }
    if (i < 0)
        return -1;
    memcpy(dst, &i, sizeof(i));
    return 0;
}

/* The one line for a malformed value v of d. */
static void opt_complain(const struct opt_def *d, const char *v)
{
    char shown[128];
    size_t n = strlen(v);
    if (n > 64)
        snprintf(shown, sizeof(shown), "%.64s... (%zu characters)", v, n);
    else
        snprintf(shown, sizeof(shown), "%s", v);
    const char *def = d->def[0] ? d->def : "unset";
    switch (d->kind) {
    case OPT_PATH:
        tgs_log(TGS_LOG_ERROR, "%s=%s is longer than %zu characters; using %s", d->name, shown,
                d->width - 1, def);
        break;
    case OPT_SIZE:
        tgs_log(TGS_LOG_ERROR, "%s=%s is not a size (" TGS_SIZE_EXAMPLES ", 0 or unlimited); "
                "using %s", d->name, shown, def);
        break;
    case OPT_MS:
    case OPT_US:
        tgs_log(TGS_LOG_ERROR, "%s=%s is not %s (%s); using %s", d->name, shown, d->range,
                d->kind == OPT_MS ? "milliseconds" : "microseconds", def);
        break;
    default:
        tgs_log(TGS_LOG_ERROR, "%s=%s is not one of %s; using %s", d->name, shown, d->range,
                def);
        break;
    }
}

static void options_read(void)
{
    char *o = (char *)&tgs_g.opt;
    for (size_t k = 0; k < sizeof(opt_defs) / sizeof(opt_defs[0]); k++) {
        const struct opt_def *d = &opt_defs[k];
        const char *v = getenv(d->name);
        if (v && *v && opt_parse(d, v, o + d->off) == 0)
            continue;
        (void)opt_parse(d, d->def, o + d->off);  /* every default is in its grammar */
        if (v && *v)
            opt_complain(d, v);
    }
}

void tgs_options_load(void)
{
    pthread_once(&tgs_g.opt_once, options_read);
}

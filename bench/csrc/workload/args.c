/* Command line: strict parsing, usage errors exit 2 with a message. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tgs/size.h"
#include "workload.h"

static const char wl_usage[] =
    "usage: tgs-workload [options]\n"
    "A driver-API job: per iteration K kernels, a synchronize, a host gap.\n"
    "  --kernels K            kernels per iteration (default 4)\n"
    "  --kernel-us U          wall time of one kernel in microseconds (default 1000)\n"
    "  --threads-per-block T  block size for the automatic grid (default 256)\n"
    "  --grid N --block N     explicit geometry instead of the automatic one\n"
    "  --cost-factor F        per-kernel cost factor (simulator comment; spin x F on a GPU)\n"
    "  --gap-ms G             host gap after each synchronize (default 2)\n"
    "  --mem SIZE             device footprint (512MiB, 1.5GiB, 4096; docs/usage.md; default 0)\n"
    "  --alloc-chunk SIZE     allocate the footprint in chunks of SIZE\n"
    "  --iters N | --seconds T  measured iterations, or duration (default 5 s)\n"
    "  --warmup N             iterations excluded from statistics (default 1)\n"
    "  --report-ms R          progress line every R ms (default 0 = off)\n"
    "  --phases G:S[,G:S]...  host gap G ms for S s, cycled (up to 8 phases; replaces --gap-ms)\n"
    "  --device IDX           device ordinal (default 0)\n"
    "  --name NAME            echoed in every JSON line (default \"workload\")\n"
    "  --resolve MODE         proc (cuGetProcAddress, default) | dlsym | link\n"
    "  --cuda-version V       cudaVersion for lookups and variants (default 12080)\n"
    "  --per-thread           per-thread default stream variants (_ptsz/_ptds)\n"
    "  --launch MODE          kernel (default) | ex | coop | graph\n"
    "  --stream               launch into a created stream (not the NULL stream)\n"
    "  --priority P           that stream's priority (implies --stream)\n"
    "Shapes:\n"
    "  --sync-every N         synchronize after every N iterations (run-ahead; default 1)\n"
    "  --ahead K              at most K iterations queued ahead (events; needs --sync-every)\n"
    "  --streams S            deal each iteration's kernels over S streams (1..16), each\n"
    "                         synchronized in turn\n"
    "  --kernel-mix L         L long kernels (5-20 ms) among K-L short ones (10-100 us,\n"
    "                         log-uniform): one sequence drawn from --seed, replayed\n"
    "  --poisson-rps R        inference: one request (K kernels + synchronize) per arrival of\n"
    "                         a Poisson process of R requests/s; latency from arrival\n"
    "  --seed N               seed of the kernel mix and the arrivals (default 1)\n"
    "Memory schedule (the oversubscription benchmark):\n"
    "  --managed              the footprint is managed memory (cuMemAllocManaged, global)\n"
    "  --prefer-device        ... advised to prefer the device (implies --managed)\n"
    "  --ramp-every-ms T      allocate the footprint during the loop, one --alloc-chunk every\n"
    "                         T ms from its start (\"alloc\" lines; an OOM ends the ramp)\n"
    "  --free-at-s S          free the footprint S s into the loop (\"free\" line), go on\n"
    "  --verify               check the footprint's contents before freeing it (\"check\"\n"
    "                         line; exit 1 when data was lost)\n"
    "  --touch STRIDE         after each iteration's kernels, read one word every STRIDE\n"
    "                         bytes of the footprint (a multiple of 4; a real GPU faults\n"
    "                         in what is not resident)\n"
    "  --print-ptx            print the kernel's PTX and exit\n"
    "  --help                 this text\n"
    "Output: JSON lines (start, progress, summary; error on failure, exit 1).\n";

enum {
    OPT_KERNELS = 256, OPT_KERNEL_US, OPT_THREADS, OPT_GRID, OPT_BLOCK, OPT_COST, OPT_GAP,
    OPT_MEM, OPT_CHUNK, OPT_ITERS, OPT_SECONDS, OPT_WARMUP, OPT_REPORT, OPT_DEVICE, OPT_NAME,
    OPT_RESOLVE, OPT_CUDA_VERSION, OPT_PER_THREAD, OPT_LAUNCH, OPT_STREAM, OPT_PRIORITY,
    OPT_PRINT_PTX, OPT_PHASES, OPT_SYNC_EVERY, OPT_AHEAD, OPT_STREAMS, OPT_MIX, OPT_POISSON,
    OPT_SEED, OPT_MANAGED, OPT_PREFER_DEVICE, OPT_RAMP, OPT_FREE_AT, OPT_VERIFY, OPT_TOUCH, OPT_HELP
};

static const struct option wl_options[] = {
    {"kernels", required_argument, NULL, OPT_KERNELS},
    {"kernel-us", required_argument, NULL, OPT_KERNEL_US},
    {"threads-per-block", required_argument, NULL, OPT_THREADS},
    {"grid", required_argument, NULL, OPT_GRID},
    {"block", required_argument, NULL, OPT_BLOCK},
    {"cost-factor", required_argument, NULL, OPT_COST},
    {"gap-ms", required_argument, NULL, OPT_GAP},
    {"mem", required_argument, NULL, OPT_MEM},
    {"alloc-chunk", required_argument, NULL, OPT_CHUNK},
    {"iters", required_argument, NULL, OPT_ITERS},
    {"seconds", required_argument, NULL, OPT_SECONDS},
    {"warmup", required_argument, NULL, OPT_WARMUP},
    {"report-ms", required_argument, NULL, OPT_REPORT},
    {"device", required_argument, NULL, OPT_DEVICE},
    {"name", required_argument, NULL, OPT_NAME},
    {"resolve", required_argument, NULL, OPT_RESOLVE},
    {"cuda-version", required_argument, NULL, OPT_CUDA_VERSION},
    {"per-thread", no_argument, NULL, OPT_PER_THREAD},
    {"launch", required_argument, NULL, OPT_LAUNCH},
    {"stream", no_argument, NULL, OPT_STREAM},
    {"priority", required_argument, NULL, OPT_PRIORITY},
    {"print-ptx", no_argument, NULL, OPT_PRINT_PTX},
    {"phases", required_argument, NULL, OPT_PHASES},
    {"sync-every", required_argument, NULL, OPT_SYNC_EVERY},
    {"ahead", required_argument, NULL, OPT_AHEAD},
    {"streams", required_argument, NULL, OPT_STREAMS},
    {"kernel-mix", required_argument, NULL, OPT_MIX},
    {"poisson-rps", required_argument, NULL, OPT_POISSON},
    {"seed", required_argument, NULL, OPT_SEED},
    {"managed", no_argument, NULL, OPT_MANAGED},
    {"prefer-device", no_argument, NULL, OPT_PREFER_DEVICE},
    {"ramp-every-ms", required_argument, NULL, OPT_RAMP},
    {"free-at-s", required_argument, NULL, OPT_FREE_AT},
    {"verify", no_argument, NULL, OPT_VERIFY},
    {"touch", required_argument, NULL, OPT_TOUCH},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

static void wl_usage_error(const char *fmt, const char *a, const char *b)
{
    fprintf(stderr, "tgs-workload: ");
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, "\n%s", wl_usage);
    exit(WL_EXIT_USAGE);
}

/* Whole-string unsigned integer in [lo, hi]. */
static unsigned long long wl_uint(const char *opt, const char *s, unsigned long long lo,
                                  unsigned long long hi)
{
    char *end = NULL;
    errno = 0;
    while (*s == ' ')
        s++;
    unsigned long long v = *s == '-' ? 0 : strtoull(s, &end, 10);
    if (*s == '-' || errno || end == s || *end || v < lo || v > hi) {
        char range[64];
        snprintf(range, sizeof range, "%llu..%llu", lo, hi);
        wl_usage_error("--%s wants an integer in %s", opt, range);
    }
    return v;
}

static long wl_int(const char *opt, const char *s, long lo, long hi)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        char range[64];
        snprintf(range, sizeof range, "%ld..%ld", lo, hi);
        wl_usage_error("--%s wants an integer in %s", opt, range);
    }
    return v;
}

/* Finite number in [lo, hi] (lo_open: > lo instead of >= lo). */
static double wl_num(const char *opt, const char *s, double lo, int lo_open, double hi)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v > hi || v < lo || (lo_open && v == lo)) {
        char range[64];
        snprintf(range, sizeof range, "%s%g..%g", lo_open ? ">" : "", lo, hi);
        wl_usage_error("--%s wants a number in %s", opt, range);
    }
    return v;
}

/* An amount, not a limit: 0 is 0 bytes (tgs/size.h). */
int wl_parse_size(const char *text, uint64_t *out)
{
    return tgs_size_parse(text, out);
}

static uint64_t wl_size(const char *opt, const char *s)
{
    uint64_t v;
    if (wl_parse_size(s, &v) != 0)
        wl_usage_error("--%s wants a size such as 512MiB, 2G or 4096 (got '%s')", opt, s);
    return v;
}

/* "G:S,G:S": a load profile (host gap in ms for S seconds), cycled by the loop. */
static void wl_phases(struct wl_config *c, const char *opt, const char *s)
{
    const char *p = s;
    c->nphases = 0;
    while (*p) {
        char *end = NULL;
        errno = 0;
        double gap = strtod(p, &end);
        if (c->nphases == WL_MAX_PHASES || errno || end == p || *end != ':' || !isfinite(gap) ||
            gap < 0 || gap > 3.6e6)
            break;
        p = end + 1;
        double sec = strtod(p, &end);
        if (errno || end == p || (*end && *end != ',') || !isfinite(sec) || sec <= 0 ||
            sec > 1e7)
            break;
        c->phases[c->nphases].gap_ms = gap;
        c->phases[c->nphases].seconds = sec;
        c->nphases++;
        if (!*end)
            return;
        p = end + 1;
    }
    c->nphases = 0;
    wl_usage_error("--%s wants GAP_MS:SECONDS[,GAP_MS:SECONDS]... (at most 8 phases, got '%s')",
                   opt, s);
}

const char *wl_resolve_name(enum wl_resolve r)
{
    return r == WL_RESOLVE_PROC ? "proc" : r == WL_RESOLVE_DLSYM ? "dlsym" : "link";
}

const char *wl_launch_name(enum wl_launch l)
{
    static const char *const names[] = {"kernel", "ex", "coop", "graph"};
    return names[l];
}

static void wl_defaults(struct wl_config *c)
{
    memset(c, 0, sizeof *c);
#ifdef TGS_WORKLOAD_LINKED
    c->resolve = WL_RESOLVE_LINK;
#else
    c->resolve = WL_RESOLVE_PROC;
#endif
    c->launch = WL_LAUNCH_KERNEL;
    c->cuda_version = 12080;
    c->kernels = 4;
    c->kernel_us = 1000.0;
    c->threads = 256;
    c->cost_factor = 1.0;
    c->gap_ms = 2.0;
    c->seconds = 5.0;
    c->name = "workload";
    c->warmup = 1;
    c->sync_every = 1;
    c->streams = 1;
    c->seed = 1;
}

/* Applies one option; returns 1 for --print-ptx. */
static int wl_apply(struct wl_config *c, int opt, const char *arg, const char *oname,
                    int *seen_iters, int *seen_seconds)
{
    switch (opt) {
    case OPT_KERNELS: c->kernels = (unsigned)wl_uint(oname, arg, 1, 100000); break;
    case OPT_KERNEL_US: c->kernel_us = wl_num(oname, arg, 0.0, 1, 1e8); break;
    case OPT_THREADS: c->threads = (unsigned)wl_uint(oname, arg, 1, 1024); break;
    case OPT_GRID: c->grid = (unsigned)wl_uint(oname, arg, 1, 2147483647ULL); break;
    case OPT_BLOCK: c->block = (unsigned)wl_uint(oname, arg, 1, 1024); break;
    case OPT_COST: c->cost_factor = wl_num(oname, arg, 0.0, 1, 1e6); break;
    case OPT_GAP: c->gap_ms = wl_num(oname, arg, 0.0, 0, 3.6e6); break;
    case OPT_MEM: c->mem_bytes = wl_size(oname, arg); break;
    case OPT_CHUNK:
        c->alloc_chunk = wl_size(oname, arg);
        if (!c->alloc_chunk)
            wl_usage_error("--%s must be more than 0 bytes%s", oname, "");
        break;
    case OPT_ITERS: c->iters = wl_uint(oname, arg, 1, 1000000000000ULL); *seen_iters = 1; break;
    case OPT_SECONDS: c->seconds = wl_num(oname, arg, 0.0, 1, 1e7); *seen_seconds = 1; break;
    case OPT_WARMUP: c->warmup = (unsigned)wl_uint(oname, arg, 0, 1000000); break;
    case OPT_REPORT: c->report_ms = wl_num(oname, arg, 0.0, 0, 3.6e6); break;
    case OPT_DEVICE: c->device = (int)wl_int(oname, arg, 0, 1023); break;
    case OPT_NAME:
        if (strlen(arg) > 200)
            wl_usage_error("--%s is limited to 200 characters%s", oname, "");
        c->name = arg;
        break;
    case OPT_CUDA_VERSION: c->cuda_version = (int)wl_int(oname, arg, 4000, 99999); break;
    case OPT_PER_THREAD: c->per_thread = 1; break;
    case OPT_STREAM: c->use_stream = 1; break;
    case OPT_PRIORITY:
        c->priority = (int)wl_int(oname, arg, -1000, 1000);
        c->use_stream = 1;
        break;
    case OPT_RESOLVE:
        if (!strcmp(arg, "proc")) c->resolve = WL_RESOLVE_PROC;
        else if (!strcmp(arg, "dlsym")) c->resolve = WL_RESOLVE_DLSYM;
        else if (!strcmp(arg, "link")) c->resolve = WL_RESOLVE_LINK;
        else wl_usage_error("--resolve wants proc, dlsym or link (got '%s')%s", arg, "");
        break;
    case OPT_LAUNCH:
        if (!strcmp(arg, "kernel")) c->launch = WL_LAUNCH_KERNEL;
        else if (!strcmp(arg, "ex")) c->launch = WL_LAUNCH_EX;
        else if (!strcmp(arg, "coop")) c->launch = WL_LAUNCH_COOP;
        else if (!strcmp(arg, "graph")) c->launch = WL_LAUNCH_GRAPH;
        else wl_usage_error("--launch wants kernel, ex, coop or graph (got '%s')%s", arg, "");
        break;
    case OPT_PHASES: wl_phases(c, oname, arg); break;
    case OPT_SYNC_EVERY: c->sync_every = (unsigned)wl_uint(oname, arg, 1, 1000000); break;
    case OPT_AHEAD: c->ahead = (unsigned)wl_uint(oname, arg, 1, 1024); break;
    case OPT_STREAMS: c->streams = (unsigned)wl_uint(oname, arg, 1, WL_MAX_STREAMS); break;
    case OPT_MIX: c->mix_long = (unsigned)wl_uint(oname, arg, 0, 100000); break;
    case OPT_POISSON: c->poisson_rps = wl_num(oname, arg, 0.0, 1, 1e6); break;
    case OPT_SEED: c->seed = wl_uint(oname, arg, 0, 18446744073709551615ULL); break;
    case OPT_MANAGED: c->managed = 1; break;
    case OPT_PREFER_DEVICE: c->prefer_device = c->managed = 1; break;
    case OPT_RAMP: c->ramp_every_ms = wl_num(oname, arg, 0.0, 1, 3.6e6); break;
    case OPT_FREE_AT: c->free_at_s = wl_num(oname, arg, 0.0, 1, 1e7); break;
    case OPT_VERIFY: c->verify = 1; break;
    case OPT_TOUCH:
        c->touch_stride = wl_size(oname, arg);
        if (c->touch_stride < 4 || c->touch_stride % 4)
            wl_usage_error("--%s wants a stride of 4 bytes or more, a multiple of 4%s", oname,
                           "");
        break;
    case OPT_PRINT_PTX: return 1;
    default: break;
    }
    return 0;
}

int wl_parse_args(int argc, char **argv, struct wl_config *cfg)
{
    int seen_iters = 0, seen_seconds = 0, print_ptx = 0, opt, idx;
    wl_defaults(cfg);
    opterr = 0;
    optind = 1;
    while ((opt = getopt_long(argc, argv, ":", wl_options, &idx)) != -1) {
        if (opt == OPT_HELP) {
            fputs(wl_usage, stdout);
            exit(0);
        }
        if (opt == '?')
            wl_usage_error("unknown option '%s'%s", argv[optind - 1], "");
        if (opt == ':')
            wl_usage_error("option '%s' needs a value%s", argv[optind - 1], "");
        print_ptx |= wl_apply(cfg, opt, optarg, wl_options[idx].name, &seen_iters,
                              &seen_seconds);
    }
    if (optind < argc)
        wl_usage_error("unexpected argument '%s'%s", argv[optind], "");
    if (seen_iters && seen_seconds)
        wl_usage_error("give --iters or --seconds, not both%s%s", "", "");
    if (seen_iters)
        cfg->seconds = 0.0;
    if (cfg->ahead && cfg->sync_every < 2)
        wl_usage_error("--ahead needs --sync-every 2 or more%s%s", "", "");
    if (cfg->mix_long && cfg->mix_long * 2 > cfg->kernels)
        wl_usage_error("--kernel-mix wants at most half of --kernels long%s%s", "", "");
    if (cfg->mix_long && cfg->launch == WL_LAUNCH_COOP)
        wl_usage_error("--kernel-mix with --launch coop is not supported%s%s", "", "");
    if (cfg->streams > 1 && cfg->launch == WL_LAUNCH_GRAPH)
        wl_usage_error("--streams > 1 with --launch graph: a graph replay is one launch%s%s",
                       "", "");
    if (cfg->poisson_rps > 0 && (cfg->sync_every > 1 || cfg->nphases))
        wl_usage_error("--poisson-rps serves each request at once: no --sync-every or "
                       "--phases%s%s", "", "");
    if (cfg->alloc_chunk && !cfg->mem_bytes)
        wl_usage_error("--alloc-chunk needs --mem%s%s", "", "");
    if (cfg->alloc_chunk && cfg->mem_bytes / cfg->alloc_chunk >= 1000000)
        wl_usage_error("--mem / --alloc-chunk makes a million chunks or more: "
                       "use a larger chunk%s%s", "", "");
    if ((cfg->ramp_every_ms > 0 || cfg->free_at_s > 0 || cfg->managed || cfg->verify ||
         cfg->touch_stride) && !cfg->mem_bytes)
        wl_usage_error("--managed, --prefer-device, --ramp-every-ms, --free-at-s, --verify and "
                       "--touch need --mem%s%s", "", "");
    if (cfg->touch_stride && (cfg->launch == WL_LAUNCH_GRAPH || cfg->streams > 1))
        wl_usage_error("--touch launches into the one stream: not with --launch graph or "
                       "--streams%s%s", "", "");
    return print_ptx;
}

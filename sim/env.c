/* env.c: environment parsing (read once per process), logging and clocks. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim.h"
#include "tgs/log_level.h"
#include "tgs/size.h"

/* The level is known from load time, so lookups made before cuInit (the
 * runtime and cuda-bindings resolve everything first) can be logged. */
__attribute__((constructor)) static void sim_log_init(void)
{
    g_sim.log_level = sim_env_loglevel();
}

void sim_log(int level, const char *fmt, ...)
{
    if (level > g_sim.log_level)
        return;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "tgs-sim: %s\n", buf);
}

int sim_env_loglevel(void)
{
    const char *v = getenv("TGS_LOG_LEVEL");
    int level = tgs_log_level_parse(v);
    if (level < 0)
        fprintf(stderr, "tgs-sim: TGS_LOG_LEVEL=%s is not one of " TGS_LOG_LEVEL_GRAMMAR
                "; using warn\n", v);
    return level < 0 ? TGS_LOG_WARN : level;
}

static void bad_env(const char *name, const char *v, const char *why)
{
    sim_log(TGS_LOG_ERROR, "%s=%s is invalid (%s); using the default", name, v, why);
}

uint64_t sim_env_u64(const char *name, uint64_t def, uint64_t min, uint64_t max)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return def;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || *end || v[0] == '-' || x < min || x > max) {
        char why[96];
        snprintf(why, sizeof why, "want an integer in [%llu, %llu]", (unsigned long long)min,
                 (unsigned long long)max);
        bad_env(name, v, why);
        return def;
    }
    return x;
}

double sim_env_double(const char *name, double def, double min, double max)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return def;
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || *end || !isfinite(x) || x < min || x > max) {
        bad_env(name, v, "want a number in range");
        return def;
    }
    return x;
}

/* A capacity (tgs/size.h): at least 1MiB, so 0 is refused like any other bad value. */
uint64_t sim_env_bytes(const char *name, uint64_t def)
{
    const char *v = getenv(name);
    uint64_t x;
    if (!v || !*v)
        return def;
    if (tgs_size_parse(v, &x) != 0 || x < (1u << 20)) {
        bad_env(name, v, "want a size >= 1MiB, e.g. " TGS_SIZE_EXAMPLES);
        return def;
    }
    return x;
}

uint64_t sim_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void sim_sleep_until(uint64_t t_ns)
{
    struct timespec ts = {.tv_sec = (time_t)(t_ns / 1000000000ull),
                          .tv_nsec = (long)(t_ns % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

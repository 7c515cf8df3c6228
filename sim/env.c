/* env.c: environment parsing (read once per process), logging and clocks. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim.h"
#include "tgs/log_level.h"

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
    return level < 0 ? SIM_LOG_WARN : level;
}

static void bad_env(const char *name, const char *v, const char *why)
{
    sim_log(SIM_LOG_ERROR, "%s=%s is invalid (%s); using the default", name, v, why);
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

/* "123", "512MiB", "16GiB", "16G", "1.5 GB" (all units binary). */
int sim_parse_bytes(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    if (!s || !isdigit((unsigned char)*s))
        return -1;
    double x = strtod(s, &end);
    if (errno || !isfinite(x))
        return -1;
    while (*end == ' ')
        end++;
    double mult = 1;
    switch (toupper((unsigned char)*end)) {
    case 0: break;
    case 'B': mult = 1; break;
    case 'K': mult = 1024.0; break;
    case 'M': mult = 1024.0 * 1024; break;
    case 'G': mult = 1024.0 * 1024 * 1024; break;
    case 'T': mult = 1024.0 * 1024 * 1024 * 1024; break;
    default: return -1;
    }
    if (*end && toupper((unsigned char)*end) != 'B') {
        end++;
        if (*end == 'i' || *end == 'I')
            end++;
        if (*end == 'B' || *end == 'b')
            end++;
    } else if (*end) {
        end++;
    }
    if (*end)
        return -1;
    double r = x * mult;
    if (r < 1 || r > 1.8e19)
        return -1;
    *out = (uint64_t)r;
    return 0;
}

uint64_t sim_env_bytes(const char *name, uint64_t def)
{
    const char *v = getenv(name);
    uint64_t x;
    if (!v || !*v)
        return def;
    if (sim_parse_bytes(v, &x) != 0 || x < (1u << 20)) {
        bad_env(name, v, "want bytes >= 1MiB, e.g. 512MiB, 16GiB, 16G");
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

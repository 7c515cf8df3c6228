/*
 * tgs/log_level.h: the one grammar of TGS_LOG_LEVEL, read by the shim
 * (libshim/options.c), the simulated driver (sim/env.c) and the simulated
 * NVML (sim/nvml/init.c).  Documented once, in docs/usage.md.
 *
 * Values: error | warn | info | debug, case-insensitive.  Unset or empty
 * means warn.  Anything else is refused: the reader says so in one line and
 * uses warn.
 */
#ifndef TGS_LOG_LEVEL_H
#define TGS_LOG_LEVEL_H

#include <strings.h>

/* The levels, the one enum of the shim, the simulated driver and its NVML: a line of level
 * L is written when L <= the level TGS_LOG_LEVEL names. */
enum tgs_log_level { TGS_LOG_ERROR = 0, TGS_LOG_WARN, TGS_LOG_INFO, TGS_LOG_DEBUG };
#define TGS_LOG_LEVEL_GRAMMAR "error|warn|info|debug"

/* The level v names, TGS_LOG_WARN for NULL/empty, -1 outside the grammar. */
static inline int tgs_log_level_parse(const char *v)
{
    static const char *const names[] = { "error", "warn", "info", "debug" };
    if (!v || !*v)
        return TGS_LOG_WARN;
    for (int i = 0; i < 4; i++)
        if (!strcasecmp(v, names[i]))
            return i;
    return -1;
}

#endif /* TGS_LOG_LEVEL_H */

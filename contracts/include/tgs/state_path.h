/*
 * tgs/state_path.h: where the simulator's shared state file is, one rule for
 * the simulated driver (sim/state.c), its NVML (sim/nvml/init.c) and every
 * reader of the file; Python's copy of the rule is
 * tgs.intercept.simstate.state_path.  TGS_SIM_STATE if it is an absolute
 * path shorter than 4000 bytes, else /dev/shm/tgs-sim-<uid>.
 */
#ifndef SIM_STATE_PATH_H
#define SIM_STATE_PATH_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Fill buf with the path; NULL, or why TGS_SIM_STATE was refused (the
 * default is used then: the caller says so in its own voice). */
static inline const char *sim_state_path(char *buf, size_t n)
{
    const char *p = getenv("TGS_SIM_STATE");
    const char *why = NULL;
    if (p && *p) {
        if (p[0] != '/')
            why = "is not an absolute path";
        else if (strlen(p) >= 4000)
            why = "is 4000 bytes or longer";
        else {
            snprintf(buf, n, "%s", p);
            return NULL;
        }
    }
    snprintf(buf, n, "/dev/shm/tgs-sim-%u", (unsigned)getuid());
    return why;
}

#endif /* SIM_STATE_PATH_H */

/*
 * nvml_sim.h: private declarations of the simulated NVML.  Everything here
 * is hidden; only the nvml* entry points (NVML_API) are exported.
 *
 * The library maps the simulator's state file (tgs/sim_state.h) read-only:
 * it never writes the simulator's state and never takes its locks, so a
 * monitoring process can neither wedge nor corrupt the simulated GPUs.
 */
#ifndef TGS_NVML_SIM_H
#define TGS_NVML_SIM_H

#include <pthread.h>
#include <stdint.h>

#include "tgs/sim_state.h"
#include "tgs/nvml_abi.h"

#define NVML_API __attribute__((visibility("default")))

#pragma GCC visibility push(hidden)

#define NVML_SAMPLES 16 /* utilisation samples remembered per device (>= 0.8 s) */

/* A device handle points at one of these (never dereferenced unchecked). */
struct nvmlDevice_st {
    unsigned int index;
};

/* Busy time of a device, and of each process slot on it, as of t_ns. */
struct nvml_sample {
    uint64_t t_ns;
    uint64_t busy_ns;
    int32_t pid[SIM_MAX_PROCS];     /* slot owner then (0: free slot) */
    uint64_t pbusy[SIM_MAX_PROCS];  /* its busy ns on this device */
};

/* Process-wide state of the simulated NVML: the one mutable global. */
struct nvml_globals {
    pthread_mutex_t lock; /* guards everything below */
    unsigned int refs;    /* nvmlInit calls not yet matched by nvmlShutdown */
    int fd;               /* the state file, read-only */
    const struct sim_state *st;
    size_t map_size;
    struct nvmlDevice_st dev[SIM_MAX_DEVICES];
    /* utilisation history, kept across shutdown and re-init */
    struct nvml_sample samples[SIM_MAX_DEVICES][NVML_SAMPLES];
    unsigned int nsamples[SIM_MAX_DEVICES];
    uint64_t seed_seen; /* uuid_seed of the file the samples belong to */
};

extern struct nvml_globals g_nvml;

/* init.c */
uint64_t nvml_now_ns(void);
/* The mapped state while initialised (caller holds no lock), else NULL. */
const struct sim_state *nvml_state(void);

/* device.c: check a handle; on success *idx is its device index. */
nvmlReturn_t nvml_dev(nvmlDevice_t device, unsigned int *idx);
/* The same, then NVML_ERROR_INVALID_ARGUMENT where the output pointer out is NULL. */
nvmlReturn_t nvml_dev_out(nvmlDevice_t device, const void *out, unsigned int *idx);
void nvml_uuid_string(unsigned int idx, char *out, size_t n);

/* memory.c: the owner of simulator process slot `slot` is alive */
int nvml_slot_alive(int slot);
/* Live processes with memory or a context on device dev: pids and device
 * bytes, at most SIM_MAX_PROCS; returns how many. */
unsigned int nvml_compute_procs(unsigned int dev, unsigned int *pids,
                                unsigned long long *used);

/* util.c: take a utilisation sample of every device (caller holds the lock) */
void nvml_util_note_all(const struct sim_state *st);
/* A fresh sample of device d in *now and, in *ref, the newest kept sample at
 * least 100 ms older (waiting for one if `wait`).  0 if *ref was found.
 * Caller holds no lock. */
int nvml_util_window(unsigned int d, int wait, struct nvml_sample *ref, struct nvml_sample *now);
/* Busy share of [ref, now] in percent (0..100). */
unsigned int nvml_util_share(uint64_t busy_then, uint64_t busy_now, uint64_t dt_ns);
/* Work queued on device d by live processes. */
uint64_t nvml_pending_ns(const struct sim_state *st, unsigned int d);

/* Copy a string into a caller's buffer of `length` bytes. */
nvmlReturn_t nvml_put_string(char *buf, unsigned int length, const char *s);

#pragma GCC visibility pop

#endif /* TGS_NVML_SIM_H */

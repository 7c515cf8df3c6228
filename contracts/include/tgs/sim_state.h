/*
 * tgs/sim_state.h: layout of the simulator's shared state file (TGS_SIM_STATE).
 *
 * Every process that names the same file shares one simulated device set.
 * The file is created complete (under a temporary name, then linked into
 * place), so a reader that sees SIM_STATE_MAGIC sees initialised devices.
 * Readers outside the simulator (tgs.intercept.simstate) only read: counters
 * are updated lazily, as of each device's t_last_ns (CLOCK_MONOTONIC).
 *
 * Locks: each device has a robust process-shared mutex guarding that device
 * and every context slot and per-device process counter that refers to it.
 * Process slot i is owned by whoever holds an OFD write lock on byte
 * SIM_LOCK_SLOT_BASE + i of the file; the kernel drops it when the owner
 * dies, which is how dead processes are found and reclaimed.
 *
 * Layout rules: fixed-size fields only, no pointers.  This header is the one
 * copy of the layout: tgs.intercept.simstate hands the part between the CDEF
 * markers to cffi (as intercept/header.py does with segment.h), so that part
 * keeps to what cffi's cdef parser accepts: structs of fixed-size integers
 * and chars, "#define NAME <integer literal>" constants, and pthread_mutex_t
 * only inside a union with a char array that fixes its size (the binding
 * declares the mutex opaque).  tests/sim/test_simstate_layout.py checks the
 * binding's sizes, offsets and constants against the compiler's.
 */
#ifndef TGS_SIM_STATE_H
#define TGS_SIM_STATE_H

#include <pthread.h>
#include <stdint.h>

#define SIM_PINNED (-3)      /* sim_mrange.preferred of a page-locked host range */

/* CDEF-BEGIN */
#define SIM_STATE_MAGIC 0x314d4953534754ULL /* "TGSSIM1" */
#define SIM_STATE_VERSION 3 /* 3: items carry their times; 2: a marker slot per ring slot; 1: the residency table was appended */
#define SIM_MAX_DEVICES 8
#define SIM_MAX_PROCS 128
#define SIM_MAX_CTXS 256
#define SIM_RING 2048        /* queued items per context (power of two) */
#define SIM_MARKER_RING 2048 /* remembered event completion times per context (>= SIM_RING) */
#define SIM_LOCK_SLOT_BASE 0 /* OFD lock byte of process slot i: base + i */
#define SIM_MAX_MRANGES 1024 /* managed allocations tracked for residency, all processes */

/* One queued operation: a kernel (marker == 0) or an event marker. */
struct sim_item {
    uint64_t remaining_ns;
    uint64_t marker;
    uint64_t enq_ns;   /* when it was queued */
    uint64_t start_ns; /* when it first ran (0: not yet) */
    uint64_t dur_ns;   /* its device time */
};

struct sim_marker {
    uint64_t id;   /* marker id that completed here (0: never) */
    uint64_t t_ns; /* its simulated completion time */
};

/* A context: one time-slicing entity on a device (a CUcontext). */
struct sim_ctx {
    uint32_t in_use;
    int32_t proc; /* owning process slot */
    int32_t dev;
    uint32_t gen; /* bumped at every reuse */
    uint64_t head;    /* items [head, tail) are pending; head = completed count */
    uint64_t tail;
    uint64_t busy_ns; /* device time consumed by this context */
    uint64_t last_done_ns;
    uint64_t pending_ns; /* sum of remaining_ns of pending items */
    struct sim_item items[SIM_RING];
    struct sim_marker markers[SIM_MARKER_RING];
};

struct sim_proc_dev {
    uint64_t mem_used;     /* device bytes (allocations, arrays, VMM handles) */
    uint64_t managed_used; /* managed bytes, accounted separately */
    uint64_t busy_ns;
};

struct sim_proc {
    uint32_t in_use;
    int32_t pid; /* informational: pid in the owner's namespace */
    uint64_t started_ns;
    struct sim_proc_dev dev[SIM_MAX_DEVICES];
};

struct sim_device {
    union {
        pthread_mutex_t lock;
        char lock_pad[64];
    };
    uint64_t mem_total;
    uint64_t mem_used;
    uint64_t managed_used;
    uint64_t busy_ns;
    uint64_t t_last_ns;   /* simulation advanced up to here */
    uint64_t slice_end_ns;
    int32_t cur_ctx;      /* context holding the device, -1 none */
    uint32_t pad0;
    uint64_t kernels_done;
    uint64_t switches;    /* context switches between different contexts */
    uint64_t last_reap_ns;
};

/* A managed allocation's residency (sim/residency.c).  Claimed with an
 * atomic compare-and-swap of in_use; every other field is guarded by the
 * lock of device dev.  The resident bytes are the allocation's first
 * `resident` bytes (4 KiB multiples): the model tracks how much, not which. */
struct sim_mrange {
    uint32_t in_use;
    int32_t proc;      /* owning process slot */
    int32_t dev;
    int32_t preferred; /* cuMemAdvise preferred location: device, -1 host, -2 none;
                        * SIM_PINNED: page-locked host memory (counted on the host only) */
    uint64_t base;     /* the owner's address (informational) */
    uint64_t size;
    uint64_t resident; /* bytes in device memory */
    uint64_t last_use_ns;
};

/* Managed memory on the devices: bytes resident (counted in the device's
 * usage beside mem_used), bytes moved each way since creation. */
struct sim_residency {
    uint64_t resident[SIM_MAX_DEVICES];
    uint64_t evicted[SIM_MAX_DEVICES];  /* device -> host */
    uint64_t migrated[SIM_MAX_DEVICES]; /* host -> device (kernels' faults, prefetches) */
    uint32_t hwm;                       /* ranges [0, hwm) may be in use */
    uint32_t pad0;
    struct sim_mrange r[SIM_MAX_MRANGES];
};

struct sim_header {
    uint64_t magic;
    uint32_t version;
    uint32_t ndevices;
    uint64_t mem_per_device;
    uint64_t timeslice_ns;
    uint64_t file_size;
    uint64_t created_ns;
    uint64_t uuid_seed; /* random at creation: device UUIDs are stable per file */
    uint64_t host_used; /* host bytes of managed memory not resident + page-locked host
                         * memory, all processes (residency.c; atomic); was reserved[0] */
    uint64_t reserved[7];
};

struct sim_state {
    struct sim_header hdr;
    struct sim_device dev[SIM_MAX_DEVICES];
    struct sim_proc proc[SIM_MAX_PROCS];
    struct sim_ctx ctx[SIM_MAX_CTXS];
    struct sim_residency res;
};
/* CDEF-END */

#ifndef __cplusplus
_Static_assert(sizeof(pthread_mutex_t) <= 64, "a device's mutex fits its 64-byte pad");
#endif

#endif /* TGS_SIM_STATE_H */

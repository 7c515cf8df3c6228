/*
 * libshim/state.h: the shim's state, the bottom layer (libshim/README.md).
 * All global mutable state lives in one struct, tgs_g (state.c), with every
 * struct it holds; the only other mutable state is the per-thread lane cache
 * tgs_tls, which is thread-local by nature.  Also here: what reads or
 * keeps that state and needs nothing else of the shim (the clock, the log,
 * the .ctl's policy values).  Includes the contracts only; never installed.
 */
#ifndef TGS_STATE_H
#define TGS_STATE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tgs/cuda_abi.h"
#include "tgs/log_level.h"
#include "tgs/segment.h"

#define TGS_EXPORT __attribute__((visibility("default")))
#define TGS_LIKELY(x) __builtin_expect(!!(x), 1)
#define TGS_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define TGS_RELAXED_LOAD(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define TGS_RELAXED_STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)

/* Every driver entry point the shim replaces.  Each has an exported function
 * of the same name (hooks_*.c) that calls the real function of EXACTLY that
 * name, so a hook never changes the ABI variant the caller asked for. */
#define TGS_HOOKED(X) \
    X(cuGetProcAddress) X(cuGetProcAddress_v2) \
    X(cuMemAlloc) X(cuMemAlloc_v2) X(cuMemAllocPitch) X(cuMemAllocPitch_v2) \
    X(cuMemAllocManaged) X(cuMemAllocAsync) X(cuMemAllocAsync_ptsz) \
    X(cuMemAllocFromPoolAsync) X(cuMemAllocFromPoolAsync_ptsz) \
    X(cuMemCreate) X(cuMemRelease) \
    X(cuArrayCreate_v2) X(cuArray3DCreate_v2) X(cuMipmappedArrayCreate) \
    X(cuMemFree) X(cuMemFree_v2) X(cuMemFreeAsync) X(cuMemFreeAsync_ptsz) \
    X(cuArrayDestroy) X(cuMipmappedArrayDestroy) \
    X(cuMemAllocHost_v2) X(cuMemHostAlloc) X(cuMemHostRegister_v2) \
    X(cuMemFreeHost) X(cuMemHostUnregister) \
    X(cuMemGetInfo) X(cuMemGetInfo_v2) X(cuDeviceTotalMem) X(cuDeviceTotalMem_v2) \
    X(cuLaunchKernel) X(cuLaunchKernel_ptsz) X(cuLaunchKernelEx) X(cuLaunchKernelEx_ptsz) \
    X(cuLaunchCooperativeKernel) X(cuLaunchCooperativeKernel_ptsz) \
    X(cuGraphLaunch) X(cuGraphLaunch_ptsz) \
    X(cuGraphInstantiate) X(cuGraphInstantiate_v2) X(cuGraphInstantiateWithFlags) \
    X(cuGraphInstantiateWithParams) X(cuGraphInstantiateWithParams_ptsz) X(cuGraphExecDestroy) \
    X(cuCtxSynchronize) X(cuCtxSynchronize_v2) \
    X(cuStreamSynchronize) X(cuStreamSynchronize_ptsz) X(cuStreamQuery) X(cuStreamQuery_ptsz) \
    X(cuEventQuery) X(cuEventSynchronize) X(cuEventRecord) X(cuEventRecord_ptsz) \
    TGS_HOOKED_CAPTURE(X)

/* Stream capture (capture.c): begin/end, to count the captures in progress. */
#define TGS_HOOKED_CAPTURE(X) \
    X(cuStreamBeginCapture) X(cuStreamBeginCapture_ptsz) \
    X(cuStreamBeginCapture_v2) X(cuStreamBeginCapture_v2_ptsz) \
    X(cuStreamBeginCaptureToGraph) X(cuStreamBeginCaptureToGraph_ptsz) \
    X(cuStreamEndCapture) X(cuStreamEndCapture_ptsz)

enum tgs_hook_id {
#define TGS_HOOK_ENUM(name) TGS_HOOK_##name,
    TGS_HOOKED(TGS_HOOK_ENUM)
#undef TGS_HOOK_ENUM
    TGS_NHOOKS
};

/* What the environment said, read once (options.c: its TGS_OPTIONS table). */
/* TGS_FIT_BUDGET: 0 = no overrun budget; gap = it governs only FIT's start-of-gap rule;
 * default = also the starvation bound (fit.c) */
enum { TGS_FIT_BUDGET_OFF = 0, TGS_FIT_BUDGET_GAP = 1, TGS_FIT_BUDGET_BOUND = 2 };
struct tgs_options {
    char segment_path[4096];    /* TGS_SEGMENT, "" = none */
    char ctl_path[4096];        /* TGS_CTL, "" = the segment path with .seg -> .ctl */
    char pub_path[4096];        /* TGS_PUB, "" = <pub dir>/<job>.pub */
    char pub_dir[4096];         /* TGS_PUB_DIR, "" = <segment dir>/pub */
    char device_path[4096];     /* TGS_DEVICE_SEG, "" = <segment dir>/device-<i>.seg */
    uint64_t mem_limit;         /* TGS_MEM_LIMIT, TGS_QUOTA_UNLIMITED = none */
    int log_level;              /* TGS_LOG_LEVEL */
    int debug_hits;             /* TGS_DEBUG_HITS=1: count hook calls (tests) */
    int drain;                  /* TGS_DRAIN (default 1): GPU-side drain detection */
    uint64_t drain_settle_ns;   /* TGS_DRAIN_SETTLE_US (default 50): drained this long */
    uint64_t drain_settle_max_ns;   /* TGS_DRAIN_SETTLE_MAX_US (default 2000): the settle's cap */
    uint64_t drain_poll_ns;     /* TGS_DRAIN_POLL_US (default 0: woken by the launch) */
    int fit_budget;             /* TGS_FIT_BUDGET: TGS_FIT_BUDGET_* (fit.c) */
    char fit_trace[4096];       /* TGS_FIT_TRACE, "" = none: one line per FIT launch (fit.c) */
    uint64_t oversub_check_ns;  /* TGS_OVERSUB_CHECK_MS (default 10): memory look period */
    uint64_t slot_wait_ns;      /* TGS_SLOT_WAIT_MS (default 3000): longest wait for a slot */
    uint64_t oversub_pause_ns;  /* TGS_OVERSUB_PAUSE_MS (default 10000): longest hold of a launch */
    uint64_t oversub_watch_ns;  /* TGS_OVERSUB_WATCH_MS (default 2): watcher period, 0 = none */
    char real_libcuda[4096];    /* TGS_REAL_LIBCUDA, "" = "libcuda.so.1" */
    char parts[16384];          /* TGS_PARTS: a multi-device job's .seg paths, ';' (parts.c) */
};

struct tgs_real {
    void *handle;
#define TGS_REAL_FIELD(name, params) tgs_pfn_##name name;
    TGS_CUDA_ENTRY_POINTS(TGS_REAL_FIELD)
#undef TGS_REAL_FIELD
};

/* Pointer -> bytes charged (ptrmap.c); kind separates address spaces. */
enum tgs_alloc_kind {
    TGS_KIND_DPTR = 1, TGS_KIND_HANDLE, TGS_KIND_ARRAY, TGS_KIND_MIPMAP,
    TGS_KIND_GRAPH_WORK, TGS_KIND_GRAPH_KERNELS, /* graph.c: exec -> work, kernel count, */
    TGS_KIND_GRAPH_BLOCKS,                       /* block count */
    TGS_KIND_PINNED,            /* pinned.c: page-locked host memory */
    TGS_KIND_ASYNC_MANAGED      /* oversub.c: a cuMemAllocAsync made managed */
};
struct tgs_ptr_entry { uint64_t key; uint64_t bytes; uint32_t kind; uint32_t used; };
struct tgs_ptrmap { pthread_mutex_t mu; struct tgs_ptr_entry *tab; size_t cap, count; };


#define TGS_INFLIGHT_EVENTS 64

/* Oversubscription's watch (oversub_watch.c): the job's managed ranges, which
 * of them are believed resident, and the thrashing guard.  Under mu; `next`
 * is read relaxed by the synchronize hooks first. */
struct tgs_orange {
    uint64_t ptr, bytes, in;    /* in: prefix believed resident */
    int dev;                    /* the device it was allocated on */
    int host;                   /* advised to prefer the host (past mem_quota): not prefetched */
};
struct tgs_oversub {
    pthread_mutex_t mu;
    struct tgs_orange *r;
    size_t n, cap;
    uint64_t next_ns;           /* no look before this */
    struct {
        CUcontext ctx;          /* the prefetch stream's context */
        CUstream stream;        /* the job's own prefetch stream (NULL: not made yet) */
        uint64_t last_free;     /* device free memory at the last look */
        int seen;               /* last_free is set */
    } d[TGS_MAX_DEVICES];       /* per device ordinal (segment.h: every index is below) */
    int past_warned;            /* a device at or past TGS_MAX_DEVICES was said once */
    int dev;                    /* the current context's device (the look's) */
    int hold;                   /* the working set does not fit: launches take the slow
                                 * path and wait there (oversub_hold.c; relaxed loads) */
    CUcontext wctx;             /* the watcher's context and device: the last range's */
    int wdev;
    pthread_cond_t wcv;         /* wakes the watcher when a range is tracked or at exit */
    int wpid, wstop, wstopped;  /* the watcher runs in process wpid (0: none) */
    uint64_t holds, held_ns;    /* holds set, launch time spent held (logged) */
    pthread_mutex_t free_mu;    /* the deferred frees (oversub_free.c) */
    struct tgs_ofree { uint64_t ptr; CUevent ev; } *pend;
    size_t npend, cappend;
    uint64_t prefetched, pauses; /* bytes prefetched, guard pauses (logged) */
};

/* Gap-fit (fit.c): this process's GPU time per work unit, learned from one
 * timed event pair around a sampled launch, and a model of when the work it
 * has queued will have drained.  All under mu (slow path only). */
struct tgs_fit {
    pthread_mutex_t mu;
    int used;                   /* FIT has gated a launch of this process */
    int off;                    /* events unusable: no estimate, FIT acts as WAIT */
    CUevent ev_start, ev_end;   /* created once, CU_EVENT_DEFAULT */
    int pending;                /* 0 none, 1 start recorded, 2 start and end recorded */
    int clean;                  /* the pending sample went while production was idle */
    uint64_t pending_work;
    uint64_t pending_seq;       /* the device's busy_seq when the sample went */
    uint64_t pending_rec_ns;    /* host time just before the start event was recorded */
    uint64_t pending_delay_ns;  /* host time from then until the launch had returned */
    uint64_t pending_span_ns;   /* ... until the end event had been recorded */
    uint64_t launches;          /* gated launches (sampling cadence) */
    double est;                 /* ns of GPU time per work unit; 0 = unknown */
    double fixed_ns;            /* ns of GPU time every launch costs beyond its units */
    int provisional;            /* est is from a sample production may have slowed */
    uint64_t q_until_ns;        /* when the work we queued is predicted to be done */
    double overrun_budget;      /* ns of delay to production still allowed (may go < 0) */
    uint64_t overrun_t;         /* when the budget was last accrued (0: never) */
    uint64_t trickle_end_ns;    /* predicted end of the queue a trickle left (0: none) */
    uint64_t trickle_seq;       /* the gap it went into (tgs_prod_seq) */
    uint64_t trickle_idle_ns;   /* and when that gap began */
    int trace_tried, trace_fd;  /* TGS_FIT_TRACE opened (once per process), its fd or -1 */
};
/* OFF: no job to attach to (no valid .ctl): pass-through, fail safe.  REFUSED: the job
 * is registered (its .ctl is valid) but its tenant-writable .seg gives this process no
 * slot: its launches and allocations fail (fail closed, docs/security.md). */
enum tgs_attach_state { TGS_ATTACH_NONE = 0, TGS_ATTACH_OK, TGS_ATTACH_OFF, TGS_ATTACH_REFUSED };

/* GPU-side drain detection of a production process (drain.c): the streams
 * launched on since it last went busy, and a helper thread that waits on a
 * "tail" event recorded after their latest work, then publishes the process
 * idle as a synchronize would.  streams/n/any are read by the launch fast
 * path (relaxed); everything else is under mu. */
#define TGS_DRAIN_STREAMS 8
struct tgs_drain {
    int asleep;                 /* the helper waits on cv to be woken (drain.c) */
    uint64_t idle_t;            /* when it last published an idle */
    pthread_mutex_t mu;
    pthread_mutex_t rec_mu;     /* the helper's records vs a capture's begin (capture.c) */
    pthread_cond_t cv;
    CUstream streams[TGS_DRAIN_STREAMS];
    int n;                      /* streams[0..n) launched on in this busy period */
    int any;                    /* untrackable (overflow, a per-thread stream, an error):
                                 * every stream is "known", no drain detection until idle */
    uint64_t gen;               /* bumped at each idle->busy transition */
    CUcontext ctx;              /* current at that transition */
    int pid;                    /* the helper runs in this process (0: none) */
    int stop, stopped;
    uint64_t idles;             /* busy->idle transitions published by the helper */
    uint64_t rounds;            /* tail rounds the helper made (each: records, a wait) */
    uint64_t cpu_ns;            /* the helper thread's CPU time, when it stopped */
    uint64_t settle_ns;         /* how long drained before idle is published (adaptive) */
    uint64_t drained_t;         /* when the last published drain was first seen (0: none) */
    uint64_t lasted[32];        /* SETTLE_RING (drain.c): the last drains seen, published or
                                 * held back by the settle: first seen to the next launch */
    uint32_t nlasted;
    uint32_t nlasted_idle;      /* of those, published idles (the rest: held back) */
    uint64_t period_start;      /* launch_seq when this busy period began (0: none yet) */
    uint64_t counts[8];         /* PERIOD_RING (drain.c): launch_seq moves of the last busy periods */
    uint32_t ncounts;
    uint64_t early;             /* idles published at a period's usual end, without the settle */
    int drained_early;          /* the last published drain was one of those */
    int syncing;                /* threads of this process in a blocking synchronize now
                                 * (sync_hooks.c; atomic) */
    int drained_sync;           /* the last published drain came while one was */
    uint64_t raced;             /* published idles taken back by the watch (drain.c) */
    int launching;              /* slow-path launches between their publish and the driver's
                                 * return (sync_hooks.c; atomic): not drained meanwhile */
};

/* A production process's own record of the gaps it started, by how they started
 * (sync_hooks.c): a synchronize returning, or the drain helper.  The prediction a gap
 * gets is the shortest recent gap of its own kind, so the drain helper's short gaps in
 * the middle of a step do not shorten the prediction of the gaps at its end. */
enum { TGS_GAP_SYNC = 0, TGS_GAP_DRAIN = 1, TGS_GAP_KINDS = 2, TGS_GAP_OTHER = 2 };
struct tgs_gap_kinds {
    uint64_t ring[TGS_GAP_KINDS][TGS_GAP_RING];
    uint32_t next[TGS_GAP_KINDS];
    uint64_t seq;               /* the busy_seq of the gap this process started (+1) */
    int kind;                   /* how it started */
};

/* Other jobs' publish pages and the device segment, mapped read-only into a
 * fixed region of TGS_PEER_PAGES pages (peers.c): page k < TGS_DEV_MAX_JOBS
 * holds the pub of device-table entry k (or an anonymous zero page), the
 * last page the device segment.  Pages are never unmapped, only replaced
 * (MAP_FIXED), so a reader never touches an unmapped address; the SIGBUS
 * guard replaces a page whose file was truncated by a zero page. */
#define TGS_PEER_PAGE 4096
#define TGS_PEER_PAGES (TGS_DEV_MAX_JOBS + 1)
struct tgs_peer {
    int used;                   /* mapped and valid (relaxed loads by readers) */
    uint32_t priority;
    uint64_t busy_bias;
    uint64_t gap_mask;
    uint64_t generation;
    uint64_t retry_ns;          /* a bad/damaged page is re-validated after this */
    char name[TGS_SEG_NAME_MAX];
};
struct tgs_peers {
    pthread_mutex_t mu;
    char *region;               /* TGS_PEER_PAGES pages, PROT_READ */
    size_t page;                /* the page size */
    const struct tgs_dev_segment *dev;  /* = last page, when the device segment is valid */
    uint64_t list_seq;          /* the device list_seq the table was read at */
    volatile int damaged;       /* set by the SIGBUS guard: re-validate on a slow path */
    volatile int page_damaged[TGS_PEER_PAGES];
    int guard;                  /* the SIGBUS handler is installed */
    uint64_t guard_checked_ns;  /* when the handler was last seen in place */
    uint64_t retry_ns;          /* a missing/invalid file is looked at again then (0 = none) */
    int nopp;                   /* opportunistic jobs the device table lists (mapped or not) */
    struct tgs_peer e[TGS_DEV_MAX_JOBS];
};

/* The NVML view (nvml_*.c): real NVML functions, resolved lazily from the
 * library the program loaded (atomic pointers; the shim never loads NVML). */
#define TGS_NVML_MAX 16
struct tgs_nvml {
    void *real[TGS_NVML_MAX];   /* each hooked function's real address (nvml_shim.h) */
    void *get_uuid, *get_index, *by_uuid;
};

struct tgs_global {
    pthread_once_t once;
    int ready;                  /* init done (acquire/release) */
    pthread_once_t opt_once;    /* tgs_options_load (options.c) */
    struct tgs_options opt;
    struct tgs_real real;
    void *(*real_dlsym)(void *, const char *);
    void *(*real_dlvsym)(void *, const char *, const char *);
    void *hook_real[TGS_NHOOKS];    /* real address of each hooked symbol */
    uint64_t hits[TGS_NHOOKS];      /* TGS_DEBUG_HITS counters */

    /* the job segment (attach.c); reset in a forked child */
    pthread_mutex_t attach_mu;
    int attach_state;           /* enum tgs_attach_state (acquire/release) */
    int fd;                     /* the .seg (read-write; slot locks live on it) */
    size_t map_size;
    struct tgs_seg_header *hdr;
    struct tgs_slot *slot;
    int slot_idx;
    const struct tgs_ctl_header *ctl;   /* the .ctl, PROT_READ */
    size_t ctl_size;
    const struct tgs_ctl_slot *cline;   /* our slot's control line in the .ctl */
    struct tgs_pub *pub;        /* our job's own publish page (read-write), or NULL */
    uint32_t epoch;             /* bumped per attach: invalidates thread lanes */
    uint32_t lanes_next;
    int gate_warned;
    int policy_warned;          /* the .ctl policy values said out of range (policy.c) */
    struct tgs_peers peers;

    /* memory (ledger.c, ptrmap.c) */
    pthread_mutex_t ledger_mu;  /* threads of one process share the ledger owner id */
    uint64_t ledger_id;         /* TGS_LEDGER owner id of this process (slot, generation) */
    uint64_t local_used;        /* static TGS_MEM_LIMIT mode */
    int quota_reported;         /* the first quota refusal was reported (ledger.c) */
    struct tgs_ptrmap ptrs;
    struct tgs_ptrmap graphs;

    /* tokens (tokens.c): process-private, lock-free */
    uint64_t tat_ns;            /* GCRA theoretical arrival time */
    uint64_t tat_rate;          /* the rate tat_ns was computed with */
    uint64_t launched_work, retired_work;
    pthread_mutex_t inflight_mu;
    CUevent ev[TGS_INFLIGHT_EVENTS];
    uint64_t ev_mark[TGS_INFLIGHT_EVENTS];
    unsigned ev_head, ev_tail;
    int inflight_off;

    /* gating (sync_hooks.c) */
    int dev_active;
    CUstream last_stream;
    uint64_t launch_seq;
    CUevent last_event;
    uint64_t last_event_seq;
    struct tgs_fit fit;
    struct tgs_drain drain;
    struct tgs_gap_kinds gaps;

    /* stream capture (capture.c): capture sequences begun and not yet ended,
     * as seen by the begin/end hooks (relaxed; nonzero sends launches to the
     * slow path, which asks the driver whether their stream captures) */
    int captures;

    struct tgs_nvml nvml;       /* NVML view (nvml_real.c) */
    struct tgs_oversub oversub; /* oversub_watch.c */

    /* a multi-device job (parts.c): the device of this process's part + 1 (0: none) */
    int part_dev;
    int part_warned;
};

struct tgs_thread {
    struct tgs_lane *lane;
    uint32_t epoch;
    uint32_t shared;            /* the overflow lane: atomic adds */
    int in_init;                /* guards dlsym recursion during init */
    int launching;              /* this thread counts in tgs_g.drain.launching */
};

extern struct tgs_global tgs_g;
extern __thread struct tgs_thread tgs_tls __attribute__((tls_model("initial-exec")));

/* state.c */
uint64_t tgs_now_ns(void);
void tgs_sleep_ns(uint64_t ns);

/* log.c */
void tgs_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* policy.c: the gate's policy values, from the attached .ctl, else the contract's defaults */
double tgs_interference(void);      /* production's interference target, a fraction */
uint64_t tgs_wait_step_ns(void);    /* a WAIT launch's longest sleep before it looks again */
uint64_t tgs_fit_step_ns(void);     /* a FIT launch asks this often whether it fits */
void tgs_policy_check(void);        /* at attach: a value out of range is said now */

#endif /* TGS_STATE_H */

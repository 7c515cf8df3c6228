/*
 * libshim/shim.h: internals shared by the shim's translation units (never
 * installed).  All global mutable state lives in one struct, tgs_g
 * (state.c); the only other mutable state is the per-thread lane cache
 * tgs_tls, which is thread-local by nature.
 */
#ifndef TGS_SHIM_H
#define TGS_SHIM_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tgs/cuda_abi.h"
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

enum tgs_log_level { TGS_LOG_ERROR = 0, TGS_LOG_WARN, TGS_LOG_INFO, TGS_LOG_DEBUG };

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
#define TGS_OVERSUB_DEVS 16
struct tgs_oversub {
    pthread_mutex_t mu;
    pthread_once_t fork_once;   /* the fork handler is registered at the first range */
    struct tgs_orange *r;
    size_t n, cap;
    uint64_t next_ns;           /* no look before this */
    struct {
        CUcontext ctx;          /* the prefetch stream's context */
        CUstream stream;        /* the job's own prefetch stream (NULL: not made yet) */
        uint64_t last_free;     /* device free memory at the last look */
        int seen;               /* last_free is set */
    } d[TGS_OVERSUB_DEVS];      /* per device ordinal */
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
    uint64_t settle_ns;         /* how long drained before idle is published (adaptive) */
    uint64_t drained_t;         /* when the last published drain was first seen (0: none) */
    uint64_t lasted[16];        /* SETTLE_RING (drain.c): the last published drains: first seen to the next launch */
    uint32_t nlasted;
    uint64_t period_start;      /* launch_seq when this busy period began (0: none yet) */
    uint64_t counts[8];         /* PERIOD_RING (drain.c): launch_seq moves of the last busy periods */
    uint32_t ncounts;
    uint64_t early;             /* idles published at a period's usual end, without the settle */
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
};

extern struct tgs_global tgs_g;
extern __thread struct tgs_thread tgs_tls __attribute__((tls_model("initial-exec")));

/* state.c */
void tgs_init_slow(void);
static inline void tgs_ensure_init(void)
{
    if (TGS_UNLIKELY(!__atomic_load_n(&tgs_g.ready, __ATOMIC_ACQUIRE)))
        tgs_init_slow();
}
uint64_t tgs_now_ns(void);
void tgs_sleep_ns(uint64_t ns);

/* log.c, options.c */
void tgs_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Reads every TGS_* variable into tgs_g.opt, once (later calls return at once); init does,
 * and so does an NVML hook that must know the job before deciding to initialize. */
void tgs_options_load(void);

/* real.c */
void tgs_real_bootstrap(void);
void tgs_real_open(void);

/* hooks_table.c */
void *tgs_hook_for_real(void *real_fn);
void *tgs_hook_by_name(const char *name);
int tgs_hook_index(const char *name);
void tgs_hooks_resolve_real(void);
#define TGS_HIT(name) \
    do { \
        tgs_ensure_init(); \
        if (TGS_UNLIKELY(tgs_g.opt.debug_hits)) \
            __atomic_fetch_add(&tgs_g.hits[TGS_HOOK_##name], 1, __ATOMIC_RELAXED); \
    } while (0)

/* nvml_real.c: dlsym substitution of the NVML hooks */
void *tgs_nvml_substitute(const char *name, void *p);

/* attach.c */
void tgs_attach_slow(void);
static inline __attribute__((always_inline)) struct tgs_slot *tgs_slot(void)
{
    int st = __atomic_load_n(&tgs_g.attach_state, __ATOMIC_ACQUIRE);
    if (TGS_UNLIKELY(st == TGS_ATTACH_NONE)) {
        tgs_attach_slow();
        st = __atomic_load_n(&tgs_g.attach_state, __ATOMIC_ACQUIRE);
    }
    return st == TGS_ATTACH_OK ? tgs_g.slot : NULL;
}
/* After tgs_slot() gave NULL: whether that is a refusal (fail closed), not pass-through. */
static inline bool tgs_refused(void)
{
    return __atomic_load_n(&tgs_g.attach_state, __ATOMIC_ACQUIRE) == TGS_ATTACH_REFUSED;
}
void tgs_heartbeat(void);
void tgs_atfork_child(void);
void tgs_detach(void);
void tgs_reclaim_slot_locked(struct tgs_slot *s);
void tgs_reclaim_dead(void);    /* every dead slot of the job (not ours) goes back to it */
int tgs_ofd_lock(int fd, int byte, int wait);
void tgs_ofd_unlock(int fd, int byte);
bool tgs_ofd_held(int fd, int byte);   /* another description holds a lock on it */

/* files.c: the job's files, validated (NULL and one stderr line on any problem) */
const struct tgs_ctl_header *tgs_map_ctl(size_t *size);
/* NULL and *why (no log: the caller retries, then says it once) when the .seg is unusable */
struct tgs_seg_header *tgs_map_seg(const struct tgs_ctl_header *c, int *fd, size_t *size,
                                   const char **why);
struct tgs_pub *tgs_map_own_pub(const struct tgs_ctl_header *c);
void tgs_device_path(char *out, size_t cap, int32_t index);
void tgs_pub_dir(char *out, size_t cap);
/* The slot count, from the read-only .ctl (the .seg's copy is the tenant's to scribble on);
 * only valid while attached. */
static inline uint32_t tgs_nslots(void)
{
    return tgs_g.ctl->id.nslots;
}
static inline struct tgs_slot *tgs_slot_at(struct tgs_seg_header *h, uint32_t i)
{
    return (struct tgs_slot *)((char *)h + sizeof(*h) + (size_t)i * sizeof(struct tgs_slot));
}

/* parts.c: a multi-device job's part for this process (TGS_PARTS) */
int tgs_pick_part(void);        /* 0 chosen (segment_path set), 1 not yet (no context), -1 none */
int tgs_cuda_uuid(CUdevice dev, char *out, size_t cap);   /* "GPU-..." of a CUDA device */
int tgs_current_device(CUdevice *dev);                    /* 0 when a context is current */
void tgs_part_warn(CUdevice dev);      /* once: this process works on another part's device */
int tgs_other_device(CUdevice *dev);   /* 1: attached to a part, current device is another */
int tgs_part_by_uuid(const char *uuid, char *seg, size_t cap, struct tgs_ctl_header *h);

/* ledger.c */
int tgs_mem_admit(uint64_t bytes);   /* 0 = admitted, -1 = over quota */
void tgs_mem_release(uint64_t bytes);
void tgs_mem_adjust(uint64_t reserved, uint64_t actual);
int tgs_mem_view(uint64_t *quota, uint64_t *used); /* 1 if a quota applies */
/* page-locked host memory against ctl.host_pinned_max (pinned.c): 0 admitted, -1 refused */
int tgs_pinned_admit(uint64_t bytes);
void tgs_pinned_release(uint64_t bytes);
/* oversub.c: an opportunistic job with ctl.mem_total set gets managed memory */
int tgs_oversub_on(void);
uint64_t tgs_oversub_limit(void); /* the ledger's limit: mem_total when on, else mem_quota */
CUresult tgs_oversub_alloc(CUdeviceptr *dptr, uint64_t bytes);
CUresult tgs_oversub_alloc_pitch(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
                                 unsigned int elem);
CUresult tgs_oversub_alloc_async(CUdeviceptr *dptr, uint64_t bytes, CUstream stream);
int tgs_oversub_alloc32(unsigned int *dptr, uint64_t bytes, CUresult *r);
/* oversub_free.c: cuMemFreeAsync of a converted pointer (1: it answered, *r its result),
 * deferred until an event after the stream's work completes; reap frees what is done
 * (wait: waits for all of it) and returns how many it freed */
int tgs_oversub_free_async(CUdeviceptr dptr, CUstream stream, int ptsz, CUresult *r);
int tgs_oversub_reap(int wait);
/* oversub_watch.c: remember / forget a managed range; after a successful synchronize
 * (slow path only): prefetch back what fits, and the thrashing guard */
void tgs_oversub_track(uint64_t ptr, uint64_t bytes, int host);
void tgs_oversub_forget(uint64_t ptr);
void tgs_oversub_synced(void);
/* oversub_watch.c, for oversub_hold.c (mu held) */
uint64_t tgs_oversub_margin(uint64_t total);
uint64_t tgs_oversub_note_locked(int dev, uint64_t f, uint64_t t);
int tgs_oversub_look_locked(int strict, uint64_t *moved);
CUstream tgs_oversub_stream_locked(void);
/* oversub_hold.c: the thrashing guard (hold, watcher thread, held launches) */
void tgs_oversub_set_hold_locked(void);
void tgs_oversub_watch_start_locked(void); /* at a tracked range: the watcher runs */
void tgs_oversub_hold_wait(void);          /* launch slow path while hold is set */
void tgs_oversub_launch_look(void);        /* launch slow path, managed memory, no hold */
void tgs_oversub_hold_reset(void);         /* in a forked child */
void tgs_oversub_stop(void);               /* at exit: bounded wait for the watcher */

/* ptrmap.c */
void tgs_ptrmap_put(struct tgs_ptrmap *m, uint32_t kind, uint64_t key, uint64_t bytes);
int tgs_ptrmap_take(struct tgs_ptrmap *m, uint32_t kind, uint64_t key, uint64_t *bytes);
int tgs_ptrmap_get(struct tgs_ptrmap *m, uint32_t kind, uint64_t key, uint64_t *bytes);
void tgs_ptrmap_reset(struct tgs_ptrmap *m);

/* graph.c */
void tgs_graph_note(CUgraphExec exec, CUgraph graph);
/* What one launch charges its lane: work units (threads), thread blocks, kernels */
struct tgs_launch_count {
    uint64_t work, blocks, kernels;
};
/* a graph exec's counts, as one launch of it charges them: 0 (and zeros) for an unknown exec */
int tgs_graph_work(CUgraphExec exec, struct tgs_launch_count *out);
void tgs_graph_forget(CUgraphExec exec);

/* tokens.c */
void tgs_throttle(struct tgs_slot *s, struct tgs_lane *lane, uint64_t rate, uint64_t work);
void tgs_inflight_before(struct tgs_slot *s, uint64_t cap, uint64_t work, CUstream stream);
void tgs_inflight_after(struct tgs_slot *s, uint64_t cap, uint64_t work, CUstream stream);
void tgs_inflight_retire_all(void);
void tgs_inflight_poll(void);

/* peers.c: the device list and the production pubs, read-only */
void tgs_peers_reset(void);         /* in a forked child: mappings stay, the table is re-read */
int tgs_peers_refresh(void);        /* slow path: 1 when the device segment is usable */
bool tgs_prod_busy(void);            /* any production job of the device has work queued */
/* predicted end of the current gap: min over production pubs of idle_since_ns +
 * gap_pred_ns; 0 = a production job has no history.  *idle: when the gap began
 * (the latest idle_since_ns). */
uint64_t tgs_prod_gap_end(uint64_t now, uint64_t *idle);
uint64_t tgs_prod_gap_max(void);    /* longest gap in the production rings */
uint64_t tgs_prod_seq(void);        /* gap sequence: sum of the production busy_seq */
uint64_t tgs_prod_gap_last(void);   /* the latest gap in the production rings (trace) */
int tgs_opp_jobs(void);             /* opportunistic jobs the device table lists */
int tgs_prod_present(void);         /* a production job is listed: 1, none: 0, no table: -1 */
uint64_t tgs_gap_owner_claim(uint64_t seq, int *owned); /* gap_claim of the gap's owner */
const uint32_t *tgs_prod_futex(uint32_t *val); /* a busy production pub's idle_futex */

/* sigbus.c: the guard over peers.c's region (install: caller holds peers.mu) */
void tgs_guard_install(void);
void tgs_guard_recheck(void);

/* sync_hooks.c */
bool tgs_gate_on(void);              /* the device segment is usable (warns once if not) */
void tgs_gate_wait(const struct tgs_ctl_header *h);
void tgs_gate_publish_busy(struct tgs_slot *s, CUstream stream);
/* The drain helper saw everything up to launch seq0 complete: idle as a synchronize would
 * (unless a launch raced it); 1 when it published idle. */
int tgs_gate_idle_drained(uint64_t seq0, uint64_t since_ns);
void tgs_gate_idle(void);
void tgs_gate_sleep(uint64_t ns);   /* wakes when production idles */
void tgs_pub_drop_busy(void);       /* a dead slot's busy count goes back (attach.c) */

/* fit.c: the FIT gate; returns 1 when this launch is to be timed (then pass
 * it to tgs_fit_after with the launch's result) */
int tgs_fit_gate(const struct tgs_ctl_header *h, uint64_t work, CUstream stream);
void tgs_fit_after(int sampled, CUresult r, CUstream stream);
void tgs_fit_synced(int all);   /* after a successful synchronize (all: of everything) */
void tgs_fit_reset(void);       /* in a forked child */

/* drain.c */
void tgs_drain_note(CUstream stream, int fresh); /* slow path of a PUBLISH launch */
void tgs_drain_reset(void);     /* in a forked child: no helper thread there */
void tgs_drain_stop(void);      /* at exit: bounded wait for the helper */
void tgs_drain_rec_lock(void);  /* around a capture's begin: no tail record meanwhile */
void tgs_drain_rec_unlock(void);
static inline __attribute__((always_inline)) int tgs_drain_known(CUstream stream)
{
    if (TGS_RELAXED_LOAD(&tgs_g.drain.any))
        return 1;
    int n = TGS_RELAXED_LOAD(&tgs_g.drain.n);
    for (int i = 0; i < n && i < TGS_DRAIN_STREAMS; i++)
        if (TGS_RELAXED_LOAD(&tgs_g.drain.streams[i]) == stream)
            return 1;
    return 0;
}

/* capture.c: nothing of a capture is charged, and the shim's own events stay
 * out of captures and never invalidate one. */
static inline int tgs_capture_any(void) { return TGS_RELAXED_LOAD(&tgs_g.captures) != 0; }
bool tgs_capturing(CUstream stream, int ptsz); /* work on stream is being captured */
/* Around the shim's own event calls: the RELAXED capture mode while any
 * capture is in progress; relax returns what restore needs (-1: nothing). */
int tgs_capture_relax(void);
void tgs_capture_restore(int saved);

/* attach.c: a thread's lane */
struct tgs_lane *tgs_lane_slow(struct tgs_slot *s);

/*
 * The launch fast path: 1 when it handled the launch (pass-through, or an
 * unthrottled process whose counters it bumped: a few relaxed loads and two
 * relaxed load+store pairs on this thread's own lane: no lock, no atomic
 * read-modify-write, no clock, no syscall); 0 when the caller must take
 * tgs_launch_slow_before()/tgs_after_launch() instead.
 *
 * A production process (gate PUBLISH) stays on this path while it is already
 * counted busy in its job's publish page: only its idle->busy transition (the
 * first launch after a synchronize) takes the slow path.  It also notes the
 * launch for the synchronize hooks (which stream, and that a launch happened
 * since the last event record) with plain stores: a lost update between two
 * racing threads can only delay the process being seen idle, never hide a
 * launch that a later record did not cover.
 */
static inline __attribute__((always_inline)) int tgs_launch_fast(uint64_t work, uint64_t blocks,
                                                                 uint64_t kernels,
                                                                 CUstream stream)
{
    /* no calls in here: the hook stays a leaf that tail-jumps to the driver */
    if (TGS_UNLIKELY(!__atomic_load_n(&tgs_g.ready, __ATOMIC_ACQUIRE) || tgs_g.opt.debug_hits))
        return 0;
    int st = __atomic_load_n(&tgs_g.attach_state, __ATOMIC_ACQUIRE);
    if (st != TGS_ATTACH_OK)
        return st == TGS_ATTACH_OFF; /* pass-through, or attach first (slow) */
    const struct tgs_ctl_slot *c = tgs_g.cline;
    struct tgs_lane *lane = tgs_tls.lane;
    uint32_t gate = TGS_RELAXED_LOAD(&tgs_g.ctl->gate_flags);
    if (TGS_UNLIKELY(!lane || tgs_tls.epoch != tgs_g.epoch || tgs_tls.shared ||
                     TGS_RELAXED_LOAD(&c->rate) != TGS_RATE_UNLIMITED ||
                     TGS_RELAXED_LOAD(&c->inflight_cap) || TGS_RELAXED_LOAD(&tgs_g.captures) ||
                     TGS_RELAXED_LOAD(&tgs_g.oversub.hold) ||
                     (gate && (gate != TGS_GATE_PUBLISH ||
                               !TGS_RELAXED_LOAD(&tgs_g.dev_active)))))
        return 0;
    /* a stream not launched on yet in this busy period: the slow path adds it to the
     * drain set (drain.c) */
    CUstream last = stream;
    if (gate) {
        last = TGS_RELAXED_LOAD(&tgs_g.last_stream);
        if (last != stream && !tgs_drain_known(stream))
            return 0;
    }
    TGS_RELAXED_STORE(&lane->launches, TGS_RELAXED_LOAD(&lane->launches) + kernels);
    TGS_RELAXED_STORE(&lane->work, TGS_RELAXED_LOAD(&lane->work) + work);
    TGS_RELAXED_STORE(&lane->blocks, TGS_RELAXED_LOAD(&lane->blocks) + blocks);
    if (gate) {
        TGS_RELAXED_STORE(&tgs_g.launch_seq, TGS_RELAXED_LOAD(&tgs_g.launch_seq) + 1);
        if (last != stream)
            TGS_RELAXED_STORE(&tgs_g.last_stream, stream);
    }
    return 1;
}

/* Everything else a launch may do first: take a lane, wait for tokens, the
 * in-flight cap or the gate, then count (launch_hooks.c). */
int tgs_launch_slow_before(uint64_t work, uint64_t blocks, uint64_t kernels, CUstream stream);

/* Only after a launch that took the slow path: in-flight events, gating;
 * sampled = what tgs_launch_slow_before returned. */
void tgs_after_launch(CUresult r, uint64_t work, CUstream stream, int sampled);

/* helper_thread.c: a detached helper thread with every signal blocked; pthread_create's result */
int tgs_spawn_helper(void *(*fn)(void *), const char *name);
#define TGS_HELPER_STOP_WAIT_NS 200000000ull   /* at exit, a helper gets 200 ms to stop */
void tgs_stop_helper(pthread_mutex_t *mu, pthread_cond_t *cv, const int *owner_pid,
                     int *stop, int *stopped);

#endif /* TGS_SHIM_H */

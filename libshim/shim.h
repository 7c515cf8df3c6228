/*
 * libshim/shim.h: what the shim's subsystems offer each other (the middle
 * layer, libshim/README.md): attach, files, memory, tokens, gating, FIT,
 * drain, oversubscription, NVML, capture, the hook table and the launch fast
 * path.  Built on state.h (the global state); never installed.
 */
#ifndef TGS_SHIM_H
#define TGS_SHIM_H

#include "state.h"

/* init.c: lazy initialization (options, the real driver, the hook table), on the first
 * hooked call */
void tgs_init_slow(void);
static inline void tgs_ensure_init(void)
{
    if (TGS_UNLIKELY(!__atomic_load_n(&tgs_g.ready, __ATOMIC_ACQUIRE)))
        tgs_init_slow();
}

/* options.c.  Reads every TGS_* variable into tgs_g.opt, once (later calls return at once);
 * init does, and so does an NVML hook that must know the job before deciding to initialize. */
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
void tgs_attach_forget(void);  /* in a forked child: no slot, attach anew (lifecycle.c) */
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
void tgs_oversub_reset(void);              /* in a forked child: no ranges, no watcher */
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
/* a production ring's gaps end at random (its longest >= spread x its second shortest):
 * the shortest gap of such rings, 0 where none is */
uint64_t tgs_prod_gaps_spread(uint64_t spread);
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
void tgs_launch_done(void);   /* the driver returned from a launch publish_busy counted */
/* The drain helper saw everything up to launch seq0 complete: idle as a synchronize would
 * (unless a launch raced it); 1 when it published idle. */
int tgs_gate_idle_drained(uint64_t seq0, uint64_t since_ns);
void tgs_gate_idle(void);
int tgs_gate_busy_again(const CUstream *s, int k);   /* the drain helper's watch (drain.c) */
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

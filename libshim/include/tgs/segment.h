/*
 * tgs/segment.h: the shared-memory segment between the controller and the
 * shims of one job.  This header is the single source of truth for both
 * sides: the shim includes it, and intercept/ (Python, cffi) parses the part
 * between the CDEF markers.  Keep that part to what cffi's cdef parser
 * accepts: plain structs of fixed-size integers and chars, and "#define NAME
 * <integer literal>" constants.  No other copy of this layout may exist.
 *
 * One segment per job: a regular file (default under /dev/shm or the
 * controller's segment directory, bind-mountable into a container) of
 * exactly header.total_size bytes, mapped MAP_SHARED by the controller and by
 * every process of the job.  docs/segment.md describes it for humans.
 *
 * Concurrency rules (who writes what):
 *   - header identity fields: written once by the creator (the controller or
 *     intercept.segment.create), before the file is renamed into place;
 *   - header "control" fields and each slot's "control" line: written by the
 *     controller only, as aligned 64-bit stores; the shim reads them with
 *     relaxed loads and must tolerate any value changing at any time;
 *   - the memory ledger (header.mem_used, ledger_dirty, each slot's mem_used):
 *     changed only while holding the LEDGER LOCK;
 *   - a slot's identity/status lines and lanes: written only by the process
 *     that owns the slot (lanes: one writer thread per lane, except the last
 *     lane, which overflow threads share with atomic adds).
 *
 * Locks are Linux open-file-description locks (fcntl F_OFD_SETLK/SETLKW/
 * GETLK, l_whence=SEEK_SET, l_len=1) on the segment file, so the kernel
 * releases them when the owner dies, even by SIGKILL, and they work across
 * PID namespaces (containers): liveness never depends on PIDs.
 *   - byte TGS_SEG_LOCK_LEDGER: the ledger lock (write lock, held briefly);
 *   - byte TGS_SEG_LOCK_SLOT_BASE + i: held (write lock) for as long as the
 *     owner of slot i lives.  A slot whose state is ACTIVE while nobody holds
 *     its lock belongs to a dead process.
 *
 * Claiming a slot (shim): for i in 0..nslots-1, try F_OFD_SETLK on slot i's
 * byte; on success, if state != FREE the previous owner died: reclaim it
 * (below) first; then fill identity, set state = ACTIVE (release store).
 * Reclaiming slot i (shim or controller, holding slot i's lock): take the
 * ledger lock, header.mem_used -= slot.mem_used, slot.mem_used = 0, add the
 * slot's lane sums to header.retired_*, release the ledger lock, zero the
 * slot's status line and lanes, state = FREE.  (Readers of job totals read
 * retired_* before the slots, so a concurrent reclaim can only make a total
 * look briefly low, never double-counted.)
 *
 * Ledger updates: take the ledger lock; set ledger_dirty = 1; update
 * slot.mem_used then header.mem_used; set ledger_dirty = 0; release.  A
 * taker that finds ledger_dirty == 1 (the previous holder died mid-update)
 * recomputes header.mem_used as the sum of slot.mem_used over all slots.
 * Admission: an allocation of n bytes is admitted only if
 * header.mem_used + n <= header.mem_quota, checked and recorded under the
 * lock before the real driver is called (and undone if the driver fails), so
 * concurrent processes can never admit more than the quota together.
 */
#ifndef TGS_SEGMENT_H
#define TGS_SEGMENT_H

#include <stdint.h>

/* CDEF-BEGIN */
#define TGS_SEG_MAGIC 0x3147534D53474754
#define TGS_SEG_VERSION 1
#define TGS_SEG_MAX_SLOTS 128
#define TGS_SEG_LANES 16
#define TGS_SEG_NAME_MAX 64
#define TGS_SEG_UUID_MAX 48

#define TGS_SEG_LOCK_LEDGER 0
#define TGS_SEG_LOCK_SLOT_BASE 64

/* Compute rates are in work units per second; one work unit is one GPU
 * thread launched (grid blocks x threads per block).  TGS_RATE_UNLIMITED
 * means "never throttle": the launch path then only bumps its lane. */
#define TGS_RATE_UNLIMITED 0xFFFFFFFFFFFFFFFF
#define TGS_QUOTA_UNLIMITED 0xFFFFFFFFFFFFFFFF

#define TGS_SLOT_FREE 0
#define TGS_SLOT_ACTIVE 1

#define TGS_PRIORITY_PRODUCTION 0
#define TGS_PRIORITY_OPPORTUNISTIC 1

/* header.gate_flags: fine-grained coordination through the device segment.
 * PUBLISH: this (production) job's processes count themselves in
 *   prod_active from their first launch after a synchronize until the next
 *   synchronize returns (the GPU has work of theirs queued or running).
 *   At the device-wide transitions it also keeps the gap history below.
 * WAIT: this (opportunistic) job's launches wait (sleeping, at most
 *   gate_max_wait_us) while prod_active > 0, so its work lands in the idle
 *   gaps that production leaves.
 * FIT (with WAIT): a launch goes only when production is idle AND the
 *   process's own queued work plus this kernel (its measured GPU time per
 *   work unit) ends before idle_since_ns + gap_pred_ns.  Without gap history
 *   it is plain WAIT; a launch that does not fit waits for a later gap, at
 *   most gate_max_wait_us in all (docs/segment.md, "Gating"). */
#define TGS_GATE_PUBLISH 1
#define TGS_GATE_WAIT 2
#define TGS_GATE_FIT 4
#define TGS_GAP_RING 4

#define TGS_GAP_CLAIM_GRACE_NS 150000

#define TGS_DEV_MAGIC 0x3156454453474754
#define TGS_DEV_VERSION 1

/* One lane = one cache line, written by one thread of the owning process. */
struct tgs_lane {
    uint64_t launches;      /* kernel launches (a graph launch counts its kernel nodes) */
    uint64_t work;          /* work units launched */
    uint64_t throttled_ns;  /* time spent waiting for tokens */
    uint64_t throttled;     /* launches that had to wait */
    uint64_t pad[4];
};

struct tgs_slot {
    /* identity: written by the owner when it claims the slot */
    uint32_t state;         /* TGS_SLOT_FREE / TGS_SLOT_ACTIVE */
    int32_t pid;            /* pid in the owner's own PID namespace (informational only) */
    uint64_t generation;    /* incremented at each claim */
    uint64_t claimed_ns;    /* CLOCK_MONOTONIC at claim */
    uint32_t lanes_used;    /* lanes handed out so far (owner-internal counter) */
    uint32_t pad0;
    char comm[32];          /* process name, NUL-terminated */

    /* control: written by the controller only */
    uint64_t rate;          /* work units per second, or TGS_RATE_UNLIMITED */
    uint64_t burst;         /* bucket depth in work units */
    uint64_t inflight_cap;  /* max work launched-but-not-complete; 0 = no cap */
    uint64_t control_seq;   /* bumped by the controller on every change */
    uint64_t gap_mask;      /* FIT gate: production gaps this process may open, bit
                             * (busy_seq % 64); 0 = any.  Several opportunistic jobs get
                             * disjoint masks in proportion to their weights; a gap whose
                             * owner launched nothing within TGS_GAP_CLAIM_GRACE_NS of its
                             * start is open to all (work conserving) */
    uint64_t pad1[3];

    /* status: written by the owner */
    uint64_t heartbeat_ns;  /* CLOCK_MONOTONIC, refreshed on slow paths and by the shim's timer */
    uint64_t mem_used;      /* bytes admitted for this process (under the ledger lock) */
    uint64_t inflight_work; /* work units launched and not known complete */
    uint64_t oom_count;     /* allocations refused for the quota */
    uint64_t alloc_count;   /* allocations admitted */
    uint32_t dev_active;    /* 1 while this process counts in the device segment's prod_active */
    uint32_t pad2a;
    uint64_t pad2[2];

    struct tgs_lane lanes[16];
};

struct tgs_seg_header {
    /* identity: written once by the creator */
    uint64_t magic;         /* TGS_SEG_MAGIC */
    uint32_t version;       /* TGS_SEG_VERSION */
    uint32_t header_size;   /* sizeof(struct tgs_seg_header) */
    uint64_t total_size;    /* header_size + nslots * slot_size */
    uint32_t slot_size;     /* sizeof(struct tgs_slot) */
    uint32_t nslots;        /* <= TGS_SEG_MAX_SLOTS */
    uint32_t lanes;         /* TGS_SEG_LANES */
    int32_t device_index;   /* device ordinal the job is bound to */
    uint64_t created_ns;    /* CLOCK_REALTIME at creation */
    char job_name[64];
    char device_uuid[48];
    uint64_t pad0[4];

    /* control: written by the controller only */
    uint64_t mem_quota;     /* bytes for the whole job, or TGS_QUOTA_UNLIMITED */
    uint64_t default_rate;  /* rate for a newly claimed slot */
    uint64_t default_burst;
    uint64_t default_inflight_cap;
    uint32_t priority;      /* TGS_PRIORITY_* */
    uint32_t weight;
    uint64_t controller_heartbeat_ns;
    uint64_t control_seq;
    uint32_t gate_flags;    /* TGS_GATE_* */
    uint32_t gate_max_wait_us; /* an opportunistic launch waits at most this long for production to go idle */

    /* memory ledger: under the ledger lock */
    uint64_t mem_used;      /* bytes admitted for the whole job */
    uint64_t mem_peak;
    uint32_t ledger_dirty;
    uint32_t pad2;
    /* lane totals of reclaimed slots, folded in under the ledger lock by
     * whoever reclaims a slot: job totals = retired + live slots' lanes */
    uint64_t retired_launches;
    uint64_t retired_work;
    uint64_t retired_throttled_ns;
    uint64_t pad3[2];
};

/* The device segment: one small file per GPU, named "device-<index>.seg" in
 * the same directory as the job segments (so one bind mount carries both),
 * created by the controller.  Shims map it MAP_SHARED; a missing or invalid
 * device segment only disables gating (never an error for the job). */
struct tgs_dev_segment {
    uint64_t magic;         /* TGS_DEV_MAGIC */
    uint32_t version;       /* TGS_DEV_VERSION */
    uint32_t size;          /* sizeof(struct tgs_dev_segment) */
    int32_t device_index;
    uint32_t pad0;
    /* gap history, written by the production shim whose launch takes
     * prod_active 0 -> 1: the last TGS_GAP_RING idle gaps (ns, 0 = empty),
     * gap_idx = entries written so far (next one: gap_idx % TGS_GAP_RING) */
    uint64_t gap_ns[4];
    uint64_t gap_idx;
    /* changed with atomic add/sub by production shims on idle<->busy
     * transitions only; read with relaxed loads by opportunistic shims;
     * re-computed by the controller from live slots' dev_active */
    uint64_t prod_active;
    /* production's device-wide transitions (never on the per-launch path):
     * idle_since_ns: CLOCK_MONOTONIC when prod_active last went 1 -> 0
     *   (stored just before that change; 0 = never);
     * busy_seq: number of 0 -> 1 transitions (a new busy phase, so the gap
     *   after it is a new gap);
     * gap_pred_ns: conservative length of the next gap = min(gap_ns) less
     *   2 % and 50 us, at least 1; 0 = no history yet */
    uint64_t idle_since_ns;
    uint64_t busy_seq;
    uint64_t gap_pred_ns;
    /* wake-up of waiting opportunistic shims: idle_futex is incremented on
     * every 1 -> 0 transition of prod_active, and the production shim then
     * calls FUTEX_WAKE (shared, not private) on it if waiters > 0; a waiter
     * reads idle_futex, then prod_active, then FUTEX_WAITs on the value it
     * read, with a timeout (so nothing is lost if a waiter died counted) */
    uint32_t idle_futex;
    uint32_t waiters;
    /* busy_seq + 1 of the last gap an opportunistic launch went into under
     * FIT (0 = none): a gap owned by a process that has not claimed it is
     * open to others after the grace time */
    uint64_t gap_claim;
    uint64_t pad2[2];
};
/* CDEF-END */

#ifndef __cplusplus
_Static_assert(sizeof(struct tgs_lane) == 64, "lane is one cache line");
_Static_assert(sizeof(struct tgs_slot) % 64 == 0, "slot is whole cache lines");
_Static_assert(sizeof(struct tgs_seg_header) == 320, "header layout");
_Static_assert(sizeof(struct tgs_slot) == 1216, "slot layout");
_Static_assert(sizeof(struct tgs_dev_segment) == 128, "device segment layout");
_Static_assert(__builtin_offsetof(struct tgs_dev_segment, prod_active) == 64,
               "what opportunistic shims poll starts the second cache line");
#endif

#endif /* TGS_SEGMENT_H */

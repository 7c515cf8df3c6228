/*
 * tgs/segment.h: the shared files between the controller and the shims.
 * This header is the single source of truth for both sides: the shim
 * includes it, and intercept/ (Python, cffi) parses the part between the
 * CDEF markers.  Keep that part to what cffi's cdef parser accepts: plain
 * structs of fixed-size integers and chars, and "#define NAME <integer
 * literal>" constants.  No other copy of these layouts may exist.
 * docs/segment.md describes them for humans.
 *
 * The rule: a tenant can harm only itself.  Every file is either
 *   CONTROLLER-OWNED: created and written by the controller (which may map
 *     it); every tenant gets it read-only (read-only bind mount, O_RDONLY,
 *     PROT_READ): the job's control segment <job>.ctl and the device
 *     segment device-<i>.seg;
 *   TENANT-OWNED: written by the processes of ONE job: the job segment
 *     <job>.seg and the publish page pub/<job>.pub.  The controller only
 *     pread()s them into a buffer (never maps them, never takes a blocking
 *     lock on them) and validates and clamps every value; other tenants map
 *     a pub read-only, behind a SIGBUS guard (its owner may truncate it).
 *
 * Per job, in the controller's segment directory:
 *   <job>.ctl: struct tgs_ctl_header + nslots x struct tgs_ctl_slot
 *     (identity, job control, one control line per slot).  The controller
 *     writes control fields as aligned 64-bit stores; the shim reads them
 *     with relaxed loads from a PROT_READ mapping and tolerates any value
 *     changing at any time.  The controller keeps every slot's line equal to
 *     the job defaults (plus the per-slot gap_mask), so a freshly claimed
 *     slot is controlled at once.
 *   <job>.seg: struct tgs_seg_header + nslots x struct tgs_slot (identity
 *     copy, the memory ledger, the process slots).  Written by the job's
 *     shims only.
 *   pub/<job>.pub: struct tgs_pub, created by the controller (identity),
 *     then written by the job's shims only: production's busy count and gap
 *     history, an opportunistic job's gap claim.
 * Per device: device-<i>.seg: struct tgs_dev_segment, the jobs on the
 *   device (pub name, priority, gap mask); rewritten by the controller under
 *   a sequence lock (list_seq odd while it writes).
 *
 * Liveness: Linux open-file-description locks (fcntl F_OFD_SETLK/GETLK,
 * l_whence=SEEK_SET, l_len=1) on the .seg file: byte TGS_SEG_LOCK_SLOT_BASE
 * + i is held (write lock) for as long as the owner of slot i lives; the
 * kernel drops it when the owner dies, even by SIGKILL, across PID
 * namespaces.  A slot whose state is ACTIVE while nobody holds its lock
 * belongs to a dead process.  The controller only tests locks (F_OFD_GETLK,
 * which never blocks).
 *
 * The ledger lock is a word in the .seg header, no syscall:
 * CAS 0 -> owner id (TGS_LEDGER_OWNER(slot index, slot generation)),
 * released with a store of 0.  Threads of one process also hold a process
 * mutex around it (they share the owner id).  A waiter that has waited more
 * than TGS_LEDGER_STEAL_NS checks the owner: slot index out of range, slot
 * lock free (F_OFD_GETLK) or slot generation changed = dead; it then steals
 * the word with CAS and repairs (ledger_dirty below).  A process never steals
 * from itself.
 *
 * Claiming a slot (shim): for i in 0..nslots-1, try F_OFD_SETLK on slot i's
 * byte; a slot taken this way that is not FREE belonged to a dead process:
 * reclaim it.  At attach the shim also reclaims EVERY other dead slot it can
 * lock (the controller never does).  Reclaiming slot i (holding slot
 * i's lock): take the ledger lock, header.mem_used -= slot.mem_used,
 * slot.mem_used = 0, add the slot's lane sums to header.retired_*, release
 * it; a slot that counted busy (dev_active) gives its count back to the
 * job's pub; zero the status and lanes, state = FREE.
 *
 * Ledger updates: take the ledger lock; set ledger_dirty = 1; update
 * slot.mem_used then header.mem_used; set ledger_dirty = 0; release.  A
 * taker that finds ledger_dirty == 1 (the previous holder died mid-update)
 * recomputes header.mem_used as the sum of slot.mem_used over all slots.
 * Admission: an allocation of n bytes is admitted only if
 * header.mem_used + n <= ctl.mem_quota, checked and recorded under the lock
 * before the real driver is called (and undone if the driver fails), so
 * concurrent processes can never admit more than the quota together.
 */
#ifndef TGS_SEGMENT_H
#define TGS_SEGMENT_H

#include <stdint.h>

/* CDEF-BEGIN */
#define TGS_SEG_MAGIC 0x3147534D53474754
#define TGS_CTL_MAGIC 0x314C544353474754
#define TGS_PUB_MAGIC 0x3142555053474754
#define TGS_SEG_VERSION 2
#define TGS_SEG_MAX_SLOTS 128
#define TGS_SEG_LANES 16
#define TGS_SEG_NAME_MAX 64
#define TGS_SEG_UUID_MAX 48

#define TGS_SEG_LOCK_SLOT_BASE 64

/* Ledger lock word: owner = (slot index + 1) << 48 | (generation & 2^48-1) */
#define TGS_LEDGER_SLOT_SHIFT 48
#define TGS_LEDGER_GEN_MASK 0xFFFFFFFFFFFF
#define TGS_LEDGER_STEAL_NS 100000

/* Compute rates are in work units per second; one work unit is one GPU
 * thread launched (grid blocks x threads per block).  TGS_RATE_UNLIMITED
 * means "never throttle": the launch path then only bumps its lane. */
#define TGS_RATE_UNLIMITED 0xFFFFFFFFFFFFFFFF
#define TGS_QUOTA_UNLIMITED 0xFFFFFFFFFFFFFFFF

#define TGS_SLOT_FREE 0
#define TGS_SLOT_ACTIVE 1

#define TGS_PRIORITY_PRODUCTION 0
#define TGS_PRIORITY_OPPORTUNISTIC 1

/* ctl.gate_flags: coordination through the publish pages.
 * PUBLISH: this (production) job's processes count themselves in their own
 *   pub's busy count from their first launch after a synchronize until the
 *   next synchronize returns (the GPU has work of theirs queued or running),
 *   and keep the job's gap history there at the job-wide transitions.
 * WAIT: this (opportunistic) job's launches wait (sleeping, at most
 *   gate_max_wait_us) while any production pub on the device is busy, so its
 *   work lands in the idle gaps that production leaves.
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

/* The gate's policy values, in the .ctl (tgs_ctl_header): the controller writes its policy's,
 * the shim obeys them.  0 (a .ctl written before these fields) or a value out of range means
 * the default here, which is also what applies without a .ctl.
 * INTERFERENCE_PPM: production's interference target, parts per million of its time: what
 *   its opportunistic neighbours' overruns may cost it (the FIT overrun budget's allowance,
 *   split among them; the adaptive policy's probes judge against it too);
 * WAIT_STEP_NS: a WAIT launch sleeps this long at most on a busy production pub's futex
 *   before it looks again (the wake comes at once: the step only bounds a missed one and
 *   the max wait's overshoot);
 * FIT_STEP_NS: a FIT launch that does not fit asks again this often, and a gap younger than
 *   two steps is at its start. */
#define TGS_INTERFERENCE_PPM 30000
#define TGS_INTERFERENCE_PPM_MAX 1000000
#define TGS_WAIT_STEP_NS 75000
#define TGS_FIT_STEP_NS 60000
#define TGS_STEP_NS_MIN 1000
#define TGS_STEP_NS_MAX 10000000

/* Devices: every device index (a node's GPU ordinal, a job's device) is below
 * TGS_MAX_DEVICES; a job spans at most TGS_JOB_MAX_DEVICES of them (one part each). */
#define TGS_MAX_DEVICES 64
#define TGS_JOB_MAX_DEVICES 16

#define TGS_DEV_MAGIC 0x3156454453474754
#define TGS_DEV_VERSION 2
#define TGS_DEV_MAX_JOBS 16
#define TGS_DEV_JOB_USED 1

/* Identity: written once by the creator (the controller); the .seg carries a
 * copy of the .ctl's, which the shim checks (job_name, nslots, created_ns). */
struct tgs_ident {
    uint64_t magic;         /* TGS_CTL_MAGIC / TGS_SEG_MAGIC */
    uint32_t version;       /* TGS_SEG_VERSION */
    uint32_t header_size;   /* sizeof(the file's header struct) */
    uint64_t total_size;    /* header_size + nslots * slot_size */
    uint32_t slot_size;     /* sizeof(the file's slot struct) */
    uint32_t nslots;        /* <= TGS_SEG_MAX_SLOTS */
    uint32_t lanes;         /* TGS_SEG_LANES */
    int32_t device_index;   /* device ordinal the job is bound to */
    uint64_t created_ns;    /* CLOCK_REALTIME at creation */
    char job_name[64];
    char device_uuid[48];
};

/* One control line per slot, in the .ctl: written by the controller only. */
struct tgs_ctl_slot {
    uint64_t rate;          /* work units per second, or TGS_RATE_UNLIMITED */
    uint64_t burst;         /* bucket depth in work units */
    uint64_t inflight_cap;  /* max work launched-but-not-complete; 0 = no cap */
    uint64_t control_seq;   /* bumped by the controller on every change */
    uint64_t gap_mask;      /* FIT gate: production gaps this process may open, bit
                             * (gap sequence % 64); 0 = any.  Several opportunistic jobs
                             * get disjoint masks in proportion to their weights; a gap
                             * whose owner launched nothing within TGS_GAP_CLAIM_GRACE_NS
                             * of its start is open to all (work conserving) */
    uint64_t pad[3];
};

struct tgs_ctl_header {
    struct tgs_ident id;    /* magic TGS_CTL_MAGIC, slot_size = sizeof(struct tgs_ctl_slot) */
    uint64_t mem_quota;     /* bytes for the whole job, or TGS_QUOTA_UNLIMITED */
    uint64_t default_rate;  /* the control every slot's line starts from */
    uint64_t default_burst;
    uint64_t default_inflight_cap;
    uint32_t priority;      /* TGS_PRIORITY_* */
    uint32_t weight;
    uint64_t controller_heartbeat_ns;
    uint64_t control_seq;
    uint32_t gate_flags;    /* TGS_GATE_* */
    uint32_t gate_max_wait_us; /* an opportunistic launch waits at most this long for production to go idle */
    uint64_t mem_total;     /* oversubscription (docs/oversubscription.md): 0 = off; else an
                             * OPPORTUNISTIC job's device allocations become managed memory,
                             * admitted against mem_total (what it may hold in all) instead of
                             * mem_quota; allocations past mem_quota (what it may keep resident)
                             * are advised to prefer the host.  Ignored for production jobs. */
    uint64_t host_pinned_max; /* page-locked host memory the job may hold (cuMemAllocHost,
                             * cuMemHostAlloc, cuMemHostRegister; seg header pinned_used);
                             * 0 = no limit. */
    uint32_t interference_ppm; /* the gate's policy values (TGS_INTERFERENCE_PPM, */
    uint32_t wait_step_ns;     /* TGS_WAIT_STEP_NS, TGS_FIT_STEP_NS above; 0 = the default). */
    uint32_t fit_step_ns;
    uint32_t pad1;
};

/* One lane = one cache line, written by one thread of the owning process. */
struct tgs_lane {
    uint64_t launches;      /* kernel launches (a graph launch counts its kernel nodes) */
    uint64_t work;          /* work units launched */
    uint64_t throttled_ns;  /* time spent waiting for tokens */
    uint64_t throttled;     /* launches that had to wait */
    uint64_t blocks;        /* thread blocks launched (gridX x gridY x gridZ per kernel; a
                             * graph launch counts its kernel nodes' grids): TGS's own unit */
    uint64_t pad[3];
};

/* One process, in the .seg: written by its owner (mem_used under the ledger lock). */
struct tgs_slot {
    uint32_t state;         /* TGS_SLOT_FREE / TGS_SLOT_ACTIVE */
    int32_t pid;            /* pid in the owner's own PID namespace (informational only) */
    uint64_t generation;    /* incremented at each claim */
    uint64_t claimed_ns;    /* CLOCK_MONOTONIC at claim */
    uint32_t lanes_used;    /* lanes handed out so far (owner-internal counter) */
    uint32_t pad0;
    char comm[32];          /* process name, NUL-terminated */

    uint64_t heartbeat_ns;  /* CLOCK_MONOTONIC, refreshed on slow paths */
    uint64_t mem_used;      /* bytes admitted for this process (under the ledger lock) */
    uint64_t inflight_work; /* work units launched and not known complete */
    uint64_t oom_count;     /* allocations refused for the quota */
    uint64_t alloc_count;   /* allocations admitted */
    uint32_t dev_active;    /* 1 while this process counts in its job pub's busy count */
    uint32_t pad2a;
    uint64_t pinned_used;   /* page-locked host bytes of this process (under the ledger
                             * lock) */
    uint64_t pad2[1];

    struct tgs_lane lanes[16];
};

struct tgs_seg_header {
    struct tgs_ident id;    /* magic TGS_SEG_MAGIC, slot_size = sizeof(struct tgs_slot) */
    /* memory ledger: under the ledger lock */
    uint64_t ledger_lock;   /* 0 = free, else the holder's TGS_LEDGER owner id */
    uint64_t mem_used;      /* bytes admitted for the whole job */
    uint64_t mem_peak;
    uint32_t ledger_dirty;
    uint32_t pad1;
    /* lane totals of reclaimed slots, folded in under the ledger lock by
     * whoever reclaims a slot: job totals = retired + live slots' lanes */
    uint64_t retired_launches;
    uint64_t retired_work;
    uint64_t retired_throttled_ns;
    uint64_t retired_blocks;
    uint64_t pinned_used;   /* page-locked host bytes of the job, against the .ctl's
                             * host_pinned_max (under the ledger lock) */
    uint64_t pad[3];
};

/* A job's publish page: read by the other tenants' shims (read-only) and by
 * the controller (pread).  Identity by the controller at creation; the rest
 * by the job's own shims. */
struct tgs_pub {
    uint64_t magic;         /* TGS_PUB_MAGIC */
    uint32_t version;       /* TGS_SEG_VERSION */
    uint32_t size;          /* sizeof(struct tgs_pub) */
    char job_name[64];
    uint64_t pad0[6];
    /* production (PUBLISH), second cache line: what opportunistic shims poll.
     * busy: this job's processes with work queued (atomic add/sub on the
     *   idle<->busy transitions of each process);
     * idle_since_ns: CLOCK_MONOTONIC when busy last went 1 -> 0 (stored just
     *   before that change; 0 = never);
     * busy_seq: number of 0 -> 1 transitions (a new busy phase);
     * gap_pred_ns: conservative length of the next gap = min(gap_ns) less
     *   2 % and 50 us, at least 1; 0 = no history yet;
     * idle_futex: incremented on every 1 -> 0 transition of busy, after
     *   which the shim calls FUTEX_WAKE (shared) on it unconditionally;
     * gap_claim (opportunistic jobs): gap sequence + 1 of the last gap a
     *   launch of this job went into under FIT (0 = none). */
    uint64_t busy;
    uint64_t idle_since_ns;
    uint64_t busy_seq;
    uint64_t gap_pred_ns;
    uint32_t idle_futex;
    uint32_t pad1;
    uint64_t gap_claim;
    uint64_t pad2[2];
    /* gap history, third cache line: the last TGS_GAP_RING idle gaps (ns,
     * 0 = empty), gap_idx = entries written so far */
    uint64_t gap_ns[4];
    uint64_t gap_idx;
    uint64_t pad3[3];
};

/* One job on a device, in the device segment (controller-written). */
struct tgs_dev_job {
    char name[64];          /* job name: its pub is <pub dir>/<name>.pub */
    uint64_t generation;    /* changes when the job (and its pub file) is re-created */
    uint64_t gap_mask;      /* opportunistic: union of its slots' gap masks */
    uint64_t busy_bias;     /* production: busy counts left by processes that died busy
                             * (seen by the controller); busy means pub.busy > busy_bias */
    uint32_t priority;      /* TGS_PRIORITY_* */
    uint32_t flags;         /* TGS_DEV_JOB_USED */
};

/* The device segment: one file per GPU, "device-<index>.seg" next to the
 * job segments (TGS_DEV_SEG_NAME below), created and written by the
 * controller only; shims map it PROT_READ.  A missing or invalid device
 * segment only disables gating. */
struct tgs_dev_segment {
    uint64_t magic;         /* TGS_DEV_MAGIC */
    uint32_t version;       /* TGS_DEV_VERSION */
    uint32_t size;          /* sizeof(struct tgs_dev_segment) */
    int32_t device_index;
    uint32_t njobs;         /* entries in use: jobs[0 .. njobs-1] (<= TGS_DEV_MAX_JOBS) */
    uint64_t list_seq;      /* odd while the controller rewrites jobs[]; bumped on every change */
    uint64_t pad0[4];
    struct tgs_dev_job jobs[16];
};
/* CDEF-END */

/* The device segment's file name, a printf format of the device index (Python:
 * tgs.intercept.devseg.device_segment_name; tests check they agree). */
#define TGS_DEV_SEG_NAME "device-%d.seg"

#ifndef __cplusplus
_Static_assert(sizeof(struct tgs_ident) == 160, "identity layout");
_Static_assert(sizeof(struct tgs_ctl_slot) == 64, "a control line is one cache line");
_Static_assert(sizeof(struct tgs_ctl_header) == 256, "ctl header layout");
_Static_assert(__builtin_offsetof(struct tgs_ctl_header, interference_ppm) ==
                   __builtin_offsetof(struct tgs_ctl_header, host_pinned_max) + 8,
               "the policy values took the header's last padding");
_Static_assert(sizeof(struct tgs_lane) == 64, "lane is one cache line");
_Static_assert(__builtin_offsetof(struct tgs_lane, blocks) == 32, "blocks took pad[0]");
_Static_assert(__builtin_offsetof(struct tgs_seg_header, retired_blocks) ==
                   __builtin_offsetof(struct tgs_seg_header, retired_throttled_ns) + 8,
               "retired_blocks took pad[0]");
_Static_assert(sizeof(struct tgs_slot) % 64 == 0, "slot is whole cache lines");
_Static_assert(sizeof(struct tgs_slot) == 1152, "slot layout");
_Static_assert(sizeof(struct tgs_seg_header) == 256, "seg header layout");
_Static_assert(sizeof(struct tgs_pub) == 256, "pub layout");
_Static_assert(__builtin_offsetof(struct tgs_pub, busy) == 128,
               "what opportunistic shims poll starts its own cache line");
_Static_assert(sizeof(struct tgs_dev_job) == 96, "device job entry layout");
_Static_assert(sizeof(struct tgs_dev_segment) == 64 + 16 * 96, "device segment layout");
_Static_assert(sizeof(((struct tgs_slot *)0)->lanes) / sizeof(struct tgs_lane) == TGS_SEG_LANES,
               "lanes[] matches TGS_SEG_LANES");
_Static_assert(sizeof(((struct tgs_dev_segment *)0)->jobs) / sizeof(struct tgs_dev_job) ==
                   TGS_DEV_MAX_JOBS, "jobs[] matches TGS_DEV_MAX_JOBS");
_Static_assert(sizeof(((struct tgs_pub *)0)->gap_ns) / sizeof(uint64_t) == TGS_GAP_RING,
               "gap_ns[] matches TGS_GAP_RING");
_Static_assert(sizeof(((struct tgs_ident *)0)->job_name) == TGS_SEG_NAME_MAX, "name size");
_Static_assert(sizeof(((struct tgs_ident *)0)->device_uuid) == TGS_SEG_UUID_MAX, "uuid size");
_Static_assert(sizeof(((struct tgs_pub *)0)->job_name) == TGS_SEG_NAME_MAX, "pub name size");
_Static_assert(sizeof(((struct tgs_dev_job *)0)->name) == TGS_SEG_NAME_MAX, "table name size");
_Static_assert(TGS_SEG_LOCK_SLOT_BASE + TGS_SEG_MAX_SLOTS <= sizeof(struct tgs_seg_header) +
                   sizeof(struct tgs_slot), "slot lock bytes lie inside any valid .seg");
#endif

#endif /* TGS_SEGMENT_H */

/*
 * sim.h: private declarations shared by the simulator's source files.
 * Everything here is hidden: only the CUDA entry points are exported.
 */
#ifndef TGS_SIM_H
#define TGS_SIM_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "tgs/cuda_abi.h"
#include "image.h"
#include "tgs/log_level.h"
#include "tgs/sim_state.h"

#pragma GCC visibility push(hidden)

#define SIM_MAX_STACK 16 /* per-thread context stack depth */
#define SIM_PT_STREAMS 8 /* contexts whose per-thread default stream a thread captures */

enum sim_kind {
    SIM_K_CTX = 0x43545831,
    SIM_K_STREAM,
    SIM_K_EVENT,
    SIM_K_MODULE,
    SIM_K_FUNC,
    SIM_K_GRAPH,
    SIM_K_NODE,
    SIM_K_EXEC,
    SIM_K_ARRAY,
    SIM_K_MIPMAP,
    SIM_K_POOL,
    SIM_K_VMM,
    SIM_K_LIB,
    SIM_K_KERNEL,
    SIM_K_LINK,
    SIM_K_USER_OBJECT,
};

/* Every handle the simulator gives out starts with this header. */
struct sim_obj {
    uint32_t kind;
};

struct CUctx_st {
    struct sim_obj obj;
    int dev;
    int slot;      /* shared context slot */
    int primary;   /* 1 for a device's primary context */
    unsigned int flags;
    unsigned int peers;   /* devices whose contexts' memory it may access (bits) */
    uint64_t next_marker; /* event markers issued (this process owns the slot) */
    struct sim_cls *cls;  /* context-local storage (export_cls.c), under g_sim.lock */
    /* timing events recorded here whose times are not cached (event_times.c) */
    struct CUevent_st *pend_head, *pend_tail;
};

struct CUstream_st {
    struct sim_obj obj;
    struct CUctx_st *ctx;
    unsigned int flags;
    int priority;
    uint64_t last_seq; /* items [.., last_seq) were issued on this stream */
    /* stream capture (capture.c, under g_sim.cap_lock) */
    struct sim_capture *cap;   /* the capture sequence this stream is part of, or NULL */
    CUgraphNode *deps;         /* the next captured node depends on these */
    CUgraphEdgeData *edges;    /* zeroed edge data parallel to deps */
    size_t ndeps, deps_cap;
    unsigned int attrs_set;          /* stream_attr.c: attributes set (bits) */
    CUlaunchAttributeValue attrs[16];
};

struct CUevent_st {
    struct sim_obj obj;
    struct CUctx_st *ctx;
    unsigned int flags;
    int recorded;
    int slot;
    uint32_t gen;
    uint64_t seq;     /* done when the context's head >= seq */
    uint64_t marker;  /* marker id, for the completion time */
    uint64_t t_ns;    /* cached completion time, 0 unknown */
    struct CUctx_st *pend_ctx; /* the context whose pending list holds it (event_times.c) */
    struct CUevent_st *pend_prev, *pend_next;
    /* last recorded in a capturing stream (capture.c, under g_sim.cap_lock) */
    int captured;
    uint64_t cap_id;           /* that capture sequence's id */
    CUgraphNode *cap_deps;     /* the stream's dependency set at the record */
    size_t ncap_deps;
};

struct sim_span {
    uint64_t base;
    uint64_t size;
};

/* A module: one image loaded into one context.  Its globals are device
 * memory of the symbol's size, allocated at load (gaddr[i] for syms[i]). */
struct CUmod_st {
    struct sim_obj obj;
    struct CUctx_st *ctx;
    struct CUlib_st *lib; /* the library that made it, or NULL */
    struct sim_image img;
    CUdeviceptr *gaddr;
    struct CUfunc_st **funcs;
    size_t nfuncs;
};

#define SIM_FUNC_NATTR 16 /* CU_FUNC_ATTRIBUTE_MAX */

struct CUfunc_st {
    struct sim_obj obj;
    struct CUmod_st *mod;
    double factor;
    int loaded; /* launched once: lazy loading's cost paid (TGS_SIM_LAZY_LOAD_US) */
    int attr_set[SIM_FUNC_NATTR]; /* 1 where cuFuncSetAttribute set attr[] */
    int attr[SIM_FUNC_NATTR];
    int cache_config;
    char name[];
};

/* A library: an image with no context; a module per context on demand. */
struct CUlib_st {
    struct sim_obj obj;
    struct sim_image img;
    void *code;      /* a copy of the image, for each context's module */
    size_t code_size;
    struct CUmod_st **mods;
    size_t nmods;
    struct CUkern_st **kerns;
    size_t nkerns;
};

struct CUkern_st {
    struct sim_obj obj;
    struct CUlib_st *lib;
    int attr_set[SIM_FUNC_NATTR];
    int attr[SIM_FUNC_NATTR];
    int cache_config;
    char name[];
};

/* A memory pool (mempool.c): a default and a current one per device. */
struct CUmemPoolHandle_st {
    struct sim_obj obj;
    int dev;
    int is_default;
    int reuse[3];               /* CU_MEMPOOL_ATTR_REUSE_* */
    uint64_t release_threshold;
    uint64_t used, used_high;   /* bytes allocated from it now, at most */
    unsigned int access;        /* CUmemAccess_flags for the device */
};

/* TGS_SIM_TRACE lines one device's lock holder produced, written once it lets go (trace.c). */
struct sim_trace_buf {
    size_t len;
    char data[8192];
};

/* Process-wide state of the simulator: the one mutable global. */
struct sim_globals {
    pthread_mutex_t lock; /* guards the process-local tables below */
    int initialized;
    int fd;
    int proc_slot;
    struct sim_state *st;
    size_t map_size;
    /* per-process parameters (env) */
    double ns_per_thread;
    uint64_t queue_depth;
    uint64_t lazy_load_ns; /* TGS_SIM_LAZY_LOAD_US: host time of a function's first launch */
    int sm_count; /* TGS_SIM_SMS: SMs per device (occupancy, attributes) */
    double pcie_gbps; /* TGS_SIM_PCIE_GBPS: managed-memory migration bandwidth */
    uint64_t host_limit; /* TGS_SIM_HOST_MEM: host bytes for managed + page-locked memory */
    uint32_t nmanaged[SIM_MAX_DEVICES]; /* this process's tracked managed ranges */
    /* CUDA_VISIBLE_DEVICES (visible.c): visible ordinal k is physical device vis[k] */
    int vis[SIM_MAX_DEVICES];
    int nvis;
    int log_level;
    /* contexts */
    struct CUctx_st *primary[SIM_MAX_DEVICES];
    int primary_refs[SIM_MAX_DEVICES];
    unsigned int primary_flags[SIM_MAX_DEVICES];
    int runtime_retained[SIM_MAX_DEVICES]; /* the CUDA runtime took its primary reference */
    /* handle registry: open addressing set of live handles */
    void **handles;
    size_t handles_cap, handles_len, handles_tomb;
    /* device-memory regions, sorted by base */
    struct sim_region *regions;
    size_t nregions, regions_cap;
    /* context limits (cuCtxSetLimit) and cache preference, per process */
    size_t limits[8];
    int limits_set[8];
    int cache_config;
    int shared_config; /* cuCtxSetSharedMemConfig (0: the 4-byte default) */
    /* graph memory (mem-alloc nodes) per device: now and at most */
    uint64_t graph_mem[SIM_MAX_DEVICES], graph_mem_high[SIM_MAX_DEVICES];
    /* memory pools: the devices' default pools and the current ones */
    struct CUmemPoolHandle_st default_pool[SIM_MAX_DEVICES];
    struct CUmemPoolHandle_st *current_pool[SIM_MAX_DEVICES];
    /* VMM address reservations */
    struct sim_span *reserves;
    size_t nreserves, reserves_cap;
    /* stream capture (capture.c) */
    pthread_mutex_t cap_lock;      /* guards the list and every stream's/event's capture fields */
    struct sim_capture *captures;  /* capture sequences in progress */
    uint64_t cap_next_id;
    int cap_active;                /* how many are in progress (atomic: the launch paths' test) */
    /* TGS_SIM_TRACE (trace.c) */
    int tracing;
    int trace_fd;
    struct sim_trace_buf trace[SIM_MAX_DEVICES]; /* each under its device's lock */
};

extern struct sim_globals g_sim;

/* Per-thread state: the current-context stack. */
struct sim_thread {
    struct CUctx_st *stack[SIM_MAX_STACK];
    int depth;
    int capture_mode; /* cuThreadExchangeStreamCaptureMode; 0 = GLOBAL */
    /* the per-thread default stream's capture state, per context (capture.c) */
    struct CUctx_st *pt_ctx[SIM_PT_STREAMS];
    struct CUstream_st *pt_stream[SIM_PT_STREAMS];
};
extern __thread struct sim_thread g_sim_thread;

/* log.c / env.c */
void sim_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
uint64_t sim_env_u64(const char *name, uint64_t def, uint64_t min, uint64_t max);
uint64_t sim_env_bytes(const char *name, uint64_t def);
double sim_env_double(const char *name, double def, double min, double max);
int sim_env_loglevel(void);
uint64_t sim_now_ns(void);
void sim_sleep_until(uint64_t t_ns);

/* state.c */
CUresult sim_state_open(void);
void sim_reap_dead(int force);
void sim_dev_lock(int dev);
void sim_dev_unlock(int dev);
/* TGS_SIM_TRACE (trace.c): a line per completed kernel, written after the device lock */
void sim_trace_open(void);
void sim_trace_kernel_locked(int dev, const struct sim_ctx *cx, const struct sim_item *it,
                             uint64_t end_ns);
void sim_trace_unlock(int dev, pthread_mutex_t *lock);

/* init gate used by every entry point that needs cuInit */
static inline CUresult sim_check_init(void)
{
    return __atomic_load_n(&g_sim.initialized, __ATOMIC_ACQUIRE) ? CUDA_SUCCESS
                                                                  : CUDA_ERROR_NOT_INITIALIZED;
}
static inline struct sim_state *sim_st(void) { return g_sim.st; }
static inline int sim_ndev(void) { return (int)g_sim.st->hdr.ndevices; }

/* visible.c: CUDA_VISIBLE_DEVICES.  API CUdevice values are visible
 * ordinals; the state file is indexed by physical device. */
void sim_visible_init(void);
void sim_uuid_bytes(int phys, unsigned char out[16]);
int sim_ord(int phys); /* the visible ordinal of a physical device, -1 if hidden */
static inline int sim_nvis(void) { return g_sim.nvis; }
static inline int sim_phys(CUdevice ord) { return g_sim.vis[ord]; } /* ord checked */

/* Initialised, and dev names one of the visible simulated devices. */
static inline CUresult sim_check_dev(CUdevice dev)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    return dev >= 0 && dev < sim_nvis() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

/* handles.c */
void sim_handle_add(void *h);
void sim_handle_del(void *h);
int sim_handle_ok(const void *h, uint32_t kind);

/* engine.c: the time-sliced device (callers hold no locks) */
void sim_advance_locked(int dev, uint64_t now);
CUresult sim_enqueue(struct CUctx_st *ctx, uint64_t dur_ns, uint64_t marker, uint64_t *seq_out);
void sim_wait_seq(struct CUctx_st *ctx, uint64_t seq);
int sim_seq_done(struct CUctx_st *ctx, uint64_t seq);
int sim_ctx_slot_alloc(int dev);
void sim_ctx_slot_free(int slot);
uint64_t sim_marker_time(int slot, uint32_t gen, uint64_t marker);
uint64_t sim_ctx_tail(struct CUctx_st *ctx);

/* context.c */
CUresult sim_current_ctx(struct CUctx_st **out);
/* ctx, or the current context when ctx is NULL (INVALID_CONTEXT for a stale one) */
CUresult sim_ctx_or_current(CUcontext ctx, struct CUctx_st **out);
/* the device's primary context if it exists (no retain), else NULL */
struct CUctx_st *sim_primary_ctx(CUdevice dev);
CUresult sim_ctx_sync(struct CUctx_st *ctx);

/* stream_event.c: resolve a stream handle to its context and stream object */
CUresult sim_stream_resolve(CUstream s, struct CUctx_st **ctx, struct CUstream_st **obj);
void sim_stream_note(struct CUctx_st *ctx, struct CUstream_st *obj, uint64_t seq_end);
CUresult sim_stream_sync(CUstream s);

/* memory.c: regions of simulated device memory */
/* SIM_R_HOST: page-locked host memory the simulator allocated;
 * SIM_R_HOST_REG: the program's memory, registered (not owned). */
enum sim_region_kind {
    SIM_R_DEVICE = 1, SIM_R_MANAGED, SIM_R_VMM_MAP, SIM_R_MODULE, SIM_R_HOST, SIM_R_HOST_REG,
    SIM_R_GRAPH /* a graph's mem-alloc node */
};
struct sim_region {
    uint64_t base;
    uint64_t size;
    uint64_t acct; /* bytes accounted against capacity */
    int kind;
    int dev;
    void *vmm; /* SIM_R_VMM_MAP: the physical allocation mapped here */
    unsigned int flags; /* host regions: the allocation/registration flags */
    struct CUmemPoolHandle_st *pool; /* the pool it came from, or NULL */
    /* managed memory (memcpy.c): advice and prefetch, for the whole region;
     * locations are device ordinals, -1 the host, -2 none */
    int read_mostly, preferred, last_prefetch;
    unsigned int accessed_by; /* bit d: device d; bit 31: the host */
    int mslot; /* managed: residency slot + 1 (residency.c), 0 untracked */
};
CUresult sim_mem_alloc(CUdeviceptr *dptr, size_t bytes, int kind, int low32);
CUresult sim_mem_free(CUdeviceptr dptr, int kind_mask);
CUresult sim_mem_account(int dev, int64_t bytes, int managed);
int sim_mem_range_ok(uint64_t p, size_t n);
int sim_mem_range_covered(uint64_t p, size_t n); /* adjacent regions, no gap */
int sim_current_dev(void); /* the current context's visible ordinal, -1 */
int sim_region_add(uint64_t base, uint64_t size, int kind, int dev, void *vmm);
int sim_region_take(uint64_t base, int mask, struct sim_region *out);
/* The region holding p (a copy); 0 found, -1 not. */
int sim_region_find(uint64_t p, struct sim_region *out);
/* -1: no room (the region table, or TGS_SIM_HOST_MEM): OUT_OF_MEMORY */
int sim_region_add_host(uint64_t base, uint64_t size, int kind, unsigned int flags, int dev);
void sim_region_set_pool(uint64_t base, void *pool, void *old);
/* Managed-memory advice (memcpy.c): change the region holding p. */
enum sim_advice { SIM_ADV_READ_MOSTLY, SIM_ADV_PREFERRED, SIM_ADV_ACCESSED_BY_SET,
                  SIM_ADV_ACCESSED_BY_CLEAR, SIM_ADV_PREFETCH };
/* Returns the managed bytes a prefetch moved (0 otherwise). */
uint64_t sim_region_advise(uint64_t p, enum sim_advice what, int value);

/* residency.c: where managed memory lives.  Slots are residency slot + 1
 * (0: untracked).  *_locked: the caller holds the device's lock. */
/* -1: the host memory limit refuses it (new managed memory is on the host);
 * pinned: a page-locked host range (host accounting only) */
int sim_res_add(int dev, uint64_t base, uint64_t size, int pinned);
void sim_res_remove(int mslot);
uint64_t sim_res_prefetch(int mslot, int loc); /* the bytes it moved */
uint64_t sim_res_host_room(void);
void sim_res_advise_preferred(int mslot, int loc);
/* Make `need` bytes of device memory free of managed pages (evicting the
 * least recently used ones to the host); returns the bytes still short and
 * adds the bytes it moved to *moved. */
uint64_t sim_res_evict_locked(int dev, uint64_t need, uint64_t *moved);
/* The host time a migration of `bytes` takes at TGS_SIM_PCIE_GBPS. */
uint64_t sim_res_migration_ns(uint64_t bytes);
void sim_res_drop_proc_locked(int proc, int dev);
/* A kernel of this process on dev: the ns it pays to migrate the
 * non-resident managed bytes it touches (all of this process's on dev). */
uint64_t sim_res_kernel_ns(int dev);

/* mempool.c: memory pools (a default and a current one per device) */
int sim_pool_ok(const struct CUmemPoolHandle_st *p);
struct CUmemPoolHandle_st *sim_pool_current(int dev);
void sim_pool_charge(struct CUmemPoolHandle_st *p, CUdeviceptr base);
void sim_pool_uncharge(struct CUmemPoolHandle_st *p, uint64_t bytes);

/* event_times.c: timing events' completion times, under g_sim.lock */
void sim_event_times_recorded(struct CUevent_st *e);
void sim_event_times_forget(struct CUevent_st *e);
void sim_event_times_ctx_gone(struct CUctx_st *c);

/* module.c */
CUresult sim_module_load(struct CUctx_st *ctx, const void *image, size_t size,
                         struct CUlib_st *lib, struct CUmod_st **out);
void sim_module_free(struct CUmod_st *m);
/* cuModuleLoadData's body: an image into the current context (size 0: unknown) */
CUresult sim_module_load_current(CUmodule *module, const void *image, size_t size);
/* a CUfunction or a CUkernel (cast, as the real driver accepts): the function */
CUresult sim_func_resolve(CUfunction f, struct CUfunc_st **out);
/* module.c: CUDA_MODULE_LOADING is not EAGER (the driver's default: lazy) */
int sim_lazy_loading(void);
/* library.c: the library's module in the current context (made on demand) */
CUresult sim_library_module(struct CUlib_st *lib, struct CUmod_st **out);
/* attrs.c: a function attribute's value (function, then kernel settings) */
int sim_func_attr(const struct CUfunc_st *f, int attr);
/* read a whole file (cuModuleLoad, cuLibraryLoadFromFile, cuLinkAddFile) */
CUresult sim_read_file(const char *path, void **data, size_t *size);

/* array.c: an array's bytes (rows of `row` bytes, `height` rows per slice) */
int sim_array_layout(CUarray a, unsigned char **data, size_t *bytes, size_t *row,
                     size_t *height);

/* copy3d.c: a descriptor copy, done at once (callers order it) */
CUresult sim_copy3d(const CUDA_MEMCPY3D *c);
/* memset.c: a pitched fill of elem-byte values, done at once */
CUresult sim_fill(CUdeviceptr dst, size_t pitch, unsigned int v, size_t width, size_t height,
                  size_t elem);

/* launch.c: compute a launch's simulated duration and enqueue it */
CUresult sim_launch(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                    unsigned int bx, unsigned int by, unsigned int bz, CUstream s, int ptsz);

/* graph.c: add a node of work w (graph.h's struct sim_gwork) for stream
 * capture; the caller has validated g, deps and w. */
struct sim_gwork;
CUresult sim_graph_add(CUgraph g, const struct sim_gwork *w, const CUgraphNode *deps,
                       size_t ndeps, CUgraphNode *out);
int sim_graph_has_node(CUgraph g, CUgraphNode n);

/* capture.c: stream capture.  Every hook first tests g_sim.cap_active, so
 * that with no capture in progress they cost one relaxed load. */
static inline int sim_capture_any(void)
{
    return __atomic_load_n(&g_sim.cap_active, __ATOMIC_RELAXED) != 0;
}
static inline int sim_stream_is_legacy(CUstream s, int ptsz)
{
    return s == TGS_CU_STREAM_LEGACY || (s == NULL && !ptsz);
}
/* Work w submitted to s: 1 when capture handled it (*res says how: captured,
 * or refused), 0 when it is to execute as usual. */
int sim_capture_take(CUstream s, int ptsz, struct CUctx_st *ctx, struct CUstream_st *obj,
                     const struct sim_gwork *w, CUresult *res);
/* capture_work.c: sim_capture_take for a copy (dst/src of the given memory
 * types, host or device addresses), a 3D copy, a memset, a host function, or
 * a step of an executable graph: 1 when capture handled it (see above). */
int sim_capture_copy(CUstream s, int ptsz, CUmemorytype dt, uintptr_t dst, CUmemorytype st,
                     uintptr_t src, size_t n, CUresult *res);
int sim_capture_copy3d(CUstream s, int ptsz, const CUDA_MEMCPY3D *c, CUresult *res);
int sim_capture_fill(CUstream s, int ptsz, CUdeviceptr dst, size_t pitch, unsigned int v,
                     size_t width, size_t height, unsigned int elem, CUresult *res);
int sim_capture_host(CUstream s, int ptsz, CUhostFn fn, void *data, CUresult *res);
int sim_capture_step(CUstream s, int ptsz, const struct sim_gwork *w, CUresult *res);
/* cuEventRecord into s: 1 when capture handled it (see above). */
int sim_capture_record(CUevent e, CUstream s, int ptsz, struct CUctx_st *ctx,
                       struct CUstream_st *obj, CUresult *res);
/* A stream synchronize/query: CUDA_SUCCESS when allowed, else the error
 * (the capture it hit is invalidated). */
CUresult sim_capture_check_sync(CUstream s, int ptsz, struct CUctx_st *ctx,
                                struct CUstream_st *obj);
/* cuStreamWaitEvent's capture rules (after its argument checks): see above. */
int sim_capture_wait(CUstream s, int ptsz, CUevent e, unsigned int flags, struct CUctx_st *ctx,
                     struct CUstream_st *obj, CUresult *res);
CUresult sim_capture_check_event(CUevent e);       /* query/sync/elapsed of an event */
CUresult sim_capture_check_ctx(struct CUctx_st *ctx); /* cuCtxSynchronize */
CUresult sim_capture_check_legacy(struct CUctx_st *ctx); /* synchronous legacy-stream work */
CUresult sim_capture_check_unsafe(void);            /* potentially unsafe calls (cuMemAlloc) */
/* How a copy or memset is issued: synchronous or not, through a _ptds/_ptsz
 * entry point (the per-thread default stream) or not (the legacy stream). */
#define SIM_HOW_SYNC 1
#define SIM_HOW_PT 2
/* copy_order.c: the stream checks and the wait before a copy/memset issued with
 * `how` on s; unsafe: a synchronous one also counts as potentially unsafe. */
CUresult sim_copy_order(int how, CUstream s, int unsafe);
void sim_capture_stream_gone(struct CUstream_st *obj);
void sim_capture_event_gone(struct CUevent_st *e);
int sim_capture_graph_busy(CUgraph g); /* a capture sequence is building g */

#pragma GCC visibility pop

#endif /* TGS_SIM_H */

/*
 * tgs-workload: a driver-API program that behaves like a deep-learning job
 * (K kernels, a synchronize, a host-side gap; per iteration) and reports
 * JSON lines.  Shared declarations of its small modules.
 */
#ifndef TGS_WORKLOAD_H
#define TGS_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tgs/cuda_abi.h"

/* Exit codes: a driver or runtime failure, a usage error. */
#define WL_EXIT_FAIL 1
#define WL_EXIT_USAGE 2

enum wl_resolve { WL_RESOLVE_PROC, WL_RESOLVE_DLSYM, WL_RESOLVE_LINK };
enum wl_launch { WL_LAUNCH_KERNEL, WL_LAUNCH_EX, WL_LAUNCH_COOP, WL_LAUNCH_GRAPH };

/* ---- args.c: the command line ---- */
#define WL_MAX_PHASES 8
struct wl_config {
    enum wl_resolve resolve;
    enum wl_launch launch;
    int cuda_version;        /* for cuGetProcAddress and variant choice */
    int per_thread;          /* per-thread default stream variants */
    int use_stream;          /* create a stream instead of the NULL stream */
    int priority;            /* its priority */
    unsigned kernels;        /* kernels per iteration */
    double kernel_us;        /* wall time of one kernel */
    unsigned threads;        /* threads per block (auto geometry) */
    unsigned grid;           /* explicit grid (0 = auto) */
    unsigned block;          /* explicit block (0 = auto) */
    double cost_factor;      /* simulator cost factor / spin scale */
    double gap_ms;           /* host gap after each synchronize */
    uint64_t mem_bytes;      /* device footprint */
    uint64_t alloc_chunk;    /* chunk size (0 = one allocation) */
    uint64_t iters;          /* measured iterations (0 = use seconds) */
    double seconds;          /* measured duration when iters == 0 */
    double report_ms;        /* progress period (0 = off) */
    int device;              /* device ordinal */
    const char *name;        /* echoed in every JSON line */
    unsigned warmup;         /* iterations excluded from statistics */
    unsigned nphases;        /* --phases: host gaps cycled by time (0 = gap_ms always) */
    struct wl_phase {
        double gap_ms;
        double seconds;
    } phases[WL_MAX_PHASES];
    /* Shapes (shapes.c documents them) */
    unsigned sync_every;     /* synchronize after every N iterations (run-ahead; default 1) */
    unsigned ahead;          /* at most K iterations queued (0 = sync_every bounds it) */
    unsigned streams;        /* kernels dealt round-robin over S streams (default 1) */
    unsigned mix_long;       /* --kernel-mix: long kernels per iteration (0 = off) */
    double poisson_rps;      /* --poisson-rps: requests arrive at this mean rate (0 = off) */
    uint64_t seed;           /* kernel mix and arrivals */
    /* Memory schedule (ramp.c documents it) */
    int managed;             /* --managed: the footprint is managed memory */
    int prefer_device;       /* --prefer-device: advised to prefer the device (implies managed) */
    double ramp_every_ms;    /* --ramp-every-ms: one chunk every T ms during the loop (0 = off) */
    double free_at_s;        /* --free-at-s: free the footprint S s into the loop (0 = off) */
    int verify;              /* --verify: check the footprint's contents before freeing it */
    uint64_t touch_stride;   /* --touch: read one word every STRIDE bytes per iteration (0 = off) */
};

/* Parses argv.  Returns 1 for --print-ptx, else 0; exits 0 after --help and
 * WL_EXIT_USAGE (with a message) on errors. */
int wl_parse_args(int argc, char **argv, struct wl_config *cfg);
const char *wl_resolve_name(enum wl_resolve r);
const char *wl_launch_name(enum wl_launch l);
/* "12", "4KiB", "1.5G" ... -> bytes; -1 on malformed input. */
int wl_parse_size(const char *text, uint64_t *out);

/* ---- resolve.c: the driver entry points this program calls ---- */
#define WL_DRIVER_SLOTS(X) \
    X(init, cuInit) \
    X(driver_get_version, cuDriverGetVersion) \
    X(device_get, cuDeviceGet) \
    X(device_get_count, cuDeviceGetCount) \
    X(device_get_name, cuDeviceGetName) \
    X(device_get_attribute, cuDeviceGetAttribute) \
    X(device_total_mem, cuDeviceTotalMem_v2) \
    X(primary_ctx_retain, cuDevicePrimaryCtxRetain) \
    X(primary_ctx_release, cuDevicePrimaryCtxRelease_v2) \
    X(ctx_set_current, cuCtxSetCurrent) \
    X(ctx_synchronize, cuCtxSynchronize) \
    X(ctx_synchronize_v2, cuCtxSynchronize_v2) \
    X(stream_create_with_priority, cuStreamCreateWithPriority) \
    X(stream_destroy, cuStreamDestroy_v2) \
    X(stream_synchronize, cuStreamSynchronize) \
    X(event_create, cuEventCreate) \
    X(event_record, cuEventRecord) \
    X(event_synchronize, cuEventSynchronize) \
    X(event_destroy, cuEventDestroy_v2) \
    X(module_load_data, cuModuleLoadData) \
    X(module_get_function, cuModuleGetFunction) \
    X(module_unload, cuModuleUnload) \
    X(mem_alloc, cuMemAlloc_v2) \
    X(mem_alloc_managed, cuMemAllocManaged) \
    X(mem_advise, cuMemAdvise) \
    X(mem_advise_v2, cuMemAdvise_v2) \
    X(mem_free, cuMemFree_v2) \
    X(mem_get_info, cuMemGetInfo_v2) \
    X(memset_d8, cuMemsetD8_v2) \
    X(memcpy_htod, cuMemcpyHtoD_v2) \
    X(memcpy_dtoh, cuMemcpyDtoH_v2) \
    X(launch_kernel, cuLaunchKernel) \
    X(launch_kernel_ex, cuLaunchKernelEx) \
    X(launch_cooperative_kernel, cuLaunchCooperativeKernel) \
    X(graph_create, cuGraphCreate) \
    X(graph_add_kernel_node, cuGraphAddKernelNode) \
    X(graph_add_kernel_node_v2, cuGraphAddKernelNode_v2) \
    X(graph_instantiate_with_flags, cuGraphInstantiateWithFlags) \
    X(graph_launch, cuGraphLaunch) \
    X(graph_exec_destroy, cuGraphExecDestroy) \
    X(graph_destroy, cuGraphDestroy) \
    X(get_error_name, cuGetErrorName) \
    X(get_error_string, cuGetErrorString)

/* One typed pointer per slot (NULL where the driver lacks it or where the
 * requested cudaVersion selects the other variant). */
struct wl_driver {
#define WL_SLOT_FIELD(slot, type_sym) tgs_pfn_##type_sym slot;
    WL_DRIVER_SLOTS(WL_SLOT_FIELD)
#undef WL_SLOT_FIELD
    void *handle;                 /* dlopen handle (NULL when linked) */
    const char *getproc_symbol;   /* which cuGetProcAddress was used */
};

struct wl_run;
/* Fills drv per cfg (resolve mode, version, per-thread); reports failures and exits. */
void wl_resolve_driver(struct wl_run *run, struct wl_driver *drv);
/* The exported symbol name that holds fn (dladdr), or NULL. */
const char *wl_symbol_of(const void *fn);

/* ---- ptx.c: the spin kernel ---- */
#define WL_KERNEL_NAME "tgs_spin"
#define WL_TOUCH_NAME "tgs_touch"       /* --touch (touch.c) */
/* Writes the PTX image (with a simulator cost comment when cost != 1). */
int wl_ptx_build(char *buf, size_t len, double cost);

/* ---- geometry.c: grid, block and per-thread spin from --kernel-us ---- */
struct wl_device_info {
    int sm_count;                 /* 0 if unknown */
    int max_threads_per_sm;       /* 0 if unknown */
};
struct wl_geometry {
    unsigned grid;
    unsigned block;
    uint64_t spin_ns;             /* per-thread spin passed to the kernel */
    double sim_cost;              /* cost factor written into the PTX */
    unsigned waves;               /* full-device waves on a real GPU */
    int clamped;                  /* coop: grid cut to what can be co-resident */
};
/* Returns 0, or -1 with a message in err. */
int wl_geometry_plan(const struct wl_config *cfg, const struct wl_device_info *dev,
                     double ns_per_thread, struct wl_geometry *geo, char *err, size_t errlen);

/* ---- report.c: JSON lines and errors ---- */
struct wl_json {
    char buf[4096];
    size_t len;
    int first;                    /* no comma before the next member */
};
void wl_json_begin(struct wl_json *j, const char *type, const char *name);
void wl_json_str(struct wl_json *j, const char *key, const char *val);
void wl_json_int(struct wl_json *j, const char *key, long long val);
void wl_json_uint(struct wl_json *j, const char *key, unsigned long long val);
void wl_json_num(struct wl_json *j, const char *key, double val);
void wl_json_bool(struct wl_json *j, const char *key, int val);
void wl_json_obj_begin(struct wl_json *j, const char *key);
void wl_json_obj_end(struct wl_json *j);
/* Closes the object and writes it as one line to stdout (flushed). */
void wl_json_emit(struct wl_json *j);

/* ---- stats.c: per-iteration latencies ---- */
struct wl_stats {
    double *lat_ms;
    size_t count;
    size_t cap;
    double sum_ms;
};
int wl_stats_add(struct wl_stats *s, double ms);
/* Sorts in place; q in [0, 1]; 0 when empty. */
double wl_stats_quantile(struct wl_stats *s, double q);
void wl_stats_free(struct wl_stats *s);

/* ---- memory.c: the device footprint ---- */
struct wl_footprint {
    CUdeviceptr *chunks;
    size_t nchunks;
    uint64_t bytes;
    uint64_t chunk;               /* every chunk but the last has this size */
    size_t free_before;
    size_t free_after;
    size_t total;
    size_t allocated;             /* chunks allocated so far (the ramp grows it) */
    uint64_t held;                /* bytes allocated so far */
    int ramp_stopped;             /* an allocation of the ramp failed: no more steps */
    int freed;                    /* --free-at-s done */
    int roundtrip;                /* chunk 0 starts with the round-trip pattern */
};

/* ---- shapes.c: kernel-duration mix and request arrivals ---- */
#define WL_MAX_STREAMS 16
#define WL_MIX_SHORT_US_MIN 10.0
#define WL_MIX_SHORT_US_MAX 100.0
#define WL_MIX_LONG_US_MIN 5000.0
#define WL_MIX_LONG_US_MAX 20000.0
/* Deterministic generator (splitmix64), state owned by the caller. */
double wl_rand01(uint64_t *state);
/* Kernel k's duration (us) of the iteration's fixed sequence: cfg->kernel_us without a mix. */
void wl_mix_plan(const struct wl_config *cfg, double *kernel_us);
/* The next Poisson arrival after t (s): exponential inter-arrival time at cfg->poisson_rps. */
double wl_next_arrival(const struct wl_config *cfg, uint64_t *state, double t);

/* ---- launch.c: one iteration's kernels ---- */
struct wl_kernel {
    unsigned grid;
    unsigned block;
    uint64_t spin_ns;             /* the kernel's argument (stable address: graph nodes) */
    void *params[1];
    double us;                    /* nominal duration */
};
struct wl_launcher {
    CUfunction fn;
    CUstream stream;              /* the first of `streams` (NULL stream when streams == 1) */
    CUstream streams[WL_MAX_STREAMS];
    unsigned nstreams;
    CUgraph graph;
    CUgraphExec exec;
    struct wl_kernel *kernels;    /* cfg.kernels entries */
    CUevent *ahead_events;        /* --ahead ring (cfg.ahead entries) */
    CUfunction touch_fn;          /* --touch */
    uint64_t touches;             /* touch kernels launched */
};

/* ---- loop.c: warm-up, iterations, progress and summary lines ---- */
struct wl_counts {
    uint64_t kernels;             /* launched, warm-up included */
    uint64_t work;                /* work units (threads) launched, warm-up included */
    uint64_t warmup_iters;
    uint64_t launched;            /* iterations launched in this phase (sync/ahead count) */
    uint64_t iter_work;           /* work units of one iteration */
    double request_us;            /* nominal GPU time of one iteration */
};
void wl_loop_install_signals(void);
void wl_loop_run(struct wl_run *run);

/* ---- main.c ties it together; the run context shared by the modules ---- */
struct wl_run {
    struct wl_config cfg;
    struct wl_driver drv;
    struct wl_geometry geo;
    struct wl_device_info devinfo;
    struct wl_footprint mem;
    struct wl_launcher launcher;
    CUdevice dev;
    CUcontext ctx;
    CUmodule module;
    double ns_per_thread;         /* the simulator's cost of one thread */
    char device_name[256];
};

/* Reports a failed driver call (JSON line + stderr) and exits 1. */
void wl_die_cu(const struct wl_run *run, const char *call, CUresult rc) __attribute__((noreturn));
/* Reports any other runtime failure and exits 1. */
void wl_die(const struct wl_run *run, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 2, 3)));
/* Calls a driver entry point, dies on failure (names the call). */
#define WL_CU(run, call, ...) \
    do { \
        CUresult wl_rc_ = (run)->drv.call(__VA_ARGS__); \
        if (wl_rc_ != CUDA_SUCCESS) \
            wl_die_cu((run), wl_call_name_##call, wl_rc_); \
    } while (0)

void wl_mem_setup(struct wl_run *run);
void wl_mem_release(struct wl_run *run);
/* Allocates chunk i (size bytes) as the config says (device or managed memory, advice), fills
 * and signs it; returns the allocation's result (the call's wall time in *us). */
CUresult wl_mem_alloc_chunk(struct wl_run *run, size_t i, uint64_t size, double *us);
/* Size of chunk i of the footprint. */
uint64_t wl_mem_chunk_size(const struct wl_footprint *m, size_t i);
/* Checks that every allocated chunk still holds what was written (a "check" line); exits 1
 * when it does not. */
void wl_mem_verify(struct wl_run *run);

/* ---- touch.c: --touch, kernels that read the footprint (a real GPU faults it in) ---- */
#define WL_TOUCH_MAX_THREADS 65536u
#define WL_TOUCH_BLOCK 256u
void wl_touch_setup(struct wl_run *run);
/* One touch kernel per chunk held, on the iteration's stream, after its kernels. */
void wl_touch_launch(struct wl_run *run);

/* ---- ramp.c: the memory schedule inside the loop (--ramp-every-ms, --free-at-s) ---- */
/* t: seconds since the measured start. */
void wl_ramp_tick(struct wl_run *run, double t);

void wl_launch_setup(struct wl_run *run);
void wl_launch_iteration(struct wl_run *run);
void wl_launch_teardown(struct wl_run *run);
/* Waits for the iteration's work: context synchronize with one stream, else each stream's
 * synchronize in turn (as a multi-stream framework waits on its streams). */
void wl_synchronize(struct wl_run *run);
/* --ahead: records iteration i's end and waits for iteration i - K's. */
void wl_ahead_mark(struct wl_run *run, uint64_t iter);
/* Work units (threads) and kernels one iteration launches. */
uint64_t wl_iteration_work(const struct wl_run *run);

/* Human names of the slots' calls, for error messages (wl_call_name_<slot>). */
#define WL_CALL_NAME(slot, type_sym) static const char wl_call_name_##slot[] __attribute__((unused)) = #type_sym;
WL_DRIVER_SLOTS(WL_CALL_NAME)
#undef WL_CALL_NAME

#endif /* TGS_WORKLOAD_H */

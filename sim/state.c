/*
 * state.c: the shared state file: creation (race-free), process slots
 * guarded by OFD locks, reclaiming dead processes, and the device locks.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim.h"
#include "tgs/state_path.h"

#define DEFAULT_MEM (16ull << 30)

static int ofd_lock(int fd, int slot, int type, int cmd)
{
    struct flock fl = {.l_type = (short)type, .l_whence = SEEK_SET,
                       .l_start = SIM_LOCK_SLOT_BASE + slot, .l_len = 1};
    return fcntl(fd, cmd, &fl);
}

static void init_mutex(pthread_mutex_t *m)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(m, &a);
    pthread_mutexattr_destroy(&a);
}

void sim_dev_lock(int dev)
{
    int r = pthread_mutex_lock(&g_sim.st->dev[dev].lock);
    if (r == EOWNERDEAD) {
        /* The holder died mid-update: every update keeps the state usable
         * (counters may be off by one operation), so just mark it usable. */
        sim_log(TGS_LOG_INFO, "device %d lock recovered from a dead process", dev);
        pthread_mutex_consistent(&g_sim.st->dev[dev].lock);
    }
}

/* Trace lines the holder produced are written after the lock is released (trace.c). */
void sim_dev_unlock(int dev) { sim_trace_unlock(dev, &g_sim.st->dev[dev].lock); }

static int create_file(const char *path, uint64_t mem, int ndev, uint64_t slice_ns)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.init.%d", path, (int)getpid());
    int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0)
        return -1;
    fchmod(fd, 0666); /* shared by every user's processes that name it */
    size_t size = sizeof(struct sim_state);
    struct sim_state *st = MAP_FAILED;
    if (ftruncate(fd, (off_t)size) == 0)
        st = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (st == MAP_FAILED) {
        close(fd);
        unlink(tmp);
        return -1;
    }
    st->hdr.version = SIM_STATE_VERSION;
    st->hdr.ndevices = (uint32_t)ndev;
    st->hdr.mem_per_device = mem;
    st->hdr.timeslice_ns = slice_ns;
    st->hdr.file_size = size;
    st->hdr.created_ns = sim_now_ns();
    uint64_t seed = st->hdr.created_ns ^ ((uint64_t)getpid() << 32);
    int ur = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (ur >= 0) {
        if (read(ur, &seed, sizeof seed) != sizeof seed)
            seed ^= 0x9e3779b97f4a7c15ull;
        close(ur);
    }
    st->hdr.uuid_seed = seed;
    for (int d = 0; d < SIM_MAX_DEVICES; d++) {
        init_mutex(&st->dev[d].lock);
        st->dev[d].mem_total = mem;
        st->dev[d].cur_ctx = -1;
        st->dev[d].t_last_ns = st->hdr.created_ns;
    }
    __atomic_store_n(&st->hdr.magic, SIM_STATE_MAGIC, __ATOMIC_RELEASE);
    munmap(st, size);
    /* link() never replaces: if another process won the race, use its file. */
    int r = link(tmp, path);
    int e = errno;
    unlink(tmp);
    close(fd);
    if (r != 0 && e != EEXIST)
        return -1;
    return 0;
}

static void default_path(char *buf, size_t n)
{
    const char *why = sim_state_path(buf, n);
    if (why)
        sim_log(TGS_LOG_ERROR, "TGS_SIM_STATE=%s %s; using %s", getenv("TGS_SIM_STATE"), why,
                buf);
}

/* Clear a process slot whose owner is gone.  Caller holds its OFD lock. */
static void reclaim_slot(int slot)
{
    struct sim_state *st = g_sim.st;
    struct sim_proc *p = &st->proc[slot];
    for (int d = 0; d < (int)st->hdr.ndevices; d++) {
        sim_dev_lock(d);
        struct sim_device *dv = &st->dev[d];
        dv->mem_used -= p->dev[d].mem_used <= dv->mem_used ? p->dev[d].mem_used : dv->mem_used;
        dv->managed_used -= p->dev[d].managed_used <= dv->managed_used ? p->dev[d].managed_used
                                                                       : dv->managed_used;
        p->dev[d].mem_used = 0;
        p->dev[d].managed_used = 0;
        sim_res_drop_proc_locked(slot, d);
        for (int c = 0; c < SIM_MAX_CTXS; c++) {
            struct sim_ctx *cx = &st->ctx[c];
            if (cx->in_use && cx->proc == slot && cx->dev == d) {
                cx->head = cx->tail;
                cx->pending_ns = 0;
                cx->in_use = 0;
                if (dv->cur_ctx == c)
                    dv->cur_ctx = -1;
            }
        }
        sim_dev_unlock(d);
    }
    if (p->in_use)
        sim_log(TGS_LOG_INFO, "reclaimed process slot %d (pid %d)", slot, (int)p->pid);
    p->in_use = 0;
}

/* Reclaim slots marked in use whose owner holds no lock any more.  Cheap
 * enough to run on allocation failure and every ~100 ms from the engine. */
void sim_reap_dead(int force)
{
    (void)force;
    struct sim_state *st = g_sim.st;
    for (int i = 0; i < SIM_MAX_PROCS; i++) {
        if (i == g_sim.proc_slot || !__atomic_load_n(&st->proc[i].in_use, __ATOMIC_ACQUIRE))
            continue;
        if (ofd_lock(g_sim.fd, i, F_WRLCK, F_OFD_SETLK) != 0)
            continue; /* alive */
        reclaim_slot(i);
        ofd_lock(g_sim.fd, i, F_UNLCK, F_OFD_SETLK);
    }
}

static void check_params(const struct sim_header *h, const char *path)
{
    uint64_t mem = sim_env_bytes("TGS_SIM_MEM", DEFAULT_MEM);
    uint64_t ndev = sim_env_u64("TGS_SIM_DEVICES", 1, 1, SIM_MAX_DEVICES);
    uint64_t slice = sim_env_u64("TGS_SIM_TIMESLICE_US", 2000, 10, 10000000) * 1000;
    if (mem != h->mem_per_device || ndev != h->ndevices || slice != h->timeslice_ns)
        sim_log(TGS_LOG_INFO,
                "state file %s already exists with %u device(s) x %llu bytes, slice %llu us; "
                "it wins over this process's environment",
                path, h->ndevices, (unsigned long long)h->mem_per_device,
                (unsigned long long)(h->timeslice_ns / 1000));
}

/* A process that exits normally gives its memory and contexts back at once,
 * as the real driver does; a killed one is reaped by the others. */
__attribute__((destructor)) static void release_at_exit(void)
{
    if (g_sim.initialized && g_sim.proc_slot >= 0 && g_sim.st &&
        g_sim.st->proc[g_sim.proc_slot].pid == (int32_t)getpid())
        reclaim_slot(g_sim.proc_slot);
}

static void after_fork_child(void)
{
    /* A forked child is a new process: it must not share the parent's slot. */
    if (g_sim.fd >= 0)
        close(g_sim.fd);
    g_sim.fd = -1;
    g_sim.initialized = 0;
    g_sim.proc_slot = -1;
}

CUresult sim_state_open(void)
{
    char path[4096];
    default_path(path, sizeof path);
    uint64_t mem = sim_env_bytes("TGS_SIM_MEM", DEFAULT_MEM);
    int ndev = (int)sim_env_u64("TGS_SIM_DEVICES", 1, 1, SIM_MAX_DEVICES);
    uint64_t slice = sim_env_u64("TGS_SIM_TIMESLICE_US", 2000, 10, 10000000) * 1000;
    int fd = -1, created = 0;
    for (int attempt = 0; attempt < 3 && fd < 0; attempt++) {
        fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT) {
            if (create_file(path, mem, ndev, slice) != 0) {
                sim_log(TGS_LOG_ERROR, "cannot create state file %s: %s", path, strerror(errno));
                return CUDA_ERROR_NO_DEVICE;
            }
            created = 1;
        } else if (fd < 0) {
            sim_log(TGS_LOG_ERROR, "cannot open state file %s: %s", path, strerror(errno));
            return CUDA_ERROR_NO_DEVICE;
        }
    }
    if (fd < 0)
        return CUDA_ERROR_NO_DEVICE;
    struct stat sb;
    size_t size = sizeof(struct sim_state);
    if (fstat(fd, &sb) != 0 || (size_t)sb.st_size != size) {
        sim_log(TGS_LOG_ERROR, "state file %s has the wrong size (another version?); "
                "remove it when no process uses it", path);
        close(fd);
        return CUDA_ERROR_NO_DEVICE;
    }
    struct sim_state *st = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (st == MAP_FAILED) {
        close(fd);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (st->hdr.magic != SIM_STATE_MAGIC || st->hdr.version != SIM_STATE_VERSION ||
        st->hdr.ndevices < 1 || st->hdr.ndevices > SIM_MAX_DEVICES) {
        sim_log(TGS_LOG_ERROR, "state file %s is not a valid version-%d state file", path,
                SIM_STATE_VERSION);
        munmap(st, size);
        close(fd);
        return CUDA_ERROR_NO_DEVICE;
    }
    if (!created)
        check_params(&st->hdr, path);
    g_sim.fd = fd;
    g_sim.st = st;
    g_sim.map_size = size;
    int slot = -1;
    for (int i = 0; i < SIM_MAX_PROCS && slot < 0; i++)
        if (ofd_lock(fd, i, F_WRLCK, F_OFD_SETLK) == 0)
            slot = i;
    if (slot < 0) {
        sim_log(TGS_LOG_ERROR, "all %d process slots of %s are in use", SIM_MAX_PROCS, path);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    g_sim.proc_slot = slot;
    reclaim_slot(slot); /* whatever a dead previous owner left */
    st->proc[slot].pid = (int32_t)getpid();
    st->proc[slot].started_ns = sim_now_ns();
    for (int d = 0; d < SIM_MAX_DEVICES; d++)
        st->proc[slot].dev[d].busy_ns = 0;
    __atomic_store_n(&st->proc[slot].in_use, 1, __ATOMIC_RELEASE);
    sim_reap_dead(1);
    pthread_atfork(NULL, NULL, after_fork_child);
    return CUDA_SUCCESS;
}

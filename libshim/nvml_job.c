/*
 * libshim/nvml_job.c: the job's view for the NVML hooks: its quota and
 * usage, its GPU and its live processes.  The one place where the NVML view
 * reads the attach state and the segment (attach.c, ledger.c, segment.h).
 * Attaching needs no CUDA context, so this works before cuInit (nvidia-smi
 * and pynvml never call CUDA); the querying process takes a slot of the job
 * like any process of it.
 */
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nvml_shim.h"

/* A process outside any job that has not used CUDA through the shim stays
 * as it is: no shim init, so no driver loaded just for an NVML query. */
static struct tgs_slot *job_slot(void)
{
    if (!__atomic_load_n(&tgs_g.ready, __ATOMIC_ACQUIRE)) {
        tgs_options_load();
        if (!tgs_g.opt.segment_path[0])
            return NULL;
    }
    return tgs_slot();
}

int tgs_nvml_job(struct tgs_nvml_job *j)
{
    if (!job_slot())
        return 0;
    /* identity from the read-only .ctl: the .seg's copy is the tenant's to scribble on */
    const struct tgs_ident *id = &tgs_g.ctl->id;
    j->has_quota = tgs_mem_view(&j->mem_quota, &j->mem_used);
    j->device_index = id->device_index;
    memcpy(j->device_uuid, id->device_uuid, sizeof(j->device_uuid));
    j->device_uuid[sizeof(j->device_uuid) - 1] = '\0';
    return 1;
}

/* Slot i's owner is alive: someone holds its lock (F_OFD_GETLK only asks;
 * our own lock never conflicts with our own descriptor, so not for ours). */
static bool slot_alive(int i)
{
    if (i == tgs_g.slot_idx)
        return true;
    struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET,
                        .l_start = TGS_SEG_LOCK_SLOT_BASE + i, .l_len = 1 };
    return fcntl(tgs_g.fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
}

unsigned int tgs_nvml_job_procs(unsigned int *pids, unsigned long long *bytes, unsigned int max)
{
    if (!job_slot())
        return 0;
    unsigned int n = 0;
    for (uint32_t i = 0; i < tgs_nslots() && n < max; i++) {
        const struct tgs_slot *s = tgs_slot_at(tgs_g.hdr, i);
        if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != TGS_SLOT_ACTIVE)
            continue;
        uint64_t mem = TGS_RELAXED_LOAD(&s->mem_used);
        int32_t pid = TGS_RELAXED_LOAD(&s->pid);
        /* a process that never allocated nor launched (a monitor) is no GPU process */
        if (pid <= 0 || (!mem && !TGS_RELAXED_LOAD(&s->alloc_count) &&
                         !TGS_RELAXED_LOAD(&s->lanes_used)))
            continue;
        if (!slot_alive((int)i))
            continue;
        pids[n] = (unsigned int)pid;
        bytes[n] = mem;
        n++;
    }
    return n;
}

/* One slot of a part's .seg (mapped read-only) as an NVML process: alive (someone holds its
 * lock: F_OFD_GETLK on our own descriptor sees the holder, ourselves included) and a GPU
 * process (it allocated or launched). */
static int part_proc(const struct tgs_seg_header *h, int fd, uint32_t i, unsigned int *pid,
                     unsigned long long *bytes)
{
    const struct tgs_slot *s = (const struct tgs_slot *)((const char *)h + sizeof(*h) +
                                                         (size_t)i * sizeof(struct tgs_slot));
    if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != TGS_SLOT_ACTIVE)
        return 0;
    uint64_t mem = TGS_RELAXED_LOAD(&s->mem_used);
    int32_t p = TGS_RELAXED_LOAD(&s->pid);
    if (p <= 0 || (!mem && !TGS_RELAXED_LOAD(&s->alloc_count) &&
                   !TGS_RELAXED_LOAD(&s->lanes_used)))
        return 0;
    struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET,
                        .l_start = TGS_SEG_LOCK_SLOT_BASE + (off_t)i, .l_len = 1 };
    if (fcntl(fd, F_OFD_GETLK, &fl) != 0 || fl.l_type == F_UNLCK)
        return 0;
    *pid = (unsigned int)p;
    *bytes = mem;
    return 1;
}

int tgs_nvml_part(const char *uuid, struct tgs_nvml_job *j, unsigned int *pids,
                  unsigned long long *bytes, unsigned int max, unsigned int *n)
{
    if (!__atomic_load_n(&tgs_g.ready, __ATOMIC_ACQUIRE)) {
        tgs_options_load();
        if (!tgs_g.opt.parts[0])
            return 0;
        tgs_ensure_init();
    }
    char seg[4096];
    struct tgs_ctl_header c;
    if (!tgs_g.opt.parts[0] || tgs_part_by_uuid(uuid, seg, sizeof(seg), &c) < 0)
        return 0;
    int fd = open(seg, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return 0;
    struct stat st;
    uint64_t want = sizeof(struct tgs_seg_header) + (uint64_t)c.id.nslots * sizeof(struct tgs_slot);
    void *m = MAP_FAILED;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size == want &&
        c.id.nslots >= 1 && c.id.nslots <= TGS_SEG_MAX_SLOTS)
        m = mmap(NULL, (size_t)want, PROT_READ, MAP_SHARED, fd, 0);
    const struct tgs_seg_header *h = m == MAP_FAILED ? NULL : m;
    int ok = h && h->id.magic == TGS_SEG_MAGIC && h->id.created_ns == c.id.created_ns &&
             strncmp(h->id.job_name, c.id.job_name, TGS_SEG_NAME_MAX) == 0;
    if (ok) {
        j->mem_quota = c.mem_quota;
        j->has_quota = c.mem_quota != TGS_QUOTA_UNLIMITED;
        j->mem_used = TGS_RELAXED_LOAD(&h->mem_used);
        j->device_index = c.id.device_index;
        memcpy(j->device_uuid, c.id.device_uuid, sizeof(j->device_uuid));
        j->device_uuid[sizeof(j->device_uuid) - 1] = '\0';
        *n = 0;
        for (uint32_t i = 0; pids && i < c.id.nslots && *n < max; i++)
            *n += (unsigned int)part_proc(h, fd, i, &pids[*n], &bytes[*n]);
    }
    if (h)
        munmap(m, (size_t)want);
    close(fd);
    return ok;
}

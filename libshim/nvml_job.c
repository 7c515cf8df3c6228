/*
 * libshim/nvml_job.c: the job's view for the NVML hooks: its quota and
 * usage, its GPU and its live processes.  The one place where the NVML view
 * reads the attach state and the segment (attach.c, ledger.c, segment.h).
 * Attaching needs no CUDA context, so this works before cuInit (nvidia-smi
 * and pynvml never call CUDA); the querying process takes a slot of the job
 * like any process of it.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "nvml_shim.h"

/* A process outside any job that has not used CUDA through the shim stays
 * as it is: no shim init, so no driver loaded just for an NVML query. */
static struct tgs_slot *job_slot(void)
{
    if (!__atomic_load_n(&tgs_g.ready, __ATOMIC_ACQUIRE)) {
        const char *seg = getenv("TGS_SEGMENT");
        if (!seg || !seg[0])
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

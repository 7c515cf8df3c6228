/*
 * libshim/attach.c: mapping the job segment and owning a slot.
 *
 * Lazily on the first hooked call that needs it, a process maps TGS_SEGMENT,
 * validates it and claims a free slot by taking the slot's OFD lock (held for
 * the life of the process; the kernel drops it when we die).  Any failure
 * leaves the process unattached: one stderr line, then pass-through (or the
 * static TGS_MEM_LIMIT).  A forked child drops the inherited slot and
 * attaches again on first use.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shim.h"

int tgs_ofd_lock(int fd, int byte, int wait)
{
    struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = byte, .l_len = 1 };
    for (;;) {
        if (fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &fl) == 0)
            return 0;
        if (errno != EINTR)
            return -1;
    }
}

void tgs_ofd_unlock(int fd, int byte)
{
    struct flock fl = { .l_type = F_UNLCK, .l_whence = SEEK_SET, .l_start = byte, .l_len = 1 };
    (void)fcntl(fd, F_OFD_SETLK, &fl);
}

void tgs_heartbeat(void)
{
    struct tgs_slot *s = tgs_slot();
    if (s)
        TGS_RELAXED_STORE(&s->heartbeat_ns, tgs_now_ns());
}

static const char *validate(const struct tgs_seg_header *h, uint64_t size)
{
    static char why[160];
    if (h->magic != TGS_SEG_MAGIC)
        return "bad magic (not a TGS segment)";
    if (h->version != TGS_SEG_VERSION) {
        snprintf(why, sizeof(why), "version %u, this shim understands %u", h->version,
                 TGS_SEG_VERSION);
        return why;
    }
    if (h->header_size != sizeof(struct tgs_seg_header) ||
        h->slot_size != sizeof(struct tgs_slot) || h->lanes != TGS_SEG_LANES)
        return "layout mismatch (header/slot size or lanes)";
    if (h->nslots < 1 || h->nslots > TGS_SEG_MAX_SLOTS)
        return "nslots out of range";
    if (h->total_size != sizeof(struct tgs_seg_header) + (uint64_t)h->nslots * sizeof(struct tgs_slot))
        return "total_size does not match nslots";
    if (h->total_size != size)
        return "file size differs from total_size (truncated?)";
    return NULL;
}

static void map_device_segment(const char *seg_path, int32_t index)
{
    char dir[4096], path[4200];
    snprintf(dir, sizeof(dir), "%s", seg_path);
    snprintf(path, sizeof(path), "%s/device-%d.seg", dirname(dir), (int)index);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return; /* only gating needs it: reported when a gate flag asks for it */
    struct stat st;
    void *p = MAP_FAILED;
    if (fstat(fd, &st) == 0 && st.st_size == (off_t)sizeof(struct tgs_dev_segment))
        p = mmap(NULL, sizeof(struct tgs_dev_segment), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return;
    struct tgs_dev_segment *d = p;
    if (d->magic != TGS_DEV_MAGIC || d->version != TGS_DEV_VERSION ||
        d->size != sizeof(struct tgs_dev_segment)) {
        munmap(p, sizeof(*d));
        return;
    }
    tgs_g.dev = d;
}

static void fill_slot(struct tgs_slot *s, const struct tgs_seg_header *h)
{
    s->pid = (int32_t)getpid();
    s->generation++;
    s->claimed_ns = tgs_now_ns();
    s->lanes_used = 0;
    memset(s->comm, 0, sizeof(s->comm));
    extern char *program_invocation_short_name;
    strncpy(s->comm, program_invocation_short_name, sizeof(s->comm) - 1);
    memset(s->lanes, 0, sizeof(s->lanes));
    s->inflight_work = s->oom_count = s->alloc_count = 0;
    s->dev_active = 0;
    /* a new slot starts from the job's defaults; the controller may change them later */
    s->burst = TGS_RELAXED_LOAD(&h->default_burst);
    s->inflight_cap = TGS_RELAXED_LOAD(&h->default_inflight_cap);
    s->rate = TGS_RELAXED_LOAD(&h->default_rate);
    s->heartbeat_ns = s->claimed_ns;
    __atomic_store_n(&s->state, TGS_SLOT_ACTIVE, __ATOMIC_RELEASE);
}

static int attach(void)
{
    const char *path = tgs_g.opt.segment_path;
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        tgs_log(TGS_LOG_ERROR, "segment %s: %s; running without the job's limits", path,
                strerror(errno));
        return -1;
    }
    struct stat st;
    const char *why = NULL;
    void *p = MAP_FAILED;
    if (fstat(fd, &st) != 0 || st.st_size < (off_t)sizeof(struct tgs_seg_header))
        why = "file smaller than a segment header (truncated?)";
    else
        p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (!why && p == MAP_FAILED)
        why = strerror(errno);
    if (!why)
        why = validate(p, (uint64_t)st.st_size);
    if (why) {
        tgs_log(TGS_LOG_ERROR, "segment %s: %s; running without the job's limits", path, why);
        if (p != MAP_FAILED)
            munmap(p, (size_t)st.st_size);
        close(fd);
        return -1;
    }
    struct tgs_seg_header *h = p;
    tgs_g.fd = fd;
    tgs_g.hdr = h;
    tgs_g.map_size = (size_t)st.st_size;
    map_device_segment(path, h->device_index);
    for (uint32_t i = 0; i < h->nslots; i++) {
        if (tgs_ofd_lock(fd, TGS_SEG_LOCK_SLOT_BASE + (int)i, 0) != 0)
            continue;
        struct tgs_slot *s = (struct tgs_slot *)((char *)p + h->header_size +
                                                 (size_t)i * h->slot_size);
        if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != TGS_SLOT_FREE)
            tgs_reclaim_slot_locked(s); /* its owner died */
        fill_slot(s, h);
        tgs_g.slot = s;
        tgs_g.slot_idx = (int)i;
        tgs_g.epoch++;
        tgs_g.lanes_next = 0;
        tgs_log(TGS_LOG_INFO, "attached to %s slot %u", path, i);
        return 0;
    }
    tgs_log(TGS_LOG_ERROR, "segment %s: all %u slots are taken; running without the job's limits",
            path, h->nslots);
    munmap(p, tgs_g.map_size);
    close(fd);
    tgs_g.fd = -1;
    tgs_g.hdr = NULL;
    return -1;
}

void tgs_attach_slow(void)
{
    tgs_ensure_init();
    pthread_mutex_lock(&tgs_g.attach_mu);
    if (__atomic_load_n(&tgs_g.attach_state, __ATOMIC_ACQUIRE) == TGS_ATTACH_NONE) {
        int ok = tgs_g.opt.segment_path[0] && tgs_g.real.handle && attach() == 0;
        __atomic_store_n(&tgs_g.attach_state, ok ? TGS_ATTACH_OK : TGS_ATTACH_OFF,
                         __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&tgs_g.attach_mu);
}

/* A thread's first launch takes a lane of its own; when they run out, the
 * last lane is shared (atomic adds). */
struct tgs_lane *tgs_lane_slow(struct tgs_slot *s)
{
    uint32_t n = __atomic_fetch_add(&tgs_g.lanes_next, 1, __ATOMIC_RELAXED);
    uint32_t i = n < TGS_SEG_LANES - 1 ? n : TGS_SEG_LANES - 1;
    tgs_tls.shared = (i == TGS_SEG_LANES - 1);
    uint32_t used = i + 1;
    if (TGS_RELAXED_LOAD(&s->lanes_used) < used)
        TGS_RELAXED_STORE(&s->lanes_used, used);
    tgs_tls.lane = &s->lanes[i];
    tgs_tls.epoch = tgs_g.epoch;
    return tgs_tls.lane;
}

void tgs_atfork_child(void)
{
    /* The inherited descriptor shares the parent's open file description and
     * therefore its slot lock: close it, forget the slot, attach anew later. */
    pthread_mutex_init(&tgs_g.attach_mu, NULL);
    pthread_mutex_init(&tgs_g.ledger_mu, NULL);
    pthread_mutex_init(&tgs_g.inflight_mu, NULL);
    pthread_mutex_init(&tgs_g.ptrs.mu, NULL);
    pthread_mutex_init(&tgs_g.graphs.mu, NULL);
    if (tgs_g.fd >= 0)
        close(tgs_g.fd);
    if (tgs_g.hdr)
        munmap(tgs_g.hdr, tgs_g.map_size);
    if (tgs_g.dev)
        munmap(tgs_g.dev, sizeof(*tgs_g.dev));
    tgs_g.fd = -1;
    tgs_g.hdr = NULL;
    tgs_g.slot = NULL;
    tgs_g.dev = NULL;
    tgs_g.slot_idx = -1;
    tgs_g.epoch++;
    tgs_g.local_used = 0;
    tgs_g.dev_active = 0;
    tgs_g.launched_work = tgs_g.retired_work = 0;
    tgs_g.ev_head = tgs_g.ev_tail = 0;
    tgs_fit_reset();
    tgs_ptrmap_reset(&tgs_g.ptrs);
    tgs_tls.lane = NULL;
    __atomic_store_n(&tgs_g.attach_state, TGS_ATTACH_NONE, __ATOMIC_RELEASE);
}

/* Clean exit: our memory goes back to the job and the slot is freed.  The
 * mapping stays (another thread may still be running). */
void tgs_detach(void)
{
    if (__atomic_load_n(&tgs_g.attach_state, __ATOMIC_ACQUIRE) != TGS_ATTACH_OK)
        return;
    pthread_mutex_lock(&tgs_g.attach_mu);
    struct tgs_slot *s = tgs_g.slot;
    if (s && tgs_g.fd >= 0) {
        tgs_gate_idle();
        tgs_reclaim_slot_locked(s);
        tgs_ofd_unlock(tgs_g.fd, TGS_SEG_LOCK_SLOT_BASE + tgs_g.slot_idx);
    }
    __atomic_store_n(&tgs_g.attach_state, TGS_ATTACH_OFF, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&tgs_g.attach_mu);
}

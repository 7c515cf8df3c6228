/*
 * libshim/peers.c: what a process reads of the OTHER jobs on its device,
 * all of it read-only: the device segment (controller-owned: the list of
 * jobs) and the publish pages of the jobs it lists (tenant-owned: each is
 * written by its own job only).
 *
 * Mappings live in one fixed region of TGS_PEER_PAGES pages (tgs_g.peers):
 * page k holds the pub of device-table entry k, the last page the device
 * segment.  A page is never unmapped: a job that leaves, a pub that is
 * invalid, or a page whose file was truncated under us gets an anonymous
 * zero page MAP_FIXED over it, so a reader racing with a change reads
 * either the old file, the new one or zeros ("idle, no history"), never an
 * unmapped address.
 *
 * A pub's owner can truncate its file: the SIGBUS guard (sigbus.c) then puts
 * a zero page over the faulting page of the region and flags it; the next
 * slow path here re-validates it.
 *
 * The table is re-read when the device segment's list_seq changes (one
 * relaxed load on gated launches), under its sequence lock.
 */
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shim.h"

#define RETRY_NS 100000000ull    /* a missing/invalid file is looked at again after 100 ms */
#define TABLE_RETRY_NS 1000000ull /* a table caught mid-write is read again after 1 ms */

static size_t page_size(void)
{
    return tgs_g.peers.page;
}

static char *page_at(int k)
{
    return tgs_g.peers.region + (size_t)k * page_size();
}

static const struct tgs_pub *pub_at(int k)
{
    return (const struct tgs_pub *)page_at(k);
}

static int zero_page(int k)
{
    return mmap(page_at(k), page_size(), PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
                0) != MAP_FAILED;
}

/* ---------------------------------------------------------------- mapping */

/* Map a regular file of exactly `size` bytes read-only over page k. */
static int map_over(int k, const char *path, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return 0;
    struct stat st;
    int ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == (off_t)size &&
             mmap(page_at(k), page_size(), PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0) != MAP_FAILED;
    close(fd);
    return ok;
}

static bool name_ok(const char *n)
{
    size_t len = strnlen(n, TGS_SEG_NAME_MAX);
    if (len == 0 || len == TGS_SEG_NAME_MAX || n[0] == '.')
        return false;
    for (size_t i = 0; i < len; i++)
        if (n[i] == '/')
            return false;
    return true;
}

static int map_pub(int k, const char *name)
{
    char dir[4096], path[4200];
    tgs_pub_dir(dir, sizeof(dir));
    snprintf(path, sizeof(path), "%.4000s/%.64s.pub", dir, name);
    if (!map_over(k, path, sizeof(struct tgs_pub)))
        return 0;
    const struct tgs_pub *p = pub_at(k);
    return p->magic == TGS_PUB_MAGIC && p->version == TGS_SEG_VERSION &&
           p->size == sizeof(*p) && strncmp(p->job_name, name, TGS_SEG_NAME_MAX) == 0;
}

static int map_dev(void)
{
    struct tgs_peers *P = &tgs_g.peers;
    int k = TGS_PEER_PAGES - 1;
    char path[4200];
    tgs_device_path(path, sizeof(path), tgs_g.ctl->id.device_index);
    __atomic_store_n(&P->dev, NULL, __ATOMIC_RELEASE);
    if (!map_over(k, path, sizeof(struct tgs_dev_segment)))
        return 0;
    const struct tgs_dev_segment *d = (const struct tgs_dev_segment *)page_at(k);
    if (d->magic != TGS_DEV_MAGIC || d->version != TGS_DEV_VERSION || d->size != sizeof(*d) ||
        d->device_index != tgs_g.ctl->id.device_index) {
        zero_page(k);
        return 0;
    }
    __atomic_store_n(&P->dev, d, __ATOMIC_RELEASE);
    return 1;
}

/* A consistent copy of the job table (sequence lock); 0 if the controller
 * stayed mid-write. */
static int read_table(const struct tgs_dev_segment *d, struct tgs_dev_job *out, uint32_t *n,
                      uint64_t *seq)
{
    for (int tries = 0; tries < 8; tries++) {
        uint64_t s1 = __atomic_load_n(&d->list_seq, __ATOMIC_ACQUIRE);
        if (s1 & 1) {
            tgs_sleep_ns(1000);     /* the controller is writing it: a few microseconds */
            continue;
        }
        uint32_t nj = __atomic_load_n(&d->njobs, __ATOMIC_RELAXED);
        memcpy(out, d->jobs, sizeof(d->jobs));
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&d->list_seq, __ATOMIC_RELAXED) == s1) {
            *n = nj < TGS_DEV_MAX_JOBS ? nj : TGS_DEV_MAX_JOBS;
            *seq = s1;
            return 1;
        }
    }
    return 0;
}

static void refresh_locked(uint64_t now)
{
    struct tgs_peers *P = &tgs_g.peers;
    if (!P->region) {
        long pg = sysconf(_SC_PAGESIZE);
        P->page = pg > 0 ? (size_t)pg : 4096;
        void *r = mmap(NULL, (size_t)TGS_PEER_PAGES * P->page, PROT_READ,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (r == MAP_FAILED)
            return;
        P->region = r;
    }
    tgs_guard_install();
    P->damaged = 0;
    int dk = TGS_PEER_PAGES - 1;
    if (!P->dev || P->page_damaged[dk]) {
        P->page_damaged[dk] = 0;
        if (!map_dev()) {
            P->retry_ns = now + RETRY_NS;
            return;
        }
    }
    struct tgs_dev_job jobs[TGS_DEV_MAX_JOBS];
    uint32_t n = 0;
    uint64_t seq = 0;
    if (!read_table(P->dev, jobs, &n, &seq)) {
        P->retry_ns = now + TABLE_RETRY_NS;   /* keep the old table until then */
        return;
    }
    uint64_t next = 0;                        /* the earliest pending retry of a pub */
    int nopp = 0;
    for (int k = 0; k < TGS_DEV_MAX_JOBS; k++) {
        struct tgs_peer *e = &P->e[k];
        const struct tgs_dev_job *j = &jobs[k];
        int want = (uint32_t)k < n && (j->flags & TGS_DEV_JOB_USED) && name_ok(j->name);
        int same = want && e->used && !P->page_damaged[k] && e->generation == j->generation &&
                   strncmp(e->name, j->name, TGS_SEG_NAME_MAX) == 0;
        int retry = want && !e->used && e->retry_ns && now < e->retry_ns &&
                    e->generation == j->generation &&
                    strncmp(e->name, j->name, TGS_SEG_NAME_MAX) == 0;
        int up = same;                        /* mapped and valid */
        if (!same && !retry) {
            if (P->page_damaged[k])
                tgs_log(TGS_LOG_INFO, "the publish page of job %.64s was truncated under us: "
                        "it reads as idle until it is valid again", e->name);
            __atomic_store_n(&e->used, 0, __ATOMIC_RELEASE);
            P->page_damaged[k] = 0;
            int ok = want && map_pub(k, j->name);
            if (!ok)
                zero_page(k);
            e->retry_ns = want && !ok ? now + RETRY_NS : 0;
            if (want) {
                memcpy(e->name, j->name, TGS_SEG_NAME_MAX);
                e->generation = j->generation;
            }
            up = ok;
        }
        if (!want)
            continue;
        nopp += j->priority == TGS_PRIORITY_OPPORTUNISTIC;
        if (!up) {                            /* missing or invalid: looked at again later */
            if (!next || e->retry_ns < next)
                next = e->retry_ns;
            continue;
        }
        e->priority = j->priority;
        e->busy_bias = j->busy_bias;
        e->gap_mask = j->gap_mask;
        __atomic_store_n(&e->used, 1, __ATOMIC_RELEASE);
    }
    P->retry_ns = next;
    __atomic_store_n(&P->nopp, nopp, __ATOMIC_RELAXED);
    P->list_seq = seq;
}

int tgs_peers_refresh(void)
{
    struct tgs_peers *P = &tgs_g.peers;
    const struct tgs_dev_segment *d = __atomic_load_n(&P->dev, __ATOMIC_ACQUIRE);
    if (TGS_LIKELY(d && !P->damaged && !P->retry_ns &&
                   __atomic_load_n(&d->list_seq, __ATOMIC_ACQUIRE) == P->list_seq)) {
        if (P->guard)
            tgs_guard_recheck();
        return 1;
    }
    if (!tgs_g.ctl)
        return 0;
    uint64_t now = tgs_now_ns();
    if (P->retry_ns && now < P->retry_ns && !P->damaged)
        return d != NULL;   /* a list change is picked up at the retry, at most 100 ms late */
    pthread_mutex_lock(&P->mu);
    refresh_locked(now);
    pthread_mutex_unlock(&P->mu);
    return __atomic_load_n(&P->dev, __ATOMIC_ACQUIRE) != NULL;
}

void tgs_peers_reset(void)
{
    /* a forked child keeps the region (and the guard) and re-reads the table */
    struct tgs_peers *P = &tgs_g.peers;
    pthread_mutex_init(&P->mu, NULL);
    P->list_seq = ~0ull;
    P->retry_ns = 0;
    P->damaged = 1;
}

/* ---------------------------------------------------------------- readers */

static bool is_prod(int k)
{
    struct tgs_peer *e = &tgs_g.peers.e[k];
    return __atomic_load_n(&e->used, __ATOMIC_ACQUIRE) &&
           e->priority == TGS_PRIORITY_PRODUCTION;
}

/* The first production job at index k or after (TGS_DEV_MAX_JOBS: none, or no device table
 * mapped); FOR_EACH_PROD walks them all. */
static int prod_from(int k)
{
    if (!tgs_g.peers.region)
        return TGS_DEV_MAX_JOBS;
    while (k < TGS_DEV_MAX_JOBS && !is_prod(k))
        k++;
    return k;
}
#define FOR_EACH_PROD(k) for (int k = prod_from(0); k < TGS_DEV_MAX_JOBS; k = prod_from(k + 1))

static bool busy_at(int k)
{
    /* more than plausible still only means "busy": production is entitled to it */
    return __atomic_load_n(&pub_at(k)->busy, __ATOMIC_ACQUIRE) > tgs_g.peers.e[k].busy_bias;
}

bool tgs_prod_busy(void)
{
    FOR_EACH_PROD(k)
        if (busy_at(k))
            return true;
    return false;
}

static uint64_t ring_max(const struct tgs_pub *p)
{
    uint64_t hi = 0;
    for (int i = 0; i < TGS_GAP_RING; i++) {
        uint64_t g = __atomic_load_n(&p->gap_ns[i], __ATOMIC_RELAXED);
        hi = g > hi ? g : hi;
    }
    return hi;
}

/* The end of the current gap: the earliest (idle start + predicted gap) over the production
 * jobs that can come back soon.  A job without gap history (it never ran, has not left a gap
 * yet, or erased its own page) says nothing about the others' gaps, and one whose gap has long
 * outlasted its own history (it stopped, or is in a long host phase) must not pin the end in the
 * past for everybody: both are left out, so no production tenant can switch FIT off for, or
 * hold back, the rest of the device.  If every job with history is
 * in such a long gap, the latest one counts (the caller's "outlasted" rule then lets one
 * kernel at a time go).  0 = no job has usable history: plain WAIT. */
uint64_t tgs_prod_gap_end(uint64_t now, uint64_t *idle)
{
    uint64_t end = 0, hi = 0, fb_since = 0, fb_end = 0;
    *idle = 0;
    FOR_EACH_PROD(k) {
        const struct tgs_pub *p = pub_at(k);
        uint64_t since = __atomic_load_n(&p->idle_since_ns, __ATOMIC_ACQUIRE);
        uint64_t pred = __atomic_load_n(&p->gap_pred_ns, __ATOMIC_ACQUIRE);
        if (!since || !pred || since > UINT64_MAX - pred)
            continue;                       /* no usable history: says nothing */
        uint64_t age = now > since ? now - since : 0;
        uint64_t top = ring_max(p);
        if (age > 2 * top && since + pred < now) {
            if (since > fb_since) {         /* outlasted: kept only as a fallback */
                fb_since = since;
                fb_end = since + pred;
            }
            continue;
        }
        hi = since > hi ? since : hi;
        if (!end || since + pred < end)
            end = since + pred;
    }
    if (!end && fb_end) {
        hi = fb_since;
        end = fb_end;
    }
    *idle = hi;
    return end;
}

/* Do some production job's recent gaps end at random: the longest at least `spread` times the
 * second shortest?  Not the shortest: one short gap among regular ones (a training step's host
 * hiccup) is an outlier, not a pattern, and would otherwise make a regular job look random for
 * as long as it stays in the ring. */
uint64_t tgs_prod_gaps_spread(uint64_t spread)
{
    uint64_t shortest = 0;
    FOR_EACH_PROD(k) {
        const struct tgs_pub *p = pub_at(k);
        uint64_t lo1 = UINT64_MAX, lo2 = UINT64_MAX, hi = 0;
        for (int i = 0; i < TGS_GAP_RING; i++) {
            uint64_t g = __atomic_load_n(&p->gap_ns[i], __ATOMIC_RELAXED);
            if (!g)
                continue;
            hi = g > hi ? g : hi;
            if (g < lo1) {
                lo2 = lo1;
                lo1 = g;
            } else if (g < lo2) {
                lo2 = g;
            }
        }
        if (lo2 != UINT64_MAX && lo2 <= UINT64_MAX / spread && hi >= spread * lo2 &&
            (!shortest || lo1 < shortest))
            shortest = lo1;
    }
    return shortest;
}

uint64_t tgs_prod_gap_max(void)
{
    uint64_t hi = 0;
    FOR_EACH_PROD(k) {
        uint64_t g = ring_max(pub_at(k));
        hi = g > hi ? g : hi;
    }
    return hi;
}

uint64_t tgs_prod_gap_last(void)
{
    uint64_t last = 0;
    FOR_EACH_PROD(k) {
        const struct tgs_pub *p = pub_at(k);
        uint64_t i = __atomic_load_n(&p->gap_idx, __ATOMIC_RELAXED);
        if (i)
            last = __atomic_load_n(&p->gap_ns[(i - 1) % TGS_GAP_RING], __ATOMIC_RELAXED);
    }
    return last;
}

uint64_t tgs_prod_seq(void)
{
    uint64_t sum = 0;
    FOR_EACH_PROD(k)
        sum += __atomic_load_n(&pub_at(k)->busy_seq, __ATOMIC_ACQUIRE);
    return sum;
}

int tgs_prod_present(void)
{
    if (!tgs_peers_refresh() || !tgs_g.peers.region)
        return -1;
    return prod_from(0) < TGS_DEV_MAX_JOBS;
}

int tgs_opp_jobs(void)
{
    /* from the controller's table, not the pubs: a job whose page is missing still counts */
    return __atomic_load_n(&tgs_g.peers.nopp, __ATOMIC_RELAXED);
}

uint64_t tgs_gap_owner_claim(uint64_t seq, int *owned)
{
    *owned = 0;
    if (!tgs_g.peers.region)
        return 0;
    for (int k = 0; k < TGS_DEV_MAX_JOBS; k++) {
        struct tgs_peer *e = &tgs_g.peers.e[k];
        if (__atomic_load_n(&e->used, __ATOMIC_ACQUIRE) &&
            e->priority == TGS_PRIORITY_OPPORTUNISTIC && ((e->gap_mask >> (seq % 64)) & 1)) {
            *owned = 1;
            return __atomic_load_n(&pub_at(k)->gap_claim, __ATOMIC_ACQUIRE);
        }
    }
    return 0;
}

const uint32_t *tgs_prod_futex(uint32_t *val)
{
    FOR_EACH_PROD(k) {
        const struct tgs_pub *p = pub_at(k);
        uint32_t v = __atomic_load_n(&p->idle_futex, __ATOMIC_ACQUIRE);
        if (busy_at(k)) {
            *val = v;
            return &p->idle_futex;
        }
    }
    return NULL;
}

/*
 * libshim/files.c: finding, opening, validating and mapping the job's files
 * (segment.h): the control segment read-only, the job segment read-write,
 * the job's own publish page read-write; and the OFD lock helpers.  Every file
 * is opened O_NOFOLLOW|O_NONBLOCK and must be a regular file of the size its
 * header says; any problem is one "tgs:" line and a NULL.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
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

bool tgs_ofd_held(int fd, int byte)
{
    struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = byte, .l_len = 1 };
    if (fcntl(fd, F_OFD_GETLK, &fl) != 0)
        return true; /* unknown: assume alive (never steal on doubt) */
    return fl.l_type != F_UNLCK;
}

static const char *validate_ident(const struct tgs_ident *id, uint64_t magic, uint32_t hsize,
                                  uint32_t ssize, uint64_t size)
{
    static char why[160];
    if (id->magic != magic)
        return "bad magic (not a TGS file of this kind)";
    if (id->version != TGS_SEG_VERSION) {
        snprintf(why, sizeof(why), "version %u, this shim understands %u", id->version,
                 TGS_SEG_VERSION);
        return why;
    }
    if (id->header_size != hsize || id->slot_size != ssize || id->lanes != TGS_SEG_LANES)
        return "layout mismatch (header/slot size or lanes)";
    if (id->nslots < 1 || id->nslots > TGS_SEG_MAX_SLOTS)
        return "nslots out of range";
    if (id->total_size != hsize + (uint64_t)id->nslots * ssize)
        return "total_size does not match nslots";
    if (id->total_size != size)
        return "file size differs from total_size (truncated?)";
    return NULL;
}

/* Map a whole regular file; *why says what failed. */
static void *map_file(const char *path, int flags, int prot, size_t min, int *fd_out,
                      size_t *size_out, const char **why)
{
    int fd = open(path, flags | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
        *why = strerror(errno);
        return NULL;
    }
    struct stat st;
    void *p = MAP_FAILED;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        *why = "not a regular file";
    else if (st.st_size < (off_t)min)
        *why = "file smaller than its header (truncated?)";
    else if ((p = mmap(NULL, (size_t)st.st_size, prot, MAP_SHARED, fd, 0)) == MAP_FAILED)
        *why = strerror(errno);
    if (p == MAP_FAILED) {
        close(fd);
        return NULL;
    }
    *size_out = (size_t)st.st_size;
    if (fd_out)
        *fd_out = fd;
    else
        close(fd);
    return p;
}

/* The path next to the segment: TGS_SEGMENT's directory + "/" + leaf. */
static void beside_segment(char *out, size_t cap, const char *leaf)
{
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s", tgs_g.opt.segment_path);
    snprintf(out, cap, "%s/%s", dirname(dir), leaf);
}

static void ctl_path(char *out, size_t cap)
{
    const char *seg = tgs_g.opt.segment_path;
    if (tgs_g.opt.ctl_path[0]) {
        snprintf(out, cap, "%s", tgs_g.opt.ctl_path);
        return;
    }
    size_t n = strlen(seg);
    if (n > 4 && strcmp(seg + n - 4, ".seg") == 0)
        snprintf(out, cap, "%.*s.ctl", (int)(n - 4), seg);
    else
        snprintf(out, cap, "%s.ctl", seg);
}

/* Our own publish page (read-write): production's busy count and gaps, an
 * opportunistic job's gap claim.  Missing or invalid: no publishing. */
struct tgs_pub *tgs_map_own_pub(const struct tgs_ctl_header *c)
{
    char path[4200];
    if (tgs_g.opt.pub_path[0])
        snprintf(path, sizeof(path), "%s", tgs_g.opt.pub_path);
    else if (tgs_g.opt.pub_dir[0])
        snprintf(path, sizeof(path), "%s/%.64s.pub", tgs_g.opt.pub_dir, c->id.job_name);
    else {
        char leaf[96];
        snprintf(leaf, sizeof(leaf), "pub/%.64s.pub", c->id.job_name);
        beside_segment(path, sizeof(path), leaf);
    }
    const char *why = NULL;
    size_t size = 0;
    struct tgs_pub *p = map_file(path, O_RDWR, PROT_READ | PROT_WRITE, sizeof(struct tgs_pub),
                                 NULL, &size, &why);
    if (p && (size != sizeof(*p) || p->magic != TGS_PUB_MAGIC || p->version != TGS_SEG_VERSION ||
              p->size != sizeof(*p) ||
              strncmp(p->job_name, c->id.job_name, TGS_SEG_NAME_MAX) != 0)) {
        why = "not this job's publish page";
        munmap(p, size);
        p = NULL;
    }
    if (!p) {
        uint32_t gate = TGS_RELAXED_LOAD(&c->gate_flags);
        if (gate && !__atomic_exchange_n(&tgs_g.gate_warned, 1, __ATOMIC_RELAXED))
            tgs_log(TGS_LOG_WARN, "publish page %s: %s; %s", path, why,
                    (gate & TGS_GATE_PUBLISH) ? "this job's activity is not published"
                                              : "this job's gap claims are not published");
        return NULL;
    }
    return p;
}

/* For peers.c: where the device segment and the other jobs' pubs are. */
void tgs_device_path(char *out, size_t cap, int32_t index)
{
    if (tgs_g.opt.device_path[0]) {
        snprintf(out, cap, "%s", tgs_g.opt.device_path);
        return;
    }
    char leaf[64];
    snprintf(leaf, sizeof(leaf), TGS_DEV_SEG_NAME, (int)index);
    beside_segment(out, cap, leaf);
}

void tgs_pub_dir(char *out, size_t cap)
{
    if (tgs_g.opt.pub_dir[0])
        snprintf(out, cap, "%s", tgs_g.opt.pub_dir);
    else
        beside_segment(out, cap, "pub");
}

const struct tgs_ctl_header *tgs_map_ctl(size_t *csize)
{
    char cpath[4200];
    ctl_path(cpath, sizeof(cpath));
    const char *why = NULL;
    const struct tgs_ctl_header *c = map_file(cpath, O_RDONLY, PROT_READ,
                                              sizeof(struct tgs_ctl_header), NULL, csize, &why);
    if (c && (why = validate_ident(&c->id, TGS_CTL_MAGIC, sizeof(struct tgs_ctl_header),
                                   sizeof(struct tgs_ctl_slot), *csize))) {
        munmap((void *)c, *csize);
        c = NULL;
    }
    if (!c)
        tgs_log(TGS_LOG_ERROR, "control segment %s: %s; running without the job's limits", cpath,
                why);
    return c;
}

struct tgs_seg_header *tgs_map_seg(const struct tgs_ctl_header *c, int *fd, size_t *size,
                                   const char **why_out)
{
    const char *path = tgs_g.opt.segment_path, *why = NULL;
    struct tgs_seg_header *h = map_file(path, O_RDWR, PROT_READ | PROT_WRITE,
                                        sizeof(struct tgs_seg_header), fd, size, &why);
    if (h && (why = validate_ident(&h->id, TGS_SEG_MAGIC, sizeof(struct tgs_seg_header),
                                   sizeof(struct tgs_slot), *size)) == NULL &&
        (h->id.nslots != c->id.nslots || h->id.created_ns != c->id.created_ns ||
         strncmp(h->id.job_name, c->id.job_name, TGS_SEG_NAME_MAX) != 0))
        why = "does not belong to the job of its control segment";
    if (h && why) {
        munmap(h, *size);
        close(*fd);
        *fd = -1;
        h = NULL;
    }
    *why_out = why;
    return h;
}

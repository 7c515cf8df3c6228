/*
 * libshim/parts.c: a job over several GPUs (docs/segment.md, "Multi-device
 * jobs").  TGS_PARTS lists the job's parts, one full file set per device, as
 * their .seg paths separated by ';' in the job's device order.  At attach a
 * process takes the part of the device it works on: the current context's
 * device (the real cuCtxGetDevice), named by its UUID (cuDeviceGetUuid_v2),
 * compared with each part's identity device_uuid read from its .ctl
 * (read-only, never mapped here).  UUIDs, never ordinals: ordinals move under
 * CUDA_VISIBLE_DEVICES.  The part is chosen once; the launch path is the
 * single-device one.  No context yet: choose later.  No part of this device:
 * one stderr line, pass-through.  The chosen part's .ctl and device-<i>.seg
 * are beside its .seg (TGS_CTL and TGS_DEVICE_SEG, which name one file, are
 * ignored); its own publish page is <dir of TGS_PUB>/<part>.pub when TGS_PUB
 * is set, else <segment dir>/pub/<part>.pub (TGS_PUB_DIR: the peers' pubs).
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "shim.h"

int tgs_cuda_uuid(CUdevice dev, char *out, size_t cap)
{
    CUuuid u;
    CUresult r = CUDA_ERROR_NOT_FOUND;
    if (tgs_g.real.cuDeviceGetUuid_v2)
        r = tgs_g.real.cuDeviceGetUuid_v2(&u, dev);
    else if (tgs_g.real.cuDeviceGetUuid)
        r = tgs_g.real.cuDeviceGetUuid(&u, dev);
    if (r != CUDA_SUCCESS)
        return -1;
    const unsigned char *b = (const unsigned char *)u.bytes;
    snprintf(out, cap,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
             b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
    return 0;
}

int tgs_current_device(CUdevice *dev)
{
    return tgs_g.real.cuCtxGetDevice && tgs_g.real.cuCtxGetDevice(dev) == CUDA_SUCCESS ? 0 : -1;
}

/* The k-th path of TGS_PARTS into out; -1 past the end or too long. */
static int part_path(int k, char *out, size_t cap)
{
    const char *p = tgs_g.opt.parts;
    for (int i = 0; i < k; i++) {
        p = strchr(p, ';');
        if (!p)
            return -1;
        p++;
    }
    size_t n = strcspn(p, ";");
    if (n == 0 || n >= cap)
        return -1;
    memcpy(out, p, n);
    out[n] = '\0';
    return 0;
}

/* The .ctl beside a part's .seg (files.c's rule). */
static void part_ctl(const char *seg, char *out, size_t cap)
{
    size_t n = strlen(seg);
    if (n > 4 && strcmp(seg + n - 4, ".seg") == 0)
        snprintf(out, cap, "%.*s.ctl", (int)(n - 4), seg);
    else
        snprintf(out, cap, "%s.ctl", seg);
}

/* A part's control header, read (not mapped) from its .ctl; 0 when valid. */
static int read_ctl(const char *seg, struct tgs_ctl_header *h)
{
    char path[4200];
    part_ctl(seg, path, sizeof(path));
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return -1;
    ssize_t n;
    do
        n = pread(fd, h, sizeof(*h), 0);
    while (n < 0 && errno == EINTR);
    close(fd);
    if (n != (ssize_t)sizeof(*h) || h->id.magic != TGS_CTL_MAGIC ||
        h->id.version != TGS_SEG_VERSION)
        return -1;
    h->id.device_uuid[sizeof(h->id.device_uuid) - 1] = '\0';
    return 0;
}

/* The part whose identity names device uuid: its index, its path in seg. */
static int find_part(const char *uuid, char *seg, size_t cap, struct tgs_ctl_header *h)
{
    for (int k = 0; part_path(k, seg, cap) == 0; k++)
        if (read_ctl(seg, h) == 0 && strcmp(h->id.device_uuid, uuid) == 0)
            return k;
    return -1;
}

int tgs_pick_part(void)
{
    CUdevice dev;
    if (!tgs_g.real.cuCtxGetDevice ||
        !(tgs_g.real.cuDeviceGetUuid_v2 || tgs_g.real.cuDeviceGetUuid)) {
        tgs_log(TGS_LOG_ERROR, "TGS_PARTS: the driver has no cuCtxGetDevice/cuDeviceGetUuid; "
                "running without the job's limits");
        return -1;
    }
    if (tgs_current_device(&dev) != 0)
        return 1; /* no context yet: the device is not known */
    char uuid[64], seg[sizeof(tgs_g.opt.segment_path)];
    if (tgs_cuda_uuid(dev, uuid, sizeof(uuid)) != 0) {
        tgs_log(TGS_LOG_ERROR, "TGS_PARTS: cannot read the UUID of device %d; running without "
                "the job's limits", (int)dev);
        return -1;
    }
    struct tgs_ctl_header h;
    int k = find_part(uuid, seg, sizeof(seg), &h);
    if (k < 0) {
        tgs_log(TGS_LOG_ERROR, "TGS_PARTS: no part of the job is on this process's device %s; "
                "running without the job's limits", uuid);
        return -1;
    }
    memcpy(tgs_g.opt.segment_path, seg, strlen(seg) + 1);
    /* the part's .ctl and device segment beside its .seg; its own pub in TGS_PUB's
     * directory when TGS_PUB is set (a container's writable pubs), else in pub/ */
    tgs_g.opt.ctl_path[0] = tgs_g.opt.device_path[0] = '\0';
    if (tgs_g.opt.pub_path[0]) {
        char *slash = strrchr(tgs_g.opt.pub_path, '/');
        size_t dir = slash ? (size_t)(slash - tgs_g.opt.pub_path) + 1 : 0;
        h.id.job_name[sizeof(h.id.job_name) - 1] = '\0';
        snprintf(tgs_g.opt.pub_path + dir, sizeof(tgs_g.opt.pub_path) - dir, "%s.pub",
                 h.id.job_name);
    }
    tgs_g.part_dev = (int)dev + 1;
    tgs_log(TGS_LOG_INFO, "device %s: the job's part %d (%s)", uuid, k, seg);
    return 0;
}

int tgs_part_by_uuid(const char *uuid, char *seg, size_t cap, struct tgs_ctl_header *h)
{
    return tgs_g.opt.parts[0] ? find_part(uuid, seg, cap, h) : -1;
}

void tgs_part_warn(CUdevice dev)
{
    if (!__atomic_exchange_n(&tgs_g.part_warned, 1, __ATOMIC_RELAXED))
        tgs_log(TGS_LOG_WARN, "this process works on device %d too, its part of the job is "
                "device %d's: its allocations on every device are charged to that part "
                "(docs/usage.md)", (int)dev, tgs_g.part_dev - 1);
}

int tgs_other_device(CUdevice *dev)
{
    return tgs_g.opt.parts[0] && tgs_g.part_dev && tgs_current_device(dev) == 0 &&
           (int)*dev != tgs_g.part_dev - 1;
}

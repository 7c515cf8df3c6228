/*
 * init.c: nvmlInit/nvmlShutdown (reference counted, as NVML's), mapping the
 * simulator's state file read-only, and creating it through the simulated
 * driver beside this library when no CUDA process has created it yet.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "nvml_sim.h"
#include "tgs/state_path.h"
#include "tgs/log_level.h"

struct nvml_globals g_nvml = {.lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1};

uint64_t nvml_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Errors only, and only when TGS_LOG_LEVEL asks for warnings or more (the
 * default): a real NVML is silent, but a broken state file deserves a line. */
static void warn(const char *fmt, const char *a, const char *b)
{
    if (tgs_log_level_parse(getenv("TGS_LOG_LEVEL")) == TGS_LOG_ERROR)
        return;
    fprintf(stderr, "tgs-nvml: ");
    fprintf(stderr, fmt, a, b);
    fputc('\n', stderr);
}

/* The simulator's own rule (tgs/state_path.h), said in our voice. */
static void state_path(char *buf, size_t n)
{
    const char *why = sim_state_path(buf, n);
    if (why)
        warn("TGS_SIM_STATE %s; using %s", why, buf);
}

/* No state file yet: let the simulated driver next to this library create
 * it (cuInit), so its device UUIDs are the ones every CUDA process will
 * see.  This process then holds a simulator process slot, with no memory and
 * no context, until it exits. */
static int create_through_driver(void)
{
    Dl_info info;
    if (!dladdr((void *)&nvmlInit_v2, &info) || !info.dli_fname)
        return -1;
    char self[4096], path[4200];
    snprintf(self, sizeof self, "%s", info.dli_fname);
    snprintf(path, sizeof path, "%s/libcuda.so.1", dirname(self));
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return -1;
    int (*cu_init)(unsigned int) = (int (*)(unsigned int))dlsym(h, "cuInit");
    return cu_init && cu_init(0) == 0 ? 0 : -1; /* never dlclose: it owns the slot */
}

static nvmlReturn_t map_state(void)
{
    char path[4096];
    state_path(path, sizeof path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && create_through_driver() == 0)
        fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == EACCES) {
            warn("cannot read the simulator's state file %s: %s", path, strerror(errno));
            return NVML_ERROR_NO_PERMISSION;
        }
        return NVML_ERROR_DRIVER_NOT_LOADED;
    }
    struct stat sb;
    size_t size = sizeof(struct sim_state);
    const struct sim_state *st = MAP_FAILED;
    if (fstat(fd, &sb) == 0 && (size_t)sb.st_size == size)
        st = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
    if (st == MAP_FAILED || __atomic_load_n(&st->hdr.magic, __ATOMIC_ACQUIRE) != SIM_STATE_MAGIC ||
        st->hdr.version != SIM_STATE_VERSION || st->hdr.ndevices < 1 ||
        st->hdr.ndevices > SIM_MAX_DEVICES) {
        warn("%s is not a simulator state file of this version (%s)", path,
             "wrong size, magic or version: remove it when no process uses it");
        if (st != MAP_FAILED)
            munmap((void *)st, size);
        close(fd);
        return NVML_ERROR_LIB_RM_VERSION_MISMATCH;
    }
    g_nvml.fd = fd;
    g_nvml.st = st;
    g_nvml.map_size = size;
    if (g_nvml.seed_seen != st->hdr.uuid_seed) { /* another file: forget its samples */
        memset(g_nvml.nsamples, 0, sizeof g_nvml.nsamples);
        g_nvml.seed_seen = st->hdr.uuid_seed;
    }
    for (unsigned int i = 0; i < SIM_MAX_DEVICES; i++)
        g_nvml.dev[i].index = i;
    nvml_util_note_all(st);
    return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
    if (flags & ~(unsigned int)(NVML_INIT_FLAG_NO_GPUS | NVML_INIT_FLAG_NO_ATTACH |
                                NVML_INIT_FLAG_FORCE_INIT))
        return NVML_ERROR_INVALID_ARGUMENT;
    pthread_mutex_lock(&g_nvml.lock);
    nvmlReturn_t r = g_nvml.refs ? NVML_SUCCESS : map_state();
    if (r == NVML_SUCCESS)
        g_nvml.refs++;
    pthread_mutex_unlock(&g_nvml.lock);
    return r;
}

NVML_API nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
NVML_API nvmlReturn_t nvmlInit(void) { return nvmlInitWithFlags(0); }

NVML_API nvmlReturn_t nvmlShutdown(void)
{
    pthread_mutex_lock(&g_nvml.lock);
    nvmlReturn_t r = NVML_SUCCESS;
    if (!g_nvml.refs) {
        r = NVML_ERROR_UNINITIALIZED;
    } else if (--g_nvml.refs == 0) {
        munmap((void *)g_nvml.st, g_nvml.map_size);
        close(g_nvml.fd);
        g_nvml.st = NULL;
        g_nvml.fd = -1;
    }
    pthread_mutex_unlock(&g_nvml.lock);
    return r;
}

const struct sim_state *nvml_state(void)
{
    pthread_mutex_lock(&g_nvml.lock);
    const struct sim_state *st = g_nvml.refs ? g_nvml.st : NULL;
    pthread_mutex_unlock(&g_nvml.lock);
    return st;
}

nvmlReturn_t nvml_put_string(char *buf, unsigned int length, const char *s)
{
    if (!buf)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(s) + 1 > length)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(buf, s, strlen(s) + 1);
    return NVML_SUCCESS;
}

/*
 * trace.c: TGS_SIM_TRACE=<file>, one line per completed kernel, for finding out where a job's
 * device time went (who waited behind whom: tgs.bench.wait_accounting reads it):
 *
 *     <pid> <queued_ns> <started_ns> <ended_ns> <device_ns>
 *
 * pid: the process that launched it (as the state file records it); times: CLOCK_MONOTONIC
 * (started: when it first had the device; ended - started exceeds device_ns by what other
 * contexts ran in between).  Whichever process advances the device completes everyone's
 * kernels, so each process appends to the file (O_APPEND: lines never interleave) the
 * lines its advances produced.  They are kept per device while the device lock is held and
 * written after it is released, so tracing does not lengthen the lock's hold (the lines of
 * one process stay in order; across processes, sort by ended_ns).  A file that cannot be
 * opened is said once and no trace is kept.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim.h"

#define LINE_MAX_BYTES 112

void sim_trace_open(void)
{
    const char *path = getenv("TGS_SIM_TRACE");
    if (!path || !*path || g_sim.tracing)
        return;
    g_sim.trace_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    g_sim.tracing = g_sim.trace_fd >= 0;
    if (!g_sim.tracing)
        sim_log(TGS_LOG_ERROR, "TGS_SIM_TRACE=%s cannot be opened (%s); no trace is kept", path,
                strerror(errno));
}

static void write_all(const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(g_sim.trace_fd, p, n);
        if (w <= 0 && errno != EINTR)
            return; /* a full disk loses trace lines, never the program */
        if (w > 0) {
            p += w;
            n -= (size_t)w;
        }
    }
}

void sim_trace_kernel_locked(int dev, const struct sim_ctx *cx, const struct sim_item *it,
                             uint64_t end_ns)
{
    if (!g_sim.tracing)
        return;
    struct sim_trace_buf *b = &g_sim.trace[dev];
    if (b->len + LINE_MAX_BYTES > sizeof b->data) { /* rare: written under the lock */
        write_all(b->data, b->len);
        b->len = 0;
    }
    int pid = cx->proc >= 0 && cx->proc < SIM_MAX_PROCS ? (int)g_sim.st->proc[cx->proc].pid : 0;
    uint64_t start = it->start_ns ? it->start_ns : end_ns;
    int n = snprintf(b->data + b->len, sizeof b->data - b->len, "%d %llu %llu %llu %llu\n", pid,
                     (unsigned long long)it->enq_ns, (unsigned long long)start,
                     (unsigned long long)end_ns, (unsigned long long)it->dur_ns);
    if (n > 0 && (size_t)n < sizeof b->data - b->len)
        b->len += (size_t)n;
}

void sim_trace_unlock(int dev, pthread_mutex_t *lock)
{
    size_t n = g_sim.tracing ? g_sim.trace[dev].len : 0;
    if (!n) {
        pthread_mutex_unlock(lock);
        return;
    }
    char out[sizeof g_sim.trace[0].data];
    memcpy(out, g_sim.trace[dev].data, n);
    g_sim.trace[dev].len = 0;
    pthread_mutex_unlock(lock);
    write_all(out, n);
}

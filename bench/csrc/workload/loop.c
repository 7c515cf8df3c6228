/*
 * The job itself: warm-up, then iterations of (launch K kernels,
 * synchronize, host gap) for N iterations or T seconds, with progress lines
 * and a summary.  SIGINT/SIGTERM end the run early but still summarise.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "workload.h"

/* The only mutable global: set by the signal handler, read by the loop. */
static struct {
    volatile sig_atomic_t stop;
} wl_signals;

static void wl_on_signal(int sig)
{
    (void)sig;
    wl_signals.stop = 1;
}

void wl_loop_install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = wl_on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

static double wl_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Host-side gap (data loading); a signal cuts it short. */
static void wl_gap(double ms)
{
    if (ms <= 0.0)
        return;
    double ns = ms * 1e6;
    struct timespec req = {(time_t)(ns / 1e9), (long)(ns - (double)(time_t)(ns / 1e9) * 1e9)};
    struct timespec rem;
    while (nanosleep(&req, &rem) != 0 && errno == EINTR && !wl_signals.stop)
        req = rem;
}

/* The phase (--phases) that time t (s since the measured start) falls in. */
static unsigned wl_phase_at(const struct wl_config *cfg, double t)
{
    double cycle = 0.0;
    for (unsigned i = 0; i < cfg->nphases; i++)
        cycle += cfg->phases[i].seconds;
    if (cfg->nphases == 0 || cycle <= 0.0)
        return 0;
    double in = fmod(t < 0.0 ? 0.0 : t, cycle);
    for (unsigned i = 0; i < cfg->nphases; i++) {
        if (in < cfg->phases[i].seconds)
            return i;
        in -= cfg->phases[i].seconds;
    }
    return cfg->nphases - 1;
}

static double wl_gap_at(const struct wl_config *cfg, unsigned phase)
{
    return cfg->nphases ? cfg->phases[phase].gap_ms : cfg->gap_ms;
}

/* One iteration: launch, --ahead bound, synchronize every sync_every iterations, host gap.
 * Returns the seconds spent launching and synchronizing; *synced says whether it synchronized. */
static double wl_iteration(struct wl_run *run, struct wl_counts *counts, double gap_ms,
                           int *synced)
{
    double t0 = wl_now_s();
    wl_launch_iteration(run);
    wl_touch_launch(run);
    wl_ahead_mark(run, counts->launched);
    counts->launched++;
    *synced = counts->launched % run->cfg.sync_every == 0;
    if (*synced)
        wl_synchronize(run);
    double busy = wl_now_s() - t0;
    counts->kernels += run->cfg.kernels;
    counts->work += counts->iter_work;
    wl_gap(gap_ms);
    return busy;
}

/* Sleeps until absolute time t (s, CLOCK_MONOTONIC); a signal cuts it short. */
static void wl_sleep_until(double t)
{
    double now = wl_now_s();
    if (t > now)
        wl_gap((t - now) * 1e3);
}

/* mono_s (CLOCK_MONOTONIC) lets a harness line up the progress of several jobs. */
static void wl_progress(const struct wl_run *run, double t, double mono, unsigned phase,
                        uint64_t iters, double window_s, uint64_t window_iters)
{
    struct wl_json j;
    wl_json_begin(&j, "progress", run->cfg.name);
    wl_json_num(&j, "t_s", t);
    wl_json_uint(&j, "iters", iters);
    wl_json_num(&j, "window_s", window_s);
    wl_json_uint(&j, "window_iters", window_iters);
    wl_json_num(&j, "it_per_s", window_s > 0 ? (double)window_iters / window_s : 0.0);
    wl_json_num(&j, "mono_s", mono);
    if (run->cfg.nphases)
        wl_json_uint(&j, "phase", phase);
    wl_json_emit(&j);
}

static void wl_summary(const struct wl_run *run, struct wl_stats *st, uint64_t iters,
                       double elapsed, double busy_s, const struct wl_counts *counts,
                       int interrupted)
{
    struct wl_json j;
    double n = (double)iters;
    wl_json_begin(&j, "summary", run->cfg.name);
    wl_json_uint(&j, "iters", iters);
    wl_json_uint(&j, "warmup_iters", counts->warmup_iters);
    wl_json_num(&j, "elapsed_s", elapsed);
    wl_json_num(&j, "it_per_s", elapsed > 0 ? n / elapsed : 0.0);
    wl_json_obj_begin(&j, "lat_ms");
    wl_json_num(&j, "mean", st->count ? st->sum_ms / (double)st->count : 0.0);
    wl_json_num(&j, "p50", wl_stats_quantile(st, 0.50));
    wl_json_num(&j, "p99", wl_stats_quantile(st, 0.99));
    wl_json_num(&j, "p999", wl_stats_quantile(st, 0.999));
    wl_json_num(&j, "min", wl_stats_quantile(st, 0.0));
    wl_json_num(&j, "max", wl_stats_quantile(st, 1.0));
    wl_json_obj_end(&j);
    wl_json_num(&j, "busy_ms_mean", iters ? busy_s * 1e3 / n : 0.0);
    wl_json_uint(&j, "kernels", counts->kernels);
    wl_json_uint(&j, "work_units", counts->work);
    wl_json_uint(&j, "sync_every", run->cfg.sync_every);
    if (run->cfg.poisson_rps > 0) {
        wl_json_num(&j, "offered_rps", run->cfg.poisson_rps);
        wl_json_num(&j, "request_gpu_ms", counts->request_us / 1e3);
    }
    if (run->cfg.touch_stride)
        wl_json_uint(&j, "touch_kernels", run->launcher.touches);
    wl_json_bool(&j, "interrupted", interrupted);
    wl_json_emit(&j);
}

/* Sync groups (run-ahead): one latency sample per group, its time per iteration. */
struct wl_group {
    double start;
    unsigned n;
};

void wl_loop_run(struct wl_run *run)
{
    const struct wl_config *cfg = &run->cfg;
    struct wl_counts counts;
    struct wl_stats st = {NULL, 0, 0, 0.0};
    double busy_s = 0.0;
    int synced = 0;
    uint64_t rng = cfg->seed ^ 0x5DEECE66DULL;

    memset(&counts, 0, sizeof counts);
    counts.iter_work = wl_iteration_work(run);
    for (unsigned k = 0; k < cfg->kernels; k++)
        counts.request_us += run->launcher.kernels[k].us;
    for (unsigned i = 0; i < cfg->warmup && !wl_signals.stop; i++) {
        wl_iteration(run, &counts, cfg->poisson_rps > 0 ? 0.0 : wl_gap_at(cfg, 0), &synced);
        counts.warmup_iters++;
    }
    if (!synced)
        wl_synchronize(run);
    counts.launched = 0;

    double start = wl_now_s(), now = start;
    double last_report = start;
    double arrival = cfg->poisson_rps > 0 ? wl_next_arrival(cfg, &rng, start) : 0.0;
    uint64_t last_iters = 0, iters = 0;
    struct wl_group grp = {start, 0};
    wl_ramp_tick(run, 0.0);
    while (!wl_signals.stop) {
        if (cfg->iters ? iters >= cfg->iters : now - start >= cfg->seconds)
            break;
        double t0;
        if (cfg->poisson_rps > 0) {           /* inference: serve the next arrival */
            wl_sleep_until(arrival);
            if (wl_signals.stop)
                break;
            t0 = arrival;
            arrival = wl_next_arrival(cfg, &rng, arrival);
        } else {
            t0 = wl_now_s();
        }
        unsigned phase = wl_phase_at(cfg, t0 - start);
        busy_s += wl_iteration(run, &counts, cfg->poisson_rps > 0 ? 0.0 : wl_gap_at(cfg, phase),
                               &synced);
        now = wl_now_s();
        wl_ramp_tick(run, now - start);
        iters++;
        grp.n++;
        double sample = -1.0;
        if (cfg->sync_every == 1)
            sample = (now - t0) * 1e3;
        else if (synced) {
            sample = (now - grp.start) * 1e3 / grp.n;
            grp.start = now;
            grp.n = 0;
        }
        if (sample >= 0 && wl_stats_add(&st, sample) != 0)
            wl_die(run, "out of host memory for latency samples after %zu iterations",
                   st.count);
        if (cfg->report_ms > 0 && (now - last_report) * 1e3 >= cfg->report_ms) {
            wl_progress(run, now - start, now, wl_phase_at(cfg, now - start), iters,
                        now - last_report, iters - last_iters);
            last_report = now;
            last_iters = iters;
        }
    }
    if (!synced && !wl_signals.stop)
        wl_synchronize(run);
    wl_summary(run, &st, iters, now - start, busy_s, &counts, wl_signals.stop != 0);
    wl_stats_free(&st);
}

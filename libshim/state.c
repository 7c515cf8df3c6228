/* libshim/state.c: the one global state struct, lazy init, fork and exit. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shim.h"

struct tgs_global tgs_g = {
    .once = PTHREAD_ONCE_INIT,
    .opt_once = PTHREAD_ONCE_INIT,
    .attach_mu = PTHREAD_MUTEX_INITIALIZER,
    .ledger_mu = PTHREAD_MUTEX_INITIALIZER,
    .inflight_mu = PTHREAD_MUTEX_INITIALIZER,
    .ptrs = { .mu = PTHREAD_MUTEX_INITIALIZER },
    .graphs = { .mu = PTHREAD_MUTEX_INITIALIZER },
    .fit = { .mu = PTHREAD_MUTEX_INITIALIZER },
    .peers = { .mu = PTHREAD_MUTEX_INITIALIZER },
    .drain = { .mu = PTHREAD_MUTEX_INITIALIZER, .rec_mu = PTHREAD_MUTEX_INITIALIZER,
               .cv = PTHREAD_COND_INITIALIZER },
    .oversub = { .mu = PTHREAD_MUTEX_INITIALIZER, .fork_once = PTHREAD_ONCE_INIT,
                 .free_mu = PTHREAD_MUTEX_INITIALIZER, .wcv = PTHREAD_COND_INITIALIZER },
    .fd = -1,
    .slot_idx = -1,
};

__thread struct tgs_thread tgs_tls __attribute__((tls_model("initial-exec")));

uint64_t tgs_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void tgs_sleep_ns(uint64_t ns)
{
    struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000ull),
                           .tv_nsec = (long)(ns % 1000000000ull) };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static void tgs_init_once(void)
{
    tgs_tls.in_init = 1;
    tgs_options_load();
    tgs_real_bootstrap();
    tgs_real_open();
    tgs_hooks_resolve_real();
    pthread_atfork(NULL, NULL, tgs_atfork_child);
    tgs_tls.in_init = 0;
    __atomic_store_n(&tgs_g.ready, 1, __ATOMIC_RELEASE);
}

void tgs_init_slow(void)
{
    /* The driver's constructors may call back into dlsym while we load it:
     * that thread must not wait on its own pthread_once. */
    if (tgs_tls.in_init)
        return;
    pthread_once(&tgs_g.once, tgs_init_once);
}

/* Give the slot back on a clean exit (a crash is reclaimed by the next
 * process of the job that attaches, through the slot's OFD lock). */
__attribute__((destructor)) static void tgs_fini(void)
{
    tgs_drain_stop();
    tgs_oversub_stop();
    tgs_detach();
}

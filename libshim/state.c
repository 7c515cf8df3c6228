/* libshim/state.c: the one global state struct, the per-thread state, the clock. */
#include <errno.h>
#include <time.h>

#include "state.h"

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
    .oversub = { .mu = PTHREAD_MUTEX_INITIALIZER, .free_mu = PTHREAD_MUTEX_INITIALIZER,
                 .wcv = PTHREAD_COND_INITIALIZER },
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

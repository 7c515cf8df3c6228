/*
 * libshim/helper_thread.c: starting the shim's own helper threads (the drain
 * helper, the oversubscription watcher): detached, with every signal blocked,
 * since the application's signals are not ours to take; and stopping one at exit
 * with a bounded wait.
 */
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "shim.h"

int tgs_spawn_helper(void *(*fn)(void *), const char *name)
{
    pthread_attr_t a;
    pthread_t t;
    sigset_t all, old;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int r = pthread_create(&t, &a, fn, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&a);
    if (r == 0)
        pthread_setname_np(t, name);
    return r;
}

/* At exit: if this process runs the helper (owner_pid), set *stop, wake it on cv
 * and wait until it says *stopped, at most TGS_HELPER_STOP_WAIT_NS (it may be
 * waiting on the GPU: exit goes on without it).  Called and returns with mu
 * unlocked. */
void tgs_stop_helper(pthread_mutex_t *mu, pthread_cond_t *cv, const int *owner_pid,
                     int *stop, int *stopped)
{
    pthread_mutex_lock(mu);
    if (*owner_pid == (int)getpid() && !*stopped) {
        *stop = 1;
        pthread_cond_broadcast(cv);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t ns = (uint64_t)ts.tv_nsec + TGS_HELPER_STOP_WAIT_NS;
        ts.tv_sec += (time_t)(ns / 1000000000ull);
        ts.tv_nsec = (long)(ns % 1000000000ull);
        while (!*stopped)
            if (pthread_cond_timedwait(cv, mu, &ts) != 0)
                break;
    }
    pthread_mutex_unlock(mu);
}

/*
 * libshim/helper_thread.c: starting the shim's own helper threads (the drain
 * helper, the oversubscription watcher): detached, with every signal blocked,
 * since the application's signals are not ours to take.
 */
#include <pthread.h>
#include <signal.h>

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

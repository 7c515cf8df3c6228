/*
 * libshim/lifecycle.c: the top layer (libshim/README.md): the handlers the
 * loader and fork() call, which call into the subsystems; nothing in the shim
 * calls them (every function here is static).
 *
 *   load: registers the fork handler;
 *   fork: in the child, every subsystem forgets what was the parent's (its
 *     threads, events, mappings, and the .seg descriptor, which shares the
 *     parent's open file description and so its slot lock); the next hooked
 *     call attaches anew;
 *   exit: the helper threads stop (bounded waits), then the slot goes back to
 *     the job.  A crash is reclaimed by the next process of the job that
 *     attaches, through the slot's OFD lock.
 */
#include "shim.h"

static void fork_child(void)
{
    tgs_peers_reset();
    tgs_fit_reset();
    tgs_drain_reset();
    tgs_oversub_reset();
    tgs_attach_forget();
}

__attribute__((constructor)) static void tgs_load(void)
{
    pthread_atfork(NULL, NULL, fork_child);
}

__attribute__((destructor)) static void tgs_fini(void)
{
    tgs_drain_stop();
    tgs_oversub_stop();
    tgs_detach();
}

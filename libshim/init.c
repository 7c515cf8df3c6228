/*
 * libshim/init.c: lazy initialization, on the first hooked call of a process
 * (every entry point calls tgs_ensure_init first): the options, the real
 * driver, the hook table.  The handlers the loader and fork call are the
 * lifecycle's (lifecycle.c).
 */
#include "shim.h"

static void tgs_init_once(void)
{
    tgs_tls.in_init = 1;
    tgs_options_load();
    tgs_real_bootstrap();
    tgs_real_open();
    tgs_hooks_resolve_real();
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

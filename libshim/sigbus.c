/*
 * libshim/sigbus.c: the SIGBUS guard over the shim's read-only mappings of
 * other tenants' files (peers.c's region).
 *
 * A pub's owner can truncate its file; touching the mapping then raises
 * SIGBUS.  The handler (SA_SIGINFO, installed once, chaining the previous
 * handler) puts an anonymous zero page (MAP_FIXED) over the faulting page of
 * the region and flags it: the read is retried and sees zeros ("idle, no
 * history": only the truncating tenant loses); peers.c re-validates the page
 * on its next slow path.  Any other SIGBUS goes to the previous handler, or
 * gets the default action (a real fault still kills).  Gated launches check
 * every GUARD_CHECK_NS that the handler is still installed, and put it back in
 * front of one the program installed since (chaining that one).  This is the
 * pattern compositors use for client shared memory.
 */
#include <signal.h>
#include <string.h>
#include <sys/mman.h>

#include "shim.h"

#define GUARD_CHECK_NS 100000000ull /* the handler is checked again every 100 ms */

static struct sigaction prev_bus;
static __thread int in_bus __attribute__((tls_model("initial-exec")));

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
    struct tgs_peers *P = &tgs_g.peers;
    /* a previous handler that chains back to us (it was installed after us and we
     * re-installed ourselves in front of it) must not loop: the second time round
     * it is the default action */
    if (in_bus)
        goto dfl;
    in_bus = 1;
    char *a = si ? (char *)si->si_addr : NULL, *r = P->region;
    size_t pg = P->page;
    if (r && pg && a >= r && a < r + (size_t)TGS_PEER_PAGES * pg) {
        size_t k = (size_t)(a - r) / pg;
        if (mmap(r + k * pg, pg, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) !=
            MAP_FAILED) {
            P->page_damaged[k] = 1;
            P->damaged = 1;
            in_bus = 0;
            return; /* the read is retried and now sees zeros */
        }
    }
    if (prev_bus.sa_flags & SA_SIGINFO) {
        if (prev_bus.sa_sigaction) {
            prev_bus.sa_sigaction(sig, si, uc);
            in_bus = 0;
            return;
        }
    } else if (prev_bus.sa_handler != SIG_DFL && prev_bus.sa_handler != SIG_IGN) {
        prev_bus.sa_handler(sig);
        in_bus = 0;
        return;
    }
dfl:;
    /* a real fault: the default action (the faulting access runs again) */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGBUS, &dfl, NULL);
    if (!si || si->si_code <= 0)
        raise(sig); /* sent, not a fault: deliver it again with the default action */
}

/* Installed, or still installed (a program may have replaced it since);
 * caller holds tgs_g.peers.mu. */
void tgs_guard_install(void)
{
    struct sigaction cur;
    if (sigaction(SIGBUS, NULL, &cur) != 0)
        return;
    if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_sigbus)
        return;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    prev_bus = cur;
    if (sigaction(SIGBUS, &sa, NULL) == 0)
        tgs_g.peers.guard = 1;
}

void tgs_guard_recheck(void)
{
    struct tgs_peers *P = &tgs_g.peers;
    uint64_t now = tgs_now_ns();
    if (now - __atomic_load_n(&P->guard_checked_ns, __ATOMIC_RELAXED) < GUARD_CHECK_NS ||
        pthread_mutex_trylock(&P->mu) != 0)
        return;
    tgs_guard_install();
    __atomic_store_n(&P->guard_checked_ns, now, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&P->mu);
}

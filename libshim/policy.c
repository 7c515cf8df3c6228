/*
 * libshim/policy.c: the gate's policy values (segment.h: TGS_INTERFERENCE_PPM,
 * TGS_WAIT_STEP_NS, TGS_FIT_STEP_NS), which the controller writes into the
 * job's .ctl.  Read at every use from the read-only mapping (the controller
 * may change them at any time); no .ctl attached, 0, or a value out of range
 * is the contract's default, and a value out of range is said once on stderr.
 */
#include "state.h"

enum { W_INTERFERENCE = 1, W_WAIT_STEP = 2, W_FIT_STEP = 4 };

static uint32_t value(const uint32_t *field, uint32_t def, uint32_t lo, uint32_t hi,
                      int bit, const char *name)
{
    uint32_t v = TGS_RELAXED_LOAD(field);
    if (v == 0)
        return def;
    if (v >= lo && v <= hi)
        return v;
    if (!(__atomic_fetch_or(&tgs_g.policy_warned, bit, __ATOMIC_RELAXED) & bit))
        tgs_log(TGS_LOG_WARN, "the job's control segment sets %s %u, outside %u-%u; using %u",
                name, v, lo, hi, def);
    return def;
}

double tgs_interference(void)
{
    const struct tgs_ctl_header *c = TGS_RELAXED_LOAD(&tgs_g.ctl);
    uint32_t ppm = !c ? TGS_INTERFERENCE_PPM
                      : value(&c->interference_ppm, TGS_INTERFERENCE_PPM, 1,
                              TGS_INTERFERENCE_PPM_MAX, W_INTERFERENCE, "interference_ppm");
    return ppm / 1e6;
}

uint64_t tgs_wait_step_ns(void)
{
    const struct tgs_ctl_header *c = TGS_RELAXED_LOAD(&tgs_g.ctl);
    return !c ? TGS_WAIT_STEP_NS
              : value(&c->wait_step_ns, TGS_WAIT_STEP_NS, TGS_STEP_NS_MIN, TGS_STEP_NS_MAX,
                      W_WAIT_STEP, "wait_step_ns");
}

uint64_t tgs_fit_step_ns(void)
{
    const struct tgs_ctl_header *c = TGS_RELAXED_LOAD(&tgs_g.ctl);
    return !c ? TGS_FIT_STEP_NS
              : value(&c->fit_step_ns, TGS_FIT_STEP_NS, TGS_STEP_NS_MIN, TGS_STEP_NS_MAX,
                      W_FIT_STEP, "fit_step_ns");
}

void tgs_policy_check(void)
{
    tgs_interference();
    tgs_wait_step_ns();
    tgs_fit_step_ns();
}

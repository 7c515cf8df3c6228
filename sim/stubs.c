/*
 * stubs.c: every public entry point of sim/entry_points.def exists as a
 * dynamic symbol of libcuda.so.1.  Each is defined here as a weak stub that
 * answers CUDA_ERROR_NOT_SUPPORTED (and says so at TGS_LOG_LEVEL=info); a
 * source file that models the call defines it normally and the linker keeps
 * that definition.  So `nm -D libcuda.so.1` shows what is still a stub:
 * the weak (W) cu* symbols, which docs/simulator.md lists.
 *
 * A stub never reads its arguments, so one body fits every signature.  The
 * C names differ from the exported ones (asm labels) so that the real
 * prototypes in cuda_abi.h do not clash with the generic one here.
 */
#include "sim.h"

static CUresult not_supported(const char *name)
{
    sim_log(TGS_LOG_INFO, "%s: not supported by the simulator", name);
    return CUDA_ERROR_NOT_SUPPORTED;
}

#define SIM_STUB(sym)                                                       \
    CUresult sim_stub_##sym(void) __asm__(#sym) __attribute__((weak, used)); \
    CUresult sim_stub_##sym(void) { return not_supported(#sym); }

/* entry_points.def names each exported symbol once. */
#define E(base, sym, ver, pt) SIM_STUB(sym)
#include "entry_points.def"
#undef E

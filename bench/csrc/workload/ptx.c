/*
 * The kernel: PTX text JIT-compiled by the driver (no nvcc at build time).
 * Each thread spins on %globaltimer until start + spin_ns, so on a real GPU
 * a block's duration needs no calibration.  sm_70 / PTX 7.0: every driver
 * from CUDA 11 on can JIT it for its GPU.
 */
#include <stdio.h>

#include "workload.h"

#define WL_PTX_HEAD ".version 7.0\n.target sm_70\n.address_size 64\n"

static const char wl_ptx_kernel[] =
    "\n"
    "// tgs_spin(u64 spin_ns): busy-wait for spin_ns nanoseconds of wall time.\n"
    ".visible .entry " WL_KERNEL_NAME "(\n"
    "    .param .u64 " WL_KERNEL_NAME "_param_0\n"
    ")\n"
    "{\n"
    "    .reg .pred %p<2>;\n"
    "    .reg .b64 %rd<5>;\n"
    "\n"
    "    ld.param.u64 %rd1, [" WL_KERNEL_NAME "_param_0];\n"
    "    mov.u64 %rd2, %globaltimer;\n"
    "    add.u64 %rd3, %rd2, %rd1;\n"
    "$L_spin:\n"
    "    mov.u64 %rd4, %globaltimer;\n"
    "    setp.lt.u64 %p1, %rd4, %rd3;\n"
    "    @%p1 bra $L_spin;\n"
    "    ret;\n"
    "}\n";

int wl_ptx_build(char *buf, size_t len, double cost)
{
    int n;
    /* The simulator reads this comment; a real GPU's JIT ignores it. */
    if (cost != 1.0)
        n = snprintf(buf, len, "%s// tgs-sim: cost %s %.9g\n%s", WL_PTX_HEAD, WL_KERNEL_NAME,
                     cost, wl_ptx_kernel);
    else
        n = snprintf(buf, len, "%s%s", WL_PTX_HEAD, wl_ptx_kernel);
    return n < 0 || (size_t)n >= len ? -1 : 0;
}

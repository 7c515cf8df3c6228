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
    "}\n"
    "\n"
    "// tgs_touch(u64 base, u64 bytes, u64 stride): one volatile 32-bit load every stride\n"
    "// bytes of [base, base + bytes), grid-stride (--touch: a real GPU then faults in what\n"
    "// is not resident; the data is only read).\n"
    ".visible .entry " WL_TOUCH_NAME "(\n"
    "    .param .u64 " WL_TOUCH_NAME "_param_0,\n"
    "    .param .u64 " WL_TOUCH_NAME "_param_1,\n"
    "    .param .u64 " WL_TOUCH_NAME "_param_2\n"
    ")\n"
    "{\n"
    "    .reg .pred %p<2>;\n"
    "    .reg .b32 %r<8>;\n"
    "    .reg .b64 %rd<10>;\n"
    "\n"
    "    ld.param.u64 %rd1, [" WL_TOUCH_NAME "_param_0];\n"
    "    ld.param.u64 %rd2, [" WL_TOUCH_NAME "_param_1];\n"
    "    ld.param.u64 %rd3, [" WL_TOUCH_NAME "_param_2];\n"
    "    cvta.to.global.u64 %rd1, %rd1;\n"
    "    mov.u32 %r1, %ctaid.x;\n"
    "    mov.u32 %r2, %ntid.x;\n"
    "    mov.u32 %r3, %tid.x;\n"
    "    mad.lo.u32 %r4, %r1, %r2, %r3;\n"
    "    mov.u32 %r5, %nctaid.x;\n"
    "    mul.lo.u32 %r6, %r5, %r2;\n"
    "    cvt.u64.u32 %rd4, %r4;\n"
    "    cvt.u64.u32 %rd5, %r6;\n"
    "    mul.lo.u64 %rd6, %rd4, %rd3;\n"
    "    mul.lo.u64 %rd7, %rd5, %rd3;\n"
    "$L_touch:\n"
    "    setp.ge.u64 %p1, %rd6, %rd2;\n"
    "    @%p1 bra $L_done;\n"
    "    add.u64 %rd8, %rd1, %rd6;\n"
    "    ld.volatile.global.u32 %r7, [%rd8];\n"
    "    add.u64 %rd6, %rd6, %rd7;\n"
    "    bra.uni $L_touch;\n"
    "$L_done:\n"
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

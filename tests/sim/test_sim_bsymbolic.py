"""-Bsymbolic: the simulator's internal calls never reach an LD_PRELOAD library.

cuMemAllocPitch_v2, cuMemAllocAsync and cuMemAllocFromPoolAsync are built on
the exported cuMemAlloc_v2; a preloaded library that defines cuMemAlloc_v2
must see only the program's own direct call, as with the real driver.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
INC = ROOT / "contracts" / "include"

pytestmark = pytest.mark.timeout(60)

HOOK = r"""
#include <stdio.h>
#include "tgs/cuda_abi.h"
CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    (void)dptr; (void)bytesize;
    fputs("HOOKED\n", stderr);
    return CUDA_ERROR_NOT_PERMITTED;
}
"""

PROG = r"""
#include <stdio.h>
#include "tgs/cuda_abi.h"
int main(void)
{
    CUdevice d; CUcontext c; CUdeviceptr p; size_t pitch; CUmemoryPool pool;
    if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c))
        return 2;
    printf("pitch %d\n", (int)cuMemAllocPitch_v2(&p, &pitch, 100, 10, 4));
    printf("async %d\n", (int)cuMemAllocAsync(&p, 4096, NULL));
    cuDeviceGetDefaultMemPool(&pool, 0);
    printf("pool %d\n", (int)cuMemAllocFromPoolAsync(&p, 4096, pool, NULL));
    fflush(stdout);
    printf("direct %d\n", (int)cuMemAlloc_v2(&p, 4096));
    return 0;
}
"""


def _cc(tmp: Path, name: str, src: str, *flags: str) -> Path:
    c = tmp / f"{name}.c"
    c.write_text(src)
    out = tmp / name
    subprocess.run(["gcc", "-std=gnu11", "-Wall", "-Werror", "-I", str(INC), "-o", str(out),
                    str(c), *flags], check=True)
    return out


def test_internal_calls_bypass_preload(
    tmp_path: Path, sim_env: dict[str, str], sim_lib: Path
) -> None:
    hook = _cc(tmp_path, "libhook.so", HOOK, "-shared", "-fPIC")
    prog = _cc(tmp_path, "prog", PROG, "-L" + str(sim_lib.parent), "-lcuda")
    env = dict(sim_env, LD_PRELOAD=str(hook))
    r = subprocess.run([str(prog)], env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:3] == ["pitch 0", "async 0", "pool 0"]
    # the program's own call does reach the preloaded definition: the hook is live
    assert "direct 800" in r.stdout
    assert r.stderr.count("HOOKED") == 1

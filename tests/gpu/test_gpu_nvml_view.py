"""The NVML view against NVIDIA's own NVML (libshim/nvml_*.c; docs/segment.md, "NVML inside a
job"): pynvml and nvidia-smi under the shim, in a job registered by the GPU's NVML UUID, see the
quota and the job's processes; the same queries outside the job see the whole GPU.  Skipped
without a real GPU (conftest.py); the nvidia-smi test also without nvidia-smi."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from gpu_helpers import ROOT, gpu_env
from tgs.intercept import segment

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(180)]
SHIM = ROOT / "build" / "libtgs.so"
MIB, GIB = 1 << 20, 1 << 30
HELD = 256 * MIB

# allocates HELD bytes through the driver, then answers NVML queries for GPU 0
HOLD_AND_QUERY = f"""
import ctypes, json, os, sys, warnings
warnings.simplefilter("ignore")
import pynvml as nv
cu = ctypes.CDLL("libcuda.so.1")
ctx, ptr = ctypes.c_void_p(), ctypes.c_uint64()
assert cu.cuInit(0) == 0 and cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0
assert cu.cuCtxSetCurrent(ctx) == 0 and cu.cuMemAlloc_v2(ctypes.byref(ptr), {HELD}) == 0
nv.nvmlInit()
h = nv.nvmlDeviceGetHandleByUUID(sys.argv[1])
m = nv.nvmlDeviceGetMemoryInfo(h)
m2 = nv.nvmlDeviceGetMemoryInfo(h, version=nv.nvmlMemory_v2)
print(json.dumps({{"me": os.getpid(), "v1": [m.total, m.free, m.used],
                  "v2": [m2.total, m2.free, m2.used, m2.reserved],
                  "procs": [[p.pid, p.usedGpuMemory]
                            for p in nv.nvmlDeviceGetComputeRunningProcesses(h)]}}))
sys.stdout.flush()
if len(sys.argv) > 2:
    sys.stdin.readline()     # hold the memory until told
"""


def _uuid() -> str:
    pytest.importorskip("pynvml")
    r = subprocess.run([sys.executable, "-c", "import pynvml as nv; nv.nvmlInit(); "
                        "print(nv.nvmlDeviceGetUUID(nv.nvmlDeviceGetHandleByIndex(0)))"],
                       env=gpu_env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip().splitlines()[-1]


@pytest.fixture
def job(tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """A job with a 1 GiB quota on GPU 0, registered by its NVML UUID; (uuid, env)."""
    uuid = _uuid()
    seg = segment.create(tmp_path / "job.seg", "nvml-gpu", nslots=8, mem_quota=GIB,
                         device_index=0, device_uuid=uuid)
    try:
        yield uuid, {**gpu_env(), "LD_PRELOAD": str(SHIM), "TGS_SEGMENT": str(seg.path)}
    finally:
        seg.close()


def test_pynvml_in_a_job_sees_the_quota_and_itself(job: tuple[str, dict[str, str]]) -> None:
    uuid, env = job
    r = subprocess.run([sys.executable, "-c", HOLD_AND_QUERY, uuid], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["v1"] == [GIB, GIB - HELD, HELD]
    assert got["v2"] == [GIB, GIB - HELD, HELD, 0]
    assert got["procs"] == [[got["me"], HELD]]


def test_nvidia_smi_in_a_job_sees_the_quota_and_the_jobs_process(
        job: tuple[str, dict[str, str]]) -> None:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        pytest.skip("no nvidia-smi")
    uuid, env = job
    holder = subprocess.Popen([sys.executable, "-c", HOLD_AND_QUERY, uuid, "hold"], env=env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        line = holder.stdout.readline()
        assert line, "the holder failed"
        q = ["-i", uuid, "--format=csv,noheader,nounits"]
        inside = subprocess.run([smi, "--query-gpu=memory.total,memory.used", *q], env=env,
                                capture_output=True, text=True, timeout=60)
        apps = subprocess.run([smi, "--query-compute-apps=pid,used_memory", *q], env=env,
                              capture_output=True, text=True, timeout=60)
        outside = subprocess.run([smi, "--query-gpu=memory.total", *q], env=gpu_env(),
                                 capture_output=True, text=True, timeout=60)
    finally:
        if holder.stdin:
            holder.stdin.close()
        holder.wait(30)
    assert inside.returncode == apps.returncode == outside.returncode == 0
    total, used = (int(x) for x in inside.stdout.strip().split(","))
    assert (total, used) == (GIB // MIB, HELD // MIB), inside.stdout
    assert [ln.replace(" ", "") for ln in apps.stdout.strip().splitlines()] == \
        [f"{holder.pid},{HELD // MIB}"]
    assert int(outside.stdout.strip()) > GIB // MIB

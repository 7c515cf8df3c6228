"""The NVML view inside a job (libshim/nvml_*.c): NVML memory queries and process lists show
the job's quota, usage and own processes, as cuMemGetInfo does.

Both routes to NVML are exercised against the simulated NVML (build/sim/libnvidia-ml.so.1):
pynvml (dlopen + dlsym: the shim's dlsym substitution) and a C program linked with
-lnvidia-ml (PLT calls bound to the shim's exports).  Memory is held by the shim probe
(tests/shim/progs/probe.c) in the job and outside it; the NVML clients never call CUDA.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from shim_helpers import finish
from tgs.intercept import segment

ROOT = Path(__file__).resolve().parents[2]
NVML_LIB = ROOT / "build" / "sim" / "libnvidia-ml.so.1"
MIB = 1 << 20
GIB = 1 << 30
DEVICE_MEM = 2 * GIB
QUOTA = 256 * MIB
IN_JOB = 48 * MIB
OUTSIDE = 96 * MIB
VERSION_MISMATCH, INVALID_ARGUMENT, INSUFFICIENT_SIZE = 25, 2, 7

pytestmark = pytest.mark.timeout(120)

QUERY = """
import ctypes, json, os, warnings
warnings.simplefilter("ignore")
import pynvml as nv
nv.nvmlInit()
def dev(i):
    h = nv.nvmlDeviceGetHandleByIndex(i)
    m1 = nv.nvmlDeviceGetMemoryInfo(h)
    m2 = nv.nvmlDeviceGetMemoryInfo(h, version=nv.nvmlMemory_v2)
    bad = nv.c_nvmlMemory_v2_t()
    bad.version = 1
    return {"uuid": nv.nvmlDeviceGetUUID(h),
            "v1": [m1.total, m1.free, m1.used],
            "v2": [m2.total, m2.free, m2.used, m2.reserved],
            "procs": sorted([p.pid, p.usedGpuMemory]
                            for p in nv.nvmlDeviceGetComputeRunningProcesses(h)),
            "procs_v2": sorted([p.pid, p.usedGpuMemory]
                               for p in nv.nvmlDeviceGetComputeRunningProcesses_v2(h)),
            "graphics": len(nv.nvmlDeviceGetGraphicsRunningProcesses(h)),
            "badver": nv._nvmlGetFunctionPointer("nvmlDeviceGetMemoryInfo_v2")(
                h, ctypes.byref(bad))}
out = {"me": os.getpid(), "devs": [dev(i) for i in range(nv.nvmlDeviceGetCount())]}
"""


def nvml_query(env: dict[str, str]) -> Any:
    """pynvml in a child that never calls CUDA: per device, memory (v1, v2), process lists."""
    code = textwrap.dedent(QUERY) + "\nprint('OUT ' + json.dumps(out))\n"
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=60, stdin=subprocess.DEVNULL)
    assert res.returncode == 0, f"child failed:\n{res.stdout}\n{res.stderr}"
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("OUT ")]
    assert lines, f"no result:\n{res.stdout}\n{res.stderr}"
    return json.loads(lines[-1][4:])


def hold(probe: Path, env: dict[str, str], nbytes: int) -> subprocess.Popen[str]:
    """The probe: allocate nbytes and keep them until its stdin closes."""
    p = subprocess.Popen([str(probe), "init", f"alloc:{nbytes}", "ready"], env=env,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None
    lines = [p.stdout.readline().strip() for _ in range(3)]
    if lines != ["init 0", "alloc 0", "ready"]:
        finish(p)
        pytest.fail(f"probe could not hold {nbytes} bytes: {lines}")
    return p


@pytest.fixture
def nvml_env(shim_env: dict[str, str]) -> dict[str, str]:
    """The shim preloaded, a simulated GPU of DEVICE_MEM (two devices), no job yet."""
    if not NVML_LIB.exists():
        pytest.fail(f"{NVML_LIB} is missing: run `make` first")
    pytest.importorskip("pynvml")
    return {**shim_env, "TGS_SIM_MEM": str(DEVICE_MEM), "TGS_SIM_DEVICES": "2"}


def make_job(tmp_path: Path, env: dict[str, str], name: str = "job", **kw: Any
             ) -> Iterator[dict[str, str]]:
    seg = segment.create(tmp_path / f"{name}.seg", name, nslots=8, **kw)
    try:
        yield {**env, "TGS_SEGMENT": str(seg.path)}
    finally:
        seg.close()


@pytest.fixture
def job_env(tmp_path: Path, nvml_env: dict[str, str]) -> Iterator[dict[str, str]]:
    """A job with a QUOTA on device 0 (registered as a simulated GPU: "GPU-sim-0")."""
    yield from make_job(tmp_path, nvml_env, mem_quota=QUOTA, device_index=0,
                        device_uuid="GPU-sim-0")


@pytest.fixture
def holders(probe_bin: Path, job_env: dict[str, str], nvml_env: dict[str, str]
            ) -> Iterator[tuple[int, int]]:
    """One process of the job holding IN_JOB bytes, one outside holding OUTSIDE: their pids."""
    inside = hold(probe_bin, job_env, IN_JOB)
    try:
        outside = hold(probe_bin, nvml_env, OUTSIDE)
        try:
            yield inside.pid, outside.pid
        finally:
            finish(outside)
    finally:
        finish(inside)


def test_pynvml_in_a_job_sees_its_quota_usage_and_own_processes(
        job_env: dict[str, str], holders: tuple[int, int]) -> None:
    inside, outside = holders
    out = nvml_query(job_env)
    d0, d1 = out["devs"]
    assert d0["v1"] == [QUOTA, QUOTA - IN_JOB, IN_JOB]
    assert d0["v2"] == [QUOTA, QUOTA - IN_JOB, IN_JOB, 0]
    assert d0["procs"] == d0["procs_v2"] == [[inside, IN_JOB]]   # not the neighbour, not itself
    pids = {p for p, _ in d0["procs"]}
    assert outside not in pids and out["me"] not in pids
    assert d0["graphics"] == 0
    assert d0["badver"] == VERSION_MISMATCH     # NVML still validates the struct version
    # the other GPU is not the job's: NVML's own answer
    assert d1["v1"] == [DEVICE_MEM, DEVICE_MEM, 0] and d1["procs"] == []


def test_a_process_outside_the_job_sees_the_whole_device(
        nvml_env: dict[str, str], holders: tuple[int, int]) -> None:
    inside, outside = holders
    for env in (nvml_env, {k: v for k, v in nvml_env.items() if k != "LD_PRELOAD"}):
        d0 = nvml_query(env)["devs"][0]
        used = IN_JOB + OUTSIDE
        assert d0["v1"] == [DEVICE_MEM, DEVICE_MEM - used, used]
        assert d0["v2"] == [DEVICE_MEM, DEVICE_MEM - used, used, 0]
        assert d0["procs"] == sorted([[inside, IN_JOB], [outside, OUTSIDE]])


def test_nvml_outside_a_job_does_not_load_the_driver(nvml_env: dict[str, str]) -> None:
    """The shim preloaded into an NVML-only process outside any job (a monitor, the
    controller): NVML queries answer, and no CUDA driver is loaded for them."""
    nvml_query(nvml_env)    # the simulator's state file exists (else the simulated NVML
                            # itself has the simulated driver create it)
    code = textwrap.dedent(QUERY) + textwrap.dedent("""
        maps = open("/proc/self/maps").read()
        print("OUT " + json.dumps([len(out["devs"]), "libcuda" in maps, "libtgs" in maps]))
    """)
    res = subprocess.run([sys.executable, "-c", code], env=nvml_env, capture_output=True,
                         text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout.split("OUT ")[-1]) == [2, False, True]


def test_without_a_quota_memory_is_unchanged_and_processes_are_the_jobs(
        tmp_path: Path, probe_bin: Path, nvml_env: dict[str, str]) -> None:
    for env in make_job(tmp_path, nvml_env, name="noquota", device_index=0):
        inside = hold(probe_bin, env, IN_JOB)
        outside = hold(probe_bin, nvml_env, OUTSIDE)
        try:
            d0 = nvml_query(env)["devs"][0]
        finally:
            finish(outside)
            finish(inside)
        used = IN_JOB + OUTSIDE
        assert d0["v1"] == [DEVICE_MEM, DEVICE_MEM - used, used]
        assert d0["procs"] == [[inside.pid, IN_JOB]]


def test_the_jobs_gpu_is_found_by_nvml_uuid_before_its_ordinal(
        tmp_path: Path, nvml_env: dict[str, str]) -> None:
    uuids = [d["uuid"] for d in nvml_query(nvml_env)["devs"]]
    # registered by NVML UUID (the controller's NVML path): the UUID wins over the ordinal
    for env in make_job(tmp_path, nvml_env, name="byuuid", mem_quota=QUOTA, device_index=0,
                        device_uuid=uuids[1]):
        d0, d1 = nvml_query(env)["devs"]
        assert d0["v1"][0] == DEVICE_MEM and d1["v1"] == [QUOTA, QUOTA, 0]
    # a UUID NVML does not know ("GPU-sim-1"): the ordinal
    for env in make_job(tmp_path, nvml_env, name="byindex", mem_quota=QUOTA, device_index=1,
                        device_uuid="GPU-sim-1"):
        d0, d1 = nvml_query(env)["devs"]
        assert d0["v1"][0] == DEVICE_MEM and d1["v1"] == [QUOTA, QUOTA, 0]


def test_a_killed_process_leaves_the_jobs_process_list(
        probe_bin: Path, job_env: dict[str, str]) -> None:
    a = hold(probe_bin, job_env, IN_JOB)
    b = hold(probe_bin, job_env, 2 * IN_JOB)
    try:
        assert nvml_query(job_env)["devs"][0]["procs"] == sorted(
            [[a.pid, IN_JOB], [b.pid, 2 * IN_JOB]])
        os.kill(b.pid, signal.SIGKILL)
        b.wait(10)
        assert nvml_query(job_env)["devs"][0]["procs"] == [[a.pid, IN_JOB]]
    finally:
        finish(b)
        finish(a)


AGREE = """
import ctypes, json, os, warnings
warnings.simplefilter("ignore")
import pynvml as nv
cu = ctypes.CDLL("libcuda.so.1")
ctx, ptr = ctypes.c_void_p(), ctypes.c_uint64()
assert cu.cuInit(0) == 0 and cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0
assert cu.cuCtxSetCurrent(ctx) == 0 and cu.cuMemAlloc_v2(ctypes.byref(ptr), %d) == 0
free, total = ctypes.c_size_t(), ctypes.c_size_t()
assert cu.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)) == 0
nv.nvmlInit()
h = nv.nvmlDeviceGetHandleByIndex(0)
m = nv.nvmlDeviceGetMemoryInfo(h)
print(json.dumps({"me": os.getpid(), "cu": [total.value, free.value],
                  "nvml": [m.total, m.free, m.used],
                  "procs": sorted([p.pid, p.usedGpuMemory]
                                  for p in nv.nvmlDeviceGetComputeRunningProcesses(h))}))
"""


def test_nvml_agrees_with_cumemgetinfo_in_a_process_that_allocates(
        job_env: dict[str, str], holders: tuple[int, int]) -> None:
    inside, _ = holders
    mine = 32 * MIB
    res = subprocess.run([sys.executable, "-c", AGREE % mine], env=job_env, capture_output=True,
                         text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout.strip().splitlines()[-1])
    used = IN_JOB + mine
    assert got["cu"] == [QUOTA, QUOTA - used]
    assert got["nvml"] == [QUOTA, QUOTA - used, used]
    assert got["procs"] == sorted([[inside, IN_JOB], [got["me"], mine]])  # now it is listed


def test_no_nvml_loaded_means_no_nvml_symbol(nvml_env: dict[str, str]) -> None:
    """The shim exports the NVML hooks, but a lookup in a process without NVML finds none,
    as without the shim (a program probing for NVML must not think it is there)."""
    code = ("import ctypes; g = ctypes.CDLL(None); "
            "print(hasattr(g, 'nvmlDeviceGetMemoryInfo'), hasattr(g, 'cuMemGetInfo_v2'))")
    res = subprocess.run([sys.executable, "-c", code], env=nvml_env, capture_output=True,
                         text=True, timeout=60, check=True)
    assert res.stdout.split() == ["False", "True"]


@pytest.fixture(scope="module")
def nvml_client() -> Path:
    """tests/shim/progs/nvml_client.c, linked with -lnvidia-ml against build/sim."""
    if not NVML_LIB.exists():
        pytest.fail(f"{NVML_LIB} is missing: run `make` first")
    out = ROOT / "build" / "tests"
    out.mkdir(parents=True, exist_ok=True)
    exe = out / "nvml_client"
    tmp = out / f".nvml_client.{os.getpid()}"
    subprocess.run(["gcc", "-std=gnu11", "-Wall", "-Wextra", "-Werror",
                    "-I", str(ROOT / "contracts" / "include"),
                    str(Path(__file__).parent / "progs" / "nvml_client.c"),
                    "-o", str(tmp), "-L", str(NVML_LIB.parent), "-lnvidia-ml"],
                   check=True, capture_output=True, text=True)
    os.replace(tmp, exe)
    return exe


def client(exe: Path, env: dict[str, str], device: int = 0) -> dict[str, list[str]]:
    res = subprocess.run([str(exe), str(device)], env=env, capture_output=True, text=True,
                         timeout=60, stdin=subprocess.DEVNULL)
    assert res.returncode == 0, f"{res.stdout}\n{res.stderr}"
    return {ln.split()[0]: ln.split()[1:] for ln in res.stdout.splitlines()}


def test_a_program_linked_with_nvml_sees_the_job(
        nvml_client: Path, job_env: dict[str, str], nvml_env: dict[str, str],
        holders: tuple[int, int]) -> None:
    inside, outside = holders
    got = client(nvml_client, job_env)
    assert got["mem1"] == ["0", str(QUOTA), str(QUOTA - IN_JOB), str(IN_JOB)]
    assert got["mem2"] == ["0", str(QUOTA), str(QUOTA - IN_JOB), str(IN_JOB), "0"]
    assert got["badver"] == [str(VERSION_MISMATCH)]
    assert got["badhandle"] == [str(INVALID_ARGUMENT)] * 2
    assert got["count"] == [str(INSUFFICIENT_SIZE), "1"]           # the two-call protocol
    assert got["procs1"] == got["procs3"] == ["0", "1", f"{inside}:{IN_JOB}"]
    assert got["graphics"] == ["0", "0"]
    # outside the job, the same program sees the device and both processes
    whole = client(nvml_client, nvml_env)
    used = IN_JOB + OUTSIDE
    assert whole["mem1"] == ["0", str(DEVICE_MEM), str(DEVICE_MEM - used), str(used)]
    assert whole["count"] == [str(INSUFFICIENT_SIZE), "2"]
    assert sorted(whole["procs1"][2:]) == sorted([f"{inside}:{IN_JOB}", f"{outside}:{OUTSIDE}"])

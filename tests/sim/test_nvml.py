"""The simulated NVML (build/sim/libnvidia-ml.so.1) through pynvml (nvidia-ml-py).

Every query runs in a child process whose LD_LIBRARY_PATH has build/sim first, against the
test's private simulator state file; simulated allocations and kernels come from real
driver-API programs (tests/sim/progs/memhold.c, build/bin/tgs-workload).
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
from nvml_helpers import MIB, NVML_LIB, run_py

pytestmark = pytest.mark.timeout(120)


def _hold(prog: Path, env: dict[str, str], nbytes: int,
          mode: str = "hold") -> subprocess.Popen[str]:
    """memhold: allocate nbytes of simulated device memory (mode "hold-managed": managed memory
    prefetched to the device) and keep it until stdin closes."""
    p = subprocess.Popen([str(prog), str(nbytes), mode], env=env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None
    line = p.stdout.readline().split()
    if not line or line[0] != "0":
        _release(p)
        pytest.fail(f"memhold could not allocate {nbytes} bytes: {line}")
    return p


def _release(p: subprocess.Popen[str]) -> None:
    if p.poll() is None:
        if p.stdin:
            p.stdin.close()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def test_library_has_the_nvml_soname_and_exports_only_nvml_symbols() -> None:
    if not NVML_LIB.exists():
        pytest.fail(f"{NVML_LIB} is missing: run `make` first")
    dyn = subprocess.run(["readelf", "-d", str(NVML_LIB)], capture_output=True, text=True,
                         check=True).stdout
    assert "Library soname: [libnvidia-ml.so.1]" in dyn
    assert os.readlink(NVML_LIB.with_name("libnvidia-ml.so")) == "libnvidia-ml.so.1"
    syms = subprocess.run(["nm", "-D", "--defined-only", str(NVML_LIB)], capture_output=True,
                          text=True, check=True).stdout.split("\n")
    names = [ln.split()[-1] for ln in syms if ln.strip()]
    assert names and all(n.startswith("nvml") for n in names), names
    for needed in ("nvmlInit_v2", "nvmlInitWithFlags", "nvmlDeviceGetMemoryInfo_v2",
                   "nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetFanSpeed"):
        assert needed in names


IDENTITY = """
lib = cuda()
nv.nvmlInit()
out = {"count": nv.nvmlDeviceGetCount(), "driver": nv.nvmlSystemGetDriverVersion(),
       "cuda": nv.nvmlSystemGetCudaDriverVersion_v2(), "devs": []}
dv = ctypes.c_int(); lib.cuDriverGetVersion(ctypes.byref(dv)); out["cu_driver"] = dv.value
def s(v):
    return v.decode() if isinstance(v, bytes) else v
for i in range(out["count"]):
    h = nv.nvmlDeviceGetHandleByIndex(i)
    name = ctypes.create_string_buffer(256); assert lib.cuDeviceGetName(name, 256, i) == 0
    uu = ctypes.create_string_buffer(16); assert lib.cuDeviceGetUuid_v2(uu, i) == 0
    tot = ctypes.c_size_t(); assert lib.cuDeviceTotalMem_v2(ctypes.byref(tot), i) == 0
    cc = [ctypes.c_int(), ctypes.c_int()]
    assert lib.cuDeviceGetAttribute(ctypes.byref(cc[0]), 75, i) == 0
    assert lib.cuDeviceGetAttribute(ctypes.byref(cc[1]), 76, i) == 0
    bus = ctypes.create_string_buffer(64); assert lib.cuDeviceGetPCIBusId(bus, 64, i) == 0
    pci = nv.nvmlDeviceGetPciInfo(h)
    uuid = s(nv.nvmlDeviceGetUUID(h))
    out["devs"].append({
        "nv_name": s(nv.nvmlDeviceGetName(h)), "cu_name": name.value.decode(),
        "nv_uuid": uuid, "cu_uuid": uu.raw.hex(),
        "nv_total": nv.nvmlDeviceGetMemoryInfo(h).total, "cu_total": tot.value,
        "nv_cc": list(nv.nvmlDeviceGetCudaComputeCapability(h)), "cu_cc": [c.value for c in cc],
        "cu_bus": bus.value.decode(), "bus": s(pci.busId), "bus_legacy": s(pci.busIdLegacy),
        "index": nv.nvmlDeviceGetIndex(h), "minor": nv.nvmlDeviceGetMinorNumber(h),
        "by_uuid": nv.nvmlDeviceGetIndex(nv.nvmlDeviceGetHandleByUUID(uuid)),
        "by_bus": nv.nvmlDeviceGetIndex(nv.nvmlDeviceGetHandleByPciBusId(s(pci.busId))),
        "by_cu_bus": nv.nvmlDeviceGetIndex(nv.nvmlDeviceGetHandleByPciBusId(bus.value)),
        "arch": nv.nvmlDeviceGetArchitecture(h), "mig": list(nv.nvmlDeviceGetMigMode(h)),
        "mode": nv.nvmlDeviceGetComputeMode(h), "serial": s(nv.nvmlDeviceGetSerial(h)),
    })
nv.nvmlShutdown()
"""


def test_devices_match_what_the_simulated_driver_reports(nvml_env: dict[str, str]) -> None:
    env = {**nvml_env, "TGS_SIM_DEVICES": "2", "TGS_SIM_MEM": "3GiB"}
    out = run_py(env, IDENTITY)
    assert out["count"] == 2
    assert out["cuda"] == out["cu_driver"] == 13000
    assert out["driver"].split(".")[0].isdigit()
    uuids, serials = set(), set()
    for i, d in enumerate(out["devs"]):
        assert d["nv_name"] == d["cu_name"]
        u = d["cu_uuid"]
        assert d["nv_uuid"] == f"GPU-{u[:8]}-{u[8:12]}-{u[12:16]}-{u[16:20]}-{u[20:]}"
        assert d["nv_total"] == d["cu_total"] == 3 << 30
        assert d["nv_cc"] == d["cu_cc"] == [9, 0]
        assert d["bus_legacy"] == d["cu_bus"] and d["bus"] == "0000" + d["cu_bus"]
        assert d["index"] == d["minor"] == d["by_uuid"] == d["by_bus"] == d["by_cu_bus"] == i
        assert d["arch"] == 9 and d["mig"] == [0, 0] and d["mode"] == 0
        uuids.add(d["nv_uuid"])
        serials.add(d["serial"])
    assert len(uuids) == 2 and len(serials) == 2


MEMORY = """
pid = int(sys.argv[1]) if len(sys.argv) > 1 else 0
nv.nvmlInit()
h = nv.nvmlDeviceGetHandleByIndex(0)
m1 = nv.nvmlDeviceGetMemoryInfo(h)
m2 = nv.nvmlDeviceGetMemoryInfo(h, version=nv.nvmlMemory_v2)

class V1(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong)]
fn = nv.nvmlLib.nvmlDeviceGetComputeRunningProcesses
count = ctypes.c_uint(0)
first = fn(h, ctypes.byref(count), None)
need = count.value
arr = (V1 * 8)()
count.value = 8
second = fn(h, ctypes.byref(count), arr)
v1 = [[arr[k].pid, arr[k].usedGpuMemory] for k in range(count.value)]
def rows(ps):
    return [[p.pid, p.usedGpuMemory, p.gpuInstanceId, p.computeInstanceId] for p in ps]
out = {
    "m1": [m1.total, m1.free, m1.used],
    "m2": [m2.version, m2.total, m2.reserved, m2.free, m2.used],
    "v3": rows(nv.nvmlDeviceGetComputeRunningProcesses(h)),
    "v2": rows(nv.nvmlDeviceGetComputeRunningProcesses_v2(h)),
    "v1": v1, "v1_codes": [first, need, second],
    "graphics": rows(nv.nvmlDeviceGetGraphicsRunningProcesses(h)),
    "mps": rows(nv.nvmlDeviceGetMPSComputeRunningProcesses(h)),
    "names": [nv.nvmlSystemGetProcessName(p.pid)
              for p in nv.nvmlDeviceGetComputeRunningProcesses(h)],
}
nv.nvmlShutdown()
"""


def test_memory_and_processes_follow_a_simulated_allocation(
        nvml_env: dict[str, str], sim_progs: dict[str, Path]) -> None:
    env = {**nvml_env, "TGS_SIM_MEM": "2GiB"}
    total = 2 << 30
    idle = run_py(env, MEMORY)
    assert idle["m1"] == [total, total, 0]
    assert idle["v3"] == [] and idle["v2"] == [] and idle["v1"] == []
    assert idle["v1_codes"] == [0, 0, 0]            # none running: SUCCESS and a count of 0

    a = _hold(sim_progs["memhold"], env, 256 * MIB)
    b = _hold(sim_progs["memhold"], env, 64 * MIB)
    try:
        busy = run_py(env, MEMORY)
    finally:
        _release(a)
    try:
        after_a = run_py(env, MEMORY)
    finally:
        _release(b)
    gone = run_py(env, MEMORY)

    used = 320 * MIB
    assert busy["m1"] == [total, total - used, used]
    assert busy["m2"] == [0x02000028, total, 0, total - used, used]
    none = 0xFFFFFFFF
    want = sorted([[a.pid, 256 * MIB, none, none], [b.pid, 64 * MIB, none, none]])
    assert sorted(busy["v3"]) == want and sorted(busy["v2"]) == want
    assert sorted(busy["v1"]) == sorted([[a.pid, 256 * MIB], [b.pid, 64 * MIB]])
    assert busy["v1_codes"] == [7, 2, 0]            # INSUFFICIENT_SIZE with the count needed
    assert busy["graphics"] == [] and busy["mps"] == []
    assert all(n.endswith("sim-memhold") for n in busy["names"]), busy["names"]

    assert after_a["m1"] == [total, total - 64 * MIB, 64 * MIB]
    assert after_a["v3"] == [[b.pid, 64 * MIB, none, none]]
    assert gone["m1"] == [total, total, 0] and gone["v3"] == []


def test_a_killed_process_leaves_the_list_and_its_memory_is_free(
        nvml_env: dict[str, str], sim_progs: dict[str, Path]) -> None:
    p = _hold(sim_progs["memhold"], nvml_env, 128 * MIB)
    try:
        before = run_py(nvml_env, MEMORY)
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=10)
        after = run_py(nvml_env, MEMORY)
    finally:
        _release(p)
    assert [r[0] for r in before["v3"]] == [p.pid] and before["m1"][2] == 128 * MIB
    # its slot's lock is gone: no longer listed, its memory free, whether or not reaped yet
    assert after["v3"] == [] and after["m1"][2] == 0


ERRORS = """
lib = ctypes.CDLL("libnvidia-ml.so.1")      # the same library pynvml loads below
codes = {}
n = ctypes.c_uint()
codes["uninit_count"] = lib.nvmlDeviceGetCount_v2(ctypes.byref(n))
codes["shutdown_uninit"] = lib.nvmlShutdown()
codes["bad_flags"] = lib.nvmlInitWithFlags(0x100)
nv.nvmlInit()
nv.nvmlInit()                     # reference counted, as NVML is
h = nv.nvmlDeviceGetHandleByIndex(0)
codes["index"] = err(nv.nvmlDeviceGetHandleByIndex, 1)
codes["index_huge"] = err(nv.nvmlDeviceGetHandleByIndex, 2**32 - 1)
codes["uuid"] = err(nv.nvmlDeviceGetHandleByUUID, "GPU-00000000-0000-4000-8000-000000000000")
codes["bus_absent"] = err(nv.nvmlDeviceGetHandleByPciBusId, "00000000:07:00.0")
codes["bus_junk"] = err(nv.nvmlDeviceGetHandleByPciBusId, "not a bus id")
forged = ctypes.cast(ctypes.c_void_p(0x1000), nv.c_nvmlDevice_t)
codes["forged_name"] = err(nv.nvmlDeviceGetName, forged)
codes["forged_mem"] = err(nv.nvmlDeviceGetMemoryInfo, forged)
codes["null_handle"] = err(nv.nvmlDeviceGetUUID, ctypes.cast(None, nv.c_nvmlDevice_t))
m = nv.c_nvmlMemory_v2_t(); m.version = 1
codes["mem_v2_version"] = nv.nvmlLib.nvmlDeviceGetMemoryInfo_v2(h, ctypes.byref(m))
codes["mem_null"] = nv.nvmlLib.nvmlDeviceGetMemoryInfo(h, None)
codes["procs_null_count"] = nv.nvmlLib.nvmlDeviceGetComputeRunningProcesses_v3(h, None, None)
codes["temp_sensor"] = err(nv.nvmlDeviceGetTemperature, h, 7)
codes["clock_type"] = err(nv.nvmlDeviceGetClockInfo, h, 9)
small = ctypes.create_string_buffer(4)
codes["name_small"] = nv.nvmlLib.nvmlDeviceGetName(h, small, ctypes.c_uint(4))
codes["fan"] = err(nv.nvmlDeviceGetFanSpeed, h)
codes["pci_legacy"] = nv.nvmlLib.nvmlDeviceGetPciInfo_v2(h, None)
nv.nvmlShutdown()
codes["after_one_shutdown"] = err(nv.nvmlDeviceGetCount)
nv.nvmlShutdown()
codes["after_both"] = err(nv.nvmlDeviceGetName, h)
nv.nvmlLib.nvmlErrorString.restype = ctypes.c_char_p
out = {"codes": codes, "strings": [nv.nvmlLib.nvmlErrorString(c).decode() for c in (0, 3, 999)]}
"""


def test_errors_for_bad_handles_indices_and_arguments(nvml_env: dict[str, str]) -> None:
    out = run_py(nvml_env, ERRORS)
    assert out["codes"] == {
        "uninit_count": 1, "shutdown_uninit": 1, "bad_flags": 2,
        "index": 2, "index_huge": 2, "uuid": 6, "bus_absent": 6, "bus_junk": 2,
        "forged_name": 2, "forged_mem": 2, "null_handle": 2,
        "mem_v2_version": 25, "mem_null": 2, "procs_null_count": 2,
        "temp_sensor": 2, "clock_type": 2, "name_small": 7,
        "fan": 3, "pci_legacy": 3,
        "after_one_shutdown": 0, "after_both": 1,
    }
    assert out["strings"] == ["Success", "Not Supported", "Unknown Error"]


FIRST = """
nv.nvmlInit()
uuid = nv.nvmlDeviceGetUUID(nv.nvmlDeviceGetHandleByIndex(0))
uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
procs = nv.nvmlDeviceGetComputeRunningProcesses(nv.nvmlDeviceGetHandleByIndex(0))
out = {"uuid": uuid, "procs": len(procs), "exists": os.path.exists(os.environ["TGS_SIM_STATE"])}
"""

DRIVER_UUID = """
lib = cuda()
uu = ctypes.create_string_buffer(16)
assert lib.cuDeviceGetUuid_v2(uu, 0) == 0
u = uu.raw.hex()
out = f"GPU-{u[:8]}-{u[8:12]}-{u[12:16]}-{u[16:20]}-{u[20:]}"
"""


def test_first_nvml_user_creates_the_state_file_with_the_drivers_uuids(
        nvml_env: dict[str, str]) -> None:
    state = Path(nvml_env["TGS_SIM_STATE"])
    assert not state.exists()
    first = run_py(nvml_env, FIRST)
    assert first["exists"] and first["procs"] == 0    # NVML itself is not a GPU process
    assert run_py(nvml_env, DRIVER_UUID) == first["uuid"]


def test_a_foreign_state_file_is_refused(nvml_env: dict[str, str]) -> None:
    Path(nvml_env["TGS_SIM_STATE"]).write_bytes(b"not a simulator state file" * 100)
    out = run_py(nvml_env, "out = err(nv.nvmlInit)")
    assert out == 18                    # NVML_ERROR_LIB_RM_VERSION_MISMATCH


def test_benchmarks_do_not_take_the_simulated_nvml_for_a_real_gpu(
        nvml_env: dict[str, str]) -> None:
    out = run_py(nvml_env, """
from tgs.testbed.gpu import real_gpu_problem, resolve_gpu
out = [real_gpu_problem(), resolve_gpu("auto")]
""")
    assert out[1] == "sim" and "simulator" in out[0]


THREADS = """
import threading
errors = []
def worker(k):
    try:
        end = time.monotonic() + 1.5
        while time.monotonic() < end:
            nv.nvmlInit()
            h = nv.nvmlDeviceGetHandleByIndex(0)
            nv.nvmlDeviceGetMemoryInfo(h)
            nv.nvmlDeviceGetUtilizationRates(h)
            nv.nvmlDeviceGetComputeRunningProcesses(h)
            nv.nvmlDeviceGetTemperature(h, 0)
            nv.nvmlShutdown()
    except Exception as exc:
        errors.append(repr(exc))
ts = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
for t in ts: t.start()
for t in ts: t.join()
out = {"errors": errors, "after": err(nv.nvmlDeviceGetCount)}
"""


def test_threads_initialising_and_querying_at_once(
        nvml_env: dict[str, str], sim_progs: dict[str, Path]) -> None:
    p = _hold(sim_progs["memhold"], nvml_env, 32 * MIB)
    try:
        out = run_py(nvml_env, THREADS)
    finally:
        _release(p)
    assert out == {"errors": [], "after": 1}    # balanced init/shutdown: uninitialised again


def test_resident_managed_memory_counts_in_the_process_figure(
        nvml_env: dict[str, str], sim_progs: dict[str, Path]) -> None:
    """The processes' figures add up to the device's used memory, managed memory resident on
    the device included (the simulator counts it in cuMemGetInfo and NVML's device total)."""
    env = {**nvml_env, "TGS_SIM_MEM": "2GiB"}
    a = _hold(sim_progs["memhold"], env, 128 * MIB, "hold-managed")
    b = _hold(sim_progs["memhold"], env, 64 * MIB)
    try:
        busy = run_py(env, MEMORY)
    finally:
        _release(a)
        _release(b)
    per_pid = {pid: used for pid, used, *_ in busy["v3"]}
    assert per_pid == {a.pid: 128 * MIB, b.pid: 64 * MIB}
    assert busy["m1"][2] == sum(per_pid.values())

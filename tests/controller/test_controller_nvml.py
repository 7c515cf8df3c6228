"""The controller's NVML path (no --sim) against the simulated NVML and driver.

With build/sim first on LD_LIBRARY_PATH, pynvml in the controller loads the simulated
libnvidia-ml.so.1: devices are discovered through NVML (kind "nvml", the driver's UUIDs),
and status's per-GPU memory and utilisation come from NVML while a driver-API workload
holds memory and keeps the device busy.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from ctl_helpers import Daemon, stop, wait_for

ROOT = Path(__file__).resolve().parents[2]
NVML_LIB = ROOT / "build" / "sim" / "libnvidia-ml.so.1"
MIB = 1 << 20

pytestmark = pytest.mark.timeout(120)

DRIVER_UUIDS = r"""
import ctypes
lib = ctypes.CDLL("libcuda.so.1")
assert lib.cuInit(0) == 0
n = ctypes.c_int(); lib.cuDeviceGetCount(ctypes.byref(n))
for i in range(n.value):
    uu = ctypes.create_string_buffer(16); lib.cuDeviceGetUuid_v2(uu, i); u = uu.raw.hex()
    print(f"GPU-{u[:8]}-{u[8:12]}-{u[12:16]}-{u[16:20]}-{u[20:]}")
"""


class NvmlDaemon(Daemon):
    """tgs-controller WITHOUT --sim: it must find the GPUs through NVML."""

    def start(self) -> NvmlDaemon:
        from tgs.client import Client, ControllerUnavailable
        cmd = [sys.executable, "-m", "tgs.controller", "--state-dir", str(self.state),
               "--runtime-dir", str(self.runtime), "--log-level", "debug", *self.args]
        self.log = open(self.base / "controller.log", "ab")
        self.proc = subprocess.Popen(cmd, stderr=self.log, env=self.env)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"controller exited: {self.logtext()}")
            try:
                Client(runtime_dir=self.runtime, timeout=0.5).status()
                return self
            except ControllerUnavailable:
                time.sleep(0.1)
        raise RuntimeError(f"controller did not come up: {self.logtext()}")

    def logtext(self) -> str:
        return (self.base / "controller.log").read_text(errors="replace")[-3000:]


@pytest.fixture
def nvml_env(sim_env: dict[str, str]) -> dict[str, str]:
    if not NVML_LIB.exists():
        pytest.fail(f"{NVML_LIB} is missing: run `make` first")
    pytest.importorskip("pynvml")
    return {**sim_env, "TGS_SIM_DEVICES": "2", "TGS_SIM_MEM": "4GiB"}


def test_controller_without_sim_uses_nvml_for_devices_memory_and_stats(
        tmp_path: Path, nvml_env: dict[str, str], workload_bin: Path) -> None:
    wl = subprocess.Popen([str(workload_bin), "--kernels", "40", "--kernel-us", "5000",
                           "--gap-ms", "0", "--seconds", "60", "--mem", "256MiB",
                           "--device", "1"], env=nvml_env, stdout=subprocess.PIPE, text=True)
    d = NvmlDaemon(tmp_path, env=nvml_env)
    try:
        assert wl.stdout is not None and '"start"' in wl.stdout.readline()
        uuids = subprocess.run([sys.executable, "-c", DRIVER_UUIDS], env=nvml_env, check=True,
                               capture_output=True, text=True).stdout.split()
        d.start()
        c = d.client()
        st = c.status()
        assert [(x["index"], x["uuid"], x["name"], x["mem_total"], x["kind"])
                for x in st["devices"]] == [
            (i, uuids[i], "TGS Simulated GPU", 4 << 30, "nvml") for i in range(2)]

        def gpus_seen() -> list | None:
            g = {x["index"]: x for x in c.status().get("gpus", [])}
            ok = (len(g) == 2 and g[1]["mem_used"] == 256 * MIB and g[0]["mem_used"] == 0
                  and (g[1]["utilization"] or 0) >= 0.5 and g[0]["utilization"] == 0)
            return [g[0], g[1]] if ok else None

        seen = wait_for(gpus_seen, timeout=20, step=0.2)
        assert seen, f"status gpus never showed the workload: {c.status().get('gpus')}"
        assert seen[1]["mem_total"] == 4 << 30

        # jobs can name the GPU by its NVML UUID
        reply = c.register("by-uuid", device=uuids[1])
        assert (reply["job"]["device"], reply["job"]["device_uuid"]) == (1, uuids[1])

        stop(wl)

        def freed() -> bool:
            g = {x["index"]: x for x in c.status().get("gpus", [])}
            return bool(g) and g[1]["mem_used"] == 0 and g[1]["utilization"] == 0

        assert wait_for(freed, timeout=20, step=0.2), c.status().get("gpus")
    finally:
        stop(wl)
        d.close()


def test_controller_without_sim_falls_back_when_nvml_is_unusable(
        tmp_path: Path, nvml_env: dict[str, str]) -> None:
    """A state file NVML cannot use: discovery falls back to the simulator's devices."""
    Path(nvml_env["TGS_SIM_STATE"]).write_bytes(b"\0" * 4096)
    d = NvmlDaemon(tmp_path, env=nvml_env)
    try:
        d.start()
        devs = d.client().status()["devices"]
        assert devs and all(x["kind"] == "sim" for x in devs)
    finally:
        d.close()


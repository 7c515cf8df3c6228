"""Utilisation from the simulated NVML (pynvml in child processes): the device's and each
process's busy share while driver-API workloads (build/bin/tgs-workload) run, and the sensors
that follow it.
"""

from __future__ import annotations

import json
import statistics
import subprocess
from pathlib import Path

import pytest
from nvml_helpers import MIB, run_py

pytestmark = pytest.mark.timeout(120)


UTIL = """
n, every = int(sys.argv[1]), float(sys.argv[2])
nv.nvmlInit()
h = nv.nvmlDeviceGetHandleByIndex(0)
out = {"util": [], "temp": [], "power": [], "proc_util": []}
for _ in range(n):
    out["util"].append(nv.nvmlDeviceGetUtilizationRates(h).gpu)
    try:
        out["proc_util"].append([[x.pid, x.smUtil, x.memUtil, x.timeStamp > 0]
                                 for x in nv.nvmlDeviceGetProcessUtilization(h, 0)])
    except nv.NVMLError as exc:
        out["proc_util"].append(exc.value)
    out["temp"].append(nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU))
    out["power"].append(nv.nvmlDeviceGetPowerUsage(h))
    time.sleep(every)
out["procs"] = [[p.pid, p.usedGpuMemory] for p in nv.nvmlDeviceGetComputeRunningProcesses(h)]
nv.nvmlShutdown()
"""


def _run_util(env: dict[str, str], n: int, every: float) -> dict:
    code = UTIL.replace("int(sys.argv[1]), float(sys.argv[2])", f"{n}, {every}")
    return run_py(env, code)


def test_utilisation_rises_while_a_workload_runs(
        nvml_env: dict[str, str], workload_bin: Path) -> None:
    idle = _run_util(nvml_env, 2, 0.15)
    assert idle["util"] == [0, 0] and idle["procs"] == []
    # 200 ms of kernels per iteration, no host gap: busy almost all the time, even when the
    # host is slow to launch the next batch on a loaded machine
    wl = subprocess.Popen([str(workload_bin), "--kernels", "40", "--kernel-us", "5000",
                           "--gap-ms", "0", "--seconds", "8", "--mem", "64MiB",
                           "--report-ms", "200"],
                          env=nvml_env, stdout=subprocess.PIPE, text=True)
    try:
        assert wl.stdout is not None
        start = json.loads(wl.stdout.readline())
        assert start["type"] == "start", start
        busy = _run_util(nvml_env, 6, 0.25)
    finally:
        wl.kill()
        wl.wait()
    after = _run_util(nvml_env, 2, 0.15)
    assert statistics.median(busy["util"]) >= 50, busy
    assert idle["proc_util"] == [6, 6]              # no process: NVML_ERROR_NOT_FOUND
    assert all(len(x) == 1 and x[0][0] == wl.pid and x[0][2] == 0 and x[0][3]
               for x in busy["proc_util"]), busy["proc_util"]
    assert statistics.median(x[0][1] for x in busy["proc_util"]) >= 50, busy["proc_util"]
    assert max(busy["temp"]) > min(idle["temp"]) and max(busy["power"]) > min(idle["power"])
    assert busy["procs"] == [[wl.pid, 64 * MIB]]
    assert after["util"][-1] <= 10, after
    assert after["procs"] == []


def test_process_utilisation_splits_the_device_between_two_workloads(
        nvml_env: dict[str, str], workload_bin: Path) -> None:
    cmd = [str(workload_bin), "--kernels", "40", "--kernel-us", "5000", "--gap-ms", "0",
           "--seconds", "8"]
    wls = [subprocess.Popen(cmd, env=nvml_env, stdout=subprocess.PIPE, text=True)
           for _ in range(2)]
    try:
        for w in wls:
            assert w.stdout is not None and json.loads(w.stdout.readline())["type"] == "start"
        busy = _run_util(nvml_env, 6, 0.25)
    finally:
        for w in wls:
            w.kill()
            w.wait()
    samples = [x for x in busy["proc_util"] if isinstance(x, list) and len(x) == 2]
    assert len(samples) >= 4, busy["proc_util"]
    assert {p for p, *_ in samples[0]} == {w.pid for w in wls}
    # time-sliced round robin: about half each, together about the whole device
    for pid in (w.pid for w in wls):
        share = statistics.median(sm for s in samples for p, sm, *_ in s if p == pid)
        assert 20 <= share <= 80, samples
    assert statistics.median(sum(sm for _, sm, *_ in s) for s in samples) >= 60, samples
    assert statistics.median(busy["util"]) >= 60, busy

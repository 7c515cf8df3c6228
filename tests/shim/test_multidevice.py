"""A job over several GPUs (TGS_PARTS, libshim/parts.c) on the simulator with two devices: each
process attaches to the part of the device it works on, found by the device's UUID (never its
ordinal), gets that part's quota, and is gated by that device's production jobs only."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from shim_helpers import finish, list_jobs, own_pub, run_probe, tgs_lines
from tgs.intercept import devseg, segment

pytestmark = pytest.mark.timeout(120)
MIB = 1 << 20
QUOTA = 4 * MIB                      # per device: each part gets it
OOM = 2                              # CUDA_ERROR_OUT_OF_MEMORY


@dataclass
class MultiJob:
    parts: list[segment.Segment]
    uuids: list[str]                 # the simulator's device UUIDs, physical order
    env: dict[str, str]


def sim_uuids(probe_bin: Path, env: dict[str, str]) -> list[str]:
    out = run_probe(probe_bin, env, "uuid:0", "uuid:1")
    assert [ln.split()[1] for ln in out] == ["0", "0"], out
    return [ln.split()[2] for ln in out]


def make_parts(tmp_path: Path, uuids: list[str], name: str = "mj",
               **kw: int) -> list[segment.Segment]:
    """A multi-device job's parts as the controller makes them: <name>@<k> bound to device k
    by index and by the CUDA driver's UUID."""
    return [segment.create(tmp_path / f"{name}@{k}.seg", f"{name}@{k}", device_index=k,
                           device_uuid=u, mem_quota=QUOTA, nslots=8, **kw)
            for k, u in enumerate(uuids)]


@pytest.fixture
def env2(shim_env: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in shim_env.items() if k != "CUDA_VISIBLE_DEVICES"}
    env["TGS_SIM_DEVICES"] = "2"
    return env


@pytest.fixture
def mjob(tmp_path: Path, env2: dict[str, str], probe_bin: Path) -> Iterator[MultiJob]:
    uuids = sim_uuids(probe_bin, env2)
    parts = make_parts(tmp_path, uuids)
    env = dict(env2, TGS_SEGMENT=str(parts[0].path),
               TGS_PARTS=";".join(str(p.path) for p in parts))
    try:
        yield MultiJob(parts, uuids, env)
    finally:
        for p in parts:
            p.close()


def probe(exe: Path, env: dict[str, str], *cmds: str) -> tuple[list[list[str]], str]:
    p = subprocess.run([str(exe), *cmds], env=env, capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr
    return [ln.split() for ln in p.stdout.splitlines()], p.stderr


def test_each_process_gets_the_part_of_its_device(probe_bin: Path, mjob: MultiJob) -> None:
    """One process per GPU: each sees its part's quota and fills only its part; filling the
    quota on one device leaves the other device's quota whole."""
    p0 = subprocess.Popen([str(probe_bin), "dev:0", "meminfo", f"alloc_until:{MIB}:64", "ready"],
                          env=mjob.env, text=True, stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE)
    try:
        assert p0.stdout is not None
        lines = [p0.stdout.readline().split() for _ in range(4)]
        assert lines[0] == ["dev", "0"]
        assert lines[1][0] == "meminfo" and int(lines[1][2]) == QUOTA
        assert lines[2] == ["admitted", "4", str(OOM)]          # the per-device quota
        assert mjob.parts[0].ledger()[0] == QUOTA and mjob.parts[1].ledger()[0] == 0
        assert len(mjob.parts[0].live_slots()) == 1 and not mjob.parts[1].live_slots()
        # device 0 full: a process on device 1 still has the whole quota of its part
        out, _ = probe(probe_bin, mjob.env, "dev:1", "meminfo", "ctxdev",
                       f"alloc_until:{MIB}:64", "meminfo")
        assert out[0] == ["dev", "0"] and out[2] == ["ctxdev", "0", "1"]
        assert int(out[1][1]) == QUOTA and int(out[1][2]) == QUOTA
        assert out[3] == ["admitted", "4", str(OOM)]
        assert out[4][1:] == ["0", str(QUOTA), "0"]
    finally:
        finish(p0)


def test_cuMemGetInfo_on_another_device_of_the_job(probe_bin: Path, mjob: MultiJob) -> None:
    """A process attached on device 0 asking on device 1: device 1's part's quota clamps the
    device's numbers, and one warning says its allocations stay charged to its own part."""
    mjob.parts[1].set_quota(2 * MIB)
    out, err = probe(probe_bin, mjob.env, "dev:0", "alloc:1048576", "meminfo", "dev:1",
                     "meminfo", "meminfo")
    assert out[2] == ["meminfo", str(QUOTA - MIB), str(QUOTA), "0"]
    assert out[3] == ["dev", "0"]
    assert out[4] == out[5] == ["meminfo", str(2 * MIB), str(2 * MIB), "0"]
    warn = [ln for ln in tgs_lines(err) if "works on device 1 too" in ln]
    assert len(warn) == 1, err
    assert mjob.parts[0].ledger()[2] == MIB and mjob.parts[1].ledger()[2] == 0   # peaks


def test_allocations_on_a_second_device_stay_with_the_first_part(probe_bin: Path,
                                                                  mjob: MultiJob) -> None:
    """A process that moves to the job's other GPU (single-process multi-GPU): its
    allocations there are charged to the part it attached to, said once on stderr."""
    out, err = probe(probe_bin, mjob.env, "dev:0", "alloc:1048576", "dev:1", "alloc:1048576",
                     "alloc:1048576")
    assert [ln[:2] for ln in out] == [["dev", "0"], ["alloc", "0"], ["dev", "0"],
                                      ["alloc", "0"], ["alloc", "0"]]
    warn = [ln for ln in tgs_lines(err) if "works on device 1 too" in ln]
    assert len(warn) == 1, err
    assert mjob.parts[0].ledger()[2] == 3 * MIB and mjob.parts[1].ledger()[2] == 0


def test_visible_devices_remap_by_uuid(probe_bin: Path, mjob: MultiJob) -> None:
    """CUDA_VISIBLE_DEVICES=<device 1's UUID>: ordinal 0 is device 1, whose part it takes."""
    mjob.parts[1].set_quota(3 * MIB)
    env = dict(mjob.env, CUDA_VISIBLE_DEVICES=mjob.uuids[1])
    out, _ = probe(probe_bin, env, "count", "dev:0", "meminfo", "alloc:1048576")
    assert out[0] == ["count", "0", "1"]
    assert out[2][2] == str(3 * MIB) and out[3] == ["alloc", "0"]
    assert mjob.parts[1].ledger()[2] == MIB and mjob.parts[0].ledger()[2] == 0   # peaks


def test_no_part_for_the_device_passes_through(probe_bin: Path, tmp_path: Path,
                                               env2: dict[str, str]) -> None:
    uuids = sim_uuids(probe_bin, env2)
    (only0,) = make_parts(tmp_path, uuids[:1], name="one")
    try:
        env = dict(env2, TGS_SEGMENT=str(only0.path), TGS_PARTS=str(only0.path))
        out, err = probe(probe_bin, env, "dev:1", "meminfo")
        assert int(out[1][2]) > QUOTA                          # the device's real memory
        lines = [ln for ln in tgs_lines(err) if "no part of the job" in ln]
        assert len(lines) == 1 and uuids[1] in lines[0], err
        assert not only0.live_slots()
    finally:
        only0.close()


def test_production_on_device_1_gates_only_device_1(probe_bin: Path, tmp_path: Path,
                                                    env2: dict[str, str]) -> None:
    """A production job on device 1 only, busy: the opportunistic job's process on device 0
    launches at once, its process on device 1 waits at the gate."""
    uuids = sim_uuids(probe_bin, env2)
    parts = make_parts(tmp_path, uuids, name="opp", priority=segment.PRIORITY_OPPORTUNISTIC,
                       gate_flags=segment.GATE_WAIT, gate_max_wait_us=300_000)
    devs = [devseg.create_device(tmp_path, k) for k in range(2)]
    prod = segment.create(tmp_path / "prod.seg", "prod", device_index=1, device_uuid=uuids[1],
                          gate_flags=segment.GATE_PUBLISH)
    prod_pub = own_pub(prod)
    try:
        list_jobs(devs[0], parts[0])
        list_jobs(devs[1], prod, parts[1])
        prod_pub.view.busy = 1
        env = dict(env2, TGS_SEGMENT=str(parts[0].path),
                   TGS_PARTS=";".join(str(p.path) for p in parts))
        t0 = int(probe(probe_bin, env, "dev:0", "launch:4:1:32")[0][1][3])
        t1 = int(probe(probe_bin, env, "dev:1", "launch:4:1:32")[0][1][3])
        assert t0 < 0.25e9                         # never waited for device 1's production
        assert t1 >= 4 * 0.3e9 * 0.9               # each launch waited its 300 ms
    finally:
        prod_pub.close()
        prod.close()
        for p in parts:
            p.close()
        for d in devs:
            d.close()


def hold(exe: Path, env: dict[str, str], dev: int, nbytes: int) -> subprocess.Popen[str]:
    """The probe on ordinal dev holding nbytes until its stdin closes."""
    p = subprocess.Popen([str(exe), f"dev:{dev}", f"alloc:{nbytes}", "ready"], env=env,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None
    lines = [p.stdout.readline().strip() for _ in range(3)]
    if lines != ["dev 0", "alloc 0", "ready"]:
        finish(p)
        pytest.fail(f"probe could not hold {nbytes} bytes on {dev}: {lines}")
    return p


NVML_QUERY = """
import json, warnings
warnings.simplefilter("ignore")
import pynvml as nv
nv.nvmlInit()
out = []
for i in range(nv.nvmlDeviceGetCount()):
    h = nv.nvmlDeviceGetHandleByIndex(i)
    m = nv.nvmlDeviceGetMemoryInfo(h)
    out.append({"uuid": nv.nvmlDeviceGetUUID(h), "mem": [m.total, m.free, m.used],
                "procs": sorted([p.pid, p.usedGpuMemory]
                                for p in nv.nvmlDeviceGetComputeRunningProcesses(h))})
print("OUT " + json.dumps(out))
"""


def test_nvml_and_cuMemGetInfo_show_each_device_with_its_part(probe_bin: Path,
                                                              mjob: MultiJob) -> None:
    """Processes on both devices: NVML (a client that never calls CUDA) shows each GPU with its
    part's quota, usage and processes, as cuMemGetInfo shows it from either device."""
    pytest.importorskip("pynvml")
    mjob.parts[1].set_quota(3 * MIB)
    a = hold(probe_bin, mjob.env, 0, MIB)
    b = hold(probe_bin, mjob.env, 1, 2 * MIB)
    try:
        res = subprocess.run([sys.executable, "-c", NVML_QUERY], env=mjob.env, text=True,
                             capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
        assert res.returncode == 0, res.stderr
        devs = json.loads(next(ln for ln in res.stdout.splitlines()
                               if ln.startswith("OUT "))[4:])
        assert [d["uuid"] for d in devs] == mjob.uuids
        assert devs[0]["mem"] == [QUOTA, QUOTA - MIB, MIB]
        assert devs[1]["mem"] == [3 * MIB, MIB, 2 * MIB]
        assert devs[0]["procs"] == [[a.pid, MIB]] and devs[1]["procs"] == [[b.pid, 2 * MIB]]
        # cuMemGetInfo agrees, asked on device 1 by a process whose part is device 0's
        out, _ = probe(probe_bin, mjob.env, "dev:0", "meminfo", "dev:1", "meminfo")
        assert out[1][1:3] == [str(QUOTA - MIB), str(QUOTA)]
        assert out[3][1:3] == [str(MIB), str(3 * MIB)]
    finally:
        finish(a)
        finish(b)

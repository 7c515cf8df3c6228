"""Fail safe where no job is registered, fail closed where one is.

A missing or bad .ctl (the controller's file: no registered job here) and bad environment
values give ONE "tgs: " line on stderr and the program still runs and exits 0 (pass-through,
or the static TGS_MEM_LIMIT).  With a valid .ctl the job is registered, and nothing the tenant
does to its own .seg (corrupt it, lock every slot) lets a process run without the job's limits:
after a bounded wait (TGS_SLOT_WAIT_MS) its CUDA launches and allocations are refused, one
line saying so.  fork re-attaches."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from shim_helpers import Job, finish, run_probe, tgs_lines
from tgs.intercept import segment

pytestmark = pytest.mark.timeout(60)


def _run(exe: Path, env: dict[str, str], *cmds: str) -> tuple[list[str], list[str]]:
    p = subprocess.run([str(exe), *cmds], env=env, capture_output=True, text=True, timeout=30,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr
    return p.stdout.splitlines(), tgs_lines(p.stderr)


def _corrupt(path: Path, how: str) -> None:
    data = bytearray(path.read_bytes())
    if how == "magic":
        data[0:8] = b"\0" * 8
    elif how == "version":
        data[8] = 77
    elif how == "truncated":
        data = data[: len(data) - 100]
    path.write_bytes(bytes(data))


# every allocation and launch path the probe has, each refused when the job refuses the process
REFUSED_CMDS = ("alloc:4000000", "alloc32:4096", "managed:4096", "async:4096", "pool:4096",
                "create:2097152", "array:64:64", "array3d:16:16:4", "mipmap:64:64:2",
                "launch:2:1:32")


def _refused(out: list[str]) -> dict[str, int]:
    """The probe's result code per command (after init)."""
    return {line.split()[0]: int(line.split()[-1]) for line in out[1:]}


@pytest.mark.parametrize(
    ("how", "needle"),
    [("magic", "bad magic"), ("version", "version 77"), ("truncated", "truncated")],
)
def test_bad_segment_of_a_registered_job_fails_closed(probe_bin: Path, job: Job, how: str,
                                                      needle: str) -> None:
    _corrupt(job.seg.path, how)
    env = dict(job.env, TGS_SLOT_WAIT_MS="100")
    out, lines = _run(probe_bin, env, "init", *REFUSED_CMDS, "meminfo")
    codes = _refused(out)
    assert out[0] == "init 0"
    assert all(codes[c.split(":")[0]] != 0 for c in REFUSED_CMDS), out
    assert codes["launch"] == 800                       # CUDA_ERROR_NOT_PERMITTED
    assert codes["alloc"] == 2                          # CUDA_ERROR_OUT_OF_MEMORY
    assert out[-1].split()[1:3] == ["0", "0"], out      # meminfo: nothing to give
    assert len(lines) == 1 and needle in lines[0] and "refused" in lines[0], lines
    assert f"registered job '{job.seg.job_name}'" in lines[0], lines


def test_segment_of_another_job_fails_closed(probe_bin: Path, job: Job) -> None:
    """The .seg must be the same job's as the .ctl (name, slots, creation time)."""
    other = segment.create(job.seg.path.with_name("other.seg"), "other", nslots=8)
    other.close()
    segment.ctl_path(job.seg.path).write_bytes(segment.ctl_path(other.path).read_bytes())
    out, lines = _run(probe_bin, dict(job.env, TGS_SLOT_WAIT_MS="50"), "init", "alloc:4000000")
    assert out[1] == "alloc 2"
    assert len(lines) == 1 and "does not belong" in lines[0] and "refused" in lines[0], lines


def test_missing_segment_passes_through(probe_bin: Path, job: Job) -> None:
    """TGS_SEGMENT names no file and no .ctl beside it: no job here, pass-through."""
    env = dict(job.env, TGS_SEGMENT=str(job.seg.path.parent / "nope.seg"))
    out, lines = _run(probe_bin, env, "init", "alloc:4000000", "meminfo", "launch:2:1:32")
    assert out[1] == "alloc 0"
    assert len(lines) == 1 and "No such file" in lines[0], lines


@pytest.mark.parametrize(
    ("how", "needle"),
    [("magic", "control segment"), ("truncated", "control segment"),
     ("missing", "control segment")],
)
def test_bad_control_segment_passes_through(probe_bin: Path, job: Job, how: str,
                                            needle: str) -> None:
    """The .ctl (read-only, the controller's) is checked as strictly as the .seg."""
    ctl = segment.ctl_path(job.seg.path)
    if how == "missing":
        ctl.unlink()
    else:
        _corrupt(ctl, how)
    out, lines = _run(probe_bin, job.env, "init", "alloc:4000000", "meminfo", "launch:2:1:32")
    assert out[1] == "alloc 0"
    assert len(lines) == 1 and needle in lines[0], lines


@pytest.mark.parametrize("what", ["pub", "device"])
def test_missing_pub_or_device_only_disables_gating(probe_bin: Path, tmp_path: Path,
                                                    shim_env: dict[str, str], what: str) -> None:
    """A production job without its publish page, or an opportunistic one without a device
    segment: one line, the limits still hold, launches are not gated."""
    prio = segment.PRIORITY_PRODUCTION if what == "pub" else segment.PRIORITY_OPPORTUNISTIC
    gate = segment.GATE_PUBLISH if what == "pub" else segment.GATE_WAIT
    seg = segment.create(tmp_path / "j.seg", "j", mem_quota=1 << 20, priority=prio,
                         gate_flags=gate, gate_max_wait_us=5_000_000)
    try:
        if what == "pub":
            segment.pub_path(seg.path, "j").unlink()
        env = dict(shim_env, TGS_SEGMENT=str(seg.path))
        out, lines = _run(probe_bin, env, "init", "alloc:4000000", "launch:3:1:32", "sync",
                          "launch:3:1:32")
        assert out[1] == "alloc 2"                       # the quota still applies
        assert int(out[2].split()[3]) < 2e9              # not held by a gate
        refused = [line for line in lines if "quota refused" in line]
        others = [line for line in lines if "quota refused" not in line]
        assert len(refused) == 1 and "job 'j'" in refused[0], lines  # the refusal, said once
        assert len(others) == 1, lines
        assert ("publish page" in others[0]) if what == "pub" else ("device segment" in others[0])
    finally:
        seg.close()


def test_bad_control_segment_falls_back_to_static_limit(probe_bin: Path, job: Job) -> None:
    _corrupt(segment.ctl_path(job.seg.path), "magic")
    env = dict(job.env, TGS_MEM_LIMIT="2M")
    out, lines = _run(probe_bin, env, "init", "alloc:1500000", "alloc:1000000")
    assert out[1:] == ["alloc 0", "alloc 2"] and len(lines) == 2
    assert "standalone (TGS_MEM_LIMIT): the memory quota refused an allocation of 1000000" \
        in lines[1]


@pytest.mark.parametrize("value", ["lots", "12XB", "-5", "99999999999999999999G"])
def test_bad_mem_limit(probe_bin: Path, shim_env: dict[str, str], value: str) -> None:
    out, lines = _run(probe_bin, dict(shim_env, TGS_MEM_LIMIT=value), "init", "alloc:4000000")
    assert out[1] == "alloc 0"
    assert len(lines) == 1 and "TGS_MEM_LIMIT" in lines[0]


def _holder(probe_bin: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    holder = subprocess.Popen([str(probe_bin), "init", "alloc:100", "ready"], env=env, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert holder.stdout is not None
    assert [holder.stdout.readline().strip() for _ in range(3)][2] == "ready"
    return holder


def test_full_slot_table_fails_closed(probe_bin: Path, tmp_path: Path,
                                      shim_env: dict[str, str]) -> None:
    seg = segment.create(tmp_path / "one.seg", "one", mem_quota=1 << 20, nslots=1)
    env = dict(shim_env, TGS_SEGMENT=str(seg.path), TGS_SLOT_WAIT_MS="200")
    holder = _holder(probe_bin, env)
    try:
        out, lines = _run(probe_bin, env, "init", "alloc:4000000", "launch:2:1:32")
        assert out[1] == "alloc 2" and out[2].split()[-1] == "800", out
        assert len(lines) == 1 and "every slot is held" in lines[0] and "refused" in lines[0]
    finally:
        finish(holder)
        seg.close()


def test_a_slot_freed_within_the_wait_is_taken(probe_bin: Path, tmp_path: Path,
                                               shim_env: dict[str, str]) -> None:
    """The wait is for a process of the job that exits: the newcomer then runs, limited."""
    seg = segment.create(tmp_path / "one.seg", "one", mem_quota=1 << 20, nslots=1)
    env = dict(shim_env, TGS_SEGMENT=str(seg.path), TGS_SLOT_WAIT_MS="20000")
    holder = _holder(probe_bin, env)
    try:
        late = subprocess.Popen([str(probe_bin), "init", "alloc:4000000", "alloc:1000"],
                                env=env, text=True, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        finish(holder)
        stdout, stderr = late.communicate(timeout=30)
        assert stdout.splitlines()[1:] == ["alloc 2", "alloc 0"], (stdout, stderr)
        assert not [ln for ln in tgs_lines(stderr) if "refused" in ln and "slot" in ln]
    finally:
        finish(holder)
        seg.close()


def test_no_segment_is_silent_pass_through(probe_bin: Path, shim_env: dict[str, str]) -> None:
    out, lines = _run(probe_bin, shim_env, "init", "alloc:4000000", "meminfo", "launch:3:1:32",
                      "free_all")
    assert out[1] == "alloc 0" and lines == []
    assert out[2].split()[2] == str(16 << 30)  # the simulated device's real total


_FORKER = r"""
import ctypes, os, sys
cuda = ctypes.CDLL("libcuda.so.1")
def alloc(n):
    assert cuda.cuInit(0) == 0
    dev, ctx, p = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_ulonglong()
    assert cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0
    assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
    assert cuda.cuCtxSetCurrent(ctx) == 0
    return cuda.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(n))
print("parent", alloc(1000), flush=True)
pid = os.fork()
if pid == 0:
    print("child", alloc(2000), flush=True)
    sys.stdin.readline()
    os._exit(0)
sys.stdin.readline()
os.waitpid(pid, 0)
"""


def test_fork_child_takes_its_own_slot(probe_bin: Path, job: Job) -> None:
    p = subprocess.Popen([sys.executable, "-c", _FORKER], env=job.env, text=True,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert p.stdout is not None and p.stdin is not None
        assert {p.stdout.readline().strip() for _ in range(2)} == {"parent 0", "child 0"}
        snap = job.seg.snapshot()
        assert sorted(c.mem_used for c in snap) == [1000, 2000]
        assert len(job.seg.live_slots()) == 2
        p.stdin.write("\n\n")
        p.stdin.close()
        assert p.wait(20) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    # the child left by os._exit (no destructor): its slot is dead; the next process of the
    # job reclaims it when it attaches (the controller never writes a tenant's segment)
    assert job.seg.ledger()[0] == 2000 and job.seg.live_slots() == []
    run_probe(probe_bin, job.env, "init", "meminfo")
    assert job.seg.ledger()[0] == 0 and job.seg.snapshot() == []


def test_files_found_through_their_variables(probe_bin: Path, tmp_path: Path,
                                             shim_env: dict[str, str]) -> None:
    """TGS_CTL, TGS_PUB, TGS_PUB_DIR and TGS_DEVICE_SEG point the shim at files away from the
    segment's directory (as in a container): the quota holds and the gate reads the
    production pub found through the device segment and the pub directory."""
    import shutil

    from shim_helpers import play_production
    seg = segment.create(tmp_path / "opp.seg", "opp", mem_quota=1 << 20,
                         priority=segment.PRIORITY_OPPORTUNISTIC, gate_flags=segment.GATE_WAIT,
                         gate_max_wait_us=200_000)
    prod = play_production(tmp_path, seg)
    prod.set_busy(1)
    away = tmp_path / "away"
    (away / "pubs").mkdir(parents=True)
    try:
        env = dict(shim_env, TGS_SEGMENT=str(seg.path), TGS_CTL=str(away / "c.ctl"),
                   TGS_PUB=str(away / "mine.pub"), TGS_PUB_DIR=str(away / "pubs"),
                   TGS_DEVICE_SEG=str(away / "dev.seg"))
        shutil.copy(segment.ctl_path(seg.path), away / "c.ctl")
        shutil.copy(segment.pub_path(seg.path, "opp"), away / "mine.pub")
        shutil.copy(prod.dev.path, away / "dev.seg")
        shutil.copy(prod.pub.path, away / "pubs" / "prod.pub")
        segment.ctl_path(seg.path).unlink()          # the defaults would find nothing
        prod.pub.path.rename(tmp_path / "gone.pub")
        prod.dev.path.rename(tmp_path / "gone.dev")
        out, lines = _run(probe_bin, env, "init", "alloc:900000", "alloc:900000",
                          "launch:2:1:32")
        assert out[1:3] == ["alloc 0", "alloc 2"] and len(lines) == 1  # only the refusal
        assert "job 'opp': the memory quota refused an allocation of 900000" in lines[0]
        assert int(out[3].split()[3]) > 0.35e9      # held twice by the busy production pub
    finally:
        seg.close()
        prod.close()

"""controller/bypass_action.py (--on-bypass stop|kill): which reported process is attributed to a
job's container (a fake /proc: mount and pid namespaces, cgroup), that only those are signalled,
once, in the look that reports them, never pid 1, the controller or a reused pid; and, on the
real /proc, the pidfd path on processes this test starts in a mount namespace of their own."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from ctl_helpers import DEVICES, FakeEngine, make_handler
from prometheus_client.registry import CollectorRegistry
from tgs.controller.bypass import GRACE, BypassDetector, GpuProcess, Unmanaged, start_time
from tgs.controller.bypass_action import BypassActor, attribute, job_of_segment
from tgs.controller.gpustats import GpuSampler
from tgs.controller.metrics import MetricsTap, TgsCollector
from tgs.tools.view import status_text

pytestmark = pytest.mark.timeout(60)
HOST = ("mnt:[1]", "pid:[1]", "0::/user.slice/session-1.scope\n")
BOX = ("mnt:[10]", "pid:[20]", "0::/kubepods/pod-a/c1\n")       # the job's container
OTHER = ("mnt:[11]", "pid:[21]", "0::/kubepods/pod-b/c2\n")     # a container without a job


class FakeProc:
    """A fake /proc and segment directory: processes with open files, a start time, mount and
    pid namespaces and a cgroup."""

    def __init__(self, base: Path) -> None:
        self.root = base / "proc"
        self.segs = base / "segs"
        self.root.mkdir()
        self.segs.mkdir()
        for name in ("train.seg", "eval@1.seg", "device-0.seg"):
            (self.segs / name).write_bytes(b"x" * 64)
        self.add(1, "init", HOST)                  # the host's pid 1: its mount ns is the host's

    def add(self, pid: int, comm: str, where: tuple[str, str, str], *files: str,
            start: int = 1) -> None:
        d = self.root / str(pid)
        if d.exists():
            shutil.rmtree(d)
        (d / "fd").mkdir(parents=True)
        (d / "ns").mkdir()
        (d / "comm").write_text(comm + "\n")
        fields = ["S"] + ["0"] * 18 + [str(start)] + ["0"] * 30
        (d / "stat").write_text(f"{pid} ({comm}) {' '.join(fields)}\n")
        os.symlink(where[0], d / "ns" / "mnt")
        os.symlink(where[1], d / "ns" / "pid")
        (d / "cgroup").write_text(where[2])
        for n, f in enumerate(files, start=3):
            os.symlink(self.segs / f, d / "fd" / str(n))


class Sent(list[tuple[int, int]]):
    def __call__(self, pid: int, sig: int) -> None:
        self.append((pid, sig))


@pytest.fixture
def fake(tmp_path: Path) -> FakeProc:
    return FakeProc(tmp_path)


def managed(fake: FakeProc, *pids: int, job: str = "train") -> dict[int, tuple[int, str]]:
    out = {}
    for p in pids:
        st = start_time(p, str(fake.root))
        assert st is not None
        out[p] = (st, job)
    return out


def test_attribution_needs_the_container_of_a_managed_process_off_the_host(
        fake: FakeProc) -> None:
    root = str(fake.root)
    fake.add(100, "trainer", BOX, "train.seg")
    fake.add(101, "rogue", BOX)
    assert attribute(101, 1, managed(fake, 100), root) == "train"
    # same mount namespace, another cgroup or another pid namespace: not provably the container
    fake.add(102, "nsenter-m", (BOX[0], BOX[1], HOST[2]))
    fake.add(103, "other-pidns", (BOX[0], "pid:[99]", BOX[2]))
    # another container, with no managed process in it
    fake.add(104, "stranger", OTHER)
    # a job run on the host (no container): its neighbours on the host are never attributed
    fake.add(105, "host-job", HOST, "train.seg")
    fake.add(106, "host-rogue", HOST)
    m = managed(fake, 100, 105)
    for pid in (102, 103, 104, 106):
        assert attribute(pid, 1, m, root) is None, pid
    # the rogue's identity changed (a reused pid: another start time), or it is gone
    assert attribute(101, 2, m, root) is None
    assert attribute(107, 1, m, root) is None
    # the managed process's identity changed: it proves nothing
    fake.add(100, "reused", BOX, start=5)
    assert attribute(101, 1, m, root) is None
    # two jobs in one container: both named
    fake.add(108, "evaluator", BOX, "eval@1.seg")
    both = {**managed(fake, 100), **managed(fake, 108, job="eval")}
    assert attribute(101, 1, both, root) == "eval,train"


def test_job_of_a_segment_file() -> None:
    assert job_of_segment("train.seg") == "train"
    assert job_of_segment("eval@1.seg") == "eval"


def detector(fake: FakeProc, procs: list[GpuProcess], actor: BypassActor) -> BypassDetector:
    return BypassDetector(DEVICES, fake.segs, lister=lambda devs: list(procs),
                          proc_root=fake.root, clock=lambda: 1000.0, actor=actor)


@pytest.mark.parametrize("mode", ["stop", "kill"])
def test_signalled_once_in_the_look_that_reports_it(fake: FakeProc, mode: str,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    fake.add(200, "trainer", BOX, "train.seg")
    fake.add(201, "rogue", BOX)
    fake.add(202, "stranger", OTHER)
    fake.add(203, "host-rogue", HOST)
    fake.add(204, "part", BOX, "eval@1.seg")
    sent = Sent()
    actor = BypassActor(mode, fake.root, sender=sent)
    procs = [GpuProcess(p, 0) for p in (200, 201, 202, 203)] + [GpuProcess(201, 1)]
    det = detector(fake, procs, actor)
    caplog.set_level(logging.INFO, logger="tgs.controller.bypass")
    for t in range(GRACE - 1):
        det.look(float(t))
    assert sent == []                                       # within the grace: nothing
    det.look(float(GRACE))
    sig = signal.SIGSTOP if mode == "stop" else signal.SIGKILL
    assert sent == [(201, sig)]                             # once, though on two GPUs
    got = {(d, u.pid): (u.job, u.action) for d, us in det.last.items() for u in us}
    assert got == {(0, 201): ("train", mode), (1, 201): ("train", mode),
                   (0, 202): (None, None), (0, 203): (None, None)}
    assert actor.counts == {0: 1}
    acted = [r for r in caplog.records if r.levelno == logging.WARNING and "sent" in r.message]
    assert len(acted) == 1
    msg = acted[0].getMessage()
    assert "process 201" in msg and "job train" in msg and sig.name in msg, msg
    for t in range(GRACE + 1, GRACE + 4):                   # a stopped one stays: not re-sent
        det.look(float(t))
    assert sent == [(201, sig)]
    # the managed part (eval@1) appears later in that container: the stranger still untouched
    procs.append(GpuProcess(204, 0))
    det.look(10.0)
    assert sent == [(201, sig)]


def test_a_reused_pid_starts_a_new_grace(fake: FakeProc) -> None:
    """Between two looks the rogue exits and its pid names a new process (in the same
    container): that one is not signalled on the old one's streak."""
    fake.add(250, "trainer", BOX, "train.seg")
    fake.add(251, "first", BOX, start=3)
    sent = Sent()
    det = detector(fake, [GpuProcess(250, 0), GpuProcess(251, 0)],
                   BypassActor("kill", fake.root, sender=sent))
    for t in range(GRACE - 1):
        det.look(float(t))
    fake.add(251, "second", BOX, start=4)
    det.look(float(GRACE))
    assert sent == [] and not det.last[0]
    for t in range(GRACE + 1, 2 * GRACE):
        det.look(float(t))
    assert sent == [(251, signal.SIGKILL)]


def test_never_pid_1_the_controller_or_a_reused_pid(fake: FakeProc) -> None:
    fake.add(300, "trainer", BOX, "train.seg")
    for pid in (os.getpid(), os.getppid()):
        fake.add(pid, "controller", BOX)
    fake.add(301, "rogue", BOX, start=7)
    sent = Sent()
    actor = BypassActor("kill", fake.root, sender=sent)
    m = managed(fake, 300)
    report = {0: [Unmanaged(p, "x", None, None, 0.0, 1) for p in (1, os.getpid(), os.getppid())]
              + [Unmanaged(301, "rogue", None, None, 0.0, 6)]}   # read as 6: it is another now
    out = actor.act(report, m)
    assert sent == [] and actor.counts == {}
    assert all(u.action is None for u in out[0])
    out = actor.act({0: [Unmanaged(301, "rogue", None, None, 0.0, 7)]}, m)
    assert sent == [(301, signal.SIGKILL)] and out[0][0].action == "kill"


def test_default_is_report_only_and_status_shows_the_actions(fake: FakeProc,
                                                             tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        BypassActor("report")
    fake.add(400, "trainer", BOX, "train.seg")
    fake.add(401, "rogue", BOX)
    sent = Sent()
    handler = make_handler(tmp_path)
    tap = MetricsTap(FakeEngine(), handler.registry, GpuSampler(DEVICES, tmp_path / "none"),
                     detector(fake, [GpuProcess(400, 1), GpuProcess(401, 1, 1 << 20)],
                              BypassActor("stop", fake.root, sender=sent)))
    handler.engine = tap
    for t in (0.0, 1.1, 2.2):
        tap.step(t)
    st = handler.status().to_dict()
    gpus = {g["index"]: g for g in st["gpus"]}
    assert (gpus[0]["bypass_actions"], gpus[1]["bypass_actions"]) == (0, 1)
    assert [(u["pid"], u["job"], u["action"]) for u in gpus[1]["unmanaged"]] == [
        (401, "train", "stop")]
    assert "stopped (SIGSTOP) by TGS: in job train's container" in status_text(st, [])
    reg = CollectorRegistry(auto_describe=False)
    reg.register(TgsCollector(tap))
    lv = {"gpu": "1", "uuid": "GPU-sim-1", "action": "stop"}
    assert reg.get_sample_value("tgs_gpu_bypass_actions_total", lv) == 1
    # without an actor (the default): no attribution, no counter, no field
    tap.bypass.actor = None
    tap.step(3.3)
    st = handler.status().to_dict()
    assert all("bypass_actions" not in g for g in st["gpus"])
    assert {"job", "action"}.isdisjoint(st["gpus"][1]["unmanaged"][0])


# ---------------------------------------------------------------- the real /proc and pidfd
def _unshare_ok() -> bool:
    if shutil.which("unshare") is None or shutil.which("nsenter") is None:
        return False
    return subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen]]:
    made: list[subprocess.Popen] = []
    try:
        yield made
    finally:
        for p in made:                          # only the pids this test started
            if p.poll() is None:
                p.kill()
            p.wait(timeout=10)


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat", "rb") as f:
        stat = f.read()
    return stat[stat.rindex(b")") + 2:].split()[0].decode()


def test_pidfd_path_on_real_processes_in_a_mount_namespace(
        children: list[subprocess.Popen]) -> None:
    """A "container" (a mount namespace of its own, unshare -m) with a "managed" sleep and a
    rogue sleep joined to it (nsenter -m): the rogue is killed through its pidfd; a sleep in
    the host's namespace and one given with a wrong start time are not."""
    if not _unshare_ok():
        pytest.skip("unshare -m / nsenter not usable here (needs root or CAP_SYS_ADMIN)")
    box = subprocess.Popen(["unshare", "-m", "--", "sleep", "60"])
    children.append(box)
    assert _wait(lambda: _mnt(box.pid) not in (None, _mnt(os.getpid())))
    rogue = subprocess.Popen(["nsenter", "-t", str(box.pid), "-m", "--", "sleep", "60"])
    host = subprocess.Popen(["sleep", "60"])
    children += [rogue, host]
    assert _wait(lambda: _mnt(rogue.pid) == _mnt(box.pid))
    start = {p.pid: start_time(p.pid, "/proc") for p in (box, rogue, host)}
    m = {box.pid: (start[box.pid], "boxed")}
    actor = BypassActor("kill")
    un = [Unmanaged(host.pid, "sleep", None, None, 0.0, start[host.pid]),
          Unmanaged(rogue.pid, "sleep", None, None, 0.0, (start[rogue.pid] or 0) + 1)]
    actor.act({0: un}, m)
    time.sleep(0.2)
    assert rogue.poll() is None and host.poll() is None and _state(rogue.pid) != "Z"
    out = actor.act({0: [replace_start(un[1], start[rogue.pid])]}, m)
    assert out[0][0].action == "kill" and out[0][0].job == "boxed"
    assert rogue.wait(timeout=5) == -signal.SIGKILL
    assert host.poll() is None and box.poll() is None


def replace_start(u: Unmanaged, start: int | None) -> Unmanaged:
    return Unmanaged(u.pid, u.comm, u.mem_used, u.gpu_share, u.first_seen, start)


def _mnt(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt")
    except OSError:
        return None


def _wait(pred, timeout: float = 10.0) -> bool:  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.02)
    return False

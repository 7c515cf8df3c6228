"""controller/bypass.py: matching GPU processes (scripted NVML / simulator lists) against the job
segments they hold open, read from a fake /proc (and, once, the real one)."""

from __future__ import annotations

import logging
import os
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from ctl_helpers import DEVICES, FakeEngine, make_handler
from prometheus_client.registry import CollectorRegistry
from tgs.controller.bypass import (
    GRACE,
    BypassDetector,
    GpuProcess,
    classify,
    nvml_processes,
    seg_files,
    sim_processes,
)
from tgs.controller.gpustats import GpuSampler
from tgs.controller.metrics import MetricsTap, TgsCollector
from tgs.tools.view import status_text, top_frame

pytestmark = pytest.mark.timeout(60)


@dataclass
class Node:
    """A segment directory and a fake /proc whose processes open files by symlinks."""

    base: Path
    segs: Path = field(init=False)
    proc: Path = field(init=False)

    def __post_init__(self) -> None:
        self.segs = self.base / "segs"
        self.proc = self.base / "proc"
        self.segs.mkdir()
        self.proc.mkdir()
        for name in ("train.seg", "train.ctl", "device-0.seg", "device-x.seg"):
            (self.segs / name).write_bytes(b"x" * 64)

    def process(self, pid: int, comm: str, *files: Path, start: int = 1) -> None:
        d = self.proc / str(pid)
        (d / "fd").mkdir(parents=True)
        (d / "comm").write_text(comm + "\n")
        # /proc/<pid>/stat: field 22 is the start time; a comm may hold spaces and ")"
        fields = ["S"] + ["0"] * 18 + [str(start)] + ["0"] * 30
        (d / "stat").write_text(f"{pid} ({comm} x)) {' '.join(fields)}\n")
        os.symlink("socket:[1234]", d / "fd" / "0")
        for n, f in enumerate(files, start=3):
            os.symlink(f, d / "fd" / str(n))

    def gone(self, pid: int) -> None:
        d = self.proc / str(pid)
        for f in (d / "fd").iterdir():
            f.unlink()
        (d / "fd").rmdir()
        (d / "comm").unlink()
        (d / "stat").unlink()
        d.rmdir()


class Script:
    """The GPU's process list, changed by the test between looks."""

    def __init__(self) -> None:
        self.procs: list[GpuProcess] = []

    def __call__(self, devices: object) -> list[GpuProcess]:
        return list(self.procs)


@pytest.fixture
def node(tmp_path: Path) -> Node:
    return Node(tmp_path)


def detector(node: Node, script: Script) -> BypassDetector:
    return BypassDetector(DEVICES, node.segs, lister=script, proc_root=node.proc,
                          clock=lambda: 1000.0)


def pids(report: dict[int, list]) -> dict[int, list[int]]:
    return {k: [u.pid for u in v] for k, v in report.items() if v}


def test_classify_managed_unmanaged_unknown(node: Node) -> None:
    segs = seg_files(node.segs)
    assert len(segs) == 2                         # train.seg, device-x.seg; not device-0.seg
    node.process(100, "trainer", node.segs / "train.ctl", node.segs / "train.seg")
    node.process(101, "rogue", node.segs / "train.ctl", node.segs / "device-0.seg")
    node.process(102, "plain")
    assert classify(100, segs, node.proc) == "managed"
    assert classify(101, segs, node.proc) == "unmanaged"   # the ctl and device table: no
    assert classify(102, segs, node.proc) == "unmanaged"
    node.process(106, "job-named-device-x", node.segs / "device-x.seg")
    assert classify(106, segs, node.proc) == "managed"
    assert classify(103, segs, node.proc) == "unknown"     # no such process
    # a container mounts the segment directory elsewhere: the same file (device, inode) counts
    other = node.base / "container-mount"
    other.mkdir()
    os.link(node.segs / "train.seg", other / "train.seg")
    node.process(104, "in-container", other / "train.seg")
    assert classify(104, segs, node.proc) == "managed"
    # a file named like a segment that is not one of ours does not
    (other / "fake.seg").write_bytes(b"x")
    node.process(105, "liar", other / "fake.seg")
    assert classify(105, segs, node.proc) == "unmanaged"


def test_classify_reads_the_real_proc(tmp_path: Path) -> None:
    seg = tmp_path / "job.seg"
    seg.write_bytes(b"x" * 64)
    segs = seg_files(tmp_path)
    assert classify(os.getpid(), segs) == "unmanaged"
    with open(seg, "rb"):
        assert classify(os.getpid(), segs) == "managed"


def test_grace_then_report_once_with_a_warning(node: Node,
                                               caplog: pytest.LogCaptureFixture) -> None:
    node.process(200, "rogue")
    node.process(201, "trainer", node.segs / "train.seg")
    script = Script()
    script.procs = [GpuProcess(200, 0, 1 << 20, 0), GpuProcess(201, 0, 2 << 20, 0)]
    det = detector(node, script)
    caplog.set_level(logging.WARNING, logger="tgs.controller.bypass")
    looks = [pids(det.look(float(t))) for t in range(GRACE + 2)]
    assert all(not lk for lk in looks[:GRACE - 1]), looks     # within the grace: nothing
    assert all(lk == {0: [200]} for lk in looks[GRACE - 1:]), looks
    warnings = [r for r in caplog.records if "200" in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in caplog.records]
    u = det.last[0][0]
    assert (u.comm, u.mem_used, u.first_seen) == ("rogue", 1 << 20, 1000.0)


def test_a_shim_that_attaches_late_is_never_reported(node: Node) -> None:
    node.process(300, "late")
    script = Script()
    script.procs = [GpuProcess(300, 1, 0, 5)]
    det = detector(node, script)
    assert not pids(det.look(0.0))
    os.symlink(node.segs / "train.seg", node.proc / "300" / "fd" / "9")   # the shim attaches
    for t in range(1, 4):
        assert not pids(det.look(float(t)))


def test_gone_and_unreadable_processes_are_unknown_not_unmanaged(node: Node) -> None:
    node.process(400, "rogue")
    script = Script()
    script.procs = [GpuProcess(400, 0), GpuProcess(401, 0)]   # 401: no /proc entry
    det = detector(node, script)
    det.look(0.0)
    assert pids(det.look(1.0)) == {0: [400]}
    node.gone(400)                                          # exited: unknown, dropped
    assert not pids(det.look(2.0))
    assert not det.seen and not det.warned
    node.process(400, "reused", start=2)                    # a new process with that pid
    assert not pids(det.look(3.0))                          # starts its own grace
    assert pids(det.look(4.0)) == {0: [400]}


def test_namespace_pid_of_a_slot_is_not_used(node: Node) -> None:
    """A shimmed process in a container writes its namespace pid (7) in its slot; the GPU lists
    its host pid (5007).  Host pid 7 is some other process using the GPU without the shim."""
    node.process(5007, "in-container", node.segs / "train.seg")
    node.process(7, "host-rogue")
    script = Script()
    script.procs = [GpuProcess(5007, 0), GpuProcess(7, 1)]
    det = detector(node, script)
    det.look(0.0)
    assert pids(det.look(1.0)) == {1: [7]}


def test_share_from_busy_time_and_a_failing_source(node: Node) -> None:
    node.process(500, "rogue")
    script = Script()
    det = detector(node, script)
    for t, busy in ((0.0, 0), (1.0, 500_000_000), (3.0, 1_500_000_000)):
        script.procs = [GpuProcess(500, 0, 0, busy)]
        det.look(t)
        if t == 1.0:
            assert det.last[0][0].gpu_share == pytest.approx(0.5)
    assert det.last[0][0].gpu_share == pytest.approx(0.5)

    def broken(devices: object) -> list[GpuProcess]:
        raise RuntimeError("driver gone")

    det.lister = broken
    assert not pids(det.look(4.0))                          # logged, nothing reported


def test_status_metrics_and_views_show_the_process(node: Node, tmp_path: Path) -> None:
    node.process(600, "rogue")
    script = Script()
    script.procs = [GpuProcess(600, 1, 3 << 20, share=0.25)]
    handler = make_handler(tmp_path)
    tap = MetricsTap(FakeEngine(), handler.registry,
                     GpuSampler(DEVICES, tmp_path / "no-sim-state"), detector(node, script))
    handler.engine = tap
    for t in (0.0, 1.1, 2.2):
        tap.step(t)
    st = handler.status().to_dict()
    gpus = {g["index"]: g for g in st["gpus"]}
    assert gpus[0]["unmanaged"] == []
    assert gpus[1]["unmanaged"] == [{"pid": 600, "comm": "rogue", "mem_used": 3 << 20,
                                     "gpu_share": 0.25, "first_seen": 1000.0}]
    reg = CollectorRegistry(auto_describe=False)
    reg.register(TgsCollector(tap))
    assert reg.get_sample_value("tgs_gpu_unmanaged_processes",
                                {"gpu": "1", "uuid": "GPU-sim-1"}) == 1
    assert reg.get_sample_value("tgs_gpu_unmanaged_processes",
                                {"gpu": "0", "uuid": "GPU-sim-0"}) == 0
    for text in (status_text(st, []), top_frame(st, [], "now", color=False)):
        line = next(ln for ln in text.splitlines() if "without the TGS shim" in ln)
        assert "pid 600 (rogue)" in line and "GPU 1" in line and "25%" in line


def test_a_managed_process_whose_job_is_removed_becomes_unmanaged(node: Node) -> None:
    """Managed processes are remembered by (pid, start time) and the segment they hold, and
    not rescanned; removing that segment (the job unregistered under them) ends it."""
    node.process(700, "trainer", node.segs / "train.seg")
    script = Script()
    script.procs = [GpuProcess(700, 0)]
    det = detector(node, script)
    for t in range(3):
        assert not pids(det.look(float(t)))
    assert list(det.managed) == [(700, 1)]
    (node.segs / "train.seg").unlink()
    det.look(3.0)
    assert pids(det.look(4.0)) == {0: [700]}
    assert not det.managed
    node.gone(700)
    node.process(700, "other", start=5)                     # pid reuse: not the cached one
    (node.segs / "train.seg").write_bytes(b"y")
    det.look(5.0)
    assert not det.managed


def test_nvml_source_with_a_scripted_pynvml(monkeypatch: pytest.MonkeyPatch) -> None:
    """The newest process call pynvml offers, used memory (None when NVML says N/A), SM
    utilisation when nvmlDeviceGetProcessUtilization answers, nothing when it raises."""
    calls: list[str] = []

    class P:
        def __init__(self, pid: int, mem: int | None) -> None:
            self.pid, self.usedGpuMemory = pid, mem

    class U:
        def __init__(self, pid: int, sm: int) -> None:
            self.pid, self.smUtil = pid, sm

    def util(h: int, since: int) -> list[U]:
        if h == 1:
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")
        return [U(10, 30), U(10, 40), U(11, 5)]

    fake = types.SimpleNamespace(
        nvmlInit=lambda: calls.append("init"), nvmlShutdown=lambda: calls.append("shutdown"),
        nvmlDeviceGetHandleByIndex=lambda k: k,
        nvmlDeviceGetComputeRunningProcesses_v2=lambda h: [P(10 + h, 1 << 20), P(20, None)],
        nvmlDeviceGetComputeRunningProcesses=lambda h: pytest.fail("the old call"),
        nvmlDeviceGetProcessUtilization=util)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    got = nvml_processes([0, 1])
    assert got == [GpuProcess(10, 0, 1 << 20, share=0.4), GpuProcess(20, 0, None, share=None),
                   GpuProcess(11, 1, 1 << 20, share=None), GpuProcess(20, 1, None, share=None)]
    assert calls == ["init", "shutdown"]


def test_sim_source_refuses_what_is_not_a_state_file(tmp_path: Path) -> None:
    short = tmp_path / "short"
    short.write_bytes(b"\0" * 100)
    junk = tmp_path / "junk"
    junk.write_bytes(b"\xff" * (1 << 20))
    for path in (tmp_path / "missing", short, junk):
        assert sim_processes(path, {0}) == []

"""Helpers shared by the shim tests (imported by name: tests/shim is on sys.path)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from tgs.intercept import devseg, pub, segment

# An opportunistic probe's warm-up (a probe command): four synchronized 20 ms kernels, after which
# FIT has its estimate of the cost per unit.  A sample held up on the host (a loaded machine, code
# loaded at the first launch) is not believed; a 20 ms one tolerates 1 ms of that, and one of four
# is enough.  With no estimate a launch goes at once as the next sample, so a test that needs a
# launch judged warms up like this.
WARM_UP = "cycle:4:1:20000:1000:0"


@dataclass
class Job:
    """A segment plus the environment that injects the shim into a child using it."""

    seg: segment.Segment
    env: dict[str, str]


def run_probe(exe: Path, env: dict[str, str], *cmds: str, timeout: float = 60) -> list[str]:
    """Run the probe to completion; its stdout lines (asserts a clean exit)."""
    p = subprocess.run([str(exe), *cmds], env=env, capture_output=True, text=True,
                       timeout=timeout, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, f"probe failed rc={p.returncode}\n{p.stdout}\n{p.stderr}"
    return p.stdout.splitlines()


def tgs_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("tgs: ")]


def finish(p: subprocess.Popen[str], timeout: float = 20) -> None:
    """Close a probe's stdin (its "ready" waits end) and reap it; kill it if it hangs."""
    if p.stdin:
        p.stdin.close()
    try:
        p.wait(timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def list_jobs(dev: devseg.DeviceSegment, *segs: segment.Segment,
              masks: dict[str, int] | None = None) -> None:
    """Put jobs in the device table as the controller does (name, priority, gap mask)."""
    masks = masks or {}
    dev.set_jobs([devseg.DevJob(s.job_name, int(s.ctl.priority), s.control.created_ns,
                                masks.get(s.job_name, 0)) for s in segs])


def own_pub(seg: segment.Segment) -> pub.Pub:
    """A job's publish page, mapped read-write (the test plays that job's shims)."""
    return pub.open_pub(pub.pub_path(seg.path, seg.job_name))


@dataclass
class Played:
    """A device segment listing a production job "prod" whose shims the test plays by writing
    its pub, plus the real jobs listed beside it."""

    dev: devseg.DeviceSegment
    seg: segment.Segment
    pub: pub.Pub

    def set_busy(self, n: int) -> None:
        self.pub.view.busy = n

    def close(self) -> None:
        self.pub.close()
        self.seg.close()
        self.dev.close()


def play_production(tmp_path: Path, *others: segment.Segment) -> Played:
    dev = devseg.create_device(tmp_path, 0)
    seg = segment.create(tmp_path / "prod.seg", "prod", gate_flags=segment.GATE_PUBLISH)
    list_jobs(dev, seg, *others)
    return Played(dev, seg, own_pub(seg))

"""A tenant that escapes its shim inside its job's container (docs/security.md "Acting on a
bypass"): a real tgs-controller --on-bypass stop|kill on a private simulated GPU.

The "container" is a mount namespace of its own (unshare -m) in which tgs-run runs the job's
shimmed workload; the rogue is a workload without the shim joined to that namespace
(nsenter -m), as a `kubectl exec` or a child that dropped LD_PRELOAD would be.  A workload
in a namespace of its own without a job ("another container") and one on the host are the
processes that cannot be attributed: reported, never touched.  Each test starts its own
processes and kills them by pid at the end.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from ctl_process import Ctl, start_ctl
from proc_helpers import stop, tool, wait_for

pytestmark = [pytest.mark.security, pytest.mark.timeout(120)]
ROOT = Path(__file__).resolve().parents[2]
WORKLOAD = ROOT / "build" / "bin" / "tgs-workload"
DETECT_S = 10.0      # two looks about 1 s apart, with slack for a loaded machine
BOUND_S = 2.0        # the action follows the report within this (it is the same look)


def _require_namespaces() -> None:
    if shutil.which("unshare") is None or shutil.which("nsenter") is None:
        pytest.skip("unshare / nsenter not installed")
    if subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode != 0:
        pytest.skip("unshare -m needs root or CAP_SYS_ADMIN here")


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen]]:
    made: list[subprocess.Popen] = []
    try:
        yield made
    finally:
        for p in made:                       # only what this test started, by pid
            stop(p)


def _workload(name: str) -> list[str]:
    return [str(WORKLOAD), "--seconds", "90", "--gap-ms", "20", "--name", name]


@pytest.fixture
def box(request: pytest.FixtureRequest, tmp_path: Path, sim_env: dict[str, str],
        procs: list[subprocess.Popen]) -> Iterator[tuple[Ctl, dict[str, subprocess.Popen]]]:
    """A controller with the test's --on-bypass args; the job "boxed" in its "container", the
    rogue there, a stranger in another namespace and a process on the host, all on the GPU."""
    _require_namespaces()
    if not WORKLOAD.exists():
        pytest.fail(f"{WORKLOAD} is missing: run `make` first")
    running = start_ctl(tmp_path, sim_env, *request.param)
    ctl = next(running)
    try:
        job = subprocess.Popen(["unshare", "-m", "--", tool("tgs-run"), "--name", "boxed", "--",
                                *_workload("boxed")], env=ctl.env, start_new_session=True,
                               stdout=subprocess.DEVNULL)
        procs.append(job)
        attached = wait_for(lambda: (ctl.jobs().get("boxed") or {}).get("processes"), 20)
        assert attached, f"the boxed job never attached: {ctl.log.read_text()[-2000:]}"
        assert _mnt(job.pid) != _mnt(os.getpid())
        started = {}
        for name, pre in (("rogue", ["nsenter", "-t", str(job.pid), "-m", "--"]),
                          ("stranger", ["unshare", "-m", "--"]), ("host", [])):
            p = subprocess.Popen([*pre, *_workload(name)], env=ctl.env,
                                 stdout=subprocess.DEVNULL)
            procs.append(p)
            started[name] = p
        started["job"] = job
        yield ctl, started
    finally:
        running.close()                      # the controller, stopped by its pid


def _mnt(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt")
    except OSError:
        return None


def _state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.rindex(b")") + 2:].split()[0].decode()


def _unmanaged(ctl: Ctl) -> dict[int, dict[str, Any]]:
    return {u["pid"]: u for g in ctl.status().get("gpus") or [] for u in g.get("unmanaged") or []}


def _log_times(ctl: Ctl, pid: int) -> tuple[float | None, float | None]:
    """(reported, acted): the controller's WARNING lines for pid, as unix times."""
    rep = act = None
    for line in ctl.log.read_text(errors="replace").splitlines():
        if f"process {pid} (" not in line or "WARNING" not in line:
            continue
        m = re.match(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ", line)
        assert m, line
        t = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
        if "sent SIG" in line:
            act = act or t
        elif "uses the GPU without the TGS shim" in line:
            rep = rep or t
    return rep, act


def _untouched(ctl: Ctl, p: dict[str, subprocess.Popen], *names: str) -> None:
    shown = _unmanaged(ctl)
    for name in names:
        pid = p[name].pid
        assert p[name].poll() is None and _state(pid) not in ("T", "t"), (name, _state(pid))
        assert pid in shown and "action" not in shown[pid], (name, shown)


@pytest.mark.parametrize("box", [("--on-bypass", "kill")], indirect=True)
def test_kill_the_rogue_in_a_jobs_container_only(
        box: tuple[Ctl, dict[str, subprocess.Popen]]) -> None:
    ctl, p = box
    rogue = p["rogue"]
    assert wait_for(lambda: rogue.poll() is not None, DETECT_S), (
        f"the rogue was not killed: {_unmanaged(ctl)}\n{ctl.log.read_text()[-3000:]}")
    assert rogue.returncode == -signal.SIGKILL
    reported, acted = _log_times(ctl, rogue.pid)
    assert reported is not None and acted is not None, ctl.log.read_text()[-3000:]
    print(f"report -> SIGKILL: {acted - reported:.3f} s")
    assert 0 <= acted - reported <= BOUND_S
    line = next(ln for ln in ctl.log.read_text().splitlines() if "sent SIGKILL" in ln)
    assert f"process {rogue.pid} " in line and "job boxed" in line and "kill" in line
    # the others are reported (two looks) and, a look after that, still untouched
    assert wait_for(lambda: {p["stranger"].pid, p["host"].pid} <= set(_unmanaged(ctl)),
                    DETECT_S)
    time.sleep(1.5)
    _untouched(ctl, p, "stranger", "host")
    assert p["job"].poll() is None, "the job's own (shimmed) process was touched"
    assert [g.get("bypass_actions") for g in ctl.status()["gpus"]][0] == 1


@pytest.mark.parametrize("box", [("--on-bypass", "stop")], indirect=True)
def test_stop_the_rogue_in_a_jobs_container(
        box: tuple[Ctl, dict[str, subprocess.Popen]]) -> None:
    ctl, p = box
    rogue = p["rogue"]
    seen = wait_for(lambda: _unmanaged(ctl).get(rogue.pid), DETECT_S, step=0.05)
    assert seen, f"not reported: {ctl.log.read_text()[-3000:]}"
    assert wait_for(lambda: _state(rogue.pid) in ("T", "t"), BOUND_S, step=0.02), (
        f"not stopped {BOUND_S} s after its report: state {_state(rogue.pid)}")
    reported, acted = _log_times(ctl, rogue.pid)
    assert reported is not None and acted is not None
    print(f"report -> SIGSTOP: {acted - reported:.3f} s")
    assert 0 <= acted - reported <= BOUND_S
    assert (seen.get("job"), seen.get("action")) == ("boxed", "stop"), seen
    assert rogue.poll() is None                              # stopped, not killed
    assert wait_for(lambda: {p["stranger"].pid, p["host"].pid} <= set(_unmanaged(ctl)),
                    DETECT_S)
    time.sleep(1.5)
    _untouched(ctl, p, "stranger", "host")
    st = ctl.status()
    assert st["gpus"][0]["bypass_actions"] == 1
    with urllib.request.urlopen(st["metrics_url"], timeout=5) as r:
        text = r.read().decode()
    assert re.search(r'tgs_gpu_bypass_actions_total\{action="stop",gpu="0",uuid="[^"]+"\} 1\.0',
                     text), [ln for ln in text.splitlines() if "bypass" in ln]


@pytest.mark.parametrize("box", [()], indirect=True)
def test_default_reports_only(box: tuple[Ctl, dict[str, subprocess.Popen]]) -> None:
    ctl, p = box
    assert wait_for(lambda: {p[n].pid for n in ("rogue", "stranger", "host")}
                    <= set(_unmanaged(ctl)), DETECT_S), ctl.log.read_text()[-3000:]
    time.sleep(BOUND_S + 0.5)
    _untouched(ctl, p, "rogue", "stranger", "host")
    assert all("bypass_actions" not in g for g in ctl.status()["gpus"])
    assert "sent SIG" not in ctl.log.read_text()

"""Job lifecycle under tgs-run: the job lives exactly as long as the command's process tree
(its lease), whatever the CUDA process count."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tools_helpers import MEMPROBE, Ctl, stop, tool, wait_for

MIB = 1 << 20
pytestmark = pytest.mark.timeout(120)


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(x) for x in text.split()]


def _kill_pid(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def test_sequential_steps_keep_the_quota(ctl: Ctl) -> None:
    """Two CUDA programs one after the other under one tgs-run: the second still runs
    under the job's 64 MiB (no CUDA process lives between them)."""
    # each step lives a few periods (the loop sees it) and exits before the next starts
    step = (f"(printf 'info\\nalloc {128 * MIB}\\nalloc {32 * MIB}\\n'; sleep 0.3) | "
            f"{shlex.quote(sys.executable)} {shlex.quote(str(MEMPROBE))}")
    r = ctl.run("tgs-run", "--name", "seqjob", "--mem", "64MiB", "--", "sh", "-c",
                f"{step}; sleep 0.5; {step}")
    assert r.returncode == 0, r.stderr
    assert "running without" not in r.stderr, r.stderr
    lines = r.stdout.split()
    infos = [int(lines[i + 2]) for i, w in enumerate(lines) if w == "info"]
    allocs = [lines[i + 1] for i, w in enumerate(lines) if w == "alloc"]
    assert infos == [64 * MIB, 64 * MIB], r.stdout
    assert allocs == ["2", "0", "2", "0"], r.stdout       # 128 MiB refused, 32 MiB admitted
    assert "seqjob" not in ctl.jobs()                      # removed as the wrapper ended


def test_job_lives_while_the_tree_runs_without_cuda(ctl: Ctl) -> None:
    p = subprocess.Popen([tool("tgs-run"), "--name", "idle-tree", "--", "sleep", "30"],
                         env=ctl.env)
    try:
        assert wait_for(lambda: "idle-tree" in ctl.jobs())
        time.sleep(0.5)                                    # ten periods without a process
        job = ctl.jobs()["idle-tree"]
        assert job["processes"] == 0 and job["state"] == "running"
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=20) == 128 + signal.SIGTERM
        assert "idle-tree" not in ctl.jobs()
    finally:
        stop(p)


def test_killed_wrapper_orphan_keeps_its_limits(ctl: Ctl) -> None:
    """A first CUDA program runs and ends; SIGKILL the wrapper while its child waits to
    start a second: that program still gets the job's limits, and the job is removed once
    it exits."""
    probe = f"{shlex.quote(sys.executable)} {shlex.quote(str(MEMPROBE))}"
    # the shim attaches at the first memory call: "info" right away, then 2 s alive
    script = f"(echo info; sleep 2) | {probe} >/dev/null; sleep 2; exec {probe}"
    wrapper = subprocess.Popen(
        [tool("tgs-run"), "--name", "orphan", "--mem", "64MiB", "--", "sh", "-c", script],
        env=ctl.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    child: list[int] = []
    try:
        assert wait_for(lambda: _children(wrapper.pid))
        child = _children(wrapper.pid)
        assert wait_for(lambda: ctl.jobs().get("orphan", {}).get("processes") == 1)
        assert wait_for(lambda: ctl.jobs().get("orphan", {}).get("processes") == 0)
        wrapper.send_signal(signal.SIGKILL)            # no CUDA process in the job now
        wrapper.wait(timeout=10)
        assert wrapper.stdout is not None and wrapper.stdin is not None
        assert wrapper.stdout.readline().strip() == "ready"

        def ask(cmd: str) -> str:
            wrapper.stdin.write(cmd + "\n")
            wrapper.stdin.flush()
            return wrapper.stdout.readline().strip()

        assert "orphan" in ctl.jobs()
        assert ask("info").split()[2] == str(64 * MIB)  # the orphan still sees its quota
        assert ask(f"alloc {128 * MIB}") == "alloc 2"
        assert ask(f"alloc {32 * MIB}") == "alloc 0"
        assert wait_for(lambda: ctl.jobs().get("orphan", {}).get("mem_used") == 32 * MIB)
        wrapper.stdin.close()                           # the orphan ends
        assert wait_for(lambda: not _alive(child[0]))
        assert wait_for(lambda: "orphan" not in ctl.jobs(), timeout=10)
    finally:
        for pid in child:
            _kill_pid(pid)
        stop(wrapper)


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def test_killed_wrapper_background_grandchild_keeps_the_job(ctl: Ctl,
                                                           tmp_path: Path) -> None:
    """The command exits, leaving a background process of its tree: the job stays while
    it runs (it holds the lease), then goes."""
    pidfile, go = tmp_path / "bg.pid", tmp_path / "go"
    # the background process lives until the test says so (no race with a loaded machine)
    r = ctl.run("tgs-run", "--name", "bg", "--", "sh", "-c",
                f"(while [ ! -e {go} ]; do sleep 0.05; done) >/dev/null 2>&1 & "
                f"echo $! > {pidfile}")
    assert r.returncode == 0, r.stderr
    bg = int(pidfile.read_text())
    try:
        time.sleep(0.5)                                 # several control periods
        assert "bg" in ctl.jobs()
        go.touch()
        assert wait_for(lambda: "bg" not in ctl.jobs(), timeout=15)
        assert not _alive(bg)
    finally:
        _kill_pid(bg)


def test_name_free_right_after_the_wrapper(ctl: Ctl) -> None:
    for _ in range(3):
        r = ctl.run("tgs-run", "--name", "again", "--", "true")
        assert r.returncode == 0, r.stderr


def test_lease_file_private_and_gone(ctl: Ctl) -> None:
    p = subprocess.Popen([tool("tgs-run"), "--name", "priv", "--", "sleep", "30"],
                         env=ctl.env)
    try:
        assert wait_for(lambda: "priv" in ctl.jobs())
        seg = Path(ctl.jobs()["priv"]["segment"])
        lease = seg.with_suffix(".lease")
        st = lease.stat()
        assert st.st_mode & 0o777 == 0o400 and st.st_uid == os.geteuid()
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=20)
        assert wait_for(lambda: not lease.exists())
    finally:
        stop(p)

"""tgs-run: registration, environment, exit codes, signal forwarding, cleanup, errors."""

from __future__ import annotations

import os
import pty
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from tgs.tools import run as run_mod
from tools_helpers import Ctl, Probe, probe_cmd, stop, tool, wait_for

GIB = 1 << 30

# A child that reports signals: prints "up", then "got N" for each signal; exits 40+count
# after the first one (0.3 s later, so a duplicate delivery would be counted).
SIGCHILD = r"""
import signal, sys, time
got = []
def on(n, f):
    got.append(n)
    print("got", n, flush=True)
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2,
          signal.SIGQUIT):
    signal.signal(s, on)
print("up", flush=True)
deadline = time.monotonic() + 30
while time.monotonic() < deadline:
    if got:
        time.sleep(0.3)
        sys.exit(40 + len(got))
    time.sleep(0.01)
sys.exit(99)
"""


def test_cli_bad_size_and_no_controller(tmp_path: Path) -> None:
    r = CliRunner().invoke(run_mod.cli, ["--mem", "12XB", "--", "true"])
    assert r.exit_code == run_mod.EXIT_WRAPPER == 125 and "not a size" in r.output
    r = CliRunner().invoke(run_mod.cli, ["--controller", str(tmp_path / "none.sock"),
                                         "--", "true"])
    assert r.exit_code == 125
    assert "start one with `tgs-controller`" in r.output and "--standalone" in r.output


def test_cli_needs_a_command() -> None:
    r = CliRunner().invoke(run_mod.cli, ["--mem", "1G"])
    assert r.exit_code == 125 and "CMD" in r.output


def test_job_name_default() -> None:
    from tgs.tools.common import job_name_from
    assert job_name_from("/usr/bin/python3.11", "ab12") == "python3.11-ab12"
    assert job_name_from("./my script!", "ab12") == "my-script-ab12"
    assert len(job_name_from("x" * 200, "ab12")) <= 63


def test_standalone_static_quota(sim_env: dict[str, str], probes: list[Probe]) -> None:
    env = dict(sim_env)
    env["TGS_CONTROLLER"] = "ipc:///nonexistent/control.sock"
    p = Probe(probe_cmd("--standalone", "--mem", "1GiB"), env)
    probes.append(p)
    assert p.info()[1] == GIB
    assert p.ask(f"alloc {GIB // 2}") == "alloc 0"
    assert p.ask(f"alloc {GIB}") == "alloc 2"           # CUDA_ERROR_OUT_OF_MEMORY
    assert p.close() == 0


def test_registers_injects_and_unregisters(ctl: Ctl, probes: list[Probe]) -> None:
    p = Probe(probe_cmd("--name", "train-1", "--mem", "1.5GiB", "--weight", "3"), ctl.env)
    probes.append(p)
    free, total = p.info()
    assert total == 3 * GIB // 2 and free == total
    jobs = ctl.jobs()
    assert jobs["train-1"]["weight"] == 3 and jobs["train-1"]["ephemeral"] is True
    assert p.ask(f"alloc {GIB}") == "alloc 0"
    assert wait_for(lambda: ctl.jobs()["train-1"].get("mem_used") == GIB)
    assert p.ask(f"alloc {GIB}") == "alloc 2"
    assert p.close() == 0
    assert "train-1" not in ctl.jobs()


def test_exit_codes_and_failure_cleanup(ctl: Ctl) -> None:
    r = ctl.run("tgs-run", "--name", "fails", "--", "sh", "-c", "exit 3")
    assert r.returncode == 3
    r = ctl.run("tgs-run", "--", "sh", "-c", "kill -TERM $$")
    assert r.returncode == 128 + signal.SIGTERM
    r = ctl.run("tgs-run", "--", "no-such-command-xyz")
    assert r.returncode == 127 and "not found" in r.stderr
    assert ctl.jobs() == {}                  # every job went away, also the failed ones
    r = ctl.run("tgs-run", "--name", "bad name!", "--", "true")
    assert r.returncode == 125 and "job name" in r.stderr
    r = ctl.run("tgs-run", "--device", "7", "--", "true")
    assert r.returncode == 125 and "no_device" in r.stderr
    # the command's own 2 (and 1) pass through: tgs-run's failures are told apart
    assert ctl.run("tgs-run", "--", "sh", "-c", "exit 2").returncode == 2
    assert ctl.run("tgs-run", "--", "sh", "-c", "exit 1").returncode == 1


def _start_sigchild(ctl: Ctl, **kw) -> subprocess.Popen:  # type: ignore[no-untyped-def]
    p = subprocess.Popen([tool("tgs-run"), "--name", "sig", "--", sys.executable, "-c", SIGCHILD],
                         env=ctl.env, text=True, **kw)
    return p


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGUSR1, signal.SIGHUP, signal.SIGINT])
def test_signal_forwarded(ctl: Ctl, sig: int) -> None:
    p = _start_sigchild(ctl, stdout=subprocess.PIPE)
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "up"
        p.send_signal(sig)                   # to the wrapper only (SI_USER): passed on once
        assert p.stdout.readline().strip() == f"got {int(sig)}"
        assert p.wait(timeout=20) == 41
        assert "sig" not in ctl.jobs()
    finally:
        stop(p)


def test_ctrl_c_from_terminal(ctl: Ctl) -> None:
    """Ctrl-C on a terminal reaches the child once (not forwarded a second time) and the
    wrapper waits for it: the child's own exit code comes back."""
    master, slave = pty.openpty()

    def set_ctty() -> None:
        import fcntl
        import termios
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    p = subprocess.Popen([tool("tgs-run"), "--name", "tty", "--", sys.executable, "-c", SIGCHILD],
                         env=ctl.env, stdin=slave, stdout=slave, stderr=slave,
                         start_new_session=True, preexec_fn=set_ctty)
    os.close(slave)
    try:
        buf = b""
        deadline = time.monotonic() + 20
        while b"up" not in buf and time.monotonic() < deadline:
            buf += os.read(master, 1024)
        os.write(master, b"\x03")            # the terminal's intr character
        assert p.wait(timeout=20) == 41, buf
    finally:
        stop(p)
        os.close(master)


def _default_dispositions() -> None:
    for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def test_quit_reaches_plain_child(ctl: Ctl) -> None:
    """A child with default dispositions dies of the forwarded signal: 128+N comes back.
    (Started with them: a test run launched in the background of a non-interactive shell
    ignores SIGINT and SIGQUIT, and an ignored signal stays ignored across exec.)"""
    p = subprocess.Popen([tool("tgs-run"), "--", "sleep", "30"], env=ctl.env,
                         preexec_fn=_default_dispositions)
    try:
        assert wait_for(lambda: ctl.jobs())
        p.send_signal(signal.SIGQUIT)
        assert p.wait(timeout=20) == 128 + signal.SIGQUIT
        assert ctl.jobs() == {}
    finally:
        stop(p)

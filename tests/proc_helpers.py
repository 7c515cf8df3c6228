"""Child-process helpers shared by the tool and device-plugin tests (tests/tools, tests/k8s):
the installed console scripts, stopping a child by its pid, polling for a condition."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent


def tool(name: str) -> str:
    """The path of an installed console script (tgs-controller, tgsctl, ...)."""
    path = BIN / name
    if not path.exists():
        pytest.fail(f"{path} is missing: run `make venv`")
    return str(path)


def stop(proc: subprocess.Popen | None, sig: int = signal.SIGKILL) -> None:
    """Stop a child we started, by its pid, and reap it.  A child started in a session of its
    own (start_new_session=True: a tgs-run and its command) is stopped with its whole group,
    so that a SIGKILL of the wrapper leaves no command behind."""
    if proc is None:
        return
    group = _own_group(proc.pid)
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if group:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for f in (proc.stdin, proc.stdout, proc.stderr):
        if f is not None:
            f.close()


def _own_group(pid: int) -> bool:
    try:
        return os.getpgid(pid) == pid != os.getpgid(0)
    except ProcessLookupError:
        return False


def wait_for(pred, timeout: float = 10.0, step: float = 0.05):  # type: ignore[no-untyped-def]
    """Poll pred() every `step` s until it is truthy or `timeout` s passed; its last value."""
    deadline = time.monotonic() + timeout
    while True:
        val = pred()
        if val or time.monotonic() > deadline:
            return val
        time.sleep(step)

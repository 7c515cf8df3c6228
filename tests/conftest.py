"""Shared fixtures: build artefact paths and a private simulated GPU per test."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "build"
SIM_DIR = BUILD / "sim"
SIM_LIB = SIM_DIR / "libcuda.so.1"
SHIM_LIB = BUILD / "libtgs.so"
WORKLOAD = BUILD / "bin" / "tgs-workload"


def _require(path: Path) -> Path:
    if not path.exists():
        pytest.fail(f"{path} is missing: run `make` first (make test does)")
    return path


@pytest.fixture
def sim_lib() -> Path:
    return _require(SIM_LIB)


@pytest.fixture
def shim_lib() -> Path:
    return _require(SHIM_LIB)


@pytest.fixture
def workload_bin() -> Path:
    return _require(WORKLOAD)


@pytest.fixture
def sim_env(tmp_path: Path, sim_lib: Path) -> dict[str, str]:
    """Environment for a child process that uses a private simulated GPU.

    Each test gets its own state file, so tests can run in parallel.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TGS_", "LD_PRELOAD"))}
    env["TGS_SIM_STATE"] = str(tmp_path / "sim-state")
    env["LD_LIBRARY_PATH"] = str(SIM_DIR) + (
        ":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else ""
    )
    return env


# ---------------------------------------------------------------- leak check
# Every process the run starts inherits LEAK_MARK (tests derive their children's environment
# from ours), and every temporary file goes under a private TMPDIR: at the end of the session,
# a live process carrying the mark or anything left in that TMPDIR is a leak.  The run fails
# (an error at teardown) after the leaked processes are killed by pid and the files removed.
# New /dev/shm entries are reported (other sessions on the machine may create some too).
LEAK_MARK = "PYTEST_TGS_LEAK_MARK"


def _marked_pids(mark: str) -> list[int]:
    needle = f"{LEAK_MARK}={mark}".encode()
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open(f"/proc/{d}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:                   # gone, or not ours; a zombie has no environment
            continue
        if needle in env:
            out.append(int(d))
    return out


def _describe(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f"pid {pid}: " + f.read().replace(b"\0", b" ").decode(errors="replace")[:200]
    except OSError:
        return f"pid {pid}"


def _shm() -> set[str]:
    try:
        return set(os.listdir("/dev/shm"))
    except OSError:
        return set()


@pytest.fixture(scope="session", autouse=True)
def no_leaks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    import secrets
    import shutil
    import signal
    import tempfile
    import time

    tmp_path_factory.getbasetemp()            # pytest's own temp root stays where it was
    mark = f"{os.getpid()}-{secrets.token_hex(4)}"
    private = tempfile.mkdtemp(prefix="tgs-t-")         # short: ipc paths hold 107 bytes
    os.chmod(private, 0o711)                  # other users traverse it, as they do /tmp
    saved = {k: os.environ.get(k) for k in (LEAK_MARK, "TMPDIR")}
    saved_tempdir = tempfile.tempdir
    os.environ[LEAK_MARK] = mark
    os.environ["TMPDIR"] = private
    tempfile.tempdir = private
    shm_before = _shm()
    try:
        yield
    finally:
        tempfile.tempdir = saved_tempdir
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        problems = []
        pids = _marked_pids(mark)
        if pids:
            time.sleep(0.5)                   # a process that was exiting is given its moment
            pids = _marked_pids(mark)
        for pid in pids:
            problems.append("process left running: " + _describe(pid))
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        left = sorted(os.listdir(private))
        problems += [f"left in the tests' TMPDIR: {private}/{name}" for name in left]
        shutil.rmtree(private, ignore_errors=True)
        new_shm = sorted(_shm() - shm_before)
        if new_shm:
            import warnings
            warnings.warn(f"/dev/shm entries created during the run and still there: {new_shm}",
                          stacklevel=1)
        if problems:
            pytest.fail("the test run leaked:\n  " + "\n  ".join(problems), pytrace=False)

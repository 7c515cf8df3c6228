"""A tenant fills the disk under the state directory through its own files.

The controller's state and segment directories sit on a small tmpfs of their own (root with
CAP_SYS_ADMIN; skipped otherwise).  The tenant writes past the end of its `.seg` (or allocates
blocks past it with fallocate KEEP_SIZE) until the file system is full, again and again; all
the while `set` on another job and new registrations must succeed, the tenant's job is flagged
and its file cut back, and the controller's reserve comes back afterwards (controller/disk.py).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from ctl_process import Ctl, start_ctl
from proc_helpers import wait_for

pytestmark = [pytest.mark.security, pytest.mark.timeout(120)]
FS_BYTES = 48 << 20
CHUNK = 1 << 20
ATTACK_S = 4.0


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 48 MiB tmpfs at tmp_path/state (the controller's state and segment directories)."""
    mnt = tmp_path / "state"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={FS_BYTES},mode=0700", "tmpfs",
                        str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        if subprocess.run(["umount", str(mnt)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


@pytest.fixture
def ctl(small_fs: Path, tmp_path: Path, sim_env: dict[str, str]) -> Iterator[Ctl]:
    yield from start_ctl(tmp_path, sim_env)


class Filler:
    """The tenant: fills the file system through its own file until told to stop."""

    def __init__(self, path: str, how: str) -> None:
        self.fd = os.open(path, os.O_RDWR)
        self.how = how
        self.full_hits = 0
        self.off = os.fstat(self.fd).st_size          # fallocate: the next block past the end
        self.stop_ev = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        self.fallocate = libc.fallocate
        self.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]

    def _grow(self) -> None:
        if self.how == "write":
            os.pwrite(self.fd, b"\xab" * CHUNK, os.fstat(self.fd).st_size)
            return
        if self.fallocate(self.fd, 1, self.off, CHUNK) != 0:      # FALLOC_FL_KEEP_SIZE
            raise OSError(ctypes.get_errno(), "fallocate")
        self.off += CHUNK

    def _run(self) -> None:
        while not self.stop_ev.is_set():
            try:
                self._grow()
            except OSError as exc:
                if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                    raise
                self.full_hits += 1
                self.stop_ev.wait(0.002)       # full: try again at once, as an attacker would

    def __enter__(self) -> Filler:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_ev.set()
        self.thread.join(5)
        os.close(self.fd)


@pytest.mark.parametrize("how", ["write", "fallocate"])
def test_filling_the_disk_leaves_requests_working(ctl: Ctl, small_fs: Path, how: str) -> None:
    with ctl.client() as c:
        c.register("victim", priority="production", mem_quota=1 << 30)
        seg = c.register("vandal", mem_quota=1 << 30)["segment"]
        assert wait_for(lambda: c.status().get("disk_reserve_held") is True, 10)
        with Filler(seg, how) as filler:
            assert wait_for(lambda: filler.full_hits > 0, 10), "the disk never filled"
            t_end, k = time.monotonic() + ATTACK_S, 0
            while time.monotonic() < t_end:
                k += 1
                c.set("victim", weight=1 + k % 5)               # another job's change
                c.register(f"late-{k}", mem_quota=1 << 20)      # a new job's files
                c.unregister(f"late-{k}")
                time.sleep(0.05)
            tampered = c.list()
            st = c.status()
        assert k >= 10 and filler.full_hits > 0
        vandal = {j["name"]: j for j in tampered}["vandal"]
        assert "past its size" in (vandal.get("segment_tampered") or ""), vandal
        assert st["tampered_jobs"] >= 1
        # once the tenant stops: its file is its size again, the reserve comes back
        assert wait_for(lambda: os.stat(seg).st_blocks * 512 <= os.path.getsize(seg) + 4096
                        and os.path.getsize(seg) < CHUNK, 5)
        assert wait_for(lambda: c.status()["disk_reserve_held"] is True, 15)
        assert {j["name"] for j in c.list()} == {"victim", "vandal"}
        assert c.list()[0]["weight"] == 1 + k % 5
    assert ctl.proc.poll() is None

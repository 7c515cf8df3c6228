"""Durable controller state: one JSON file, replaced atomically.

Write path: temp file in the same directory, fsync, rename over the old file,
fsync the directory.  A kill -9 at any point leaves either the old or the new
file, never a torn one.  The registry saves before it replies, so nothing a
client was told is accepted can be lost.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tgs.intercept.atomic_file import write_atomically

from .disk import DiskGuard

STATE_VERSION = 1
STATE_FILE = "controller.json"
REJECTED_FILE = "controller.rejected.json"


@dataclass
class JobRecord:
    """What survives a restart for one job."""

    name: str
    priority: str
    weight: int
    mem_quota: int | None
    device_index: int
    device_uuid: str
    ephemeral: bool
    nslots: int
    segment: str
    created: float
    state: str = "registered"        # registered -> running -> done (-> running again)
    lease: str = ""                  # tgs-run's lease file ("" : none), see registry.py
    mem_total: int = 0               # oversubscription (docs/oversubscription.md); 0 = off
    host_pinned_max: int = 0         # page-locked host bytes the job may hold; 0 = no limit
    # an opportunistic job's device memory is evictable (managed) unless this is set
    # (docs/oversubscription.md "The default"); production memory never is
    mem_fixed: bool = False
    # a job over several GPUs (protocol 1.2): their UUIDs in the job's order, one part each
    # (<name>@<k>.seg ...); empty for a single-device job (device_uuid, <name>.seg)
    devices: list[str] = field(default_factory=list)


@dataclass
class ControllerState:
    jobs: list[JobRecord] = field(default_factory=list)


class StateError(Exception):
    pass


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed")


def default_state_dir() -> Path:
    """$TGS_STATE_DIR, else /var/lib/tgs as root, else $XDG_STATE_HOME/tgs."""
    if os.environ.get("TGS_STATE_DIR"):
        return Path(os.environ["TGS_STATE_DIR"])
    if os.geteuid() == 0:
        return Path("/var/lib/tgs")
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "tgs"


class StateStore:
    def __init__(self, state_dir: Path, guard: DiskGuard | None = None) -> None:
        self.dir = Path(state_dir)
        self.path = self.dir / STATE_FILE
        self.guard = guard                 # disk.py: a full disk gets one more try

    def ensure_dir(self) -> None:
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)

    def read(self) -> list[Any]:
        """The raw job records (each one is checked by records.check_record before use);
        StateError when the file as a whole is unreadable."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StateError(f"cannot read {self.path}: {exc}") from exc
        try:
            obj = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
            if not isinstance(obj, dict):
                raise ValueError("not a JSON object")
            if obj.get("version") != STATE_VERSION:
                raise ValueError(f"unsupported state version {str(obj.get('version'))[:20]!r}")
            jobs = obj.get("jobs")
            if not isinstance(jobs, list):
                raise ValueError("'jobs' is not a list")
        except (ValueError, RecursionError) as exc:
            raise StateError(f"{self.path} is corrupt ({str(exc)[:200]}); move it aside to "
                             "start empty") from exc
        return jobs

    def save_rejected(self, rejected: list[dict[str, Any]]) -> Path:
        """Keep the records load() skipped (with the reasons) beside the state file."""
        path = self.dir / REJECTED_FILE
        data = json.dumps({"rejected": rejected}, indent=1, default=str).encode()
        write_atomically(path, data, mode=0o600)
        return path

    def save(self, state: ControllerState) -> None:
        self.ensure_dir()
        data = json.dumps({"version": STATE_VERSION, "jobs": [asdict(j) for j in state.jobs]},
                          indent=1, sort_keys=True).encode()
        if self.guard is not None:
            self.guard.write("saving the state",
                             lambda: write_atomically(self.path, data, mode=0o600))
        else:
            write_atomically(self.path, data, mode=0o600)

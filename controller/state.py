"""Durable controller state: one JSON file, replaced atomically.

Write path: temp file in the same directory, fsync, rename over the old file,
fsync the directory.  A kill -9 at any point leaves either the old or the new
file, never a torn one.  The registry saves before it replies, so nothing a
client was told is accepted can be lost.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from tgs.intercept.atomic_file import write_atomically

STATE_VERSION = 1
STATE_FILE = "controller.json"


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

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> JobRecord:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in obj.items() if k in names})


@dataclass
class ControllerState:
    jobs: list[JobRecord] = field(default_factory=list)


class StateError(Exception):
    pass


def default_state_dir() -> Path:
    if os.geteuid() == 0:
        return Path("/var/lib/tgs")
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "tgs"


class StateStore:
    def __init__(self, state_dir: Path) -> None:
        self.dir = Path(state_dir)
        self.path = self.dir / STATE_FILE

    def ensure_dir(self) -> None:
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)

    def load(self) -> ControllerState:
        try:
            raw = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return ControllerState()
        except OSError as exc:
            raise StateError(f"cannot read {self.path}: {exc}") from exc
        try:
            obj = json.loads(raw)
            if obj.get("version") != STATE_VERSION:
                raise ValueError(f"unsupported state version {obj.get('version')!r}")
            jobs = [JobRecord.from_dict(j) for j in obj["jobs"]]
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise StateError(f"{self.path} is corrupt ({exc}); move it aside to start empty") \
                from exc
        return ControllerState(jobs=jobs)

    def save(self, state: ControllerState) -> None:
        self.ensure_dir()
        data = json.dumps({"version": STATE_VERSION, "jobs": [asdict(j) for j in state.jobs]},
                          indent=1, sort_keys=True).encode()
        write_atomically(self.path, data, mode=0o600)

"""Validation of the state file's job records (docs/security.md).

The state file is the controller's own, but it is a file on disk: a record is
trusted for nothing.  Every field is checked (type and range, names by the job-name
rule, known priorities and states), the segment and lease paths must be the job's
own files directly inside the segment directory (absolute, no `..`, not a symlink,
not anything but a regular file), and the device must exist on this node.  A record
that fails is reported (one log line) and skipped: no file of it is opened, created,
written or removed.
"""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any

from . import protocol as P
from .devices import Device
from .state import JobRecord

STATES = ("registered", "running", "done")
MAX_PATH = 4096
MAX_TIME = 1e11          # seconds since 1970: year 5138


class RecordError(ValueError):
    pass


def _int(lo: int, hi: int) -> Callable[[Any], int]:
    def check(v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise RecordError(f"must be an integer in [{lo}, {hi}], got {_show(v)}")
        return v
    return check


def _quota(v: Any) -> int | None:
    return None if v is None else _int(0, P.MAX_QUOTA)(v)


def _bool(v: Any) -> bool:
    if not isinstance(v, bool):
        raise RecordError(f"must be true or false, got {_show(v)}")
    return v


def _choice(options: tuple[str, ...]) -> Callable[[Any], str]:
    def check(v: Any) -> str:
        if not isinstance(v, str) or v not in options:
            raise RecordError(f"must be one of {', '.join(options)}, got {_show(v)}")
        return v
    return check


def _match(pattern: Any, what: str) -> Callable[[Any], str]:
    def check(v: Any) -> str:
        if not isinstance(v, str) or not pattern.match(v):
            raise RecordError(f"must be {what}, got {_show(v)}")
        return v
    return check


def _path(v: Any) -> str:
    if not isinstance(v, str) or not 0 < len(v) <= MAX_PATH or "\0" in v:
        raise RecordError(f"must be a path, got {_show(v)}")
    return v


def _lease(v: Any) -> str:
    return "" if v == "" else _path(v)


def _time(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
            or not 0 <= v <= MAX_TIME:
        raise RecordError(f"must be a Unix time, got {_show(v)}")
    return float(v)


def _devices(v: Any) -> list[str]:
    """A multi-device job's UUIDs: empty (single device) or 2..MAX_DEVICES distinct UUIDs."""
    if not isinstance(v, list):
        raise RecordError(f"must be a list of device UUIDs, got {_show(v)}")
    if v and not 2 <= len(v) <= P.MAX_DEVICES:
        raise RecordError(f"must list 2 to {P.MAX_DEVICES} devices, got {len(v)}")
    for u in v:
        if not isinstance(u, str) or not P.UUID_RE.match(u):
            raise RecordError(f"must be a list of device UUIDs, got {_show(u)}")
    if len(set(v)) != len(v):
        raise RecordError("lists a device twice")
    return list(v)


# one check per JobRecord field (a test asserts the two lists agree)
FIELD_CHECKS: dict[str, Callable[[Any], Any]] = {
    "name": _match(P.NAME_RE, "a job name"),
    "priority": _choice(P.PRIORITIES),
    "weight": _int(1, P.MAX_WEIGHT),
    "mem_quota": _quota,
    "device_index": _int(0, 63),
    "device_uuid": _match(P.UUID_RE, "a device UUID"),
    "ephemeral": _bool,
    "mem_fixed": _bool,
    "nslots": _int(1, P.MAX_SLOTS),
    "segment": _path,
    "created": _time,
    "state": _choice(STATES),
    "lease": _lease,
    "mem_total": _int(0, P.MAX_QUOTA),
    "host_pinned_max": _int(0, P.MAX_QUOTA),
    "devices": _devices,
}


def _show(v: Any) -> str:
    text = ascii(v)
    return text if len(text) <= 60 else text[:60] + "..."


def confined(path: str, seg_dir: Path, filename: str) -> None:
    """`path` must be exactly <seg_dir>/<filename>: absolute, normalised (no `..`), in the
    segment directory itself, and, when it exists, a regular file (not a symlink)."""
    p = Path(path)
    if not p.is_absolute() or os.path.normpath(path) != path or ".." in p.parts:
        raise RecordError(f"{_show(path)} is not an absolute, normalised path")
    if p.name != filename:
        raise RecordError(f"{_show(path)} is not the job's file {filename}")
    if p.parent.resolve() != seg_dir.resolve():
        raise RecordError(f"{_show(path)} is outside the segment directory {seg_dir}")
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise RecordError(f"{_show(path)}: {exc.strerror}") from None
    if stat.S_ISLNK(st.st_mode):
        raise RecordError(f"{_show(path)} is a symbolic link")
    if not stat.S_ISREG(st.st_mode):
        raise RecordError(f"{_show(path)} is not a regular file")


def check_record(obj: Any, seg_dir: Path, devices: list[Device]) -> JobRecord:
    """A JobRecord from one raw state-file record, or RecordError saying what is wrong."""
    if not isinstance(obj, dict):
        raise RecordError(f"not an object: {_show(obj)}")
    known = {f.name: f for f in fields(JobRecord)}
    extra = sorted(str(k) for k in obj if k not in known)
    if extra:
        raise RecordError(f"unknown field(s): {_show(', '.join(extra))}")
    values: dict[str, Any] = {}
    for name, f in known.items():
        if name not in obj:
            if f.default is f.default_factory:       # no default: required (both MISSING)
                raise RecordError(f"field {name!r} is missing")
            continue
        try:
            values[name] = FIELD_CHECKS[name](obj[name])
        except RecordError as exc:
            raise RecordError(f"field {name!r} {exc}") from None
    rec = JobRecord(**values)
    if rec.devices:
        if len(rec.name) + len(part_suffix(len(rec.devices) - 1)) > P.NAME_MAX - 1:
            raise RecordError("the name leaves no room for the part suffix")
        if rec.devices[0] != rec.device_uuid:
            raise RecordError("device_uuid is not the first of devices")
    confined(rec.segment, seg_dir, f"{part_name(rec.name, 0)}.seg" if rec.devices
             else f"{rec.name}.seg")
    if rec.lease:
        confined(rec.lease, seg_dir, f"{rec.name}.lease")
    devs = []
    for uuid in rec.devices or [rec.device_uuid]:
        dev = next((d for d in devices if d.uuid == uuid), None)
        if dev is None:
            raise RecordError(f"device {uuid} (index {rec.device_index}) is not on this node")
        devs.append(dev)
    rec.device_index = devs[0].index    # the UUID is the identity: indices can be renumbered
    if rec.priority == "production" and rec.mem_total:
        raise RecordError("a production job cannot oversubscribe memory (mem_total)")
    for dev in devs:
        if rec.priority == "production" and rec.mem_quota is not None \
                and rec.mem_quota > dev.mem_total:
            raise RecordError(f"memory quota {rec.mem_quota} exceeds device {dev.index}'s "
                              f"{dev.mem_total} bytes")
    return rec


def part_suffix(k: int) -> str:
    """The suffix naming a multi-device job's k-th part ('@' is not in a job name)."""
    return f"@{k}"


def part_name(name: str, k: int) -> str:
    return name + part_suffix(k)


def evictable(rec: JobRecord) -> bool:
    """Whether a job's device allocations are managed memory that production can evict: every
    opportunistic job's, unless it asked for fixed memory (docs/oversubscription.md, "The
    default")."""
    return rec.priority == "opportunistic" and not rec.mem_fixed


def mem_total_of(rec: JobRecord, device_mem: int) -> int:
    """The .ctl's mem_total (what the job may hold in all; 0 = not oversubscribed): the job's
    own figure, or for an evictable job without one its quota, or the device's memory."""
    if rec.mem_total or not evictable(rec):
        return rec.mem_total
    return rec.mem_quota if rec.mem_quota is not None else device_mem

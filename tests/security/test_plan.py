"""Who may write what, read from the running stage: the injection plans (what each job's
container gets) against what the controller and the victims actually map (/proc/PID/maps).

The rule (docs/security.md): nothing one tenant can write is written by another tenant or by
the controller, and whatever a process maps from a file another tenant can write, it maps
read-only (and survives its truncation: the attacks in test_hostile.py check that part).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hostile_fields import file_struct
from hostile_stage import Files, Stage

pytestmark = [pytest.mark.security, pytest.mark.timeout(120)]


def _plans(stage: Stage) -> dict[str, Files]:
    stage.ensure()
    return {name: stage.files(name) for name in stage.jobs()}


def _maps(pid: int) -> dict[str, set[str]]:
    """Mapped file -> the permission strings of its mappings."""
    out: dict[str, set[str]] = {}
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        parts = line.split(maxsplit=5)
        if len(parts) == 6 and parts[5].startswith("/"):
            path = parts[5].removesuffix(" (deleted)")
            out.setdefault(path, set()).add(parts[1])
    return out


def _writers(plans: dict[str, Files]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for job, files in plans.items():
        for p in files.rw:
            out.setdefault(str(Path(p).resolve()), set()).add(job)
    return out


def test_no_file_is_writable_by_two_jobs(stage: Stage) -> None:
    shared = {p: sorted(j) for p, j in _writers(_plans(stage)).items() if len(j) > 1}
    assert not shared, f"files mounted read-write into several jobs' containers: {shared}"


def test_controller_maps_no_file_a_tenant_can_write(stage: Stage) -> None:
    """A tenant can truncate what it can write: a mapping of it is a SIGBUS waiting."""
    writers = _writers(_plans(stage))
    assert stage.ctl is not None
    mapped = _maps(stage.ctl.pid)
    bad = {p: sorted(writers[p]) for p in mapped if p in writers}
    assert not bad, f"the controller maps files that tenants can write: {bad}"


def test_victims_map_foreign_writable_files_read_only(stage: Stage) -> None:
    """A victim may read another tenant's file only read-only, in its mapping and its plan."""
    plans = _plans(stage)
    writers = _writers(plans)
    bad = []
    for name, runner in stage.victims.items():
        own_ro = {str(Path(p).resolve()) for p in plans[name].ro}
        for path, perms in _maps(runner.proc.pid).items():
            others = writers.get(path, set()) - {name}
            if not others:
                continue
            if any("w" in p for p in perms):
                bad.append(f"{name} maps {path} writable ({sorted(perms)}); "
                           f"{sorted(others)} can write it")
            if path not in own_ro:
                bad.append(f"{name}'s plan does not mount {path} read-only; "
                           f"{sorted(others)} can write it")
    assert not bad, "\n".join(bad)


def test_suite_recognises_every_tgs_file(stage: Stage) -> None:
    """The field-level lies find files by magic number through segment.h: if a layout change
    hid a file from them, they would be skipped as "not expressible" instead of run."""
    seg_dir = (stage.dir / "seg").resolve()
    unknown = sorted({p for files in _plans(stage).values() for p in files.rw + files.ro
                      if seg_dir in Path(p).resolve().parents and file_struct(p) is None})
    assert not unknown, f"files in the segment directory hostile_fields cannot identify: {unknown}"

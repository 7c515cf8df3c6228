"""State-file records: every field validated on load; a bad record is reported (one log
line) and skipped, and none of its files is opened, created, written or removed
(docs/security.md)."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
from ctl_helpers import DEVICES, FakeFactory, FakeSeg
from tgs.controller import protocol as P
from tgs.controller.records import FIELD_CHECKS
from tgs.controller.registry import Registry
from tgs.controller.state import JobRecord, StateStore

GIB = 1 << 30


class SpyFactory(FakeFactory):
    """Records every segment path the registry touches."""

    def __init__(self, files: set[str]) -> None:
        super().__init__()
        self.files = set(files)
        self.touched: list[tuple[str, str]] = []

    def create(self, rec: JobRecord) -> FakeSeg:
        self.touched.append(("create", rec.segment))
        return super().create(rec)

    def open(self, rec: JobRecord) -> FakeSeg:
        self.touched.append(("open", rec.segment))
        return super().open(rec)

    def remove(self, rec: JobRecord) -> None:
        self.touched.append(("remove", rec.segment))
        super().remove(rec)


def _state(tmp_path: Path) -> tuple[Path, dict[str, Any], FakeFactory]:
    """A state file with two good jobs, 'good' and 'victim' (the one the cases spoil)."""
    fac = FakeFactory()
    reg = Registry(StateStore(tmp_path / "state"), DEVICES, tmp_path / "segs", fac)
    reg.register(P.Register(id="1", name="good", priority="production", mem_quota=GIB))
    reg.register(P.Register(id="2", name="victim", weight=3, mem_quota=2 * GIB))
    path = tmp_path / "state" / "controller.json"
    return path, json.loads(path.read_text()), fac


def _segs(tmp_path: Path) -> Path:
    d = tmp_path / "segs"
    d.mkdir(exist_ok=True)
    return d


def _cases(tmp_path: Path) -> dict[str, dict[str, Any]]:
    segs = str(tmp_path / "segs")
    return {
        "name traversal": {"name": "../../x", "segment": f"{segs}/../../x.seg"},
        "name empty": {"name": ""},
        "name number": {"name": 5},
        "name too long": {"name": "a" * 64},
        "name unicode": {"name": "v\u0131ctim"},
        "priority unknown": {"priority": "root"},
        "weight 0": {"weight": 0},
        "weight negative": {"weight": -1},
        "weight too large": {"weight": 1001},
        "weight bool": {"weight": True},
        "weight float": {"weight": 1.5},
        "quota negative": {"mem_quota": -1},
        "quota too large": {"mem_quota": 1 << 63},
        "quota string": {"mem_quota": "1G"},
        "production quota over the device": {"priority": "production", "mem_quota": 17 * GIB},
        "device not on node": {"device_index": 7, "device_uuid": "GPU-sim-7"},
        "device uuid bad": {"device_uuid": "../x"},
        "ephemeral string": {"ephemeral": "yes"},
        "nslots 0": {"nslots": 0},
        "nslots too many": {"nslots": P.MAX_SLOTS + 1},
        "segment outside": {"segment": "/etc/passwd"},
        "segment dotdot": {"segment": f"{segs}/../victim.seg"},
        "segment relative": {"segment": "victim.seg"},
        "segment another job's": {"segment": f"{segs}/good.seg"},
        "segment nul": {"segment": f"{segs}/victim.seg\0"},
        "segment not a string": {"segment": 3},
        "lease outside": {"lease": "/tmp/victim.lease"},
        "lease another job's": {"lease": f"{segs}/good.lease"},
        "created string": {"created": "yesterday"},
        "created negative": {"created": -5},
        "created huge": {"created": 1e300},
        "state unknown": {"state": "zombie"},
        "unknown field": {"evil": 1},
        "missing field": {"nslots": None},
    }


CASE_NAMES = list(_cases(Path("/x")))


@pytest.mark.parametrize("case", CASE_NAMES)
def test_bad_record_is_reported_and_skipped(tmp_path: Path, case: str,
                                            caplog: pytest.LogCaptureFixture) -> None:
    path, obj, fac = _state(tmp_path)
    bad = next(j for j in obj["jobs"] if j["name"] == "victim")
    for k, v in _cases(tmp_path)[case].items():
        if v is None:
            del bad[k]
        else:
            bad[k] = v
    path.write_text(json.dumps(obj))
    spy = SpyFactory(fac.files)
    reg = Registry(StateStore(path.parent), DEVICES, tmp_path / "segs", spy)
    with caplog.at_level(logging.ERROR, logger="tgs.controller.registry"):
        reg.load()
    assert set(reg.jobs) == {"good"}
    assert spy.touched == [("open", str(tmp_path / "segs" / "good.seg"))]
    skipped = [r for r in caplog.records if "skipped:" in r.getMessage()]
    assert len(skipped) == 1 and "record 1" in skipped[0].getMessage(), caplog.text
    assert "\n" not in skipped[0].getMessage()
    rejected = json.loads((path.parent / "controller.rejected.json").read_text())["rejected"]
    assert len(rejected) == 1 and rejected[0]["reason"]


@pytest.mark.parametrize("raw", [5, "x", [], None])
def test_record_not_an_object(tmp_path: Path, raw: Any) -> None:
    path, obj, fac = _state(tmp_path)
    obj["jobs"].insert(0, raw)
    path.write_text(json.dumps(obj))
    reg = Registry(StateStore(path.parent), DEVICES, tmp_path / "segs", SpyFactory(fac.files))
    reg.load()
    assert set(reg.jobs) == {"good", "victim"}


def test_duplicate_name_keeps_the_first(tmp_path: Path) -> None:
    path, obj, fac = _state(tmp_path)
    dup = dict(obj["jobs"][0], weight=9)
    obj["jobs"].append(dup)
    path.write_text(json.dumps(obj))
    reg = Registry(StateStore(path.parent), DEVICES, tmp_path / "segs", SpyFactory(fac.files))
    reg.load()
    assert reg.jobs["good"].rec.weight == 1 and len(reg.jobs) == 2


def test_renumbered_device_follows_its_uuid(tmp_path: Path) -> None:
    path, obj, fac = _state(tmp_path)
    obj["jobs"][1].update(device_index=0, device_uuid="GPU-sim-1")
    path.write_text(json.dumps(obj))
    reg = Registry(StateStore(path.parent), DEVICES, tmp_path / "segs", SpyFactory(fac.files))
    reg.load()
    assert reg.jobs["victim"].rec.device_index == 1


def test_every_field_has_a_check() -> None:
    assert sorted(FIELD_CHECKS) == sorted(f.name for f in fields(JobRecord))


@pytest.mark.parametrize("kind", ["symlink", "directory"])
def test_segment_symlink_is_never_written(tmp_path: Path, kind: str) -> None:
    """With the real segment factory: a record whose segment is a symlink to another file
    (or a directory) is skipped, and the target is left as it was."""
    from tgs.controller.segments import SegmentFactory
    segs = _segs(tmp_path)
    target = tmp_path / "precious"
    target.write_bytes(b"keep me\n" * 100)
    fac = SegmentFactory(segs)
    reg = Registry(StateStore(tmp_path / "state"), DEVICES, segs, fac)
    reg.register(P.Register(id="1", name="ok"))
    reg.register(P.Register(id="2", name="evil"))
    reg.close()
    os.unlink(segs / "evil.seg")
    if kind == "symlink":
        os.symlink(target, segs / "evil.seg")
    else:
        os.mkdir(segs / "evil.seg")
    reg2 = Registry(StateStore(tmp_path / "state"), DEVICES, segs, fac)
    reg2.load()
    try:
        assert set(reg2.jobs) == {"ok"}
        assert target.read_bytes() == b"keep me\n" * 100
        assert (segs / "evil.seg").is_symlink() == (kind == "symlink")
    finally:
        reg2.close()

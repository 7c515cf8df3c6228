"""mem_total (oversubscription) in the controller: kept across a restart, refused for
production jobs (register, set, and a state record that says so)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ctl_helpers import DEVICES, FakeFactory
from tgs.controller import protocol as P
from tgs.controller.registry import Registry
from tgs.controller.state import StateStore

GIB = 1 << 30


def _reg(tmp_path: Path, fac: FakeFactory | None = None) -> Registry:
    return Registry(StateStore(tmp_path / "state"), DEVICES, tmp_path / "segs",
                    fac or FakeFactory())


def test_mem_total_survives_a_restart(tmp_path: Path) -> None:
    fac = FakeFactory()
    reg = _reg(tmp_path, fac)
    reg.register(P.Register(id="1", name="opp", mem_quota=GIB, mem_total=4 * GIB))
    assert reg.jobs["opp"].info().mem_total == 4 * GIB
    again = _reg(tmp_path, fac)
    again.load()
    assert again.jobs["opp"].rec.mem_total == 4 * GIB
    again.update(P.Set(id="2", name="opp", mem_total=0))
    assert again.jobs["opp"].rec.mem_total == 0


def test_production_cannot_oversubscribe(tmp_path: Path) -> None:
    reg = _reg(tmp_path)
    with pytest.raises(P.ProtocolError, match="opportunistic jobs only"):
        reg.register(P.Register(id="1", name="p", priority="production", mem_total=GIB))
    assert "p" not in reg.jobs
    reg.register(P.Register(id="2", name="o", mem_total=GIB))
    with pytest.raises(P.ProtocolError, match="opportunistic jobs only"):
        reg.update(P.Set(id="3", name="o", priority="production"))
    assert reg.jobs["o"].rec.priority == "opportunistic"


def test_state_record_of_oversubscribing_production_job_is_skipped(tmp_path: Path) -> None:
    fac = FakeFactory()
    reg = _reg(tmp_path, fac)
    reg.register(P.Register(id="1", name="o", mem_total=GIB))
    path = tmp_path / "state" / "controller.json"
    doc = json.loads(path.read_text())
    doc["jobs"][0]["priority"] = "production"
    path.write_text(json.dumps(doc))
    again = _reg(tmp_path, fac)
    again.load()
    assert "o" not in again.jobs


def test_wire_form_round_trips() -> None:
    for req in (P.Register(id="1", name="o", mem_total=3 * GIB),
                P.Set(id="2", name="o", mem_total=0)):
        assert P.parse_payload(P.encode(P.request_to_dict(req))) == req
    with pytest.raises(P.ProtocolError, match="mem_total"):
        P.parse_payload(P.encode({"v": 1, "id": "3", "type": "set", "name": "o",
                                  "mem_total": -1}))


def test_host_pinned_max_survives_a_restart(tmp_path: Path) -> None:
    """The page-locked host limit (libshim/pinned.c) is a job limit like mem_total: kept in
    the state, given back after a restart, changed by set, on the wire both ways."""
    fac = FakeFactory()
    reg = _reg(tmp_path, fac)
    reg.register(P.Register(id="1", name="opp", mem_total=4 * GIB, host_pinned_max=GIB))
    assert reg.jobs["opp"].info().host_pinned_max == GIB
    again = _reg(tmp_path, fac)
    again.load()
    assert (again.jobs["opp"].rec.host_pinned_max, again.jobs["opp"].rec.mem_total) == \
        (GIB, 4 * GIB)
    again.update(P.Set(id="2", name="opp", host_pinned_max=0))
    assert again.jobs["opp"].rec.host_pinned_max == 0
    assert again.jobs["opp"].rec.mem_total == 4 * GIB  # untouched
    for req in (P.Register(id="3", name="o", host_pinned_max=GIB),
                P.Set(id="4", name="o", host_pinned_max=0)):
        assert P.parse_payload(P.encode(P.request_to_dict(req))) == req

"""Durable state: atomic save/load, corrupt files, registry reload."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ctl_helpers import DEVICES, FakeFactory
from tgs.controller import protocol as P
from tgs.controller.registry import Registry
from tgs.controller.state import ControllerState, JobRecord, StateError, StateStore


def rec(name: str) -> JobRecord:
    return JobRecord(name=name, priority="production", weight=1, mem_quota=None, device_index=0,
                     device_uuid="GPU-0", ephemeral=False, nslots=4, segment=f"/s/{name}.seg",
                     created=1.0)


def test_save_load_round_trip(tmp_path: Path) -> None:
    st = StateStore(tmp_path / "st")
    assert st.read() == []
    st.save(ControllerState(jobs=[rec("a"), rec("b")]))
    assert [j["name"] for j in st.read()] == ["a", "b"]
    st.save(ControllerState(jobs=[rec("c")]))
    assert [JobRecord(**j) for j in st.read()] == [rec("c")]
    assert [p.name for p in (tmp_path / "st").iterdir()] == ["controller.json"]  # no temp left
    assert (tmp_path / "st").stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize("text", ["{", "[]", '{"version": 99, "jobs": []}',
                                  '{"version": 1, "jobs": {"name": 1}}', "\xff",
                                  '{"version": 1, "jobs": [NaN]}'])
def test_corrupt_state_is_a_clear_error(tmp_path: Path, text: str) -> None:
    """A file that is not a state file at all stops the daemon (bad records are skipped:
    test_controller_records.py)."""
    (tmp_path / "controller.json").write_text(text)
    with pytest.raises(StateError, match="controller.json"):
        StateStore(tmp_path).read()


def test_registry_survives_reload(tmp_path: Path) -> None:
    fac = FakeFactory()
    r1 = Registry(StateStore(tmp_path), DEVICES, tmp_path / "segs", fac)
    r1.register(P.Register(id="1", name="p", priority="production", mem_quota=1 << 30))
    r1.register(P.Register(id="2", name="o", weight=5, device="GPU-sim-1", ephemeral=True))
    r1.update(P.Set(id="3", name="o", weight=7))
    r2 = Registry(StateStore(tmp_path), DEVICES, tmp_path / "segs", fac)
    r2.load()
    assert set(r2.jobs) == {"p", "o"}
    o = r2.jobs["o"].rec
    assert (o.weight, o.device_index, o.ephemeral) == (7, 1, True)
    # a vanished segment is re-created on load
    fac.files.clear()
    r3 = Registry(StateStore(tmp_path), DEVICES, tmp_path / "segs", fac)
    r3.load()
    assert r3.jobs["p"].seg is not None and len(fac.files) == 2


def test_failed_save_changes_nothing(tmp_path: Path, monkeypatch) -> None:
    fac = FakeFactory()
    store = StateStore(tmp_path)
    reg = Registry(store, DEVICES, tmp_path / "segs", fac)
    reg.register(P.Register(id="1", name="p"))

    def boom(_state) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(store, "save", boom)
    for call in (lambda: reg.register(P.Register(id="2", name="q")),
                 lambda: reg.update(P.Set(id="3", name="p", weight=9)),
                 lambda: reg.unregister(P.Unregister(id="4", name="p"))):
        with pytest.raises(P.ProtocolError) as exc:
            call()
        assert exc.value.code == P.E_INTERNAL
    assert set(reg.jobs) == {"p"} and reg.jobs["p"].rec.weight == 1
    assert fac.files == {str(tmp_path / "segs" / "p.seg")}
    assert json.loads((tmp_path / "controller.json").read_text())["jobs"][0]["name"] == "p"

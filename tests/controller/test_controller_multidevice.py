"""A job over several GPUs (protocol 1.2 register.devices): one record, one part per device
(<name>@<k>, a full file set bound to that device), quotas per device, the device list kept
across restarts, old records unchanged, bad lists refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ctl_helpers import DEVICES, GIB, FakeFactory, make_handler
from tgs.controller import protocol as P
from tgs.controller.devices import cuda_uuid
from tgs.controller.records import RecordError, check_record
from tgs.controller.registry import Registry
from tgs.controller.server import Handler
from tgs.controller.state import StateStore


def ask(h: Handler, **req: Any) -> dict:
    return json.loads(h.handle([b"peer", json.dumps({"v": 1, "id": "x", **req}).encode()])[-1])


@pytest.fixture(autouse=True)
def sim_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The simulator's state file of this test (made by the registry when a multi-device job
    needs the simulated GPUs' CUDA UUIDs), never the default one."""
    monkeypatch.setenv("TGS_SIM_STATE", str(tmp_path / "sim-state"))
    monkeypatch.setenv("TGS_SIM_DEVICES", "2")


def test_register_over_two_devices_makes_one_part_per_device(tmp_path: Path) -> None:
    fac = FakeFactory()
    h = make_handler(tmp_path, fac)
    out = ask(h, type="register", name="train", priority="production", mem_quota=GIB,
              devices=[1, "GPU-sim-0"])
    assert out["ok"], out
    segs = tmp_path / "segs"
    job = out["job"]
    assert (job["device"], job["device_uuid"]) == (1, "GPU-sim-1")     # the first device
    assert [(d["name"], d["device"], d["device_uuid"], d["segment"]) for d in job["devices"]] \
        == [("train@0", 1, "GPU-sim-1", str(segs / "train@0.seg")),
            ("train@1", 0, "GPU-sim-0", str(segs / "train@1.seg"))]
    assert job["segment"] == out["segment"] == str(segs / "train@0.seg")
    assert fac.files == {str(segs / "train@0.seg"), str(segs / "train@1.seg")}
    env = out["env"]
    assert env["TGS_PARTS"] == f"{segs / 'train@0.seg'};{segs / 'train@1.seg'}"
    # the UUIDs CUDA reports (the simulator's, from the state file the registry made)
    cuda = [cuda_uuid(DEVICES[1]), cuda_uuid(DEVICES[0])]
    assert env["CUDA_VISIBLE_DEVICES"].split(",") == cuda
    assert cuda[0].startswith("GPU-") and cuda[0] not in ("GPU-sim-0", "GPU-sim-1")
    assert [d["cuda_uuid"] for d in job["devices"]] == cuda
    # the quota is per device: each part carries the job's whole quota, priority, weight
    parts = h.registry.jobs["train"].parts
    assert [(p.rec.mem_quota, p.rec.priority, p.rec.device_index) for p in parts] == \
        [(GIB, "production", 1), (GIB, "production", 0)]
    # set applies to every part; unregister removes every part's files
    assert ask(h, type="set", name="train", mem_quota=2 * GIB)["ok"]
    assert [p.seg.rec.mem_quota for p in parts] == [2 * GIB, 2 * GIB]  # type: ignore[union-attr]
    assert ask(h, type="unregister", name="train")["ok"]
    assert fac.files == set()


def test_a_single_device_job_keeps_todays_names(tmp_path: Path) -> None:
    h = make_handler(tmp_path)
    for name, req in (("a", {"device": 1}), ("b", {"devices": [1]})):
        out = ask(h, type="register", name=name, **req)
        assert out["ok"], out
        assert out["job"]["segment"] == str(tmp_path / "segs" / f"{name}.seg")
        assert [d["name"] for d in out["job"]["devices"]] == [name]
        assert "TGS_PARTS" not in out["env"] and "CUDA_VISIBLE_DEVICES" not in out["env"]
        assert h.registry.jobs[name].rec.devices == []


def test_production_quotas_are_checked_on_every_device(tmp_path: Path) -> None:
    h = make_handler(tmp_path)
    assert ask(h, type="register", name="p1", priority="production", mem_quota=10 * GIB,
               device=1)["ok"]
    out = ask(h, type="register", name="big", priority="production", mem_quota=8 * GIB,
              devices=[0, 1])
    assert out["error"]["code"] == "overcommit" and "device 1" in out["error"]["message"]
    assert ask(h, type="register", name="two", priority="production", mem_quota=6 * GIB,
               devices=[0, 1])["ok"]
    # the two-device job holds 6 GiB of device 0 as well
    out = ask(h, type="register", name="p0", priority="production", mem_quota=12 * GIB, device=0)
    assert out["error"]["code"] == "overcommit"
    assert ask(h, type="set", name="two", mem_quota=7 * GIB)["error"]["code"] == "overcommit"
    assert set(h.registry.jobs) == {"p1", "two"}


@pytest.mark.parametrize("devices, code", [
    ([0, 0], "bad_request"),                      # duplicate
    ([0, "GPU-sim-0"], "bad_request"),            # the same device by index and by UUID
    ([0, 5], "no_device"),                        # unknown
    ([0, "GPU-nope"], "no_device"),
    ([], "bad_request"),                          # empty
    (list(range(17)), "bad_request"),             # too many
    ("0,1", "bad_request"),                       # wrong types
    ([0, True], "bad_request"),
    ([0, 1.0], "bad_request"),
    ([[0], 1], "bad_request"),
    ([0, -1], "bad_request"),
    ([0, "bad uuid"], "bad_request"),
    (None, "bad_request"),
])
def test_bad_device_lists_are_refused(tmp_path: Path, devices: Any, code: str) -> None:
    fac = FakeFactory()
    h = make_handler(tmp_path, fac)
    out = ask(h, type="register", name="j", devices=devices)
    assert not out["ok"] and out["error"]["code"] == code, out
    assert h.registry.jobs == {} and fac.files == set()
    assert not (tmp_path / "state" / "controller.json").exists()


def test_device_and_devices_together_are_refused(tmp_path: Path) -> None:
    out = ask(make_handler(tmp_path), type="register", name="j", device=0, devices=[0, 1])
    assert out["error"]["code"] == "bad_request"


def test_the_name_must_leave_room_for_the_part_suffix(tmp_path: Path) -> None:
    h = make_handler(tmp_path)
    long = "n" * (P.NAME_MAX - 1)                 # a valid job name, 63 characters
    out = ask(h, type="register", name=long, devices=[0, 1])
    assert out["error"]["code"] == "bad_request" and "at most 61" in out["error"]["message"]
    assert ask(h, type="register", name=long, device=0)["ok"]          # alone it fits
    assert ask(h, type="register", name="m" * 61, devices=[0, 1])["ok"]


def test_a_restart_keeps_the_device_list(tmp_path: Path) -> None:
    fac = FakeFactory()
    r1 = Registry(StateStore(tmp_path / "state"), DEVICES, tmp_path / "segs", fac)
    r1.register(P.Register(id="1", name="mj", mem_quota=GIB, devices=("GPU-sim-1", 0)))
    r1.register(P.Register(id="2", name="solo", device=1))
    saved = json.loads((tmp_path / "state" / "controller.json").read_text())["jobs"]
    assert saved[0]["devices"] == ["GPU-sim-1", "GPU-sim-0"] and saved[1]["devices"] == []
    # the node renumbers its devices: the UUIDs are the identity
    renumbered = [DEVICES[1].__class__(1 - d.index, d.uuid, d.name, d.mem_total, d.kind)
                  for d in DEVICES]
    r2 = Registry(StateStore(tmp_path / "state"), renumbered, tmp_path / "segs", fac)
    r2.load()
    job = r2.jobs["mj"]
    assert job.rec.devices == ["GPU-sim-1", "GPU-sim-0"]
    assert [(p.rec.name, p.rec.device_index, p.node_uuid) for p in job.parts] == \
        [("mj@0", 0, "GPU-sim-1"), ("mj@1", 1, "GPU-sim-0")]
    assert all(p.seg is not None for p in job.parts)
    assert r2.jobs["solo"].parts == [] and r2.jobs["solo"].rec.device_index == 0


def test_old_records_load_unchanged(tmp_path: Path) -> None:
    """A 1.1 record (no `devices` field) is a single-device job, as before."""
    old = {"name": "old", "priority": "opportunistic", "weight": 2, "mem_quota": None,
           "device_index": 1, "device_uuid": "GPU-sim-1", "ephemeral": False, "nslots": 4,
           "segment": str(tmp_path / "old.seg"), "created": 1.0, "state": "done", "lease": "",
           "mem_total": 0}
    rec = check_record(old, tmp_path, DEVICES)
    assert (rec.devices, rec.device_index, rec.segment) == ([], 1, old["segment"])


def _multi(tmp_path: Path, **over: Any) -> dict:
    rec = {"name": "mj", "priority": "opportunistic", "weight": 1, "mem_quota": GIB,
           "device_index": 0, "device_uuid": "GPU-sim-0", "ephemeral": False, "nslots": 4,
           "segment": str(tmp_path / "mj@0.seg"), "created": 1.0,
           "devices": ["GPU-sim-0", "GPU-sim-1"]}
    rec.update(over)
    return rec


def test_check_record_accepts_a_multi_device_record(tmp_path: Path) -> None:
    rec = check_record(_multi(tmp_path), tmp_path, DEVICES)
    assert rec.devices == ["GPU-sim-0", "GPU-sim-1"]


@pytest.mark.parametrize("over, why", [
    ({"devices": "GPU-sim-0"}, "list of device UUIDs"),
    ({"devices": ["GPU-sim-0"]}, "2 to"),
    ({"devices": ["GPU-sim-0", "GPU-sim-0"]}, "twice"),
    ({"devices": ["GPU-sim-0", 1]}, "list of device UUIDs"),
    ({"devices": ["GPU-sim-0", "GPU-sim-7"]}, "not on this node"),
    ({"devices": ["GPU-sim-1", "GPU-sim-0"]}, "first of devices"),
    ({"segment": "/elsewhere/mj@0.seg"}, "mj@0.seg"),
    ({"name": "n" * 63}, "no room"),
    ({"priority": "production", "mem_quota": 17 * GIB}, "exceeds device"),
])
def test_check_record_refuses_bad_device_lists(tmp_path: Path, over: dict, why: str) -> None:
    with pytest.raises(RecordError, match=why):
        check_record(_multi(tmp_path, **over), tmp_path, DEVICES)

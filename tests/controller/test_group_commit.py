"""Group commit: a batch of requests is saved once, before any of its replies; a
failed save undoes the whole batch and every reply that reported a change says so; the loop's
overrun counters follow the clock whatever held a step back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ctl_helpers import DEVICES, FakeFactory, make_handler
from tgs.controller import protocol as P
from tgs.controller.loop import ControlLoop
from tgs.controller.policy import make_policy
from tgs.controller.registry import Registry
from tgs.controller.state import StateStore


def msg(i: int, type_: str, **fields) -> list[bytes]:
    body = {"v": P.PROTOCOL_VERSION, "id": f"r{i}", "type": type_, **fields}
    return [b"peer", json.dumps(body).encode()]


def batch(h, msgs: list[list[bytes]]) -> list[dict]:
    h.begin()
    for m in msgs:
        h.add(m)
    return [json.loads(r[-1]) for r in h.finish()]


def counting_saves(h, monkeypatch, fail: bool = False) -> list[int]:
    saves: list[int] = []
    real = h.registry.store.save

    def save(state) -> None:
        saves.append(len(state.jobs))
        if fail:
            raise OSError("disk full")
        real(state)

    monkeypatch.setattr(h.registry.store, "save", save)
    return saves


def saved_names(tmp_path: Path) -> list[str]:
    return [j["name"] for j in json.loads((tmp_path / "state" / "controller.json")
                                          .read_text())["jobs"]]


def test_a_batch_is_saved_once_before_its_replies(tmp_path: Path, monkeypatch) -> None:
    h = make_handler(tmp_path)
    saves = counting_saves(h, monkeypatch)
    out = batch(h, [msg(i, "register", name=f"j{i}") for i in range(10)] +
                [msg(10, "set", name="j3", weight=7), msg(11, "unregister", name="j4")])
    assert all(r["ok"] for r in out) and [r["id"] for r in out] == [f"r{i}" for i in range(12)]
    # j3 changed again: the group was saved before that (the set and the unregister share
    # the second save)
    assert saves == [10, 9]
    assert saved_names(tmp_path) == [f"j{i}" for i in range(10) if i != 4]
    assert h.registry.jobs["j3"].rec.weight == 7


def test_a_reply_reports_only_saved_state(tmp_path: Path, monkeypatch) -> None:
    h = make_handler(tmp_path)
    saves = counting_saves(h, monkeypatch)
    out = batch(h, [msg(0, "register", name="a"), msg(1, "list"), msg(2, "register", name="b"),
                    msg(3, "status")])
    assert [j["name"] for j in out[1]["jobs"]] == ["a"] and out[3]["jobs"] == 2
    assert saves == [1, 2]                 # before the list, before the status; none after


def test_a_failed_save_undoes_the_whole_batch(tmp_path: Path, monkeypatch) -> None:
    fac = FakeFactory()
    h = make_handler(tmp_path, fac)
    assert json.loads(h.handle(msg(0, "register", name="keep"))[-1])["ok"]
    counting_saves(h, monkeypatch, fail=True)
    out = batch(h, [msg(1, "register", name="new1"), msg(2, "register", name="new2"),
                    msg(3, "set", name="keep", weight=5), msg(4, "unregister", name="nope"),
                    msg(5, "unregister", name="keep")])
    codes = [r["ok"] or r["error"]["code"] for r in out]
    assert codes[:3] == [P.E_INTERNAL] * 3 and codes[3] == P.E_NOT_FOUND
    assert codes[4] == P.E_INTERNAL
    assert all("cannot save state" in r["error"]["message"] for r in out[:3])
    assert set(h.registry.jobs) == {"keep"} and h.registry.jobs["keep"].rec.weight == 1
    assert fac.files == {str(tmp_path / "segs" / "keep.seg")}     # new ones removed
    assert saved_names(tmp_path) == ["keep"]
    assert h.errors == 5


def test_a_job_dropped_and_registered_again_keeps_its_files(tmp_path: Path,
                                                           monkeypatch) -> None:
    """The second change to a name waits for the save of the first: the dropped job's files
    are removed before the new job's are made."""
    fac = FakeFactory()
    h = make_handler(tmp_path, fac)
    assert json.loads(h.handle(msg(0, "register", name="x"))[-1])["ok"]
    out = batch(h, [msg(1, "unregister", name="x"), msg(2, "register", name="x")])
    assert all(r["ok"] for r in out)
    assert fac.files == {str(tmp_path / "segs" / "x.seg")} and saved_names(tmp_path) == ["x"]


def test_without_a_group_every_change_is_saved_on_its_own(tmp_path: Path) -> None:
    reg = Registry(StateStore(tmp_path), DEVICES, tmp_path / "segs", FakeFactory())
    reg.register(P.Register(id="1", name="p"))
    assert json.loads((tmp_path / "controller.json").read_text())["jobs"][0]["name"] == "p"
    assert reg.group.size == 0


@pytest.mark.parametrize("gaps,missed,overruns", [
    ([1.0] * 5, 0, 0),                    # on time
    ([1.0, 1.3, 0.8, 1.0], 0, 0),         # jitter
    ([1.0, 3.0, 1.0], 2, 1),              # one step two periods late
    ([1.0, 1.6, 2.4, 10.0], 1 + 1 + 9, 3),
])
def test_missed_periods_are_counted(tmp_path: Path, gaps: list[float], missed: int,
                                    overruns: int) -> None:
    reg = Registry(StateStore(tmp_path), DEVICES, tmp_path / "segs", FakeFactory())
    loop = ControlLoop(reg, make_policy("adaptive", 0.3), {}, 0.05)
    now = 100.0
    loop.step(now)
    for g in gaps:
        now += g * 0.05
        loop.step(now)
    st = loop.status()
    assert (st.steps, st.periods_missed, st.overruns) == (len(gaps) + 1, missed, overruns)

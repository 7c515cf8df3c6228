"""Orphan jobs of the DRA driver: dra-* jobs that no claim of its checkpoint holds (a lost
checkpoint) are removed only once their claim is gone from the API server (404, or another
uid) for --gc-grace, counted from the first look that found it gone, never while the API
server does not answer; jobs with no record of their claim are reported and left alone.

The bookkeeping (orphans.Orphans) in process with given times against the fake API server,
then the driver as a process whose checkpoint is lost under prepared claims."""

from __future__ import annotations

import logging
import re
import signal
from pathlib import Path

import pytest
from dra_helpers import (
    DraKubelet,
    DraPluginProc,
    FakeResourceApi,
    claim,
    prepare,
)
from k8s_helpers import Controller, wait_for
from tgs.k8s.dra.checkpoint import Owner, Owners
from tgs.k8s.dra.kube import Kube
from tgs.k8s.dra.orphans import Orphans
from tgs.k8s.dra.plan import job_name
from tgs.k8s.podinfo import ApiServer

pytestmark = pytest.mark.timeout(150)
GRACE = 60.0
G0, G1 = "gpu-sim-0", "gpu-sim-1"


def _claim_obj(ns: str, name: str, uid: str) -> dict:
    return claim(ns, name, uid, [("gpu", f"{G0}-share-0")])


@pytest.fixture
def orphans(dra_api: FakeResourceApi, tmp_path: Path) -> tuple[Orphans, Owners]:
    owners = Owners(tmp_path)
    kube = Kube(ApiServer(dra_api.url, timeout=5.0))
    return Orphans(kube, owners, GRACE), owners


def _gets(api: FakeResourceApi) -> int:
    return sum(1 for m, p in api.requests if m == "GET" and "/resourceclaims/" in p)


# ---------------------------------------------------------------- the bookkeeping
def test_removed_after_the_grace_once_the_claim_is_gone(orphans, dra_api, caplog) -> None:  # type: ignore[no-untyped-def]
    o, owners = orphans
    owners.write("dra-gone", Owner("ml", "a", "uid-a"))         # no such claim: 404
    owners.write("dra-new", Owner("ml", "b", "uid-b"))          # b created again
    owners.write("dra-here", Owner("ml", "c", "uid-c"))         # still there
    dra_api.claims[("ml", "b")] = _claim_obj("ml", "b", "uid-b2")
    dra_api.claims[("ml", "c")] = _claim_obj("ml", "c", "uid-c")
    jobs = ["dra-gone", "dra-new", "dra-here"]
    caplog.set_level(logging.INFO, logger="tgs.k8s.dra")
    assert o.look(jobs, 100.0) == []                            # first found gone now
    assert o.look(jobs, 100.0 + GRACE - 0.5) == []
    due = {d.job: d for d in o.look(jobs, 100.0 + GRACE)}
    assert set(due) == {"dra-gone", "dra-new"}
    assert "404" in due["dra-gone"].why and due["dra-gone"].absent_for == GRACE
    assert due["dra-gone"].owner == Owner("ml", "a", "uid-a")
    assert "is now uid uid-b2" in due["dra-new"].why
    # the claim that exists: kept however long, said once
    assert "dra-here" not in {d.job for d in o.look(jobs, 100.0 + 100 * GRACE)}
    assert "dra-here" not in o.gone_since
    said = [r.getMessage() for r in caplog.records if "still exist" in r.getMessage()]
    assert len(said) == 1 and "dra-here (claim ml/c)" in said[0]


def test_nothing_removed_while_the_api_server_does_not_answer(orphans, dra_api) -> None:  # type: ignore[no-untyped-def]
    o, owners = orphans
    for i in range(3):
        owners.write(f"dra-{i}", Owner("ml", f"c{i}", f"uid-{i}"))
    jobs = [f"dra-{i}" for i in range(3)]
    dra_api.down = True                                         # gone before any look
    before = len(dra_api.requests)
    assert o.look(jobs, 0.0) == [] and o.gone_since == {}
    assert len(dra_api.requests) - before <= 1                  # the round stops at once
    assert o.look(jobs, 10 * GRACE) == [] and o.gone_since == {}
    dra_api.down = False                                        # back: counted from now
    assert o.look(jobs, 20 * GRACE) == []
    assert o.look(jobs, 21 * GRACE - 1) == []
    assert {d.job for d in o.look(jobs, 21 * GRACE)} == set(jobs)
    # found gone, then an outage past the grace: nothing goes during it; the first answer
    # that still finds the claims gone removes them (counted from the first look)
    o2 = Orphans(o.kube, owners, GRACE)
    assert o2.look(jobs, 0.0) == []
    dra_api.down = True
    assert o2.look(jobs, 2 * GRACE) == []
    dra_api.down = False
    assert {d.job for d in o2.look(jobs, 2 * GRACE + 1)} == set(jobs)


def test_other_errors_count_neither_way(orphans, dra_api) -> None:  # type: ignore[no-untyped-def]
    """An error answer other than 404 (403, 500) counts neither way, for that claim only; an
    unreadable record is no record."""
    o, owners = orphans
    owners.write("dra-x", Owner("ml", "x", "uid-x"))
    owners.write("dra-y", Owner("ml", "y", "uid-y"))
    (owners.dir / "dra-bad.json").write_text("{not json")
    jobs = ["dra-bad", "dra-x", "dra-y"]
    dra_api.fail[("ml", "x")] = 403
    assert o.look(jobs, 0.0) == [] and set(o.gone_since) == {"dra-y"}
    dra_api.fail[("ml", "x")] = 500
    assert {d.job for d in o.look(jobs, GRACE)} == {"dra-y"}
    del dra_api.fail[("ml", "x")]
    assert {d.job for d in o.look(jobs, GRACE + 1)} == {"dra-y"}    # x: from now
    assert {d.job for d in o.look(jobs, 2 * GRACE + 1)} == {"dra-x", "dra-y"}


def test_claim_back_starts_over_and_held_jobs_are_dropped(orphans, dra_api) -> None:  # type: ignore[no-untyped-def]
    o, owners = orphans
    owners.write("dra-a", Owner("ml", "a", "uid-a"))
    owners.write("dra-a2", Owner("ml", "a", "uid-a"))           # two requests, one claim
    assert o.look(["dra-a", "dra-a2"], 0.0) == []
    dra_api.claims[("ml", "a")] = _claim_obj("ml", "a", "uid-a")
    n = _gets(dra_api)
    assert o.look(["dra-a", "dra-a2"], GRACE) == [] and o.gone_since == {}
    assert _gets(dra_api) == n + 1                              # one GET per claim a round
    del dra_api.claims[("ml", "a")]
    assert o.look(["dra-a", "dra-a2"], GRACE + 1) == []         # gone again: from now
    assert o.look(["dra-a", "dra-a2"], 2 * GRACE) == []
    assert len(o.look(["dra-a", "dra-a2"], 2 * GRACE + 1)) == 2
    # a job held again (no longer an orphan) is forgotten: its next absence starts anew
    assert o.look([], 3 * GRACE) == [] and o.gone_since == {}
    assert o.look(["dra-a"], 4 * GRACE) == []


def test_jobs_without_a_record_are_reported_once_and_kept(orphans, dra_api, caplog) -> None:  # type: ignore[no-untyped-def]
    o, _ = orphans
    caplog.set_level(logging.WARNING, logger="tgs.k8s.dra")
    for t in (0.0, GRACE, 10 * GRACE):
        assert o.look(["dra-unknown"], t) == []
    said = [r.getMessage() for r in caplog.records if "dra-unknown" in r.getMessage()]
    assert len(said) == 1 and "no record" in said[0] and "tgsctl rm" in said[0]
    assert _gets(dra_api) == 0


def test_owner_records(tmp_path: Path) -> None:
    owners = Owners(tmp_path)
    assert owners.jobs() == set() and owners.get("dra-1") is None
    owners.write("dra-1", Owner("ns", "n", "u"))
    owners.write("../escape", Owner("ns", "n", "u"))           # not a job name: ignored
    assert owners.get("dra-1") == Owner("ns", "n", "u") and owners.jobs() == {"dra-1"}
    assert not (tmp_path / "escape.json").exists()
    owners.remove("dra-1")
    owners.remove("dra-1")
    assert owners.jobs() == set()


# ---------------------------------------------------------------- the driver
def _rounds(proc: DraPluginProc, pattern: str) -> int:
    return len(re.findall(pattern, proc.log.read_text()))


def test_lost_checkpoint_jobs_removed_once_their_claims_are_gone(
        dra_kubelet: DraKubelet, ctl: Controller, dra_api: FakeResourceApi,
        dra_factory) -> None:  # type: ignore[no-untyped-def]
    proc: DraPluginProc = dra_factory("--gc-grace", "2")
    client = dra_kubelet.dra(dra_kubelet.register(proc).endpoint)
    dra_api.claims[("ml", "a")] = claim("ml", "a", "uid-a", [("gpu", f"{G0}-share-0")])
    dra_api.claims[("ml", "b")] = claim("ml", "b", "uid-b", [("gpu", f"{G1}-share-0")])
    answers = prepare(client, ("ml", "uid-a", "a"), ("ml", "uid-b", "b"))
    assert answers["uid-a"].error == "" and answers["uid-b"].error == ""
    ja, jb = job_name("uid-a", "gpu"), job_name("uid-b", "gpu")
    records = proc.state_dir / "jobs"
    assert {p.name for p in records.iterdir()} == {f"{ja}.json", f"{jb}.json"}
    # the checkpoint lost under a restart: both jobs are orphans
    proc.close(signal.SIGKILL)
    (proc.state_dir / "checkpoint.json").unlink()
    proc.start()
    # their claims exist: kept (said once the driver has looked)
    assert wait_for(lambda: "still exist" in proc.log.read_text(), timeout=30), proc.tail()
    assert {ja, jb} <= set(ctl.jobs())
    # the API server unreachable, and claim a deleted meanwhile: rounds past the grace (a
    # round every 0.5 s at least) remove nothing
    dra_api.down = True
    del dra_api.claims[("ml", "a")]
    unanswered = r"orphan job dra-\S+: claim ml/[ab] not looked at"
    n = _rounds(proc, unanswered)
    assert wait_for(lambda: _rounds(proc, unanswered) >= n + 6, timeout=60), proc.tail()
    assert {ja, jb} <= set(ctl.jobs())
    # back: a found gone now, removed 2 s later (its record and CDI spec after it); b kept
    dra_api.down = False
    removed = (rf"INFO job {ja}: in no prepared claim, and its ResourceClaim ml/a "
               r"\(uid uid-a\) is gone from the API server \(404\) for \d+ s: removed")
    assert wait_for(lambda: re.search(removed, proc.log.read_text()), timeout=30,
                    step=0.1), proc.tail()
    assert ja not in ctl.jobs() and jb in ctl.jobs()
    assert not (records / f"{ja}.json").exists()
    assert not (proc.cdi_dir / f"tgs.io-gpu-{ja}.json").exists()
    # b deleted and created again (another uid): its job goes too
    dra_api.claims[("ml", "b")] = claim("ml", "b", "uid-b-new", [("gpu", f"{G1}-share-0")])
    assert wait_for(lambda: "is now uid uid-b-new (created again) for" in proc.log.read_text(),
                    timeout=30, step=0.1), proc.tail()
    assert not [n for n in ctl.jobs() if n.startswith("dra-")]
    assert not list(records.iterdir())
    assert "unexpected error" not in proc.log.read_text()


def test_prepared_claims_jobs_are_never_orphans(
        dra_kubelet: DraKubelet, ctl: Controller, dra_api: FakeResourceApi,
        dra_factory) -> None:  # type: ignore[no-untyped-def]
    """A prepared claim deleted from the API server (its pod still running, the kubelet has
    not unprepared it yet) keeps its job: only the checkpoint's absence makes an orphan. A
    dra-* job of no record (another driver's, an older one) is reported and kept."""
    proc: DraPluginProc = dra_factory("--gc-grace", "0")
    client = dra_kubelet.dra(dra_kubelet.register(proc).endpoint)
    dra_api.claims[("ml", "a")] = claim("ml", "a", "uid-a", [("gpu", f"{G0}-share-0")])
    assert prepare(client, ("ml", "uid-a", "a"))["uid-a"].error == ""
    ja = job_name("uid-a", "gpu")
    with ctl.client() as c:
        c.register("dra-0123456789abcdef", device="GPU-sim-1")
    del dra_api.claims[("ml", "a")]
    assert wait_for(lambda: re.search(r"dra-0123456789abcdef; no record",
                                      proc.log.read_text()), timeout=30), proc.tail()
    n = _rounds(proc, "resync:")
    assert wait_for(lambda: _rounds(proc, "resync:") >= n + 4, timeout=30), proc.tail()
    assert {ja, "dra-0123456789abcdef"} <= set(ctl.jobs())
    assert not re.search(r"INFO job dra-\S+: in no prepared claim", proc.log.read_text())

"""The hostile-tenant suite: attacks replayed against running victims.

A production and an opportunistic victim run tgs-workload under one controller on a private
simulated GPU; an opportunistic and a production attacker job each have a tenant process that
attacks with exactly the files the injection plan gives its container (read-write mounts: it
may truncate, scribble on and lock them; read-only mounts: only read locks).  Each attack is a
window measured against the quiet window just before it: each victim keeps >= MIN_RATIO of its
throughput (an opportunistic victim held back by a *production* attacker claiming busy is what
production is entitled to), nothing dies, and the controller answers a status call at least
every MAX_SILENCE_S.  See docs/security.md for the threat model.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from hostile_stage import (
    ATTACKERS,
    BASELINE_S,
    OPP,
    PROD,
    IdleProcess,
    Runner,
    Stage,
    kill_proc,
)
from hostile_window import Outcome, measure
from tgs.intercept.segment import RATE_UNLIMITED

pytestmark = [pytest.mark.security, pytest.mark.slow, pytest.mark.timeout(240)]

ROLES = sorted(ATTACKERS)


def _check(outs: list[Outcome]) -> None:
    bad = [o.row() for o in outs if o.problems()]
    assert not bad, "attacks that harmed another tenant or the controller:\n" + "\n".join(bad)


class DyingProcess:
    """Two processes of the attacker's own job (a context and 4 KiB each, no launches), started
    before the control window; one is SIGKILLed once the attack is in place: its slot is left
    for someone to reclaim (a reclaim must not wait for the tenant's lock).  The
    other keeps the job running, so the policy sees the same jobs in both windows."""

    def __init__(self, stage: Stage, job: str) -> None:
        self.stage, self.job = stage, job
        self.procs: list[IdleProcess] = []

    def __call__(self) -> Callable[[], None]:
        self.close()
        self.procs = [IdleProcess(self.stage.envs[self.job]) for _ in range(2)]
        return self.procs[0].kill

    def close(self) -> None:
        for p in self.procs:
            p.close()


def _file_attack(stage: Stage, record: list[Outcome], role: str, mode: str) -> None:
    """One window per writable file of the attacker (files re-read after a rebuild)."""
    job = ATTACKERS[role]
    stage.ensure()
    labels = [stage.files(job).labels[p] for p in stage.files(job).rw]
    assert labels, f"the plan gives {job} no writable file"
    for label in labels:
        stage.ensure()
        files = stage.files(job)
        path = next(p for p in files.rw if files.labels[p] == label)
        cmd = {"op": mode, "rw": [path]}
        # scribbled bytes in a production job's own files may read as "busy": production may
        # claim that; it holds opportunistic work back, as a busy production job does
        entitled = role == "prod" and mode == "corrupt"
        record.append(measure(stage, job, mode, label, cmd, [path], entitled))
    _check(record)


def test_control_windows_agree(stage: Stage, record: list[Outcome]) -> None:
    """Two quiet windows back to back: the margin holds on this machine's noise."""
    stage.ensure()
    out = measure(stage, ATTACKERS["opp"], "none (control twice)", "-", {"op": "noop"}, [])
    record.append(out)
    _check([out])


def test_idle_attacker_jobs_change_nothing(stage: Stage, record: list[Outcome]) -> None:
    """Merely registered jobs (one production, one opportunistic, no process yet, as any job
    between `tgsctl add` and its container's start) leave the victims' throughput alone: the
    victims alone, then with them (windows of the stage's start-up; the second is measured
    once more if only a throughput fell, as in measure())."""
    stage.ensure()
    out = Outcome("registered, idle", "both", "-")
    out.prod, out.opp = tuple(zip(stage.rates(stage.alone), stage.rates(stage.with_idle)))
    if out.problems():
        first = out
        t0 = time.monotonic()
        time.sleep(BASELINE_S)
        out = Outcome("registered, idle", "both", "-")
        out.prod, out.opp = tuple(zip(stage.rates(stage.alone),
                                      stage.rates((t0, time.monotonic()))))
        out.note = f"retried (first: prod {first.ratio('prod'):.2f}, opp {first.ratio('opp'):.2f})"
    record.append(out)
    _check([out])


@pytest.mark.parametrize("role", ROLES)
def test_corrupt_writable_files(stage: Stage, record: list[Outcome], role: str) -> None:
    """In a loop: ftruncate to 0 and to half, every byte 0xFF, random bytes."""
    _file_attack(stage, record, role, "corrupt")


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("kind", ["ofd_locks", "posix_locks"])
def test_locks_on_every_file(stage: Stage, record: list[Outcome], role: str, kind: str) -> None:
    """Write locks (OFD or classic fcntl) on every byte of every writable file that nobody else
    holds, read locks on every read-only file (all a read-only opener can do), flock on all,
    held while a process of the attacker's job dies."""
    job = ATTACKERS[role]
    stage.ensure()
    files = stage.files(job)
    assert files.rw and files.ro, f"the plan gives {job} no writable or no read-only file"
    target = f"{len(files.rw)} rw + {len(files.ro)} ro files"
    cmd = {"op": kind, "rw": files.rw, "ro": files.ro}
    dying = DyingProcess(stage, job)
    try:
        out = measure(stage, job, kind, target, cmd, files.rw, around=dying)
    finally:
        dying.close()
    record.append(out)
    _check([out])


@pytest.mark.parametrize("role", ROLES)
def test_job_that_ran_and_stopped_changes_nothing(stage: Stage, record: list[Outcome],
                                                  role: str) -> None:
    """The attacker's job runs flat out for a second between the windows, then stops: what it
    left in its files (a gap history that ends in the past, gap claims) must not hold anyone
    back (an idle production job is not busy: it is entitled to nothing)."""
    job = ATTACKERS[role]
    stage.ensure()

    def around() -> Callable[[], None]:
        def run_then_stop() -> None:
            spec = replace(PROD if role == "prod" else OPP, name=f"{job}-ran")
            r = Runner.start(spec, stage.envs[job], stage.dir)
            time.sleep(1.0)
            r.stop()
            time.sleep(0.3)
        return run_then_stop
    out = measure(stage, job, "ran, then stopped", "-", {"op": "noop"}, [], around=around)
    record.append(out)
    _check([out])


BUSY = ["prod_active", "busy", "busy_count", "nbusy", "prod_busy", "busy_procs"]
TEN_S = 10_000_000_000


@dataclass(frozen=True)
class Lie:
    """Fields the attacker overwrites every 0.5 ms (names tried in order; see hostile_fields)."""

    id: str
    role: str
    fields: list[list[Any]] = field(default_factory=list)
    runs: bool = False             # the attacker runs flat out in both windows
    opp_entitled: bool = False
    flagged: bool = False          # the controller must flag the attacker's job (segment_lies)


LIES = [
    # the count opportunistic shims gate on, set by a non-production tenant
    Lie("opp-claims-production-busy", "opp", [[BUSY, 1000]]),
    Lie("opp-claims-idle-10s-gap", "opp",
        [[BUSY, 0], [["gap_pred_ns"], TEN_S], [["idle_since_ns"], "now"]]),
    Lie("opp-claims-every-gap", "opp", [[["gap_claim"], "busy_seq+1"]]),
    Lie("opp-zero-work-flat-out", "opp",
        [[["work"], 0], [["launches"], 0], [["inflight_work"], 0]], runs=True),
    Lie("opp-lifts-own-gate", "opp",
        [[["gate_flags"], 0], [["rate"], RATE_UNLIMITED], [["inflight_cap"], 0]], runs=True),
    # a production tenant may claim busy (production is entitled to the GPU when busy) ...
    Lie("prod-claims-busy-forever", "prod", [[BUSY, 1000]], opp_entitled=True),
    # ... but not steer opportunistic work into another production job's busy time
    Lie("prod-fakes-fresh-10s-gap", "prod",
        [[BUSY, 0], [["gap_pred_ns"], TEN_S], [["idle_since_ns"], "now"]]),
    Lie("prod-erases-its-gap-history", "prod",
        [[BUSY, 0], [["gap_pred_ns"], 0], [["idle_since_ns"], 0]]),
    Lie("opp-erases-gap-history", "opp", [[["gap_pred_ns"], 0], [["idle_since_ns"], 0]]),
    # its running processes' slots marked free, to be seen as no work
    Lie("opp-hides-its-processes", "opp", [[["state"], 0]], runs=True, flagged=True),
]


# the flat-out attacker runs this long before the control window: a CI run once measured the
# opportunistic victim's control with the attacker half started (59 it/s against its usual 35)
FLAT_OUT_WARM_S = 1.0


@pytest.mark.parametrize("lie", [pytest.param(lie, id=lie.id) for lie in LIES])
def test_field_lies(stage: Stage, record: list[Outcome], lie: Lie) -> None:
    job = ATTACKERS[lie.role]
    stage.ensure()
    files = stage.files(job)
    runner: Runner | None = None
    if lie.runs:
        spec = replace(OPP, name=f"{job}-flat-out")
        runner = Runner.start(spec, stage.envs[job], stage.dir)
        stage.extra.append(runner)
        runner.wait_running(FLAT_OUT_WARM_S)
    try:
        cmd = {"op": "set", "rw": files.rw, "ro": files.ro, "set": lie.fields}
        out = measure(stage, job, lie.id, "fields", cmd, files.rw, lie.opp_entitled)
    finally:
        if runner is not None:
            runner.stop()
            stage.extra.remove(runner)
    record.append(out)
    if out.skipped:
        pytest.skip(f"{lie.id}: not expressible with this layout ({out.skipped})")
    _check([out])
    if lie.flagged:
        assert (stage.jobs()[job].get("segment_lies") or 0) > 0, stage.jobs()[job]


class RefusedProcess:
    """Once the tenant holds every slot lock of its job, a new process of
    the job starts flat out; it must not run without the job's limits (the shim refuses its
    CUDA work after TGS_SLOT_WAIT_MS)."""

    def __init__(self, stage: Stage, job: str) -> None:
        self.stage, self.job = stage, job
        self.proc: subprocess.Popen[bytes] | None = None
        self.err = stage.dir / f"{job}-refused.err"

    def __call__(self) -> Callable[[], None]:
        def start() -> None:
            spec = replace(OPP, name=f"{self.job}-refused")
            with open(self.err, "wb") as e:
                # a wait shorter than the attack window, so that it ends inside it
                env = dict(self.stage.envs[self.job], TGS_SLOT_WAIT_MS="500")
                self.proc = subprocess.Popen(spec.argv(), stdout=subprocess.DEVNULL, stderr=e,
                                             stdin=subprocess.DEVNULL, env=env)
        return start

    def close(self) -> None:
        kill_proc(self.proc)


@pytest.mark.parametrize("role", ROLES)
def test_every_slot_locked_refuses_new_processes(stage: Stage, record: list[Outcome],
                                                 role: str) -> None:
    job = ATTACKERS[role]
    stage.ensure()
    files = stage.files(job)
    refused = RefusedProcess(stage, job)
    try:
        out = measure(stage, job, "slots locked, new process", "its .seg",
                      {"op": "ofd_locks", "rw": files.rw, "ro": files.ro}, files.rw,
                      around=refused)
        record.append(out)
        _check([out])
        # refused inside the window (its stderr says so once), or still running, refused
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and "refused" not in refused.err.read_text(
                errors="replace") and refused.proc is not None and refused.proc.poll() is None:
            time.sleep(0.1)
        err = refused.err.read_text(errors="replace")
        assert "refused" in err and "every slot is held" in err, err[-2000:]
    finally:
        refused.close()


"""The hostile-tenant suite (issue 10): attacks replayed against running victims.

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

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from hostile_stage import ATTACKERS, OPP, IdleProcess, Runner, Stage
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
    for someone to reclaim (issue 10 attack 3: the reclaim waited for the tenant's lock).  The
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


def _file_attack(stage: Stage, record: list[Outcome], role: str, mode: str,
                 dying_process: bool = False) -> None:
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
        dying = DyingProcess(stage, job)
        try:
            record.append(measure(stage, job, mode, label, cmd, [path], entitled,
                                  dying if dying_process else None))
        finally:
            dying.close()
    _check(record)


def test_control_windows_agree(stage: Stage, record: list[Outcome]) -> None:
    """Two quiet windows back to back: the margin holds on this machine's noise."""
    stage.ensure()
    out = measure(stage, ATTACKERS["opp"], "none (control twice)", "-", {"op": "noop"}, [])
    record.append(out)
    _check([out])


@pytest.mark.parametrize("role", ROLES)
def test_corrupt_writable_files(stage: Stage, record: list[Outcome], role: str) -> None:
    """In a loop: ftruncate to 0 and to half, every byte 0xFF, random bytes (issue 10 attacks
    1 and 2, and scribbling)."""
    _file_attack(stage, record, role, "corrupt")


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("kind", ["ofd_locks", "posix_locks"])
def test_write_locks_on_writable_files(stage: Stage, record: list[Outcome], role: str,
                                       kind: str) -> None:
    """A write lock on every byte nobody else holds (OFD or classic fcntl) plus flock, held
    while a process of the attacker's job dies (issue 10 attack 3)."""
    _file_attack(stage, record, role, kind, dying_process=True)


@pytest.mark.parametrize("role", ROLES)
def test_read_locks_on_read_only_files(stage: Stage, record: list[Outcome], role: str) -> None:
    """All a read-only opener can do: OFD and classic read locks and shared flocks, held."""
    job = ATTACKERS[role]
    stage.ensure()
    ro = stage.files(job).ro
    assert ro, f"the plan gives {job} no read-only file"
    cmd = {"op": "read_locks", "ro": ro}
    out = measure(stage, job, "read_locks", f"{len(ro)} read-only files", cmd, [])
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


LIES = [
    # issue 10 attack 4: the count opportunistic shims gate on, set by a non-production tenant
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
]


@pytest.mark.parametrize("lie", LIES, ids=[lie.id for lie in LIES])
def test_field_lies(stage: Stage, record: list[Outcome], lie: Lie) -> None:
    job = ATTACKERS[lie.role]
    stage.ensure()
    files = stage.files(job)
    runner: Runner | None = None
    if lie.runs:
        spec = replace(OPP, name=f"{job}-flat-out")
        runner = Runner.start(spec, stage.envs[job], stage.dir)
        stage.extra.append(runner)
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


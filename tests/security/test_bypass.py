"""The known limit, made visible: a tenant that does not run the shim (LD_PRELOAD unset) is not
limited by anything of TGS, but the GPU sees it.  Here the simulator's per-process counters (as
NVML's process list and utilisation would on a GPU) show a process with GPU time that has no
live slot in any job, and the controller reports it in status (gpus[].unmanaged,
docs/security.md "How the controller can see a bypass") within a few seconds, while the shimmed
victims are not reported.  Its effect on the victims is printed, not asserted (that is the
limit: the report stops nothing).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import pytest
from hostile_fields import find_fields, read_field
from hostile_stage import OPP, Runner, Stage
from hostile_window import Outcome
from tgs.intercept.header import const
from tgs.intercept.simstate import read_state

pytestmark = [pytest.mark.security, pytest.mark.timeout(120)]


def _slot_pids(stage: Stage) -> set[int]:
    """pids of the live (ACTIVE) slots of every job, read by name from the job files."""
    active = const("TGS_SLOT_ACTIVE")
    pids: set[int] = set()
    for job in stage.jobs().values():
        files = stage.files(job["name"])
        for path in files.rw:
            states = find_fields(path, "state")
            for st, pid in zip(states, find_fields(path, "pid")):
                if read_field(st) == active:
                    pids.add(int(read_field(pid) or 0))
    return pids


def test_a_process_without_the_shim_shows_in_the_gpu_counters(
        stage: Stage, record: list[Outcome]) -> None:
    stage.ensure()
    env = {k: v for k, v in stage.envs["atk-opp"].items()
           if not k.startswith("TGS_") or k.startswith("TGS_SIM")}
    env.pop("LD_PRELOAD", None)                     # the bypass: no shim at all
    out = Outcome("bypass (known limit)", "atk-opp", "no LD_PRELOAD")
    t0 = time.monotonic()
    time.sleep(1.3)
    t1 = time.monotonic()
    rogue = Runner.start(replace(OPP, name="atk-opp-bypass"), env, stage.dir)
    stage.extra.append(rogue)
    try:
        ta = time.monotonic()
        time.sleep(1.7)
        tb = time.monotonic()
        snap = read_state(stage.env["TGS_SIM_STATE"])
        shimmed = _slot_pids(stage)
        busy = {p.pid: sum(p.busy_ns) for p in snap.processes if p.alive}
        reported, shown = _wait_reported(stage, rogue.proc.pid, DETECT_S)
        assert rogue.alive(), "the bypassing workload exited before the check"
    finally:
        rogue.stop()
        stage.extra.remove(rogue)
    time.sleep(0.3)
    (p0, o0), (p1, o1) = stage.rates((t0, t1)), stage.rates((ta, tb))
    out.prod, out.opp = (p0, p1), (o0, o1)
    out.note = "not asserted: nothing in a shim can stop a process that skips it"
    record.append(out)
    victims = {r.proc.pid for r in stage.victims.values()}
    assert victims <= shimmed, f"victims {victims} not found in the job slots {shimmed}"
    assert rogue.proc.pid not in shimmed
    assert busy.get(rogue.proc.pid, 0) > 0, (
        f"the simulator shows no GPU time for the bypassing process {rogue.proc.pid}: {busy}")
    unaccounted = {pid for pid, ns in busy.items() if ns > 0 and pid not in shimmed}
    assert unaccounted == {rogue.proc.pid}, f"GPU time without a slot: {unaccounted}"
    # the controller's report: the bypassing process, with its GPU time, and no shimmed victim
    assert reported is not None, (
        f"status did not report the bypassing process {rogue.proc.pid} within {DETECT_S} s: "
        f"{shown}\n{stage.log_tail()}")
    assert reported["comm"] and reported["first_seen"] > 0, reported
    assert (reported["gpu_share"] or 0) > 0, reported
    assert not victims & {u["pid"] for u in shown}, f"shimmed victims reported: {shown}"
    assert "uses the GPU without the TGS shim" in stage.log_tail(100_000)
    gone, shown = _wait_cleared(stage, rogue.proc.pid, DETECT_S)
    assert gone, f"the stopped process is still reported: {shown}"


DETECT_S = 10.0     # detection needs two looks about 1 s apart: a loaded machine gets slack


def _unmanaged(stage: Stage) -> list[dict[str, Any]]:
    st = stage.status(5) or {}
    return [u for g in st.get("gpus") or [] for u in g.get("unmanaged") or []]


def _wait_reported(stage: Stage, pid: int, timeout: float
                   ) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    end, shown = time.monotonic() + timeout, []
    while time.monotonic() < end:
        shown = _unmanaged(stage)
        hit = next((u for u in shown if u["pid"] == pid), None)
        if hit is not None:
            return hit, shown
        time.sleep(0.2)
    return None, shown


def _wait_cleared(stage: Stage, pid: int, timeout: float) -> tuple[bool, list[dict[str, Any]]]:
    end, shown = time.monotonic() + timeout, []
    while time.monotonic() < end:
        shown = _unmanaged(stage)
        if all(u["pid"] != pid for u in shown):
            return True, shown
        time.sleep(0.2)
    return False, shown

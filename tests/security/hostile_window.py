"""One measured attack: a quiet control window, then the attack window, on the running stage.

Throughput comes from the victims' progress lines (CLOCK_MONOTONIC stamps), so both windows are
read after the fact from one uninterrupted run of each victim.  A probe thread asks the
controller for its status every PROBE_S (timeout STATUS_TIMEOUT_S) through both windows, and the
real `tgsctl status` runs once in each window.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hostile_stage import BIN, Stage, describe_exit

SETTLE_S = 0.2            # after the previous attack's files were restored
CONTROL_S = 1.3
ATTACK_S = 1.7
PROBE_S = 0.25
STATUS_TIMEOUT_S = 2.0
MAX_SILENCE_S = 1.5       # the controller must answer at least this often (1 s + probe slack)
# each victim keeps this share of its control throughput: production's own noise between two
# adjacent windows is a few %, the opportunistic victim's is larger (FIT, gap sharing)
MIN_RATIO = {"prod": 0.9, "opp": 0.8}


class Probe:
    """Status calls to the controller from a thread: (sent, answered or None) pairs."""

    def __init__(self, stage: Stage) -> None:
        self.stage = stage
        self.calls: list[tuple[float, float | None]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from tgs.client import ControllerUnavailable
        with self.stage.client(STATUS_TIMEOUT_S) as c:
            while not self._stop.is_set():
                t = time.monotonic()
                try:
                    c.status()
                    self.calls.append((t, time.monotonic()))
                except ControllerUnavailable:
                    self.calls.append((t, None))
                self._stop.wait(max(0.0, PROBE_S - (time.monotonic() - t)))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(STATUS_TIMEOUT_S + 5)

    def verdict(self, t0: float, t1: float) -> tuple[int, float, float]:
        """(calls that timed out, longest time without an answer, slowest answer) in [t0, t1]."""
        calls = [c for c in self.calls if t0 <= c[0] <= t1]
        failed = sum(1 for _, r in calls if r is None)
        answers = sorted(r for _, r in calls if r is not None)
        marks = [t0] + [a for a in answers if a <= t1] + [t1]
        silence = max(b - a for a, b in zip(marks, marks[1:]))
        slowest = max((r - s for s, r in calls if r is not None), default=0.0)
        return failed, silence, slowest


def tgsctl_status(stage: Stage) -> tuple[int, float]:
    """The real CLI: `tgsctl --timeout 2 status` (exit status, seconds it took)."""
    t = time.monotonic()
    try:
        r = subprocess.run([str(BIN / "tgsctl"), "--controller", str(stage.runtime),
                            "--timeout", str(STATUS_TIMEOUT_S), "status"],
                           capture_output=True, timeout=STATUS_TIMEOUT_S + 10, env=stage.env)
        rc = r.returncode
    except subprocess.TimeoutExpired:
        rc = -1
    return rc, time.monotonic() - t


def _window(stage: Stage, seconds: float) -> tuple[int, float]:
    """Sleep through a window, with one tgsctl status call in its middle (in both windows, so
    its CPU cost is the same in the control and the attack)."""
    end = time.monotonic() + seconds
    time.sleep(seconds / 3)
    out = tgsctl_status(stage)
    time.sleep(max(0.0, end - time.monotonic()))
    return out


def snapshot(paths: list[str]) -> dict[str, bytes]:
    out = {}
    for p in paths:
        try:
            with open(p, "rb") as f:
                out[p] = f.read()
        except OSError:
            continue
    return out


def restore(snap: dict[str, bytes]) -> None:
    """Put the attacker's files back as they were (what the tenant itself could do)."""
    for p, data in snap.items():
        try:
            fd = os.open(p, os.O_WRONLY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            os.pwrite(fd, data, 0)
            os.ftruncate(fd, len(data))
        finally:
            os.close(fd)


@dataclass
class Outcome:
    attack: str
    attacker: str
    target: str
    prod: tuple[float, float] = (0.0, 0.0)        # it/s in (control, attack)
    opp: tuple[float, float] = (0.0, 0.0)
    deaths: list[str] = field(default_factory=list)
    failed_calls: int = 0
    silence_s: float = 0.0
    slowest_s: float = 0.0
    cli_rc: int = 0               # `tgsctl status` in the attack window: exit status, seconds
    cli_s: float = 0.0
    opp_entitled: bool = False     # a production attacker may legitimately hold opp back
    note: str = ""
    skipped: str = ""

    @staticmethod
    def _ratio(pair: tuple[float, float]) -> float:
        return pair[1] / pair[0] if pair[0] > 0 else 0.0

    def ratio(self, victim: str) -> float:
        return self._ratio(self.prod if victim == "prod" else self.opp)

    def problems(self) -> list[str]:
        if self.skipped:
            return []
        out = list(self.deaths)
        if self._ratio(self.prod) < MIN_RATIO["prod"]:
            out.append(f"production victim at {self._ratio(self.prod):.2f} of its control")
        if self._ratio(self.opp) < MIN_RATIO["opp"] and not self.opp_entitled:
            out.append(f"opportunistic victim at {self._ratio(self.opp):.2f} of its control")
        if self.failed_calls:
            out.append(f"{self.failed_calls} status call(s) timed out ({STATUS_TIMEOUT_S} s)")
        if self.cli_rc != 0:
            out.append(f"tgsctl status exited {self.cli_rc} after {self.cli_s:.1f} s")
        if self.silence_s > MAX_SILENCE_S:
            out.append(f"controller silent for {self.silence_s:.1f} s")
        return out

    def row(self) -> str:
        if self.skipped:
            verdict = f"not expressible: {self.skipped}"
        else:
            verdict = "; ".join(self.problems()) or "unaffected"
        return (f"{self.attacker:8s} {self.attack:24s} {self.target:28s} "
                f"prod {self._ratio(self.prod):.2f} ({self.prod[0]:.0f}->{self.prod[1]:.0f}) "
                f"opp {self._ratio(self.opp):.2f} ({self.opp[0]:.0f}->{self.opp[1]:.0f}) "
                f"silence {self.silence_s:.1f}s | {verdict}"
                + (f" | {self.note}" if self.note else ""))


def _deaths(stage: Stage) -> list[str]:
    out = []
    if stage.ctl is None or stage.ctl.poll() is not None:
        out.append("controller " + describe_exit(stage.ctl.poll() if stage.ctl else None))
    for name, r in stage.victims.items():
        if not r.alive():
            out.append(f"victim {name} {describe_exit(r.proc.poll())}")
    return out


def measure(stage: Stage, attacker: str, attack: str, target: str, cmd: dict[str, Any],
            rw: list[str], opp_entitled: bool = False,
            around: Callable[[], Callable[[], None]] | None = None) -> Outcome:
    """attack_window, once more when the only problem was a victim's throughput (a stall of
    its own in the attack window); the retry's attack window is compared with the FIRST
    control window, so a harm that outlasts the attack still counts.  The note keeps both."""
    out = attack_window(stage, attacker, attack, target, cmd, rw, opp_entitled, around)
    if out.problems() and not (out.deaths or out.failed_calls or out.cli_rc
                               or out.silence_s > MAX_SILENCE_S):
        first = out
        out = attack_window(stage, attacker, attack, target, cmd, rw, opp_entitled, around)
        if out.skipped:
            return first
        out.prod = (first.prod[0], out.prod[1])
        out.opp = (first.opp[0], out.opp[1])
        out.note = (f"retried (first: prod {first.ratio('prod'):.2f}, "
                    f"opp {first.ratio('opp'):.2f})" + (f"; {out.note}" if out.note else ""))
    return out


def attack_window(stage: Stage, attacker: str, attack: str, target: str,
                  cmd: dict[str, Any], rw: list[str], opp_entitled: bool = False,
                  around: Callable[[], Callable[[], None]] | None = None) -> Outcome:
    """Control window, then the tenant's command for ATTACK_S, then stop and restore.
    ``around()`` runs before the control window and returns what to run once the attack is
    in place (e.g. start an attacker process, then kill it)."""
    out = Outcome(attack, attacker, target, opp_entitled=opp_entitled)
    then = around() if around is not None else None
    snap = snapshot(rw)
    time.sleep(SETTLE_S)
    probe = Probe(stage)
    t0 = time.monotonic()
    _window(stage, CONTROL_S)
    t1 = time.monotonic()
    tenant = stage.tenants[attacker]
    try:
        reply = tenant.send(cmd)
        if then is not None:
            then()
        ta = time.monotonic()
        if not reply.get("ok"):
            out.skipped = str(reply.get("error"))
        else:
            out.note = ", ".join(reply.get("fields", []))
            out.cli_rc, out.cli_s = _window(stage, ATTACK_S)
        tb = time.monotonic()
        tenant.send({"op": "stop"})
    finally:
        restore(snap)
        probe.stop()
    if out.skipped:
        return out
    time.sleep(2.5 * stage_report_s())
    (p0, o0), (p1, o1) = stage.rates((t0, t1)), stage.rates((ta, tb))
    out.prod, out.opp = (p0, p1), (o0, o1)
    out.deaths = _deaths(stage)
    out.failed_calls, out.silence_s, out.slowest_s = probe.verdict(ta, tb)
    if out.deaths or out.failed_calls or out.cli_rc or out.silence_s > MAX_SILENCE_S:
        stage.saw_harm()
    return out


def stage_report_s() -> float:
    from hostile_stage import REPORT_MS
    return REPORT_MS / 1000.0

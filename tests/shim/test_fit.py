"""Gap-fit gating: production's gap history and the FIT gate of opportunistic launches.

The opportunistic probe runs on the simulator (1 ns per work unit: grid 2000 x block 1000 is a 2 ms
kernel); production is played by writing its publish page from here, so the timeline is ours.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from shim_helpers import (
    WARM_UP,
    Played,
    finish,
    list_jobs,
    own_pub,
    play_production,
    run_probe,
)
from tgs.intercept import pub as ipub
from tgs.intercept import segment

pytestmark = pytest.mark.timeout(60)
GATE_FIT = segment.GATE_WAIT | segment.GATE_FIT
M64 = (1 << 64) - 1


def set_history(dev: ipub.Pub, gap_ns: int | list[int], pred_ns: int) -> None:
    """As if production had left four gaps of gap_ns (or these four)."""
    gaps = gap_ns if isinstance(gap_ns, list) else [gap_ns] * 4
    v = dev.view
    for i, g in enumerate(gaps):
        v.gap_ns[i] = g
    v.gap_idx = len(gaps)
    v.gap_pred_ns = pred_ns


def go_busy(dev: ipub.Pub) -> None:
    dev.view.busy_seq += 1
    dev.view.busy = 1


def go_idle(dev: ipub.Pub, ago_ns: int = 0) -> None:
    dev.view.idle_since_ns = time.monotonic_ns() - ago_ns
    dev.view.busy = 0


class Probe:
    """An opportunistic probe driven line by line."""

    def __init__(self, exe: Path, env: dict[str, str], *cmds: str) -> None:
        self.p = subprocess.Popen([str(exe), *cmds], env=env, text=True, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE)

    def line(self) -> str:
        assert self.p.stdout is not None
        return self.p.stdout.readline().strip()

    def go(self) -> None:
        assert self.p.stdin is not None
        self.p.stdin.write("go\n")
        self.p.stdin.flush()

    def timed_ns(self) -> int:
        _, _, ns, rc = self.line().split()
        assert rc == "0"
        return int(ns)

    def close(self) -> None:
        finish(self.p)


Opp = tuple[dict[str, str], segment.Segment, ipub.Pub, Played]


@pytest.fixture
def opp(tmp_path: Path, shim_env: dict[str, str]) -> Iterator[Opp]:
    """An opportunistic FIT job; the yielded Pub is the played production job's."""
    seg = segment.create(tmp_path / "opp.seg", "opp", priority=segment.PRIORITY_OPPORTUNISTIC,
                         gate_flags=GATE_FIT, gate_max_wait_us=10_000_000)
    prod = play_production(tmp_path, seg)
    try:
        yield dict(shim_env, TGS_SEGMENT=str(seg.path)), seg, prod.pub, prod
    finally:
        seg.close()
        prod.close()


def test_production_publishes_its_gaps(probe_bin: Path, tmp_path: Path,
                                       shim_env: dict[str, str]) -> None:
    seg = segment.create(tmp_path / "prod.seg", "prod", gate_flags=segment.GATE_PUBLISH)
    dev = own_pub(seg)
    try:
        assert dev.gap_pred_ns == 0 and dev.busy_seq == 0 and dev.gaps_ns == []
        # 6 x (two 1 ms kernels, synchronize, 3 ms host gap)
        run_probe(probe_bin, dict(shim_env, TGS_SEGMENT=str(seg.path)), "init",
                  "cycle:6:2:1000:1000:3000")
        gaps = dev.gaps_ns
        assert dev.busy_seq == 6 and len(gaps) == 4 and dev.view.gap_idx == 5
        assert all(2.9e6 <= g < 100e6 for g in gaps), gaps   # sleep 3 ms (+ noise)
        lo = min(gaps)
        assert dev.gap_pred_ns == lo - (lo // 50 + 50_000)      # min less 2 % and 50 us
        assert dev.busy == 0 and 0 < dev.idle_since_ns <= time.monotonic_ns()
    finally:
        seg.close()
        dev.close()


def test_fitting_launch_goes_and_one_that_does_not_waits_for_the_next_gap(
        probe_bin: Path, opp: Opp) -> None:
    env, _, dev, _ = opp
    p = Probe(probe_bin, env, "init", WARM_UP, "ready", "timed:1:2000:1000",
              "ready", "timed:1:1000000:1000")
    timers: list[threading.Timer] = []
    try:
        # no gap history yet: plain WAIT, and the warm-up launches are timed (20 ms kernels)
        assert [p.line(), p.line().split()[-1], p.line()] == ["init 0", "0", "ready"]
        set_history(dev, 1_000_000_000, 950_000_000)  # gaps of 1 s
        go_idle(dev, ago_ns=500_000_000)              # 450 ms of this gap left
        p.go()
        assert p.timed_ns() < 0.25e9                  # a 2 ms kernel fits: at once
        assert p.line() == "ready"
        go_idle(dev, ago_ns=500_000_000)
        p.go()                                        # a 1 s kernel does not fit in 450 ms
        timers = [threading.Timer(0.3, go_busy, args=(dev,)),
                  threading.Timer(0.6, lambda: (set_history(dev, 2_500_000_000, 2_400_000_000),
                                                go_idle(dev)))]
        for t in timers:
            t.start()
        waited = p.timed_ns()
        assert 0.55e9 <= waited < 4e9, waited         # it went with the next (longer) gap
    finally:
        for t in timers:
            t.cancel()
        p.close()


def test_max_wait_bounds_the_wait(probe_bin: Path,
                                  opp: Opp) -> None:
    env, seg, dev, played = opp
    seg.set_gate(GATE_FIT, 300_000)
    set_history(dev, 3_000_000, 2_750_000)
    go_busy(dev)                                      # production never leaves a gap
    lines = run_probe(probe_bin, env, "init", "timed:2:2000:1000")
    waited = int(lines[1].split()[2])
    assert 2 * 0.3e9 * 0.95 <= waited < 2 * 0.3e9 + 2e9, waited


def test_gap_that_outlasts_history_lets_one_kernel_at_a_time_go(
        probe_bin: Path, opp: Opp) -> None:
    env, _, dev, _ = opp
    set_history(dev, 2_000_000, 1_800_000)            # 2 ms gaps, but this one lasts
    go_idle(dev, ago_ns=1_000_000_000)
    lines = run_probe(probe_bin, env, "init", "launch:1:2000:1000", "timed:3:1000:1000")
    waited = int(lines[2].split()[2])
    # each 1 ms kernel waits for the one before (and the first for its timing): not max wait
    assert 2e6 <= waited < 2e9, waited


def test_gap_ownership(probe_bin: Path,
                       opp: Opp) -> None:
    """With a gap mask, a process opens only the gaps it owns (bit busy_seq % 64), or a gap
    its owner left unclaimed for the grace time; a claimed gap of another job stays shut."""
    env, seg, dev, played = opp
    p = Probe(probe_bin, env, "init", WARM_UP, "ready", "timed:1:2000:1000",
              "ready", "timed:1:2000:1000", "ready", "timed:1:2000:1000")
    timers: list[threading.Timer] = []
    try:
        assert [p.line(), p.line().split()[-1], p.line()] == ["init 0", "0", "ready"]
        (slot,) = seg.live_slots()
        set_history(dev, 1_000_000_000, 950_000_000)       # gaps of 1 s: a 2 ms kernel fits
        seq = int(dev.view.busy_seq)
        seg.set_gap_mask(slot, 1 << (seq % 64))             # this gap is ours
        go_idle(dev, ago_ns=1_000_000)
        p.go()
        assert p.timed_ns() < 0.25e9                        # owner: at once
        mine = own_pub(seg)
        assert int(mine.view.gap_claim) == seq + 1          # ... claimed in its own pub
        mine.close()
        assert p.line() == "ready"
        seg.set_gap_mask(slot, 1 << ((seq + 1) % 64))       # the next gap is ours; this one
        other = segment.create(seg.path.with_name("other.seg"), "other",   # is "other"'s,
                               priority=segment.PRIORITY_OPPORTUNISTIC)    # and claimed
        list_jobs(played.dev, played.seg, seg, other,
                  masks={"opp": 1 << ((seq + 1) % 64), "other": ~(1 << ((seq + 1) % 64)) & M64})
        claims = own_pub(other)
        claims.view.gap_claim = seq + 1
        p.go()
        timers = [threading.Timer(0.4, go_busy, args=(dev,)),     # next gap: ours
                  threading.Timer(0.5, go_idle, args=(dev,))]
        for t in timers:
            t.start()
        waited = p.timed_ns()
        assert 0.35e9 <= waited < 4e9, waited               # waited for its own gap
        assert p.line() == "ready"
        go_busy(dev)                                        # a gap of another owner ...
        go_busy(dev)
        go_idle(dev, ago_ns=1_000_000)                      # ... left unclaimed for 1 ms
        p.go()
        assert p.timed_ns() < 0.25e9                        # work conserving: it may go
        claims.close()
        other.close()
    finally:
        for t in timers:
            t.cancel()
        p.close()


def test_one_production_job_cannot_lengthen_anothers_gap(probe_bin: Path, opp: Opp) -> None:
    """Two production jobs: the gap ends when the first of them is predicted back.  A production
    tenant that claims a fresh, 10 s gap in its own pub cannot make an opportunistic kernel run
    into the other production job's return."""
    env, seg, dev, played = opp
    liar = segment.create(seg.path.with_name("liar.seg"), "liar",
                          gate_flags=segment.GATE_PUBLISH)
    list_jobs(played.dev, played.seg, liar, seg)
    lp = own_pub(liar)
    p = Probe(probe_bin, env, "init", WARM_UP, "ready", "timed:1:700000:1000")
    timers: list[threading.Timer] = []
    try:
        set_history(lp, 10_000_000_000, 10_000_000_000)
        go_idle(lp)                                   # "my gap just began and lasts 10 s"
        assert [p.line(), p.line().split()[-1], p.line()] == ["init 0", "0", "ready"]
        set_history(dev, 1_000_000_000, 950_000_000)
        go_idle(dev, ago_ns=500_000_000)              # the honest job is back in 450 ms
        p.go()                                        # a 0.7 s kernel does not fit in that
        timers = [threading.Timer(0.3, go_busy, args=(dev,)),
                  threading.Timer(0.6, lambda: (set_history(dev, 2_500_000_000, 2_400_000_000),
                                                go_idle(dev)))]
        for t in timers:
            t.start()
        waited = p.timed_ns()
        assert 0.55e9 <= waited < 4e9, waited         # it went with the honest job's next gap
    finally:
        for t in timers:
            t.cancel()
        p.close()
        lp.close()
        liar.close()


def _second_production(seg: segment.Segment, played: Played, name: str) -> tuple[segment.Segment,
                                                                                  ipub.Pub]:
    other = segment.create(seg.path.with_name(f"{name}.seg"), name,
                           gate_flags=segment.GATE_PUBLISH)
    list_jobs(played.dev, played.seg, other, seg)
    return other, own_pub(other)


def test_a_production_job_that_never_ran_leaves_fit_alone(probe_bin: Path, opp: Opp) -> None:
    """A registered production job with no history (never ran) says nothing about the device:
    the honest job's gap still decides (a kernel that does not fit waits for the next gap),
    instead of FIT falling back to plain WAIT for everybody."""
    env, seg, dev, played = opp
    other, op = _second_production(seg, played, "idle")
    p = Probe(probe_bin, env, "init", WARM_UP, "ready", "timed:1:700000:1000")
    timers: list[threading.Timer] = []
    try:
        assert [p.line(), p.line().split()[-1], p.line()] == ["init 0", "0", "ready"]
        set_history(dev, 1_000_000_000, 950_000_000)
        go_idle(dev, ago_ns=500_000_000)              # 450 ms left: a 0.7 s kernel must wait
        p.go()
        timers = [threading.Timer(0.3, go_busy, args=(dev,)),
                  threading.Timer(0.6, lambda: (set_history(dev, 2_500_000_000, 2_400_000_000),
                                                go_idle(dev)))]
        for t in timers:
            t.start()
        waited = p.timed_ns()
        assert 0.55e9 <= waited < 4e9, waited
    finally:
        for t in timers:
            t.cancel()
        p.close()
        op.close()
        other.close()


def test_a_production_job_that_stopped_does_not_pin_the_gap_in_the_past(
        probe_bin: Path, opp: Opp) -> None:
    """A production job that ran (1 ms gaps) and stopped 5 s ago: its predicted gap end lies
    long in the past.  It must not hold everybody's launches back: a 2 ms kernel that fits the
    honest job's current gap goes at once."""
    env, seg, dev, played = opp
    other, op = _second_production(seg, played, "stopped")
    p = Probe(probe_bin, env, "init", WARM_UP, "ready", "timed:1:2000:1000")
    try:
        set_history(op, 1_000_000, 900_000)
        op.view.busy_seq = 7
        go_idle(op, ago_ns=5_000_000_000)
        assert [p.line(), p.line().split()[-1], p.line()] == ["init 0", "0", "ready"]
        set_history(dev, 1_000_000_000, 950_000_000)
        go_idle(dev, ago_ns=500_000_000)              # 450 ms left: a 2 ms kernel fits
        p.go()
        assert p.timed_ns() < 0.25e9
    finally:
        p.close()
        op.close()
        other.close()


@pytest.mark.parametrize(("budget", "nopp", "lo", "hi"), [
    ("", 1, 1.2e9, 2.3e9),        # default: the budget also governs the starvation bound
    ("", 2, 2.5e9, 4.0e9),        # ... and two opportunistic jobs share the allowance
    ("gap", 1, 0.36e9, 1.0e9),    # start of gap only: held to the starvation bound (400 ms)
    ("0", 1, 0.15e9, 0.33e9),     # no budget: the next fresh gap of the second half
])
def test_overrun_budget_holds_launches_that_never_fit(probe_bin: Path, opp: Opp, budget: str,
                                                     nopp: int, lo: float, hi: float) -> None:
    """60 ms kernels never fit production's 19 ms gaps.  The first goes at the start of a gap in
    the second half of the wait (a full budget lets one launch go; it spends its 41 ms overrun,
    leaving the budget at -21 ms).  The next would overrun production by 41 ms too.  By default
    it waits, past the 400 ms max wait, until the budget (regaining 3 % of wall time, split
    among the device's opportunistic jobs) is full again: 41 ms / 3 % = 1.37 s, twice that with
    two jobs listed (the bound, max wait + 60 ms / the allowance, is later).  With
    TGS_FIT_BUDGET=gap it goes at the starvation bound (400 ms); without a budget
    (TGS_FIT_BUDGET=0) at the next fresh gap of the second half (~200 ms)."""
    env, seg, dev, played = opp
    seg.set_gate(GATE_FIT, 400_000)
    other = None
    if nopp == 2:
        other = segment.create(seg.path.with_name("opp2.seg"), "opp2",
                               priority=segment.PRIORITY_OPPORTUNISTIC, gate_flags=GATE_FIT)
        list_jobs(played.dev, played.seg, seg, other)
    if budget:
        env = dict(env, TGS_FIT_BUDGET=budget)
    trace = seg.path.with_name("fit-trace.txt")
    env = dict(env, TGS_FIT_TRACE=str(trace))
    p = Probe(probe_bin, env, "init", WARM_UP,
              "ready", "timed:1:60000:1000", "timed:1:60000:1000", "sync")
    stop = threading.Event()

    def gaps() -> None:                               # fresh 2 ms gaps, every 5 ms
        while not stop.is_set():
            go_busy(dev)
            time.sleep(0.003)
            go_idle(dev)
            time.sleep(0.002)

    t = threading.Thread(target=gaps)
    try:
        assert [p.line(), p.line().split()[-1], p.line()] == ["init 0", "0", "ready"]
        set_history(dev, 20_000_000, 19_000_000)
        t.start()
        p.go()
        first, second = p.timed_ns(), p.timed_ns()
        assert 0.15e9 <= first < 0.39e9, first        # second half, not the bound
        assert lo <= second < hi, second
        # why each went (TGS_FIT_TRACE): the warm-up before any gap history, then the start of a
        # gap twice (a full budget does not pay for 41-60 ms, so it lets a launch go only at the
        # start of a gap), except that with TGS_FIT_BUDGET=gap the second goes at the bound
        reasons = [ln.split()[2] for ln in trace.read_text().splitlines()]
        assert reasons == ["N"] * 4 + ["S", "X" if budget == "gap" else "S"], reasons
    finally:
        stop.set()
        if t.is_alive():
            t.join()
        p.close()
        if other is not None:
            other.close()


def test_small_kernels_do_not_inflate_the_cost_per_unit(probe_bin: Path, opp: Opp,
                                                       tmp_path: Path) -> None:
    """A PyTorch step mixes 32-thread kernels with 100k-thread ones: the small ones' time is
    the cost of a launch, not of their threads, so the cost per unit FIT learns stays the
    large kernels' (the simulator's 1 ns per unit) instead of growing to what 32 threads
    over a few microseconds would say (~100 ns)."""
    env, _, dev, _ = opp
    trace = tmp_path / "fit.txt"
    set_history(dev, 1_000_000_000, 950_000_000)         # gaps of 1 s: everything fits
    go_idle(dev)
    run_probe(probe_bin, dict(env, TGS_FIT_TRACE=str(trace)), "init", "launch:40:1:32", "sync",
              "launch:64:200:1000", "sync", "launch:40:1:32", "sync", "launch:64:200:1000",
              "sync")
    ests = [float(line.split()[7]) for line in trace.read_text().splitlines()]
    assert len(ests) == 208
    assert 0.5 <= ests[-1] <= 2.0, ests[-1]              # ns per unit of the 200k-unit kernels
    assert max(ests) <= 4.0, max(ests)                   # never pulled up by a small kernel


@pytest.mark.parametrize("gaps, pred, trickles", [
    # gaps that end at random (an inference server's): two of 1 ms, two of 2 s
    ([1_000_000, 1_000_000, 2_000_000_000, 2_000_000_000], 950_000, True),
    # regular gaps of 1 s, predicted 0.8 s: production is due back, nothing trickles
    ([1_000_000_000] * 4, 800_000_000, False),
    # regular gaps with one short outlier that pulled the prediction down: still regular
    ([1_000_000] + [1_000_000_000] * 3, 950_000, False),
])
def test_short_launches_trickle_into_gaps_that_end_at_random(
        probe_bin: Path, opp: Opp, tmp_path: Path, gaps: list[int], pred: int,
        trickles: bool) -> None:
    """Past the predicted end of a gap, with a history of gaps that end at random, launches go
    while the queue stays under 0.4 ms (reason T): 0.1 ms kernels go, a 1 ms one waits (here
    until the gap outlasts the history: O).  With a regular history nothing trickles."""
    env, _, dev, _ = opp
    trace = tmp_path / "fit.txt"
    p = Probe(probe_bin, dict(env, TGS_FIT_TRACE=str(trace)), "init", WARM_UP, "ready",
              "launch:6:100:1000", "sync", "launch:1:1000:1000", "sync")
    try:
        assert [p.line(), p.line().split()[-1], p.line()] == ["init 0", "0", "ready"]
        set_history(dev, gaps, pred)
        go_idle(dev, ago_ns=pred + 50_000_000)      # the prediction ended 50 ms ago
        p.go()
        assert [p.line().split()[-1], p.line(), p.line().split()[-1], p.line()] == \
            ["0", "sync 0", "0", "sync 0"]
    finally:
        p.close()
    reasons = "".join(line.split()[2] for line in trace.read_text().splitlines())
    assert reasons[:4] == "NNNN", reasons         # the warm-up, before any history
    if trickles:
        assert reasons[4:] == "T" * 6 + "O", reasons
    else:
        assert len(reasons) == 11 and "T" not in reasons, reasons


def test_a_trickle_waits_out_the_gaps_a_backlogged_server_leaves(probe_bin: Path, opp: Opp,
                                                               tmp_path: Path) -> None:
    """A server with requests waiting leaves gaps of host time only, the shortest in its ring
    (here 0.2 ms, beside idle gaps of 2 s).  A trickle into such a gap delays every waiting
    request, so none goes before the gap has lasted 3 x the shortest gap, at most 0.4 ms."""
    env, _, dev, _ = opp
    trace = tmp_path / "fit.txt"
    p = Probe(probe_bin, dict(env, TGS_FIT_TRACE=str(trace)), "init", WARM_UP, "ready",
              "launch:4:300:1000", "sync", "ready")
    try:
        assert [p.line(), p.line().split()[-1], p.line()] == ["init 0", "0", "ready"]
        set_history(dev, [200_000, 200_000, 2_000_000_000, 2_000_000_000], 146_000)
        go_idle(dev, ago_ns=1_000_000_000)
        go_busy(dev)
        p.go()                  # 0.3 ms kernels: they never fit the 0.15 ms prediction
        time.sleep(0.05)        # the launch waits in the gate while production is busy
        go_idle(dev)
        assert [p.line().split()[-1], p.line(), p.line()] == ["0", "sync 0", "ready"]
    finally:
        p.close()
    lines = [ln.split() for ln in trace.read_text().splitlines()]
    assert [ln[2] for ln in lines] == ["N"] * 4 + ["T"] * 4, lines    # warm-up, trickle
    ages = [int(ln[0]) - int(ln[5]) for ln in lines[4:]]
    assert min(ages) >= 400_000, ages        # 3 x 0.2 ms, capped at 0.4 ms


def test_a_first_sample_held_up_on_the_host_is_not_believed(drain_bin: Path, opp: Opp) -> None:
    """The first sampled launch is held up on the host after its start event, on an idle
    stream, has fired: here the simulator's lazy loading (TGS_SIM_LAZY_LOAD_US: 150 ms at a
    function's first launch, as the driver loads its code); in a bench, a thread at nice 19
    preempted while production warms up.  That sample measures the wait, ~150 times the 1 ms
    kernel.  Taken as the first estimate it stayed (only a clean sample replaces it, and a
    launch predicted that long rarely goes): an opportunistic PyTorch job waited 8 s,
    production's whole run.  Not believed, the next launch samples again: the estimate is the
    simulator's ~1 ns per unit from then on."""
    env, seg, dev, _ = opp
    trace = seg.path.with_name("fit-trace.txt")
    env = dict(env, TGS_SIM_LAZY_LOAD_US="150000", TGS_FIT_TRACE=str(trace))
    set_history(dev, 1_000_000_000, 950_000_000)          # gaps of 1 s: everything fits
    go_idle(dev)
    run_probe(drain_bin, env, "init", "kick:8:1000:1000:1", "sync")
    ests = [float(ln.split()[7]) for ln in trace.read_text().splitlines()]
    assert len(ests) == 8, ests
    assert ests[0] == 0.0 and ests[1] == 0.0, ests        # the first sample taught nothing
    assert all(0.5 <= e <= 2.0 for e in ests[2:]), ests   # the second's ~1 ns per unit

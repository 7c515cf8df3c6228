"""Stream capture under the shim: nothing is charged while capturing, replays are charged.

The probe (progs/capture.c) captures kernels into a graph on the simulator and replays it.  A
captured launch only adds a graph node: it must take no tokens, no in-flight budget, no gate or
FIT wait and no lane counts, and the shim must not record or query its own events in a way that
invalidates a GLOBAL-mode capture (the simulator refuses those calls as the real driver does).
Kernels: grid 1000 x block 1000 = 1e6 work units, 1 ms on the simulator.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from shim_helpers import Job, Played, finish, play_production, run_probe
from tgs.intercept import segment
from tgs.intercept.segment import SlotDefaults

pytestmark = pytest.mark.timeout(60)
K = 1000 * 1000  # one kernel's work


class Probe:
    """The capture probe, driven through its "ready" pauses."""

    def __init__(self, exe: Path, env: dict[str, str], *cmds: str) -> None:
        self.p = subprocess.Popen([str(exe), *cmds], env=env, text=True, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE)

    def lines(self, n: int) -> list[list[str]]:
        assert self.p.stdout is not None
        return [self.p.stdout.readline().split() for _ in range(n)]

    def go(self) -> None:
        assert self.p.stdin is not None
        self.p.stdin.write("go\n")
        self.p.stdin.flush()

    def close(self) -> None:
        finish(self.p)


def check_capture(line: list[str], what: str, kernels: int) -> int:
    """A successful capture of `kernels` kernel nodes; returns how long it took (ns)."""
    name, begin, launches, end, nodes, knodes, inst, ns = line
    assert name == what
    assert [begin, launches, end, inst] == ["0"] * 4, line     # EndCapture: CUDA_SUCCESS
    assert int(nodes) == int(knodes) == kernels
    return int(ns)


def test_capture_under_an_inflight_cap_is_not_charged(capture_bin: Path, job: Job) -> None:
    # a cap of one kernel: a charged launch would wait for, record and query in-flight events
    job.seg.set_defaults(SlotDefaults(inflight_cap=K))
    p = Probe(capture_bin, job.env, "init", "kick:2:2000:1000", "ready", "capture:5:1000:1000",
              "ptcapture:2:1000:1000", "fork:3:1000:1000", "ready", "replay:3", "ready")
    try:
        assert p.lines(3) == [["init", "0"], ["kick", "0"], ["ready"]]
        (slot,) = job.seg.live_slots()
        before = job.seg.counters(slot)
        assert (before.launches, before.work) == (2, 2 * 2 * K)
        p.go()
        cap, ptcap, fork, ready = p.lines(4)
        check_capture(cap, "capture", 5)
        check_capture(ptcap, "ptcapture", 2)    # the per-thread default stream
        check_capture(fork, "fork", 3)          # s2 joined through an event: not charged either
        assert ready == ["ready"]
        during = job.seg.counters(slot)
        assert (during.launches, during.work) == (before.launches, before.work)
        assert job.seg.slot(slot).inflight_work <= before.work
        p.go()
        replay, ready = p.lines(2)
        assert replay[:3] == ["replay", "0", "0"] and ready == ["ready"]
        after = job.seg.counters(slot)       # the last graph (fork: 3 kernels), 3 times
        assert (after.launches - before.launches, after.work - before.work) == (9, 9 * K)
    finally:
        p.close()


def test_capture_under_a_rate_limit_takes_no_tokens(capture_bin: Path, job: Job) -> None:
    """At 200k work units/s each 1e6-unit kernel costs 5 s of tokens: a charged capture of three
    would wait ~10 s."""
    job.seg.set_defaults(SlotDefaults(rate=200_000, burst=1000))
    p = Probe(capture_bin, job.env, "init", "kick:1:1000:1000", "ready", "capture:3:1000:1000",
              "ready", "replay:1", "ready")
    try:
        assert p.lines(3) == [["init", "0"], ["kick", "0"], ["ready"]]
        (slot,) = job.seg.live_slots()
        before = job.seg.counters(slot)
        p.go()
        cap, ready = p.lines(2)
        assert check_capture(cap, "capture", 3) < 2e9, cap
        during = job.seg.counters(slot)
        assert (during.launches, during.work, during.throttled) == (
            before.launches, before.work, before.throttled)
        job.seg.set_rate(slot, 1 << 40, 0)     # let the replay go at once
        p.go()
        replay, ready = p.lines(2)
        assert replay[:3] == ["replay", "0", "0"]
        after = job.seg.counters(slot)
        assert (after.launches - before.launches, after.work - before.work) == (3, 3 * K)
    finally:
        p.close()


def test_own_events_do_not_invalidate_a_capture_of_the_same_thread(capture_bin: Path,
                                                                    job: Job) -> None:
    """While the thread captures on one stream it launches 2 ms kernels on another under a cap
    of one kernel: those launches wait, record and query the shim's events, which in the
    default GLOBAL capture mode would be prohibited calls that invalidate the capture."""
    job.seg.set_defaults(SlotDefaults(inflight_cap=2 * K))
    # the last launch before the capture is on the stream that then captures: the in-flight
    # events must go on the other stream instead
    p = Probe(capture_bin, job.env, "init", "kick:1:1000:1000", "sync", "ready",
              "mixed:4:2000:1000", "ready")
    try:
        assert p.lines(4) == [["init", "0"], ["kick", "0"], ["sync", "0"], ["ready"]]
        (slot,) = job.seg.live_slots()
        before = job.seg.counters(slot)
        p.go()
        mixed, ready = p.lines(2)
        check_capture(mixed[:8], "mixed", 4)
        assert mixed[8] == "0" and ready == ["ready"]
        during = job.seg.counters(slot)       # only the four launches on the other stream
        assert (during.launches - before.launches, during.work - before.work) == (4, 4 * 2 * K)
        # the cap held for them: each waited for the previous 2 ms kernel
        assert int(mixed[7]) > 5_000_000, mixed
    finally:
        p.close()


@pytest.mark.parametrize("flags", [0, 2])
def test_capture_through_cu_get_proc_address_is_not_charged(capture_bin: Path, job: Job,
                                                            flags: int) -> None:
    """cudart finds the driver through cuGetProcAddress: the begin/end it gets (the _v2 and, with
    the per-thread flag, the _ptsz variants) must be the shim's, or captures go uncounted."""
    job.seg.set_defaults(SlotDefaults(inflight_cap=K))
    p = Probe(capture_bin, job.env, "init", "kick:1:1000:1000", "ready",
              f"pcapture:4:1000:1000:{flags}", "ready", "replay:2", "ready")
    try:
        assert p.lines(3) == [["init", "0"], ["kick", "0"], ["ready"]]
        (slot,) = job.seg.live_slots()
        before = job.seg.counters(slot)
        p.go()
        cap, ready = p.lines(2)
        check_capture(cap, "pcapture", 4)
        during = job.seg.counters(slot)
        assert (during.launches, during.work) == (before.launches, before.work)
        p.go()
        replay, _ = p.lines(2)
        assert replay[:3] == ["replay", "0", "0"]
        after = job.seg.counters(slot)
        assert (after.launches - before.launches, after.work - before.work) == (8, 8 * K)
    finally:
        p.close()


@pytest.fixture
def opp(tmp_path: Path, shim_env: dict[str, str]) -> Iterator[tuple[dict[str, str],
                                                                    segment.Segment, Played]]:
    """An opportunistic FIT job beside a production job played from here (its pub)."""
    seg = segment.create(tmp_path / "opp.seg", "opp", priority=segment.PRIORITY_OPPORTUNISTIC,
                         gate_flags=segment.GATE_WAIT | segment.GATE_FIT,
                         gate_max_wait_us=10_000_000)
    prod = play_production(tmp_path, seg)
    try:
        yield dict(shim_env, TGS_SEGMENT=str(seg.path)), seg, prod
    finally:
        seg.close()
        prod.close()


def test_capture_under_the_fit_gate_neither_waits_nor_samples(
        capture_bin: Path,
        opp: tuple[dict[str, str], segment.Segment, Played]) -> None:
    env, seg, prod = opp
    p = Probe(capture_bin, env, "init", "kick:1:1000:1000", "sync", "ready",
              "capture:4:1000:1000", "ready", "replay:2", "ready")
    try:
        assert p.lines(4) == [["init", "0"], ["kick", "0"], ["sync", "0"], ["ready"]]
        (slot,) = seg.live_slots()
        before = seg.counters(slot)
        assert before.launches == 1
        # production busy: a gated launch would wait up to 10 s; a captured one does not wait
        prod.pub.view.busy_seq += 1
        prod.pub.view.busy = 1
        p.go()
        cap, ready = p.lines(2)
        assert check_capture(cap, "capture", 4) < 2e9, cap
        assert ready == ["ready"]
        during = seg.counters(slot)
        assert (during.launches, during.work) == (before.launches, before.work)
        prod.pub.view.busy = 0
        p.go()
        replay, ready = p.lines(2)
        assert replay[:3] == ["replay", "0", "0"] and ready == ["ready"]
        after = seg.counters(slot)
        assert (after.launches - before.launches, after.work - before.work) == (8, 8 * K)
    finally:
        p.close()


def test_the_simulator_alone_invalidates_a_capture_on_an_illegal_sync(
        capture_bin: Path, sim_env: dict[str, str]) -> None:
    """Without the shim: the semantics the shim must not trip (a synchronize of a capturing
    stream is refused, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, and the GLOBAL capture ends
    CUDA_ERROR_STREAM_CAPTURE_INVALIDATED with no graph); a clean capture succeeds."""
    out = run_probe(capture_bin, sim_env, "init", "illegal", "capture:2:1000:1000", "replay:1")
    assert out[0] == "init 0"
    assert out[1].split() == ["illegal", "900", "2", "901", "1"]
    check_capture(out[2].split(), "capture", 2)
    assert out[3].split()[:3] == ["replay", "0", "0"]

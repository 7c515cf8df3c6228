"""GPU-side drain detection (libshim/drain.c): a production process is published idle when its
queued work has drained, not only at its synchronize calls.

The production probe runs on the simulator (1 ns per thread: grid 1000 x block 1000 is a 1 ms
kernel); the test reads its job's publish page.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from shim_helpers import finish, list_jobs, own_pub, run_probe
from tgs.intercept import devseg, segment
from tgs.intercept import pub as ipub

pytestmark = pytest.mark.timeout(90)

MS = 1000  # grid G x block 1000 = G us
DRAINED_WITHIN_S = 5.0  # generous on a loaded 2-core machine; the helper needs ~0.1 ms
# The settle tests' time scale: a loaded 2-core machine runs the probe's sleeps and the
# helper's wake-ups a millisecond or more late, half of a 2 ms gap but a tenth of a 10 ms one;
# the settle's cap (2 ms by default) scales with the gaps.  Their docstrings give times at 1.
SCALE = 5


def scaled(env: dict[str, str]) -> dict[str, str]:
    return dict(env, TGS_DRAIN_SETTLE_MAX_US=str(2000 * SCALE))


def us(v: int) -> int:
    return v * SCALE


@dataclass
class Prod:
    env: dict[str, str]
    seg: segment.Segment
    pub: ipub.Pub


@pytest.fixture
def prod(tmp_path: Path, shim_env: dict[str, str]) -> Iterator[Prod]:
    seg = segment.create(tmp_path / "prod.seg", "prod", gate_flags=segment.GATE_PUBLISH)
    dev = devseg.create_device(tmp_path, 0)
    list_jobs(dev, seg)
    pub = own_pub(seg)
    try:
        yield Prod(dict(shim_env, TGS_SEGMENT=str(seg.path)), seg, pub)
    finally:
        pub.close()
        seg.close()
        dev.close()


class Run:
    """A production probe driven line by line; killed if a test fails half-way."""

    def __init__(self, exe: Path, env: dict[str, str], *cmds: str,
                 stderr: Path | None = None) -> None:
        err = stderr.open("w") if stderr else None
        try:
            self.p = subprocess.Popen([str(exe), *cmds], env=env, text=True,
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=err)
        finally:
            if err:
                err.close()

    def expect(self, *lines: str) -> None:
        assert self.p.stdout is not None
        got = [self.p.stdout.readline().strip() for _ in lines]
        assert got == list(lines)

    def go(self) -> None:
        assert self.p.stdin is not None
        self.p.stdin.write("go\n")
        self.p.stdin.flush()

    def close(self) -> None:
        if self.p.poll() is None:
            finish(self.p)
        assert self.p.poll() is not None


@pytest.fixture
def runs() -> Iterator[list[Run]]:
    started: list[Run] = []
    try:
        yield started
    finally:
        for r in started:
            if r.p.poll() is None:
                r.p.kill()
                r.p.wait()


def wait_idle(pub: ipub.Pub, limit_s: float) -> float | None:
    """Seconds until the pub shows busy == 0, or None if it did not within limit_s."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit_s:
        if pub.busy == 0:
            return time.monotonic() - t0
        time.sleep(0.002)
    return None


def test_run_ahead_production_is_idle_once_its_work_drained(drain_bin: Path, prod: Prod,
                                                            runs: list[Run]) -> None:
    """Launches, waits on an OLDER event, never synchronizes its last launch: published idle
    after its 400 ms kernel ends (not before), busy again at its next launch."""
    r = Run(drain_bin, prod.env, "init", "kick:1:1000:1000:0", "mark:0",
            f"kick:1:{400 * MS}:1000:0", "waitold", "ready",
            f"kick:1:{400 * MS}:1000:0", "ready", "sync")
    runs.append(r)
    r.expect("init 0", "kick 0", "mark 0", "kick 0", "waitold 0", "ready")
    t0 = time.monotonic()
    assert prod.pub.busy == 1
    seq0 = int(prod.pub.view.busy_seq)
    futex0 = int(prod.pub.view.idle_futex)
    took = wait_idle(prod.pub, DRAINED_WITHIN_S)
    assert took is not None, "never published idle although the GPU drained"
    # the 400 ms kernel began at most ~1 ms before t0: idle not before it ended (less slack)
    assert time.monotonic() - t0 >= 0.3
    assert int(prod.pub.view.idle_futex) == futex0 + 1     # waiters were woken
    assert prod.pub.view.idle_since_ns > 0
    r.go()                                                 # the next launch: busy again
    r.expect("kick 0", "ready")
    assert prod.pub.busy == 1
    assert int(prod.pub.view.busy_seq) == seq0 + 1
    assert wait_idle(prod.pub, DRAINED_WITHIN_S) is not None
    r.go()
    r.expect("sync 0")
    r.close()
    assert prod.pub.busy == 0


def test_a_launch_on_its_way_to_the_driver_keeps_production_busy(drain_bin: Path, prod: Prod,
                                                                runs: list[Run]) -> None:
    """The first launch after an idle wakes the helper, and the driver may take its time
    before the kernel is queued (here the simulator's lazy load of the function, 300 ms): the
    helper must not find the stream empty meanwhile and publish idle.  Busy from the launch
    until its 1 s kernel has run."""
    env = dict(prod.env, TGS_SIM_LAZY_LOAD_US="300000", CUDA_MODULE_LOADING="LAZY")
    r = Run(drain_bin, env, "init", "ready", f"kick:1:{1000 * MS}:1000:0", "ready", "sync")
    runs.append(r)
    r.expect("init 0", "ready")
    assert prod.pub.busy == 0
    r.go()                                  # the launch: published busy, then the lazy load
    t0 = time.monotonic()
    while prod.pub.busy == 0 and time.monotonic() - t0 < DRAINED_WITHIN_S:
        time.sleep(0.001)
    seen = []
    t1 = time.monotonic()
    while time.monotonic() - t1 < 0.15:     # inside the load: the stream is still empty
        seen.append(prod.pub.busy)
        time.sleep(0.002)
    assert seen and min(seen) == 1, "published idle while the launch was still in the driver"
    r.expect("kick 0", "ready")
    t2 = time.monotonic()
    assert prod.pub.busy == 1               # the kernel runs for 1 s
    assert wait_idle(prod.pub, DRAINED_WITHIN_S + 1) is not None
    assert time.monotonic() - t2 >= 0.5
    r.go()
    r.expect("sync 0")
    r.close()


def test_a_fast_path_launch_that_raced_the_helper_makes_production_busy_again(
        drain_bin: Path, prod: Prod, runs: list[Run], tmp_path: Path) -> None:
    """A launch while busy takes the fast path, which tail-jumps to the driver: nothing marks
    it in flight.  Here its driver call takes 30 ms (the simulator's lazy load of a second
    kernel), the 1 ms kernel before it ends meanwhile and the helper publishes idle; once the
    launch's 1 s kernel is on the stream, the helper's watch sees it and production is busy
    again while it runs.  That idle was none, so the settle does not learn from it."""
    env = dict(prod.env, TGS_SIM_LAZY_LOAD_US="30000", CUDA_MODULE_LOADING="LAZY",
               TGS_LOG_LEVEL="debug")
    log = tmp_path / "stderr.txt"
    r = Run(drain_bin, env, "init", f"kick:1:{1 * MS}:1000:0", f"other:{1000 * MS}", "ready",
            "sync", stderr=log)
    runs.append(r)
    r.expect("init 0", "kick 0", "other 0", "ready")
    t0 = time.monotonic()
    busy = False
    while not busy and time.monotonic() - t0 < 0.4:    # the watch looks within ~2 ms
        busy = prod.pub.busy == 1
        time.sleep(0.002)
    assert busy, "idle while the raced launch's kernel runs"
    assert wait_idle(prod.pub, DRAINED_WITHIN_S + 1) is not None
    assert time.monotonic() - t0 >= 0.5                 # not before the 1 s kernel ended
    r.go()
    r.expect("sync 0")
    r.close()
    text = log.read_text()
    # a host stalled past the 1 ms kernel before the second launch makes a real idle instead
    # (published, then ended by that launch's slow path): the settle learns from that one.  A
    # drain the settle held back (the launch came during it) is learned either way.
    if "1 idles taken back" in text:
        assert "0 of them published idles" in text, text


def test_without_drain_detection_run_ahead_stays_busy(drain_bin: Path, prod: Prod,
                                                      runs: list[Run]) -> None:
    """TGS_DRAIN=0 (the benchmark knob): busy until the synchronize, as before."""
    r = Run(drain_bin, dict(prod.env, TGS_DRAIN="0"), "init", f"kick:1:{50 * MS}:1000:0",
            "ready", "sync")
    runs.append(r)
    r.expect("init 0", "kick 0", "ready")
    assert wait_idle(prod.pub, 0.6) is None                # 50 ms kernel long done
    r.go()
    r.expect("sync 0")
    assert wait_idle(prod.pub, DRAINED_WITHIN_S) is not None
    r.close()


def test_two_streams_idle_only_after_both_drained(drain_bin: Path, prod: Prod,
                                                  runs: list[Run]) -> None:
    """A long kernel on stream 1, then a short one on stream 2 (the last launch): idle only
    after the long one ends too."""
    r = Run(drain_bin, prod.env, "init", f"kick:1:{400 * MS}:1000:1", "kick:1:1000:1000:2",
            "ready", "sync")
    runs.append(r)
    r.expect("init 0", "kick 0", "kick 0", "ready")
    t0 = time.monotonic()
    assert wait_idle(prod.pub, DRAINED_WITHIN_S) is not None
    assert time.monotonic() - t0 >= 0.3
    r.go()
    r.expect("sync 0")
    r.close()


def test_more_streams_than_tracked_fall_back_to_synchronize(drain_bin: Path, prod: Prod,
                                                            runs: list[Run]) -> None:
    """Nine streams (the set holds eight): no drain detection until the synchronize."""
    kicks = [f"kick:1:{5 * MS}:1000:{i}" for i in range(1, 10)]
    r = Run(drain_bin, prod.env, "init", *kicks, "ready", "sync")
    runs.append(r)
    r.expect("init 0", *(["kick 0"] * 9), "ready")
    assert wait_idle(prod.pub, 0.6) is None                # 45 ms of work long done
    r.go()
    r.expect("sync 0")
    assert prod.pub.busy == 0
    r.close()


def test_capture_under_publish_with_queued_work_succeeds(capture_bin: Path, prod: Prod) -> None:
    """While the helper waits on production's queued work, a GLOBAL-mode capture on the same
    stream gets exactly its own nodes (no tail recorded into it, no unsafe call invalidating
    it), replays, and production goes idle after the drain."""
    lines = run_probe(capture_bin, prod.env, "init", f"kick:1:{300 * MS}:1000",
                      "capture:4:1:32", "replay:1", "sync")
    assert lines[1] == "kick 0"
    f = lines[2].split()
    assert f[0] == "capture" and f[1:7] == ["0", "0", "0", "4", "4", "0"], lines[2]
    assert lines[3].split()[1:3] == ["0", "0"], lines[3]
    assert prod.pub.busy == 0


def test_capture_while_idle_then_drain(capture_bin: Path, prod: Prod, runs: list[Run]) -> None:
    """Busy, capture, then left with queued work and no synchronize: idle after the drain."""
    r = Run(capture_bin, prod.env, "init", "capture:4:1:32", f"kick:1:{100 * MS}:1000", "ready",
            "sync")
    runs.append(r)
    assert r.p.stdout is not None
    assert r.p.stdout.readline().split()[1] == "0"
    cap = r.p.stdout.readline().split()
    assert cap[1:7] == ["0", "0", "0", "4", "4", "0"], cap
    r.expect("kick 0", "ready")
    assert wait_idle(prod.pub, DRAINED_WITHIN_S) is not None
    r.go()
    r.expect("sync 0")
    r.close()


def test_fork_while_the_helper_waits_and_exit_do_not_hang(drain_bin: Path, prod: Prod,
                                                         runs: list[Run]) -> None:
    """The parent is busy with its helper waiting on the GPU; a forked child (no helper thread
    there: its state is reset, it would be created again at its first busy launch) exits
    cleanly at once, and the parent is still published idle after its own drain."""
    r = Run(drain_bin, prod.env, "init", f"kick:1:{300 * MS}:1000:0", "fork:none", "fork:none",
            "ready", "sync")
    runs.append(r)
    t0 = time.monotonic()
    r.expect("init 0", "kick 0", "fork 0", "fork 0", "ready")
    assert time.monotonic() - t0 < 5
    assert wait_idle(prod.pub, DRAINED_WITHIN_S) is not None
    r.go()
    r.expect("sync 0")
    r.close()


def test_exit_with_work_queued_does_not_hang(drain_bin: Path, prod: Prod) -> None:
    """Exit while the helper waits on a 2 s kernel: the process ends (the helper is asked to
    stop and waited for a bounded time only); its busy count goes back at detach."""
    t0 = time.monotonic()
    lines = run_probe(drain_bin, prod.env, "init", f"kick:1:{2000 * MS}:1000:0", "quit",
                      timeout=30)
    assert lines == ["init 0", "kick 0"]
    assert time.monotonic() - t0 < 25
    assert prod.pub.busy == 0


@pytest.mark.parametrize("settle_us", [None, "0"])
def test_micro_gaps_of_a_step_stop_being_published(drain_bin: Path, prod: Prod,
                                                   settle_us: str | None) -> None:
    """Each run-ahead step leaves the GPU idle twice: 0.6 ms in the middle (host time between
    two launches) and 6 ms at its end.  The adaptive settle learns that the short ones are not
    gaps worth publishing: over 60 steps far fewer than the 120 drains are published.  With
    TGS_DRAIN_SETTLE_US=0 (no settle) every drain is published: the control."""
    env = scaled(prod.env if settle_us is None else dict(prod.env, TGS_DRAIN_SETTLE_US=settle_us))
    run_probe(drain_bin, env, "init", f"steps:60:{us(200)}:{us(800)}:{us(6000)}", "sync")
    published = int(prod.pub.view.busy_seq)
    if settle_us is None:
        assert published <= 60 * 1.4, published
    else:
        assert published >= 60 * 1.8, published


@pytest.mark.parametrize("vary", [False, True])
def test_a_step_that_ends_at_its_usual_launch_count_is_published_without_the_settle(
        drain_bin: Path, prod: Prod, vary: bool) -> None:
    """Steps of the same launches: once the settle has learnt the micro-gaps (still not
    published), the drain after a step's last launch is published at once, without the settle
    (the debug line at exit counts them).  Steps whose launch counts vary (1, 2, 3 launches
    after the micro-gap, in turn) never agree on a usual end: every drain waits out the settle."""
    env = dict(scaled(prod.env), TGS_LOG_LEVEL="debug")
    steps = f"steps:60:{us(200)}:{us(800)}:{us(6000)}:{int(vary)}"
    p = subprocess.run([str(drain_bin), "init", steps, "sync"], env=env, capture_output=True,
                       text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr
    line = next(ln for ln in p.stderr.splitlines() if "idles published" in ln)
    idles, early = (int(w) for w in line.split() if w.isdigit())
    assert idles <= 60 * 1.4, line      # the micro-gaps still are not published
    cost = next(ln for ln in p.stderr.splitlines() if "rounds in" in ln)
    assert int(cost.split()[5]) >= idles, cost      # a round at least per idle published
    if vary:
        assert early == 0, line
    else:
        assert early >= 30, line        # all but the first steps (learning)


def test_micro_gaps_published_at_a_usual_end_do_not_lock_the_rule_in(drain_bin: Path,
                                                                       prod: Prod) -> None:
    """Steps whose two halves are both real gaps (3 ms each) agree on one launch per busy
    period; when the step changes so that the first gap is a micro-gap (0.8 ms against 6 ms),
    the first micro-gap published at that usual end makes the rule forget its counts, the
    settle learnt from it hides the next ones, and the rule agrees again on whole steps.
    Otherwise every micro-gap would stay at the usual end and be published: 40 + 80."""
    run_probe(drain_bin, scaled(prod.env), "init", f"steps:20:{us(200)}:{us(3000)}:{us(3000)}",
              f"steps:40:{us(200)}:{us(800)}:{us(6000)}", "sync")
    published = int(prod.pub.view.busy_seq)
    assert published <= 40 + 40 * 1.4, published


@pytest.mark.parametrize("poll_us", [None, "200"])
def test_gaps_after_a_synchronize_do_not_make_the_step_gaps_look_micro(
        drain_bin: Path, prod: Prod, poll_us: str | None) -> None:
    """A run-ahead loop that reads its loss every 4 steps: each step leaves the GPU idle 1.5 ms,
    and every 4th gap lasts 12 ms (the host synchronized, then logs), most of the idle time.
    The long gaps began in a synchronize, so they do not teach the settle that the 1.5 ms gaps
    are micro-gaps: nearly every gap is published (the drain helper or the synchronize; 80 of
    80 here).  Learnt from the 12 ms gaps, the settle would hide the short ones: 48.  The
    helper finds the busy periods woken by their first launch (the default) or polling
    (TGS_DRAIN_POLL_US=200) alike."""
    env = scaled(prod.env) if poll_us is None else dict(scaled(prod.env), TGS_DRAIN_POLL_US=poll_us)
    run_probe(drain_bin, env, "init", f"loss:80:{us(1000)}:{us(2500)}:4:{us(12000)}",
              "sync")
    published = int(prod.pub.view.busy_seq)
    assert published >= 80 * 0.75, published



def test_a_settle_learnt_from_a_warm_up_falls_back_to_the_steps(drain_bin: Path,
                                                                 prod: Prod) -> None:
    """A warm-up's pauses (4 x ~59 ms) make the first 1.5 ms step gaps look like micro-gaps,
    and the settle rises over them.  The drains it holds back join its ring, so the pauses
    leave it after 32 drains and the settle falls back: most of the 120 step gaps are
    published (94 here).  Judged by published drains only, the settle stayed over the step
    gaps, which it hid, so nothing moved it again: 2 of them were published."""
    run_probe(drain_bin, scaled(prod.env), "init", f"loss:4:{us(1000)}:{us(60000)}:1000:0",
              f"loss:120:{us(1000)}:{us(2500)}:1000:0", "sync")
    published = int(prod.pub.view.busy_seq)
    assert published >= 4 + 120 * 0.5, published

"""The FIT trace accounting (bench/fit_accounting.py) on a synthetic trace, and the busy
sampler's first sample (no processes)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from tgs.bench import fit_accounting as FA
from tgs.testbed.gpu import Sampler

pytestmark = pytest.mark.timeout(20)
MS = 1_000_000


def _line(now: int, reason: str, seq: int, idle: int, pred: int, run_ns: int, q_end: int,
          last_gap: int, busy: int = 0) -> str:
    # now waited reason seq busy idle_since gap_end est work queue_end budget last_gap
    return (f"{now} 0 {reason} {seq} {busy} {idle} {idle + pred} 1.0000 {run_ns} {q_end} "
            f"20000000 {last_gap}")


def _cycle(t0: int, seq: int, kernels: int, last_gap: int) -> list[str]:
    """A 1.8 ms gap starting at t0 (6 ms cycle), `kernels` 0.5 ms launches from 10 us in."""
    out = []
    for k in range(kernels):
        now = t0 + 10_000 + k * 1000
        out.append(_line(now, "F", seq, t0, int(1.7 * MS), MS // 2,
                         t0 + 10_000 + (k + 1) * MS // 2, last_gap))
    return out


def test_accounting_per_gap_and_runs(tmp_path: Path) -> None:
    lines = []
    for i in range(10):                       # run 1: 3 kernels in every 1.8 ms gap
        lines += _cycle(100 * MS + i * 6 * MS, 5 + i, 3, int(1.8 * MS))
    for i in range(5):                        # run 2, 5 s later, a new production (seq back)
        lines += _cycle(5_000 * MS + i * 6 * MS, 1 + i, 2, int(1.8 * MS))
    trace = tmp_path / "t.txt"
    trace.write_text("\n".join(lines) + "\n")
    runs = FA.parse(trace)
    assert [len(r) for r in runs] == [30, 10]
    gs, cycles = FA.gaps(runs[0])
    assert len(gs) == 9                       # the last gap's length is not known yet
    g = gs[0]
    assert (g.length, g.pred, g.reaction, g.kernels) == (int(1.8 * MS), int(1.7 * MS), 10_000, 3)
    assert g.work == pytest.approx(1.5 * MS)
    assert g.tail == int(1.8 * MS) - (10_000 + 3 * MS // 2)
    assert set(cycles) == {6 * MS}
    res = CliRunner().invoke(FA.cli, [str(trace), "--prod-gpu-ms", "4", "--run", "1"])
    assert res.exit_code == 0, res.output
    assert "run 1 of 2" in res.output and "run 2" not in res.output
    # GPU-side idle 6 - 4 = 2 ms, 1.5 ms queued per gap
    assert "steady-state harvest 0.750" in res.output


class _Late(Sampler):
    """A counter that appears only once `ready` is set, as the simulator's state file does."""

    def __init__(self) -> None:
        super().__init__(every=1.0)
        self.ready = threading.Event()
        self.calls = 0

    def _sample(self) -> None:
        self.calls += 1
        if self.ready.is_set():
            self._add(time.monotonic(), 0.0, {})


def test_sampler_looks_often_until_its_first_sample() -> None:
    s = _Late()
    s.start()
    try:
        time.sleep(0.15)
        assert s.calls >= 3                   # not once per `every` (1 s) while nothing is there
        s.ready.set()
        deadline = time.monotonic() + 2.0
        while not s.device and time.monotonic() < deadline:
            time.sleep(0.005)
        assert s.device
        seen = s.calls
        time.sleep(0.3)
        assert s.calls <= seen + 1            # then at its own pace
    finally:
        s.stop()

"""The simulator's kernel-trace accounting (bench/wait_accounting.py) on synthetic traces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from tgs.bench import wait_accounting as WA

pytestmark = pytest.mark.timeout(20)
US = 1_000


def _k(pid: int, queued: int, started: int, ended: int, dev: int) -> str:
    return f"{pid} {queued} {started} {ended} {dev}"


def _fit(now: int, verdict: str, pid: int = 2) -> str:
    # now waited reason seq busy idle_since gap_end est work queue_end budget last_gap pid
    return f"{now} 0 {verdict} 7 0 0 0 1.0000 1 0 0 0 {pid}"


def test_waits_behind_others_not_behind_own_queue() -> None:
    lines = [
        _k(2, 0, 0, 300 * US, 300 * US),             # the neighbour: 0-300 us
        _k(1, 100 * US, 300 * US, 400 * US, 100 * US),  # a return that waited 200 us
        _k(1, 150 * US, 400 * US, 500 * US, 100 * US),  # queued behind its own: no wait
        _k(1, 900 * US, 900 * US, 1000 * US, 100 * US),  # a return on an idle device
        "garbage line", "1 2 3",
    ]
    waits = {w.pid: w for w in WA.account(WA.parse(lines))}
    p = waits[1]
    assert (p.kernels, p.returns, p.delayed, p.delayed_returns) == (3, 2, 1, 1)
    assert p.wait_ms == pytest.approx(0.2)
    assert p.wait_us == [pytest.approx(200.0)]
    assert p.device_ms == pytest.approx(0.3)
    assert waits[2].delayed == 0
    assert p.by_verdict_ms == {}                     # no FIT trace given


def test_waits_split_by_the_neighbours_verdicts() -> None:
    lines = [
        _k(2, 10 * US, 10 * US, 110 * US, 100 * US),     # went with a trickle verdict
        _k(2, 1500 * US, 1500 * US, 1600 * US, 100 * US),  # not gated (no FIT line near)
        _k(1, 50 * US, 110 * US, 200 * US, 90 * US),     # waited 60 us behind the first
        _k(1, 1550 * US, 1600 * US, 1700 * US, 100 * US),  # waited 50 us behind the second
        _k(1, 1700 * US, 1700 * US, 1800 * US, 100 * US),
        _k(2, 1750 * US, 1800 * US, 1900 * US, 100 * US),  # waited 50 us behind pid 1's
    ]
    # pid 1's FIT line (1.45 ms) names pid 1's kernels only: pid 2's at 1.5 ms stays "-" ...
    fit = WA.parse_fit([_fit(5 * US, "T"), _fit(1450 * US, "S", pid=1), "short line"])
    waits = {w.pid: w for w in WA.account(WA.parse(lines), fit)}
    assert waits[1].by_verdict_ms == {"T": pytest.approx(0.06), "-": pytest.approx(0.05)}
    assert waits[1].wait_ms == pytest.approx(0.11)
    # ... and pid 2 waited behind pid 1's kernel, which went with pid 1's own verdict
    assert waits[2].by_verdict_ms == {"S": pytest.approx(0.05)}


def test_cli_table_json_and_usage_error(tmp_path: Path) -> None:
    trace = tmp_path / "k.txt"
    trace.write_text("\n".join([_k(2, 0, 0, 300 * US, 300 * US),
                                _k(1, 100 * US, 300 * US, 400 * US, 100 * US)]) + "\n")
    r = CliRunner().invoke(WA.main, [str(trace)])
    assert r.exit_code == 0, r.output
    assert "| 1 | 1 | 0.1 | 1 | 1 (1) | 0.2 |" in r.output
    r = CliRunner().invoke(WA.main, [str(trace), "--json"])
    docs = {d["pid"]: d for d in json.loads(r.output)["processes"]}
    assert docs[1]["wait_us_max"] == pytest.approx(200.0)
    empty = tmp_path / "e.txt"
    empty.write_text("no kernels here\n")
    r = CliRunner().invoke(WA.main, [str(empty)])
    assert r.exit_code == 2 and "no kernel lines" in r.output


def test_a_servers_slow_requests_split_into_gpu_wait_and_host(tmp_path: Path) -> None:
    MS = 1_000_000
    lines = [
        _k(1, 0, 0, 2 * MS, 2 * MS),                  # request A: 2 ms on the GPU ...
        _k(2, 2 * MS, 2 * MS, 3 * MS, MS),            # ... (the neighbour's 1 ms)
        _k(1, 2 * MS, 3 * MS, 4 * MS, MS),            # ... 1 ms waiting, then 1 ms more
        _k(1, 10 * MS, 10 * MS, 11 * MS, MS),         # request B: 1 ms on the GPU, 9 ms host
    ]
    kernels = WA.parse(lines)
    steps = [(4e-3, 4.0), (20e-3, 10.0)]           # (reply s, latency ms)
    reqs = WA.explain(kernels[1], steps)
    b, a = reqs                                       # slowest first
    assert (b.latency_ms, b.device_ms, b.wait_ms) == (10.0, pytest.approx(1.0), 0.0)
    assert b.host_ms == pytest.approx(9.0)
    assert (a.device_ms, a.wait_ms, a.host_ms) == (pytest.approx(3.0), pytest.approx(1.0),
                                                    pytest.approx(0.0))
    trace = tmp_path / "k.txt"
    trace.write_text("\n".join(lines) + "\n")
    record = tmp_path / "run.json"
    record.write_text(json.dumps({"jobs": {"prod": {"pid": 1, "summary": {"steps": steps}},
                                           "opp": {"pid": 2, "summary": {}}}}))
    r = CliRunner().invoke(WA.main, [str(trace), "--requests", str(record)])
    assert r.exit_code == 0, r.output
    assert "pid 1: 2 requests" in r.output and "| 0.020 | 10.0 | 1.0 | 0.00 | 9.0 |" in r.output
    record.write_text(json.dumps({"jobs": {"prod": {"pid": 9, "summary": {"steps": steps}}}}))
    r = CliRunner().invoke(WA.main, [str(trace), "--requests", str(record)])
    assert r.exit_code == 2 and "no job with request times" in r.output

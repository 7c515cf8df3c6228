"""Paired tail latency (bench/paired.py): production's steps beside the opportunistic job and
while it pauses, from one run; the paired scenarios T7-T11 that produce them."""

from __future__ import annotations

import math

import pytest
from tgs.bench import paired
from tgs.bench import scenarios as SC
from tgs.bench import torch_scenarios as T

# the other job pauses over [2, 3] and [4, 5]; the window is [1, 6]
PAUSES = [(2.0, 3.0), (4.0, 5.0)]
WINDOW = (1.0, 6.0)


def _step(end: float, ms: float) -> list[float]:
    return [end, ms]


def test_a_step_counts_for_a_half_only_wholly_inside_it_and_past_the_margin() -> None:
    steps = [
        _step(1.5, 10), _step(1.99, 10),          # on: before the first pause
        _step(2.05, 10),                          # straddles the pause's start: neither
        _step(2.08, 10),                          # paused but within the margin: neither
        _step(2.5, 20), _step(2.99, 20),          # off
        _step(3.05, 10),                          # straddles the end: neither
        _step(3.09, 10),                          # on, but within the margin after: neither
        _step(3.5, 10),                           # on
        _step(4.6, 20),                           # off (second pause)
        _step(0.9, 10), _step(6.5, 10),           # outside the window: neither
    ]
    on, off = paired.split_steps(steps, PAUSES, WINDOW)
    assert on == [10, 10, 10] and off == [20, 20, 20]


def test_quantiles_and_ratios_of_both_halves() -> None:
    steps = [_step(1.2 + i * 0.007, 10.0) for i in range(100)]        # on: 10 ms
    steps += [_step(2.2 + i * 0.007, 8.0) for i in range(100)]        # off: 8 ms
    m = paired.paired(steps, PAUSES, WINDOW)
    assert m is not None
    assert m["on"]["n"] == 100 and m["off"]["n"] == 100
    assert m["p50_on_vs_off"] == pytest.approx(1.25) and m["p99_on_vs_off"] == pytest.approx(1.25)
    assert m["rate_on_vs_off"] == pytest.approx(0.8)          # 8 ms steps paused, 10 ms beside
    assert paired.paired(steps, [], WINDOW) is None          # no pauses: nothing paired
    assert paired.paired([], PAUSES, WINDOW) is None
    only_on = [s for s in steps if s[0] < 2.0]
    assert paired.paired(only_on, PAUSES, WINDOW) is None     # one half empty


def test_a_servers_requests_pair_by_arrival_and_report_mean_latency_not_rate() -> None:
    # a request lasts from its arrival to its reply: one that arrived before the pause and
    # was answered inside it belongs to neither half
    steps = [_step(1.5, 12.0), _step(1.9, 12.0),                    # on: 12 ms
             _step(2.15, 200.0),                                    # arrived at 1.95: neither
             _step(2.5, 6.0), _step(2.8, 6.0)]                      # off: 6 ms
    m = paired.paired(steps, PAUSES, WINDOW, server=True)
    assert m is not None and m["on"]["n"] == 2 and m["off"]["n"] == 2
    assert "rate_on_vs_off" not in m                        # a server's rate is its arrivals'
    assert m["mean_on_vs_off"] == pytest.approx(2.0) and m["p99_on_vs_off"] == pytest.approx(2.0)
    md = paired.markdown({"T9": {"policies": {"adaptive": {"paired": m}}}})
    assert "| T9 | adaptive | 2 / 2 | 12.00 / 6.00 |" in md and "| mean 2.000 | 2.000 |" in md


def test_runs_pool_into_one_longer_run_of_both_halves() -> None:
    # three runs of 100 requests a half: the second run's two slow requests are its p99, two
    # in the pooled 300 are under theirs
    runs = []
    for r in range(3):
        steps = [_step(1.2 + i * 0.007, 10.0 + (r == 1 and i < 2) * 90) for i in range(100)]
        steps += [_step(2.2 + i * 0.007, 10.0) for i in range(100)]
        m = paired.paired(steps, PAUSES, WINDOW, server=True)
        assert m is not None and len(m["on_ms"]) == 100 and len(m["off_ms"]) == 100
        runs.append(m)
    assert runs[1]["p99_on_vs_off"] == pytest.approx(10.0)      # its 100 ms requests
    p = paired.pool(runs)
    assert p is not None and p["runs"] == 3 and p["on"]["n"] == 300 and p["off"]["n"] == 300
    assert p["p99_on_vs_off"] == pytest.approx(1.0)            # 2 in 300: under the p99
    assert p["mean_on_vs_off"] == pytest.approx(1.06)          # server: latency, not rate
    assert "on_ms" not in p                                    # the pooled figure only
    assert paired.pool([runs[0], {"p99_on_vs_off": 1.0}]) is None  # a run without its halves
    assert paired.pool([]) is None


def test_pauses_come_from_the_jobs_pause_lines_and_the_table_shows_them() -> None:
    events = [{"type": "alloc", "bytes": 1}, {"type": "pause", "from_s": 2.0, "to_s": 3.0},
              {"type": "pause", "from_s": 4}]                 # malformed: left out
    assert paired.pauses_of(events) == [(2.0, 3.0)]
    p = {"on": {"n": 5, "p50": 1.0, "p99": 2.0, "p999": 3.0},
         "off": {"n": 6, "p50": 1.0, "p99": 1.0, "p999": 1.0},
         "rate_on_vs_off": 0.95, "p50_on_vs_off": 1.0, "p99_on_vs_off": 2.0,
         "p999_on_vs_off": 3.0}
    md = paired.markdown({"T7": {"policies": {"adaptive": {"paired": p},
                                              "none": {"paired": None}}}})
    assert "| T7 | adaptive | 5 / 6 | 1.00 / 1.00 | 2.00 / 1.00 | 3.00 / 1.00 | 0.950 | " \
           "1.000 | 2.000 | 3.000 |" in md
    assert "| none |" not in md
    assert paired.markdown({"T1": {"policies": {"adaptive": {}}}}) == ""


@pytest.mark.parametrize("key,like", [("T7", "T1"), ("T8", "T2"), ("T9", "T4"), ("T10", "T5"),
                                      ("T11", "T6")])
def test_paired_scenarios_are_their_pairs_with_a_pausing_opportunistic_job(key: str,
                                                                          like: str) -> None:
    sc, base = SC.build(key, SC.FULL, "adaptive"), SC.build(like, SC.FULL, "adaptive")
    (prod,), (opp,) = sc.production, sc.opportunistic
    (bprod,), (bopp,) = base.production, base.opportunistic
    assert prod.torch is not None and opp.torch is not None
    assert prod.torch.get("step_times") is True and opp.torch.get("duty") == T.DUTY
    assert {k: v for k, v in prod.torch.options if k != "step_times"} == \
        dict(bprod.torch.options if bprod.torch else ())
    assert {k: v for k, v in opp.torch.options if k != "duty"} == \
        dict(bopp.torch.options if bopp.torch else ())
    assert math.isclose(prod.seconds, 2 * bprod.seconds)     # as many steps in each half
    assert sc.latency is base.latency                        # a server's tails stay reported

"""The evaluation's metric functions on synthetic series (no processes)."""

from __future__ import annotations

import math

import pytest
from tgs.bench import metrics as M
from tgs.bench.report import markdown

pytestmark = pytest.mark.timeout(20)


def _cumulative(rate_of_t, t_end: float, dt: float = 0.05) -> list[tuple[float, float]]:
    """A cumulative iteration count sampled every dt for a rate function of time."""
    out, total, t = [(0.0, 0.0)], 0.0, 0.0
    while t < t_end - 1e-9:
        total += rate_of_t(t + dt / 2) * dt
        t += dt
        out.append((t, total))
    return out


def test_interp_and_delta_are_linear_and_clamped() -> None:
    s = [(0.0, 0.0), (1.0, 10.0), (3.0, 30.0)]
    assert M.interp(s, 0.5) == pytest.approx(5.0)
    assert M.interp(s, 2.0) == pytest.approx(20.0)
    assert M.interp(s, -1.0) == 0.0 and M.interp(s, 9.0) == 30.0
    assert M.delta(s, 0.5, 2.0) == pytest.approx(15.0)
    assert M.interp([], 1.0) == 0.0


def test_rate_series_recovers_a_constant_rate_at_window_midpoints() -> None:
    rates = M.rate_series(_cumulative(lambda t: 100.0, 3.0), 0.25)
    assert rates and all(r == pytest.approx(100.0) for _, r in rates)
    assert rates[0][0] == pytest.approx(0.125)       # stamped at the window's midpoint


def test_reaction_of_an_instant_step_is_under_half_a_window() -> None:
    cum = _cumulative(lambda t: 100.0 if t < 2.0 else 300.0, 6.0)
    r = M.reaction_time(M.rate_series(cum, 0.25), 2.0, 6.0)
    assert r is not None and r.settled
    assert r.steady == pytest.approx(300.0)
    assert 0.0 <= r.seconds <= 0.125 + 0.05


def test_reaction_of_a_slow_ramp_is_the_ramp() -> None:
    # throughput climbs linearly from 100 to 300 over 1.5 s after the change at t = 2
    def rate(t: float) -> float:
        return 100.0 if t < 2.0 else min(300.0, 100.0 + 200.0 * (t - 2.0) / 1.5)
    r = M.reaction_time(M.rate_series(_cumulative(rate, 8.0), 0.25), 2.0, 8.0)
    assert r is not None and r.settled
    # within 5 % of 300 from 100 + 200 x / 1.5 >= 285, i.e. x >= 1.39 s (window smooths a bit)
    assert 1.2 <= r.seconds <= 1.6


def test_reaction_never_settling_is_censored_at_the_interval() -> None:
    # oscillates +-20 % for the whole interval: never within 5 % for good
    def rate(t: float) -> float:
        return 200.0 * (1.2 if int(t * 2) % 2 else 0.8)
    r = M.reaction_time(M.rate_series(_cumulative(rate, 5.0), 0.25), 1.0, 5.0)
    assert r is not None and not r.settled and r.seconds == pytest.approx(4.0)


def test_reaction_to_a_target_that_is_never_reached() -> None:
    cum = _cumulative(lambda t: 50.0, 4.0)
    rates = M.rate_series(cum, 0.25)
    r = M.reaction_time(rates, 1.0, 4.0, target=100.0)
    assert r is not None and not r.settled
    ok = M.reaction_time(rates, 1.0, 4.0, target=51.0)
    assert ok is not None and ok.settled and ok.seconds == 0.0


def test_reaction_without_data_is_none() -> None:
    assert M.reaction_time([], 0.0, 1.0) is None
    assert M.reaction_time([(0.5, 1.0)], 0.0, 1.0) is None


def test_harvest_is_busy_over_idle_left() -> None:
    # production alone used 70 % of a 10 s window: 3 s idle; opportunistic got 2.4 s
    assert M.harvest(2.4, 10.0, 0.7) == pytest.approx(0.8)
    assert M.harvest(4.5, 10.0, 0.7) == pytest.approx(1.5)     # took production's time too
    assert M.harvest(1.0, 10.0, 1.0) == 0.0                    # no idle time to harvest
    assert M.harvest(-1.0, 10.0, 0.5) == 0.0


def test_jain_index_bounds() -> None:
    assert M.jain([1.0, 1.0, 1.0]) == pytest.approx(1.0)
    assert M.jain([1.0, 0.0, 0.0]) == pytest.approx(1 / 3)
    assert M.jain([]) == 1.0 and M.jain([0.0, 0.0]) == 1.0


def test_weighted_fairness_uses_weights() -> None:
    jain, dev = M.weighted_fairness([1.0, 1.0, 2.0], [1, 1, 2])
    assert jain == pytest.approx(1.0) and dev == pytest.approx(0.0)
    jain, dev = M.weighted_fairness([1.0, 1.0, 1.0], [1, 1, 2])
    assert jain < 0.95
    assert dev == pytest.approx(0.5 - 1 / 3)        # the weight-2 job got 1/3 instead of 1/2
    with pytest.raises(ValueError):
        M.weighted_fairness([1.0], [1, 2])


def test_ratio_guards_zero() -> None:
    assert M.ratio(1.0, 2.0) == 0.5
    assert math.isnan(M.ratio(1.0, 0.0))


def test_markdown_table_marks_unsettled_reactions() -> None:
    summary = {"S3": {"title": "t", "baseline": {"gpu_util": 0.5, "reaction": None},
                      "policies": {"tgs": {
                          "ran_s": 20.0, "prod_vs_solo": 1.0, "p99_vs_solo": 1.0,
                          "harvest": 0.0, "gpu_util": 0.5, "opp_vs_solo": 0.0,
                          "reaction": {"seconds": 0.1, "settled": True, "each": [0.1]},
                          "opp_reaction": {"seconds": 5.0, "settled": False, "each": [5.0]}}}}}
    text = markdown(summary)
    assert "| S3 | tgs | 20 | 1.00 | 1.00 | 0.00 | 0.50 | 0.00 | 0.10 | >=5.0 | - |" in text


def test_reaction_ignores_a_dip_long_after_settling() -> None:
    # steps to 300 at t = 2 and stays, but for a 0.25 s pause at t = 4.5 (a measurement probe)
    def rate(t: float) -> float:
        if t < 2.0:
            return 100.0
        return 0.0 if 4.5 <= t < 4.75 else 300.0
    r = M.reaction_time(M.rate_series(_cumulative(rate, 8.0), 0.25), 2.0, 8.0)
    assert r is not None and r.settled and r.seconds <= 0.2

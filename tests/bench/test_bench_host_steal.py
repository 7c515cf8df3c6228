"""The hypervisor's share of the CPUs during a run (bench/host_steal.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tgs.bench import host_steal as HS

pytestmark = pytest.mark.timeout(20)

STAT = """cpu  100 0 50 1000 5 0 2 {steal} 0 0
cpu0 50 0 25 500 2 0 1 {half} 0 0
cpu1 50 0 25 500 3 0 1 {half} 0 0
intr 12345
"""


def test_parse_reads_the_aggregate_steal_and_counts_cpus() -> None:
    assert HS.parse(STAT.format(steal=40, half=20)) == (40, 2)
    assert HS.parse("cpu  1 2 3 4\ncpu0 1 2 3 4\n") is None      # an old kernel: no steal
    assert HS.parse("") is None


def test_share_over_the_interval(tmp_path: Path) -> None:
    before = HS.Reading(10.0, 100, 2)
    after = HS.Reading(20.0, 100 + 2 * 100, 2)                # 2 s stolen at 100 ticks/s
    assert HS.share(before, after, ticks_per_s=100) == pytest.approx(0.1)   # of 2 CPUs x 10 s
    assert HS.share(before, None) is None
    assert HS.share(after, before) is None                    # no time passed: no figure
    f = tmp_path / "stat"
    f.write_text(STAT.format(steal=7, half=3))
    r = HS.read(f)
    assert r is not None and (r.steal_ticks, r.cpus) == (7, 2)
    assert HS.read(tmp_path / "missing") is None


def test_markdown_names_the_runs_with_notable_steal() -> None:
    scen = {"T10": {"baseline": {"host_steal": {"solo:prod": 0.004, "solo:opp": None}},
                    "policies": {"adaptive": {"host_steal": 0.066}, "none": {"host_steal": 0.01}}}}
    line = HS.markdown(scen)
    assert "T10 adaptive 6.6 %" in line and "solo:prod" not in line and "none" not in line
    scen["T10"]["policies"]["adaptive"]["host_steal"] = 0.005
    assert "under 2 % in every run (at most 1.0 %)" in HS.markdown(scen)
    assert HS.markdown({"S1": {"baseline": {}, "policies": {"adaptive": {}}}}) == ""

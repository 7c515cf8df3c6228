"""`tgs-bench --repeat N`: each figure's runs, median and spread (no processes)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from tgs.bench import repeat
from tgs.bench.main import cli

pytestmark = pytest.mark.timeout(20)


def _doc(**policies: dict[str, object]) -> dict[str, object]:
    return {"scenarios": {"T2": {"policies": policies}}}


def test_each_run_median_and_spread_per_scenario_and_policy() -> None:
    docs = [_doc(adaptive={"prod_vs_solo": 0.97, "harvest": 0.64}, none={"harvest": 0.9}),
            _doc(adaptive={"prod_vs_solo": 1.01, "harvest": 0.50}, none={"harvest": 1.0}),
            _doc(adaptive={"prod_vs_solo": 0.99, "harvest": 0.63}, none={"harvest": 0.95})]
    s = repeat.summarise(docs)
    h = s["T2"]["adaptive"]["harvest"]
    assert h.runs == (0.64, 0.50, 0.63)
    assert h.median == pytest.approx(0.63) and h.spread == pytest.approx(0.14)
    assert s["T2"]["adaptive"]["prod_vs_solo"].median == pytest.approx(0.99)
    assert s["T2"]["none"]["harvest"].spread == pytest.approx(0.1)
    assert "p99_vs_solo" not in s["T2"]["adaptive"]     # no run measured it


def test_a_run_without_a_figure_is_left_out_of_its_column() -> None:
    docs = [_doc(adaptive={"harvest": 0.6, "p99_vs_solo": 1.02}),
            _doc(adaptive={"harvest": None, "p99_vs_solo": True}),   # not a measurement
            {"scenarios": {}},                                      # the scenario failed
            _doc(adaptive={"harvest": 0.7})]
    s = repeat.summarise(docs)["T2"]["adaptive"]
    assert s["harvest"].runs == (0.6, 0.7)
    assert s["p99_vs_solo"].runs == (1.02,)


def test_markdown_and_json_carry_every_run() -> None:
    docs = [_doc(adaptive={"harvest": 0.61, "prod_vs_solo": 1.0}),
            _doc(adaptive={"harvest": 0.55, "prod_vs_solo": 0.98})]
    s = repeat.summarise(docs)
    md = repeat.markdown(s, 2)
    assert "2 identical runs" in md
    row = next(line for line in md.splitlines() if line.startswith("| T2 | adaptive"))
    assert "0.58 (0.61 / 0.55; spread 0.06)" in row
    assert row.count(" - ") == 3                     # p99, p99.9, opp/solo not measured
    js = repeat.as_json(s)
    assert js["T2"]["adaptive"]["harvest"]["runs"] == [0.61, 0.55]
    assert js["T2"]["adaptive"]["prod_vs_solo"]["spread"] == pytest.approx(0.02)


@pytest.mark.parametrize("value", ["0", "21", "x"])
def test_a_bad_repeat_count_is_a_usage_error(value: str) -> None:
    res = CliRunner().invoke(cli, ["--repeat", value, "--gpu", "sim"])
    assert res.exit_code == 2
    assert "--repeat" in res.output

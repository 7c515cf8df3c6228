"""`tgs-bench --repeat N`: each figure's runs, median and spread; one tiny run end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from tgs.bench import repeat
from tgs.bench.main import cli


def _doc(**policies: dict[str, object]) -> dict[str, object]:
    return {"scenarios": {"T2": {"policies": policies}}}


@pytest.mark.timeout(20)
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


@pytest.mark.timeout(20)
def test_a_run_without_a_figure_is_left_out_of_its_column() -> None:
    docs = [_doc(adaptive={"harvest": 0.6, "p99_vs_solo": 1.02}),
            _doc(adaptive={"harvest": None, "p99_vs_solo": True}),   # not a measurement
            {"scenarios": {}},                                      # the scenario failed
            _doc(adaptive={"harvest": 0.7})]
    s = repeat.summarise(docs)["T2"]["adaptive"]
    assert s["harvest"].runs == (0.6, 0.7)
    assert s["p99_vs_solo"].runs == (1.02,)


@pytest.mark.timeout(20)
def test_the_paired_p99_is_summarised_from_its_nested_figure() -> None:
    docs = [_doc(adaptive={"paired": {"p99_on_vs_off": 1.02}}),
            _doc(adaptive={"paired": None}),                    # nothing paired in that run
            _doc(adaptive={"paired": {"p99_on_vs_off": 1.06}})]
    s = repeat.summarise(docs)["T2"]["adaptive"]
    assert s["paired.p99_on_vs_off"].runs == (1.02, 1.06)
    assert s["paired.p99_on_vs_off"].median == pytest.approx(1.04)


@pytest.mark.timeout(20)
def test_the_paired_halves_are_pooled_over_the_runs_that_kept_them() -> None:
    def run(on: list[float], off: list[float]) -> dict[str, object]:
        return {"p99_on_vs_off": 1.0, "mean_on_vs_off": 1.0, "on_ms": on, "off_ms": off}
    docs = [_doc(adaptive={"paired": run([10.0] * 99 + [50.0], [10.0] * 100)}),
            _doc(adaptive={"paired": None}, none={"harvest": 1.0}),   # nothing paired
            _doc(adaptive={"paired": run([10.0] * 100, [10.0] * 100)})]
    pool = repeat.pooled(docs)
    assert list(pool) == ["T2"] and list(pool["T2"]) == ["adaptive"]
    p = pool["T2"]["adaptive"]
    assert p["runs"] == 2 and p["on"]["n"] == 200 and p["off"]["n"] == 200
    assert p["mean_on_vs_off"] == pytest.approx(1.02)
    md = repeat.pooled_markdown(pool, 3)
    assert "pooled" in md and "| T2 | adaptive | 200 / 200 |" in md
    assert repeat.pooled_markdown({}, 3) == ""


@pytest.mark.timeout(20)
def test_runs_the_hypervisor_took_cpu_from_are_pooled_again_without_them() -> None:
    def run(on: float, steal: float | None) -> dict[str, object]:
        return {"host_steal": steal, "paired": {"p99_on_vs_off": 1.0, "mean_on_vs_off": 1.0,
                                                "on_ms": [on] * 100, "off_ms": [10.0] * 100}}
    docs = [_doc(adaptive=run(13.0, 0.13)), _doc(adaptive=run(10.0, 0.005)),
            _doc(adaptive=run(10.0, None))]                 # not known: kept
    assert repeat.pooled(docs)["T2"]["adaptive"]["mean_on_vs_off"] == pytest.approx(1.1)
    quiet = repeat.pooled(docs, max_steal=0.02)
    assert quiet["T2"]["adaptive"]["runs"] == 2
    assert quiet["T2"]["adaptive"]["mean_on_vs_off"] == pytest.approx(1.0)
    left = repeat.stolen_runs(docs, 0.02)
    assert left == ["T2 adaptive, run 1 (13.0 %)"]
    md = repeat.quiet_markdown(quiet, left, 0.02)
    assert "steal of 2 % or more" in md and "run 1 (13.0 %)" in md and "| T2 | adaptive |" in md
    assert repeat.quiet_markdown(repeat.pooled(docs), [], 0.02) == ""     # nothing left out


@pytest.mark.timeout(20)
def test_markdown_and_json_carry_every_run() -> None:
    docs = [_doc(adaptive={"harvest": 0.61, "prod_vs_solo": 1.0}),
            _doc(adaptive={"harvest": 0.55, "prod_vs_solo": 0.98})]
    s = repeat.summarise(docs)
    md = repeat.markdown(s, 2)
    assert "2 identical runs" in md
    row = next(line for line in md.splitlines() if line.startswith("| T2 | adaptive"))
    assert "0.58 (0.61 / 0.55; spread 0.06)" in row
    assert row.count(" - ") == 7     # p99, p99.9, opp/solo, paired rate, mean, p99, steal: none
    js = repeat.as_json(s)
    assert js["T2"]["adaptive"]["harvest"]["runs"] == [0.61, 0.55]
    assert js["T2"]["adaptive"]["prod_vs_solo"]["spread"] == pytest.approx(0.02)


@pytest.mark.timeout(20)
@pytest.mark.parametrize("value", ["0", "21", "x"])
def test_a_bad_repeat_count_is_a_usage_error(value: str) -> None:
    res = CliRunner().invoke(cli, ["--repeat", value, "--gpu", "sim"])
    assert res.exit_code == 2
    assert "--repeat" in res.output


@pytest.mark.timeout(120)
def test_repeat_runs_each_run_with_its_baselines_and_summarises_them(
        tmp_path: Path, shim_lib: Path, sim_lib: Path, workload_bin: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TGS_", "LD_PRELOAD"))}
    out = tmp_path / "r"
    res = subprocess.run([sys.executable, "-m", "tgs.bench.main", "--gpu", "sim", "--quick",
                          "--scenario", "S1", "--policy", "adaptive", "--no-plots", "--json",
                          "--repeat", "2", "--out", str(out)],
                         capture_output=True, text=True, env=env, timeout=110,
                         stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stderr[-2000:]
    for i in (1, 2):     # each run measured its own solo baselines
        runs = sorted(p.name for p in (out / f"run-{i}" / "runs").iterdir())
        assert runs == ["S1-adaptive.json", "S1-solo-opp.json", "S1-solo-prod.json"]
    doc = json.loads(res.stdout)
    assert doc == json.loads((out / "repeat.json").read_text())
    harvest = doc["repeat"]["S1"]["adaptive"]["harvest"]
    each = [json.loads((out / f"run-{i}" / "results.json").read_text())
            ["scenarios"]["S1"]["policies"]["adaptive"]["harvest"] for i in (1, 2)]
    assert harvest["runs"] == each
    assert harvest["spread"] == pytest.approx(abs(each[0] - each[1]))
    assert "| S1 | adaptive |" in (out / "repeat.md").read_text()

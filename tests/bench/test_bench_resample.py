"""Pooled paired figures with intervals over resampled runs; `python -m tgs.bench.pool`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from tgs.bench import pool, repeat, resample

pytestmark = pytest.mark.timeout(30)


def _paired(on: list[float], off: list[float]) -> dict[str, object]:
    return {"p99_on_vs_off": 1.0, "mean_on_vs_off": 1.0, "on_ms": on, "off_ms": off}


def _doc(on: list[float], off: list[float], steal: float = 0.0) -> dict[str, object]:
    return {"scenarios": {"T10": {"policies": {"adaptive": {
        "host_steal": steal, "paired": _paired(on, off)}}}}}


def test_identical_runs_give_a_point() -> None:
    runs = [_paired([10.0] * 99 + [20.0], [10.0] * 100)] * 4
    lo, hi = resample.intervals(runs)["mean_on_vs_off"]
    assert lo == pytest.approx(1.01) and hi == pytest.approx(1.01)


def test_runs_that_differ_give_an_interval_around_the_pool() -> None:
    # one run in four holds the slow tail: resamples with 0 to 4 copies of it
    runs = [_paired([10.0] * 100, [10.0] * 100)] * 3 + [_paired([30.0] * 100, [10.0] * 100)]
    whole = repeat.pooled([{"scenarios": {"T": {"policies": {"a": {"paired": r}}}}}
                           for r in runs])["T"]["a"]
    assert whole["mean_on_vs_off"] == pytest.approx(1.5)
    lo, hi = whole["intervals"]["mean_on_vs_off"]
    assert 1.0 <= lo < 1.5 < hi <= 3.0, (lo, hi)
    assert resample.intervals(runs) == resample.intervals(runs)          # a fixed seed
    assert "rate_on_vs_off" not in whole["intervals"]           # a server has no rate
    md = resample.markdown({"T": {"a": whole}})
    assert "- T a, 4 runs: mean latency on/off 1.500 (" in md and "p99 on/off" in md


def test_one_run_has_no_interval() -> None:
    assert resample.intervals([_paired([10.0], [10.0])]) == {}
    assert resample.intervals([{"on_ms": None}] * 3) == {}
    assert resample.markdown({"T": {"a": {"runs": 1, "intervals": {}}}}) == ""


def _write(folder: Path, *docs: dict[str, object]) -> Path:
    for i, d in enumerate(docs, 1):
        (folder / f"run-{i}").mkdir(parents=True)
        (folder / f"run-{i}" / "results.json").write_text(json.dumps(d))
    return folder


def test_the_cli_pools_the_runs_of_several_folders(tmp_path: Path) -> None:
    a = _write(tmp_path / "a", _doc([10.0] * 100, [10.0] * 100), _doc([12.0] * 100, [10.0] * 100))
    b = tmp_path / "b"
    b.mkdir()
    (b / "results.json").write_text(json.dumps(_doc([14.0] * 100, [10.0] * 100, steal=0.2)))
    r = CliRunner().invoke(pool.main, [str(a), str(b)])
    assert r.exit_code == 0, r.output
    assert "| T10 | adaptive | 300 / 300 |" in r.output and "mean 1.200" in r.output
    assert "- T10 adaptive, 3 runs: mean latency on/off 1.200 (" in r.output
    r = CliRunner().invoke(pool.main, [str(a), str(b), "--max-steal", "0.02", "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["runs"] == 3 and doc["left_out"] == ["T10 adaptive, run 3 (20.0 %)"]
    assert doc["pooled"]["T10"]["adaptive"]["mean_on_vs_off"] == pytest.approx(1.1)


def test_bad_folders_are_usage_errors(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    r = CliRunner().invoke(pool.main, [str(empty)])
    assert r.exit_code == 2 and "no results.json" in r.output
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "results.json").write_text("{not json")
    r = CliRunner().invoke(pool.main, [str(bad)])
    assert r.exit_code == 2 and "not a tgs-bench results document" in r.output
    unpaired = _write(tmp_path / "u", {"scenarios": {"S1": {"policies": {"adaptive": {}}}}})
    r = CliRunner().invoke(pool.main, [str(unpaired)])
    assert r.exit_code == 2 and "no paired runs" in r.output
    assert CliRunner().invoke(pool.main, []).exit_code == 2

"""The benchmarks' real PyTorch jobs on the simulated GPU: the training loop synchronizing every
step, running ahead, replaying a CUDA graph; the inference server with Poisson arrivals.  Each
prints the progress and summary lines the suite's samplers read."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(240)

ROOT = Path(__file__).resolve().parents[2]


def _lines(py: Path, module: str, env: dict[str, str], *args: str) -> list[dict]:
    p = subprocess.run([str(py), str(ROOT / "bench" / f"{module}.py"), *args], env=env,
                       capture_output=True, text=True, timeout=200)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-4000:]
    return [json.loads(ln) for ln in p.stdout.splitlines() if ln.startswith("{")]


@pytest.mark.parametrize("mode", [[], ["--sync-every", "10"], ["--graph", "--optim", "adam"]],
                         ids=["sync", "run-ahead", "graph"])
def test_training_loop(fw_python: Path, fw_env: dict[str, str], mode: list[str]) -> None:
    out = _lines(fw_python, "torch_train", fw_env, "--seconds", "1.5", "--hidden", "256",
                 "--gap-ms", "2", "--report-ms", "200", *mode)
    kinds = [o["type"] for o in out]
    assert kinds[0] == "start" and kinds[-1] == "summary" and "progress" in kinds
    summary = out[-1]
    assert summary["iters"] > 10 and summary["it_per_s"] > 0
    assert summary["lat_ms"]["p99"] >= summary["lat_ms"]["p50"] > 0
    assert out[0]["config"]["graph"] == ("--graph" in mode)


def test_duty_pauses_and_step_times(fw_python: Path, fw_env: dict[str, str]) -> None:
    """--duty ON:OFF pauses between stretches of work (a `pause` line each, the run's clock);
    --step-times puts each step's end and length in the summary."""
    out = _lines(fw_python, "torch_train", fw_env, "--seconds", "1.6", "--hidden", "256",
                 "--gap-ms", "1", "--duty", "0.3:0.3", "--step-times")
    pauses = [o for o in out if o["type"] == "pause"]
    summary = out[-1]
    assert 2 <= len(pauses) <= 3, pauses
    for p in pauses[:-1]:       # the last one may be cut short by the run's end
        assert 0.25 <= p["to_s"] - p["from_s"] <= 0.6, p
    assert 0 < pauses[-1]["to_s"] - pauses[-1]["from_s"] <= 0.6
    steps = summary["steps"]
    assert len(steps) == summary["iters"] > 10
    for end, ms in steps:       # no step spans a pause: the pause is not a step
        assert not any(p["from_s"] < end - ms / 1000 < p["to_s"] for p in pauses)
    assert [e for e, _ in steps] == sorted(e for e, _ in steps)


def test_inference_server(fw_python: Path, fw_env: dict[str, str]) -> None:
    out = _lines(fw_python, "torch_infer", fw_env, "--seconds", "1.5", "--rate", "100",
                 "--hidden", "256", "--report-ms", "200", "--step-times")
    summary = out[-1]
    assert out[0]["type"] == "start" and summary["type"] == "summary"
    assert any(o["type"] == "progress" for o in out)
    # Poisson arrivals at 100/s for 1.5 s: about 150 requests (a wide margin for a loaded host)
    assert 60 <= summary["iters"] <= 260
    assert summary["lat_ms"]["p99"] >= summary["lat_ms"]["p50"] > 0
    # --step-times: each request's reply time and latency, in order, the latencies summarized
    steps = summary["steps"]
    assert len(steps) == summary["iters"]
    assert [e for e, _ in steps] == sorted(e for e, _ in steps)
    assert max(ms for _, ms in steps) == pytest.approx(summary["lat_ms"]["max"], abs=1e-3)


def test_bad_arguments_exit_2(fw_python: Path, fw_env: dict[str, str]) -> None:
    for module, bad, needle in (("torch_infer", "--rate=-1", "must be positive"),
                                ("torch_train", "--sync-every=0", "must be positive"),
                                ("torch_train", "--duty=1", "ON_S:OFF_S"),
                                ("torch_train", "--duty=1:-2", "ON_S:OFF_S")):
        p = subprocess.run([str(fw_python), str(ROOT / "bench" / f"{module}.py"), bad],
                           env=fw_env, capture_output=True, text=True, timeout=60)
        assert p.returncode == 2 and needle in p.stderr, p.stderr

"""Real PyTorch on the bare simulated driver: the CUDA runtime, cuBLAS(Lt), cuDNN, Triton."""

from __future__ import annotations

from pathlib import Path

import pytest
from fw_helpers import ok, run_probe

pytestmark = pytest.mark.timeout(300)


def test_startup_tensors_matmul_conv_training(fw_python: Path, fw_env: dict[str, str]) -> None:
    out = ok(run_probe(fw_python, "torch_probe.py", "basics", fw_env))
    assert out["available"] and out["count"] == 1
    assert out["name"] == "TGS Simulated GPU"
    assert out["roundtrip"]                        # bytes survive host -> device -> host
    assert out["mm"] == [512, 512] and out["conv"] == [2, 8, 30, 30]
    assert out["cudnn"] >= 90000                  # cuDNN 9 ran the convolution


def test_events_time_many_steps(fw_python: Path, fw_env: dict[str, str]) -> None:
    out = ok(run_probe(fw_python, "torch_probe.py", "events", dict(fw_env, PROBE_STEPS="120")))
    assert out["elapsed_ms"] > 0                   # > 512 timing events later: still timed


def test_cuda_graph_capture_and_replay(fw_python: Path, fw_env: dict[str, str]) -> None:
    out = ok(run_probe(fw_python, "torch_probe.py", "graph", fw_env))
    assert out["replays"] == 20


def test_torch_compile_with_triton(fw_python: Path, fw_env: dict[str, str]) -> None:
    out = ok(run_probe(fw_python, "torch_probe.py", "compile", fw_env, timeout=280))
    assert out["shape"] == [64]


def test_cupy_runtime_nvrtc_cublas(fw_python: Path, fw_env: dict[str, str]) -> None:
    out = ok(run_probe(fw_python, "cupy_probe.py", None, fw_env))
    assert out["roundtrip"] and out["mm"] == [128, 128]
    assert out["total"] == 16 << 30


def test_two_gpus_one_process_each(fw_python: Path, fw_env: dict[str, str]) -> None:
    out = ok(run_probe(fw_python, "torch_probe.py", "multigpu", dict(fw_env, TGS_SIM_DEVICES="2")))
    assert out["count"] == 2 and out["exitcodes"] == [0, 0]
    uuids = {g[3] for g in out["per_gpu"]}
    assert len(uuids) == 2                         # two distinct devices

"""Device discovery (simulated GPUs) and endpoint helpers."""

from __future__ import annotations

from pathlib import Path

import pytest
from tgs.client import paths
from tgs.controller import devices


def test_sim_devices_from_environment(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TGS_SIM_STATE", str(tmp_path / "absent"))
    monkeypatch.setenv("TGS_SIM_DEVICES", "3")
    monkeypatch.setenv("TGS_SIM_MEM", "8G")
    devs = devices.discover(force_sim=True)
    assert [(d.index, d.uuid, d.mem_total, d.kind) for d in devs] == [
        (i, f"GPU-sim-{i}", 8 << 30, "sim") for i in range(3)]
    assert devices.find(devs, "GPU-sim-2") is devs[2] and devices.find(devs, 5) is None


def test_endpoints(tmp_path: Path) -> None:
    assert paths.listen_endpoint("5555") == "tcp://127.0.0.1:5555"
    assert paths.listen_endpoint("0.0.0.0:1") == "tcp://0.0.0.0:1"
    assert paths.listen_endpoint("ipc:///x") == "ipc:///x"
    d = paths.private_dir(tmp_path / "rt")
    assert d.stat().st_mode & 0o777 == 0o700
    with pytest.raises(ValueError, match="runtime-dir"):
        paths.check_ipc_path(Path("/" + "x" * 120))

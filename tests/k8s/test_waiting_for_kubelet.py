"""The device plugin waiting for a kubelet says so (once, with a hint for a
--plugin-dir elsewhere, as on MicroK8s or k0s) and never creates the kubelet's directory."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from tgs.k8s.config import Config
from tgs.k8s.plugin import Plugin


class Ready(Plugin):
    """A plugin whose controller always answers with one GPU."""

    def _status(self) -> dict[str, Any]:
        return {"devices": [{"index": 0, "uuid": "GPU-a", "mem_total": 1 << 30,
                             "kind": "nvml"}], "segment_dir": "/x"}


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_missing_directory_is_reported_once_and_not_created(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    missing = tmp_path / "var/lib/kubelet/device-plugins"
    p = Ready(Config(plugin_dir=missing, nshares=2))
    p.poll_health()
    with caplog.at_level(logging.DEBUG, logger="tgs.k8s.plugin"):
        for _ in range(3):
            p.watch_once()
    warned = _warnings(caplog)
    assert len(warned) == 1 and f"no directory {missing}" in warned[0], warned
    assert "MicroK8s" in warned[0] and "--plugin-dir" in warned[0]
    assert not missing.exists()


def test_missing_kubelet_socket_is_reported_once(tmp_path: Path,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    p = Ready(Config(plugin_dir=tmp_path, nshares=2))
    p.poll_health()
    try:
        with caplog.at_level(logging.DEBUG, logger="tgs.k8s.plugin"):
            for _ in range(3):
                p.watch_once()
        warned = _warnings(caplog)
        assert len(warned) == 1 and "no kubelet.sock in" in warned[0], warned
        assert p.socket_path.exists()           # serving: the kubelet may come at any time
    finally:
        p.stop()

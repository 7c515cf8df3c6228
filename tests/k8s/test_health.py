"""The plugin's device list in process, with the controller's answers scripted: a GPU that
leaves the controller's list turns Unhealthy (and back), the controller down turns all of
them Unhealthy after --unhealthy-after failed polls in a row (one lost poll changes nothing),
and ListAndWatch sends a new list exactly on changes; then a real controller killed with
SIGKILL, through the test kubelet."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from fake_kubelet import FakeApiServer, FakeKubelet, Watch
from k8s_helpers import Controller, PluginProc
from proc_helpers import stop
from tgs.client import ControllerUnavailable
from tgs.k8s import health, signals
from tgs.k8s.api import dp
from tgs.k8s.config import Config
from tgs.k8s.health import UNHEALTHY_AFTER, Hysteresis
from tgs.k8s.plugin import Plugin

pytestmark = pytest.mark.timeout(60)


def _status(*uuids: str) -> dict[str, Any]:
    return {"devices": [{"index": i, "uuid": u, "mem_total": 1 << 30, "kind": "nvml"}
                        for i, u in enumerate(uuids)], "segment_dir": "/x"}


class Scripted(Plugin):
    def __init__(self, cfg: Config) -> None:
        super().__init__(cfg)
        self.answer: dict[str, Any] | None = None

    def _status(self) -> dict[str, Any]:
        if self.answer is None:
            raise ControllerUnavailable("down")
        return self.answer


class Ctx:
    def __init__(self) -> None:
        self.active = True

    def is_active(self) -> bool:
        return self.active


def _health(p: Plugin) -> dict[str, str]:
    return {d.ID: d.health for d in p.devices()}


def test_gpu_presence_and_controller_health(tmp_path: Path) -> None:
    p = Scripted(Config(plugin_dir=tmp_path, nshares=2))
    p.answer = _status("GPU-a", "GPU-b")
    p.poll_health()
    assert _health(p) == {"GPU-a-share-0": "Healthy", "GPU-a-share-1": "Healthy",
                          "GPU-b-share-0": "Healthy", "GPU-b-share-1": "Healthy"}
    p.answer = _status("GPU-a")                     # GPU-b gone (fell off the bus)
    p.poll_health()
    h = _health(p)
    assert h["GPU-b-share-0"] == h["GPU-b-share-1"] == "Unhealthy"
    assert h["GPU-a-share-0"] == "Healthy"
    p.answer = None                                 # the controller stops answering
    for _ in range(UNHEALTHY_AFTER):
        p.poll_health()
    assert set(_health(p).values()) == {"Unhealthy"} and len(_health(p)) == 4
    p.answer = _status("GPU-a", "GPU-b")
    p.poll_health()
    assert set(_health(p).values()) == {"Healthy"}


def test_list_and_watch_sends_on_change_only(tmp_path: Path) -> None:
    p = Scripted(Config(plugin_dir=tmp_path, nshares=1))
    p.answer = _status("GPU-a")
    p.poll_health()
    ctx = Ctx()
    got: list[dict[str, str]] = []
    stream = p.ListAndWatch(dp.Empty(), ctx)

    def read() -> None:
        for resp in stream:
            got.append({d.ID: d.health for d in resp.devices})

    t = threading.Thread(target=read, daemon=True)
    t.start()
    try:
        _until(lambda: len(got) == 1)
        p.poll_health()                             # nothing changed: nothing sent
        p.poll_health()
        p.answer = None
        for _ in range(UNHEALTHY_AFTER):
            p.poll_health()
        _until(lambda: len(got) == 2)
        assert got == [{"GPU-a-share-0": "Healthy"}, {"GPU-a-share-0": "Unhealthy"}]
    finally:
        ctx.active = False
        t.join(timeout=5)
    assert not t.is_alive()                         # the stream ends with its call
    assert len(got) == 2


def test_one_failed_poll_stays_healthy(tmp_path: Path) -> None:
    """Hysteresis: Unhealthy only after UNHEALTHY_AFTER failed polls in a row; the first
    success counts them anew and turns the shares Healthy again."""
    p = Scripted(Config(plugin_dir=tmp_path, nshares=1))
    p.answer = _status("GPU-a")
    p.poll_health()
    version = p._version
    for _ in range(3):                              # a lost poll now and then
        p.answer = None
        for _ in range(UNHEALTHY_AFTER - 1):
            p.poll_health()
            assert _health(p) == {"GPU-a-share-0": "Healthy"}
        p.answer = _status("GPU-a")
        p.poll_health()
    assert p._version == version                    # nothing was ever sent to the kubelet
    p.answer = None
    for _ in range(UNHEALTHY_AFTER - 1):
        p.poll_health()
    assert _health(p) == {"GPU-a-share-0": "Healthy"}
    p.poll_health()                                 # the N-th in a row
    assert _health(p) == {"GPU-a-share-0": "Unhealthy"}
    p.poll_health()
    assert _health(p) == {"GPU-a-share-0": "Unhealthy"}
    p.answer = _status("GPU-a")                     # back on the first success
    p.poll_health()
    assert _health(p) == {"GPU-a-share-0": "Healthy"}


def test_unhealthy_after_is_a_setting(tmp_path: Path) -> None:
    p = Scripted(Config(plugin_dir=tmp_path, nshares=1, unhealthy_after=1))
    p.answer = _status("GPU-a")
    p.poll_health()
    p.answer = None
    p.poll_health()
    assert _health(p) == {"GPU-a-share-0": "Unhealthy"}
    h = Hysteresis(after=2)
    assert (h.failed(), h.failed(), h.failed()) == (False, True, True)
    h.succeeded()
    assert not h.down and not h.failed()


def test_refused_sees_a_dead_controllers_socket(tmp_path: Path) -> None:
    """A controller killed with SIGKILL leaves its socket file: a connect is refused at
    once, where a ZMQ request would wait for its whole timeout."""
    import socket as so
    path = tmp_path / "c.sock"
    assert health.refused(f"ipc://{path}") is not None            # no file
    srv = so.socket(so.AF_UNIX, so.SOCK_STREAM)
    try:
        srv.bind(str(path))
        srv.listen(1)
        assert health.refused(f"ipc://{path}") is None            # someone listens
    finally:
        srv.close()                                 # the file stays, as after SIGKILL
    assert path.exists()
    assert "ECONNREFUSED" in (health.refused(f"ipc://{path}") or "")
    assert health.refused("tcp://127.0.0.1:1") is None            # only ipc is probed


def _until(pred: Any, timeout: float = 10.0) -> None:
    import time
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_idle_pct() -> None:
    devs = [{"index": 0}, {"index": 1}]
    assert signals.idle_pct({"devices": devs, "policy_state": {
        "0": {"duty": 0.83}, "1": {"duty": 0.44}}}) == 60          # best GPU, steps of 10
    assert signals.idle_pct({"devices": devs, "policy_state": {"0": {"duty": 0.9}}}) == 100
    assert signals.idle_pct({"devices": devs, "policy_state": {"0": {}}}) is None
    assert signals.idle_pct({"devices": [], "policy_state": {}}) is None
    assert signals.idle_pct({"devices": devs[:1], "policy_state": {
        "0": {"duty": 1.7}}}) == 0                                   # clamped


def test_idle_pct_reads_the_controllers_placement_figures() -> None:
    """The controller's per-GPU production duty (status.placement, every policy) is the
    figure; policy_state is only read from a controller without it."""
    devs = [{"index": 0}, {"index": 1}]

    def place(*duties: float) -> list[dict[str, object]]:
        return [{"index": i, "uuid": f"GPU-{i}", "production_duty": d, "production_busy_s": 0.0,
                 "production_idle_s": 0.0, "duty_tau_s": 30.0} for i, d in enumerate(duties)]

    st = {"devices": devs, "placement": place(0.83, 0.44), "policy_state": {}}
    assert signals.idle_pct(st) == 60
    st["policy_state"] = {"0": {"duty": 0.0}, "1": {"duty": 0.0}}    # not this figure
    assert signals.idle_pct(st) == 60
    assert signals.idle_pct({"devices": devs, "placement": place(0.95)}) == 100  # GPU 1: unseen
    assert signals.idle_pct({"devices": devs, "placement": [{"index": 0}]}) is None
    assert signals.idle_pct({"devices": devs, "placement": place(2.0, 1.0)}) == 0   # clamped


def test_node_label_on_change_only(tmp_path: Path, apiserver: FakeApiServer) -> None:
    from tgs.k8s.podinfo import ApiServer
    p = Scripted(Config(plugin_dir=tmp_path, node_name="gpu-1", api=ApiServer(apiserver.url),
                        label_interval=0))
    p.answer = dict(_status("GPU-a"), policy_state={"0": {"duty": 0.31}})
    p.poll_health()
    p.poll_health()                                  # same value: no second patch
    p.answer["policy_state"]["0"]["duty"] = 0.05
    p.poll_health()
    assert apiserver.node_patches == [
        ("gpu-1", {"metadata": {"labels": {"tgs.io/gpu-idle-pct": "70"}}}),
        ("gpu-1", {"metadata": {"labels": {"tgs.io/gpu-idle-pct": "100"}}})]
    p.cfg.label_interval = 3600                      # at most one update per interval
    p.answer["policy_state"]["0"]["duty"] = 0.5
    p.poll_health()
    assert len(apiserver.node_patches) == 2


def test_a_killed_controller_turns_the_shares_unhealthy(kubelet: FakeKubelet, ctl: Controller,
                                                        plugin: PluginProc) -> None:
    """A real controller killed with SIGKILL (its socket file stays): every share Unhealthy
    after UNHEALTHY_AFTER failed polls at --health-interval 0.2 s, not on the first one, and
    well before a call's timeout per poll would allow; Healthy again on its first answer."""
    watch = Watch(kubelet.plugin(kubelet.next_registration(timeout=20).endpoint))
    try:
        assert set(watch.next().values()) == {"Healthy"}
        stop(ctl.proc, signal.SIGKILL)
        t0 = time.monotonic()
        ctl.proc = None
        assert (Path(ctl.env["TGS_CONTROLLER"][len("ipc://"):])).exists()
        watch.until(lambda d: set(d.values()) == {"Unhealthy"}, timeout=20)
        took = time.monotonic() - t0
        # 3 failed polls 0.2 s apart; a death during a call adds that call's timeout (1 s)
        assert (UNHEALTHY_AFTER - 1) * 0.2 - 0.05 <= took <= 5.0, took
        ctl.start()
        watch.until(lambda d: set(d.values()) == {"Healthy"}, timeout=20)
    finally:
        watch.close()
    log = plugin.log.read_text()
    assert f"controller not answering ({UNHEALTHY_AFTER} polls in a row, shares Unhealthy)" \
        in log

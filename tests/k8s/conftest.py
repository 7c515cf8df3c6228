"""Fixtures for the device plugin tests: a test kubelet, a fake API server, a controller on
private simulated GPUs (two of them) and the plugin as a process, all in temp dirs and stopped
by pid (the helpers live in k8s_helpers.py and fake_kubelet.py)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_kubelet import FakeApiServer, FakeKubelet
from k8s_helpers import Controller, PluginProc


@pytest.fixture
def k8s_root() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="tgs-k8s-"))     # unix socket paths: 107 bytes
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def kubelet(k8s_root: Path) -> Iterator[FakeKubelet]:
    k = FakeKubelet(k8s_root)
    k.start()
    try:
        yield k
    finally:
        k.close()


@pytest.fixture
def apiserver() -> Iterator[FakeApiServer]:
    a = FakeApiServer()
    try:
        yield a
    finally:
        a.close()


@pytest.fixture
def ctl(k8s_root: Path, sim_env: dict[str, str]) -> Iterator[Controller]:
    c = Controller(k8s_root, dict(sim_env, TGS_SIM_DEVICES="2", TGS_SIM_MEM="8GiB"))
    c.start()
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def plugin_factory(k8s_root: Path, kubelet: FakeKubelet, ctl: Controller,
                   apiserver: FakeApiServer) -> Iterator:
    made: list[PluginProc] = []

    def make(*extra: str) -> PluginProc:
        p = PluginProc(k8s_root, kubelet, ctl, apiserver, *extra)
        made.append(p)
        return p

    try:
        yield make
    finally:
        for p in made:
            p.close()


@pytest.fixture
def plugin(plugin_factory) -> PluginProc:  # type: ignore[no-untyped-def]
    return plugin_factory()


# ---------------------------------------------------------------- the DRA driver (test_dra_*)
# The helpers live in dra_helpers.py: a test kubelet for the plugin watcher and DRAPlugin, a
# fake resource.k8s.io/v1 API server, the driver as a process.


@pytest.fixture
def dra_api() -> Iterator:
    from dra_helpers import FakeResourceApi
    a = FakeResourceApi()
    try:
        yield a
    finally:
        a.close()


@pytest.fixture
def dra_kubelet(k8s_root: Path) -> Iterator:
    from dra_helpers import DraKubelet
    k = DraKubelet(k8s_root)
    try:
        yield k
    finally:
        k.close()


@pytest.fixture
def dra_factory(k8s_root: Path, dra_kubelet, ctl: Controller,  # type: ignore[no-untyped-def]
                dra_api) -> Iterator:
    from dra_helpers import DraPluginProc
    made: list = []

    def make(*extra: str, cdi_dir: Path | None = None):  # type: ignore[no-untyped-def]
        p = DraPluginProc(k8s_root, dra_kubelet, ctl, dra_api, *extra, cdi_dir=cdi_dir)
        made.append(p)
        return p

    try:
        yield make
    finally:
        for p in made:
            p.close()

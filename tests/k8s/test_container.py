"""The container an Allocate response describes, started for real with podman on the
simulated GPU: the job's quota (set from the pod's annotations at PreStartContainer) is what
cuMemGetInfo reports inside, and an allocation over it is refused. Once with mounts and env,
once with a CDI device name. Skipped only where no container can start."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from container_helpers import CDI_DIR, fill_rootfs, require_podman
from container_helpers import PODMAN as PODMAN_RUN
from fake_kubelet import FakeApiServer, FakeKubelet
from k8s_helpers import Controller, wait_for
from tgs.k8s.api import dp

pytestmark = pytest.mark.timeout(180)
GIB = 1 << 30
PODMAN = [*PODMAN_RUN, "--rm"]


@pytest.fixture(scope="module")
def rootfs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The workload, the libraries it and the injected ones need, the loader; the driver
    comes with the injection."""
    require_podman()
    return fill_rootfs(tmp_path_factory.mktemp("rootfs"))


def _allocated(kubelet: FakeKubelet, apiserver: FakeApiServer, pod: str, ids: list[str],
               annotations: dict[str, str] | None = None,
               stub=None) -> tuple[dp.ContainerAllocateResponse, str]:  # type: ignore[no-untyped-def]
    """Allocate, then PreStartContainer with the pod's annotations (tgs.io/memory 1GiB)."""
    if stub is None:
        stub = kubelet.plugin(kubelet.next_registration(timeout=30).endpoint)
    req = dp.AllocateRequest(container_requests=[dp.ContainerAllocateRequest(devices_ids=ids)])
    (resp,) = stub.Allocate(req, timeout=30).container_responses
    kubelet.hold("ml", pod, "main", "tgs.io/gpu", ids)
    apiserver.pods[("ml", pod)] = annotations or {"tgs.io/memory": "1GiB"}
    stub.PreStartContainer(dp.PreStartContainerRequest(devices_ids=ids), timeout=30)
    return resp, resp.annotations["tgs.io/job"]


def _flags(resp: dp.ContainerAllocateResponse) -> list[str]:
    flags: list[str] = []
    for m in resp.mounts:
        flags += ["-v", f"{m.host_path}:{m.container_path}:{'ro' if m.read_only else 'rw'}"]
    for k, v in sorted(resp.envs.items()):
        flags += ["-e", f"{k}={v}"]
    return flags


def _run(flags: list[str], rootfs: Path, mem: str) -> subprocess.CompletedProcess:
    return subprocess.run([*PODMAN, *flags, "--rootfs", str(rootfs), "/bin/tgs-workload",
                           "--mem", mem, "--seconds", "0.2"],
                          capture_output=True, text=True, timeout=90)


def _check_quota(flags: list[str], rootfs: Path) -> None:
    r = _run(flags, rootfs, "512MiB")
    assert r.returncode == 0, r.stderr
    start = json.loads(next(x for x in r.stdout.splitlines() if x.startswith("{")))
    assert start["type"] == "start" and start["pid"] == 1          # its own PID namespace
    assert start["mem"]["total"] == GIB                             # the pod's quota
    r = _run(flags, rootfs, "2GiB")
    assert r.returncode == 1 and "OUT_OF_MEMORY" in r.stdout + r.stderr, r.stderr


def test_container_from_mounts_and_env(rootfs: Path, kubelet: FakeKubelet, ctl: Controller,
                                       apiserver: FakeApiServer, k8s_root: Path,
                                       plugin_factory) -> None:  # type: ignore[no-untyped-def]
    host_lib = k8s_root / "host-lib"             # as in the DaemonSet: files of the image
    plugin = plugin_factory("--host-lib-dir", str(host_lib))
    resp, job = _allocated(kubelet, apiserver, "train-a", ["GPU-sim-0-share-0"])
    assert ctl.jobs()[job]["mem_quota"] == GIB
    mounts = {m.container_path: m.host_path for m in resp.mounts}
    assert mounts["/usr/local/lib/tgs/libtgs.so"] == str(host_lib / "libtgs.so")
    assert mounts[resp.envs["TGS_SEGMENT"]] == ctl.jobs()[job]["segment"]   # not copied
    _check_quota(_flags(resp), rootfs)
    assert "error" not in plugin.log.read_text().lower()


def test_container_from_cdi_device(rootfs: Path, kubelet: FakeKubelet, ctl: Controller,
                                   apiserver: FakeApiServer,
                                   plugin_factory) -> None:  # type: ignore[no-untyped-def]
    try:
        CDI_DIR.mkdir(parents=True, exist_ok=True)
        probe = CDI_DIR / ".tgs-k8s-probe"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        pytest.skip(f"cannot write CDI specs into {CDI_DIR}: {exc}")
    plugin_factory("--cdi-dir", str(CDI_DIR))
    resp, job = _allocated(kubelet, apiserver, "train-b", ["GPU-sim-1-share-2"])
    spec = CDI_DIR / f"tgs.io-gpu-{job}.json"
    try:
        assert [d.name for d in resp.cdi_devices] == [f"tgs.io/gpu={job}"]
        assert not resp.mounts and not resp.envs           # the CDI spec carries them
        assert spec.is_file()
        _check_quota(["--device", resp.cdi_devices[0].name], rootfs)
    finally:
        spec.unlink(missing_ok=True)


def test_production_and_opportunistic_pods_on_one_gpu(
        rootfs: Path, kubelet: FakeKubelet, ctl: Controller, apiserver: FakeApiServer,
        plugin_factory) -> None:  # type: ignore[no-untyped-def]
    """docs/kubernetes.md's pod pair, shrunk to the simulated GPU: both containers run at
    once on GPU 0, each job with its pod's priority and quota, each process seen."""
    plugin_factory()
    stub = kubelet.plugin(kubelet.next_registration(timeout=30).endpoint)
    two = ["GPU-sim-0-share-0", "GPU-sim-0-share-1"]
    serve, prod = _allocated(kubelet, apiserver, "serve", two,
                             {"tgs.io/priority": "production", "tgs.io/memory": "3GiB"}, stub)
    train, opp = _allocated(kubelet, apiserver, "train", ["GPU-sim-0-share-2"],
                            {"tgs.io/weight": "2", "gpu-memory": "1024"}, stub)
    runs: dict[str, subprocess.Popen] = {}
    try:
        for name, resp in (("serve", serve), ("train", train)):
            runs[name] = subprocess.Popen(
                [*PODMAN, *_flags(resp), "--name", f"tgs-k8s-{name}-{prod[-6:]}", "--rootfs",
                 str(rootfs), "/bin/tgs-workload", "--mem", "256MiB", "--seconds", "6"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        both = wait_for(lambda: all(ctl.jobs()[j].get("processes") == 1 for j in (prod, opp)),
                        timeout=30)
        jobs = ctl.jobs()
        assert both, jobs
        assert (jobs[prod]["priority"], jobs[prod]["mem_quota"]) == ("production", 3 * GIB)
        assert (jobs[opp]["priority"], jobs[opp]["weight"], jobs[opp]["mem_quota"]) == (
            "opportunistic", 2, GIB)
        assert jobs[prod]["device_uuid"] == jobs[opp]["device_uuid"] == "GPU-sim-0"
        for name, proc in runs.items():
            out, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, (name, err)
            start = json.loads(next(x for x in out.splitlines() if x.startswith("{")))
            assert start["mem"]["total"] == (3 * GIB if name == "serve" else GIB)
    finally:
        for name, proc in runs.items():
            if proc.poll() is None:
                subprocess.run(["podman", "rm", "-f", "-t", "0", f"tgs-k8s-{name}-{prod[-6:]}"],
                               capture_output=True, timeout=60)
                proc.kill()
                proc.communicate()


def test_container_over_two_gpus(rootfs: Path, kubelet: FakeKubelet, ctl: Controller,
                                 apiserver: FakeApiServer,
                                 plugin_factory) -> None:  # type: ignore[no-untyped-def]
    """Shares of both simulated GPUs: one job over both; inside the container each device
    ordinal (CUDA_VISIBLE_DEVICES by UUID) reports the per-device quota and is charged to
    its own part; an allocation over the quota is refused on that device."""
    plugin_factory()
    resp, job = _allocated(kubelet, apiserver, "ddp", ["GPU-sim-1-share-0", "GPU-sim-0-share-0"])
    assert len(ctl.jobs()[job]["devices"]) == 2
    flags = _flags(resp)
    for dev in (0, 1):
        r = subprocess.run([*PODMAN, *flags, "--rootfs", str(rootfs), "/bin/tgs-workload",
                            "--device", str(dev), "--mem", "512MiB", "--seconds", "0.2"],
                           capture_output=True, text=True, timeout=90)
        assert r.returncode == 0, r.stderr
        start = json.loads(next(x for x in r.stdout.splitlines() if x.startswith("{")))
        assert start["mem"]["total"] == GIB, (dev, start)
        r = subprocess.run([*PODMAN, *flags, "--rootfs", str(rootfs), "/bin/tgs-workload",
                            "--device", str(dev), "--mem", "2GiB", "--seconds", "0.2"],
                           capture_output=True, text=True, timeout=90)
        assert r.returncode == 1 and "OUT_OF_MEMORY" in r.stdout + r.stderr, r.stderr
    # each part saw its own process (its peak is the 512 MiB allocated on its device)
    from tgs.intercept import segment
    for d in ctl.jobs()[job]["devices"]:
        with segment.open_segment(d["segment"]) as seg:
            assert seg.ledger()[2] == 512 << 20, d["name"]

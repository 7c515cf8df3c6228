"""A prepared claim's CDI device applied to a real container (podman) on the simulated GPU:
the claim's memory quota is what cuMemGetInfo reports inside, an allocation over it is
refused, and the process is seen in the claim's job. Skipped where podman/runc are missing,
no container can start, or the CDI spec directory (/var/run/cdi, where podman looks) is not
writable; the spec is removed by unpreparing the claim, and in any case at the end."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest
from container_helpers import CDI_DIR, fill_rootfs, podman_rm, require_podman
from container_helpers import PODMAN as PODMAN_RUN
from dra_helpers import DraKubelet, FakeResourceApi, claim, prepare, unprepare
from k8s_helpers import Controller, wait_for
from tgs.k8s.dra.plan import job_name

pytestmark = pytest.mark.timeout(180)
GIB = 1 << 30
PODMAN = [*PODMAN_RUN, "--rm"]


@pytest.fixture(scope="module")
def rootfs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_podman()
    return fill_rootfs(tmp_path_factory.mktemp("rootfs"))


def _cdi_dir_writable() -> None:
    try:
        CDI_DIR.mkdir(parents=True, exist_ok=True)
        probe = CDI_DIR / ".tgs-dra-probe"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        pytest.skip(f"cannot write CDI specs into {CDI_DIR}: {exc}")


def _start(out: str) -> dict:
    return json.loads(next(x for x in out.splitlines() if x.startswith("{")))


def test_claim_cdi_device_in_a_container(rootfs: Path, dra_kubelet: DraKubelet,
                                         ctl: Controller, dra_api: FakeResourceApi,
                                         dra_factory) -> None:  # type: ignore[no-untyped-def]
    _cdi_dir_writable()
    proc = dra_factory(cdi_dir=CDI_DIR)
    info = dra_kubelet.register(proc)
    client = dra_kubelet.dra(info.endpoint, "v1")
    # a uid of its own: the job, its CDI spec in the node-wide /var/run/cdi and the
    # container's name differ from those of any other run on this machine
    uid = str(uuid.uuid4())
    ref = ("ml", uid, "train-gpu")
    dra_api.claims[("ml", "train-gpu")] = claim(
        "ml", "train-gpu", uid, [("gpu", "gpu-sim-0-share-1")],
        [("FromClaim", [], {"priority": "opportunistic", "weight": 2, "memory": "1GiB"})])
    job = job_name(uid, "gpu")
    spec = CDI_DIR / f"tgs.io-gpu-{job}.json"
    name = f"tgs-dra-{job[-8:]}"
    try:
        answer = prepare(client, ref)[uid]
        assert answer.error == "", answer.error
        (dev,) = answer.devices
        (cdi_id,) = dev.cdi_device_ids
        assert cdi_id == f"tgs.io/gpu={job}" and spec.is_file()
        assert ctl.jobs()[job]["mem_quota"] == GIB
        flags = ["--device", cdi_id, "--rootfs", str(rootfs), "/bin/tgs-workload"]
        r = subprocess.run([*PODMAN, *flags, "--mem", "512MiB", "--seconds", "0.2"],
                           capture_output=True, text=True, timeout=90)
        assert r.returncode == 0, r.stderr
        start = _start(r.stdout)
        assert start["type"] == "start" and start["mem"]["total"] == GIB    # the claim's quota
        r = subprocess.run([*PODMAN, *flags, "--mem", "2GiB", "--seconds", "0.2"],
                           capture_output=True, text=True, timeout=90)
        assert r.returncode == 1 and "OUT_OF_MEMORY" in r.stdout + r.stderr, r.stderr
        # a longer run: the controller sees its process in the claim's job
        run = subprocess.Popen([*PODMAN, "--name", name, *flags, "--mem", "256MiB",
                                "--seconds", "4"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        try:
            assert wait_for(lambda: ctl.jobs()[job].get("processes") == 1, timeout=30), \
                ctl.jobs()[job]
            out, err = run.communicate(timeout=60)
            assert run.returncode == 0, err
        finally:
            if run.poll() is None:
                podman_rm(name)
                run.kill()
                run.communicate()
        assert unprepare(client, ref) == {uid: ""}
        assert not spec.exists() and job not in ctl.jobs()
    finally:
        spec.unlink(missing_ok=True)

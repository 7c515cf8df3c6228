"""A kubelet restart under the DRA driver, as upstream's kubelet restarts: its connections
dropped; at start its plugin watcher registers the socket it finds in the registry directory
again (GetInfo, NotifyRegistrationStatus), the DRA socket staying where it was, and its DRA
plugin manager deletes the node's ResourceSlices. Optionally the registry directory was
removed and made again meanwhile. The prepared claims keep their jobs throughout, the driver
is registered again, the same claim prepared again gets the same devices, and unprepare
removes its job."""

from __future__ import annotations

import threading

import pytest
from dra_helpers import (
    DraKubelet,
    DraPluginProc,
    FakeResourceApi,
    claim,
    devices,
    prepare,
    unprepare,
)
from k8s_helpers import Controller, wait_for
from tgs.k8s.dra.plan import job_name

pytestmark = pytest.mark.timeout(150)
G0, G1 = "gpu-sim-0", "gpu-sim-1"


class JobWatch:
    """Samples the controller's jobs in a thread: whether `job` was in every sample."""

    def __init__(self, ctl: Controller, job: str) -> None:
        self.ctl, self.job = ctl, job
        self.samples = 0
        self.missing = 0
        self.errors: list[str] = []                # calls that failed: no sample
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                jobs = self.ctl.jobs()
            except Exception as exc:                # a slow controller: no sample
                self.errors.append(repr(exc))
            else:
                self.missing += self.job not in jobs
                self.samples += 1
            self._stop.wait(0.05)

    def stop(self) -> None:
        self._stop.set()
        self._t.join(timeout=30)


@pytest.mark.parametrize("wipe", [False, True], ids=["sockets-kept", "registry-wiped"])
def test_kubelet_restart(dra_kubelet: DraKubelet, ctl: Controller, dra_api: FakeResourceApi,
                         dra_factory, wipe: bool) -> None:  # type: ignore[no-untyped-def]
    # slices repaired on their own only every 300 s: what brings them back here is the
    # registration after the restart
    proc: DraPluginProc = dra_factory("--slice-interval", "300")
    info = dra_kubelet.register(proc)
    client = dra_kubelet.dra(info.endpoint, "v1")
    assert wait_for(lambda: dra_api.node_slices(), timeout=30, step=0.1), proc.tail()
    dra_api.claims[("ml", "serve")] = claim("ml", "serve", "uid-s",
                                            [("gpu", f"{G0}-share-0"), ("gpu", f"{G1}-share-1")],
                                            [("FromClaim", [], {"weight": 3})])
    ref = ("ml", "uid-s", "serve")
    first = prepare(client, ref)["uid-s"]
    assert first.error == "", first.error
    job = job_name("uid-s", "gpu")
    assert job in ctl.jobs()
    reg_sock, dra_sock = dra_kubelet.socket(), proc.plugin_dir / "dra.sock"
    dra_inode = dra_sock.stat().st_ino
    reg_inode = reg_sock.stat().st_ino
    said = proc.log.read_text().count("registered with the kubelet")
    gets = len(dra_api.requests)

    watch = JobWatch(ctl, job)
    try:
        assert wait_for(lambda: watch.samples >= 3, timeout=30), watch.errors[-3:]
        dra_kubelet.restart(api=dra_api, wipe_registry=wipe)
        assert not dra_api.node_slices()               # the starting kubelet's wipe
        if not wipe:                                    # nothing for the driver to redo
            assert reg_sock.stat().st_ino == reg_inode
        info = dra_kubelet.register(proc)               # the plugin watcher, again
        assert info.endpoint == str(dra_sock)
        assert wait_for(lambda: proc.log.read_text().count("registered with the kubelet")
                        > said, timeout=20), proc.tail()
        # the registration brought the slices back, long before the 300 s repair
        assert wait_for(lambda: dra_api.node_slices(), timeout=30, step=0.1), proc.tail()
        # the kubelet asks again for the claim it has prepared: the same answer
        for version in ("v1", "v1beta1"):
            again = prepare(dra_kubelet.dra(info.endpoint, version), ref)["uid-s"]
            assert again.error == "" and devices(again) == devices(first)
        n = watch.samples
        assert wait_for(lambda: watch.samples >= n + 3, timeout=30), watch.errors[-3:]
    finally:
        watch.stop()
    assert watch.missing == 0, f"job {job} missing in {watch.missing} of {watch.samples}"
    assert dra_sock.stat().st_ino == dra_inode          # the DRA socket stayed
    assert [n for n in ctl.jobs() if n.startswith("dra-")] == [job]
    # answered from the checkpoint: the ResourceClaim was not read again
    assert not [p for m, p in dra_api.requests[gets:] if "/resourceclaims/" in p]
    assert unprepare(dra_kubelet.dra(info.endpoint, "v1"), ref) == {"uid-s": ""}
    assert job not in ctl.jobs()
    assert "unexpected error" not in proc.log.read_text()

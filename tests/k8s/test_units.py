"""The plugin's pure parts: share IDs, one-GPU allocations, annotations, job names, the
translation of a Plan into a response, and relocating image files onto the node."""

from __future__ import annotations

from pathlib import Path

import pytest
from tgs.k8s import annotations as ann
from tgs.k8s import response, shares
from tgs.k8s.shares import Gpu, ShareError
from tgs.tools.injection import Mount, Plan

GIB = 1 << 30
UUID = "GPU-fef8089b-4820-abfc-e83e-94318197576e"
GPUS = [Gpu(0, UUID, 80 * GIB), Gpu(1, "GPU-other", 40 * GIB)]


def test_share_ids_round_trip_and_length() -> None:
    ids = shares.all_ids(GPUS, 3)
    assert ids[:3] == [f"{UUID}-share-0", f"{UUID}-share-1", f"{UUID}-share-2"]
    assert all(len(i) <= 63 for i in ids)
    assert shares.split_id(ids[4]) == ("GPU-other", 1)
    with pytest.raises(ShareError):
        shares.split_id("GPU-x")
    with pytest.raises(ShareError, match="63"):
        shares.share_id("GPU-" + "x" * 60, 1)


def test_gpu_of_one_gpu_only() -> None:
    assert shares.gpu_of([f"{UUID}-share-0", f"{UUID}-share-3"], GPUS) == GPUS[0]
    with pytest.raises(ShareError, match="one GPU"):
        shares.gpu_of([f"{UUID}-share-0", "GPU-other-share-0"], GPUS)
    with pytest.raises(ShareError, match="not on this node"):
        shares.gpu_of(["GPU-gone-share-0"], GPUS)
    with pytest.raises(ShareError):
        shares.gpu_of([], GPUS)


def test_gpus_of_orders_by_index_and_counts_shares() -> None:
    ids = ["GPU-other-share-1", f"{UUID}-share-0", "GPU-other-share-3", "GPU-other-share-1"]
    assert shares.gpus_of(ids, GPUS) == [(GPUS[0], 1), (GPUS[1], 2)]
    assert shares.gpus_of(list(reversed(ids)), GPUS) == [(GPUS[0], 1), (GPUS[1], 2)]
    with pytest.raises(ShareError, match="not on this node"):
        shares.gpus_of([f"{UUID}-share-0", "GPU-gone-share-0"], GPUS)
    with pytest.raises(ShareError):
        shares.gpus_of([], GPUS)


def test_gpu_handoff_of_several_gpus() -> None:
    assert response.gpu_handoff("env", UUID, "GPU-other") == (
        {"NVIDIA_VISIBLE_DEVICES": f"{UUID},GPU-other"}, [])
    assert response.gpu_handoff("cdi", UUID, "GPU-other") == (
        {}, [f"nvidia.com/gpu={UUID}", "nvidia.com/gpu=GPU-other"])


@pytest.mark.parametrize("avail,must,size,want", [
    # the GPU with the most free shares, lowest share numbers first
    (["A-share-0", "B-share-1", "B-share-0"], [], 2, ["B-share-0", "B-share-1"]),
    # the must-include share's GPU first
    (["A-share-0", "A-share-1", "B-share-0", "B-share-1", "B-share-2"], ["A-share-3"], 2,
     ["A-share-3", "A-share-0"]),
    # no GPU has enough: spill over (Allocate will then refuse it clearly)
    (["A-share-0", "B-share-0"], [], 2, ["A-share-0", "B-share-0"]),
])
def test_preferred_packs_on_one_gpu(avail: list[str], must: list[str], size: int,
                                    want: list[str]) -> None:
    assert shares.preferred(avail, must, size) == want


def test_annotations_defaults_and_tgs_keys() -> None:
    s = ann.settings({}, mem_total=8 * GIB, shares=1, nshares=4)
    assert s == ann.JobSettings("opportunistic", 1, 2 * GIB)
    s = ann.settings({ann.PRIORITY: "production", ann.WEIGHT: "7", ann.MEMORY: "1.5GiB"},
                     mem_total=8 * GIB, shares=1, nshares=4)
    assert s == ann.JobSettings("production", 7, 3 * GIB // 2)
    assert ann.settings({ann.MEMORY: "unlimited"}, mem_total=GIB, shares=1, nshares=2,
                        within_shares=False).mem_quota is None


def test_annotations_within_the_shares() -> None:
    kw = {"mem_total": 8 * GIB, "shares": 1, "nshares": 4}
    assert ann.settings({ann.MEMORY: "2GiB"}, **kw).mem_quota == 2 * GIB      # all of it
    for a in ({ann.MEMORY: "3GiB"}, {ann.MEMORY: "unlimited"}, {ann.KAI_FRACTION: "0.5"}):
        with pytest.raises(ann.AnnotationError, match="shares"):
            ann.settings(a, **kw)
        ann.settings(a, **kw, within_shares=False)                            # overcommit


def test_annotations_kai_scheduler() -> None:
    kw = {"mem_total": 8 * GIB, "shares": 2, "nshares": 4}
    assert ann.settings({ann.KAI_MEMORY: "2000"}, **kw).mem_quota == 2000 << 20   # MiB
    assert ann.settings({ann.KAI_MEMORY: "3GiB"}, **kw).mem_quota == 3 * GIB
    assert ann.settings({ann.KAI_FRACTION: "0.5"}, **kw).mem_quota == 4 * GIB
    # ours wins over KAI's
    assert ann.settings({ann.MEMORY: "1GiB", ann.KAI_FRACTION: "0.5"}, **kw).mem_quota == GIB


@pytest.mark.parametrize("key,value", [
    (ann.PRIORITY, "high"), (ann.WEIGHT, "0"), (ann.WEIGHT, "1001"), (ann.WEIGHT, "٣"),
    (ann.MEMORY, "lots"), (ann.KAI_MEMORY, "-1"), (ann.KAI_FRACTION, "1.5"),
    (ann.KAI_FRACTION, "0"), (ann.KAI_FRACTION, "nan"),
])
def test_annotations_refused(key: str, value: str) -> None:
    with pytest.raises(ann.AnnotationError, match=key):
        ann.settings({key: value}, mem_total=GIB, shares=1, nshares=1)


def test_job_name_stable_and_distinct() -> None:
    a = response.job_name(["x-share-1", "x-share-0"])
    assert a == response.job_name(["x-share-0", "x-share-1"])
    assert a != response.job_name(["x-share-0"])
    assert a.startswith(response.JOB_PREFIX) and len(a) <= 63


def test_container_response_from_plan(tmp_path: Path) -> None:
    plan = Plan(job="k8s-abc", env={"TGS_SEGMENT": "/run/tgs/seg/k8s-abc.seg"},
                mounts=[Mount("/host/lib.so", "/usr/local/lib/tgs/libtgs.so"),
                        Mount("/seg/k8s-abc.seg", "/run/tgs/seg/k8s-abc.seg", readonly=False)])
    r = response.container_response(plan)
    assert dict(r.envs) == plan.env and r.annotations["tgs.io/job"] == "k8s-abc"
    assert [(m.host_path, m.container_path, m.read_only) for m in r.mounts] == [
        ("/host/lib.so", "/usr/local/lib/tgs/libtgs.so", True),
        ("/seg/k8s-abc.seg", "/run/tgs/seg/k8s-abc.seg", False)]
    r = response.container_response(plan, str(tmp_path))
    assert [d.name for d in r.cdi_devices] == ["tgs.io/gpu=k8s-abc"] and not r.mounts
    assert (tmp_path / "tgs.io-gpu-k8s-abc.json").is_file()


def test_gpu_handoff_in_both_response_forms(tmp_path: Path) -> None:
    assert response.gpu_handoff("env", UUID) == ({"NVIDIA_VISIBLE_DEVICES": UUID}, [])
    assert response.gpu_handoff("cdi", UUID) == ({}, [f"nvidia.com/gpu={UUID}"])
    assert response.gpu_handoff("none", UUID) == ({}, [])
    plan = Plan(job="j", env={"TGS_SEGMENT": "/s"}, mounts=[Mount("/a", "/b")])
    r = response.container_response(plan, extra_env={"NVIDIA_VISIBLE_DEVICES": UUID},
                                    extra_cdi=["nvidia.com/gpu=0"])
    assert dict(r.envs) == {"TGS_SEGMENT": "/s", "NVIDIA_VISIBLE_DEVICES": UUID}
    assert [d.name for d in r.cdi_devices] == ["nvidia.com/gpu=0"] and len(r.mounts) == 1
    r = response.container_response(plan, str(tmp_path), extra_cdi=[f"nvidia.com/gpu={UUID}"])
    assert [d.name for d in r.cdi_devices] == ["tgs.io/gpu=j", f"nvidia.com/gpu={UUID}"]
    assert not r.envs and not r.mounts


def test_relocate_copies_image_files_only(tmp_path: Path) -> None:
    image, segdir, host = tmp_path / "image", tmp_path / "seg", tmp_path / "host-lib"
    image.mkdir()
    segdir.mkdir()
    (image / "libtgs.so").write_bytes(b"shim")
    (segdir / "j.ctl").write_bytes(b"ctl")
    (segdir / "j.seg").write_bytes(b"seg")
    plan = Plan(job="j", mounts=[Mount(str(image / "libtgs.so"), "/lib/tgs.so"),
                                 Mount(str(segdir / "j.ctl"), "/run/tgs/seg/j.ctl"),
                                 Mount(str(segdir / "j.seg"), "/run/tgs/seg/j.seg", False)])
    out = response.relocate(plan, host, [str(segdir)])
    assert [m.host for m in out.mounts] == [str(host / "libtgs.so"), str(segdir / "j.ctl"),
                                            str(segdir / "j.seg")]
    assert (host / "libtgs.so").read_bytes() == b"shim"
    assert plan.mounts[0].host == str(image / "libtgs.so")       # the input is unchanged
    # again, with a new shim in the image: replaced (by rename), not written in place
    before = (host / "libtgs.so").stat().st_ino
    (image / "libtgs.so").write_bytes(b"shim v2")
    response.relocate(plan, host, [str(segdir)])
    assert (host / "libtgs.so").read_bytes() == b"shim v2"
    assert (host / "libtgs.so").stat().st_ino != before


@pytest.mark.parametrize("args,word", [
    (["--default", "tgs.io/priority"], "KEY=VALUE"),
    (["--shares", "0"], "--shares"),
    (["--health-interval", "0"], "--health-interval"),
    (["--kubeconfig", "KUBECONFIG"], "exec"),
    (["--unhealthy-after", "0"], "--unhealthy-after"),
    (["--pod-name", "tgs-node-x1"], "--pod-name/--pod-namespace"),
])
def test_cli_refuses_bad_options(tmp_path: Path, args: list[str], word: str) -> None:
    from click.testing import CliRunner
    from tgs.k8s.main import cli
    kc = tmp_path / "kubeconfig"
    kc.write_text("current-context: c\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n"
                  "clusters: [{name: c, cluster: {server: 'https://x'}}]\n"
                  "users: [{name: u, user: {exec: {command: aws}}}]\n")
    args = [str(kc) if a == "KUBECONFIG" else a for a in args]
    r = CliRunner(env={"POD_NAME": None, "POD_NAMESPACE": None}).invoke(
        cli, ["--plugin-dir", str(tmp_path), *args])
    assert r.exit_code == 2 and word in r.output, r.output


def test_check_ids_accepts_exactly_the_advertised_ids() -> None:
    ids = shares.all_ids(GPUS, 3)
    shares.check_ids(ids, GPUS, 3)                       # every advertised ID, in one request
    shares.check_ids([], GPUS, 3, empty_ok=True)
    for bad in (f"{UUID}-share-3", f"{UUID}-share-1\n", f"{UUID}-share-\u0661",
                f"{UUID}-share-00", f"{UUID.upper()}-share-0"):
        with pytest.raises(ShareError):
            shares.check_ids([bad], GPUS, 3)
    with pytest.raises(ShareError):
        shares.split_id(f"{UUID}-share-1\n")             # $ would take the newline

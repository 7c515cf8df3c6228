"""tgs-inject outputs checked structurally: CDI spec, Pod patch, rewritten command, glibc
check, tgs-entrypoint (no container runtime needed)."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from tgs.tools import inject as inject_mod
from tgs.tools.elfver import glibc_needed, glibc_provided
from tgs.tools.injection import CTR_SHIM, ENTRYPOINT
from tools_helpers import Ctl

ROOT = Path(__file__).resolve().parents[2]
POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: train
spec:
  containers:
  - name: main
    image: pytorch:latest
    env:
    - name: KEEP
      value: "1"
  - name: sidecar
    image: busybox
  volumes:
  - name: data
    emptyDir: {}
"""


def invoke(ctl: Ctl, *args: str, input: str | None = None):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(inject_mod.cli, ["--controller", ctl.addr, *args], input=input,
                              env={"TGS_RUNTIME_DIR": str(ctl.runtime),
                                   # the test's own simulated GPU, never the user's default one
                                   "TGS_SIM_STATE": ctl.env["TGS_SIM_STATE"]})


@pytest.fixture
def job(ctl: Ctl) -> str:
    r = ctl.run("tgsctl", "add", "web", "--mem", "1GiB")
    assert r.returncode == 0, r.stderr
    return "web"


def test_cdi_spec_fields(ctl: Ctl, job: str, tmp_path: Path) -> None:
    r = invoke(ctl, "cdi", "--job", job, "--out", str(tmp_path / "cdi"))
    assert r.exit_code == 0, r.output
    (path,) = (tmp_path / "cdi").iterdir()
    spec = json.loads(path.read_text())
    major, minor, _ = (int(x) for x in spec["cdiVersion"].split("."))
    assert (major, minor) >= (0, 5)
    assert re.fullmatch(r"[a-z0-9.-]+\.[a-z]+/[a-z0-9_.-]+", spec["kind"]) and \
        spec["kind"] == "tgs.io/gpu"
    (dev,) = spec["devices"]
    assert dev["name"] == job
    edits = dev["containerEdits"]
    env = dict(e.split("=", 1) for e in edits["env"])
    assert env["LD_PRELOAD"] == CTR_SHIM and env["TGS_SEGMENT"] == "/run/tgs/seg/web.seg"
    assert env["TGS_SIM_STATE"] and env["LD_LIBRARY_PATH"]    # the controller's GPU is simulated
    by_ctr = {m["containerPath"]: m for m in edits["mounts"]}
    for m in edits["mounts"]:
        assert Path(m["hostPath"]).is_absolute() and Path(m["hostPath"]).exists()
        assert "bind" in m["options"] and ({"ro", "rw"} & set(m["options"]))
    assert "ro" in by_ctr[CTR_SHIM]["options"]
    assert "rw" in by_ctr["/run/tgs/seg/web.seg"]["options"]
    assert "ro" in by_ctr["/run/tgs/seg/device-0.seg"]["options"]
    assert "/usr/local/lib/tgs/sim/libcuda.so.1" in by_ctr
    # --no-sim: no simulated driver; --preload-file: /etc/ld.so.preload instead of LD_PRELOAD
    r = invoke(ctl, "cdi", "--job", job, "--out", "-", "--no-sim", "--preload-file")
    edits = json.loads(r.output)["devices"][0]["containerEdits"]
    assert not any(e.startswith(("LD_PRELOAD=", "TGS_SIM_STATE=")) for e in edits["env"])
    pre = {m["containerPath"]: m for m in edits["mounts"]}["/etc/ld.so.preload"]
    assert Path(pre["hostPath"]).read_text().strip() == CTR_SHIM and "ro" in pre["options"]


def test_cdi_unknown_job(ctl: Ctl, tmp_path: Path) -> None:
    r = invoke(ctl, "cdi", "--job", "ghost", "--out", str(tmp_path))
    assert r.exit_code == 2 and "tgsctl add ghost" in r.output


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_k8s_patch_round_trips(ctl: Ctl, job: str, fmt: str) -> None:
    src = POD if fmt == "yaml" else json.dumps(yaml.safe_load(POD))
    r = invoke(ctl, "k8s", "--job", job, "--container", "main", input=src)
    assert r.exit_code == 0, r.output
    out = r.output
    pod = json.loads(out) if fmt == "json" else yaml.safe_load(out)
    assert (out.lstrip().startswith("{")) == (fmt == "json")
    main, side = pod["spec"]["containers"]
    assert "volumeMounts" not in side and "env" not in side
    vols = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert "data" in vols
    for vm in main["volumeMounts"]:
        assert vols[vm["name"]]["hostPath"]["path"]
    mounted = {vm["mountPath"]: vm for vm in main["volumeMounts"]}
    assert mounted[CTR_SHIM]["readOnly"] is True
    assert mounted["/run/tgs/seg/web.seg"]["readOnly"] is False
    env = {e["name"]: e["value"] for e in main["env"]}
    assert env["KEEP"] == "1" and env["TGS_SEGMENT"] == "/run/tgs/seg/web.seg"
    # patching the patched manifest changes nothing
    again = invoke(ctl, "k8s", "--job", job, "--container", "main", input=out)
    assert again.output == out
    # all containers by default
    every = yaml.safe_load(invoke(ctl, "k8s", "--job", job, input=POD).output)
    assert all("TGS_SEGMENT" in {e["name"] for e in c["env"]}
               for c in every["spec"]["containers"])


def test_k8s_deployment_in_a_multi_document_file(ctl: Ctl, job: str) -> None:
    pod = yaml.safe_load(POD)
    deploy = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "train"},
              "spec": {"replicas": 1, "template": {"metadata": {"labels": {"app": "t"}},
                                                   "spec": pod["spec"]}}}
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "t"}, "spec": {}}
    r = invoke(ctl, "k8s", "--job", job, "--container", "main",
               input=yaml.safe_dump_all([svc, deploy], sort_keys=False))
    assert r.exit_code == 0, r.output
    got_svc, got = yaml.safe_load_all(r.output)
    assert got_svc == svc
    main = got["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "TGS_SEGMENT", "value": "/run/tgs/seg/web.seg"} in main["env"]
    r = invoke(ctl, "k8s", "--job", job, input=yaml.safe_dump(svc))
    assert r.exit_code == 2 and "Deployment" in r.output and "(got Service)" in r.output


def test_k8s_bad_input(ctl: Ctl, job: str) -> None:
    for src, needle in [("kind: Service\nspec: {}\n", "kind: Pod"), ("{not json", "valid"),
                        (POD.replace("containers:", "initContainers:"), "containers")]:
        r = invoke(ctl, "k8s", "--job", job, input=src)
        assert r.exit_code == 2 and needle in r.output, r.output
    r = invoke(ctl, "k8s", "--job", job, "--container", "nope", input=POD)
    assert r.exit_code == 2 and "sidecar" in r.output


def test_run_print_rewrites_command(ctl: Ctl) -> None:
    r = invoke(ctl, "run", "--name", "printed", "--mem", "2GiB", "--preload-file", "--print",
               "--", "podman", "run", "--rm", "img:1", "python", "train.py")
    assert r.exit_code == 0, r.output
    argv = shlex.split(r.output)
    assert argv[:2] == ["podman", "run"] and argv[-4:] == ["--rm", "img:1", "python", "train.py"]
    vols = [argv[i + 1] for i, a in enumerate(argv) if a == "-v"]
    envs = [argv[i + 1] for i, a in enumerate(argv) if a == "-e"]
    assert any(v.endswith(":/etc/ld.so.preload:ro") for v in vols)
    assert any(v.endswith(":/run/tgs/seg/printed.seg:rw") for v in vols)
    assert "TGS_SEGMENT=/run/tgs/seg/printed.seg" in envs
    assert not any(e.startswith("LD_PRELOAD=") for e in envs)
    assert ctl.jobs()["printed"]["mem_quota"] == 2 << 30      # kept for the printed command
    # an opportunistic container (the default) gets the lowest CPU share, as tgs-run's nice 19;
    # the user's own flag comes after it (the engines take the last one)
    assert argv[2:4] == ["--cpu-shares", "2"]
    for prio, cpu in (("production", []), ("opportunistic", ["--cpu-shares", "2"])):
        r = invoke(ctl, "run", "--priority", prio, "--print", "--", "podman", "run",
                   "--cpu-shares", "512", "img:1")
        argv = shlex.split(r.output)
        assert r.exit_code == 0 and argv[2:2 + len(cpu)] == cpu, r.output
        assert argv[-3:] == ["--cpu-shares", "512", "img:1"]
    r = invoke(ctl, "run", "--", "kubectl", "run", "x")
    assert r.exit_code == 2 and "podman" in r.output


def _old_libc(tmp_path: Path) -> Path:
    """A root file system whose libc.so.6 defines GLIBC versions only up to 2.17."""
    root = tmp_path / "oldroot"
    lib = root / "lib" / "x86_64-linux-gnu"
    lib.mkdir(parents=True)
    (tmp_path / "v.map").write_text("GLIBC_2.2.5 { global: f; local: *; };\n"
                                    "GLIBC_2.17 { global: g; } GLIBC_2.2.5;\n")
    (tmp_path / "c.c").write_text("int f(void){return 1;} int g(void){return 2;}\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib / "libc.so.6"),
                    str(tmp_path / "c.c"), f"-Wl,--version-script={tmp_path / 'v.map'}"],
                   check=True)
    return root


def test_glibc_baseline_check(ctl: Ctl, job: str, tmp_path: Path) -> None:
    need = glibc_needed(ROOT / "build" / "libtgs.so")
    assert need is not None and need >= (2, 2)
    assert glibc_provided(_old_libc(tmp_path) / "lib/x86_64-linux-gnu/libc.so.6") == (2, 17)
    r = invoke(ctl, "cdi", "--job", job, "--out", "-", "--rootfs", str(tmp_path / "oldroot"))
    assert r.exit_code == 2 and "older than" in r.output and "2.17" in r.output
    r = invoke(ctl, "run", "--name", "old", "--", "podman", "run", "--rootfs",
               str(tmp_path / "oldroot"), "/bin/true")
    assert r.exit_code == 2 and "older than" in r.output
    assert "old" not in ctl.jobs()                          # refused: nothing left behind
    r = invoke(ctl, "cdi", "--job", job, "--out", "-", "--rootfs", str(tmp_path))
    assert r.exit_code == 2 and "no libc.so.6" in r.output
    assert "needs glibc >=" in invoke(ctl, "baseline").output


def test_entrypoint_script(tmp_path: Path) -> None:
    shim = tmp_path / "libtgs.so"
    shim.write_text("")
    cmd = ["sh", str(ENTRYPOINT), "sh", "-c", 'echo "[$LD_PRELOAD]"']
    env = {"TGS_SHIM": str(shim), "LD_PRELOAD": "/x.so", "PATH": "/bin:/usr/bin"}
    out = subprocess.run(cmd, env=env,
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == f"[{shim}:/x.so]"
    out = subprocess.run(cmd, env={"TGS_SHIM": str(tmp_path / "none.so"), "PATH": "/bin:/usr/bin"},
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    assert subprocess.run(["sh", str(ENTRYPOINT)], capture_output=True).returncode == 2


def test_no_writable_mount_is_shared_with_another_tenant(ctl: Ctl, job: str) -> None:
    """Isolation: the only writable TGS mounts are the job's own .seg and .pub;
    the controller's files (.ctl, device segment) and the other tenants' pubs are read-only,
    and nothing one job may write is mounted into another job's container at all."""
    assert ctl.run("tgsctl", "add", "other", "--priority", "production").returncode == 0

    def mounts(name: str) -> list[dict[str, object]]:
        r = invoke(ctl, "cdi", "--job", name, "--out", "-", "--no-sim")
        assert r.exit_code == 0, r.output
        return json.loads(r.output)["devices"][0]["containerEdits"]["mounts"]

    seg = Path(ctl.jobs()[job]["segment"])
    web, other = mounts(job), mounts("other")
    rw = {Path(str(m["hostPath"])).resolve() for m in web if "rw" in m["options"]}  # type: ignore[operator]
    assert rw == {seg.resolve(), (seg.parent / "pub" / f"{job}.pub").resolve()}
    by_ctr = {m["containerPath"]: m for m in web}
    for path in ("/run/tgs/seg/web.ctl", "/run/tgs/seg/device-0.seg", "/run/tgs/seg/pub"):
        assert "ro" in by_ctr[path]["options"], path  # type: ignore[operator]
    for m in other:
        host = Path(str(m["hostPath"])).resolve()
        assert host not in rw or host.is_dir()
        if "rw" in m["options"]:  # type: ignore[operator]
            assert host.name.startswith("other."), host
    # a pub of "web" is visible to "other" only through the read-only pub directory
    assert not any(Path(str(m["hostPath"])).name == f"{job}.pub" for m in other)
    r = invoke(ctl, "cdi", "--job", job, "--out", "-", "--no-sim")
    edits = json.loads(r.output)["devices"][0]["containerEdits"]
    env = dict(e.split("=", 1) for e in edits["env"])
    assert env["TGS_PUB"] == "/run/tgs/own/web.pub" and env["TGS_CTL"] == "/run/tgs/seg/web.ctl"

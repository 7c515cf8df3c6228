"""A job over two simulated GPUs through the tools and a real controller: `tgsctl add --device
0,1`, `tgs-run --device 0,1` (CUDA_VISIBLE_DEVICES by UUID, TGS_PARTS), usage per device in
`tgsctl ls --json`, and bad device lists refused with the tools' usage status."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest
from proc_helpers import wait_for
from tgs.controller.devices import _sim_uuid
from tgs.intercept import devseg, simstate
from tools_helpers import Ctl, Probe, probe_cmd, start_ctl

pytestmark = pytest.mark.timeout(120)
MIB = 1 << 20


@pytest.fixture
def ctl2(tmp_path: Path, sim_env: dict[str, str]) -> Iterator[Ctl]:
    """A controller over two simulated GPUs; it creates the simulator's state file (the
    parts' UUIDs are the simulator's, from its seed)."""
    env = {k: v for k, v in sim_env.items() if k != "CUDA_VISIBLE_DEVICES"}
    env["TGS_SIM_DEVICES"] = "2"
    assert not simstate.state_path(env).exists()
    yield from start_ctl(tmp_path, env)


def sim_uuids(ctl: Ctl) -> list[str]:
    path = simstate.state_path(ctl.env)
    hdr = simstate.SimHeader.from_buffer_copy(path.read_bytes()[:128])
    return [_sim_uuid(int(hdr.uuid_seed), i) for i in range(2)]


def test_tgsctl_add_over_two_devices(ctl2: Ctl, tmp_path: Path) -> None:
    out = ctl2.json("tgsctl", "add", "mj", "--device", "0,1", "--mem", "64MiB", "--json")
    job = out["job"]
    assert [(d["name"], d["device"]) for d in job["devices"]] == [("mj@0", 0), ("mj@1", 1)]
    seg_dir = Path(job["segment"]).parent
    for k in range(2):
        for leaf in (f"mj@{k}.seg", f"mj@{k}.ctl", f"pub/mj@{k}.pub"):
            assert (seg_dir / leaf).is_file(), leaf
    assert out["env"]["CUDA_VISIBLE_DEVICES"].split(",") == sim_uuids(ctl2)
    # each device's table lists that device's part (the loop's per-device control)
    def listed(k: int) -> list[str]:
        with devseg.open_device(devseg.device_segment_path(seg_dir, k)) as d:
            return [j.name for j in d.jobs()]
    assert wait_for(lambda: listed(0) == ["mj@0"] and listed(1) == ["mj@1"], timeout=10)
    st = ctl2.json("tgsctl", "status", "--json")
    assert st["protocol_minor"] == 3


def test_tgs_run_over_two_devices_charges_each_part(ctl2: Ctl, probes: list[Probe]) -> None:
    env = dict(ctl2.env, MEMPROBE_DEVICE="1")
    p = Probe(probe_cmd("--name", "mr", "--device", "0,1", "--mem", "8MiB"), env)
    probes.append(p)
    uuids = sim_uuids(ctl2)                   # the state file the registration made
    assert p.info()[1] == 8 * MIB                          # device 1's part: the quota
    assert p.ask(f"alloc {4 * MIB}") == "alloc 0"
    jobs = ctl2.jobs()
    assert [d["device_uuid"] for d in jobs["mr"]["devices"]] == ["GPU-sim-0", "GPU-sim-1"]

    def per_device() -> list[int | None]:
        return [d.get("mem_used") for d in ctl2.jobs()["mr"]["devices"]]
    assert wait_for(lambda: per_device() == [0, 4 * MIB], timeout=10), per_device()
    ls = ctl2.json("tgsctl", "ls", "--json")
    mr = next(j for j in (ls if isinstance(ls, list) else ls["jobs"]) if j["name"] == "mr")
    assert mr["mem_used"] == 4 * MIB and mr["processes"] == 1
    text = ctl2.run("tgsctl", "ls").stdout                # the text view: both GPUs, and
    row = next(ln.split() for ln in text.splitlines() if ln.startswith("mr "))
    assert row[3] == "0,1"                                  # the process found in part 1
    assert any(ln.strip().startswith("mr: pid") for ln in text.splitlines()), text
    # the command ran with the job's devices, by UUID, in the job's order
    kids = Path(f"/proc/{p.proc.pid}/task/{p.proc.pid}/children").read_text().split()
    env_line = Path(f"/proc/{kids[0]}/environ").read_bytes().split(b"\0")
    seen = {ln.split(b"=", 1)[0]: ln.split(b"=", 1)[1] for ln in env_line if b"=" in ln}
    assert seen.get(b"CUDA_VISIBLE_DEVICES", b"").decode().split(",") == uuids
    assert p.close() == 0
    assert wait_for(lambda: "mr" not in ctl2.jobs(), timeout=15)


@pytest.mark.parametrize("devices", ["0,0", "0,5", "0,,1", "0,x", ",".join(["0"] * 17)])
def test_bad_device_lists_exit_2(ctl2: Ctl, devices: str) -> None:
    r = ctl2.run("tgsctl", "add", "bad", "--device", devices)
    assert r.returncode == 2, r.stderr
    assert "bad" not in ctl2.jobs()
    r = ctl2.run("tgs-run", "--name", "bad2", "--device", devices, "--", "true")
    assert r.returncode in (2, 125), r.stderr      # tgs-run's own failures exit 125
    assert "bad2" not in ctl2.jobs()


def test_tgs_inject_plans_every_part(ctl2: Ctl) -> None:
    """`tgs-inject run --device 0,1 --print`: every part's files mounted, TGS_PARTS and
    CUDA_VISIBLE_DEVICES (the simulator's UUIDs) in the container's environment."""
    r = ctl2.run("tgs-inject", "run", "--name", "ij", "--device", "0,1", "--sim", "--print",
                 "--", "podman", "run", "img", "true")
    assert r.returncode == 0, r.stderr
    words = shlex.split(r.stdout)
    envs = dict(w.split("=", 1) for w in (words[i + 1] for i, w in enumerate(words)
                                          if w == "-e"))
    assert envs["TGS_PARTS"] == "/run/tgs/seg/ij@0.seg;/run/tgs/seg/ij@1.seg"
    assert envs["CUDA_VISIBLE_DEVICES"].split(",") == sim_uuids(ctl2)
    assert "TGS_CTL" not in envs and "TGS_DEVICE_SEG" not in envs
    vols = [words[i + 1] for i, w in enumerate(words) if w == "-v"]
    for leaf in ("ij@0.ctl", "ij@1.ctl", "device-0.seg", "device-1.seg"):
        assert any(v.endswith(f"/run/tgs/seg/{leaf}:ro") for v in vols), (leaf, vols)
    for k in range(2):
        assert any(v.endswith(f"/run/tgs/own/ij@{k}.pub:rw") for v in vols), vols
        assert any(v.endswith(f"/run/tgs/seg/ij@{k}.seg:rw") for v in vols), vols
    ctl2.run("tgsctl", "rm", "ij")

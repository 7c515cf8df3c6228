"""What a container needs to run a process as part of a TGS job: mounts and environment.

One Plan feeds every injection route (docker/podman flags, a CDI spec, a Pod patch).
Container paths are fixed, so images and entrypoints can rely on them:
  /usr/local/lib/tgs/libtgs.so        the shim (read-only)
  /run/tgs/seg/<job>.ctl              the job's control segment (read-only: the controller's)
  /run/tgs/seg/<job>.seg              the job's segment (read-write: this job's ledger and slots)
  /run/tgs/seg/device-<i>.seg         the GPU's device segment (read-only: the jobs on the GPU)
  /run/tgs/seg/pub/                   the publish pages of every job (read-only directory)
  /run/tgs/own/<job>.pub              this job's own publish page (read-write; TGS_PUB)
  (a job over several GPUs: every part's <job>@<k>.ctl/.seg/own pub and device-<i>.seg, and
   TGS_PARTS naming the parts' segments; docs/segment.md)
  /etc/ld.so.preload                  with --preload-file: a generated, read-only file
  /usr/local/bin/tgs-entrypoint       the entrypoint wrapper (read-only)
Isolation (docs/segment.md): the only writable TGS mounts are the job's own .seg and .pub; what
the job reads of other tenants (their pubs) and of the controller is mounted read-only.
Simulated mode (no real GPU) adds the simulated driver as the container's libcuda.so.1
and its state file, as the NVIDIA container toolkit hands a container the real driver.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tgs.client import paths
from tgs.intercept.control import ctl_path
from tgs.intercept.devseg import device_segment_path
from tgs.intercept.locate import build_path, find_shim
from tgs.intercept.pub import pub_path
from tgs.intercept.simfile import ensure_state_file

from .elfver import ElfError, Version, find_libc, glibc_needed, glibc_provided, vstr

CTR_LIB_DIR = "/usr/local/lib/tgs"
CTR_SHIM = f"{CTR_LIB_DIR}/libtgs.so"
CTR_SEG_DIR = "/run/tgs/seg"
CTR_PUB_DIR = f"{CTR_SEG_DIR}/pub"
CTR_OWN_DIR = "/run/tgs/own"
CTR_SIM_DIR = f"{CTR_LIB_DIR}/sim"
CTR_SIM_STATE = "/run/tgs/sim-state"
CTR_PRELOAD = "/etc/ld.so.preload"
CTR_ENTRYPOINT = "/usr/local/bin/tgs-entrypoint"
ENTRYPOINT = Path(__file__).resolve().parent / "tgs-entrypoint"
SIM_LIB_ENV = "TGS_SIM_LIB"


class InjectError(Exception):
    pass


@dataclass(frozen=True)
class Mount:
    host: str
    container: str
    readonly: bool = True
    directory: bool = False


@dataclass
class Plan:
    job: str
    env: dict[str, str] = field(default_factory=dict)
    mounts: list[Mount] = field(default_factory=list)
    sim: bool = False
    baseline: Version | None = None           # newest GLIBC_x.y the injected libraries need

    def env_list(self) -> list[str]:
        return [f"{k}={v}" for k, v in sorted(self.env.items())]


def find_sim_lib() -> Path:
    env = os.environ.get(SIM_LIB_ENV)
    cands = [Path(env)] if env else []
    cands.append(build_path("sim", "libcuda.so.1"))
    for c in cands:
        if c.is_file():
            return c.resolve()
    raise InjectError(f"simulated driver not found (set {SIM_LIB_ENV} or run `make`)")


def sim_state_file() -> Path:
    """The simulator's state file, created when it does not exist: a bind mount needs the
    file to be there."""
    try:
        return ensure_state_file(find_sim_lib())
    except OSError as exc:
        raise InjectError(str(exc)) from None


def work_dir(job: str) -> Path:
    """Host files generated for a job (ld.so.preload) live here."""
    d = paths.default_runtime_dir() / "inject" / job
    d.mkdir(parents=True, exist_ok=True)
    return d


def make_plan(job: dict[str, Any], *, sim: bool, preload_file: bool,
              shim: str | None = None) -> Plan:
    """A Plan for a registered job (an entry of the controller's list/register reply)."""
    name, seg = job["name"], job.get("segment")
    if not seg or not Path(seg).exists():
        raise InjectError(f"job {name}: its segment {seg} is not on this node")
    shim_path = Path(shim) if shim else find_shim()
    plan = Plan(job=name, sim=sim)
    seg_p = Path(seg)
    ctr_seg = f"{CTR_SEG_DIR}/{seg_p.name}"
    ctl, pub = ctl_path(seg_p), pub_path(seg_p, name)
    plan.mounts.append(Mount(str(shim_path), CTR_SHIM))
    if ctl.exists():
        plan.mounts.append(Mount(str(ctl), f"{CTR_SEG_DIR}/{ctl.name}"))
    plan.mounts.append(Mount(str(seg), ctr_seg, readonly=False))
    dev_seg = device_segment_path(seg_p.parent, job.get("device", 0))
    if dev_seg.exists():
        plan.mounts.append(Mount(str(dev_seg), f"{CTR_SEG_DIR}/{dev_seg.name}"))
    if pub.parent.is_dir():
        plan.mounts.append(Mount(str(pub.parent), CTR_PUB_DIR, directory=True))
    if pub.exists():
        plan.mounts.append(Mount(str(pub), f"{CTR_OWN_DIR}/{pub.name}", readonly=False))
        plan.env["TGS_PUB"] = f"{CTR_OWN_DIR}/{pub.name}"
    if ENTRYPOINT.exists():
        plan.mounts.append(Mount(str(ENTRYPOINT), CTR_ENTRYPOINT))
    plan.env.update(TGS_SEGMENT=ctr_seg, TGS_SHIM=CTR_SHIM, TGS_CTL=f"{CTR_SEG_DIR}/{ctl.name}",
                    TGS_PUB_DIR=CTR_PUB_DIR,
                    TGS_DEVICE_SEG=f"{CTR_SEG_DIR}/{dev_seg.name}")
    parts = job.get("devices") or []
    if len(parts) > 1:
        _add_parts(plan, parts)
    libs = [shim_path]
    if preload_file:
        f = work_dir(name) / "ld.so.preload"
        f.write_text(CTR_SHIM + "\n")
        f.chmod(0o644)
        plan.mounts.append(Mount(str(f), CTR_PRELOAD))
    else:
        plan.env["LD_PRELOAD"] = CTR_SHIM
    if sim:
        sim_lib = find_sim_lib()
        libs.append(sim_lib)
        plan.mounts.append(Mount(str(sim_lib), f"{CTR_SIM_DIR}/libcuda.so.1"))
        nvml = sim_lib.with_name("libnvidia-ml.so.1")   # NVML comes with the driver, as real
        if nvml.exists():
            libs.append(nvml)
            plan.mounts.append(Mount(str(nvml), f"{CTR_SIM_DIR}/libnvidia-ml.so.1"))
        plan.mounts.append(Mount(str(sim_state_file()), CTR_SIM_STATE, readonly=False))
        plan.env.update(LD_LIBRARY_PATH=CTR_SIM_DIR, TGS_SIM_STATE=CTR_SIM_STATE)
    try:
        needs = [v for v in (glibc_needed(p) for p in libs) if v is not None]
    except (OSError, ElfError) as exc:
        raise InjectError(f"cannot read {shim_path}: {exc}") from exc
    plan.baseline = max(needs) if needs else None
    return plan


def _add_parts(plan: Plan, parts: list[dict[str, Any]]) -> None:
    """A multi-device job (docs/segment.md): every part's .ctl, .seg, own pub and device
    segment, TGS_PARTS naming the parts' segments in the container, and the devices'
    CUDA UUIDs, in the job's order, as CUDA_VISIBLE_DEVICES.  The shim finds each part's
    .ctl and device segment beside its .seg, its own pub in TGS_PUB's directory."""
    have = {m.container for m in plan.mounts}
    ctr_segs = []
    for part in parts:
        seg_p = Path(part["segment"])
        if not seg_p.exists():
            raise InjectError(f"part {part['name']}: its segment {seg_p} is not on this node")
        ctl, pub = ctl_path(seg_p), pub_path(seg_p, part["name"])
        dev_seg = device_segment_path(seg_p.parent, part["device"])
        ctr_segs.append(f"{CTR_SEG_DIR}/{seg_p.name}")
        for m in (Mount(str(ctl), f"{CTR_SEG_DIR}/{ctl.name}"),
                  Mount(str(seg_p), f"{CTR_SEG_DIR}/{seg_p.name}", readonly=False),
                  Mount(str(dev_seg), f"{CTR_SEG_DIR}/{dev_seg.name}"),
                  Mount(str(pub), f"{CTR_OWN_DIR}/{pub.name}", readonly=False)):
            if m.container not in have and Path(m.host).exists():
                plan.mounts.append(m)
                have.add(m.container)
    for key in ("TGS_CTL", "TGS_DEVICE_SEG"):        # one file each: the parts have several
        plan.env.pop(key, None)
    plan.env["TGS_PARTS"] = ";".join(ctr_segs)
    plan.env["TGS_PUB"] = f"{CTR_OWN_DIR}/{parts[0]['name']}.pub"      # its directory counts
    plan.env["CUDA_VISIBLE_DEVICES"] = ",".join(str(p.get("cuda_uuid") or p["device_uuid"])
                                                for p in parts)


def check_rootfs(plan: Plan, rootfs: str | Path) -> str:
    """Refuse a root file system whose libc is older than the shim's glibc baseline
    (every process in it would fail to start); returns a one-line verdict."""
    libc = find_libc(rootfs)
    if libc is None:
        raise InjectError(f"{rootfs}: no libc.so.6 found: the shim needs glibc >= "
                          f"{vstr(plan.baseline)} in the container (musl images cannot load it)")
    try:
        have = glibc_provided(libc)
    except (OSError, ElfError) as exc:
        raise InjectError(f"{libc}: {exc}") from exc
    if plan.baseline is not None and (have is None or have < plan.baseline):
        raise InjectError(
            f"{rootfs}: its glibc {vstr(have)} is older than {vstr(plan.baseline)}, which the "
            f"TGS shim needs: every process in the container would fail to start. Use an image "
            f"with glibc >= {vstr(plan.baseline)} or build the shim against an older glibc.")
    return f"glibc {vstr(have)} in {rootfs} >= {vstr(plan.baseline)} needed by the shim"

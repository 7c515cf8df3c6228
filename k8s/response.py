"""What the kubelet hands the runtime for one container: from an injection Plan.

The Plan (tools/injection.py) is the one description of what a container of a TGS job
needs; this module only translates it: mounts and env (every runtime), or a CDI device
name (runtimes with CDI, the kubelet's DevicePluginCDIDevices feature) with the same
edits written into a CDI spec (tools/cdi.py).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

from tgs.tools import cdi
from tgs.tools.injection import Mount, Plan

from .api import dp

JOB_PREFIX = "k8s-"
JOB_ANNOTATION = "tgs.io/job"


def job_name(ids: Iterable[str]) -> str:
    """A job name for a set of device IDs: the same set always gives the same name (the
    kubelet may ask again for one allocation), distinct sets differ."""
    digest = hashlib.sha256("\n".join(sorted(ids)).encode()).hexdigest()
    return f"{JOB_PREFIX}{digest[:16]}"


HANDOFFS = ("env", "cdi", "none")
NVIDIA_ENV = "NVIDIA_VISIBLE_DEVICES"
NVIDIA_CDI_KIND = "nvidia.com/gpu"


def gpu_handoff(how: str, *uuids: str) -> tuple[dict[str, str], list[str]]:
    """What makes the real GPU (device nodes, driver libraries) appear in the container,
    since this plugin, not NVIDIA's, answers for it: (env, CDI device names).
      env   NVIDIA_VISIBLE_DEVICES=<uuid>[,<uuid>...], for the NVIDIA container runtime (the default
            runtime on the node), as NVIDIA's own plugin does by default;
      cdi   the CDI devices nvidia.com/gpu=<uuid> (specs from `nvidia-ctk cdi generate
            --device-name-strategy=uuid`);
      none  nothing (the simulated GPU, whose driver comes with the plan).
    Several GPUs (a multi-device job): all of them, in the job's order."""
    if how == "env":
        return {NVIDIA_ENV: ",".join(uuids)}, []
    if how == "cdi":
        return {}, [f"{NVIDIA_CDI_KIND}={u}" for u in uuids]
    return {}, []


def container_response(plan: Plan, cdi_dir: str | None = None, *,
                       extra_env: dict[str, str] | None = None,
                       extra_cdi: list[str] | None = None) -> dp.ContainerAllocateResponse:
    annotations = {JOB_ANNOTATION: plan.job}
    extra = [dp.CDIDevice(name=n) for n in extra_cdi or []]
    if cdi_dir is not None:
        cdi.write(plan, cdi_dir)
        return dp.ContainerAllocateResponse(
            envs=dict(extra_env or {}), annotations=annotations,
            cdi_devices=[dp.CDIDevice(name=f"{cdi.KIND}={plan.job}"), *extra])
    return dp.ContainerAllocateResponse(
        envs={**plan.env, **(extra_env or {})}, annotations=annotations, cdi_devices=extra,
        mounts=[dp.Mount(container_path=m.container, host_path=m.host, read_only=m.readonly)
                for m in plan.mounts])


def _install(src: Path, dest_dir: Path) -> Path:
    """Copy `src` into dest_dir (same name) unless an identical copy is there; by rename, so
    a container that maps the old file keeps it."""
    dest = dest_dir / src.name
    data = src.read_bytes()
    if dest.is_file() and dest.read_bytes() == data:
        return dest
    dest_dir.mkdir(parents=True, exist_ok=True)
    tmp = dest_dir / f".{src.name}.tmp{os.getpid()}"
    tmp.write_bytes(data)
    shutil.copymode(src, tmp)
    os.replace(tmp, dest)
    return dest


def relocate(plan: Plan, host_lib_dir: str | Path, keep_under: Sequence[str]) -> Plan:
    """The plugin runs in a container: the shim, the entrypoint and the other read-only
    files of the plan are in its image, not on the node. Copy each into `host_lib_dir`
    (a hostPath the plugin shares with the node, at the same path) and point the mount
    there. Files under `keep_under` (the controller's segment and runtime directories,
    hostPaths already) and writable mounts stay as they are."""
    dest = Path(host_lib_dir)
    roots = [os.path.realpath(k) for k in keep_under] + [os.path.realpath(dest)]
    mounts: list[Mount] = []
    for m in plan.mounts:
        real = os.path.realpath(m.host)
        inside = any(real == r or real.startswith(r.rstrip("/") + "/") for r in roots)
        if m.readonly and not inside and os.path.isfile(real):
            m = Mount(str(_install(Path(real), dest)), m.container, m.readonly)
        mounts.append(m)
    return dataclasses.replace(plan, mounts=mounts)

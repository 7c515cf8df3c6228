"""The node's GPUs: real ones through NVML when it is there, the simulator's otherwise."""

from __future__ import annotations

import ctypes
import logging
from dataclasses import dataclass
from typing import Any

from tgs.intercept import simstate

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Device:
    index: int
    uuid: str
    name: str
    mem_total: int          # bytes
    kind: str               # "nvml" or "sim"

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "uuid": self.uuid, "name": self.name,
                "mem_total": self.mem_total, "kind": self.kind}


class DeviceError(Exception):
    pass


def nvml_devices() -> list[Device] | None:
    """Devices seen by NVML, or None when NVML (the driver) is not usable here."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:        # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return None
    try:
        out = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            uuid = pynvml.nvmlDeviceGetUUID(h)
            name = pynvml.nvmlDeviceGetName(h)
            mem = pynvml.nvmlDeviceGetMemoryInfo(h)
            out.append(Device(i, _text(uuid), _text(name), int(mem.total), "nvml"))
        return out
    except Exception as exc:
        log.warning("NVML present but unusable (%s): using the simulator's devices", exc)
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def sim_devices() -> list[Device]:
    """The simulated GPUs: from the simulator's state file (tgs.intercept.simstate, TGS_SIM_STATE)
    when it exists, else from the environment the simulator reads when it creates the file
    (TGS_SIM_DEVICES, TGS_SIM_MEM).  UUIDs are "GPU-sim-<index>" (the simulator derives its
    own from a per-file seed; register by index on simulated GPUs)."""
    try:
        snap = simstate.read_state()
        return [Device(d.index, f"GPU-sim-{d.index}", "TGS simulated GPU", int(d.mem_total),
                       "sim") for d in snap.devices]
    except Exception as exc:
        log.debug("simulator state not readable (%s): using its environment", exc)
    n, mem = simstate.env_devices()
    return [Device(i, f"GPU-sim-{i}", "TGS simulated GPU", mem, "sim") for i in range(n)]


_GOLDEN = 0x9E3779B97F4A7C15
_M64 = (1 << 64) - 1


def _sim_uuid(seed: int, index: int) -> str:
    """The simulated driver's UUID of device `index` (sim/device.c, cuDeviceGetUuid_v2):
    splitmix64 of the state file's seed, shaped as an RFC 4122 v4 UUID."""
    x = (seed + _GOLDEN * (index + 1)) & _M64
    raw = b""
    for _ in range(2):
        x = (x + _GOLDEN) & _M64
        z = x
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
        z ^= z >> 31
        raw += z.to_bytes(8, "little")
    b = bytearray(raw)
    b[6] = (b[6] & 0x0F) | 0x40
    b[8] = (b[8] & 0x3F) | 0x80
    h = b.hex()
    return f"GPU-{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def ensure_sim_state() -> None:
    """Create the simulator's state file (a cuInit in a child, as the injection does for its
    bind mount) when it does not exist: its seed gives the simulated GPUs' CUDA UUIDs."""
    if simstate.state_path().exists():
        return
    from tgs.intercept.locate import find_sim_lib_dir
    from tgs.intercept.simfile import ensure_state_file
    lib = find_sim_lib_dir()
    try:
        if lib is None:
            raise OSError("the simulated driver was not found (run `make`)")
        ensure_state_file(lib / "libcuda.so.1")
    except OSError as exc:
        log.warning("no simulator state file (%s): multi-device jobs' parts get the "
                    "simulated GPUs' aliases (GPU-sim-<n>), which CUDA does not know", exc)


def cuda_uuid(dev: Device) -> str:
    """The UUID the CUDA driver reports for `dev` (cuDeviceGetUuid), which is what a shim
    matches a multi-device job's part by.  An NVML device's own UUID; for a simulated GPU
    ("GPU-sim-<n>", an alias) the simulator's UUID from its state file's seed (the file is
    created when missing: only a multi-device job's parts ask), or the alias without one."""
    if dev.kind != "sim":
        return dev.uuid
    ensure_sim_state()
    try:
        with open(simstate.state_path(), "rb") as f:
            head = f.read(ctypes.sizeof(simstate.SimHeader))
        hdr = simstate.SimHeader.from_buffer_copy(head)
        if hdr.magic != simstate.SIM_STATE_MAGIC or dev.index >= hdr.ndevices:
            return dev.uuid
        return _sim_uuid(int(hdr.uuid_seed), dev.index)
    except (OSError, ValueError) as exc:
        log.debug("simulator state not readable (%s): %s keeps its alias", exc, dev.uuid)
        return dev.uuid


def discover(force_sim: bool = False) -> list[Device]:
    """NVML devices when available (unless force_sim), else the simulated ones."""
    if not force_sim:
        devs = nvml_devices()
        if devs:
            return devs
        log.info("NVML not available: using the simulated GPUs")
    devs = sim_devices()
    if not devs:
        raise DeviceError("no GPU found (NVML and simulator both report none)")
    return devs


def find(devices: list[Device], ref: int | str) -> Device | None:
    for d in devices:
        if (isinstance(ref, int) and d.index == ref) or (isinstance(ref, str) and d.uuid == ref):
            return d
    return None

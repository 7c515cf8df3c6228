"""The reply half of the wire protocol: one typed dataclass per reply object of
docs/protocol.md (the requests are in protocol.py, which re-exports these).

Every place that assembles a reply builds one of these (Job.info, the loop's per-job
fields, the loop's and the server's status, main.py's daemon facts, the metrics tap's
GPUs), so a field is named once; tests/controller/test_protocol_doc.py checks the doc's
tables against the field lists here.  ``to_dict`` gives the wire form: optional fields
(``OPTIONAL``) are left out while None, every other field is always sent.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar


class Reply:
    """A reply object: the wire form is its fields, nested replies flattened or converted."""

    OPTIONAL: ClassVar[frozenset[str]] = frozenset()
    FLATTEN: ClassVar[frozenset[str]] = frozenset()   # nested replies merged into this object

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if f.name in self.OPTIONAL and value is None:
                continue
            if f.name in self.FLATTEN:
                if value is not None:
                    out.update(value.to_dict())
                continue
            out[f.name] = _wire(value)
        return out

    @classmethod
    def wire_fields(cls) -> list[str]:
        """The names this object can carry on the wire, flattened parts included."""
        out: list[str] = []
        for f in fields(cls):  # type: ignore[arg-type]
            if f.name in cls.FLATTEN:
                out += _FLATTENED[cls.__name__][f.name].wire_fields()
            else:
                out.append(f.name)
        return out


def _wire(value: Any) -> Any:
    if isinstance(value, Reply):
        return value.to_dict()
    if isinstance(value, (list, tuple)):
        return [_wire(v) for v in value]
    if isinstance(value, dict):
        return {k: _wire(v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class JobStats(Reply):
    """The control loop's fields of a job object, once the loop has seen the job."""

    processes: int
    mem_used: int
    segment_damaged: str | None        # why the job's .seg was not readable, else None
    work_rate: float
    launch_rate: float
    throttled_frac: float
    inflight: int
    rate: float | None                 # the job's work units per second, None = unlimited
    inflight_cap: int | None
    gate: int | None                   # GATE_* flags (segment.h): 1 PUBLISH, 2 WAIT, 4 FIT
    gate_max_wait_us: int | None
    control: str | None                # the rule that decided
    work_total: int | None = None      # exact totals since the controller started
    launches_total: int | None = None
    throttled_s_total: float | None = None
    block_rate: float | None = None    # thread blocks launched per second (TGS's unit)
    blocks_total: int | None = None
    # slots whose lock is held while the tenant's state word says free (counted live)
    segment_tampered: str | None = None
    segment_lies: int | None = None    # such slots found since the controller opened the job
    OPTIONAL = frozenset({"work_total", "launches_total", "throttled_s_total", "block_rate",
                          "blocks_total", "segment_tampered", "segment_lies"})


@dataclass(frozen=True)
class PartInfo(Reply):
    """One device of a multi-device job (protocol 1.2): its part and the loop's figures."""

    name: str                          # <job>@<k>
    device: int
    device_uuid: str                   # the node's UUID of the device
    cuda_uuid: str                     # what cuDeviceGetUuid says (a simulated GPU's differs)
    segment: str
    stats: JobStats | None = None
    FLATTEN = frozenset({"stats"})


@dataclass(frozen=True)
class JobInfo(Reply):
    """A job object (register, set, list)."""

    name: str
    priority: str
    weight: int
    mem_quota: int | None
    device: int
    device_uuid: str
    ephemeral: bool
    nslots: int
    segment: str
    state: str
    created: float
    mem_total: int = 0
    host_pinned_max: int = 0
    mem_fixed: bool = False            # 1.3: the job asked for fixed (not evictable) memory
    mem_evictable: bool = False        # 1.3: its device allocations are managed (evictable)
    devices: list[PartInfo] = field(default_factory=list)   # one per device, in order (1.2)
    stats: JobStats | None = None
    FLATTEN = frozenset({"stats"})


@dataclass(frozen=True)
class MetricsEntry(Reply):
    """One job of a metrics-stream message: its identity and the loop's fields."""

    name: str
    priority: str
    device: int
    state: str
    stats: JobStats | None = None
    FLATTEN = frozenset({"stats"})


@dataclass(frozen=True)
class MetricsMessage(Reply):
    t: float
    jobs: list[MetricsEntry]


@dataclass(frozen=True)
class UnmanagedInfo(Reply):
    """A process that uses a GPU without the shim (controller/bypass.py)."""

    pid: int                           # host pid (the controller's pid namespace)
    comm: str | None                   # /proc/<pid>/comm
    mem_used: int | None               # bytes the GPU reports for it
    gpu_share: float | None            # 0-1 of the GPU's time, when the GPU reports it
    first_seen: float                  # unix time it was first seen without the shim
    job: str | None = None             # --on-bypass stop|kill: the job whose container it is in
    action: str | None = None          # --on-bypass: "stop", "kill" or "failed", once taken
    OPTIONAL = frozenset({"job", "action"})


@dataclass(frozen=True)
class GpuInfo(Reply):
    """One GPU of status.gpus (with --metrics-port)."""

    index: int
    uuid: str
    utilization: float | None
    mem_used: int | None
    mem_total: int
    jobs_mem_used: int
    unmanaged: list[UnmanagedInfo] = field(default_factory=list)
    bypass_actions: int | None = None  # --on-bypass stop|kill: signals sent since the start
    OPTIONAL = frozenset({"bypass_actions"})


@dataclass(frozen=True)
class PlacementInfo(Reply):
    """One GPU of status.placement: production's duty and the time it leaves idle
    (controller/placement.py), whatever the policy."""

    index: int
    uuid: str
    production_duty: float
    production_busy_s: float
    production_idle_s: float
    duty_tau_s: float


@dataclass(frozen=True)
class LoopStatus(Reply):
    """The control loop's part of status."""

    policy: str
    period_ms: float
    steps: int
    overruns: int
    dead_seen: int
    busy_bias_changes: int
    loop_ms_avg: float
    loop_cpu_s: float
    policy_state: dict[str, Any]
    gpus: list[GpuInfo] | None = None          # the metrics tap's, with --metrics-port
    metrics_url: str | None = None
    placement: list[PlacementInfo] | None = None   # per GPU, once the loop has run
    periods_missed: int = 0                    # periods with no step (a late step skips them)
    # jobs whose files contradict their locks or grew past their size (segment_tampered)
    tampered_jobs: int | None = None
    disk_full_writes: int | None = None        # controller writes that met a full disk
    disk_reserve_held: bool | None = None      # every reserve of disk.py in place
    OPTIONAL = frozenset({"gpus", "metrics_url", "placement", "tampered_jobs",
                          "disk_full_writes", "disk_reserve_held"})


@dataclass(frozen=True)
class ServerStatus(Reply):
    """The request server's part of status (server.py, fdguard.py): what floods cost."""

    replies_dropped: int               # not delivered: the client was gone or did not read
    request_budget_exhausted: int      # periods whose share for requests ran out (rest waited)
    fds_open: int                      # descriptors open now (-1: unknown)
    fds_limit: int                     # the soft RLIMIT_NOFILE (raised to the hard one at start)
    listen_paused: bool | None = None  # with --listen: unbound now, descriptors near the limit
    listen_pauses: int | None = None   # with --listen: times they were unbound so
    listen_restarts: int | None = None  # with --listen: its process started again after a death
    OPTIONAL = frozenset({"listen_paused", "listen_pauses", "listen_restarts"})


@dataclass(frozen=True)
class DaemonInfo(Reply):
    """Where the daemon keeps things and listens (main.py)."""

    state_dir: str
    segment_dir: str
    runtime_dir: str
    endpoints: list[str]
    metrics: str
    curve_endpoints: list[str] | None = None    # with --listen
    curve_public_key: str | None = None
    curve_authorized_dir: str | None = None
    OPTIONAL = frozenset({"curve_endpoints", "curve_public_key", "curve_authorized_dir"})


@dataclass(frozen=True)
class DeviceInfo(Reply):
    index: int
    uuid: str
    name: str
    mem_total: int
    kind: str                                   # "nvml" or "sim"


@dataclass(frozen=True)
class StatusReply(Reply):
    protocol: int
    protocol_minor: int
    pid: int
    uptime_s: float
    devices: list[DeviceInfo]
    jobs: int
    requests: int
    request_errors: int
    daemon: DaemonInfo
    loop: LoopStatus
    server: ServerStatus
    FLATTEN = frozenset({"daemon", "loop", "server"})


@dataclass(frozen=True)
class RegisterReply(Reply):
    job: JobInfo
    segment: str
    shim: str | None
    env: dict[str, str]
    lease: str | None = None
    OPTIONAL = frozenset({"lease"})


@dataclass(frozen=True)
class UnregisterReply(Reply):
    removed: bool


@dataclass(frozen=True)
class SetReply(Reply):
    job: JobInfo


@dataclass(frozen=True)
class ListReply(Reply):
    jobs: list[JobInfo] = field(default_factory=list)


_FLATTENED: dict[str, dict[str, type[Reply]]] = {
    "JobInfo": {"stats": JobStats},
    "PartInfo": {"stats": JobStats},
    "MetricsEntry": {"stats": JobStats},
    "StatusReply": {"daemon": DaemonInfo, "loop": LoopStatus, "server": ServerStatus},
}
REPLIES: dict[str, type[Reply]] = {
    "register": RegisterReply, "unregister": UnregisterReply, "set": SetReply,
    "list": ListReply, "status": StatusReply,
}

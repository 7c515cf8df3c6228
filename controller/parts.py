"""A multi-device job's parts (docs/segment.md): one full file set per device, named
<job>@<k>, that the control loop sees as a job of its own; and the job's figures summed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .lease import Lease
from .replies import JobStats, PartInfo
from .state import JobRecord


class JobSegmentHandle(Protocol):
    def apply_identity(self, rec: JobRecord) -> None: ...      # quota, priority, weight
    def close(self) -> None: ...


@dataclass
class Part:
    """One device of a multi-device job: a full file set bound to that device, seen by the
    control loop as a job of its own (name <job>@<k>, the job's priority, weight and quotas)."""

    rec: JobRecord                                        # the part's view of the job's record
    seg: JobSegmentHandle | None
    owner: str                                            # the job's name
    node_uuid: str                                        # the device's UUID on this node
    stats: JobStats | None = None                         # filled by the loop
    lease: Lease | None = None                            # always None (the job holds it)

    def info(self) -> PartInfo:
        return PartInfo(self.rec.name, self.rec.device_index, self.node_uuid,
                        self.rec.device_uuid, self.rec.segment, self.stats)



def sum_stats(parts: list[JobStats | None]) -> JobStats | None:
    """A multi-device job's figures: its parts' added up (rates, usage, processes)."""
    known = [s for s in parts if s is not None]
    if not known:
        return None

    def total(attr: str) -> int | float | None:
        vals = [getattr(s, attr) for s in known]
        return None if any(v is None for v in vals) else sum(vals)
    return JobStats(
        processes=sum(s.processes for s in known), mem_used=sum(s.mem_used for s in known),
        segment_damaged=next((s.segment_damaged for s in known if s.segment_damaged), None),
        segment_tampered=next((s.segment_tampered for s in known if s.segment_tampered), None),
        segment_lies=total("segment_lies"),  # type: ignore[arg-type]
        work_rate=round(sum(s.work_rate for s in known), 1),
        launch_rate=round(sum(s.launch_rate for s in known), 1),
        throttled_frac=max(s.throttled_frac for s in known),
        inflight=sum(s.inflight for s in known),
        rate=total("rate"), inflight_cap=total("inflight_cap"), gate=known[0].gate,
        gate_max_wait_us=known[0].gate_max_wait_us, control=known[0].control,
        work_total=total("work_total"),  # type: ignore[arg-type]
        launches_total=total("launches_total"),  # type: ignore[arg-type]
        throttled_s_total=total("throttled_s_total"),
        block_rate=total("block_rate"),
        blocks_total=total("blocks_total"))  # type: ignore[arg-type]

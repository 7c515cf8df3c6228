"""Job registry: validation against devices, segments on disk, durable records.

Every change is saved (state.StateStore) before the caller replies; a change
that cannot be saved or whose segment cannot be written is undone and
reported as an `internal` error, leaving the registry as it was.  The server
groups a batch of requests (commit.GroupCommit): one save for all of them,
before any of their replies.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from tgs.intercept.sizes import format_size

from . import protocol as P
from .commit import GroupCommit
from .devices import Device, cuda_uuid, find
from .lease import Lease, LeaseError
from .parts import JobSegmentHandle, Part
from .records import RecordError, check_record, evictable, part_name, part_suffix
from .replies import JobInfo, JobStats, PartInfo
from .state import ControllerState, JobRecord, StateStore

log = logging.getLogger(__name__)


class SegmentFactory(Protocol):
    def create(self, rec: JobRecord) -> JobSegmentHandle: ...
    def open(self, rec: JobRecord) -> JobSegmentHandle: ...
    def remove(self, rec: JobRecord) -> None: ...


def _changes(old: JobRecord, new: JobRecord) -> str:
    """What a set changed, for the log: 'memory 1GiB -> 2GiB, weight 1 -> 2'."""
    out = []
    for label, attr, show in (("memory", "mem_quota", format_size), ("priority", "priority", str),
                              ("weight", "weight", str), ("mem_total", "mem_total", format_size),
                              ("host_pinned", "host_pinned_max", format_size),
                              ("mem_fixed", "mem_fixed", str)):
        a, b = getattr(old, attr), getattr(new, attr)
        if a != b:
            out.append(f"{label} {show(a)} -> {show(b)}")
    return ", ".join(out) or "nothing changed"


@dataclass
class Job:
    rec: JobRecord
    seg: JobSegmentHandle | None                          # None for a multi-device job
    stats: JobStats | None = None                         # filled by the loop
    lease: Lease | None = None                            # tgs-run's jobs (lease.py)
    parts: list[Part] = field(default_factory=list)       # a multi-device job's, in order

    def units(self) -> list[Job | Part]:
        """What the control loop controls: the job itself, or each of its parts."""
        return list(self.parts) if self.parts else [self]

    def info(self) -> JobInfo:
        r = self.rec
        devices = [p.info() for p in self.parts] if self.parts else \
            [PartInfo(r.name, r.device_index, r.device_uuid, r.device_uuid, r.segment,
                      self.stats)]
        return JobInfo(r.name, r.priority, r.weight, r.mem_quota, r.device_index, r.device_uuid,
                       r.ephemeral, r.nslots, r.segment, r.state, r.created, r.mem_total,
                       r.host_pinned_max, r.mem_fixed, evictable(r), devices, self.stats)


class Registry:
    def __init__(self, store: StateStore, devices: list[Device], seg_dir: Path,
                 factory: SegmentFactory, launch_env: dict[str, str] | None = None) -> None:
        self.store = store
        self.devices = devices
        self.seg_dir = Path(os.path.abspath(seg_dir))   # absolute, normalised (records.py)
        self.factory = factory
        self.launch_env = dict(launch_env or {})   # LD_PRELOAD etc., common to all jobs
        self.jobs: dict[str, Job] = {}
        self.group = GroupCommit(lambda: self.save())

    # ------------------------------------------------------------ persistence
    def load(self) -> None:
        """Re-open the segments of recorded jobs (re-creating any that vanished).  Every
        record is validated first (records.py); a bad one is reported and skipped."""
        rejected = []
        for i, raw in enumerate(self.store.read()):
            try:
                rec = check_record(raw, self.seg_dir, self.devices)
                if rec.name in self.jobs:
                    raise RecordError("a second record for the same job name")
            except RecordError as exc:
                name = raw.get("name") if isinstance(raw, dict) else None
                log.error("state file %s: job record %d (name %s) skipped: %s",
                          self.store.path, i, ascii(name)[:70], exc)
                rejected.append({"record": raw, "reason": str(exc)})
                continue
            if rec.devices:
                self.jobs[rec.name] = Job(rec, None, lease=self._reopen_lease(rec),
                                          parts=[self._open_part(p) for p in self._parts(rec)])
            else:
                self.jobs[rec.name] = Job(rec, self._open(rec), lease=self._reopen_lease(rec))
        if rejected:
            try:
                path = self.store.save_rejected(rejected)
                log.warning("the %d bad job record(s) are kept in %s", len(rejected), path)
            except Exception as exc:
                log.error("cannot keep the skipped records: %s", exc)
        log.info("loaded %d job(s) from %s", len(self.jobs), self.store.path)

    def _open(self, rec: JobRecord) -> JobSegmentHandle | None:
        try:
            seg = self.factory.open(rec)
        except Exception as exc:
            log.warning("job %s: segment %s unusable (%s): re-creating it",
                        rec.name, rec.segment, exc)
            try:
                seg = self.factory.create(rec)
            except Exception as exc2:
                log.error("job %s: cannot re-create its segment: %s", rec.name, exc2)
                return None
        try:
            seg.apply_identity(rec)
        except Exception as exc:
            log.error("job %s: cannot write its segment: %s", rec.name, exc)
        return seg

    def _parts(self, rec: JobRecord) -> list[Part]:
        """A multi-device job's parts (not opened): <name>@<k> bound to its k-th device, whose
        identity carries the UUID the CUDA driver reports (devices.cuda_uuid)."""
        out = []
        for k, uuid in enumerate(rec.devices):
            dev = find(self.devices, uuid)
            assert dev is not None          # checked by register / check_record
            name = part_name(rec.name, k)
            prec = replace(rec, name=name, device_index=dev.index, device_uuid=cuda_uuid(dev),
                           segment=str(self.seg_dir / f"{name}.seg"), lease="", devices=[])
            out.append(Part(prec, None, rec.name, dev.uuid))
        return out

    def _open_part(self, part: Part) -> Part:
        part.seg = self._open(part.rec)
        return part

    def _reopen_lease(self, rec: JobRecord) -> Lease | None:
        """A recorded lease; a vanished or unusable one is replaced by a fresh file (then the
        job ends with its last live process: its holders hold the old file)."""
        if not rec.lease:
            return None
        try:
            return Lease.open(Path(rec.lease))
        except (OSError, LeaseError) as exc:
            log.warning("job %s: lease %s unusable (%s): re-creating it", rec.name, rec.lease,
                        exc)
        try:
            lease = Lease.create(Path(rec.lease), None)
            lease.used = True
            return lease
        except (OSError, LeaseError) as exc:
            log.error("job %s: cannot re-create its lease: %s", rec.name, exc)
            return None

    def save(self) -> None:
        self.store.save(ControllerState(jobs=[j.rec for j in self.jobs.values()]))

    def close(self) -> None:
        for job in self.jobs.values():
            for unit in job.units():
                if unit.seg is not None:
                    unit.seg.close()
            if job.lease is not None:
                job.lease.close()

    def units(self) -> list[Job | Part]:
        """Every job's units (itself, or its parts), in registration order."""
        return [u for job in self.jobs.values() for u in job.units()]

    def job_devices(self, rec: JobRecord) -> list[int]:
        """The device indices of a job, in its order."""
        if not rec.devices:
            return [rec.device_index]
        return [d.index for u in rec.devices if (d := find(self.devices, u)) is not None]

    # ------------------------------------------------------------ checks
    def _device(self, ref: int | str, req_id: str) -> Device:
        dev = find(self.devices, ref)
        if dev is None:
            raise P.ProtocolError(P.E_NO_DEVICE, f"no device {ref!r} on this node", req_id)
        return dev

    def _check_commit(self, cand: JobRecord, req_id: str) -> None:
        """Production quotas on one device may not add up to more than its memory;
        production jobs never oversubscribe (their memory is never evicted).  A production
        job without a quota reserves nothing: it may use whatever opportunistic jobs hold
        (theirs is evictable) but is promised nothing against other production jobs."""
        if cand.priority != "production":
            return
        if cand.mem_total:
            raise P.ProtocolError(P.E_BAD_REQUEST, "--mem-total (oversubscription) is for "
                                  "opportunistic jobs only; production memory stays on the GPU",
                                  req_id)
        if cand.mem_quota is None:
            return
        for index in self.job_devices(cand):        # the quota is per device: each must fit
            dev = find(self.devices, index)
            total = dev.mem_total if dev else 0
            used = sum(j.rec.mem_quota or 0 for j in self.jobs.values()
                       if j.rec.name != cand.name and j.rec.priority == "production"
                       and index in self.job_devices(j.rec))
            if used + cand.mem_quota > total:
                raise P.ProtocolError(
                    P.E_OVERCOMMIT,
                    f"production quotas on device {index} would total "
                    f"{format_size(used + cand.mem_quota)} ({format_size(used)} reserved by "
                    f"other production jobs), more than its {format_size(total)}", req_id)

    def _get(self, name: str, req_id: str) -> Job:
        job = self.jobs.get(name)
        if job is None:
            raise P.ProtocolError(P.E_NOT_FOUND, f"no job named {name!r}", req_id)
        return job

    # ------------------------------------------------------------ verbs
    def register(self, req: P.Register) -> Job:
        if req.name in self.jobs:
            raise P.ProtocolError(P.E_EXISTS, f"a job named {req.name!r} exists", req.id)
        devs = self._job_devices(req)
        dev = devs[0]
        multi = [d.uuid for d in devs] if len(devs) > 1 else []
        seg_name = part_name(req.name, 0) if multi else req.name
        rec = JobRecord(
            name=req.name, priority=req.priority, weight=req.weight, mem_quota=req.mem_quota,
            device_index=dev.index, device_uuid=dev.uuid, ephemeral=req.ephemeral,
            nslots=req.nslots, segment=str(self.seg_dir / f"{seg_name}.seg"),
            created=time.time(),
            lease=str(self.seg_dir / f"{req.name}.lease") if req.lease_uid is not None else "",
            mem_total=req.mem_total, host_pinned_max=req.host_pinned_max, devices=multi,
            mem_fixed=req.mem_fixed)
        self._check_commit(rec, req.id)
        lease = None
        if req.lease_uid is not None:
            try:
                lease = Lease.create(Path(rec.lease), req.lease_uid)
            except LeaseError as exc:
                raise P.ProtocolError(P.E_BAD_REQUEST, str(exc), req.id) from exc
            except OSError as exc:
                raise P.ProtocolError(P.E_INTERNAL, f"cannot create the lease: {exc}",
                                      req.id) from exc
        parts = self._parts(rec)
        made: list[Part] = []
        try:
            if parts:
                for part in parts:
                    part.seg = self.factory.create(part.rec)
                    made.append(part)
                seg = None
            else:
                seg = self.factory.create(rec)
        except Exception as exc:
            for part in made:
                self._close_remove(part)
            if lease is not None:
                lease.remove()
            raise P.ProtocolError(P.E_INTERNAL, f"cannot create segment: {exc}", req.id) from exc
        job = Job(rec, seg, lease=lease, parts=parts)
        self.jobs[rec.name] = job

        def undo() -> None:
            del self.jobs[rec.name]
            for unit in job.units():
                if unit.seg is not None:
                    unit.seg.close()
            self._remove_quietly(job)

        self.group.change(rec.name, req.id, undo, lambda: log.info(
            "registered %s (%s, weight %d, memory %s%s, device%s %s%s)", rec.name,
            rec.priority, rec.weight, format_size(rec.mem_quota),
            "" if rec.priority == "production" or rec.mem_fixed else " evictable",
            "s" if parts else "", ",".join(map(str, self.job_devices(rec))),
            ", leased" if lease else ""))
        return job

    def _job_devices(self, req: P.Register) -> list[Device]:
        """The devices of a register request: distinct, on this node, and a name that leaves
        room for the part suffix when there are several."""
        refs = req.devices if req.devices is not None else (req.device,)
        devs: list[Device] = []
        for ref in refs:
            dev = self._device(ref, req.id)
            if dev in devs:
                raise P.ProtocolError(P.E_BAD_REQUEST, f"device {ref!r} is listed twice "
                                      f"(device {dev.index})", req.id)
            devs.append(dev)
        room = P.NAME_MAX - 1 - len(part_suffix(len(devs) - 1))
        if len(devs) > 1 and len(req.name) > room:
            raise P.ProtocolError(P.E_BAD_REQUEST, f"a job over {len(devs)} devices has a name "
                                  f"of at most {room} characters (its parts are named "
                                  f"<name>{part_suffix(len(devs) - 1)})", req.id)
        return devs

    def _close_remove(self, part: Part) -> None:
        if part.seg is not None:
            part.seg.close()
        try:
            self.factory.remove(part.rec)
        except Exception as exc:
            log.warning("cannot remove segment %s: %s", part.rec.segment, exc)

    def unregister(self, req: P.Unregister) -> None:
        job = self._get(req.name, req.id)
        self._drop(job, req.id)

    def _drop(self, job: Job, req_id: str | None) -> None:
        del self.jobs[job.rec.name]

        def undo() -> None:
            self.jobs[job.rec.name] = job

        def after() -> None:              # its files go only once the state no longer has it
            for unit in job.units():
                if unit.seg is not None:
                    unit.seg.close()
            self._remove_quietly(job)
            log.info("unregistered %s", job.rec.name)

        self.group.change(job.rec.name, req_id, undo, after)

    def remove_done(self, job: Job) -> None:
        """An ephemeral job whose processes are all gone."""
        try:
            self._drop(job, None)
        except P.ProtocolError as exc:
            log.error("cannot remove finished job %s: %s", job.rec.name, exc.message)

    def _remove_quietly(self, job: Job) -> None:
        if job.lease is not None:
            try:
                job.lease.remove()
            except OSError as exc:
                log.warning("cannot remove lease %s: %s", job.rec.lease, exc)
        for unit in job.units():
            try:
                self.factory.remove(unit.rec)
            except Exception as exc:
                log.warning("cannot remove segment %s: %s", unit.rec.segment, exc)

    def update(self, req: P.Set) -> Job:
        job = self._get(req.name, req.id)
        old = job.rec
        new = replace(
            old,
            mem_quota=None if req.unlimited_quota else
            (req.mem_quota if req.mem_quota is not None else old.mem_quota),
            priority=req.priority or old.priority,
            weight=req.weight if req.weight is not None else old.weight,
            mem_total=req.mem_total if req.mem_total is not None else old.mem_total,
            host_pinned_max=(req.host_pinned_max if req.host_pinned_max is not None
                             else old.host_pinned_max),
            mem_fixed=req.mem_fixed if req.mem_fixed is not None else old.mem_fixed)
        self._check_commit(new, req.id)
        job.rec = new

        def undo() -> None:
            job.rec = old
            self._apply_rec(job)

        self.group.change(req.name, req.id, undo,
                          lambda: log.info("set %s: %s", new.name, _changes(old, new)))
        self._apply_rec(job)
        return job

    def _apply_rec(self, job: Job) -> None:
        """A job's record onto its parts and its segments' identity."""
        new = job.rec
        for part in job.parts:
            part.rec = replace(part.rec, mem_quota=new.mem_quota, priority=new.priority,
                               weight=new.weight, mem_total=new.mem_total,
                               host_pinned_max=new.host_pinned_max, mem_fixed=new.mem_fixed)
        for unit in job.units():
            if unit.seg is not None:
                try:
                    unit.seg.apply_identity(unit.rec)
                except Exception as exc:       # saved: the loop re-applies next period
                    log.error("job %s: cannot write its segment: %s", unit.rec.name, exc)

    def set_state(self, job: Job, state: str, save: bool = True) -> bool:
        """Record a job's lifecycle state; True if it changed."""
        if job.rec.state == state:
            return False
        job.rec.state = state
        if save:
            self.save_quietly()
        return True

    def save_quietly(self) -> None:
        """Save lifecycle changes (not requests: those must report a failed save)."""
        try:
            self.save()
        except Exception as exc:
            log.error("cannot save state: %s", exc)

    def launch_info(self, job: Job) -> dict[str, Any]:
        env = dict(self.launch_env)
        env["TGS_SEGMENT"] = job.rec.segment
        if job.parts:      # docs/segment.md: the shim picks the part of its process's device
            env["TGS_PARTS"] = ";".join(p.rec.segment for p in job.parts)
            env["CUDA_VISIBLE_DEVICES"] = ",".join(p.rec.device_uuid for p in job.parts)
        out = {"segment": job.rec.segment, "shim": env.get("LD_PRELOAD"), "env": env}
        if job.rec.lease:
            out["lease"] = job.rec.lease
        return out

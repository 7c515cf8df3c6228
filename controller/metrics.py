"""Prometheus metrics and per-GPU figures, fed from the controller's per-period snapshot.

MetricsTap wraps the control loop (the server's Engine): after each period it
copies the jobs' exact counter totals (throttled seconds, work units, launches)
and keeps one immutable snapshot; the collector turns the latest snapshot into
metric families when Prometheus scrapes (on the HTTP server's thread: it only
reads a reference, never the registry or the segments).  It also adds "gpus"
(utilisation, memory, processes using the GPU without the shim: bypass.py) to the status reply.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from .bypass import LOOK_EVERY, BypassDetector, Unmanaged
from .gpustats import GpuSample, GpuSampler
from .registry import Registry
from .replies import GpuInfo, LoopStatus, MetricsEntry, ServerStatus, UnmanagedInfo
from .server import Engine

log = logging.getLogger(__name__)
GPU_EVERY = 0.5          # seconds between GPU samples (NVML calls are not free)


@dataclass
class JobTotals:
    throttled_s: float = 0.0
    work_units: float = 0.0
    launches: float = 0.0
    blocks: float = 0.0


@dataclass(frozen=True)
class Snapshot:
    jobs: list[dict[str, Any]] = field(default_factory=list)
    totals: dict[str, JobTotals] = field(default_factory=dict)
    gpus: list[tuple[GpuSample, str, int]] = field(default_factory=list)   # sample, uuid, jobs' mem
    loop: dict[str, Any] = field(default_factory=dict)
    unmanaged: dict[int, list[Unmanaged]] = field(default_factory=dict)   # GPU -> bypassing
    acted: dict[int, int] | None = None       # --on-bypass stop|kill: GPU -> signals sent


class MetricsTap:
    """An Engine that runs the real loop and records what each period saw."""

    def __init__(self, loop: Engine, registry: Registry, sampler: GpuSampler,
                 bypass: BypassDetector | None = None) -> None:
        self.loop = loop
        self.registry = registry
        self.sampler = sampler
        self.bypass = bypass
        self._last_look = float("-inf")
        self.totals: dict[str, JobTotals] = {}
        self.snapshot = Snapshot()
        self.metrics_url: str | None = None      # set by MetricsServer
        # the request server's counters (main.py); read at a scrape: plain numbers
        self.server_status: Callable[[], ServerStatus] | None = None
        self._last: float | None = None
        self._last_gpu = float("-inf")

    @property
    def period(self) -> float:
        return self.loop.period

    def on_change(self) -> None:
        self.loop.on_change()

    def idle(self, name: str) -> bool:
        return self.loop.idle(name)

    def status(self) -> LoopStatus:
        un = self.snapshot.unmanaged
        acted = self.snapshot.acted
        gpus = [GpuInfo(s.index, uuid, s.utilization, s.mem_used, s.mem_total, mem,
                        [UnmanagedInfo(u.pid, u.comm, u.mem_used, u.gpu_share, u.first_seen,
                                       u.job, u.action)
                         for u in un.get(s.index, [])],
                        None if acted is None else acted.get(s.index, 0))
                for s, uuid, mem in self.snapshot.gpus]
        return replace(self.loop.status(), gpus=gpus, metrics_url=self.metrics_url)

    def step(self, now: float) -> list[MetricsEntry]:
        out = self.loop.step(now)
        try:
            self._record(now)
        except Exception:          # metrics must never stop the control loop
            log.exception("metrics snapshot failed")
        return out

    def _record(self, now: float) -> None:
        self._last = now
        jobs = []
        for name, job in self.registry.jobs.items():
            info = job.info().to_dict()
            tot = self.totals.setdefault(name, JobTotals())
            st = job.stats
            # exact counter totals from the loop (monotonic while the job exists)
            if st is not None and st.throttled_s_total is not None:
                tot.throttled_s = float(st.throttled_s_total)
            if st is not None and st.work_total is not None:
                tot.work_units = float(st.work_total)
            if st is not None and st.launches_total is not None:
                tot.launches = float(st.launches_total)
            if st is not None and st.blocks_total is not None:
                tot.blocks = float(st.blocks_total)
            jobs.append(info)
        for gone in set(self.totals) - set(self.registry.jobs):
            del self.totals[gone]
        if now - self._last_gpu >= GPU_EVERY:
            self.sampler.sample(now)
            self._last_gpu = now
        if self.bypass is not None and now - self._last_look >= LOOK_EVERY:
            self._last_look = now
            self.bypass.look(now)
        uuids = {d.index: d.uuid for d in self.registry.devices}
        per_dev = [u for j in jobs for u in j["devices"]]      # a part per device
        gpus = [(s, uuids.get(s.index, "?"),
                 sum(u.get("mem_used", 0) or 0 for u in per_dev if u["device"] == s.index))
                for s in self.sampler.last]
        totals = {k: JobTotals(v.throttled_s, v.work_units, v.launches, v.blocks)
                  for k, v in self.totals.items()}
        actor = self.bypass.actor if self.bypass is not None else None
        self.snapshot = Snapshot(jobs, totals, gpus, self.loop.status().to_dict(),
                                 dict(self.bypass.last) if self.bypass is not None else {},
                                 dict(actor.counts) if actor is not None else None)


class TgsCollector(Collector):
    def __init__(self, tap: MetricsTap) -> None:
        self.tap = tap

    def collect(self) -> Iterator[Metric]:
        snap = self.tap.snapshot
        jl = ["job", "priority", "device"]

        def gauge(name: str, doc: str, labels: list[str] = jl) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, doc, labels=labels)

        g = {k: gauge(f"tgs_job_{k}", d) for k, d in (
            ("memory_used_bytes", "GPU memory the job's processes hold (its ledger)."),
            ("memory_quota_bytes", "The job's memory quota (absent: unlimited)."),
            ("token_rate_work_units_per_second",
             "Work-unit token rate granted to the job (absent: unlimited)."),
            ("work_rate_work_units_per_second", "Work units launched per second, last period."),
            ("processes", "Live processes attached to the job."),
            ("weight", "The job's weight among opportunistic jobs."),
            ("segment_damaged", "1 while the job's .seg cannot be read (figures unknown)."),
            ("segment_tampered", "1 while the job's files contradict their slot locks or grew "
             "past their size (docs/security.md)."))}
        c = {k: CounterMetricFamily(f"tgs_job_{k}", d, labels=jl) for k, d in (
            ("throttled_seconds", "Time the job's processes waited for tokens."),
            ("work_units", "Work units (GPU threads) the job launched."),
            ("launches", "Kernel launches of the job."),
            ("blocks", "Thread blocks (grid sizes) the job launched."))}
        for j in snap.jobs:
            lv = [j["name"], j["priority"], str(j["device"])]
            g["memory_used_bytes"].add_metric(lv, j.get("mem_used", 0) or 0)
            if j.get("mem_quota") is not None:
                g["memory_quota_bytes"].add_metric(lv, j["mem_quota"])
            if j.get("rate") is not None:
                g["token_rate_work_units_per_second"].add_metric(lv, j["rate"])
            g["work_rate_work_units_per_second"].add_metric(lv, j.get("work_rate", 0.0) or 0.0)
            g["processes"].add_metric(lv, j.get("processes", 0) or 0)
            g["weight"].add_metric(lv, j["weight"])
            g["segment_damaged"].add_metric(lv, 1 if j.get("segment_damaged") else 0)
            g["segment_tampered"].add_metric(lv, 1 if j.get("segment_tampered") else 0)
            tot = snap.totals.get(j["name"], JobTotals())
            c["throttled_seconds"].add_metric(lv, tot.throttled_s)
            c["work_units"].add_metric(lv, tot.work_units)
            c["launches"].add_metric(lv, tot.launches)
            c["blocks"].add_metric(lv, tot.blocks)
        yield from g.values()
        yield from c.values()
        gl = ["gpu", "uuid"]
        util = gauge("tgs_gpu_utilization_ratio", "GPU busy time over wall time (0-1).", gl)
        used = gauge("tgs_gpu_memory_used_bytes", "GPU memory allocated by all processes.", gl)
        total = gauge("tgs_gpu_memory_total_bytes", "GPU memory size.", gl)
        jobs_mem = gauge("tgs_gpu_jobs_memory_used_bytes",
                         "GPU memory held by TGS jobs (their ledgers).", gl)
        for s, uuid, mem in snap.gpus:
            lv = [str(s.index), uuid]
            if s.utilization is not None:
                util.add_metric(lv, s.utilization)
            if s.mem_used is not None:
                used.add_metric(lv, s.mem_used)
            total.add_metric(lv, s.mem_total)
            jobs_mem.add_metric(lv, mem)
        yield from (util, used, total, jobs_mem)
        if self.tap.bypass is not None:
            un = gauge("tgs_gpu_unmanaged_processes",
                       "Processes using the GPU without the TGS shim (not limited by TGS).", gl)
            for s, uuid, _ in snap.gpus:
                un.add_metric([str(s.index), uuid], len(snap.unmanaged.get(s.index, [])))
            yield un
        actor = self.tap.bypass.actor if self.tap.bypass is not None else None
        if actor is not None and snap.acted is not None:
            acts = CounterMetricFamily("tgs_gpu_bypass_actions",
                                       "Signals sent (--on-bypass) to processes of a job's "
                                       "container that use the GPU without the shim.",
                                       labels=[*gl, "action"])
            for s, uuid, _ in snap.gpus:
                acts.add_metric([str(s.index), uuid, actor.mode], snap.acted.get(s.index, 0))
            yield acts
        lp = snap.loop
        yield from _placement(lp.get("placement") or [])
        yield GaugeMetricFamily("tgs_controller_period_seconds", "Control period.",
                                value=(lp.get("period_ms") or 0) / 1000)
        yield CounterMetricFamily("tgs_controller_steps", "Control periods run.",
                                  value=lp.get("steps", 0))
        yield CounterMetricFamily("tgs_controller_overruns", "Periods that ran over.",
                                  value=lp.get("overruns", 0))
        yield CounterMetricFamily("tgs_controller_periods_missed",
                                  "Control periods with no step (a late step skips them).",
                                  value=lp.get("periods_missed", 0))
        yield from _server(self.tap.server_status)
        yield CounterMetricFamily("tgs_controller_dead_processes",
                                  "Periods in which a job's process was seen dead (its slot "
                                  "is reclaimed by the job's next process).",
                                  value=lp.get("dead_seen", 0))


def _server(get: Callable[[], ServerStatus] | None) -> Iterator[Metric]:
    """What floods cost the request server (server.py, listen.py)."""
    if get is None:
        return
    st = get()
    yield CounterMetricFamily("tgs_controller_replies_dropped",
                              "Replies not delivered (the client was gone or did not read).",
                              value=st.replies_dropped)
    yield GaugeMetricFamily("tgs_controller_open_fds", "Descriptors the controller has open.",
                            value=st.fds_open)
    if st.listen_pauses is not None:
        yield CounterMetricFamily("tgs_controller_listen_pauses",
                                  "Times the --listen endpoints were unbound, descriptors "
                                  "near the limit.", value=st.listen_pauses)


def _placement(gpus: list[dict[str, Any]]) -> Iterator[Metric]:
    """Per-GPU placement signals (controller/placement.py), whatever the policy."""
    gl = ["gpu", "uuid"]
    duty = GaugeMetricFamily("tgs_gpu_production_duty",
                             "Share of time production had work queued on the GPU (0-1), "
                             "averaged over duty_tau_s (30 s).", labels=gl)
    busy = CounterMetricFamily("tgs_gpu_production_busy_seconds",
                               "Time the GPU was busy with production work.", labels=gl)
    idle = CounterMetricFamily("tgs_gpu_production_idle_seconds",
                               "Time production left the GPU idle (free for opportunistic "
                               "work; a GPU without production jobs counts as idle).",
                               labels=gl)
    for g in gpus:
        lv = [str(g["index"]), str(g["uuid"])]
        duty.add_metric(lv, g["production_duty"])
        busy.add_metric(lv, g["production_busy_s"])
        idle.add_metric(lv, g["production_idle_s"])
    yield from (duty, busy, idle)


class MetricsServer:
    """The HTTP endpoint (prometheus_client's, on a daemon thread)."""

    def __init__(self, tap: MetricsTap, port: int, addr: str = "127.0.0.1") -> None:
        from prometheus_client import start_http_server
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(TgsCollector(tap))
        res = start_http_server(port, addr=addr, registry=self.registry)
        self.httpd, self.thread = res if isinstance(res, tuple) else (None, None)
        self.port = self.httpd.server_port if self.httpd is not None else port
        tap.metrics_url = f"http://{addr}:{self.port}/metrics"

    def close(self) -> None:
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()


def parse_listen(spec: str, host: str | None = None) -> tuple[str, int]:
    """--metrics-port value: PORT (127.0.0.1 unless --metrics-host says otherwise) or
    HOST:PORT; 0 picks a free port."""
    given, _, port = spec.rpartition(":")
    if not port.isascii() or not port.isdigit() or len(port) > 5:
        raise ValueError(f"--metrics-port {spec[:60]!r}: expected PORT or HOST:PORT")
    num = int(port)
    if not 0 <= num <= 65535:
        raise ValueError(f"--metrics-port {spec!r}: port out of range")
    if given and host is not None and given != host:
        raise ValueError(f"--metrics-port {spec!r} and --metrics-host {host!r} disagree")
    return (given or host or "127.0.0.1"), num

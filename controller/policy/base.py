"""What every policy sees and decides, independent of segments and sockets.

A policy is a pure object: `decide(now, dt, devices, jobs)` gets per-period
signals (deltas already turned into rates by the loop) and returns one
Decision per job.  Tests drive it with a fake clock and synthetic counters.
Work units are never compared across jobs: a kernel's run time is not
proportional to its thread count, so each job is reasoned about through its
own observed work rate, and shares are expressed in GPU time.
"""

from __future__ import annotations

from dataclasses import dataclass

# The gate flags are the shim's (segment.h TGS_GATE_*, bound by tgs.intercept): FIT, with WAIT,
# lets through only kernels predicted to end within production's idle gap.
from tgs.intercept.control import GATE_FIT as GATE_FIT
from tgs.intercept.control import GATE_PUBLISH as GATE_PUBLISH
from tgs.intercept.control import GATE_WAIT as GATE_WAIT
from tgs.intercept.control import GatePolicy as GatePolicy

PRODUCTION = "production"
OPPORTUNISTIC = "opportunistic"


@dataclass
class JobSignals:
    """One job's measurements over the last period (all rates per second)."""

    name: str
    priority: str
    weight: int
    device: int
    nproc: int = 0                 # live processes (slots whose lock is held)
    work_rate: float = 0.0         # work units launched per second
    launch_rate: float = 0.0       # kernel launches per second
    block_rate: float = 0.0        # thread blocks launched per second (grid sizes: TGS's unit)
    throttled_frac: float = 0.0    # share of the period its processes spent waiting for tokens
    inflight: int = 0              # work units launched and not known complete (sum)
    busy: int = 0                  # live processes counting themselves busy (dev_active)

    @property
    def work_per_launch(self) -> float:
        return self.work_rate / self.launch_rate if self.launch_rate > 0 else 0.0

    @property
    def threads_per_block(self) -> float:
        """Its launches' mean block size (work units per block); 0 = no blocks seen."""
        return self.work_rate / self.block_rate if self.block_rate > 0 else 0.0


@dataclass
class DeviceSignals:
    index: int
    prod_active: int = 0           # live production processes with GPU work queued now
    busy_seq: int = 0              # production's idle -> busy transitions so far (its pubs)
    gap_pred_ns: int = 0           # the shims' prediction of production's next idle gap (0: none)


@dataclass(frozen=True)
class Decision:
    """Controls for one job; the loop splits `rate` evenly over its processes and deals the
    bits of `gap_mask` out among them."""

    rate: float | None = None      # job's work units per second; None = unlimited
    burst_s: float = 0.02          # bucket depth, in seconds of `rate`
    inflight_cap: int = 0          # per process, work units; 0 = no cap
    gate: int = 0                  # GATE_* flags
    gate_max_wait_us: int = 0
    gap_mask: int = 0              # FIT gaps the job may open (bit busy_seq % 64); 0 = any
    reason: str = ""               # shown in metrics: which rule produced it


UNLIMITED = Decision()
PRODUCTION_DECISION = Decision(gate=GATE_PUBLISH, reason="production")


class Policy:
    """Base class: subclasses keep per-job/per-device memory between periods."""

    name = "base"
    # The gate's policy values every job's .ctl gets (the loop writes them; the shims obey
    # them): by default the contract's (segment.h), production's 3 % interference target.
    gate_policy = GatePolicy()

    def __init__(self) -> None:
        self.notes: dict[int, dict[str, float]] = {}   # per-device internals, for status

    def decide(self, now: float, dt: float, devices: dict[int, DeviceSignals],
               jobs: list[JobSignals]) -> dict[str, Decision]:
        raise NotImplementedError

    def forget(self, name: str) -> None:
        """A job left: drop what the policy remembers about it."""


def by_device(jobs: list[JobSignals]) -> dict[int, list[JobSignals]]:
    out: dict[int, list[JobSignals]] = {}
    for j in jobs:
        out.setdefault(j.device, []).append(j)
    return out

"""Python side of tgs-workload: describe a job, run it, parse its JSON lines.

``run_workload`` runs one job to completion; ``start_workload`` returns a handle
so that several jobs can run side by side (a bench co-locating a production and
an opportunistic job).  Handles are context managers: leaving the block kills a
job that is still running (by its pid) and reaps it, also on errors.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tgs.intercept.locate import build_path

BIN_DIR = build_path("bin")
WORKLOAD_BIN = BIN_DIR / "tgs-workload"
WORKLOAD_LINKED_BIN = BIN_DIR / "tgs-workload-linked"

RESOLVE_MODES = ("proc", "dlsym", "link")
LAUNCH_MODES = ("kernel", "ex", "coop", "graph")


@dataclass
class WorkloadSpec:
    """The options of one tgs-workload run (None: the program's default)."""

    kernels: int = 4
    kernel_us: float = 1000.0
    gap_ms: float = 2.0
    iters: int | None = None
    seconds: float | None = None
    warmup: int | None = None
    threads_per_block: int | None = None
    grid: int | None = None
    block: int | None = None
    cost_factor: float | None = None
    mem: str | int | None = None
    alloc_chunk: str | int | None = None
    report_ms: float | None = None
    phases: list[tuple[float, float]] | None = None   # (gap ms, seconds), cycled
    device: int | None = None
    name: str | None = None
    resolve: str = "proc"
    cuda_version: int | None = None
    per_thread: bool = False
    launch: str = "kernel"
    stream: bool = False
    priority: int | None = None
    sync_every: int | None = None      # run-ahead: synchronize every N iterations
    ahead: int | None = None           # at most K iterations queued
    streams: int | None = None         # kernels dealt over S streams
    kernel_mix: int | None = None      # long kernels per iteration (documented distribution)
    poisson_rps: float | None = None   # inference: Poisson request arrivals per second
    seed: int | None = None
    managed: bool = False              # the footprint is managed memory
    prefer_device: bool = False        # ... advised to prefer the device
    ramp_every_ms: float | None = None  # allocate the footprint chunk by chunk in the loop
    free_at_s: float | None = None     # free it this long into the loop
    verify: bool = False               # check its contents before freeing it
    touch: str | int | None = None     # read one word every N bytes of it per iteration
    binary: Path | None = None
    extra_args: list[str] = field(default_factory=list)

    def executable(self) -> Path:
        if self.binary is not None:
            return self.binary
        return WORKLOAD_LINKED_BIN if self.resolve == "link" else WORKLOAD_BIN

    def argv(self) -> list[str]:
        """The command line (executable first)."""
        if self.resolve not in RESOLVE_MODES:
            raise ValueError(f"resolve must be one of {RESOLVE_MODES}, not {self.resolve!r}")
        if self.launch not in LAUNCH_MODES:
            raise ValueError(f"launch must be one of {LAUNCH_MODES}, not {self.launch!r}")
        if self.iters is not None and self.seconds is not None:
            raise ValueError("give iters or seconds, not both")
        args = [
            str(self.executable()),
            "--kernels", str(self.kernels),
            "--kernel-us", _num(self.kernel_us),
            "--gap-ms", _num(self.gap_ms),
            "--resolve", self.resolve,
            "--launch", self.launch,
        ]
        optional: list[tuple[str, Any]] = [
            ("--iters", self.iters),
            ("--seconds", self.seconds),
            ("--warmup", self.warmup),
            ("--threads-per-block", self.threads_per_block),
            ("--grid", self.grid),
            ("--block", self.block),
            ("--cost-factor", self.cost_factor),
            ("--mem", self.mem),
            ("--alloc-chunk", self.alloc_chunk),
            ("--report-ms", self.report_ms),
            ("--device", self.device),
            ("--name", self.name),
            ("--cuda-version", self.cuda_version),
            ("--priority", self.priority),
            ("--sync-every", self.sync_every),
            ("--ahead", self.ahead),
            ("--streams", self.streams),
            ("--kernel-mix", self.kernel_mix),
            ("--poisson-rps", self.poisson_rps),
            ("--seed", self.seed),
            ("--ramp-every-ms", self.ramp_every_ms),
            ("--free-at-s", self.free_at_s),
            ("--touch", self.touch),
        ]
        for flag, value in optional:
            if value is not None:
                args += [flag, _num(value) if isinstance(value, float) else str(value)]
        if self.phases:
            args += ["--phases", ",".join(f"{_num(g)}:{_num(s)}" for g, s in self.phases)]
        if self.per_thread:
            args.append("--per-thread")
        if self.stream:
            args.append("--stream")
        for flag, on in (("--managed", self.managed), ("--prefer-device", self.prefer_device),
                         ("--verify", self.verify)):
            if on:
                args.append(flag)
        return args + list(self.extra_args)


def _num(value: float) -> str:
    return repr(float(value))


@dataclass
class ProgressRecord:
    """One progress line: throughput over the window that ended at ``t_s``."""

    t_s: float
    iters: int
    window_s: float
    window_iters: int
    it_per_s: float
    mono_s: float | None = None    # CLOCK_MONOTONIC at the line (time.monotonic() on Linux)
    phase: int | None = None       # --phases: the phase the line falls in


@dataclass
class WorkloadResult:
    """A finished run: its start and summary lines and its progress records."""

    start: dict[str, Any]
    summary: dict[str, Any]
    progress: list[ProgressRecord]
    returncode: int
    stderr: str

    @property
    def it_per_s(self) -> float:
        return float(self.summary["it_per_s"])

    @property
    def iters(self) -> int:
        return int(self.summary["iters"])

    @property
    def lat_ms(self) -> dict[str, float]:
        return {k: float(v) for k, v in self.summary["lat_ms"].items()}


class WorkloadError(RuntimeError):
    """tgs-workload failed: its exit status, the error line (if any), stderr."""

    def __init__(self, message: str, returncode: int | None, record: dict[str, Any] | None,
                 stderr: str) -> None:
        super().__init__(message)
        self.returncode = returncode
        self.record = record
        self.stderr = stderr


def parse_output(stdout: str) -> tuple[dict[str, Any] | None, dict[str, Any] | None,
                                        list[ProgressRecord], dict[str, Any] | None]:
    """Splits JSON lines into (start, summary, progress, error); other lines are ignored."""
    start: dict[str, Any] | None = None
    summary: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    progress: list[ProgressRecord] = []
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        kind = rec.get("type")
        if kind == "start":
            start = rec
        elif kind == "summary":
            summary = rec
        elif kind == "error":
            error = rec
        elif kind == "progress":
            progress.append(ProgressRecord(
                t_s=float(rec["t_s"]), iters=int(rec["iters"]),
                window_s=float(rec["window_s"]), window_iters=int(rec["window_iters"]),
                it_per_s=float(rec["it_per_s"]),
                mono_s=float(rec["mono_s"]) if "mono_s" in rec else None,
                phase=int(rec["phase"]) if "phase" in rec else None))
    return start, summary, progress, error


class WorkloadHandle:
    """A running tgs-workload process (a Popen wrapper with reliable cleanup)."""

    def __init__(self, spec: WorkloadSpec, proc: subprocess.Popen[str]) -> None:
        self.spec = spec
        self.proc = proc
        self._head = b""  # stdout read by wait_started(), not yet parsed by wait()
        self._stderr = ""  # what kill() drained

    @property
    def pid(self) -> int:
        return self.proc.pid

    def running(self) -> bool:
        return self.proc.poll() is None

    def wait_started(self, timeout: float = 30.0) -> dict[str, Any]:
        """Blocks until the start line (the job holds its memory and runs), returns it."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while True:
                start, _, _, error = parse_output(self._head.decode(errors="replace"))
                if start is not None:
                    return start
                left = deadline - time.monotonic()
                if error is not None or left <= 0:
                    break
                if sel.select(left):
                    chunk = os.read(fd, 65536)
                    if not chunk:
                        break
                    self._head += chunk
        self.kill()
        detail = error.get("error", "") if error else (self._stderr.strip() or "no start line")
        raise WorkloadError(f"tgs-workload did not start: {detail}", self.proc.returncode,
                            error, self._stderr)

    def wait(self, timeout: float | None = None) -> WorkloadResult:
        """Waits for the end and parses the output; kills the job on timeout."""
        try:
            stdout, stderr = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            self.kill()
            raise WorkloadError(f"tgs-workload timed out after {timeout} s", None, None,
                                _text(exc.stderr)) from exc
        return _result(self.proc.returncode, self._head.decode(errors="replace") + stdout,
                       stderr)

    def stop(self, timeout: float = 10.0) -> WorkloadResult:
        """Asks the job to end early (SIGTERM: it still prints its summary)."""
        if self.running():
            try:
                os.kill(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        return self.wait(timeout)

    def kill(self) -> None:
        """Kills the job by its pid (if still running) and reaps it."""
        if self.proc.poll() is None:
            try:
                self.proc.kill()
            except ProcessLookupError:
                pass
        try:
            _, err = self.proc.communicate(timeout=10)
            self._stderr = _text(err)
        except (subprocess.TimeoutExpired, ValueError):
            self.proc.wait()

    def __enter__(self) -> WorkloadHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()


def _text(data: str | bytes | None) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data


def _result(returncode: int, stdout: str, stderr: str) -> WorkloadResult:
    start, summary, progress, error = parse_output(stdout)
    if returncode != 0 or start is None or summary is None:
        if error is not None:
            message = f"tgs-workload failed (exit {returncode}): {error.get('error')}"
        else:
            detail = stderr.strip().splitlines()[-1:] or ["no summary line"]
            message = f"tgs-workload failed (exit {returncode}): {detail[0]}"
        raise WorkloadError(message, returncode, error, stderr)
    return WorkloadResult(start=start, summary=summary, progress=progress,
                          returncode=returncode, stderr=stderr)


def start_workload(spec: WorkloadSpec, env: dict[str, str] | None = None,
                   cwd: Path | None = None) -> WorkloadHandle:
    """Starts one job; use the handle as a context manager for cleanup."""
    exe = spec.executable()
    if not exe.exists():
        raise FileNotFoundError(f"{exe} is missing: run `make` first")
    proc = subprocess.Popen(spec.argv(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True, env=env, cwd=cwd)
    return WorkloadHandle(spec, proc)


def run_workload(spec: WorkloadSpec, env: dict[str, str] | None = None,
                 timeout: float | None = 120.0) -> WorkloadResult:
    """Runs one job to completion and returns its parsed result."""
    with start_workload(spec, env) as handle:
        return handle.wait(timeout)


EVENT_TYPES = ("alloc", "free", "check", "pause")   # pause: a PyTorch job's --duty


def parse_events(stdout: str) -> list[dict[str, Any]]:
    """The memory schedule's lines (--ramp-every-ms, --free-at-s, --verify) and pauses, in
    order."""
    out = []
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if rec.get("type") in EVENT_TYPES:
            out.append(rec)
    return out

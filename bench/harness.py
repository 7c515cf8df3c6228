"""Runs one scenario under one policy (or a solo baseline) and records what happened.

A run: a private simulator state file (on the simulated GPU), a tgs-controller subprocess
with its own state and runtime directories (policy runs only), the jobs registered with it
and started on their schedule under the shim, a sampler of GPU-busy counters.  Every process
started here is stopped by its pid and every directory removed, also on errors and Ctrl-C.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tgs.bench import host_steal
from tgs.bench.oversub_mem import MemSeries, make_mem_sampler
from tgs.bench.scenarios import TORCH_PROGRAMS, JobDef
from tgs.client import Client, ControllerUnavailable
from tgs.intercept.cpu_priority import OPPORTUNISTIC_NICE, job_niceness, spawn_at
from tgs.testbed.frameworks_venv import torch_python
from tgs.testbed.gpu import BusySeries, job_env, make_sampler
from tgs.testbed.workload import ProgressRecord, parse_events, parse_output

PROD_QUOTA = 2 << 30


class HarnessError(RuntimeError):
    pass


class Controller:
    """A tgs-controller subprocess; a context manager that always stops it (by pid)."""

    def __init__(self, policy: str, base: Path, env: dict[str, str], sim: bool,
                 static_share: float = 0.3, logdir: Path | None = None) -> None:
        self.policy = policy
        self.base = base
        self.env = env
        self.sim = sim
        self.static_share = static_share
        self.proc: subprocess.Popen[bytes] | None = None
        self.runtime: Path | None = None
        self.log = (logdir or base) / f"controller-{policy}.log"

    def start(self, timeout: float = 30.0) -> Client:
        # ipc:// paths are limited to 107 bytes: a short runtime dir under /tmp
        self.runtime = Path(tempfile.mkdtemp(prefix="tgs-bench-rt-"))
        argv = [sys.executable, "-m", "tgs.controller", "--policy", self.policy,
                "--state-dir", str(self.base / f"state-{self.policy}"),
                "--runtime-dir", str(self.runtime), "--static-share", str(self.static_share),
                "--log-level", "warning"]
        if self.sim:
            argv.append("--sim")
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=log, env=self.env,
                                         stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                c = Client(runtime_dir=self.runtime, timeout=1.0)
                c.status()
                return c
            except ControllerUnavailable:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.1)
        tail = self.log.read_text(errors="replace")[-2000:]
        self.stop()
        raise HarnessError(f"tgs-controller ({self.policy}) did not start:\n{tail}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.runtime is not None:
            shutil.rmtree(self.runtime, ignore_errors=True)
            self.runtime = None

    def __enter__(self) -> Controller:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class JobRun:
    """One job's process and, once it ended, its parsed JSON lines."""

    name: str
    role: str
    weight: int
    start_s: float
    pid: int = 0
    nice: int | None = None     # its CPU nice value, read from the process once started
    preload: str | None = None  # the LD_PRELOAD it ran with (the controller's reply names it)
    returncode: int | None = None
    start: dict[str, Any] | None = None
    summary: dict[str, Any] | None = None
    progress: list[ProgressRecord] = field(default_factory=list)
    error: str | None = None
    stopped: bool = False       # still running long past its end: stopped by the harness
    events: list[dict[str, Any]] = field(default_factory=list)   # alloc/free/check lines

    def cumulative(self) -> list[tuple[float, float]]:
        """(monotonic s, iterations done) from the progress lines, from the loop's start."""
        pts = [(p.mono_s, float(p.iters)) for p in self.progress if p.mono_s is not None]
        if not pts:
            return []
        first = self.progress[0]
        return [(pts[0][0] - first.t_s, 0.0)] + pts

    @property
    def it_per_s(self) -> float:
        return float(self.summary["it_per_s"]) if self.summary else 0.0

    @property
    def p99_ms(self) -> float:
        return float(self.summary["lat_ms"]["p99"]) if self.summary else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "role": self.role, "weight": self.weight, "pid": self.pid,
                "nice": self.nice, "preload": self.preload, "returncode": self.returncode,
                "error": self.error, "stopped": self.stopped, "summary": self.summary,
                "events": self.events,
                "cumulative": [[round(t, 4), it] for t, it in self.cumulative()]}


@dataclass
class RunRecord:
    scenario: str
    label: str                  # a policy, "solo:<job>" or "prod-only"
    policy: str | None
    wall_s: float
    t0: float
    jobs: dict[str, JobRun]
    device_busy: BusySeries
    proc_busy: dict[int, BusySeries]
    policy_state: dict[str, Any] = field(default_factory=dict)
    sampler_error: str | None = None
    memory: MemSeries = field(default_factory=list)   # run_jobs(memory=True)
    host_steal: float | None = None     # share of the CPUs the hypervisor took (host_steal.py)

    def busy_of(self, job: str) -> BusySeries:
        return self.proc_busy.get(self.jobs[job].pid, [])

    def to_dict(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "label": self.label, "policy": self.policy,
                "wall_s": round(self.wall_s, 3), "t0": self.t0,
                "jobs": {k: v.to_dict() for k, v in self.jobs.items()},
                "device_busy": [[round(t, 4), round(b, 6)] for t, b in self.device_busy],
                "proc_busy": {str(pid): [[round(t, 4), round(b, 6)] for t, b in series]
                              for pid, series in self.proc_busy.items()},
                "policy_state": self.policy_state, "sampler_error": self.sampler_error,
                "host_steal": self.host_steal,
                "memory": [[round(t, 4), {str(pid): u.to_list() for pid, u in m.items()}]
                           for t, m in self.memory]}


def numba_argv(job: JobDef) -> list[str]:
    """bench/numba_job.py with the job's shape (kernels, kernel time, gap, reports, length)."""
    spec = job.spec
    argv = [sys.executable, "-m", "tgs.bench.numba_job", "--name", job.name,
            "--kernels", str(spec.kernels), "--kernel-us", repr(float(spec.kernel_us)),
            "--gap-ms", repr(float(spec.gap_ms)), "--report-ms", repr(float(spec.report_ms or 0))]
    if spec.iters is not None:
        return argv + ["--iters", str(spec.iters)]
    return argv + ["--seconds", repr(float(spec.seconds if spec.seconds else job.seconds))]


def torch_argv(job: JobDef) -> list[str]:
    """The job's PyTorch program, by path, with the interpreter that has PyTorch (the
    frameworks venv on this machine), its options, and --go-signal: it warms up, says `ready`
    and waits for the harness's SIGUSR1 to start its run (run_jobs)."""
    assert job.torch is not None
    prog = Path(__file__).with_name(TORCH_PROGRAMS[job.torch.program])
    return [torch_python(), str(prog), "--name", job.name, "--seconds", repr(float(job.seconds)),
            "--report-ms", repr(float(job.spec.report_ms or 0)), "--go-signal",
            *job.torch.argv()]


def torch_caches(work: Path) -> dict[str, str]:
    """PyTorch's compile caches inside the suite's work folder (removed with it), not under
    $TMPDIR where torch would leave them."""
    return {"TORCHINDUCTOR_CACHE_DIR": str(work / "torch-cache" / "inductor"),
            "TRITON_CACHE_DIR": str(work / "torch-cache" / "triton")}


def job_argv(job: JobDef) -> list[str]:
    if job.torch is not None:
        return torch_argv(job)
    if job.numba:
        return numba_argv(job)
    return job.spec.argv()


def _launch(job: JobDef, env: dict[str, str], logdir: Path,
            nice: int = 0) -> tuple[subprocess.Popen[bytes], Path, Path]:
    """Starts one job at CPU nice value `nice` (what tgs-run gives its role)."""
    if job.iters is not None:
        spec = dataclasses.replace(job.spec, seconds=None, iters=job.iters)
    else:
        spec = dataclasses.replace(job.spec, seconds=job.seconds, iters=None)
    job = dataclasses.replace(job, spec=spec)
    out, err = logdir / f"{job.name}.jsonl", logdir / f"{job.name}.stderr"
    with open(out, "wb") as fo, open(err, "wb") as fe:
        proc = spawn_at(nice, lambda: subprocess.Popen(job_argv(job), stdout=fo, stderr=fe,
                                                       env=env, stdin=subprocess.DEVNULL))
    return proc, out, err


def _started(run: JobRun, proc: subprocess.Popen[bytes], env: dict[str, str]) -> None:
    run.pid = proc.pid
    run.preload = env.get("LD_PRELOAD")
    try:
        run.nice = os.getpriority(os.PRIO_PROCESS, proc.pid)    # its main thread's
    except OSError:
        run.nice = None                                         # already gone


def _collect(run: JobRun, out: Path, err: Path) -> None:
    text = out.read_text(errors="replace")
    start, summary, progress, error = parse_output(text)
    run.start, run.summary, run.progress = start, summary, progress
    run.events = parse_events(text)
    if run.error is not None:
        return      # the harness's own finding (not ready in time)
    if error is not None:
        run.error = str(error.get("error"))
    elif summary is None and run.stopped and run.role != "production":
        return      # held back by its rate limit past its end: its progress lines still count
    elif summary is None:
        tail = err.read_text(errors="replace").strip().splitlines()[-1:]
        run.error = f"exit {run.returncode}: {tail[0] if tail else 'no summary line'}"


def run_jobs(scenario: str, label: str, policy: str | None, jobs: list[JobDef], gpu: str,
             logdir: Path, work: Path, static_share: float = 0.3,
             controller_env: dict[str, str] | None = None,
             extra_env: dict[str, str] | None = None, memory: bool = False,
             opp_nice: int = OPPORTUNISTIC_NICE) -> RunRecord:
    """Runs `jobs` on their schedule (under a controller with `policy` unless None;
    `controller_env` adds to the controller's environment, e.g. TGS_LAS_THRESHOLDS;
    `extra_env` to every process's, e.g. the simulator's TGS_SIM_MEM; `memory` samples memory
    by process into the record).  Under a policy other than `none` opportunistic jobs start
    at CPU nice value `opp_nice`, as tgs-run starts them."""
    logdir.mkdir(parents=True, exist_ok=True)
    sim_state = work / f"sim-{scenario}-{label.replace(':', '-')}" if gpu == "sim" else None
    env = {**job_env(gpu, sim_state), **(extra_env or {})}
    if any(j.torch is not None for j in jobs):
        env = {**torch_caches(work), **env}     # the user's own cache settings win
    procs: dict[str, tuple[subprocess.Popen[bytes], Path, Path]] = {}
    runs = {j.name: JobRun(j.name, j.role, j.weight, j.start_s) for j in jobs}
    managed = policy not in (None, "none")      # tgs-run's role default applies
    nices = {j.name: job_niceness(j.role, None if j.production else opp_nice) if managed else 0
             for j in jobs}
    sampler = make_sampler(gpu, sim_state)
    mem_sampler = make_mem_sampler(gpu, sim_state) if memory else None
    state: dict[str, Any] = {}
    wall0 = time.monotonic()
    with ExitStack() as stack:
        stack.callback(_reap, procs)
        if sim_state is not None:
            stack.callback(lambda: sim_state.unlink(missing_ok=True))
        envs = {j.name: env for j in jobs}
        ctl = None
        if policy is not None:
            state_base = Path(tempfile.mkdtemp(prefix="ctl-", dir=work))
            stack.callback(shutil.rmtree, state_base, True)
            ctl = stack.enter_context(Controller(policy, state_base,
                                                 {**env, **(controller_env or {})},
                                                 gpu == "sim", static_share, logdir))
            client = ctl.start()
            stack.callback(client.close)
            for j in jobs:
                # production quotas may not add up past the device: a bounded one each
                quota = j.mem_quota if j.mem_quota is not None else \
                    PROD_QUOTA if j.production else None
                reply = client.register(j.name, priority=j.role, weight=j.weight,
                                        mem_quota=quota, mem_total=j.mem_total,
                                        mem_fixed=j.mem_fixed)
                envs[j.name] = {**env, **reply["env"]}
        sampler.start()
        stack.callback(sampler.stop)
        if mem_sampler is not None:
            mem_sampler.start()
            stack.callback(mem_sampler.stop)
        # PyTorch jobs start first and warm up (import, CUDA context, cuBLAS: seconds); the
        # run's clock starts once all are ready, and each one's run starts on a signal at its
        # scheduled time, so the schedule holds however long the warm-up took.  They warm up
        # in the order of their start times, each group ready before the next comes (as on
        # the schedule: under `tgs` an opportunistic job warming up next to a live production
        # job is held at one launch per 50 ms while the law profiles, and may never be ready)
        early = sorted((j for j in jobs if j.torch is not None), key=lambda j: j.start_s)
        for _, group in itertools.groupby(early, key=lambda j: j.start_s):
            names = []
            for j in group:
                procs[j.name] = _launch(j, envs[j.name], logdir, nices[j.name])
                _started(runs[j.name], procs[j.name][0], envs[j.name])
                names.append(j.name)
            _wait_ready(procs, runs, names)
        t0 = time.monotonic() + 0.2
        steal0 = host_steal.read()
        for j in sorted(jobs, key=lambda j: j.start_s):
            time.sleep(max(0.0, t0 + j.start_s - time.monotonic()))
            if j.torch is not None:
                _go(procs[j.name][0])
                continue
            procs[j.name] = _launch(j, envs[j.name], logdir, nices[j.name])
            _started(runs[j.name], procs[j.name][0], envs[j.name])
        _wait_or_stop(procs, runs, {j.name: t0 + j.start_s + j.seconds
                                    + (NUMBA_GRACE_S if j.numba else 0.0) for j in jobs})
        stolen = host_steal.share(steal0, host_steal.read())
        if ctl is not None:
            try:
                state = dict(client.status().get("policy_state", {}))
            except Exception:
                state = {}
    for name, (_, out, err) in procs.items():
        _collect(runs[name], out, err)
    return RunRecord(scenario, label, policy, time.monotonic() - wall0, t0, runs,
                     list(sampler.device), {k: list(v) for k, v in sampler.procs.items()},
                     state, sampler.error or (mem_sampler.error if mem_sampler else None),
                     list(mem_sampler.series) if mem_sampler else [], stolen)


READY_S = 120.0   # a PyTorch job not ready this long after its launch is stopped, an error


def _ready(out: Path) -> bool:
    try:
        return '"type": "ready"' in out.read_text(errors="replace")
    except OSError:
        return False


def _wait_ready(procs: dict[str, tuple[subprocess.Popen[bytes], Path, Path]],
                runs: dict[str, JobRun], names: list[str], limit_s: float = READY_S) -> None:
    """Until each of `names` printed its `ready` line or ended; one still warming up after
    limit_s is killed and recorded as an error."""
    waiting, deadline = set(names), time.monotonic() + limit_s
    while waiting:
        for name in list(waiting):
            p, out, _ = procs[name]
            if p.poll() is not None or _ready(out):
                waiting.discard(name)
        if waiting and time.monotonic() > deadline:
            for name in waiting:
                procs[name][0].kill()
                runs[name].error = f"not ready (PyTorch start-up) after {limit_s:g} s"
            return
        time.sleep(0.05)


def _go(p: subprocess.Popen[bytes]) -> None:
    """Starts a ready PyTorch job's run (it blocks SIGUSR1 until it waits for it)."""
    if p.poll() is None:
        p.send_signal(signal.SIGUSR1)


GRACE_S = 3.0     # past its scheduled end a job gets SIGTERM (it still prints its summary)
# a numba job's run starts after its import and JIT (~1.5 s alone, several times that on a
# loaded machine): it ends by itself, so it gets this much more before being stopped
NUMBA_GRACE_S = 20.0
KILL_S = 3.0      # and SIGKILL this much later


def _wait_or_stop(procs: dict[str, tuple[subprocess.Popen[bytes], Path, Path]],
                  runs: dict[str, JobRun], ends: dict[str, float]) -> None:
    """Waits for every job; one still running GRACE_S after its scheduled end (a job held
    back by a rate limit can be stuck inside one iteration) is stopped, then killed."""
    while True:
        now, alive = time.monotonic(), 0
        for name, (p, _, _) in procs.items():
            if p.poll() is not None:
                runs[name].returncode = p.returncode
                continue
            alive += 1
            late = now - ends[name] - GRACE_S
            if late > KILL_S:
                p.kill()
            elif late > 0 and not runs[name].stopped:
                p.send_signal(signal.SIGTERM)
                runs[name].stopped = True
        if not alive:
            return
        time.sleep(0.05)


def _reap(procs: dict[str, tuple[subprocess.Popen[bytes], Path, Path]]) -> None:
    """Kills (by pid) and reaps whatever is still running."""
    for p, _, _ in procs.values():
        if p.poll() is None:
            try:
                p.kill()
            except ProcessLookupError:
                pass
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            pass


def save_run(rec: RunRecord, path: Path) -> None:
    path.write_text(json.dumps(rec.to_dict()))

"""The stage of the hostile-tenant suite: a controller on a private simulated GPU, a production
and an opportunistic victim running tgs-workload, and two attacker jobs (one opportunistic, one
production), each with a long-lived hostile tenant process (hostile_tenant.py).

Every process is started here and stopped here by its pid.  The stage rebuilds itself from
scratch (new directories, new GPU state file) when an attack left something dead, so attacks stay
independent and the suite reports every attack's outcome on code that fails the first one.
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tgs.testbed.workload import ProgressRecord, WorkloadSpec, parse_output
from tgs.tools.injection import make_plan

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SIM_DIR = ROOT / "build" / "sim"
TENANT = HERE / "hostile_tenant.py"
BIN = Path(sys.executable).parent

# production at ~57 % duty (4 x 1 ms kernels, 3 ms host gap): its gaps are what the
# opportunistic jobs may use, so the gate matters; the opportunistic jobs run flat out
REPORT_MS = 100
PROD = WorkloadSpec(kernels=4, kernel_us=1000, gap_ms=3, seconds=900, report_ms=REPORT_MS,
                    warmup=0, name="prod")
OPP = WorkloadSpec(kernels=4, kernel_us=1000, gap_ms=0, seconds=900, report_ms=REPORT_MS,
                   warmup=0, name="opp")
WARMUP_S = 4.0
# the adaptive policy pauses opportunistic work for 0.25 s probes (controller/policy/
# adaptive.py: PROBE_LEN, first after 4 s, then every 2 s to 16 s): one such pause in a 1.7 s
# window costs the opportunistic victim ~20 % of it; its rate leaves out its worst 0.4 s
# stretch, in every window alike (a lasting harm still shows, a single pause does not)
OPP_FORGIVE_S = 0.4
# a stage whose victims run below these shares of their start-up throughput (an attack's harm
# outlasted it) is rebuilt before the next attack, so that attack starts from a clean state
MIN_KEEP = {"prod": 0.9, "opp": 0.8}
RECOVER_S = 4.0      # ... unless they recover within this time
BASELINE_S = 2.5
VICTIMS = {"prod": "production", "opp": "opportunistic"}
ATTACKERS = {"opp": "atk-opp", "prod": "atk-prod"}      # role -> job name
ATTACKER_PRIORITY = {"atk-opp": "opportunistic", "atk-prod": "production"}


def sim_env(state: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TGS_", "LD_PRELOAD"))}
    env["TGS_SIM_STATE"] = str(state)
    env["LD_LIBRARY_PATH"] = str(SIM_DIR) + (
        ":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    return env


def kill_proc(proc: subprocess.Popen[Any] | None, sig: int = signal.SIGKILL) -> int | None:
    """Stop a child we started, by its pid, and reap it; its exit status."""
    if proc is None:
        return None
    if proc.poll() is None:
        try:
            proc.send_signal(sig)
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for f in (proc.stdin, proc.stdout, proc.stderr):
        if f is not None:
            f.close()
    return proc.returncode


def describe_exit(rc: int | None) -> str:
    if rc is None:
        return "running"
    if rc < 0:
        return f"killed by {signal.Signals(-rc).name}"
    return f"exit {rc}"


@dataclass
class Runner:
    """A tgs-workload process writing its JSON lines to a file (never a pipe that could fill)."""

    name: str
    proc: subprocess.Popen[bytes]
    out: Path

    @classmethod
    def start(cls, spec: WorkloadSpec, env: dict[str, str], d: Path) -> Runner:
        out = d / f"{spec.name}.out"
        with open(out, "wb") as o, open(d / f"{spec.name}.err", "wb") as e:
            proc = subprocess.Popen(spec.argv(), stdout=o, stderr=e, stdin=subprocess.DEVNULL,
                                    env=env)
        r = cls(str(spec.name), proc, out)
        deadline = time.monotonic() + 30
        while not r.progress():
            if proc.poll() is not None or time.monotonic() > deadline:
                kill_proc(proc)
                err = (d / f"{spec.name}.err").read_text(errors="replace")
                raise RuntimeError(f"{spec.name} did not start: {err.strip()[-500:]}")
            time.sleep(0.05)
        return r

    def progress(self) -> list[ProgressRecord]:
        return parse_output(self.out.read_text(errors="replace"))[2]

    def wait_running(self, seconds: float, limit_s: float = 30.0) -> None:
        """Until its progress lines span `seconds`: a new job competes at its steady share
        only after its start-up (registration, the policy's next periods), which a loaded
        machine stretches, and a control window must not catch it half started."""
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            stamps = [r.mono_s for r in self.progress() if r.mono_s is not None]
            if self.proc.poll() is not None or (stamps and stamps[-1] - stamps[0] >= seconds):
                return
            time.sleep(0.05)

    def rate(self, t0: float, t1: float, forgive_s: float = 0.0) -> float:
        """Iterations per second between monotonic times t0 and t1 (0 if it made none),
        leaving out the stretch of at least ``forgive_s`` in which it made the fewest."""
        recs = [(r.mono_s, r.iters) for r in self.progress()
                if r.mono_s is not None and t0 <= r.mono_s <= t1]
        if len(recs) < 2 or recs[-1][0] <= recs[0][0]:
            return 0.0
        span, done = recs[-1][0] - recs[0][0], recs[-1][1] - recs[0][1]
        if forgive_s <= 0 or span <= 2 * forgive_s:
            return done / span
        cut_t, cut_n, j = 0.0, done, 0
        for i in range(len(recs)):
            while j < len(recs) and recs[j][0] - recs[i][0] < forgive_s:
                j += 1
            if j == len(recs):
                break
            n = recs[j][1] - recs[i][1]
            if n < cut_n:
                cut_t, cut_n = recs[j][0] - recs[i][0], n
        return (done - cut_n) / (span - cut_t) if cut_t else done / span

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> int | None:
        return kill_proc(self.proc, signal.SIGTERM)


class IdleProcess:
    """hostile_idle.py in a job: a live process with a slot and no work."""

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([sys.executable, str(HERE / "hostile_idle.py")],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env)
        assert self.proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            line = self.proc.stdout.readline() if sel.select(20) else b""
        if line.strip() != b"ready":
            kill_proc(self.proc)
            raise RuntimeError(f"idle process did not start: {line!r}")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()

    def close(self) -> None:
        kill_proc(self.proc)


class Tenant:
    """A hostile tenant process for one attacker job (commands over stdin, JSON lines)."""

    def __init__(self, job: str, env: dict[str, str]) -> None:
        self.job = job
        self.proc = subprocess.Popen([sys.executable, str(TENANT)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                                     cwd=str(HERE))
        self.sel = selectors.DefaultSelector()
        assert self.proc.stdout is not None
        self.sel.register(self.proc.stdout, selectors.EVENT_READ)
        self._read(20)

    def _read(self, timeout: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        if not self.sel.select(timeout):
            raise RuntimeError(f"tenant {self.job}: no answer within {timeout} s")
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"tenant {self.job} exited ({describe_exit(self.proc.poll())})")
        return dict(json.loads(line))

    def send(self, cmd: dict[str, Any], timeout: float = 10) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(cmd) + "\n").encode())
        self.proc.stdin.flush()
        return self._read(timeout)

    def close(self) -> None:
        self.sel.close()
        kill_proc(self.proc)


@dataclass
class Files:
    """What a job's container gets, from the injection plan: host paths it can write / only read.
    The simulator's state file is left out (it models the GPU itself, see docs/security.md)."""

    rw: list[str] = field(default_factory=list)
    ro: list[str] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)     # host path -> container path


def _expand(host: str) -> list[str]:
    p = Path(host)
    if p.is_dir():
        return sorted(str(f) for f in p.rglob("*") if f.is_file())
    return [host] if p.is_file() else []


def job_files(info: dict[str, Any]) -> Files:
    plan = make_plan(info, sim=False, preload_file=False)
    out = Files()
    for m in plan.mounts:
        for host in _expand(m.host):
            rel = Path(host).relative_to(m.host) if host != m.host else None
            ctr = f"{m.container}/{rel}" if rel else m.container
            out.labels.setdefault(host, ctr.replace(info["name"], "<job>"))
            (out.ro if m.readonly else out.rw).append(host)
    out.rw = sorted(set(out.rw))
    out.ro = sorted(set(out.ro) - set(out.rw))
    return out


class Stage:
    """Controller + victims + attacker jobs on a private simulated GPU; see the module doc."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.n = 0
        self.up = False
        self.builds = 0
        self.rebuilds: list[str] = []      # why the stage was rebuilt (after an attack)

    # ------------------------------------------------------------------ life cycle
    def start(self) -> None:
        self.n += 1
        self.builds += 1
        self.dir = self.base / f"run{self.n}"
        self.dir.mkdir(parents=True)
        self.runtime = Path(tempfile.mkdtemp(prefix="tgs-rt-"))   # ipc paths: 107 bytes max
        self.env = sim_env(self.dir / "sim-state")
        self.ctl_log = open(self.dir / "controller.log", "wb")
        self.ctl: subprocess.Popen[bytes] | None = subprocess.Popen(
            [str(BIN / "tgs-controller"), "--foreground", "--sim", "--state-dir",
             str(self.dir / "state"), "--segment-dir", str(self.dir / "seg"), "--runtime-dir",
             str(self.runtime), "--period-ms", "50", "--log-level", "info"],
            stderr=self.ctl_log, env=self.env)
        self.victims: dict[str, Runner] = {}
        self.tenants: dict[str, Tenant] = {}
        self.seen_harm = False
        self.extra: list[Runner] = []
        self.up = True
        deadline = time.monotonic() + 30
        while self.status(timeout=0.5) is None:
            if self.ctl.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"controller did not come up: {self.log_tail()}")
            time.sleep(0.1)
        self.envs: dict[str, dict[str, str]] = {}
        self.register(VICTIMS)
        self.victims["prod"] = Runner.start(PROD, self.envs["prod"], self.dir)
        self.victims["opp"] = Runner.start(OPP, self.envs["opp"], self.dir)
        # the controller settles the gates and rates; the opportunistic victim's throughput
        # dips for a while after it starts (measured: a 1.5 s window 2-4 s in reads ~0.85)
        time.sleep(WARMUP_S)
        # the victims alone, then with the attacker jobs merely registered (no process yet):
        # a job that exists and does nothing must change nothing (Stage.idle_jobs_effect)
        t0 = time.monotonic()
        time.sleep(BASELINE_S)
        self.alone = (t0, time.monotonic())
        self.register(ATTACKER_PRIORITY)
        for job in ATTACKER_PRIORITY:
            self.tenants[job] = Tenant(job, self.env)
        time.sleep(1.0)
        t0 = time.monotonic()
        time.sleep(BASELINE_S)
        self.with_idle = (t0, time.monotonic())

    def register(self, jobs: dict[str, str]) -> None:
        with self.client(5) as c:
            for name, prio in jobs.items():
                reply = c.register(name, priority=prio, mem_quota=1 << 30)
                self.envs[name] = {**self.env, **reply["env"]}

    def rates(self, window: tuple[float, float]) -> tuple[float, float]:
        """(production victim, opportunistic victim) it/s over a window; the opportunistic
        victim's without its worst OPP_FORGIVE_S (one probe pause of the policy)."""
        return (self.victims["prod"].rate(*window),
                self.victims["opp"].rate(*window, forgive_s=OPP_FORGIVE_S))

    def stop(self) -> None:
        if not self.up:
            return
        self.up = False
        for t in self.tenants.values():
            t.close()
        for r in [*self.victims.values(), *self.extra]:
            r.stop()
        kill_proc(self.ctl, signal.SIGTERM)
        self.ctl = None
        self.ctl_log.close()
        shutil.rmtree(self.runtime, ignore_errors=True)

    def problem(self) -> str | None:
        """Why the stage is not fit for the next attack (None: healthy)."""
        if not self.up:
            return "not started"
        if self.ctl is None or self.ctl.poll() is not None:
            return "controller " + describe_exit(self.ctl.poll() if self.ctl else None)
        for name, r in self.victims.items():
            if not r.alive():
                return f"victim {name} {describe_exit(r.proc.poll())}"
            recs = r.progress()
            if not recs or time.monotonic() - (recs[-1].mono_s or 0) > 1.5:
                return f"victim {name} makes no progress"
        for name, t in self.tenants.items():
            if t.proc.poll() is not None:
                return f"tenant {name} {describe_exit(t.proc.poll())}"
        now = time.monotonic()
        (p0, o0), (p1, o1) = self.rates(self.with_idle), self.rates((now - 1.5, now))
        if p1 < MIN_KEEP["prod"] * p0 or o1 < MIN_KEEP["opp"] * o0:
            return (f"victims below their start-up throughput: production {p1:.0f} of {p0:.0f}"
                    f", opportunistic {o1:.0f} of {o0:.0f} it/s")
        if self.status(timeout=2) is None:
            return "controller does not answer"
        return None

    def ensure(self) -> None:
        why = self.problem()
        deadline = time.monotonic() + RECOVER_S
        while why is not None and why.startswith("victims below") and (
                time.monotonic() < deadline):
            time.sleep(0.5)                # the policy may take a few periods to re-adapt
            why = self.problem()
        if why is not None:
            unexplained = self.up and not self.seen_harm and not why.startswith(
                ("victims below", "tenant "))      # a tenant may harm itself
            if self.up:
                self.rebuilds.append(why)
            self.stop()
            self.start()
            if unexplained:
                # something died or froze after the last window had ended clean: that counts
                # against the test that finds it (a harm must never pass unnoticed)
                raise AssertionError(f"between attacks: {why} (stage rebuilt)")

    def saw_harm(self) -> None:
        """A window recorded a death or a silent controller: the next rebuild is explained."""
        self.seen_harm = True

    # ------------------------------------------------------------------ access
    def client(self, timeout: float):  # type: ignore[no-untyped-def]
        from tgs.client import Client
        return Client(endpoint=f"ipc://{self.runtime / 'control.sock'}", timeout=timeout)

    def status(self, timeout: float) -> dict[str, Any] | None:
        from tgs.client import ControllerUnavailable
        try:
            with self.client(timeout) as c:
                return c.status()
        except ControllerUnavailable:
            return None

    def jobs(self) -> dict[str, dict[str, Any]]:
        with self.client(5) as c:
            return {j["name"]: j for j in c.list()}

    def files(self, job: str) -> Files:
        return job_files(self.jobs()[job])

    def log_tail(self, n: int = 2000) -> str:
        try:
            return (self.dir / "controller.log").read_text(errors="replace")[-n:]
        except OSError:
            return ""

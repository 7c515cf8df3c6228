"""Steerable driver-API processes for the residency and oversubscription tests: the simulator's
unified-memory agent (tgs.testbed.um_agent) and the oversubscription agent
(tests/sim/oversub_agent.py, which adds commands that block, such as the thrashing guard's
pause).  ask() sends a command line and returns its JSON answer; send/ready/recv split it for
commands that block."""

from __future__ import annotations

import json
import selectors
import subprocess
import sys
from pathlib import Path

GBPS = 25.0        # the simulator's default TGS_SIM_PCIE_GBPS


def mig_ms(nbytes: int, gbps: float = GBPS) -> float:
    """Simulated migration time of nbytes over the bus, ms."""
    return nbytes / gbps / 1e6


UM_AGENT = [sys.executable, "-m", "tgs.testbed.um_agent"]
OVERSUB_AGENT = [sys.executable, str(Path(__file__).resolve().parent / "sim" / "oversub_agent.py")]


class Agent:
    """One agent process (UM_AGENT by default), started with env; ready once it says so."""

    def __init__(self, env: dict[str, str], argv: list[str] | None = None) -> None:
        self.p = subprocess.Popen(argv or UM_AGENT, env=env, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        ready = self.recv()
        assert ready.get("ready"), ready

    def send(self, *words: object) -> None:
        assert self.p.stdin is not None
        self.p.stdin.write(" ".join(str(w) for w in words) + "\n")
        self.p.stdin.flush()

    def ready(self, timeout: float) -> bool:
        """Whether an answer is waiting (within timeout seconds)."""
        assert self.p.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(self.p.stdout, selectors.EVENT_READ)
            return bool(sel.select(timeout))

    def recv(self) -> dict[str, object]:
        assert self.p.stdout is not None
        line = self.p.stdout.readline()
        if not line:
            err = self.p.stderr.read() if self.p.stderr else ""
            raise RuntimeError(f"agent exited: {err}")
        return dict(json.loads(line))

    def ask(self, *words: object) -> dict[str, object]:
        self.send(*words)
        return self.recv()

    def ok(self, *words: object) -> dict[str, object]:
        out = self.ask(*words)
        assert out["r"] == 0, (words, out)
        return out

    def close(self) -> None:
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait(timeout=10)
        for f in (self.p.stdin, self.p.stdout, self.p.stderr):
            if f is not None:
                f.close()


class OversubAgent(Agent):
    """The oversubscription agent (tests/sim/oversub_agent.py)."""

    def __init__(self, env: dict[str, str]) -> None:
        super().__init__(env, OVERSUB_AGENT)


def spawn(made: list[Agent], env: dict[str, str], kind: type[Agent] = Agent) -> Agent:
    """An agent of this kind, remembered in `made` (closed by the test's fixture)."""
    a = kind(env)
    made.append(a)
    return a

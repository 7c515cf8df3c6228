"""A steerable process for the oversubscription tests (oversub_agent.py), with send/recv
for commands that block (the thrashing guard's pause)."""

from __future__ import annotations

import json
import selectors
import subprocess
import sys
from pathlib import Path

AGENT = Path(__file__).resolve().parent / "oversub_agent.py"


class Agent:
    """One process; ask() sends a command line and returns its JSON answer."""

    def __init__(self, env: dict[str, str]) -> None:
        self.p = subprocess.Popen([sys.executable, str(AGENT)], env=env,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
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

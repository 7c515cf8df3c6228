"""A steerable driver-API process (tgs.bench.um_agent) for the residency tests."""

from __future__ import annotations

import json
import subprocess
import sys


class Agent:
    """One process; ask() sends a command line and returns its JSON answer."""

    def __init__(self, env: dict[str, str]) -> None:
        self.p = subprocess.Popen([sys.executable, "-m", "tgs.bench.um_agent"], env=env,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        ready = self._read()
        assert ready.get("ready"), ready

    def _read(self) -> dict[str, object]:
        assert self.p.stdout is not None
        line = self.p.stdout.readline()
        if not line:
            err = self.p.stderr.read() if self.p.stderr else ""
            raise RuntimeError(f"agent exited: {err}")
        return dict(json.loads(line))

    def ask(self, *words: object) -> dict[str, object]:
        assert self.p.stdin is not None
        self.p.stdin.write(" ".join(str(w) for w in words) + "\n")
        self.p.stdin.flush()
        return self._read()

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

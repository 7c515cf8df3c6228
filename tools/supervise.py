"""Run one command as a child with signals forwarded, as a shell would wait for it.

The wrapper blocks the forwarded signals and takes them with sigtimedwait, so it
can never die before its child.  A signal the terminal sent (Ctrl-C, Ctrl-\\, a
hangup: si_code SI_KERNEL) already reached the child, which is in the same
foreground process group: it is not sent a second time.  A signal sent to the
wrapper alone (kill PID: SI_USER) is passed on to the child.
"""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Mapping, Sequence

FORWARD = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT,
           signal.SIGUSR1, signal.SIGUSR2)
_WATCH = (*FORWARD, signal.SIGCHLD)
SI_KERNEL = 0x80
EXIT_NOT_FOUND = 127
EXIT_NOT_EXECUTABLE = 126


class SpawnError(Exception):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def exit_code(status: int) -> int:
    """A wait status as a shell reports it: the exit code, or 128+N for signal N."""
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


class Supervisor:
    """Block the forwarded signals for the wrapper's life (use as a context manager)."""

    def __init__(self) -> None:
        self._old: set[int] | None = None

    def __enter__(self) -> Supervisor:
        self._old = set(signal.pthread_sigmask(signal.SIG_BLOCK, _WATCH))
        return self

    def __exit__(self, *exc: object) -> None:
        # drain what the child's end left pending, then restore the mask
        while signal.sigtimedwait(_WATCH, 0) is not None:
            pass
        if self._old is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, self._old)

    def pending(self) -> int | None:
        """A forwarded signal that arrived before any child existed (the user gave up)."""
        info = signal.sigtimedwait(FORWARD, 0)
        return info.si_signo if info is not None else None

    def run(self, argv: Sequence[str], env: Mapping[str, str]) -> int:
        """Spawn argv with env, forward signals until it ends; its shell-style exit code."""
        return self.wait(spawn(argv, env))

    def wait(self, pid: int) -> int:
        """Forward signals to child `pid` until it ends; its shell-style exit code."""
        while True:
            info = signal.sigtimedwait(_WATCH, 0.5)
            if info is not None and info.si_signo in FORWARD and info.si_code != SI_KERNEL:
                try:
                    os.kill(pid, info.si_signo)
                except ProcessLookupError:
                    pass
            done, status = os.waitpid(pid, os.WNOHANG)
            if done == pid:
                return exit_code(status)


def spawn(argv: Sequence[str], env: Mapping[str, str]) -> int:
    """Start argv with env (from a thread that blocks the forwarded signals, as every thread
    started inside a Supervisor does); its pid."""
    exe = _resolve(argv[0], env)
    try:
        # the child starts with an empty mask; exec resets our handlers to default
        return os.posix_spawn(exe, list(argv), dict(env), setsigmask=())
    except OSError as exc:
        code = EXIT_NOT_FOUND if exc.errno == 2 else EXIT_NOT_EXECUTABLE
        raise SpawnError(f"{argv[0]}: {exc.strerror}", code) from None


def _resolve(cmd: str, env: Mapping[str, str]) -> str:
    if "/" in cmd:
        if not os.path.exists(cmd):
            raise SpawnError(f"{cmd}: no such file", EXIT_NOT_FOUND)
        return cmd
    found = shutil.which(cmd, path=env.get("PATH", os.defpath))
    if found is None:
        raise SpawnError(f"{cmd}: command not found", EXIT_NOT_FOUND)
    return found

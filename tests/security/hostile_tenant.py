"""A hostile tenant: one long-lived process per attacker job, driven over stdin (JSON lines).

It only touches the files it is given, opened as its container would open them: writable files
O_RDWR, read-only files O_RDONLY (a read-only bind mount allows nothing more).  Each command
starts one attack and answers one JSON line once the attack is in place; ``stop`` ends it
(releases every lock, unmaps everything) and answers again.  Loops are paced (a few ms per
step) so that the attacker's CPU use does not itself slow the victims on a small machine.

Commands: {"op": OP, "rw": [paths], "ro": [paths], ...}
  corrupt       loop over every rw file: ftruncate to 0, to half its size, overwrite every
                byte with 0xFF, with random bytes (truncate / scribble: the first / last two)
  ofd_locks     OFD lock on every byte of every file that nobody else holds (write on rw
                files, read on ro files) and flock (exclusive on rw, shared on ro); held
  posix_locks   the same with classic (process-owned) fcntl locks
  read_locks    OFD and classic read locks and shared flocks on every byte of every ro file
  noop          nothing (a quiet window measured like an attack)
  set           loop (every 0.5 ms): write fields by name in the rw files:
                "set": [[[name, alternative...], value], ...]; value is an int, "now"
                (CLOCK_MONOTONIC ns) or "busy_seq+1" (the largest busy_seq any file shows, +1)
  stop, exit
"""

from __future__ import annotations

import errno
import fcntl
import json
import mmap
import os
import struct
import sys
import threading
import time
from typing import Any

from hostile_fields import FieldRef, find_fields, first_field, read_field

F_OFD_SETLK = getattr(fcntl, "F_OFD_SETLK", 37)
PACE_S = 0.02
SET_PACE_S = 0.0005


class Attack:
    def __init__(self) -> None:
        self.fds: list[int] = []
        self.maps: dict[str, mmap.mmap] = {}
        self.stop_ev = threading.Event()
        self.thread: threading.Thread | None = None
        self.steps = 0
        self.errors: list[str] = []

    def open(self, path: str, writable: bool) -> int | None:
        try:
            fd = os.open(path, (os.O_RDWR if writable else os.O_RDONLY) | os.O_CLOEXEC)
        except OSError as exc:
            self.errors.append(f"open {path}: {exc.strerror}")
            return None
        self.fds.append(fd)
        return fd

    def loop(self, step: Any, pace: float) -> None:
        def run() -> None:
            while not self.stop_ev.is_set():
                try:
                    step()
                except OSError as exc:
                    if len(self.errors) < 10:
                        self.errors.append(str(exc))
                self.steps += 1
                self.stop_ev.wait(pace)
        step()                      # the attack is in place before we answer
        self.steps = 1
        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def end(self) -> dict[str, Any]:
        self.stop_ev.set()
        if self.thread is not None:
            self.thread.join(5)
        for mm in self.maps.values():
            try:
                mm.close()
            except BufferError:
                pass
        for fd in self.fds:
            os.close(fd)
        return {"ok": True, "steps": self.steps, "errors": self.errors}


def corrupt(a: Attack, rw: list[str], steps: tuple[str, ...]) -> dict[str, Any]:
    """Cycle through the steps on every file: truncate to 0 / to half, fill 0xFF / random."""
    files = [(fd, os.fstat(fd).st_size) for fd in (a.open(p, True) for p in rw) if fd is not None]
    phase = [0]

    def step() -> None:
        what = steps[phase[0] % len(steps)]
        for fd, size in files:
            if what == "trunc0":
                os.ftruncate(fd, 0)
            elif what == "trunc_half":
                os.ftruncate(fd, size // 2)
            else:
                os.pwrite(fd, b"\xff" * size if what == "ff" else os.urandom(size), 0)
        phase[0] += 1
    a.loop(step, PACE_S)
    return {"ok": True, "files": len(files)}


CORRUPT_STEPS = {"truncate": ("trunc0", "trunc_half"), "scribble": ("ff", "random"),
                 "corrupt": ("trunc0", "trunc_half", "ff", "random")}


def _lock_range(fd: int, cmd: int, kind: int, start: int, length: int) -> int:
    """Lock [start, start+length) (length 0: to the end of any size), splitting around bytes
    someone else holds; the number of lock calls that succeeded."""
    try:
        fcntl.fcntl(fd, cmd, struct.pack("hhqqi4x", kind, os.SEEK_SET, start, length, 0))
        return 1
    except OSError as exc:
        if exc.errno not in (errno.EAGAIN, errno.EACCES) or length == 1:
            return 0
    if length == 0:
        return 0
    half = length // 2
    return (_lock_range(fd, cmd, kind, start, half)
            + _lock_range(fd, cmd, kind, start + half, length - half))


def locks(a: Attack, rw: list[str], ro: list[str], ofd: bool) -> dict[str, Any]:
    """Every byte (beyond the end too) that nobody else holds, plus flock."""
    held: list[str] = []
    cmd = F_OFD_SETLK if ofd else fcntl.F_SETLK
    for paths, writable in ((rw, True), (ro, False)):
        for p in paths:
            fd = a.open(p, writable)
            if fd is None:
                continue
            kind = fcntl.F_WRLCK if writable else fcntl.F_RDLCK
            size = os.fstat(fd).st_size
            n = _lock_range(fd, cmd, kind, 0, 0)
            if n == 0:
                n = _lock_range(fd, cmd, kind, 0, size) + _lock_range(fd, cmd, kind, size, 0)
            held.append(f"{'ofd' if ofd else 'posix'}-{'w' if writable else 'r'} x{n} {p}")
            try:
                fcntl.flock(fd, (fcntl.LOCK_EX if writable else fcntl.LOCK_SH) | fcntl.LOCK_NB)
                held.append(f"flock-{'ex' if writable else 'sh'} {p}")
            except OSError as exc:
                a.errors.append(f"flock {p}: {exc.strerror}")
    return {"ok": True, "held": held, "errors": a.errors}


def _value(expr: Any, seq_refs: list[FieldRef]) -> int:
    if expr == "now":
        return time.monotonic_ns()
    if expr == "busy_seq+1":
        seqs = [v for v in (read_field(r) for r in seq_refs) if v is not None]
        return max(seqs, default=0) + 1
    return int(expr)


def set_fields(a: Attack, rw: list[str], ro: list[str], spec: list[Any]) -> dict[str, Any]:
    targets: list[tuple[FieldRef, Any]] = []
    for names, expr in spec:
        targets += [(r, expr) for r in first_field(rw, tuple(names))]
    if not targets:
        return {"ok": False, "error": "no writable file has these fields"}
    seq_refs = [r for p in list(ro) + list(rw) for r in find_fields(p, "busy_seq")]
    for r, _ in targets:
        if r.path not in a.maps:
            fd = a.open(r.path, True)
            if fd is None:
                return {"ok": False, "error": f"cannot open {r.path}"}
            a.maps[r.path] = mmap.mmap(fd, os.fstat(fd).st_size)
    fmt = {1: "<B", 2: "<H", 4: "<I", 8: "<Q"}

    def step() -> None:
        for r, expr in targets:
            mask = (1 << (8 * r.size)) - 1
            struct.pack_into(fmt[r.size], a.maps[r.path], r.offset, _value(expr, seq_refs) & mask)
    a.loop(step, SET_PACE_S)
    names = sorted({f"{os.path.basename(r.path)}:{r.name}" for r, _ in targets})
    return {"ok": True, "fields": names, "count": len(targets)}


def main() -> None:
    attack: Attack | None = None
    print(json.dumps({"ok": True, "ready": os.getpid()}), flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        op, rw, ro = cmd["op"], list(cmd.get("rw", [])), list(cmd.get("ro", []))
        if op in ("stop", "exit"):
            reply = attack.end() if attack is not None else {"ok": True}
            attack = None
            print(json.dumps(reply), flush=True)
            if op == "exit":
                return
            continue
        if attack is not None:
            attack.end()
        attack = Attack()
        if op in CORRUPT_STEPS:
            reply = corrupt(attack, rw, CORRUPT_STEPS[op])
        elif op in ("ofd_locks", "posix_locks"):
            reply = locks(attack, rw, ro, op == "ofd_locks")
        elif op == "read_locks":
            reply = locks(attack, [], ro, True)
            more = locks(attack, [], ro, False)
            reply["held"] = reply["held"] + more["held"]
        elif op == "noop":
            reply = {"ok": True}
        elif op == "set":
            reply = set_fields(attack, rw, ro, cmd["set"])
        else:
            reply = {"ok": False, "error": f"unknown op {op}"}
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()

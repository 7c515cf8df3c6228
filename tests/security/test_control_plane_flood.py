"""The control plane outlives floods: a real controller, loopback and ipc only.

(a) plain TCP connections to a --listen port, the controller under a descriptor limit of 256:
    it stays up, answers on ipc throughout, and an authorized remote client gets in again once
    the flood is over (the --listen process pauses its endpoints and is counted doing so);
(b) a backlog of register/unregister requests: the loop keeps its period (steps within a
    margin of the clock) and its counters account for every period it missed;
(c) clients that never read their replies: the controller's memory stays bounded, the
    dropped replies are counted.
Every flood is bounded in count and time; every socket and process is closed on failure too.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import socket
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq
from ctl_process import Ctl, start_ctl
from proc_helpers import wait_for
from tgs.client import Client, ControllerUnavailable
from tgs.client.keys import ClientKeys, read_key_file, write_keypair

pytestmark = [pytest.mark.security, pytest.mark.timeout(150)]
FD_LIMIT = 256                # the controller's (and so its --listen process's) soft = hard
FLOOD_CONNS = 400             # TCP connections per wave
FLOOD_S = 6.0                 # the most a flood lasts
PERIOD_S = 0.05               # start_ctl's --period-ms


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def front_pids(pid: int) -> list[int]:
    """The controller's --listen processes (its children running tgs.controller.front)."""
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            kids = [int(x) for x in (task / "children").read_text().split()]
        except OSError:
            continue
        for k in kids:
            try:
                if b"tgs.controller.front" in Path(f"/proc/{k}/cmdline").read_bytes():
                    out.append(k)
            except OSError:
                pass
    return out


@pytest.fixture
def listen_ctl(tmp_path: Path, sim_env: dict[str, str]) -> Iterator[tuple[Ctl, int]]:
    port = free_port()

    def low_limit() -> None:             # in the child, before the exec
        resource.setrlimit(resource.RLIMIT_NOFILE, (FD_LIMIT, FD_LIMIT))

    for c in start_ctl(tmp_path, sim_env, "--listen", str(port), preexec_fn=low_limit):
        yield c, port


@pytest.fixture
def ctl(tmp_path: Path, sim_env: dict[str, str]) -> Iterator[Ctl]:
    yield from start_ctl(tmp_path, sim_env)


@pytest.fixture
def zctx() -> Iterator[zmq.Context]:
    ctx = zmq.Context()
    try:
        yield ctx
    finally:
        ctx.destroy(linger=0)            # every socket a test left open


def authorize(tmp_path: Path) -> ClientKeys:
    pub, sec = write_keypair(tmp_path / "keys", "good")
    state = tmp_path / "state" / "curve"
    shutil.copy(pub, state / "authorized" / pub.name)
    public, secret = read_key_file(sec, need_secret=True)
    assert secret is not None
    return ClientKeys(read_key_file(state / "server.key", need_secret=False)[0], public, secret)


def remote_ok(port: int, keys: ClientKeys | None) -> bool:
    try:
        with Client(endpoint=f"tcp://127.0.0.1:{port}", timeout=1.0, curve=keys) as c:
            c.status()
        return True
    except ControllerUnavailable:
        return False


def test_tcp_flood_under_a_low_descriptor_limit(tmp_path: Path, listen_ctl) -> None:
    c, port = listen_ctl
    keys = authorize(tmp_path)
    assert wait_for(lambda: remote_ok(port, keys), timeout=15, step=0.2)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if min(hard, 8192) < 3 * FLOOD_CONNS:
        pytest.skip("this process cannot open enough sockets for the flood")
    pid = c.proc.pid
    front = front_pids(pid)
    assert len(front) == 1, front
    socks: list[socket.socket] = []
    most = {"ctl": 0, "front": 0}
    answered = paused_seen = 0
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 8192)), hard))
    try:
        deadline = time.monotonic() + FLOOD_S
        while time.monotonic() < deadline and len(socks) < 3 * FLOOD_CONNS:
            for _ in range(FLOOD_CONNS // 4):       # a burst: connects all in flight at once
                s = socket.socket()
                s.setblocking(False)
                s.connect_ex(("127.0.0.1", port))
                socks.append(s)
            time.sleep(0.05)
            for s in socks:                         # 4 bytes, no CurveZMQ key
                try:
                    s.send(b"\xff\x00\x00\x00")
                except OSError:
                    pass
            most["ctl"] = max(most["ctl"], fds(pid))
            most["front"] = max(most["front"], fds(front[0]))
            assert c.proc.poll() is None, c.log.read_text()[-3000:]
            st = c.status()                         # the ipc socket answers throughout
            answered += 1
            paused_seen += bool(st["listen_paused"])
            if st["listen_pauses"] and len(socks) >= FLOOD_CONNS:
                break
        st = c.status()
        print(f"flood: {len(socks)} connections, controller fds <= {most['ctl']}, --listen "
              f"process fds <= {most['front']} (limit {FD_LIMIT}), {answered} ipc status "
              f"calls answered, pauses {st['listen_pauses']}")
        assert st["listen_pauses"] >= 1 or paused_seen, st
        assert most["ctl"] < FD_LIMIT // 2          # the flood never reaches its table
    finally:
        for s in socks:
            s.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    # flood over: the endpoints come back and admit the authorized key only
    assert wait_for(lambda: remote_ok(port, keys), timeout=20, step=0.3), \
        c.log.read_text()[-3000:]
    assert not remote_ok(port, None)
    st = c.status()
    assert c.proc.poll() is None and st["listen_paused"] is False
    assert st["listen_restarts"] == 0 and front_pids(pid) == front   # nothing died
    log = c.log.read_text()
    assert "descriptors near the limit" in log and "Traceback" not in log
    with zmq.Context() as ctx, ctx.socket(zmq.DEALER) as d:  # malformed: still an error
        d.setsockopt(zmq.LINGER, 0)
        d.connect(c.addr)
        d.send_multipart([b"junk", b"{}"])
        assert d.poll(5000)
        assert json.loads(d.recv_multipart()[-1])["error"]["code"] == "bad_frame"


def test_request_backlog_keeps_the_period(ctl: Ctl, zctx: zmq.Context) -> None:
    """Many clients keep register/unregister requests in flight; the loop must still step at
    close to its period, and steps + periods_missed must follow the clock."""
    stop = threading.Event()
    oks: dict[str, list[str]] = {}               # job -> the verbs that were acknowledged
    lock = threading.Lock()

    def client(k: int) -> None:
        s = zctx.socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 0)
        s.connect(ctl.addr)
        try:
            i = 0
            while not stop.is_set():
                sent = {}
                for j in range(4):
                    name = f"b{k}-{i}-{j}"
                    for verb in ("register", "unregister"):
                        rid = uuid.uuid4().hex
                        sent[rid] = (name, verb)
                        s.send(json.dumps({"v": 1, "id": rid, "type": verb,
                                           "name": name}).encode())
                for _ in range(len(sent)):
                    if not s.poll(5000):
                        break
                    r = json.loads(s.recv_multipart()[-1])
                    if r.get("ok") and r.get("id") in sent:
                        name, verb = sent[r["id"]]
                        with lock:
                            oks.setdefault(name, []).append(verb)
                i += 1
        finally:
            s.close(0)

    before = ctl.status()
    t0 = time.monotonic()
    threads = [threading.Thread(target=client, args=(k,), daemon=True) for k in range(12)]
    try:
        for t in threads:
            t.start()
        time.sleep(2.5)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=15)
    after = ctl.status()
    elapsed = time.monotonic() - t0
    expected = elapsed / PERIOD_S
    steps = after["steps"] - before["steps"]
    missed = after["periods_missed"] - before["periods_missed"]
    overruns = after["overruns"] - before["overruns"]
    served = after["requests"] - before["requests"]
    print(f"backlog: {served} requests in {elapsed:.2f} s, {steps} steps of {expected:.0f}, "
          f"{missed} periods missed, {overruns} overruns, request budget used up in "
          f"{after['request_budget_exhausted'] - before['request_budget_exhausted']} periods")
    assert served > 100                               # it was a backlog
    assert steps >= 0.5 * expected
    # honest counters: what was not stepped is counted as missed
    assert 0.85 * expected <= steps + missed <= 1.15 * expected + 2
    if steps < 0.9 * expected:
        assert overruns > 0
    # nothing acknowledged was lost: the registry holds exactly the jobs whose register was
    # acknowledged and whose unregister was not
    assert not any(t.is_alive() for t in threads)
    left = {n for n, verbs in oks.items() if verbs == ["register"]}
    assert {n for n in ctl.jobs() if n.startswith("b")} == left


def test_clients_that_never_read(ctl: Ctl, zctx: zmq.Context) -> None:
    """64 clients send list requests and never read a reply: memory bounded, drops counted."""
    with ctl.client() as c:
        for i in range(20):                          # replies of some size
            c.register(f"big{i}")
    pid = ctl.proc.pid
    base = rss_mb(pid)
    socks = []
    for _ in range(64):
        s = zctx.socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 0)
        s.setsockopt(zmq.RCVHWM, 1)
        s.setsockopt(zmq.RCVBUF, 4096)
        s.setsockopt(zmq.SNDHWM, 1000)
        s.connect(ctl.addr)
        socks.append(s)
    msg = json.dumps({"v": 1, "id": "x", "type": "list"}).encode()
    most = base
    try:
        # at least 5 s, and until replies are dropped (the queues and socket buffers full)
        start = time.monotonic()
        while True:
            for s in socks:
                for _ in range(20):
                    try:
                        s.send(msg, zmq.NOBLOCK)
                    except zmq.Again:
                        break
            time.sleep(0.02)
            most = max(most, rss_mb(pid))
            took = time.monotonic() - start
            if took > 5.0:
                st = ctl.status()                    # answers amid the flood
                if st["replies_dropped"] or took > 25.0:
                    break
    finally:
        for s in socks:
            s.close(0)
    print(f"never-read: RSS {base:.0f} MB -> at most {most:.0f} MB, "
          f"{st['replies_dropped']} replies dropped of {st['requests']} requests")
    assert most - base < 100
    assert st["replies_dropped"] > 0
    with urllib.request.urlopen(st["metrics_url"], timeout=10) as r:   # Prometheus too
        text = r.read().decode()
    line = next(ln for ln in text.splitlines()
                if ln.startswith("tgs_controller_replies_dropped_total "))
    assert float(line.split()[1]) >= st["replies_dropped"]
    assert ctl.proc.poll() is None and ctl.status()["jobs"] == 20


def test_listen_process_restarts_and_dies_with_the_controller(tmp_path: Path,
                                                              listen_ctl) -> None:
    c, port = listen_ctl
    keys = authorize(tmp_path)
    assert wait_for(lambda: remote_ok(port, keys), timeout=15, step=0.2)
    [front] = front_pids(c.proc.pid)
    os.kill(front, signal.SIGKILL)              # a child of the controller this test started
    assert wait_for(lambda: c.status()["listen_restarts"] == 1, timeout=10, step=0.1)
    assert wait_for(lambda: remote_ok(port, keys), timeout=15, step=0.2)
    [again] = front_pids(c.proc.pid)
    assert again != front and c.status()["listen_paused"] is False
    c.proc.kill()                               # SIGKILL: no clean-up of the controller's own
    c.proc.wait()
    assert wait_for(lambda: not Path(f"/proc/{again}").exists() or
                    Path(f"/proc/{again}/stat").read_text().split()[2] == "Z", timeout=10)

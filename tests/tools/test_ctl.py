"""tgsctl against a real controller: ls/status JSON, live set, top, bad input."""

from __future__ import annotations

import json

from click.testing import CliRunner
from tgs.tools import ctl as ctl_mod
from tools_helpers import Ctl, Probe, probe_cmd, wait_for

GIB = 1 << 30
JOB_KEYS = {"name": str, "priority": str, "weight": int, "device": int, "state": str,
            "segment": str, "ephemeral": bool, "process_list": list}


def invoke(ctl: Ctl, *args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(ctl_mod.cli, ["--controller", ctl.addr, *args])


def test_ls_and_status_json_schema(ctl: Ctl, probes: list[Probe]) -> None:
    p = Probe(probe_cmd("--name", "j1", "--mem", "2GiB", "--priority", "production"), ctl.env)
    probes.append(p)
    assert p.ask(f"alloc {GIB}") == "alloc 0"
    assert wait_for(lambda: ctl.jobs()["j1"].get("processes") == 1)
    r = invoke(ctl, "ls", "--json")
    assert r.exit_code == 0, r.output
    (job,) = json.loads(r.output)["jobs"]
    for key, typ in JOB_KEYS.items():
        assert isinstance(job[key], typ), key
    assert job["mem_quota"] == 2 * GIB and job["priority"] == "production"
    assert job["mem_used"] == GIB and job["processes"] == 1
    assert isinstance(job["work_rate"], (int, float))
    assert "rate" in job and "throttled_frac" in job
    (proc,) = job["process_list"]
    assert proc["pid"] == p.proc.pid or proc["pid"] > 0
    assert proc["mem_used"] == GIB
    r = invoke(ctl, "ls")
    assert r.exit_code == 0 and "j1" in r.output and "1GiB/2GiB" in r.output
    st = json.loads(invoke(ctl, "status", "--json").output)
    assert st["protocol"] == 1 and st["policy"] == "adaptive"
    assert st["devices"][0]["kind"] == "sim" and st["devices"][0]["mem_total"] > 0
    assert isinstance(st["gpus"], list) and st["gpus"][0]["index"] == 0
    text = invoke(ctl, "status").output
    assert "policy: adaptive" in text and "GPU" in text


def test_set_live_quota_seen_by_process(ctl: Ctl, probes: list[Probe]) -> None:
    """A running process sees the new cuMemGetInfo total within a period; a quota below
    usage refuses new allocations and keeps the old ones."""
    p = Probe(probe_cmd("--name", "live", "--mem", "4GiB"), ctl.env)
    probes.append(p)
    assert p.info()[1] == 4 * GIB
    assert p.ask(f"alloc {2 * GIB}") == "alloc 0"
    r = ctl.run("tgsctl", "set", "live", "--mem", "3GiB", "--weight", "5", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["job"]["mem_quota"] == 3 * GIB
    assert wait_for(lambda: p.info()[1] == 3 * GIB, timeout=5)
    assert ctl.jobs()["live"]["weight"] == 5
    assert ctl.run("tgsctl", "set", "live", "--mem", "1GiB").returncode == 0
    assert wait_for(lambda: p.info()[1] == GIB, timeout=5)
    assert p.info()[0] == 0                          # used 2 GiB of 1 GiB: nothing free
    assert p.ask("alloc 1048576") == "alloc 2"      # new allocations refused
    assert p.ask("free") == "free 0"                 # existing ones intact and freeable
    assert p.ask("alloc 1048576") == "alloc 0"
    assert ctl.run("tgsctl", "set", "live", "--mem", "unlimited").returncode == 0
    assert wait_for(lambda: p.info()[1] > 4 * GIB, timeout=5)
    assert p.close() == 0


def test_set_bad_input_changes_nothing(ctl: Ctl) -> None:
    assert ctl.run("tgsctl", "add", "fixed", "--mem", "1GiB").returncode == 0
    ident = ("name", "priority", "weight", "mem_quota", "device", "segment", "created")
    before = {k: ctl.jobs()["fixed"][k] for k in ident}
    for args, needle in [
        (["set", "fixed", "--mem", "lots"], "not a size"),
        (["set", "fixed", "--weight", "0"], "weight"),
        (["set", "fixed", "--priority", "vip"], "priority"),
        (["set", "fixed"], "nothing to change"),
        (["set", "nobody", "--mem", "1G"], "no job named"),
        (["set", "fixed", "--priority", "production", "--mem", "64GiB"], "overcommit"),
    ]:
        r = ctl.run("tgsctl", *args)
        assert r.returncode == 2, (args, r.stderr)
        assert needle in r.stderr + r.stdout, (args, r.stderr)
    assert {k: ctl.jobs()["fixed"][k] for k in ident} == before
    assert ctl.run("tgsctl", "rm", "fixed").returncode == 0
    assert ctl.jobs() == {}


def test_top_once_and_no_controller(ctl: Ctl, tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert invoke(ctl, "add", "shown", "--weight", "2").exit_code == 0
    r = invoke(ctl, "top", "--once", "--no-color")
    assert r.exit_code == 0 and "shown" in r.output and "GPU" in r.output
    assert "\x1b[" not in r.output
    r = CliRunner().invoke(ctl_mod.cli, ["--controller", str(tmp_path / "x.sock"),
                                         "--timeout", "0.5", "ls"])
    assert r.exit_code == 2 and "start one with `tgs-controller`" in r.output


def test_completion_script() -> None:
    import os
    import subprocess

    from tools_helpers import tool
    env = dict(os.environ, _TGSCTL_COMPLETE="bash_source")
    out = subprocess.run([tool("tgsctl")], env=env, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and "_tgsctl_completion" in out.stdout


def test_set_priority_changes_rate_live(tmp_path, sim_env) -> None:  # type: ignore[no-untyped-def]
    """Static policy: an opportunistic job runs at a fraction of its solo rate; made
    production with tgsctl set, the running process speeds up within a few periods."""
    import subprocess
    import time
    from pathlib import Path

    from tools_helpers import start_ctl, stop, tool

    workload = Path(__file__).resolve().parents[2] / "build" / "bin" / "tgs-workload"
    gen = start_ctl(tmp_path, sim_env, "--policy", "static", "--static-share", "0.2")
    ctl = next(gen)
    wl = None
    try:
        wl = subprocess.Popen([tool("tgs-run"), "--name", "lift", "--", str(workload),
                               "--seconds", "30", "--report-ms", "200", "--gap-ms", "0"],
                              env=ctl.env, stdout=subprocess.PIPE, text=True,
                              start_new_session=True)     # stop() ends the workload too
        assert wl.stdout is not None

        import threading
        got: list[tuple[float, dict]] = []     # (when we read it, record), read promptly
        cond = threading.Condition()

        def reader() -> None:
            try:
                for line in wl.stdout:
                    rec = json.loads(line)
                    with cond:
                        got.append((time.monotonic(), rec))
                        cond.notify_all()
            except (ValueError, OSError):       # the pipe closed under us at the end
                pass
            with cond:
                got.append((time.monotonic(), {"type": "end"}))
                cond.notify_all()

        threading.Thread(target=reader, daemon=True).start()

        def rate() -> float:
            """it/s of the next progress window reported after this call (a reader thread
            timestamps every record as it arrives, whatever the machine's load)."""
            since = time.monotonic()
            with cond:
                while True:
                    for when, rec in got:
                        assert rec["type"] != "end", "the workload ended"
                        if when > since and rec["type"] == "progress":
                            return float(rec["it_per_s"])
                    assert cond.wait(timeout=20), "no progress from the workload"

        assert wait_for(lambda: ctl.jobs().get("lift", {}).get("rate") is not None, timeout=15)
        for _ in range(3):                      # let the limit settle
            rate()
        slow = min(rate(), rate())
        r = ctl.run("tgsctl", "set", "lift", "--priority", "production")
        assert r.returncode == 0, r.stderr
        rate()                                  # the window that straddles the change
        fast = max(rate(), rate())
        assert fast > 2 * slow, (slow, fast)
        assert ctl.jobs()["lift"]["rate"] is None
    finally:
        stop(wl)
        gen.close()

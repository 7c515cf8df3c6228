"""What `tgsctl ls` and `top` show of how a job is held back: the rule and
gate, the granted vs measured rate, the in-flight cap, the memory limits, the marks of a damaged
or tampered segment, and the unit of the rates."""

from __future__ import annotations

import subprocess
from pathlib import Path

from click.testing import CliRunner
from tgs.tools import ctl as ctl_mod
from tgs.tools.jobview import Meter, job_table, job_warnings
from tgs.tools.view import jobs_text, top_frame
from tools_helpers import Ctl, stop, tool, wait_for

GIB = 1 << 30
WORKLOAD = Path(__file__).resolve().parents[2] / "build" / "bin" / "tgs-workload"
BASE = {"weight": 1, "device": 0, "processes": 1, "mem_used": 0, "mem_quota": None,
        "state": "running", "work_rate": 2e6, "throttled_frac": 0.0}


def _job(name: str, **kw: object) -> dict:
    return {**BASE, "name": name, **kw}


def _row(jobs: list[dict], name: str, measured: dict | None = None) -> dict[str, str]:
    header, rows = job_table(jobs, measured)
    return next(dict(zip(header, r)) for r in rows if r[0] == name)


def _cells(lines: list[str], name: str) -> dict[str, str]:
    """A row of the text table, by the header's column positions."""
    header = lines[0]
    names = [h.strip() for h in header.split("  ") if h.strip()]
    starts: list[int] = []
    for h in names:
        starts.append(header.index(h, starts[-1] + 1 if starts else 0))
    row = next(ln for ln in lines if ln.startswith(f"{name} "))
    ends = [*starts[1:], None]
    return {h: row[a:b].strip() for h, a, b in zip(names, starts, ends)}


def test_rows_say_what_holds_a_job() -> None:
    jobs = [
        _job("prod", priority="production", control="production", gate=1, rate=None),
        _job("gated", priority="opportunistic", control="guard", gate=6, rate=None,
             inflight_cap=4_000_000),
        _job("limited", priority="opportunistic", control="guard", gate=6, rate=153.2e6,
             throttled_frac=0.25),
        _job("probed", priority="opportunistic", control="probe", gate=6, rate=1.0),
        _job("open", priority="opportunistic", control="open", gate=2, rate=None),
        _job("new", priority="opportunistic"),                   # not seen by the loop yet
    ]
    row = _row(jobs, "gated")
    assert (row["CONTROL"], row["RATE"], row["CAP"], row["THROTTLED"]) == \
        ("guard (wait+fit)", "gated", "4.0M", "-")
    row = _row(jobs, "limited")
    assert (row["RATE"], row["THROTTLED"]) == ("153.2M/s", "25%")
    assert _row(jobs, "probed")["RATE"] == "paused"               # not "1/s"
    assert (_row(jobs, "open")["CONTROL"], _row(jobs, "open")["RATE"]) == ("open (wait)", "gated")
    row = _row(jobs, "prod")
    assert (row["CONTROL"], row["RATE"], row["CAP"]) == ("production", "unlimited", "-")
    assert (_row(jobs, "new")["CONTROL"], _row(jobs, "new")["RATE"]) == ("-", "-")
    assert "MEM TOTAL" not in job_table(jobs)[0] and "PINNED" not in job_table(jobs)[0]
    text = jobs_text(jobs, procs=False)
    assert "work units (1 = one GPU thread launched)" in text     # the unit, said


def test_memory_limits_and_segment_marks() -> None:
    jobs = [_job("over", priority="opportunistic", mem_total=24 * GIB, host_pinned_max=8 * GIB,
                 segment_tampered="slots 3", control="guard", gate=6, rate=None),
            _job("broken", priority="opportunistic", segment_damaged="bad magic"),
            _job("plain", priority="opportunistic")]
    row = _row(jobs, "over")
    assert (row["MEM TOTAL"], row["PINNED"], row["STATE"]) == ("24GiB", "8GiB", "running !TAMPERED")
    assert _row(jobs, "broken")["STATE"] == "running !DAMAGED"
    assert (_row(jobs, "plain")["MEM TOTAL"], _row(jobs, "plain")["STATE"]) == ("-", "running")
    warn = job_warnings(jobs)
    assert len(warn) == 2 and "slots 3" in warn[0] and "bad magic" in warn[1]
    text = jobs_text(jobs, procs=False)
    assert "WARNING job over: segment tampered (slots 3)" in text


def test_top_measures_work_over_the_frame() -> None:
    """The measured rate is the exact totals' difference over the interval, not one period's
    figure: a period that read 1.3G/s does not show."""
    meter = Meter()
    j = _job("opp", priority="opportunistic", control="guard", gate=6, rate=None,
             work_total=1_000_000, throttled_s_total=0.0, work_rate=1.3e9)
    assert meter.update([j], 10.0) == {}                          # first frame: nothing yet
    j2 = {**j, "work_total": 3_000_000, "throttled_s_total": 0.5, "work_rate": 1.0}
    measured = meter.update([j2], 12.0)
    assert measured["opp"] == (1e6, 0.25)
    st = {"policy": "adaptive", "period_ms": 50, "devices": [
        {"index": 0, "name": "sim", "uuid": "GPU-sim-0", "kind": "sim", "mem_total": GIB}]}
    frame = top_frame(st, [j2], "now", color=False, measured=measured)
    assert "1.0M" in frame and "1.3G" not in frame and "since the last frame" in frame


def test_ls_shows_the_gate_and_the_limits(ctl: Ctl) -> None:
    r = ctl.run("tgsctl", "add", "over", "--mem", "1GiB", "--mem-total", "2GiB",
                "--host-pinned", "512MiB")
    assert r.returncode == 0, r.stderr
    procs = [subprocess.Popen([tool("tgs-run"), "--name", name, *prio, "--", str(WORKLOAD),
                               "--seconds", "20", "--gap-ms", gap], env=ctl.env,
                              stdout=subprocess.DEVNULL, start_new_session=True)
             for name, prio, gap in (("prod", ["--priority", "production"], "5"),
                                     ("opp", [], "0"))]
    try:
        def gated() -> bool:
            j = ctl.jobs().get("opp", {})
            return bool((j.get("gate") or 0) & 2) and j.get("control") is not None
        assert wait_for(gated, timeout=15)
        r = CliRunner().invoke(ctl_mod.cli, ["--controller", ctl.addr, "ls"])
        assert r.exit_code == 0, r.output
        lines = r.output.splitlines()
        opp, over = _cells(lines, "opp"), _cells(lines, "over")
        assert opp["CONTROL"].endswith(("(wait)", "(wait+fit)")), opp
        assert opp["RATE"] != "unlimited" and opp["CAP"], opp
        assert (over["MEM TOTAL"], over["PINNED"]) == ("2GiB", "512MiB"), over
        r = CliRunner().invoke(ctl_mod.cli, ["--controller", ctl.addr, "top", "--once",
                                             "--no-color"])
        assert r.exit_code == 0 and "(wait" in r.output and "work units" in r.output
    finally:
        for p in procs:
            stop(p)

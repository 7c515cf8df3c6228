"""deploy/grafana/tgs-dashboard.json and deploy/monitoring/ hold together with what a real
controller serves: every metric a panel or variable names is in the exposition (counters with
their _total), and docs/usage.md's metrics table lists every metric served."""

from __future__ import annotations

import json
import re
import socket
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families
from tools_helpers import Ctl, start_ctl

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "tgs-dashboard.json"
METRIC = re.compile(r"\btgs_[a-z0-9_]+\b")


@pytest.fixture
def served(tmp_path: Path, sim_env: dict[str, str]) -> Iterator[set[str]]:
    """The metric names a controller serves (with --on-bypass stop and --listen: theirs too),
    as they are written in the exposition and so in queries."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    gen = start_ctl(tmp_path, sim_env, "--on-bypass", "stop", "--listen", str(port))
    ctl: Ctl = next(gen)
    try:
        r = ctl.run("tgsctl", "add", "dash", "--mem", "1GiB")
        assert r.returncode == 0, r.stderr
        url = ctl.status()["metrics_url"]
        # the --listen process reports its figures a little after the controller is up
        deadline = time.monotonic() + 10
        names = _scrape(url)
        while not _doc_metrics() <= names and time.monotonic() < deadline:
            time.sleep(0.2)
            names = _scrape(url)
    finally:
        gen.close()
    yield names


def _scrape(url: str) -> set[str]:
    with urllib.request.urlopen(url, timeout=10) as resp:
        text = resp.read().decode()
    names: set[str] = set()
    for fam in text_string_to_metric_families(text):
        # a family without samples (no job has a rate yet) is still served: HELP and TYPE
        names.add(f"{fam.name}_total" if fam.type == "counter" else fam.name)
        names.update(s.name for s in fam.samples if not s.name.endswith("_created"))
    return {n for n in names if n.startswith("tgs_")}


def _doc_metrics() -> set[str]:
    """The metrics docs/usage.md's table lists."""
    text = (ROOT / "docs" / "usage.md").read_text()
    return set(METRIC.findall(text[text.index("| metric | labels | meaning |"):
                                   text.index("A work unit is one")]))


def _queries(dash: dict) -> Iterator[tuple[str, str]]:
    """(where, PromQL) for every panel target and every query variable."""
    def panels(ps: list[dict]) -> Iterator[dict]:
        for p in ps:
            yield p
            yield from panels(p.get("panels") or [])
    for p in panels(dash["panels"]):
        for t in p.get("targets") or []:
            yield p["title"], t["expr"]
    for v in dash["templating"]["list"]:
        if v.get("type") == "query":
            q = v["query"]
            yield f"${v['name']}", q["query"] if isinstance(q, dict) else q


def test_dashboard_queries_name_served_metrics(served: set[str]) -> None:
    dash = json.loads(DASHBOARD.read_text())
    queries = list(_queries(dash))
    assert len(queries) > 20
    used: set[str] = set()
    for where, expr in queries:
        names = set(METRIC.findall(expr))
        assert names, (where, expr)                  # every query reads the controller's
        assert names <= served, (where, sorted(names - served))
        used |= names
    # what the issue asks to see: per GPU and per job, memory, throttling, loop health
    for need in ("tgs_gpu_production_duty", "tgs_gpu_production_idle_seconds_total",
                 "tgs_job_throttled_seconds_total", "tgs_job_memory_used_bytes",
                 "tgs_gpu_unmanaged_processes", "tgs_controller_overruns_total"):
        assert need in used, need
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))


def test_usage_doc_lists_every_served_metric(served: set[str]) -> None:
    listed = _doc_metrics()
    assert served - listed == set()
    assert listed - served == set()


def test_scrape_configs_keep_the_job_label() -> None:
    """The dashboard's job label is the TGS job's: both scrape examples honour it, and scrape
    the DaemonSet's `metrics` port."""
    (scrape,) = yaml.safe_load((ROOT / "deploy" / "monitoring" / "prometheus-scrape.yaml")
                               .read_text())
    assert scrape["honor_labels"] is True and scrape["metrics_path"] == "/metrics"
    docs = list(yaml.safe_load_all((ROOT / "deploy" / "monitoring" / "servicemonitor.yaml")
                                   .read_text()))
    svc = next(d for d in docs if d["kind"] == "Service")
    mon = next(d for d in docs if d["kind"] == "ServiceMonitor")
    assert mon["spec"]["endpoints"][0]["honorLabels"] is True
    assert mon["spec"]["endpoints"][0]["port"] == svc["spec"]["ports"][0]["name"] == "metrics"
    assert mon["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    ds = next(d for d in yaml.safe_load_all((ROOT / "deploy" / "tgs.yaml").read_text())
              if d and d["kind"] == "DaemonSet")
    pod = ds["spec"]["template"]
    assert svc["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    ports = [p for c in pod["spec"]["containers"] for p in c.get("ports", [])]
    assert any(p["name"] == "metrics" and p["containerPort"] == svc["spec"]["ports"][0]["port"]
               for p in ports)

"""Fixtures of the hostile-tenant suite: one shared stage, and the table of outcomes.

The table (one row per attack window) is printed at the end of the run and, when
TGS_SECURITY_REPORT names a file, written there as JSON lines.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

import pytest
from hostile_stage import Stage
from hostile_window import Outcome

OUTCOMES: list[Outcome] = []
REBUILDS: list[str] = []


@pytest.fixture(scope="session")
def stage(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stage]:
    root = Path(__file__).resolve().parents[2]
    for p in (root / "build" / "bin" / "tgs-workload", root / "build" / "libtgs.so",
              root / "build" / "sim" / "libcuda.so.1"):
        if not p.exists():
            pytest.fail(f"{p} is missing: run `make` first (make test does)")
    s = Stage(tmp_path_factory.mktemp("hostile"))
    try:
        s.start()
        yield s
    finally:
        REBUILDS.extend(s.rebuilds)
        s.stop()


@pytest.fixture
def record() -> Iterator[list[Outcome]]:
    """Outcomes a test measured: added to the session's table."""
    made: list[Outcome] = []
    yield made
    OUTCOMES.extend(made)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not OUTCOMES:
        return
    terminalreporter.section("hostile tenants: attack -> outcome")
    for o in OUTCOMES:
        terminalreporter.write_line(o.row())
    for why in REBUILDS:
        terminalreporter.write_line(f"stage rebuilt: {why}")
    out = os.environ.get("TGS_SECURITY_REPORT")
    if out:
        with open(out, "a") as f:
            for o in OUTCOMES:
                f.write(json.dumps({**asdict(o), "problems": o.problems()}) + "\n")

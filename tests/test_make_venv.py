"""The Makefile's venv: `make demo` installs what the demo needs, not the test extras, and
each install phase is one line, pip's output shown only when the phase fails.  (Running the
real install takes a minute or more; these check the recipes make would run, and the quiet
wrapper itself with a requirement that cannot be installed.)"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.timeout(120)


def _make(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), *args],
                          capture_output=True, text=True, timeout=60)


def test_demo_installs_no_test_extras(tmp_path: Path) -> None:
    venv = tmp_path / "v"
    demo = _make("-n", "demo", f"VENV={venv}")
    assert demo.returncode == 0, demo.stderr
    assert "[demo]" in demo.stdout and "[test]" not in demo.stdout, demo.stdout
    test = _make("-n", "test", f"VENV={venv}")
    assert test.returncode == 0, test.stderr
    assert "[test]" in test.stdout


def test_test_then_demo_does_not_reinstall(tmp_path: Path) -> None:
    """Both stamps there, newer than pyproject.toml: neither target installs anything."""
    venv = tmp_path / "v"
    venv.mkdir()
    later = max(time.time(), (ROOT / "pyproject.toml").stat().st_mtime) + 5
    for stamp in (".stamp", ".test-stamp"):
        (venv / stamp).touch()
        os.utime(venv / stamp, (later, later))
    for target in ("demo", "test-venv", "venv"):
        r = _make("-n", target, f"VENV={venv}")
        assert r.returncode == 0, r.stderr
        assert "pip install" not in r.stdout, (target, r.stdout)
    # only the runtime stamp (after `make demo`): `make test` adds the test extras alone
    (venv / ".test-stamp").unlink()
    r = _make("-n", "test-venv", f"VENV={venv}")
    assert "'.[test]'" in r.stdout and "'.[demo]'" not in r.stdout, r.stdout


def _quietly(tmp_path: Path, what: str, cmd: str) -> subprocess.CompletedProcess:
    rule = f"quietly-check: ; @$(call quietly,{what},{cmd})"
    return _make("--eval", rule, "quietly-check", f"VENV={tmp_path / 'v'}",
                 f"PYTHON={sys.executable}")


def test_quiet_install_prints_one_line(tmp_path: Path) -> None:
    r = _quietly(tmp_path, "installing nothing...", "echo pip-noise; echo more-noise")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "installing nothing...\n" and r.stderr == ""
    assert "pip-noise" in (tmp_path / "v" / "install.log").read_text()


def test_quiet_install_prints_the_log_on_failure(tmp_path: Path) -> None:
    r = _quietly(tmp_path, "installing a bogus requirement...",
                 "$(PYTHON) -m pip install --no-index --no-deps tgs-no-such-requirement")
    assert r.returncode != 0
    assert r.stdout.startswith("installing a bogus requirement...\n")
    assert "tgs-no-such-requirement" in r.stdout         # pip's own words, from the log
    assert "that failed" in r.stderr and "install.log" in r.stderr

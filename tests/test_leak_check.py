"""The session's leak check (tests/conftest.py) fails a run that leaves a process or a
temporary file behind, and kills that process."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]


@pytest.mark.timeout(120)
def test_a_leaking_run_fails_and_is_cleaned_up(pytester: pytest.Pytester) -> None:
    shutil.copy(Path(__file__).with_name("conftest.py"), pytester.path / "conftest.py")
    pidfile = pytester.path / "pid"
    pytester.makepyfile(test_leaky=f"""
        import subprocess, tempfile
        def test_leaks():
            p = subprocess.Popen(["sleep", "60"])
            open({str(pidfile)!r}, "w").write(str(p.pid))
            tempfile.mkstemp(prefix="leftover-")
        """)
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    res.assert_outcomes(passed=1, errors=1)
    out = res.stdout.str()
    assert "process left running" in out and "sleep 60" in out
    assert "leftover-" in out
    pid = int(pidfile.read_text())
    try:                                   # killed by the check (a zombie at most, unreaped)
        with open(f"/proc/{pid}/stat") as f:
            assert f.read().split(") ", 1)[1][0] in "ZX"
    except FileNotFoundError:
        pass

"""Who changed what is in the controller's log at info: registrations with
their memory, every set with what it changed, and refused changes."""

from __future__ import annotations

import pytest
from tools_helpers import Ctl, wait_for

pytestmark = pytest.mark.timeout(60)


def test_changes_and_refusals_are_logged(ctl: Ctl) -> None:
    assert ctl.run("tgsctl", "add", "audited", "--mem", "1GiB").returncode == 0
    assert ctl.run("tgsctl", "set", "audited", "--mem", "2GiB", "--weight", "3").returncode == 0
    r = ctl.run("tgsctl", "set", "audited", "--priority", "production", "--mem", "64GiB")
    assert r.returncode != 0
    want = ("registered audited (opportunistic, weight 1, memory 1GiB evictable",
            "set audited: memory 1GiB -> 2GiB, weight 1 -> 3",
            "refused set audited: overcommit")
    assert wait_for(lambda: all(w in ctl.log.read_text() for w in want), timeout=5), \
        ctl.log.read_text()[-2000:]

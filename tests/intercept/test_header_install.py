"""An installed copy (the node image's `pip install .`) finds the contract headers that Python
binds: the image puts them where tgs.intercept.header looks beside the interpreter's prefix."""

from __future__ import annotations

import re
from pathlib import Path

from tgs.intercept import header

ROOT = Path(__file__).resolve().parents[2]


def test_the_image_installs_the_contract_headers_where_intercept_looks() -> None:
    text = (ROOT / "deploy" / "Containerfile").read_text()
    m = re.search(r"install -D -m 0644 -t (\S+) contracts/include/tgs/\*\.h", text)
    assert m, "deploy/Containerfile does not install contracts/include/tgs/*.h"
    # the image's Python (python:3.11-slim) has its prefix in /usr/local
    looked = {str(c.parent) for c in header.header_candidates()}
    assert m.group(1) in looked, (m.group(1), looked)
    for name in ("segment.h", "sim_state.h"):
        assert (ROOT / "contracts" / "include" / "tgs" / name).is_file()
        assert any(str(c.parent) == m.group(1) for c in header.header_candidates(name))

"""The top level explains itself: README's layout table names every top-level folder, and
every package pyproject.toml installs is mapped to a folder the table names."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")     # Python 3.11+

ROOT = Path(__file__).resolve().parents[1]


def _layout_rows() -> str:
    text = (ROOT / "README.md").read_text()
    return text[text.index("## Layout"):text.index("\n## ", text.index("## Layout") + 3)]


def test_readme_layout_lists_every_top_level_folder() -> None:
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    folders = {p.split("/", 1)[0] for p in tracked if "/" in p}
    rows = _layout_rows()
    missing = [f for f in sorted(folders) if f"`{f}/`" not in rows]
    assert missing == []


def test_every_installed_package_is_in_the_table() -> None:
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    rows = _layout_rows()
    for pkg, folder in cfg["package-dir"].items():
        line = next((ln for ln in rows.splitlines() if ln.startswith(f"| `{folder}/`")), "")
        assert f"`{pkg}`" in line, (pkg, folder)
    for script in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]:
        assert re.search(rf"`{re.escape(script)}`", rows), script

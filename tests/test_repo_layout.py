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


# ---------------------------------------------------------------- C products and their contracts
CONTRACTS = ROOT / "contracts" / "include"
CONTRACT_HEADERS = {"cuda_abi.h", "nvml_abi.h", "segment.h", "sim_state.h", "state_path.h",
                    "log_level.h", "size.h"}
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def _c_files(folder: str) -> list[Path]:
    return sorted(p for p in (ROOT / folder).rglob("*")
                  if p.suffix in (".c", ".h", ".def") and p.is_file())


def _resolve(src: Path, name: str) -> Path | None:
    """Where `#include "name"` in src lands with the build's one -I (contracts/include)."""
    for base in (src.parent, CONTRACTS):
        cand = (base / name).resolve()
        if cand.is_file():
            return cand
    return None


def _includes(folder: str) -> list[tuple[Path, str, Path | None]]:
    return [(src, name, _resolve(src, name)) for src in _c_files(folder)
            for name in _INCLUDE.findall(src.read_text())]


@pytest.mark.parametrize(("product", "other"), [("libshim", "sim"), ("sim", "libshim")])
def test_a_product_includes_only_itself_and_the_contracts(product: str, other: str) -> None:
    """The shim and the simulator share only contracts/: neither includes the other's files."""
    own, theirs = ROOT / product, ROOT / other
    bad = []
    for src, name, got in _includes(product):
        where = f"{src.relative_to(ROOT)}: #include \"{name}\""
        if got is None:
            bad.append(f"{where} resolves to nothing")
        elif got.is_relative_to(theirs) or not (got.is_relative_to(own) or
                                                 got.is_relative_to(CONTRACTS)):
            bad.append(f"{where} -> {got.relative_to(ROOT)}")
    assert bad == []


def test_every_contract_header_lives_in_contracts() -> None:
    """The headers two products share are in contracts/include/tgs/ and nowhere else, and a
    header both the shim and the simulator include is one of them."""
    assert {p.name for p in (CONTRACTS / "tgs").glob("*.h")} == CONTRACT_HEADERS
    tracked = subprocess.run(["git", "ls-files", "*.h"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()
    copies = [p for p in tracked
              if Path(p).name in CONTRACT_HEADERS and not p.startswith("contracts/")]
    assert copies == []
    shared = ({got for _, _, got in _includes("libshim") if got} &
              {got for _, _, got in _includes("sim") if got})
    assert shared and all(p.is_relative_to(CONTRACTS / "tgs") for p in shared), shared


def test_the_checker_sees_a_foreign_include(tmp_path: Path) -> None:
    src = ROOT / "libshim" / "x.c"
    assert _resolve(src, "../sim/sim.h") == (ROOT / "sim" / "sim.h").resolve()
    assert _resolve(src, "tgs/segment.h") == (CONTRACTS / "tgs" / "segment.h").resolve()
    assert _resolve(src, "no/such.h") is None

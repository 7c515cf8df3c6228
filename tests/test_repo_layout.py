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


# ---------------------------------------------------------------- the shim's layers
LIBSHIM = ROOT / "libshim"


def _layer_table() -> dict[str, set[str]]:
    """libshim/README.md's layers: name -> the files its row names (subsystems: the rest)."""
    text = (LIBSHIM / "README.md").read_text()
    rows = text[text.index("## Layers"):]
    out: dict[str, set[str]] = {}
    for m in re.finditer(r"^\| (state|subsystems|lifecycle) \| ([^|]*) \|", rows, re.M):
        out[m.group(1)] = set(re.findall(r"`([\w.]+\.[ch])`", m.group(2)))
    return out


def _ranks() -> dict[str, int]:
    """Every C file of libshim/ -> its layer: 0 state, 1 subsystems, 2 lifecycle."""
    table = _layer_table()
    files = {p.name for p in LIBSHIM.iterdir() if p.suffix in (".c", ".h")}
    return {f: 0 if f in table["state"] else 2 if f in table["lifecycle"] else 1 for f in files}


def _include_edges() -> set[tuple[str, str]]:
    """(file, libshim file it includes) for every `#include "..."` inside libshim/."""
    return {(src.name, got.name) for src, _, got in _includes("libshim")
            if got is not None and got.parent == LIBSHIM.resolve()}


def _layer_cycle(edges: set[tuple[str, str]], rank: dict[str, int]) -> list[tuple[str, str]]:
    """The edges that go up a layer (an edge up and the edges down make a cycle of layers)."""
    return sorted((a, b) for a, b in edges if rank[a] < rank[b])


def test_libshim_layers_are_listed() -> None:
    table = _layer_table()
    assert set(table) == {"state", "subsystems", "lifecycle"}
    named = table["state"] | table["lifecycle"] | table["subsystems"]
    assert named and all((LIBSHIM / f).is_file() for f in named), named
    # the subsystems are the rest: their row names only their header (and what they are not)
    assert table["subsystems"] - table["state"] - table["lifecycle"] <= {"shim.h"}
    text = (LIBSHIM / "README.md").read_text()
    concerns = re.findall(r"`([\w.]+\.[ch])`", text[text.index("by concern"):])
    rest = sorted(f for f, r in _ranks().items() if r == 1 and f != "shim.h")
    assert sorted(concerns) == rest                   # every subsystem file, once


def test_libshim_includes_go_down_the_layers() -> None:
    """State at the bottom (it includes only the contracts), lifecycle at the top (nothing
    includes it, nothing can call it): no cycle between the layers."""
    rank, edges = _ranks(), _include_edges()
    assert ("shim.h", "state.h") in edges and ("lifecycle.c", "shim.h") in edges
    assert _layer_cycle(edges, rank) == []
    assert not [b for _, b in edges if rank[b] == 2]
    for f in (f for f, r in rank.items() if r == 2):
        text = re.sub(r"/\*.*?\*/", "", (LIBSHIM / f).read_text(), flags=re.S)
        text = re.sub(r"__attribute__\(\(.*?\)\)\s*", "", text)
        exported = re.findall(r"^(?!static\b)(?:[\w*]+\s+)+\**(\w+)\s*\([^;]*?\)\s*\{", text,
                              re.M)
        assert exported == [], (f, exported)


def test_the_layer_checker_sees_an_upward_include() -> None:
    rank = {"state.c": 0, "state.h": 0, "shim.h": 1, "x.c": 1, "lifecycle.c": 2}
    edges = {("state.c", "state.h"), ("x.c", "shim.h"), ("state.h", "shim.h")}
    assert _layer_cycle(edges, rank) == [("state.h", "shim.h")]


# ---------------------------------------------------------------- the Python packages' imports
# tgs.client is the controller's client library and the contract the controller shares with
# its clients: it must not import the daemon or anything built on it.
CLIENT_MAY_NOT_IMPORT = ("tgs.controller", "tgs.tools", "tgs.k8s", "tgs.bench")


def _package_dirs() -> dict[str, Path]:
    """Installed top-level package (tgs.x) -> its folder, from pyproject.toml."""
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    return {pkg: ROOT / folder for pkg, folder in cfg["package-dir"].items()}


def _module_name(pkg: str, folder: Path, path: Path) -> str:
    parts = list(path.relative_to(folder).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([pkg, *parts])


def _imports(module: str, path: Path) -> set[str]:
    """Every module `path` imports, absolute or relative, at the top or inside a function."""
    import ast

    is_pkg = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base[:len(base) - node.level + (1 if is_pkg else 0)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out.add(target)
            out |= {f"{target}.{a.name}" for a in node.names}   # `from tgs import bench`
    return out


def _owner(module: str, packages: list[str]) -> str | None:
    """The top-level package (tgs.x) a module belongs to, the longest that matches."""
    owners = [p for p in packages if module == p or module.startswith(p + ".")]
    return max(owners, key=len) if owners else None


def _package_graph() -> tuple[dict[str, set[str]], dict[tuple[str, str], str]]:
    """Top-level package -> the top-level packages its modules import (itself left out), and
    for each edge one module that makes it."""
    dirs = _package_dirs()
    packages = sorted(dirs)
    graph: dict[str, set[str]] = {p: set() for p in packages}
    why: dict[tuple[str, str], str] = {}
    for pkg, folder in dirs.items():
        for path in sorted(folder.rglob("*.py")):
            sub = path.relative_to(folder).parts
            if pkg == "tgs" and len(sub) > 1:       # tgs/ itself: only its own files
                continue
            mod = _module_name(pkg, folder, path)
            for target in _imports(mod, path):
                dst = _owner(target, [p for p in packages if p != "tgs"]) or (
                    "tgs" if target == "tgs" or target.startswith("tgs.") else None)
                if dst and dst != pkg:
                    graph[pkg].add(dst)
                    why.setdefault((pkg, dst), f"{path.relative_to(ROOT)} imports {target}")
    return graph, why


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One cycle of the graph (as a path that ends where it starts), or []."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str]:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state and (found := visit(m)):
                return found
        state[n] = 2
        stack.pop()
        return []

    for n in sorted(graph):
        if n not in state and (found := visit(n)):
            return found
    return []


def test_the_client_imports_no_daemon_tool_or_benchmark() -> None:
    graph, why = _package_graph()
    bad = [why[("tgs.client", p)] for p in CLIENT_MAY_NOT_IMPORT if p in graph["tgs.client"]]
    assert bad == []


def test_no_import_cycle_between_packages() -> None:
    graph, why = _package_graph()
    cycle = _cycle(graph)
    assert cycle == [], " -> ".join(cycle) + ": " + "; ".join(
        why[(a, b)] for a, b in zip(cycle, cycle[1:]))


def test_the_import_checker_sees_lazy_and_relative_imports(tmp_path: Path) -> None:
    f = tmp_path / "devices.py"
    f.write_text("from . import paths\nfrom ..tools import x\n"
                 "def g():\n    from tgs.tools.injection import y\n")
    got = _imports("tgs.controller.devices", f)
    assert {"tgs.controller.paths", "tgs.tools", "tgs.tools.injection"} <= got
    assert _owner("tgs.k8s.dra.driver", ["tgs.k8s", "tgs.client"]) == "tgs.k8s"
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) == []


def test_only_the_benchmarks_tests_import_the_benchmarks() -> None:
    """Test helpers come from tgs.testbed (or tests/); tests/bench/ tests the benchmarks, and
    the frameworks tier runs a benchmark's PyTorch training job as its production job."""
    allowed = (ROOT / "tests" / "bench", ROOT / "tests" / "frameworks" / "test_torch_shim.py")
    bad = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        if any(path == a or a in path.parents for a in allowed):
            continue
        mods = _imports(f"tests.{path.stem}", path)
        bad += [f"{path.relative_to(ROOT)}: {m}" for m in sorted(mods)
                if m == "tgs.bench" or m.startswith("tgs.bench.")]
    assert bad == []

"""One size grammar: the C parser (contracts/include/tgs/size.h: the shim, the simulator, the
workload) and the Python one (intercept/sizes.py: the tools) give the same answer for every
vector of size_vectors.json, and those answers are the documented ones."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from tgs.intercept.sizes import MAX_SIZE, SizeError, parse_limit, parse_size

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
HEADER = ROOT / "contracts" / "include" / "tgs" / "size.h"
VECTORS: list[list[object]] = json.loads((HERE / "size_vectors.json").read_text())["vectors"]


def _py(text: str) -> tuple[object, object]:
    try:
        size: object = parse_size(text)
    except SizeError:
        size = None
    try:
        v = parse_limit(text)
        limit: object = "unlimited" if v is None else v
    except SizeError:
        limit = None
    return size, limit


@pytest.mark.parametrize("vector", VECTORS, ids=[ascii(v[0])[1:-1] for v in VECTORS])
def test_python_parser(vector: list[object]) -> None:
    text, size, limit = vector
    assert isinstance(text, str)
    assert _py(text) == (size, limit)


def test_vectors_cover_the_grammar() -> None:
    """Every unit spelling, both ends of the range, fractions, words and refusals."""
    inputs = {str(v[0]) for v in VECTORS}
    for unit in ("B", "K", "KB", "KiB", "M", "MB", "MiB", "G", "GB", "GiB", "T", "TB", "TiB"):
        assert any(s.strip().lower().endswith(unit.lower()) for s in inputs), unit
    sizes = [v[1] for v in VECTORS]
    assert 0 in sizes and MAX_SIZE in sizes and None in sizes
    assert "unlimited" in [v[2] for v in VECTORS]


@pytest.fixture(scope="module")
def c_parser() -> Path:
    """tests/abi/size_vectors.c -> build/tests/size_vectors (atomically: sessions may race)."""
    src, out = HERE / "size_vectors.c", ROOT / "build" / "tests"
    exe = out / "size_vectors"
    if exe.exists() and exe.stat().st_mtime >= max(src.stat().st_mtime, HEADER.stat().st_mtime):
        return exe
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / f".size_vectors.{os.getpid()}"
    subprocess.run(["gcc", "-std=gnu11", "-O1", "-Wall", "-Wextra", "-Werror",
                    f"-I{ROOT / 'contracts' / 'include'}", str(src), "-o", str(tmp)],
                   check=True, capture_output=True, text=True)
    os.replace(tmp, exe)
    return exe


def test_c_parser(c_parser: Path) -> None:
    """All vectors in one run; inputs travel as argv (bytes: UTF-8 for the non-ASCII ones)."""
    r = subprocess.run([str(c_parser), *(str(v[0]) for v in VECTORS)], capture_output=True,
                       text=True, check=True, timeout=30)
    lines = r.stdout.splitlines()
    assert len(lines) == len(VECTORS)
    wrong = []
    for (text, size, limit), line in zip(VECTORS, lines):
        got_size, got_limit = line.split()
        want = ("error" if size is None else str(size), "error" if limit is None else str(limit))
        if (got_size, got_limit) != want:
            wrong.append((text, want, (got_size, got_limit)))
    assert wrong == []

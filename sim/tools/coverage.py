"""The simulator's entry-point coverage, read from the built library's dynamic symbols.

    python3 sim/tools/coverage.py build/sim/libcuda.so.1            # print the section
    python3 sim/tools/coverage.py build/sim/libcuda.so.1 --write    # refresh docs/simulator.md

Every public entry point (sim/entry_points.def) is a dynamic symbol; those the simulator does not
model are still the weak NOT_SUPPORTED stubs of sim/stubs.c, so `nm -D` tells them apart.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEF = ROOT / "sim" / "entry_points.def"
DOC = ROOT / "docs" / "simulator.md"
BEGIN, END = "<!-- coverage:begin -->", "<!-- coverage:end -->"


def public_symbols() -> list[str]:
    return re.findall(r"^E\(\w+, (\w+), \d+, [01]\)$", DEF.read_text(), flags=re.M)


def dynamic_symbols(lib: Path) -> dict[str, str]:
    """name -> nm type letter (T strong, W weak) of the defined cu* symbols."""
    out = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True,
                         text=True, check=True).stdout
    syms: dict[str, str] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2].startswith("cu"):
            syms[parts[2]] = parts[1]
    return syms


def stubs(lib: Path) -> list[str]:
    syms = dynamic_symbols(lib)
    return sorted(s for s in public_symbols() if syms.get(s) == "W")


def render(lib: Path) -> str:
    pub = public_symbols()
    stubbed = stubs(lib)
    lines = [
        BEGIN,
        f"Public entry points (symbols, all exported): **{len(pub)}**; modelled: "
        f"**{len(pub) - len(stubbed)}**; `CUDA_ERROR_NOT_SUPPORTED` stubs: **{len(stubbed)}**.",
        "",
        "<details><summary>The entry points that answer CUDA_ERROR_NOT_SUPPORTED</summary>",
        "",
    ]
    lines += textwrap.wrap(", ".join(f"`{s}`" for s in stubbed) + ".", width=100,
                           break_long_words=False, break_on_hyphens=False)
    lines += ["", "</details>", END]
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        sys.exit("usage: coverage.py LIBCUDA [--write]   (make builds build/sim/libcuda.so.1)")
    lib = Path(sys.argv[1])
    section = render(lib)
    if "--write" not in sys.argv:
        print(section)
        return
    text = DOC.read_text()
    if BEGIN in text:
        head, rest = text.split(BEGIN, 1)
        text = head + section + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    DOC.write_text(text)


if __name__ == "__main__":
    main()

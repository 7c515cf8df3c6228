"""Our driver ABI header (and the simulator's lookup table) against the real CUDA headers.

Skipped cleanly where /usr/local/cuda/include/cuda.h is not installed.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
INC = ROOT / "contracts" / "include"
ABI = INC / "tgs" / "cuda_abi.h"
LOOKUP = ROOT / "sim" / "lookup.c"
CUDA_INC = Path("/usr/local/cuda/include")

pytestmark = [
    pytest.mark.skipif(not (CUDA_INC / "cuda.h").exists(), reason="no CUDA headers installed"),
    pytest.mark.timeout(120),
]


def _gcc(tmp: Path, name: str, src: str, run: bool) -> str:
    c = tmp / f"{name}.c"
    c.write_text(src)
    exe = tmp / name
    cmd = ["gcc", "-std=gnu11", "-Wall", "-Werror", "-I", str(CUDA_INC), "-I", str(INC)]
    cmd += ["-o", str(exe), str(c)] if run else ["-c", "-o", str(exe) + ".o", str(c)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-4000:]
    if not run:
        return ""
    return subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout


def test_prototypes_agree_with_cuda_h(tmp_path: Path) -> None:
    src = (
        "#define __CUDA_API_VERSION_INTERNAL 1\n#include <cuda.h>\n"
        "#define TGS_CUDA_ABI_SYSTEM_TYPES 1\n#include \"tgs/cuda_abi.h\"\n"
        # taking each address as our pointer type makes the compiler compare again
        "#define TAKE(name, params) tgs_pfn_##name p_##name = name;\n"
        "void take(void);\nvoid take(void) {\nTGS_CUDA_ENTRY_POINTS(TAKE)\n}\n"
    )
    _gcc(tmp_path, "protos", src.replace("p_##name = name;", "p_##name = name; (void)p_##name;"),
         run=False)


def _members(lines: list[str]) -> list[str]:
    depth, members = 0, []
    for line in lines:
        line = line.split("/*")[0].strip()
        if not line:
            continue
        if line.endswith("{"):
            depth += 1
            continue
        if line.startswith("}"):
            depth -= 1
            names = re.findall(r"(\w+)\s*;", line)
            if depth == 0 and names:  # an anonymous union has no name to check
                members.append(names[0])
            continue
        if depth == 0 and line.endswith(";") and not line.startswith("char pad["):
            members.append(re.findall(r"(\w+)\s*(?:\[[^\]]*\])?\s*;$", line)[0])
    return members


def _blocks(text: str) -> tuple[dict[str, list[str]], list[str]]:
    """Struct/union typedef name -> top-level member names; and enum constant names."""
    body_of: dict[str, list[str]] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        one = re.match(r"^typedef (?:struct|union) \w+ \{(.*)\} (\w+);$", lines[i])
        if one:
            parts = [p + ";" for p in one.group(1).split(";") if p.strip()]
            body_of[one.group(2)] = _members(parts)
        elif re.match(r"^typedef (?:struct|union) \w+ \{$", lines[i]):
            j = i + 1
            while not re.match(r"^\} \w+;$", lines[j]):
                j += 1
            body_of[re.findall(r"(\w+);", lines[j])[0]] = _members(lines[i + 1:j])
            i = j
        i += 1
    enums = []
    for m in re.finditer(r"^typedef enum \w+ \{(.*?)\} \w+;", text, flags=re.S | re.M):
        enums += re.findall(r"^\s*([A-Z][A-Z0-9_]+)\b", m.group(1), flags=re.M)
    return body_of, enums


def _layout_program(header: str, structs: dict[str, list[str]], enums: list[str]) -> str:
    lines = ["#include <stdio.h>", "#include <stddef.h>", header, "int main(void) {"]
    for name, members in structs.items():
        lines.append(f'printf("sizeof {name} %zu\\n", sizeof({name}));')
        for mem in members:
            lines.append(f'printf("offsetof {name}.{mem} %zu\\n", offsetof({name}, {mem}));')
    for e in enums:
        lines.append(f'printf("enum {e} %lld\\n", (long long){e});')
    lines += ["return 0;", "}"]
    return "\n".join(lines) + "\n"


def test_layouts_and_enum_values_agree(tmp_path: Path) -> None:
    structs, enums = _blocks(ABI.read_text())
    assert "CUmemAllocationProp" in structs and "CUlaunchConfig" in structs
    assert "CUDA_ERROR_OUT_OF_MEMORY" in enums
    ours = _gcc(tmp_path, "ours", _layout_program('#include "tgs/cuda_abi.h"', structs, enums),
                run=True)
    real = _gcc(tmp_path, "real", _layout_program("#include <cuda.h>", structs, enums), run=True)
    diff = [(a, b) for a, b in zip(ours.splitlines(), real.splitlines()) if a != b]
    assert diff == []
    assert len(ours.splitlines()) == len(real.splitlines()) > 100


def _table() -> list[tuple[str, str, int, bool]]:
    rows = re.findall(r"^\s+([LP])\((\w+), (\w+), (\d+)\),", LOOKUP.read_text(), flags=re.M)
    return [(base, sym, int(ver), kind == "P") for kind, base, sym, ver in rows]


def _pfns() -> set[str]:
    return set(re.findall(r"\bPFN_(cu\w+?)\)", (CUDA_INC / "cudaTypedefs.h").read_text()))


# Variants of the CUDA 2.x era (32-bit device pointers, v1 array descriptors):
# cudaTypedefs.h lists them, the project's ABI does not declare them, so the
# simulator answers VERSION_NOT_SUFFICIENT below 3.2 for these names.
V1_NOT_DECLARED = {
    "cuArrayCreate_v2000", "cuArray3DCreate_v2000", "cuMemcpyHtoD_v2000", "cuMemcpyDtoH_v2000",
    "cuMemcpyDtoD_v2000", "cuMemcpyHtoDAsync_v2000", "cuMemcpyDtoHAsync_v2000",
    "cuMemsetD8_v2000", "cuMemsetD32_v2000",
}


def test_lookup_table_versions_match_cuda_typedefs() -> None:
    pfns = _pfns()
    table = _table()
    assert len(table) > 100
    for base, sym, ver, per_thread in table:
        suffix = ""
        if per_thread:
            suffix = "_ptds" if sym.endswith("_ptds") else "_ptsz"
        assert f"{base}_v{ver}{suffix}" in pfns, f"{sym}: no PFN_{base}_v{ver}{suffix}"
    # and every variant cudaTypedefs.h knows for our bases is in the table
    bases = {b for b, _, _, _ in table}
    have = {f"{b}_v{v}" + (("_ptds" if s.endswith("_ptds") else "_ptsz") if pt else "")
            for b, s, v, pt in table}
    want = {p for p in pfns if re.sub(r"_v\d+(_pt[sd]z?)?$", "", p) in bases}
    assert sorted(want - have - V1_NOT_DECLARED) == []


def _generated() -> set[str]:
    """Symbols of sim/entry_points.def (every public entry point, generated)."""
    text = (ROOT / "sim" / "entry_points.def").read_text()
    return set(re.findall(r"^E\(\w+, (\w+), \d+, [01]\)$", text, flags=re.M))


def test_lookup_table_covers_every_entry_point() -> None:
    declared = set(re.findall(r"^\s+X\((cu\w+),", ABI.read_text(), flags=re.M))
    assert declared - {sym for _, sym, _, _ in _table()} - _generated() == set()

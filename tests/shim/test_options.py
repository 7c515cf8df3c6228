"""The shim's one option table (libshim/options.c, TGS_OPTIONS).

Every variable of the table, given a malformed value, gives exactly one "tgs: " line naming
the variable, the value and the default used, and the program runs on; valid values and
unset ones give none.  docs/segment.md's environment-variable table lists exactly the
table's variables, with each one's range."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from shim_helpers import tgs_lines

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]
OPTIONS_C = ROOT / "libshim" / "options.c"
STATE_H = ROOT / "libshim" / "state.h"   # struct tgs_options
SEGMENT_MD = ROOT / "docs" / "segment.md"

_ROW = re.compile(r'X\((TGS_\w+),\s*(\w+),\s*(\w+),\s*"([^"]*)",\s*"([^"]*)",\s*\\?\s*"([^"]*)"\)')


def _table() -> dict[str, dict[str, str]]:
    """name -> field, kind, default, range, help, in the C table's order."""
    text = OPTIONS_C.read_text()
    body = text[text.index("#define TGS_OPTIONS(X)"):]
    body = body[: body.index("\n\n")]
    rows = {m[1]: {"field": m[2], "kind": m[3], "default": m[4], "range": m[5], "help": m[6]}
            for m in _ROW.finditer(body)}
    assert len(rows) == body.count("X(TGS_"), "a row of TGS_OPTIONS the test cannot read"
    return rows


TABLE = _table()
LONG = "p" * 20000   # longer than any string field (the largest holds 16383 characters)

# one malformed value per kind (a string field: longer than it holds)
MALFORMED = {"PATH": LONG, "SIZE": "12 parsecs", "MS": "600001", "US": "1000001",
             "BOOL": "yes", "ENUM": "bogus", "LEVEL": "loud"}


def _tgs_lines(probe_bin: Path, env: dict[str, str]) -> list[str]:
    p = subprocess.run([str(probe_bin), "init", "meminfo"], env=env, capture_output=True, text=True,
                       timeout=60, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr[-2000:]
    out = p.stdout.splitlines()
    assert out[0].startswith("init 0") and out[1].startswith("meminfo "), p.stdout
    return tgs_lines(p.stderr)


def _shown(value: str) -> str:
    return f"{value[:64]}... ({len(value)} characters)" if len(value) > 64 else value


def _check_one_line(lines: list[str], name: str, value: str) -> None:
    assert len(lines) == 1, lines
    row = TABLE[name]
    assert lines[0].startswith(f"tgs: {name}={_shown(value)} is "), lines[0]
    assert lines[0].endswith(f"; using {row['default'] or 'unset'}"), lines[0]


def test_the_table_covers_struct_tgs_options() -> None:
    text = STATE_H.read_text()
    body = text[text.index("struct tgs_options {"):]
    body = body[: body.index("};")]
    fields = set(re.findall(r"^\s+[\w ]+?\s(\w+)(?:\[\w+\])?;", body, re.M))
    assert fields == {row["field"] for row in TABLE.values()}
    assert set(MALFORMED) >= {row["kind"] for row in TABLE.values()}
    assert "getenv" not in "".join(p.read_text() for p in (ROOT / "libshim").glob("*.c")
                                   if p != OPTIONS_C)


@pytest.mark.parametrize("name", list(TABLE))
def test_a_malformed_value_gives_one_line(probe_bin: Path, shim_env: dict[str, str],
                                          name: str) -> None:
    value = MALFORMED[TABLE[name]["kind"]]
    _check_one_line(_tgs_lines(probe_bin, dict(shim_env, **{name: value})), name, value)


@pytest.mark.parametrize(("name", "value"), [
    ("TGS_DRAIN", "2"), ("TGS_DRAIN", "on"), ("TGS_DRAIN", "00"),
    ("TGS_DEBUG_HITS", "true"), ("TGS_FIT_BUDGET", "GAP"), ("TGS_FIT_BUDGET", "off"),
    ("TGS_SLOT_WAIT_MS", "-1"), ("TGS_SLOT_WAIT_MS", "1.5"), ("TGS_SLOT_WAIT_MS", "5ms"),
    ("TGS_OVERSUB_WATCH_MS", "99999999999999999999999"), ("TGS_DRAIN_SETTLE_US", "x"),
    ("TGS_MEM_LIMIT", "-5"),
])
def test_more_malformed_values(probe_bin: Path, shim_env: dict[str, str], name: str,
                               value: str) -> None:
    _check_one_line(_tgs_lines(probe_bin, dict(shim_env, **{name: value})), name, value)


def test_all_malformed_at_once_one_line_each(probe_bin: Path, shim_env: dict[str, str]) -> None:
    env = dict(shim_env, **{n: MALFORMED[r["kind"]] for n, r in TABLE.items()})
    lines = _tgs_lines(probe_bin, env)
    assert [ln.split("=", 1)[0] for ln in lines] == [f"tgs: {n}" for n in TABLE]


def test_defaults_and_valid_values_give_no_line(probe_bin: Path, shim_env: dict[str, str],
                                                tmp_path: Path) -> None:
    defaults = {n: r["default"] for n, r in TABLE.items() if r["kind"] != "PATH"}
    assert _tgs_lines(probe_bin, dict(shim_env, **defaults)) == []
    empty = {n: "" for n in TABLE}
    assert _tgs_lines(probe_bin, dict(shim_env, **empty)) == []
    valid = {"TGS_LOG_LEVEL": "ERROR", "TGS_MEM_LIMIT": "1.5GiB", "TGS_DRAIN": "0",
             "TGS_DRAIN_SETTLE_US": "1000000", "TGS_DRAIN_SETTLE_MAX_US": "0",
             "TGS_DRAIN_POLL_US": "200", "TGS_FIT_BUDGET": "gap",
             "TGS_SLOT_WAIT_MS": "0", "TGS_OVERSUB_CHECK_MS": "600000",
             "TGS_OVERSUB_PAUSE_MS": "0", "TGS_OVERSUB_WATCH_MS": "7", "TGS_DEBUG_HITS": "1",
             "TGS_FIT_TRACE": str(tmp_path / "trace.txt")}
    assert _tgs_lines(probe_bin, dict(shim_env, **valid)) == []
    assert _tgs_lines(probe_bin, dict(shim_env, TGS_FIT_BUDGET="0", TGS_MEM_LIMIT="0")) == []


def _doc_rows() -> dict[str, list[str]]:
    text = SEGMENT_MD.read_text()
    start = text.index("## Environment variables")
    section = text[start: text.index("\n## ", start + 1) if "\n## " in text[start + 1:]
                   else len(text)]
    rows: dict[str, list[str]] = {}
    for line in section.splitlines():
        m = re.match(r"\|\s*`(TGS_\w+)`\s*\|(.*)\|\s*$", line)
        if m:
            assert m[1] not in rows, f"{m[1]} listed twice"
            rows[m[1]] = [c.strip() for c in re.split(r"(?<!\\)\|", m[2])]
    return rows


def test_docs_list_exactly_the_table() -> None:
    rows = _doc_rows()
    assert set(rows) == set(TABLE)
    for name, row in TABLE.items():
        cells = rows[name]
        assert len(cells) == 3, (name, cells)   # meaning, default, range
        meaning, default, rng = cells
        assert meaning, name
        if row["kind"] not in ("PATH",):
            assert f"`{row['default']}`" in default, (name, default)
        if row["kind"] in ("MS", "US"):
            assert f"`{row['range']}`" in rng, (name, rng)
        elif row["kind"] in ("BOOL", "ENUM", "LEVEL"):
            for word in row["range"].split("|"):
                assert f"`{word}`" in rng, (name, word, rng)

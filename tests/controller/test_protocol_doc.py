"""docs/protocol.md is authoritative and the code mirrors it: its tables (request fields,
reply objects, error codes, gate values) are checked against protocol.py and replies.py."""

from __future__ import annotations

import json
import re
from dataclasses import fields
from pathlib import Path

import pytest
from ctl_helpers import make_handler
from tgs.controller import protocol as P
from tgs.controller import replies as R
from tgs.intercept.control import GATE_FIT, GATE_PUBLISH, GATE_WAIT

DOC = (Path(__file__).resolve().parents[2] / "docs" / "protocol.md").read_text()


def section(heading: str) -> str:
    """The text under a heading line (exactly that line), up to the next heading."""
    m = re.search(rf"^#+ {re.escape(heading)}\n(.*?)(?=^#+ |\Z)", DOC, re.M | re.S)
    assert m, f"docs/protocol.md has no heading {heading!r}"
    return m.group(1)


def table(heading: str) -> list[str]:
    """The backticked names in the first column of the section's first table."""
    rows = [ln for ln in section(heading).splitlines() if ln.startswith("|")]
    assert len(rows) > 2, f"{heading}: no table"
    out = []
    for row in rows[2:]:
        m = re.match(r"\|\s*`([^`]+)`", row)
        assert m, f"{heading}: row without a `name`: {row}"
        out.append(m.group(1))
    return out


def row(heading: str, name: str) -> str:
    return next(ln for ln in section(heading).splitlines() if ln.startswith(f"| `{name}` "))


REPLY_TABLES: dict[str, type[R.Reply]] = {
    "register reply": R.RegisterReply, "unregister reply": R.UnregisterReply,
    "set reply": R.SetReply, "list reply": R.ListReply, "status reply": R.StatusReply,
    "device object": R.DeviceInfo, "GPU object": R.GpuInfo, "job object": R.JobInfo,
    "placement object": R.PlacementInfo, "unmanaged-process object": R.UnmanagedInfo,
}


@pytest.mark.parametrize("heading", sorted(REPLY_TABLES))
def test_reply_tables_match_the_dataclasses(heading: str) -> None:
    cls = REPLY_TABLES[heading]
    assert f"`{cls.__name__}`" in section(heading)
    assert table(heading) == cls.wire_fields()


def test_optional_fields_are_the_documented_ones() -> None:
    for heading, cls in REPLY_TABLES.items():
        documented = {n for n in table(heading) if ", optional" in row(heading, n)}
        optional = set(cls.OPTIONAL)
        for part in cls.FLATTEN:
            optional |= R._FLATTENED[cls.__name__][part].OPTIONAL
        assert documented == optional, heading


def test_metrics_entry_is_identity_plus_the_loop_fields() -> None:
    ident = [f.name for f in fields(R.MetricsEntry) if f.name not in R.MetricsEntry.FLATTEN]
    assert table("metrics entry") == ident
    job = table("job object")
    stats = R.JobStats.wire_fields()
    assert job[job.index("processes"):] == stats      # "from `processes` on"


def test_every_message_type_has_a_reply_table() -> None:
    assert tuple(R.REPLIES) == P.MESSAGE_TYPES
    for kind in P.MESSAGE_TYPES:
        assert f"Reply: [{kind} reply](#{kind}-reply)" in " ".join(section(f"`{kind}`").split())


def test_request_tables_match_the_parser() -> None:
    assert table("Requests and replies") == ["v", "id", "type", "deadline_ms"]
    assert table("`register`") == [f.name for f in fields(P.Register)
                                   if f.name not in ("id", "deadline_ms")]
    types = re.findall(r"`(\w+)`", row("Requests and replies", "type"))[1:]
    assert tuple(types) == P.MESSAGE_TYPES


def test_error_codes_match() -> None:
    assert tuple(table("Error codes")) == P.ERROR_CODES


def test_gate_values_are_the_headers() -> None:
    text = row("job object", "gate")
    assert f"{GATE_PUBLISH} = PUBLISH" in text
    assert f"{GATE_WAIT} = WAIT" in text
    assert f"{GATE_FIT} = FIT" in text
    assert f"{GATE_WAIT | GATE_FIT} (WAIT\\|FIT)" in text


def test_the_checker_catches_a_missing_field() -> None:
    """A field the doc lacks (or the code lacks) makes the table check fail."""
    assert table("unregister reply") == ["removed"]
    assert R.UnregisterReply.wire_fields() == ["removed"]
    assert R.JobInfo.wire_fields() != table("job object")[:-1]


def test_the_handlers_replies_are_the_documented_objects(tmp_path: Path) -> None:
    h = make_handler(tmp_path)

    def ask(req: dict) -> dict:
        out = json.loads(h.handle([b"peer", json.dumps({"v": 1, "id": "x", **req}).encode()])[-1])
        assert out["ok"], out
        return {k: v for k, v in out.items() if k not in ("v", "id", "ok")}

    reg = ask({"type": "register", "name": "a"})
    assert list(reg) == table("register reply")[:-1]              # no lease asked for
    assert list(reg["job"]) == table("job object")[:table("job object").index("processes")]
    assert list(ask({"type": "set", "name": "a", "weight": 2})) == table("set reply")
    assert list(ask({"type": "list"})) == table("list reply")
    st = ask({"type": "status"})
    want = [n for n in table("status reply") if ", optional" not in row("status reply", n)]
    assert list(st) == want
    assert list(st["devices"][0]) == table("device object")
    assert list(ask({"type": "unregister", "name": "a"})) == table("unregister reply")

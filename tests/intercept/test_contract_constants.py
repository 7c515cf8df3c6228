"""Every number of the shim's contract that Python uses comes from segment.h, or equals it."""

from __future__ import annotations

import re

from tgs.controller import protocol
from tgs.controller.policy import base
from tgs.intercept import control, segment
from tgs.intercept.header import const, ffi


def _array_len(struct: str, field: str) -> int:
    t = dict(ffi().typeof(struct).fields)[field].type
    return int(t.length)


def test_policy_gate_flags_are_the_headers() -> None:
    assert (base.GATE_PUBLISH, base.GATE_WAIT, base.GATE_FIT) == (
        const("TGS_GATE_PUBLISH"), const("TGS_GATE_WAIT"), const("TGS_GATE_FIT"))
    assert (segment.GATE_PUBLISH, segment.GATE_WAIT, segment.GATE_FIT) == (
        base.GATE_PUBLISH, base.GATE_WAIT, base.GATE_FIT)


def test_protocol_limits_are_the_headers() -> None:
    assert protocol.MAX_SLOTS == const("TGS_SEG_MAX_SLOTS")
    name_max, uuid_max = const("TGS_SEG_NAME_MAX"), const("TGS_SEG_UUID_MAX")
    # The longest accepted name/UUID fits its char[] with the NUL; one more is refused.
    assert protocol.NAME_RE.match("a" * (name_max - 1))
    assert not protocol.NAME_RE.match("a" * name_max)
    assert protocol.UUID_RE.match("G" * (uuid_max - 1))
    assert not protocol.UUID_RE.match("G" * uuid_max)


def test_char_and_array_fields_match_their_constants() -> None:
    """segment.h spells some array sizes as numbers (cffi's cdef takes no macros there)."""
    name_max, uuid_max = control.NAME_MAX, control.UUID_MAX
    assert _array_len("struct tgs_ident", "job_name") == name_max
    assert _array_len("struct tgs_ident", "device_uuid") == uuid_max
    assert _array_len("struct tgs_pub", "job_name") == name_max
    assert _array_len("struct tgs_dev_job", "name") == name_max
    assert _array_len("struct tgs_slot", "lanes") == const("TGS_SEG_LANES")
    assert _array_len("struct tgs_pub", "gap_ns") == const("TGS_GAP_RING")
    assert _array_len("struct tgs_dev_segment", "jobs") == const("TGS_DEV_MAX_JOBS")


def test_no_hand_copies_of_contract_numbers_in_python() -> None:
    """The Python modules that use these numbers import them from the contract."""
    from pathlib import Path

    root = Path(base.__file__).resolve().parents[2]
    text = (root / "controller" / "policy" / "base.py").read_text()
    assert not re.search(r"^GATE_\w+\s*=\s*\d", text, re.M)
    text = (root / "controller" / "protocol.py").read_text()
    assert not re.search(r"^MAX_SLOTS\s*=\s*\d", text, re.M)
    for mod in ("pub.py", "devseg.py", "control.py"):
        text = (root / "intercept" / mod).read_text()
        assert "[:63]" not in text and "(64 - len" not in text, mod


def test_long_names_are_truncated_to_fit(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tgs.intercept.pub import pub_bytes

    raw = pub_bytes("n" * 200)
    p = ffi().cast("struct tgs_pub *", ffi().from_buffer(bytearray(raw)))
    assert ffi().string(p.job_name) == b"n" * (control.NAME_MAX - 1)

"""Every number of the shim's contract that Python uses comes from segment.h, or equals it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from tgs.controller import protocol
from tgs.controller.policy import base
from tgs.intercept import control, segment
from tgs.intercept.header import const, ffi, string_const


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


# ---------------------------------------------------------------- facts once (issue 25)
ROOT = Path(__file__).resolve().parents[2]
PY_DIRS = ("intercept", "controller", "tools", "bench", "k8s")


def _py_sources() -> list[Path]:
    return [p for d in PY_DIRS for p in sorted((ROOT / d).rglob("*.py"))]


def test_the_gate_policy_values_are_the_headers() -> None:
    from tgs.controller.policy import adaptive

    g = control.GatePolicy()
    assert (g.interference_ppm, g.wait_step_ns, g.fit_step_ns) == (
        const("TGS_INTERFERENCE_PPM"), const("TGS_WAIT_STEP_NS"), const("TGS_FIT_STEP_NS"))
    assert adaptive.INTERFERENCE == const("TGS_INTERFERENCE_PPM") / 1e6
    assert base.Policy.gate_policy == g
    fields = dict(ffi().typeof("struct tgs_ctl_header").fields)
    assert {"interference_ppm", "wait_step_ns", "fit_step_ns"} <= set(fields)
    assert ffi().sizeof("struct tgs_ctl_header") == 256
    # the shim reads them from the .ctl, with the header's defaults: none compiled in again
    shim = "".join((ROOT / "libshim" / f).read_text() for f in ("fit.c", "sync_hooks.c"))
    assert not re.search(r"#define (GATE_STEP_NS|OVERRUN_FRAC)\s+[0-9.]", shim)
    text = (ROOT / "controller" / "policy" / "adaptive.py").read_text()
    assert not re.search(r"^INTERFERENCE\s*=\s*[0-9.]", text, re.M)


def test_device_limits_are_the_headers() -> None:
    from tgs.tools import params

    assert protocol.MAX_DEVICES == control.JOB_MAX_DEVICES == const("TGS_JOB_MAX_DEVICES")
    assert protocol.DEVICE_INDEX_LIMIT == params.MAX_DEVICES == const("TGS_MAX_DEVICES")
    assert params.MAX_JOB_DEVICES == const("TGS_JOB_MAX_DEVICES")
    req = {"v": protocol.PROTOCOL_VERSION, "id": "1", "type": "register", "name": "j"}
    last = const("TGS_MAX_DEVICES") - 1
    assert protocol.parse_payload(json.dumps({**req, "device": last}).encode()).device == last
    with pytest.raises(protocol.ProtocolError):
        protocol.parse_payload(json.dumps({**req, "device": last + 1}).encode())
    for p in _py_sources():                       # no other copy of 64 or 16 devices
        text = p.read_text()
        assert not re.search(r"^MAX_(JOB_)?DEVICES\s*=\s*(64|16)\b", text, re.M), p
        assert not re.search(r"(?<!<)<\s*64\b", text), p


def test_the_device_segment_name_is_the_headers() -> None:
    from tgs.intercept import devseg

    fmt = string_const("TGS_DEV_SEG_NAME")
    assert fmt == "device-%d.seg"
    for i in (0, 7, 63):
        assert devseg.device_segment_name(i) == fmt % i
        assert devseg.is_device_segment(fmt % i)
    assert not devseg.is_device_segment("device-x.seg")
    assert not devseg.is_device_segment("train.seg")
    # one spelling per language: the header's macro in C, devseg in Python
    c = "".join(p.read_text() for p in (ROOT / "libshim").glob("*.c"))
    assert '"device-%d.seg"' not in c and "TGS_DEV_SEG_NAME" in c
    for p in _py_sources():
        if p.name != "devseg.py":
            assert not re.search(r"device-\{|device-\[0-9\]", p.read_text()), p


def test_the_build_paths_come_from_locate() -> None:
    from tgs.intercept import locate

    assert locate.build_path("sim") == ROOT / "build" / "sim"
    for p in _py_sources() + [ROOT / "sim" / "tools" / "coverage.py"]:
        if p.name != "locate.py":
            assert not re.search(r"""/ ["']build["']""", p.read_text()), p


def test_one_enum_of_log_levels() -> None:
    """log_level.h's enum is the shim's, the simulator's and its NVML's: no other enum."""
    enums = []
    for d in ("libshim", "sim", "contracts"):
        for p in sorted((ROOT / d).rglob("*.[ch]")):
            if re.search(r"enum[^;{]*\{[^}]*LOG_ERROR", p.read_text()):
                enums.append(p.relative_to(ROOT).as_posix())
    assert enums == ["contracts/include/tgs/log_level.h"]
    text = (ROOT / "contracts" / "include" / "tgs" / "log_level.h").read_text()
    assert "TGS_LOG_ERROR = 0, TGS_LOG_WARN, TGS_LOG_INFO, TGS_LOG_DEBUG" in text

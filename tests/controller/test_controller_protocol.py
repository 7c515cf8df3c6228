"""Protocol: round trips, validation of every field, and a fuzz of the request handler."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from ctl_helpers import make_handler
from tgs.controller import protocol as P

ID = [b"peer-1"]


def call(handler, obj) -> dict:
    payload = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    out = handler.handle(ID + [payload])
    assert out[:-1] == ID
    return json.loads(out[-1])


def req(type_: str, **fields) -> dict:
    return {"v": P.PROTOCOL_VERSION, "id": "r1", "type": type_, **fields}


@pytest.mark.parametrize("msg", [
    P.Register(id="a", name="train-1", priority="production", weight=3, mem_quota=1 << 30,
               device="GPU-sim-1", ephemeral=True, nslots=8),
    P.Register(id="b", name="x"),
    P.Unregister(id="c", name="x.y_z-1"),
    P.Set(id="d", name="j", weight=5),
    P.Set(id="e", name="j", mem_quota=None, unlimited_quota=True),
    P.Set(id="f", name="j", priority="production", mem_quota=123),
    P.List(id="g"),
    P.Status(id="h"),
])
def test_round_trip(msg) -> None:
    wire = json.dumps(P.request_to_dict(msg)).encode()
    assert P.parse_payload(wire) == msg


BAD = [
    (b"\xff\xfe", P.E_BAD_JSON),
    (b"{", P.E_BAD_JSON),
    (b"[1,2]", P.E_BAD_JSON),
    (b'"str"', P.E_BAD_JSON),
    (b'{"v":1,"id":"x","type":"list","n":NaN}', P.E_BAD_JSON),
    (b'{"v":1,"id":"x","type":"list","n":Infinity}', P.E_BAD_JSON),
    (b"[" * 100000, P.E_TOO_LARGE),
    (b"[" * 60000, P.E_BAD_JSON),
    (b'{"v":1,"id":"x","type":"list","n":' + b"9" * 5000 + b"}", P.E_BAD_JSON),
    (json.dumps({"id": "x", "type": "list"}).encode(), P.E_BAD_VERSION),
    (json.dumps({"v": True, "id": "x", "type": "list"}).encode(), P.E_BAD_VERSION),
    (json.dumps({"v": 1.0, "id": "x", "type": "list"}).encode(), P.E_BAD_VERSION),
    (json.dumps({"v": 2, "id": "x", "type": "list"}).encode(), P.E_BAD_VERSION),
    (json.dumps({"v": 1, "type": "list"}).encode(), P.E_BAD_REQUEST),
    (json.dumps({"v": 1, "id": 5, "type": "list"}).encode(), P.E_BAD_REQUEST),
    (json.dumps({"v": 1, "id": "x" * 65, "type": "list"}).encode(), P.E_BAD_REQUEST),
    (json.dumps(req("frobnicate")).encode(), P.E_UNKNOWN_TYPE),
    (json.dumps(req(None)).encode(), P.E_UNKNOWN_TYPE),
    (json.dumps(req("list", extra=1)).encode(), P.E_BAD_REQUEST),
    (json.dumps(req("register")).encode(), P.E_BAD_REQUEST),
    (json.dumps(req("register", name="")).encode(), P.E_BAD_REQUEST),
    (json.dumps(req("register", name="-x")).encode(), P.E_BAD_REQUEST),
    (json.dumps(req("register", name="a/b")).encode(), P.E_BAD_REQUEST),
    (json.dumps(req("register", name="a" * 64)).encode(), P.E_BAD_REQUEST),
    (json.dumps(req("register", name=7)).encode(), P.E_BAD_REQUEST),
    (json.dumps(req("register", name="a", priority="high")).encode(), P.E_BAD_REQUEST),
    (json.dumps(req("register", name="a", weight=True)).encode(), P.E_BAD_REQUEST),
    (json.dumps(req("register", name="a", weight=0)).encode(), P.E_BAD_REQUEST),
    (json.dumps(req("register", name="a", weight=1.5)).encode(), P.E_BAD_REQUEST),
    (json.dumps(req("register", name="a", weight="2")).encode(), P.E_BAD_REQUEST),
    (json.dumps(req("register", name="a", mem_quota=-1)).encode(), P.E_BAD_REQUEST),
    (json.dumps(req("register", name="a", mem_quota=1 << 64)).encode(), P.E_BAD_REQUEST),
    (json.dumps(req("register", name="a", mem_quota=1e30)).encode(), P.E_BAD_REQUEST),
    (json.dumps(req("register", name="a", nslots=0)).encode(), P.E_BAD_REQUEST),
    (json.dumps(req("register", name="a", nslots=129)).encode(), P.E_BAD_REQUEST),
    (json.dumps(req("register", name="a", device=-1)).encode(), P.E_BAD_REQUEST),
    (json.dumps(req("register", name="a", device=False)).encode(), P.E_BAD_REQUEST),
    (json.dumps(req("register", name="a", device="../../x")).encode(), P.E_BAD_REQUEST),
    (json.dumps(req("register", name="a", ephemeral=1)).encode(), P.E_BAD_REQUEST),
    (json.dumps(req("register", name="a", device=7)).encode(), P.E_NO_DEVICE),
    (json.dumps(req("register", name="a", device="GPU-nope")).encode(), P.E_NO_DEVICE),
    (json.dumps(req("set", name="a")).encode(), P.E_BAD_REQUEST),
    (json.dumps(req("set", name="nobody", weight=2)).encode(), P.E_NOT_FOUND),
    (json.dumps(req("unregister", name="nobody")).encode(), P.E_NOT_FOUND),
]


@pytest.mark.parametrize("payload,code", BAD)
def test_bad_requests_get_error_and_change_nothing(tmp_path: Path, payload, code) -> None:
    h = make_handler(tmp_path)
    reply = call(h, payload)
    assert reply["ok"] is False and reply["error"]["code"] == code, reply
    assert reply["error"]["message"]
    assert not h.registry.jobs
    assert not (tmp_path / "state" / "controller.json").exists()


def test_error_echoes_readable_id(tmp_path: Path) -> None:
    h = make_handler(tmp_path)
    assert call(h, req("register", name="a", weight=-3))["id"] == "r1"


def test_bad_multipart_shapes(tmp_path: Path) -> None:
    h = make_handler(tmp_path)
    good = json.dumps(req("list")).encode()
    for frames in ([b"id"], [b"id", b"junk", good], [b"id", b"", b"", b"", good]):
        out = h.handle(frames)
        assert out[0] == b"id"
        assert json.loads(out[-1])["error"]["code"] == P.E_BAD_FRAME
    out = h.handle([b"id", b"", good])        # REQ-style envelope is fine
    assert out[:2] == [b"id", b""] and json.loads(out[-1])["ok"] is True


def test_register_set_list_unregister(tmp_path: Path) -> None:
    h = make_handler(tmp_path)
    r = call(h, req("register", name="prod", priority="production", mem_quota=8 << 30))
    assert r["ok"], r
    assert r["segment"].endswith("prod.seg") and r["env"]["TGS_SEGMENT"] == r["segment"]
    assert r["env"]["LD_PRELOAD"] == "/x/libtgs.so" and r["job"]["device"] == 0
    assert call(h, req("register", name="prod"))["error"]["code"] == P.E_EXISTS
    # production quotas may not exceed the device's 16 GiB
    r = call(h, req("register", name="p2", priority="production", mem_quota=9 << 30))
    assert r["error"]["code"] == P.E_OVERCOMMIT
    assert "17GiB (8GiB reserved by other production jobs), more than its 16GiB" in \
        r["error"]["message"]
    r = call(h, req("register", name="p3", priority="production"))   # no quota: no reservation
    assert r["ok"] and r["job"]["mem_quota"] is None
    assert call(h, req("unregister", name="p3"))["ok"]
    assert call(h, req("register", name="p4", priority="production", device=1))["ok"]
    assert call(h, req("register", name="opp", mem_quota=100 << 30))["ok"]  # opp: no limit
    r = call(h, req("set", name="opp", priority="production"))
    assert r["error"]["code"] == P.E_OVERCOMMIT
    r = call(h, req("set", name="opp", weight=4, mem_quota=1 << 30))
    assert r["ok"] and r["job"]["weight"] == 4 and r["job"]["mem_quota"] == 1 << 30
    names = sorted(j["name"] for j in call(h, req("list"))["jobs"])
    assert names == ["opp", "p4", "prod"]
    st = call(h, req("status"))
    assert st["ok"] and st["jobs"] == 3 and len(st["devices"]) == 2
    assert call(h, req("unregister", name="p4"))["ok"]
    assert "p4" not in h.registry.jobs


def test_fuzz_handler_answers_everything(tmp_path: Path) -> None:
    h = make_handler(tmp_path)
    rng = random.Random(1234)
    valid = [req("register", name="f1", priority="opportunistic", weight=2),
             req("set", name="f1", weight=3), req("list"), req("status"),
             req("register", name="f2", priority="production", mem_quota=1 << 30, device=1)]
    values = [None, True, False, 0, -1, 1 << 70, 1.5, -0.0, "", "x" * 300, [], {}, [1], {"a": 1},
              "production", 2 ** 63, 16]
    for n in range(3000):
        kind = n % 4
        if kind == 0:
            payload = bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 64)))
        elif kind == 1:
            wire = json.dumps(rng.choice(valid)).encode()
            payload = wire[: rng.randrange(0, len(wire))]
        elif kind == 2:
            msg = dict(rng.choice(valid))
            msg[rng.choice(list(msg) + ["zz", "name", "weight"])] = rng.choice(values)
            payload = json.dumps(msg).encode()
        else:
            frames = [bytes([rng.getrandbits(8)]) * rng.randrange(0, 3)
                      for _ in range(rng.randrange(0, 5))]
            out = h.handle([b"peer"] + frames)
            assert json.loads(out[-1])["v"] == P.PROTOCOL_VERSION
            continue
        reply = call(h, payload)
        assert reply["ok"] in (True, False)
        if not reply["ok"]:
            assert reply["error"]["code"] in P.ERROR_CODES
    # the registry is still coherent and served a final request
    assert all(P.NAME_RE.match(n) for n in h.registry.jobs)
    assert {"f1", "f2"} <= set(h.registry.jobs)
    assert call(h, req("list"))["ok"]

"""The controller's wire protocol: request dataclasses, validation, replies, error codes.

Every message is one JSON object (UTF-8) in the last frame of a ZeroMQ multipart
message.  docs/protocol.md is the human description; this module is the only
place that parses or validates a request.  Parsing never raises anything but
ProtocolError, whatever the bytes are.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Union

from tgs.client.protocol import DEFAULT_SLOTS, PROTOCOL_VERSION
from tgs.intercept.control import JOB_MAX_DEVICES, MAX_SLOTS, NAME_MAX, UUID_MAX
from tgs.intercept.control import MAX_DEVICES as DEVICE_INDEX_LIMIT

from .replies import Reply  # the reply objects (typed, one per docs/protocol.md table)

MAX_DEVICES = JOB_MAX_DEVICES  # devices of one job (register "devices"; segment.h)
MAX_FRAME = 64 * 1024          # bytes in the payload frame
MAX_FRAMES = 4                 # identity + at most one delimiter + payload (+ slack)
MAX_ID_LEN = 64
# Sized from segment.h (TGS_SEG_NAME_MAX, TGS_SEG_UUID_MAX): a name or UUID fits its field with NUL.
NAME_RE = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{NAME_MAX - 2}}}\Z")
UUID_RE = re.compile(rf"[A-Za-z0-9-]{{1,{UUID_MAX - 1}}}\Z")
MAX_WEIGHT = 1000
MAX_QUOTA = (1 << 63) - 1
PRIORITIES = ("production", "opportunistic")
MAX_DEADLINE_MS = 1 << 53      # ms since the epoch (JSON-safe integers)
MAX_UID = (1 << 32) - 2        # (uid_t)-1 means "no change" to chown

# Error codes (the "code" of an error reply).
E_BAD_FRAME = "bad_frame"       # wrong multipart shape
E_TOO_LARGE = "too_large"       # payload over MAX_FRAME
E_BAD_JSON = "bad_json"         # not UTF-8, not JSON, or not an object
E_BAD_VERSION = "bad_version"   # "v" missing or not PROTOCOL_VERSION
E_BAD_REQUEST = "bad_request"   # a field is missing, unknown, of the wrong type or out of range
E_UNKNOWN_TYPE = "unknown_type"
E_NOT_FOUND = "not_found"       # no such job
E_EXISTS = "exists"             # job name taken
E_OVERCOMMIT = "overcommit"     # production memory quotas would exceed the device's memory
E_NO_DEVICE = "no_device"       # no such device index / UUID
E_INTERNAL = "internal"         # the daemon failed (segment I/O...); nothing was changed
E_EXPIRED = "expired"           # deadline_ms had passed when the request was read: not applied
ERROR_CODES = (E_BAD_FRAME, E_TOO_LARGE, E_BAD_JSON, E_BAD_VERSION, E_BAD_REQUEST,
               E_UNKNOWN_TYPE, E_NOT_FOUND, E_EXISTS, E_OVERCOMMIT, E_NO_DEVICE, E_INTERNAL,
               E_EXPIRED)


class ProtocolError(Exception):
    """A request that gets an error reply.  `req_id` is echoed when it was readable."""

    def __init__(self, code: str, message: str, req_id: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.req_id = req_id


@dataclass(frozen=True)
class Register:
    id: str
    name: str
    priority: str = "opportunistic"
    weight: int = 1
    mem_quota: int | None = None          # bytes; None = unlimited
    device: int | str = 0                 # index or UUID
    ephemeral: bool = False
    nslots: int = DEFAULT_SLOTS
    lease_uid: int | None = None          # give the job a lease file this uid may open
    mem_total: int = 0                    # oversubscription: bytes held in all; 0 = off
    host_pinned_max: int = 0              # page-locked host bytes the job may hold; 0 = no limit
    deadline_ms: int | None = None
    devices: tuple[int | str, ...] | None = None   # 1.2: several devices (indices or UUIDs)
    mem_fixed: bool = False               # 1.3: opportunistic memory not evictable


@dataclass(frozen=True)
class Unregister:
    id: str
    name: str
    when_idle: bool = False               # only if no lease holder and no live process
    deadline_ms: int | None = None


@dataclass(frozen=True)
class Set:
    id: str
    name: str
    mem_quota: int | None = None
    priority: str | None = None
    weight: int | None = None
    unlimited_quota: bool = False         # true when the request said "mem_quota": null
    mem_total: int | None = None          # oversubscription (0 = off); None = no change
    host_pinned_max: int | None = None    # page-locked host bytes (0 = no limit); None = same
    deadline_ms: int | None = None
    mem_fixed: bool | None = None         # 1.3; None = no change


@dataclass(frozen=True)
class List:
    id: str
    deadline_ms: int | None = None


@dataclass(frozen=True)
class Status:
    id: str
    deadline_ms: int | None = None


Request = Union[Register, Unregister, Set, List, Status]


# ---------------------------------------------------------------- field checks

class _Fields:
    """Typed access to a request object; every read is checked, leftovers are refused."""

    def __init__(self, obj: dict[str, Any], req_id: str) -> None:
        self.obj = obj
        self.req_id = req_id
        self.seen = {"v", "id", "type"}

    def _bad(self, msg: str) -> ProtocolError:
        return ProtocolError(E_BAD_REQUEST, msg, self.req_id)

    def has(self, key: str) -> bool:
        return key in self.obj

    def raw(self, key: str) -> Any:
        self.seen.add(key)
        return self.obj.get(key)

    def string(self, key: str, pattern: re.Pattern[str], what: str) -> str:
        if key not in self.obj:
            raise self._bad(f"missing field {key!r}")
        val = self.raw(key)
        if not isinstance(val, str) or not pattern.match(val):
            raise self._bad(f"field {key!r} must be {what}")
        return val

    def integer(self, key: str, lo: int, hi: int) -> int:
        val = self.raw(key)
        # bool is a subclass of int: refuse it explicitly
        if isinstance(val, bool) or not isinstance(val, int):
            raise self._bad(f"field {key!r} must be an integer")
        if not lo <= val <= hi:
            raise self._bad(f"field {key!r} must be in [{lo}, {hi}], got {val}")
        return val

    def boolean(self, key: str) -> bool:
        val = self.raw(key)
        if not isinstance(val, bool):
            raise self._bad(f"field {key!r} must be true or false")
        return val

    def priority(self, key: str) -> str:
        val = self.raw(key)
        if val not in PRIORITIES:
            raise self._bad(f"field {key!r} must be one of {', '.join(PRIORITIES)}")
        return str(val)

    def quota(self, key: str) -> int | None:
        if self.obj.get(key) is None:
            self.seen.add(key)
            return None
        return self.integer(key, 0, MAX_QUOTA)

    def device(self, key: str) -> int | str:
        val = self.raw(key)
        if isinstance(val, str):
            if not UUID_RE.match(val):
                raise self._bad(f"field {key!r}: not a device UUID")
            return val
        if isinstance(val, bool) or not isinstance(val, int):
            raise self._bad(f"field {key!r} must be a device index or UUID")
        if not 0 <= val < DEVICE_INDEX_LIMIT:
            raise self._bad(f"field {key!r}: device index out of range")
        return val

    def devices(self, key: str) -> tuple[int | str, ...]:
        """A non-empty list of distinct device references (indices or UUIDs)."""
        val = self.raw(key)
        if not isinstance(val, list) or not val:
            raise self._bad(f"field {key!r} must be a non-empty list of device indices or UUIDs")
        if len(val) > MAX_DEVICES:
            raise self._bad(f"field {key!r}: at most {MAX_DEVICES} devices")
        out: list[int | str] = []
        for i, item in enumerate(val):
            if isinstance(item, str):
                if not UUID_RE.match(item):
                    raise self._bad(f"field {key!r}[{i}]: not a device UUID")
            elif isinstance(item, bool) or not isinstance(item, int):
                raise self._bad(f"field {key!r}[{i}] must be a device index or UUID")
            elif not 0 <= item < DEVICE_INDEX_LIMIT:
                raise self._bad(f"field {key!r}[{i}]: device index out of range")
            if item in out:
                raise self._bad(f"field {key!r}: device {item!r} is listed twice")
            out.append(item)
        return tuple(out)

    def done(self) -> None:
        extra = sorted(set(self.obj) - self.seen)
        if extra:
            raise self._bad(f"unknown field(s): {', '.join(extra)}")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed")


def _loads(payload: bytes) -> Any:
    try:
        text = payload.decode("utf-8")
        return json.loads(text, parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ProtocolError(E_BAD_JSON, f"payload is not UTF-8 JSON: {exc}"[:200]) from None


def parse_payload(payload: bytes) -> Request:
    """Validate one payload frame; raises ProtocolError (with the id when readable)."""
    if len(payload) > MAX_FRAME:
        raise ProtocolError(E_TOO_LARGE, f"payload of {len(payload)} bytes exceeds {MAX_FRAME}")
    obj = _loads(payload)
    if not isinstance(obj, dict):
        raise ProtocolError(E_BAD_JSON, "payload must be a JSON object")
    rid = obj.get("id")
    req_id = rid if isinstance(rid, str) and 0 < len(rid) <= MAX_ID_LEN else None
    ver = obj.get("v")
    if isinstance(ver, bool) or ver != PROTOCOL_VERSION or not isinstance(ver, int):
        raise ProtocolError(E_BAD_VERSION, f"protocol version must be {PROTOCOL_VERSION}", req_id)
    if req_id is None:
        raise ProtocolError(E_BAD_REQUEST, f"field 'id' must be a string of 1-{MAX_ID_LEN} chars")
    kind = obj.get("type")
    parser = _PARSERS.get(kind) if isinstance(kind, str) else None
    if parser is None:
        raise ProtocolError(E_UNKNOWN_TYPE, f"unknown message type {str(kind)[:40]!r}", req_id)
    fields = _Fields(obj, req_id)
    req = parser(fields)
    fields.done()
    return req


def _name(f: _Fields) -> str:
    return f.string("name", NAME_RE,
                    f"a job name: 1-{NAME_MAX - 1} of [A-Za-z0-9._-], not starting with . - _")


def _deadline(f: _Fields) -> int | None:
    return f.integer("deadline_ms", 0, MAX_DEADLINE_MS) if f.has("deadline_ms") else None


def _parse_register(f: _Fields) -> Register:
    d = Register(id=f.req_id, name=_name(f))
    lease_uid = f.integer("lease_uid", 0, MAX_UID) if f.has("lease_uid") else None
    ephemeral = f.boolean("ephemeral") if f.has("ephemeral") else d.ephemeral
    if lease_uid is not None and not ephemeral:
        raise ProtocolError(E_BAD_REQUEST, "a job with a lease must be ephemeral", f.req_id)
    if f.has("device") and f.has("devices"):
        raise ProtocolError(E_BAD_REQUEST, "give 'device' or 'devices', not both", f.req_id)
    devices = f.devices("devices") if f.has("devices") else None
    return Register(
        id=f.req_id,
        name=d.name,
        priority=f.priority("priority") if f.has("priority") else d.priority,
        weight=f.integer("weight", 1, MAX_WEIGHT) if f.has("weight") else d.weight,
        mem_quota=f.quota("mem_quota"),
        device=f.device("device") if f.has("device") else d.device,
        ephemeral=ephemeral,
        nslots=f.integer("nslots", 1, MAX_SLOTS) if f.has("nslots") else d.nslots,
        lease_uid=lease_uid,
        mem_total=f.integer("mem_total", 0, MAX_QUOTA) if f.has("mem_total") else 0,
        host_pinned_max=(f.integer("host_pinned_max", 0, MAX_QUOTA)
                         if f.has("host_pinned_max") else 0),
        deadline_ms=_deadline(f),
        devices=devices,
        mem_fixed=f.boolean("mem_fixed") if f.has("mem_fixed") else False,
    )


def _parse_set(f: _Fields) -> Set:
    name = _name(f)
    if not any(f.has(k) for k in ("mem_quota", "priority", "weight", "mem_total",
                                  "host_pinned_max", "mem_fixed")):
        raise ProtocolError(E_BAD_REQUEST, "set needs mem_quota, priority, weight, mem_total, "
                            "host_pinned_max or mem_fixed", f.req_id)
    unlimited = f.has("mem_quota") and f.obj["mem_quota"] is None
    return Set(
        id=f.req_id,
        name=name,
        mem_quota=f.quota("mem_quota") if f.has("mem_quota") else None,
        priority=f.priority("priority") if f.has("priority") else None,
        weight=f.integer("weight", 1, MAX_WEIGHT) if f.has("weight") else None,
        unlimited_quota=unlimited,
        mem_total=f.integer("mem_total", 0, MAX_QUOTA) if f.has("mem_total") else None,
        host_pinned_max=(f.integer("host_pinned_max", 0, MAX_QUOTA)
                         if f.has("host_pinned_max") else None),
        mem_fixed=f.boolean("mem_fixed") if f.has("mem_fixed") else None,
        deadline_ms=_deadline(f),
    )


def _parse_unregister(f: _Fields) -> Unregister:
    return Unregister(id=f.req_id, name=_name(f),
                      when_idle=f.boolean("when_idle") if f.has("when_idle") else False,
                      deadline_ms=_deadline(f))


_PARSERS = {
    "register": _parse_register,
    "unregister": _parse_unregister,
    "set": _parse_set,
    "list": lambda f: List(id=f.req_id, deadline_ms=_deadline(f)),
    "status": lambda f: Status(id=f.req_id, deadline_ms=_deadline(f)),
}
MESSAGE_TYPES = tuple(_PARSERS)


# ---------------------------------------------------------------- encoding

def _clean(value: Any) -> Any:
    """JSON has no NaN/inf: replace them by null so every reply is valid JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def encode(obj: dict[str, Any]) -> bytes:
    return json.dumps(_clean(obj), separators=(",", ":"), allow_nan=False).encode()


def ok_reply(req_id: str | None, reply: Reply) -> bytes:
    """A success reply: the envelope and the fields of ``reply`` (replies.py)."""
    return encode({"v": PROTOCOL_VERSION, "id": req_id, "ok": True, **reply.to_dict()})


def error_reply(req_id: str | None, code: str, message: str) -> bytes:
    return encode({"v": PROTOCOL_VERSION, "id": req_id, "ok": False,
                   "error": {"code": code, "message": message}})


def check_deadline(req: Request, now_ms: int) -> None:
    """Refuse a request whose sender has given up on it (before anything is applied)."""
    if req.deadline_ms is not None and now_ms > req.deadline_ms:
        raise ProtocolError(E_EXPIRED, f"the request expired {now_ms - req.deadline_ms} ms ago "
                            "(deadline_ms): not applied", req.id)


def request_to_dict(req: Request) -> dict[str, Any]:
    """The wire form of a request (used by the client)."""
    kind = {Register: "register", Unregister: "unregister", Set: "set", List: "list",
            Status: "status"}[type(req)]
    out: dict[str, Any] = {"v": PROTOCOL_VERSION, "id": req.id, "type": kind}
    if req.deadline_ms is not None:
        out["deadline_ms"] = req.deadline_ms
    if isinstance(req, Register):
        out.update(name=req.name, priority=req.priority, weight=req.weight,
                   mem_quota=req.mem_quota, ephemeral=req.ephemeral, nslots=req.nslots)
        if req.devices is not None:
            out["devices"] = list(req.devices)
        else:
            out["device"] = req.device
        if req.lease_uid is not None:
            out["lease_uid"] = req.lease_uid
        if req.mem_total:
            out["mem_total"] = req.mem_total
        if req.host_pinned_max:
            out["host_pinned_max"] = req.host_pinned_max
        if req.mem_fixed:
            out["mem_fixed"] = True
    elif isinstance(req, Unregister):
        out["name"] = req.name
        if req.when_idle:
            out["when_idle"] = True
    elif isinstance(req, Set):
        out["name"] = req.name
        if req.mem_quota is not None or req.unlimited_quota:
            out["mem_quota"] = req.mem_quota
        if req.priority is not None:
            out["priority"] = req.priority
        if req.weight is not None:
            out["weight"] = req.weight
        if req.mem_total is not None:
            out["mem_total"] = req.mem_total
        if req.host_pinned_max is not None:
            out["host_pinned_max"] = req.host_pinned_max
        if req.mem_fixed is not None:
            out["mem_fixed"] = req.mem_fixed
    return out

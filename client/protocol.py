"""What the controller and its clients agree on, beyond the messages' fields: the protocol
version every message carries and the defaults a client may leave out.  The messages
themselves (their fields, validation, replies) are docs/protocol.md, parsed on the
controller's side only (tgs.controller.protocol); a client sends plain JSON objects."""

from __future__ import annotations

PROTOCOL_VERSION = 1           # "v" of every message: the major version
PROTOCOL_MINOR = 3             # 1.1: deadline_ms, expired, lease_uid, when_idle; 1.2: devices;
#                                1.3: mem_fixed (opportunistic memory evictable by default)
DEFAULT_SLOTS = 32             # process slots of a job's segment when register gives none

"""The shim's contract: bindings of the files in contracts/include/tgs/segment.h, and
locating/injecting the shim library.

    from tgs.intercept import segment
    seg = segment.create(path, "job", mem_quota=8 << 30)   # <job>.ctl, <job>.seg, pub/<job>.pub
    seg.set_rate(0, rate=10**9, burst=10**7)

``segment.Segment`` maps a job's files and trusts them (creator, tests, tools); the controller
reads tenant-owned files only through ``tenant`` (pread, validated, clamped).
"""

from .control import ControlSegment, SegmentError, SlotDefaults, ctl_path, open_control
from .devseg import DeviceSegment, DevJob, create_device, device_segment_path, open_device
from .locate import find_shim, injection_env
from .pub import Pub, create_pub, open_pub, pub_path
from .segment import Segment, SlotCounters, create, open_segment
from .tenant import SegReader, read_pub

__all__ = [
    "ControlSegment",
    "DevJob",
    "DeviceSegment",
    "Pub",
    "SegReader",
    "Segment",
    "SegmentError",
    "SlotCounters",
    "SlotDefaults",
    "create",
    "create_device",
    "create_pub",
    "ctl_path",
    "device_segment_path",
    "find_shim",
    "injection_env",
    "open_control",
    "open_device",
    "open_pub",
    "open_segment",
    "pub_path",
    "read_pub",
]

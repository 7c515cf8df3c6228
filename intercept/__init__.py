"""The shim's contract: segment layout bindings (from libshim/include/tgs/segment.h) and
locating/injecting the shim library.

    from tgs.intercept import segment
    seg = segment.create(path, "job", mem_quota=8 << 30)
    seg.set_rate(0, rate=10**9, burst=10**7)
"""

from .device import DeviceSegment, create_device, device_segment_path, open_device
from .locate import find_shim, injection_env
from .segment import (
    Reclaimed,
    Segment,
    SegmentError,
    SlotCounters,
    SlotDefaults,
    create,
    open_segment,
)

__all__ = [
    "DeviceSegment",
    "Reclaimed",
    "Segment",
    "SegmentError",
    "SlotCounters",
    "SlotDefaults",
    "create",
    "create_device",
    "device_segment_path",
    "find_shim",
    "injection_env",
    "open_device",
    "open_segment",
]

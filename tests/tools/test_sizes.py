"""tools/sizes.py: the one size parser every tool uses."""

from __future__ import annotations

import pytest
from tgs.tools.sizes import SizeError, format_size, parse_size

GIB = 1 << 30


@pytest.mark.parametrize("text,value", [
    ("512MiB", 512 << 20), ("8GiB", 8 * GIB), ("8G", 8 * GIB), ("8gb", 8 * GIB),
    ("1.5GiB", 3 * GIB // 2), ("4096", 4096), ("4096B", 4096), (" 2 K ", 2048),
    ("1T", 1 << 40), ("0", 0),
])
def test_parse(text: str, value: int) -> None:
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["", "GiB", "-1G", "1.5", "1.5iB", "8X", "1e9", "8 GiB GiB",
                                  "99999999999T"])
def test_parse_refuses(text: str) -> None:
    with pytest.raises(SizeError, match="size|large"):
        parse_size(text)


def test_format() -> None:
    assert format_size(3 * GIB // 2) == "1.5GiB"
    assert format_size(512 << 20) == "512MiB"
    assert format_size(100) == "100B"
    assert format_size(None) == "unlimited"

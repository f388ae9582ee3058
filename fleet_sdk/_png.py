"""Whether a screenshot is usable: a real PNG that is not one flat colour.

Shared by the client's browser health check (``fleet_sdk.browser``) and the local server's job
episodes (``fleet_local._job_browser``), which both refuse a blank first screenshot.
"""

from __future__ import annotations

import struct
import zlib

__all__ = ["is_blank_png"]


def _png_scanlines(png: bytes) -> tuple[int, int, int, bytes]:
    """(width, height, bytes per pixel, filtered scanlines) of an 8-bit, non-interlaced PNG."""
    if not png.startswith(b"\x89PNG\r\n\x1a\n"):
        raise ValueError("not a PNG")
    pos, idat, header = 8, bytearray(), None
    while pos + 8 <= len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        kind, data = png[pos + 4 : pos + 8], png[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", data)
        elif kind == b"IDAT":
            idat += data
        elif kind == b"IEND":
            break
        pos += 12 + length
    if header is None:
        raise ValueError("PNG without IHDR")
    width, height, depth, color, _, _, interlace = header
    channels = {0: 1, 2: 3, 4: 2, 6: 4}.get(color)
    if depth != 8 or channels is None or interlace:
        raise ValueError(f"unsupported PNG (depth {depth}, color type {color}, interlace {interlace})")
    raw = zlib.decompress(bytes(idat))
    if len(raw) != height * (width * channels + 1):
        raise ValueError("PNG data does not match its size")
    return width, height, channels, raw


def is_blank_png(png: bytes) -> bool:
    """Whether a PNG is unusable as a health check: undecodable, empty, or one flat colour.

    Rather than unfiltering every pixel (slow in Python), each scanline is compared with what its
    filter type would produce for a flat image of the first pixel's colour: plain byte comparisons.

    Args:
        png: The PNG bytes.
    """
    try:
        width, height, channels, raw = _png_scanlines(png)
    except (ValueError, zlib.error, struct.error):
        return True
    if width == 0 or height == 0:
        return True
    stride = width * channels
    pixel = raw[1 : 1 + channels]
    half = bytes((b - b // 2) & 0xFF for b in pixel)  # Avg filter of a pixel over itself / nothing
    zeros = bytes(stride - channels)
    repeated = pixel * width
    for row in range(height):
        start = row * (stride + 1)
        kind, line = raw[start], raw[start + 1 : start + 1 + stride]
        if kind == 0 or (kind == 2 and row == 0):
            expected = repeated
        elif kind == 1 or (kind == 4 and row == 0):
            expected = pixel + zeros
        elif kind in {2, 4}:
            expected = bytes(stride)
        elif kind == 3:
            expected = pixel + half * (width - 1) if row == 0 else half + zeros
        else:
            return True
        if line != expected:
            return False
    return True

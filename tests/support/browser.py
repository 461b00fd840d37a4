"""What a person looks at, looked at by a real browser: Debian's headless chromium renders a
report, and the test reads its DOM after a screenshot proved the page draws."""

from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from pathlib import Path


def render_in_chromium(report: Path, tmp_path: Path) -> str:
    """Open the report in Debian's headless chromium: its DOM, after a screenshot proved it draws."""
    browser = shutil.which("chromium")
    assert browser, "Debian's chromium is needed (./dev test installs it)"
    page = report.as_uri()
    flags = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    dom = subprocess.run([*flags, "--dump-dom", page], capture_output=True, text=True, timeout=120, check=True).stdout
    shot = tmp_path / "report.png"
    subprocess.run(
        [*flags, f"--screenshot={shot}", "--window-size=1000,1400", page], capture_output=True, timeout=120, check=True
    )
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", png[16:24]) == (1000, 1400)
    pixels = zlib.decompress(b"".join(_png_chunks(png, b"IDAT")))
    assert sum(1 for b in pixels if b not in (0, 255)) > 20_000  # text and bars, not a blank page
    return dom


def _png_chunks(png: bytes, kind: bytes) -> list[bytes]:
    chunks, at = [], 8
    while at < len(png):
        (length,), tag = struct.unpack(">I", png[at : at + 4]), png[at + 4 : at + 8]
        if tag == kind:
            chunks.append(png[at + 8 : at + 8 + length])
        at += 12 + length
    return chunks

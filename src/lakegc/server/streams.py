"""Object bodies in and out of the server in chunks, so neither an upload nor a read is ever held
whole in memory, whatever its size."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Iterator
from typing import BinaryIO

import anyio.from_thread

CHUNK = 1 << 20


class RequestBody(io.RawIOBase):
    """A request body (an async iterator of chunks) read as a blocking file by storage code running
    in a worker thread: each read waits for the next chunk from the event loop. Must be read from a
    thread started by anyio (`run_in_threadpool`)."""

    def __init__(self, chunks: AsyncIterator[bytes]):
        self._chunks = chunks
        self._pending = memoryview(b"")
        self._done = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        while not self._pending and not self._done:
            try:
                self._pending = memoryview(anyio.from_thread.run(self._chunks.__anext__))
            except StopAsyncIteration:
                self._done = True
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n


def blocking(chunks: AsyncIterator[bytes]) -> BinaryIO:
    return io.BufferedReader(RequestBody(chunks), CHUNK)  # type: ignore[return-value]


def content(stream: BinaryIO, start: int = 0, length: int | None = None) -> Iterator[bytes]:
    """`length` bytes of `stream` from `start` (None: to the end) in chunks; closes the stream
    however the response ends (a client that hangs up included)."""
    try:
        _skip(stream, start)
        left = length
        while left is None or left > 0:
            chunk = stream.read(CHUNK if left is None else min(CHUNK, left))
            if not chunk:
                break
            if left is not None:
                left -= len(chunk)
            yield chunk
    finally:
        stream.close()


def _skip(stream: BinaryIO, count: int) -> None:
    """Move `stream` `count` bytes on: a seek where it can, else a read (an S3 body)."""
    if not count:
        return
    if stream.seekable():
        stream.seek(count)
        return
    while count > 0:
        chunk = stream.read(min(count, CHUNK))
        if not chunk:
            return
        count -= len(chunk)

"""Length-prefixed JSON frames over sockets and pipes (the sandbox's only protocol).

A frame is a 4-byte big-endian length followed by that many bytes of UTF-8 JSON. Readers
read exactly one frame and never buffer past it, so a process can hand the rest of a
stream to its successor (the zygote's one-run children read the same socket in turn).
Standard library only; loaded by the zygote.
"""
from __future__ import annotations

import json
import os
import struct

MAX_FRAME = 256 << 20


class WireError(OSError):
    """The other end closed the stream or sent something that is not a frame."""


def encode(msg) -> bytes:
    body = json.dumps(msg, separators=(",", ":"), ensure_ascii=False).encode()
    if len(body) > MAX_FRAME:
        raise WireError(f"frame of {len(body)} bytes is over the {MAX_FRAME}-byte limit")
    return struct.pack(">I", len(body)) + body


def _read_exact(fd: int, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            raise WireError(f"stream closed after {got} of {n} bytes")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_frame(fd: int, limit: int = MAX_FRAME):
    """Read one frame from a file descriptor (blocking). Raises WireError on EOF or garbage."""
    (n,) = struct.unpack(">I", _read_exact(fd, 4))
    if n > limit:
        raise WireError(f"frame announces {n} bytes, over the {limit}-byte limit")
    try:
        return json.loads(_read_exact(fd, n).decode())
    except ValueError as e:
        raise WireError(f"frame is not JSON: {e}") from None


def pop_frame(buf: bytearray, limit: int = MAX_FRAME) -> bytes | None:
    """The body of the first complete frame in `buf`, removed from it; None while it is incomplete. Raises
    WireError as soon as the frame announces more than `limit` bytes (before its body has come)."""
    if len(buf) < 4:
        return None
    (n,) = struct.unpack(">I", buf[:4])
    if n > limit:
        raise WireError(f"frame announces {n} bytes, over the {limit}-byte limit")
    if len(buf) < 4 + n:
        return None
    body = bytes(buf[4:4 + n])
    del buf[:4 + n]
    return body


def write_frame(fd: int, msg) -> None:
    data = memoryview(encode(msg))
    while data:
        data = data[os.write(fd, data):]


def recv_frame(sock, limit: int = MAX_FRAME):
    """`read_frame` for a socket object (honours its timeout: socket.timeout on expiry)."""
    def exact(n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = sock.recv(min(n - len(buf), 1 << 20))
            if not chunk:
                raise WireError(f"stream closed after {len(buf)} of {n} bytes")
            buf += chunk
        return bytes(buf)

    (n,) = struct.unpack(">I", exact(4))
    if n > limit:
        raise WireError(f"frame announces {n} bytes, over the {limit}-byte limit")
    try:
        return json.loads(exact(n).decode())
    except ValueError as e:
        raise WireError(f"frame is not JSON: {e}") from None


def send_frame(sock, msg) -> None:
    sock.sendall(encode(msg))

"""The binary frames that carry a pipeline's activations between ranks through the gateway.

Twin of sdk/protocol/pipeline-frame.ts (protocol 6, docs/worker-protocol.md, "Ranks"): the same
bytes and the same refusals. Little endian, a 32-byte header then the payload::

    0   4   magic, ASCII "SYPF"
    4   1   version, 1
    5   1   flags: bit 0 ``end`` (the sender sends nothing more on this pipeline)
    6   2   reserved, 0
    8   16  the lease id's 16 bytes (``lse_`` + 32 hex digits)
    24  4   fence, uint32
    28  4   seq, uint32: 1, 2, 3... per lease and direction
    32  ... payload, at most MAX_PIPELINE_PAYLOAD bytes

From a worker, the lease is the sender's own rank lease; from the gateway, the receiver's.
"""
from __future__ import annotations

import re
import struct
from dataclasses import dataclass

from .protocol import MAX_PIPELINE_PAYLOAD, PIPELINE_FRAME_MAGIC, PIPELINE_FRAME_VERSION, PIPELINE_HEADER_BYTES

_HEADER = struct.Struct("<4sBBH16sII")
_MAGIC = PIPELINE_FRAME_MAGIC.encode("ascii")
_END_FLAG = 1
_LEASE_ID = re.compile(r"^lse_[0-9a-f]{32}$")


class PipelineFrameError(ValueError):
    """A binary frame that is not a pipeline frame (or one that cannot be written): the message says why."""


@dataclass(frozen=True)
class PipelineFrame:
    #: The rank lease the frame is about (``lse_...``).
    lease_id: str
    fence: int
    #: 1, 2, 3... for the frames one lease sends (or receives).
    seq: int
    #: The sender's last frame on this pipeline: its stream ends here (the payload may be empty).
    end: bool
    payload: bytes


def is_pipeline_lease_id(lease_id: str) -> bool:
    """Whether ``lease_id`` is one a pipeline frame can carry."""
    return isinstance(lease_id, str) and _LEASE_ID.match(lease_id) is not None


def encode_pipeline_frame(lease_id: str, fence: int, seq: int, end: bool, payload: bytes) -> bytes:
    if not is_pipeline_lease_id(lease_id):
        raise PipelineFrameError(f"lease id {lease_id!r} is not lse_ and 32 hex digits")
    if len(payload) > MAX_PIPELINE_PAYLOAD:
        raise PipelineFrameError(f"a pipeline frame's payload is at most {MAX_PIPELINE_PAYLOAD} bytes, this one is {len(payload)}")
    head = _HEADER.pack(_MAGIC, PIPELINE_FRAME_VERSION, _END_FLAG if end else 0, 0, bytes.fromhex(lease_id[4:]), fence & 0xFFFFFFFF, seq & 0xFFFFFFFF)
    return head + bytes(payload)


def decode_pipeline_frame(data: bytes) -> PipelineFrame:
    """Reads a pipeline frame, refusing anything else with a PipelineFrameError."""
    if len(data) < PIPELINE_HEADER_BYTES:
        raise PipelineFrameError(f"a pipeline frame is at least {PIPELINE_HEADER_BYTES} bytes, this one is {len(data)}")
    magic, version, flags, reserved, lease, fence, seq = _HEADER.unpack_from(data)
    if magic != _MAGIC:
        raise PipelineFrameError(f"a pipeline frame starts with {PIPELINE_FRAME_MAGIC}")
    if version != PIPELINE_FRAME_VERSION:
        raise PipelineFrameError(f"pipeline frame version {version} is not {PIPELINE_FRAME_VERSION}")
    if flags & ~_END_FLAG or reserved != 0:
        raise PipelineFrameError("a pipeline frame sets no flag but end (bit 0) and no reserved bit")
    return PipelineFrame(f"lse_{lease.hex()}", fence, seq, bool(flags & _END_FLAG), bytes(data[PIPELINE_HEADER_BYTES:]))

"""The binary frames ranks of the demo ranked models pass to each other (docs/ranks.md, "Frame layout").

Twin of sdk/engines/demo/ranked-frames.ts: the same bytes and the same error messages. A
16-byte header then ``count`` int32 values, all little endian::

    0  4  magic "SYRK"
    4  1  version (1)
    5  1  type: 1 prompt, 2 activations, 3 token, 4 latent
    6  1  model: 1 demo-ranked-llm, 2 demo-ranked-image
    7  1  reserved, 0
    8  4  step (uint32): the generation step the frame belongs to
   12  4  count (uint32): int32 values after the header; the frame is exactly 16 + 4*count bytes
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import List, Sequence

FRAME_MAGIC = b"SYRK"
FRAME_VERSION = 1
FRAME_HEADER_BYTES = 16
#: A frame never holds more values than this (a prompt's tokens are the largest: 4096).
MAX_FRAME_VALUES = 1 << 16

FRAME_TYPES = {"prompt": 1, "activations": 2, "token": 3, "latent": 4}
FRAME_MODELS = {"demo-ranked-llm": 1, "demo-ranked-image": 2}
_TYPE_NAMES = {v: k for k, v in FRAME_TYPES.items()}
_MODEL_NAMES = {v: k for k, v in FRAME_MODELS.items()}
_HEADER = struct.Struct("<4sBBBBII")


class RankedFrameError(ValueError):
    """A frame that is not one of this format, or not the one a stage expects; the message says which."""


@dataclass
class RankedFrame:
    type: str
    model: str
    step: int
    values: List[int]


def encode_frame(frame: RankedFrame) -> bytes:
    values = frame.values
    if len(values) > MAX_FRAME_VALUES:
        raise RankedFrameError(f"ranked frame: {len(values)} values is over the limit of {MAX_FRAME_VALUES}")
    head = _HEADER.pack(FRAME_MAGIC, FRAME_VERSION, FRAME_TYPES[frame.type], FRAME_MODELS[frame.model], 0, frame.step & 0xFFFFFFFF, len(values))
    return head + struct.pack("<%di" % len(values), *values)


def decode_frame(data: bytes) -> RankedFrame:
    """Reads a frame's header and values, refusing anything malformed with a RankedFrameError."""
    data = bytes(data)
    if len(data) < FRAME_HEADER_BYTES:
        raise RankedFrameError(f"ranked frame: {len(data)} bytes is shorter than the {FRAME_HEADER_BYTES}-byte header")
    magic, version, type_code, model_code, reserved, step, count = _HEADER.unpack_from(data)
    if magic != FRAME_MAGIC:
        raise RankedFrameError(f'ranked frame: bad magic {magic.hex()} (expected "{FRAME_MAGIC.decode()}")')
    if version != FRAME_VERSION:
        raise RankedFrameError(f"ranked frame: version {version} (this code reads version {FRAME_VERSION})")
    if type_code not in _TYPE_NAMES:
        raise RankedFrameError(f"ranked frame: unknown type {type_code}")
    if model_code not in _MODEL_NAMES:
        raise RankedFrameError(f"ranked frame: unknown model {model_code}")
    if reserved != 0:
        raise RankedFrameError(f"ranked frame: reserved byte 7 is {reserved} (expected 0)")
    if count > MAX_FRAME_VALUES:
        raise RankedFrameError(f"ranked frame: {count} values is over the limit of {MAX_FRAME_VALUES}")
    expected = FRAME_HEADER_BYTES + count * 4
    if len(data) != expected:
        raise RankedFrameError(f"ranked frame: header says {count} values ({expected} bytes) but the frame has {len(data)} bytes")
    values = list(struct.unpack_from("<%di" % count, data, FRAME_HEADER_BYTES))
    return RankedFrame(_TYPE_NAMES[type_code], _MODEL_NAMES[model_code], step, values)


def expect_frame(data: bytes, model: str, types: Sequence[str], who: str) -> RankedFrame:
    """decode_frame, then the model and one of the types a stage takes, named in the error."""
    frame = decode_frame(data)
    if frame.model != model:
        raise RankedFrameError(f"ranked frame: a {frame.model} frame sent to {who} of {model}")
    if frame.type not in types:
        raise RankedFrameError(f"ranked frame: a {frame.type} frame sent to {who}, which takes {' or '.join(types)} frames")
    return frame


def check_range(frame: RankedFrame, low: int, high: int, what: str) -> None:
    """Refuses values outside [low, high]."""
    for i, v in enumerate(frame.values):
        if v < low or v > high:
            raise RankedFrameError(f"ranked frame: {what} {i} is {v}, outside [{low}, {high}]")


def check_count(frame: RankedFrame, count: int, what: str) -> None:
    """Refuses a frame whose count is not the one its type needs here."""
    if len(frame.values) != count:
        raise RankedFrameError(f"ranked frame: a {frame.type} frame of {len(frame.values)} values where {what} takes {count}")

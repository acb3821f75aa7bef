"""demo-ranked-image: a picture made by two ranks (issue 27).

Twin of sdk/engines/demo/ranked-image.ts, rank for rank and byte for byte, PNG included (stored
deflate blocks, so no zlib build can change the bytes). Rank 0 sees the prompt and turns its
tokens into a latent, an 8x8 grid of RGB values; rank 1 sees only that latent and renders a
64x64 PNG. The PNG proves both ranks ran: each rank's stage digest (sha256 of a label, its
weights' digest and the values it was given) is in a tEXt chunk (``switchyard-rank-0``,
``switchyard-rank-1``) and drawn as a barcode of its first 64 bits, rank 0's along the top 4
rows, rank 1's along the bottom 4. docs/ranks.md, "The demo ranked models". Standard library only.
"""
from __future__ import annotations

import struct
import zlib
from typing import Dict, List, Sequence, Tuple

from .ranked_frames import RankedFrame, RankedFrameError, check_count, check_range, encode_frame, expect_frame
from .ranked_math import center, dense, int32le, leaky_relu, normalize, rows_of, seeded_ints, sha256
from .ranked_vocab import MAX_PROMPT_TOKENS, VOCAB, tokenize

MODEL_ID = "demo-ranked-image"
SEED = 0x5EED1027
RANKS = 2
HIDDEN = 64
GRID = 8
SIDE = 64
_V = len(VOCAB)
_CELLS = GRID * GRID * 3
#: The latent frame's values: rank 0's digest as 8 int32 words, then the grid, row by row, RGB.
LATENT_VALUES = 8 + _CELLS
_BAR_ROWS = 4
_TAGS = {"embed": 0x1100, "weight": 0x1200, "bias": 0x1300, "out": 0x1400, "colour": 0x1500, "dither": 0x1600}

_tensors: Dict[str, List[int]] = {}


def _tensor(name: str, count: int, bits: int) -> List[int]:
    t = _tensors.get(name)
    if t is None:
        t = _tensors[name] = seeded_ints(SEED, _TAGS[name], count, bits)
    return t


def _rank0_weights() -> List[List[int]]:
    return [_tensor("embed", _V * HIDDEN, 12), _tensor("weight", HIDDEN * HIDDEN, 8), _tensor("bias", HIDDEN, 19), _tensor("out", _CELLS * HIDDEN, 8)]


def _colour_matrix() -> List[int]:
    """Near the identity (224/256 on the diagonal) plus small seeded terms."""
    m = list(_tensor("colour", 9, 6))
    for c in range(3):
        m[c * 3 + c] += 224
    return m


def _rank1_weights() -> List[List[int]]:
    return [_colour_matrix(), _tensor("dither", GRID * GRID, 4)]


_digests: Dict[int, bytes] = {}


def _weights_digest(rank: int) -> bytes:
    if rank not in _digests:
        _digests[rank] = sha256(*(int32le(t) for t in (_rank0_weights() if rank == 0 else _rank1_weights())))
    return _digests[rank]


def _stage_digest(rank: int, given: Sequence[int]) -> bytes:
    """What the stage is (label, weights) and what it was given (values)."""
    return sha256(f"{MODEL_ID} rank {rank} of 2\n".encode(), _weights_digest(rank), int32le(given))


def _latent_of(ids: Sequence[int]) -> List[int]:
    """Rank 0: the bag of the prompt's tokens through one hidden layer to the grid, after rank 0's digest words."""
    embed, w, b, out = _rank0_weights()
    x = [0] * HIDDEN
    for i in ids:
        x = [u + v for u, v in zip(x, embed[i * HIDDEN : (i + 1) * HIDDEN])]
    h = normalize(center(normalize(leaky_relu(dense(normalize(x), rows_of(w, HIDDEN), b)))))
    latent = normalize(dense(h, rows_of(out, HIDDEN)))
    words = list(struct.unpack("<8i", _stage_digest(0, ids)))
    return words + [max(0, min(255, 128 + (v >> 4))) for v in latent]


def _png(width: int, height: int, rgb: bytes, text: Sequence[Tuple[str, str]]) -> bytes:
    """IHDR, tEXt chunks, one IDAT of stored deflate blocks (filter 0 rows), IEND: the bytes png.ts writes."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    stride = width * 3
    raw = b"".join(b"\x00" + rgb[y * stride : (y + 1) * stride] for y in range(height))
    blocks = [b"\x78\x01"]
    at = 0
    while True:
        block = raw[at : at + 0xFFFF]
        final = at + 0xFFFF >= len(raw)
        blocks.append(struct.pack("<BHH", 1 if final else 0, len(block), ~len(block) & 0xFFFF) + block)
        at += 0xFFFF
        if final:
            break
    blocks.append(struct.pack(">I", zlib.adler32(raw) & 0xFFFFFFFF))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    texts = [chunk(b"tEXt", k.encode("latin-1") + b"\x00" + v.encode("latin-1")) for k, v in text]
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + b"".join(texts) + chunk(b"IDAT", b"".join(blocks)) + chunk(b"IEND", b"")


def _render(latent: Sequence[int]) -> bytes:
    """Rank 1: bilinear upsampling of the grid, the colour matrix, a dither tile, and the two barcodes."""
    m, dither = _rank1_weights()
    digest0 = struct.pack("<8i", *latent[:8])
    digest1 = _stage_digest(1, latent)
    grid = latent[8:]
    px = bytearray(SIDE * SIDE * 3)
    # Pixel centres map onto the grid in 1/256ths: 0 -> cell 0, SIDE-1 -> cell GRID-1.
    steps = [(f >> 8, min((f >> 8) + 1, GRID - 1), f & 255) for f in ((i * (GRID - 1) * 256) // (SIDE - 1) for i in range(SIDE))]
    for y in range(SIDE):
        y0, y1, wy = steps[y]
        for x in range(SIDE):
            x0, x1, wx = steps[x]
            up = []
            for c in range(3):
                top = grid[(y0 * GRID + x0) * 3 + c] * (256 - wx) + grid[(y0 * GRID + x1) * 3 + c] * wx
                bottom = grid[(y1 * GRID + x0) * 3 + c] * (256 - wx) + grid[(y1 * GRID + x1) * 3 + c] * wx
                up.append((top * (256 - wy) + bottom * wy) >> 16)
            d = dither[(y % GRID) * GRID + (x % GRID)]
            at = (y * SIDE + x) * 3
            for c in range(3):
                v = ((m[c * 3] * up[0] + m[c * 3 + 1] * up[1] + m[c * 3 + 2] * up[2]) >> 8) + d
                px[at + c] = max(0, min(255, v))
    for digest, row0 in ((digest0, 0), (digest1, SIDE - _BAR_ROWS)):
        for y in range(row0, row0 + _BAR_ROWS):
            for x in range(SIDE):
                on = (digest[x >> 3] >> (7 - (x & 7))) & 1
                px[(y * SIDE + x) * 3 : (y * SIDE + x) * 3 + 3] = b"\xff\xff\xff" if on else b"\x00\x00\x00"
    text = [("Software", f"Switchyard {MODEL_ID}"), ("switchyard-rank-0", digest0.hex()), ("switchyard-rank-1", digest1.hex())]
    return _png(SIDE, SIDE, bytes(px), text)


class RankedImageStage:
    """One rank of demo-ranked-image, stateless. Rank 0: a prompt frame (step 0) in, a latent
    frame out. Rank 1: a latent frame in, the PNG's bytes out (the job's artifact, not a frame)."""

    def __init__(self, rank: int) -> None:
        if rank not in (0, 1):
            raise ValueError(f"{MODEL_ID} has ranks 0 and 1, not {rank}")
        self.rank = rank

    @property
    def weights_digest(self) -> str:
        """Hex sha256 of the stage's weights as int32 LE."""
        return _weights_digest(self.rank).hex()

    def forward(self, data: bytes) -> bytes:
        who = f"rank {self.rank} of 2"
        if self.rank == 0:
            f = expect_frame(data, MODEL_ID, ["prompt"], who)
            if f.step != 0:
                raise RankedFrameError(f"ranked frame: a prompt frame at step {f.step} (prompts are step 0)")
            check_range(f, 0, _V - 1, "token")
            if len(f.values) > MAX_PROMPT_TOKENS:
                raise RankedFrameError(f"ranked frame: a prompt of {len(f.values)} tokens (at most {MAX_PROMPT_TOKENS})")
            return encode_frame(RankedFrame("latent", MODEL_ID, 0, _latent_of(f.values)))
        f = expect_frame(data, MODEL_ID, ["latent"], who)
        check_count(f, LATENT_VALUES, who)
        for i in range(8, LATENT_VALUES):
            if not 0 <= f.values[i] <= 255:
                raise RankedFrameError(f"ranked frame: latent value {i} is {f.values[i]}, outside [0, 255]")
        return _render(f.values)


def image_whole(prompt: str) -> bytes:
    """The model run whole in one process, without frames: the PNG a split run must equal."""
    return _render(_latent_of(tokenize(prompt)))


def image_split(prompt: str) -> bytes:
    """The model as two stages in this process: the prompt frame through rank 0, its latent frame through rank 1."""
    latent = RankedImageStage(0).forward(encode_frame(RankedFrame("prompt", MODEL_ID, 0, tokenize(prompt))))
    return RankedImageStage(1).forward(latent)

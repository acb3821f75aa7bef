"""Without a gateway: the demo ranked models (issue 27, docs/ranks.md) split into ranks give the
bytes they give whole, their output is pinned (the same pins as test/ranked-model.test.ts, so the
Python and TypeScript twins cannot drift apart unnoticed), and malformed frames are refused."""
from __future__ import annotations

import hashlib
import struct
import zlib
from typing import Dict

import pytest

from switchyard_worker.ranked_frames import FRAME_HEADER_BYTES, RankedFrame, RankedFrameError, decode_frame, encode_frame
from switchyard_worker.ranked_image import LATENT_VALUES, RankedImageStage, image_split, image_whole
from switchyard_worker.ranked_llm import RankedLlmStage, generate_split, generate_split_with, generate_whole, layer_range, pipeline_loop, prompt_frame
from switchyard_worker.ranked_vocab import END_TOKEN, VOCAB, detokenize, tokenize

PROMPTS = ["hello world", "in cat", "Tell me a story about a cat", "", "The quick brown fox, café 42!"]


def test_split_into_1_to_6_ranks_equals_whole() -> None:
    for prompt in PROMPTS:
        whole = generate_whole(prompt, 40)
        assert whole.tokens
        for ranks in range(1, 7):
            assert generate_split(prompt, 40, ranks) == whole, (prompt, ranks)
    assert generate_split("in cat", 64).finish == "stop"
    assert generate_split("hello world", 64).finish == "length"


def test_pinned_words_and_weights() -> None:
    g = generate_whole("hello world", 8)
    assert (g.tokens, g.text, g.finish) == ([121, 65, 11, 89, 63, 62, 63, 72], "here forest at small garden window garden queue", "length")
    stopped = generate_whole("in cat", 64)
    assert stopped.text == "fire together always fire house always pink queue it some here queue light slow opens carries pink and"
    assert (len(stopped.tokens), stopped.tokens[-1], stopped.finish) == (19, END_TOKEN, "stop")
    assert generate_whole("in cat", 0).tokens == []
    with pytest.raises(ValueError, match="max_tokens must be a non-negative integer"):
        generate_whole("x", -1)
    assert RankedLlmStage(0, 1).weights_digest == "42956a2c50d35efa8a2943796a205677aee40b410d3f824688787b4e6d822353"
    assert RankedLlmStage(1, 3).weights_digest == "c63d4d8472332d2a0fdd376247436da338a49c1a82fac6d8269f11234cc7cc9a"


def test_tokenizer() -> None:
    assert len(VOCAB) == 128
    assert tokenize("Hello, WORLD! Switchyard café 42 \ud800x") == [124, 125, 2, 99, 100, 75]
    assert detokenize(tokenize("the red fox runs")) == "the red fox runs"
    assert len(tokenize("word " * 5000)) == 4096


def test_layer_split() -> None:
    assert [layer_range(r, 4) for r in range(4)] == [(0, 1), (1, 3), (3, 4), (4, 6)]
    with pytest.raises(ValueError, match="splits into 1 to 6 ranks, not 7"):
        RankedLlmStage(0, 7)


def test_the_loop_passes_activations_and_returns_the_token_frame_to_rank_0() -> None:
    stages = [RankedLlmStage(r, 3) for r in range(3)]
    loop = pipeline_loop("hello world", 2, 3)
    seen, last_out = [], None
    rank, frame = next(loop)
    try:
        while True:
            f = decode_frame(frame)
            seen.append((rank, f.type, f.step, len(f.values)))
            if rank == 0 and last_out is not None:
                assert frame == last_out
            out = stages[rank].forward(frame)
            if rank == 2:
                last_out = out
            rank, frame = loop.send(out)
    except StopIteration as done:
        assert done.value == generate_whole("hello world", 2)
    assert seen == [(0, "prompt", 0, 2), (1, "activations", 0, 64), (2, "activations", 0, 64), (0, "token", 0, 1), (1, "activations", 1, 64), (2, "activations", 1, 64)]
    fresh = [RankedLlmStage(r, 2) for r in range(2)]
    assert generate_split_with("in cat", 5, [s.forward for s in fresh]) == generate_whole("in cat", 5)


def _bad(frame: bytes, at: int, value: bytes) -> bytes:
    return frame[:at] + value + frame[at + len(value):]


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda a: a[:10], "10 bytes is shorter than the 16-byte header"),
        (lambda a: _bad(a, 0, b"XXXX"), 'bad magic 58585858 (expected "SYRK")'),
        (lambda a: _bad(a, 4, b"\x02"), "version 2 (this code reads version 1)"),
        (lambda a: _bad(a, 5, b"\x09"), "unknown type 9"),
        (lambda a: _bad(a, 7, b"\x01"), "reserved byte 7 is 1"),
        (lambda a: a[:-4], "header says 64 values (272 bytes) but the frame has 268 bytes"),
        (lambda a: a + b"\0\0\0\0", "but the frame has 276 bytes"),
        (lambda a: _bad(a, 12, struct.pack("<I", 1 << 20)), "1048576 values is over the limit of 65536"),
        (lambda a: _bad(a, FRAME_HEADER_BYTES + 8, struct.pack("<i", 5000)), "activation 2 is 5000, outside [-4096, 4096]"),
        (lambda a: prompt_frame([1]), "a prompt frame sent to rank 1 of 3, which takes activations frames"),
        (lambda a: prompt_frame([1], "demo-ranked-image"), "a demo-ranked-image frame sent to rank 1 of 3 of demo-ranked-llm"),
        (lambda a: encode_frame(RankedFrame("activations", "demo-ranked-llm", 0, [0] * 63)), "63 values where rank 1 of 3 takes 64"),
    ],
)
def test_middle_rank_refuses(make, message: str) -> None:
    acts = RankedLlmStage(0, 3).forward(prompt_frame([1, 2, 3]))
    with pytest.raises(RankedFrameError) as err:
        RankedLlmStage(1, 3).forward(make(acts))
    assert message in str(err.value)


def test_rank_0_refuses_out_of_order_tokens() -> None:
    def token(step: int) -> bytes:
        return encode_frame(RankedFrame("token", "demo-ranked-llm", step, [5]))

    with pytest.raises(RankedFrameError, match="before any prompt frame"):
        RankedLlmStage(0, 3).forward(token(0))
    first = RankedLlmStage(0, 3)
    first.forward(prompt_frame([1, 2, 3]))
    with pytest.raises(RankedFrameError, match="the token of step 1 sent to rank 0 of 3, which expects the token of step 0"):
        first.forward(token(1))
    first.forward(token(0))
    with pytest.raises(RankedFrameError, match=r"token 0 is 128, outside \[0, 127\]"):
        first.forward(prompt_frame([128]))
    with pytest.raises(RankedFrameError, match=r"a prompt of 4097 tokens \(at most 4096\)"):
        first.forward(prompt_frame([1] * 4097))


def _png_text(png: bytes) -> Dict[str, str]:
    out, pos = {}, 8
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        kind, body = png[pos + 4 : pos + 8], png[pos + 8 : pos + 8 + length]
        assert struct.unpack(">I", png[pos + 8 + length : pos + 12 + length])[0] == zlib.crc32(kind + body)
        if kind == b"tEXt":
            key, _, value = body.partition(b"\0")
            out[key.decode("latin-1")] = value.decode("latin-1")
        pos += 12 + length
    return out


def test_image_split_equals_whole_and_is_pinned() -> None:
    for prompt in PROMPTS:
        assert image_split(prompt) == image_whole(prompt), prompt
    assert hashlib.sha256(image_whole("a red fox in the snow")).hexdigest() == "50e3e5c4d9c5216fef5c462672195fcdac1935cf2013be27aa942073e5b7f3b9"


def test_image_carries_both_rank_digests() -> None:
    latent = RankedImageStage(0).forward(prompt_frame(tokenize("a red fox in the snow"), "demo-ranked-image"))
    f = decode_frame(latent)
    assert (f.type, len(f.values)) == ("latent", LATENT_VALUES)
    png = RankedImageStage(1).forward(latent)
    text = _png_text(png)
    assert text["switchyard-rank-0"] == latent[FRAME_HEADER_BYTES : FRAME_HEADER_BYTES + 32].hex()
    assert len(text["switchyard-rank-1"]) == 64 and text["switchyard-rank-1"] != text["switchyard-rank-0"]
    # The pixels (stored deflate: the IDAT is the raw rows): the barcodes are the digests' first 64 bits.
    idat_at = png.index(b"IDAT") + 4
    raw = zlib.decompress(png[idat_at : idat_at + struct.unpack(">I", png[idat_at - 8 : idat_at - 4])[0]])
    row = lambda y: [1 if raw[y * 193 + 1 + x * 3] == 255 else 0 for x in range(64)]  # noqa: E731
    bits = lambda hexd: [(bytes.fromhex(hexd)[x >> 3] >> (7 - (x & 7))) & 1 for x in range(64)]  # noqa: E731
    assert row(0) == row(3) == bits(text["switchyard-rank-0"])
    assert row(60) == row(63) == bits(text["switchyard-rank-1"])


def test_image_refuses_bad_frames() -> None:
    latent = RankedImageStage(0).forward(prompt_frame([1, 2], "demo-ranked-image"))
    with pytest.raises(RankedFrameError, match="but the frame has 815 bytes"):
        RankedImageStage(1).forward(latent[:-1])
    with pytest.raises(RankedFrameError, match=r"latent value 10 is 256, outside \[0, 255\]"):
        RankedImageStage(1).forward(_bad(latent, FRAME_HEADER_BYTES + 40, struct.pack("<i", 256)))
    with pytest.raises(RankedFrameError, match="a demo-ranked-llm frame sent to rank 0 of 2 of demo-ranked-image"):
        RankedImageStage(0).forward(prompt_frame([1, 2]))

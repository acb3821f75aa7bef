"""demo-ranked-llm: a tiny decoder whose layers can be split over ranks (issue 27).

Twin of sdk/engines/demo/ranked-llm.ts: the same weights (a counter-based stream of ``SEED``),
the same integer arithmetic (ranked_math.py) and the same frames (ranked_frames.py), so a
Python rank and a TypeScript rank are interchangeable in one pipeline and a split run equals the
whole one byte for byte. docs/ranks.md, "The demo ranked models"::

    x = normalize(sum over the context's 4 positions p of E_p[token])          embedding, rank 0
    x = normalize(center(x + normalize(leaky_relu(W_l x + b_l))))  l = 0..5    layers, split
    next = argmax(H x), ties to the lowest id                                 head, last rank

Standard library only.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, Generator, List, Optional, Sequence, Tuple

from .ranked_frames import RankedFrame, RankedFrameError, check_count, check_range, encode_frame, expect_frame
from .ranked_math import ACT_LIMIT, argmax, center, dense, int32le, leaky_relu, normalize, rows_of, seeded_ints, sha256
from .ranked_vocab import END_TOKEN, MAX_PROMPT_TOKENS, VOCAB, detokenize, tokenize

MODEL_ID = "demo-ranked-llm"
SEED = 0x5EED0027
VOCAB_SIZE = len(VOCAB)
HIDDEN = 64
CONTEXT = 4
LAYERS = 6
# Weight stream tags: a tensor's stream does not depend on any other tensor's.
_TAG_EMBED, _TAG_WEIGHT, _TAG_BIAS, _TAG_HEAD = 0x100, 0x200, 0x300, 0x400

_tensors: Dict[str, List[int]] = {}


def _tensor(name: str, tag: int, count: int, bits: int) -> List[int]:
    """Lazily made and shared by every stage of the process: weights depend on the seed alone."""
    t = _tensors.get(name)
    if t is None:
        t = _tensors[name] = seeded_ints(SEED, tag, count, bits)
    return t


def _embedding(p: int) -> List[int]:
    return _tensor(f"embed{p}", _TAG_EMBED + p, VOCAB_SIZE * HIDDEN, 12)


def _weight(l: int) -> List[int]:
    return _tensor(f"weight{l}", _TAG_WEIGHT + l, HIDDEN * HIDDEN, 8)


def _bias(l: int) -> List[int]:
    return _tensor(f"bias{l}", _TAG_BIAS + l, HIDDEN, 19)


def _head() -> List[int]:
    return _tensor("head", _TAG_HEAD, VOCAB_SIZE * HIDDEN, 8)


_rows: Dict[str, List[List[int]]] = {}


def _rows_of(name: str, flat: List[int]) -> List[List[int]]:
    r = _rows.get(name)
    if r is None:
        r = _rows[name] = rows_of(flat, HIDDEN)
    return r


def _context_of(ids: Sequence[int]) -> List[int]:
    """The last CONTEXT tokens, padded on the left with the end token."""
    tail = list(ids[-CONTEXT:]) if ids else []
    return [END_TOKEN] * (CONTEXT - len(tail)) + tail


def _embed(ctx: Sequence[int]) -> List[int]:
    x = [0] * HIDDEN
    for p in range(CONTEXT):
        table, base = _embedding(p), ctx[p] * HIDDEN
        x = [a + b for a, b in zip(x, table[base : base + HIDDEN])]
    return normalize(x)


def _layer(l: int, x: List[int]) -> List[int]:
    a = normalize(leaky_relu(dense(x, _rows_of(f"weight{l}", _weight(l)), _bias(l))))
    return normalize(center([u + v for u, v in zip(a, x)]))


def _next_token(x: List[int]) -> int:
    return argmax(dense(x, _rows_of("head", _head())))


def layer_range(rank: int, ranks: int) -> Tuple[int, int]:
    """Layers [start, end) of rank ``rank`` of ``ranks``: contiguous, sizes differing by at most one."""
    if not isinstance(ranks, int) or ranks < 1 or ranks > LAYERS:
        raise ValueError(f"{MODEL_ID} splits into 1 to {LAYERS} ranks, not {ranks}")
    if not isinstance(rank, int) or rank < 0 or rank >= ranks:
        raise ValueError(f"rank {rank} is not one of 0..{ranks - 1}")
    return (rank * LAYERS // ranks, (rank + 1) * LAYERS // ranks)


def prompt_frame(ids: Sequence[int], model: str = MODEL_ID) -> bytes:
    """The frame rank 0 starts a generation with: the prompt's token ids at step 0."""
    return encode_frame(RankedFrame("prompt", model, 0, list(ids)))


def read_token_frame(data: bytes) -> Tuple[int, int]:
    """What the last rank sent: (step, token). The same frame goes back to rank 0."""
    f = expect_frame(data, MODEL_ID, ["token"], "the pipeline driver")
    check_count(f, 1, "the pipeline driver")
    return f.step, f.values[0]


class RankedLlmStage:
    """One rank of demo-ranked-llm.

    Rank 0 takes a prompt frame (step 0; resets its context) or the token frame the last rank
    sent for the step it computed last, and keeps the context window, so use one rank-0 stage
    per generation. Other ranks are stateless: activations in, activations (or, last, a token
    frame) out, at the step of the frame they got. Bad frames raise RankedFrameError.
    """

    def __init__(self, rank: int, ranks: int = 3) -> None:
        self.rank, self.ranks = rank, ranks
        self.layers = layer_range(rank, ranks)
        self.first, self.last = rank == 0, rank == ranks - 1
        self._context: Optional[List[int]] = None
        self._step = 0
        self._digest: Optional[str] = None

    @property
    def weights_digest(self) -> str:
        """Hex sha256 of the stage's weights as int32 LE (embeddings, its layers' W and b, head)."""
        if self._digest is None:
            parts: List[List[int]] = []
            if self.first:
                parts += [_embedding(p) for p in range(CONTEXT)]
            for l in range(*self.layers):
                parts += [_weight(l), _bias(l)]
            if self.last:
                parts.append(_head())
            self._digest = sha256(*(int32le(p) for p in parts)).hex()
        return self._digest

    def forward(self, data: bytes) -> bytes:
        who = f"rank {self.rank} of {self.ranks}"
        if self.first:
            f = expect_frame(data, MODEL_ID, ["prompt", "token"], who)
            check_range(f, 0, VOCAB_SIZE - 1, "token")
            if f.type == "prompt":
                if f.step != 0:
                    raise RankedFrameError(f"ranked frame: a prompt frame at step {f.step} (prompts are step 0)")
                if len(f.values) > MAX_PROMPT_TOKENS:
                    raise RankedFrameError(f"ranked frame: a prompt of {len(f.values)} tokens (at most {MAX_PROMPT_TOKENS})")
                self._context, self._step = _context_of(f.values), 0
            else:
                if self._context is None:
                    raise RankedFrameError(f"ranked frame: a token frame sent to {who} before any prompt frame")
                if f.step != self._step:
                    raise RankedFrameError(f"ranked frame: the token of step {f.step} sent to {who}, which expects the token of step {self._step}")
                check_count(f, 1, f"{who} (a token frame)")
                self._context = _context_of(self._context + [f.values[0]])
                self._step += 1
            x, step = _embed(self._context), self._step
        else:
            f = expect_frame(data, MODEL_ID, ["activations"], who)
            check_count(f, HIDDEN, who)
            check_range(f, -ACT_LIMIT, ACT_LIMIT, "activation")
            x, step = f.values, f.step
        for l in range(*self.layers):
            x = _layer(l, x)
        if self.last:
            return encode_frame(RankedFrame("token", MODEL_ID, step, [_next_token(x)]))
        return encode_frame(RankedFrame("activations", MODEL_ID, step, x))


@dataclass
class Generation:
    #: Generated ids, the end token included when it came.
    tokens: List[int] = field(default_factory=list)
    #: The generated words (detokenize).
    text: str = ""
    finish: str = "length"


def _check_max_tokens(max_tokens: int) -> None:
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 0:
        raise ValueError(f"max_tokens must be a non-negative integer, not {max_tokens!r}")


def _generation(tokens: List[int]) -> Generation:
    return Generation(tokens, detokenize(tokens), "stop" if tokens and tokens[-1] == END_TOKEN else "length")


def generate_whole(prompt: str, max_tokens: int) -> Generation:
    """The model run whole in one process, without frames: the reference a split run must equal."""
    _check_max_tokens(max_tokens)
    ctx = _context_of(tokenize(prompt))
    tokens: List[int] = []
    while len(tokens) < max_tokens:
        x = _embed(ctx)
        for l in range(LAYERS):
            x = _layer(l, x)
        token = _next_token(x)
        tokens.append(token)
        if token == END_TOKEN:
            break
        ctx = _context_of(ctx + [token])
    return _generation(tokens)


def pipeline_loop(prompt: str, max_tokens: int, ranks: int) -> Generator[Tuple[int, bytes], bytes, Generation]:
    """The gateway's loop as a generator: yields each (rank, frame) to forward and is sent that
    rank's answer; the last rank's token frame goes back to rank 0 until max_tokens or the end token."""
    _check_max_tokens(max_tokens)
    layer_range(0, ranks)
    frame = prompt_frame(tokenize(prompt))
    tokens: List[int] = []
    while len(tokens) < max_tokens:
        for rank in range(ranks):
            frame = yield rank, frame
        step, token = read_token_frame(frame)
        if step != len(tokens):
            raise RankedFrameError(f"ranked frame: the last rank answered step {step} during step {len(tokens)}")
        tokens.append(token)
        if token == END_TOKEN:
            break
    return _generation(tokens)


def _drive(loop: Generator[Tuple[int, bytes], bytes, Generation], forward: Callable[[int, bytes], bytes]) -> Generation:
    try:
        rank, frame = next(loop)
        while True:
            rank, frame = loop.send(forward(rank, frame))
    except StopIteration as done:
        return done.value


def generate_split(prompt: str, max_tokens: int, ranks: int = 3) -> Generation:
    """The model split over ``ranks`` stages in this process, driven as the gateway will drive workers."""
    stages = [RankedLlmStage(r, ranks) for r in range(ranks)]
    return _drive(pipeline_loop(prompt, max_tokens, ranks), lambda rank, frame: stages[rank].forward(frame))


Forward = Callable[[bytes], bytes]


def generate_split_with(prompt: str, max_tokens: int, forwards: Sequence[Forward]) -> Generation:
    """generate_split with each rank's forward supplied by the caller: one per rank, rank 0 first."""
    return _drive(pipeline_loop(prompt, max_tokens, len(forwards)), lambda rank, frame: forwards[rank](frame))

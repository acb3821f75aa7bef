"""Serving the demo ranked models (docs/ranks.md) with this SDK: ``demo-ranked-llm`` and
``demo-ranked-image``, one rank of a pipeline (``job.rank``) or whole (a job naming the model).

Twin of sdk/engines/demo/ranked-serving.ts: a pipeline may mix Python and TypeScript ranks and
gives the output of the model run whole, byte for byte: the same ``text``, ``finish_reason`` and
``model``, the same PNG. The output is what the last rank can know: it never sees the input, so
there is no ``usage`` (it would need the prompt's token count) and ``finish_reason`` comes from
the last token, ``stop`` after the end token, else ``length``.

Run one rank as a worker process::

    python3 -m switchyard_worker.ranked_demo --gateway http://127.0.0.1:8080 --token swt_... --rank 1/3
    python3 -m switchyard_worker.ranked_demo --rank 1/2 --model demo-ranked-image --tier trusted
"""
from __future__ import annotations

import argparse
import math
import sys
from typing import Any, Dict, List, Optional, Sequence

from .errors import WorkerError
from .job import Job
from .rank_stream import JobRank
from .ranked_frames import RankedFrameError
from .ranked_image import MODEL_ID as IMAGE_MODEL, RANKS as IMAGE_RANKS, SIDE, RankedImageStage, image_whole
from .ranked_llm import LAYERS, MODEL_ID as LLM_MODEL, RankedLlmStage, prompt_frame, read_token_frame
from .types import Artifact
from .ranked_vocab import END_TOKEN, VOCAB, detokenize, tokenize
from .worker import Worker

LLM_KIND = "inference:llm:text-generate"
IMAGE_KIND = "inference:image:generate"
#: The ranked model of each kind served here.
DEMO_RANKED_MODELS = {LLM_KIND: LLM_MODEL, IMAGE_KIND: IMAGE_MODEL}
#: The llm kind's default ``max_tokens``, the demo engine's for every llm model.
DEFAULT_MAX_TOKENS = 256


def _str(input: Dict[str, Any], key: str) -> str:
    value = input.get(key)
    return value if isinstance(value, str) else ""


def _max_tokens(input: Dict[str, Any]) -> int:
    """``max_tokens`` clamped to [1, 1000000] and rounded as JavaScript's Math.round does; 256 when absent."""
    value = input.get("max_tokens")
    n = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) else DEFAULT_MAX_TOKENS
    return int(math.floor(min(1_000_000.0, max(1.0, n)) + 0.5))


def _prompt_of(input: Dict[str, Any]) -> str:
    """The prompt: ``prompt``, else the text of the messages (the OpenAI surface sends those)."""
    prompt = _str(input, "prompt")
    messages = input.get("messages")
    if prompt or not isinstance(messages, list):
        return prompt

    def text_of(content: Any) -> str:
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return " ".join(p["text"] if isinstance(p, dict) and isinstance(p.get("text"), str) else "" for p in content)
        return ""

    return "\n".join(text_of(m.get("content")) if isinstance(m, dict) else "" for m in messages)


def _llm_result(tokens: List[int]) -> Dict[str, Any]:
    return {"text": detokenize(tokens), "finish_reason": "stop" if tokens and tokens[-1] == END_TOKEN else "length", "model": LLM_MODEL}


def _stream_token(job: Job, tokens: List[int]) -> None:
    """A generated token's word as the text's next delta (the end token writes nothing)."""
    token = tokens[-1]
    if token != END_TOKEN:
        job.output(VOCAB[token] if len(tokens) == 1 else f" {VOCAB[token]}")


def _llm_whole(job: Job) -> Dict[str, Any]:
    max_tokens = _max_tokens(job.input)
    stage = RankedLlmStage(0, 1)
    tokens: List[int] = []
    frame = stage.forward(prompt_frame(tokenize(_prompt_of(job.input))))
    while True:
        tokens.append(read_token_frame(frame)[1])
        _stream_token(job, tokens)
        if tokens[-1] == END_TOKEN or len(tokens) >= max_tokens:
            return _llm_result(tokens)
        job.raise_if_cancelled()
        frame = stage.forward(frame)


def _llm_rank(job: Job, rank: JobRank) -> Optional[Dict[str, Any]]:
    """Rank 0 holds the loop: it sends the prompt's activations and, for each token frame the last
    rank sends back, decides whether to go on (not after the end token or ``max_tokens`` tokens); a
    middle rank forwards each frame through its layers; the last rank samples each token, streams
    its word and sends it back to rank 0. Each ends its stream when done, so the end flags run
    down the pipeline from rank 0 and the last rank finishes last."""
    if rank.count > LAYERS:
        raise WorkerError(f"{LLM_MODEL} splits into at most {LAYERS} ranks, not {rank.count}", "unsupported_model", False)
    stage = RankedLlmStage(rank.index, rank.count)
    if rank.first:
        max_tokens = _max_tokens(job.input)
        generated = 0
        rank.send(stage.forward(prompt_frame(tokenize(_prompt_of(job.input)))))
        for frame in rank.frames():
            token = read_token_frame(frame)[1]
            generated += 1
            if token == END_TOKEN or generated >= max_tokens:
                break
            rank.send(stage.forward(frame))
        rank.end()
        return None
    if not rank.last:
        for frame in rank.frames():
            rank.send(stage.forward(frame))
        return None
    tokens: List[int] = []
    for frame in rank.frames():
        out = stage.forward(frame)
        tokens.append(read_token_frame(out)[1])
        _stream_token(job, tokens)
        rank.send(out)
    if not tokens:
        raise WorkerError(f"{LLM_MODEL}: the ranks before ended their streams before any token", "engine_error", True)
    rank.end()
    return _llm_result(tokens)


def _image_result(png: bytes) -> Dict[str, Any]:
    return {"files": [Artifact("image.png", png, "image/png")], "width": SIDE, "height": SIDE}


def _image_rank(job: Job, rank: JobRank) -> Optional[Dict[str, Any]]:
    """Rank 0 sends the prompt's latent, rank 1 renders it to the PNG."""
    if rank.count != IMAGE_RANKS:
        raise WorkerError(f"{IMAGE_MODEL} is served in {IMAGE_RANKS} ranks, not {rank.count}", "unsupported_model", False)
    stage = RankedImageStage(rank.index)
    if rank.first:
        rank.send(stage.forward(prompt_frame(tokenize(_str(job.input, "prompt")), IMAGE_MODEL)))
        rank.end()
        return None
    png: Optional[bytes] = None
    for frame in rank.frames():
        if png is not None:
            raise RankedFrameError("ranked frame: a second latent frame sent to rank 1 of 2 (a picture takes one)")
        png = stage.forward(frame)
    if png is None:
        raise WorkerError(f"{IMAGE_MODEL}: rank 0 ended its stream without a latent", "engine_error", True)
    rank.end()
    return _image_result(png)


def serve_ranked_demo(job: Job) -> Optional[Dict[str, Any]]:
    """The handler (sync: a thread of its own) of both kinds: a rank lease of a demo ranked model,
    or a whole job naming one."""
    rank = job.rank
    model = rank.model if rank is not None else job.input.get("model")
    if DEMO_RANKED_MODELS.get(job.kind) != model:
        served = " and ".join(f"{m} ({k})" for k, m in DEMO_RANKED_MODELS.items())
        raise WorkerError(f"this worker serves {served}, not {model} for {job.kind}", "unsupported_model", False)
    if job.kind == LLM_KIND:
        result = _llm_rank(job, rank) if rank is not None else _llm_whole(job)
    else:
        result = _image_rank(job, rank) if rank is not None else _image_result(image_whole(_str(job.input, "prompt")))
    job.progress(1, "done")
    return result


def ranked_demo_worker(model: str, index: int, count: int, **options: Any) -> Worker:
    """A Worker serving rank ``index`` of ``count`` of ``model`` (``options``: Worker's, e.g. gateway, token, tier)."""
    kind = next((k for k, m in DEMO_RANKED_MODELS.items() if m == model), None)
    if kind is None:
        raise ValueError(f"the demo ranked models are {', '.join(DEMO_RANKED_MODELS.values())}, not {model}")
    if model == IMAGE_MODEL and count != IMAGE_RANKS:
        raise ValueError(f"{IMAGE_MODEL} is served in {IMAGE_RANKS} ranks, not {count}")
    if model == LLM_MODEL and not 2 <= count <= LAYERS:
        raise ValueError(f"{LLM_MODEL} is served in 2 to {LAYERS} ranks, not {count}")
    if not 0 <= index < count:
        raise ValueError(f"rank {index} is not one of 0..{count - 1}")
    return Worker(handlers={kind: serve_ranked_demo}, models={kind: [{"id": model, "rank": {"index": index, "count": count}}]}, **options)


def _rank_arg(text: str) -> Any:
    try:
        index, count = (int(part) for part in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--rank is INDEX/COUNT, e.g. 1/3, not {text!r}") from None
    return index, count


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog="python3 -m switchyard_worker.ranked_demo", description="Serve one rank of a demo ranked model (docs/ranks.md) to a Switchyard gateway.")
    parser.add_argument("--gateway", help="the gateway's http(s):// base URL (default: SWITCHYARD_GATEWAY)")
    parser.add_argument("--token", help="a worker token swt_... (default: SWITCHYARD_WORKER_TOKEN)")
    parser.add_argument("--rank", type=_rank_arg, required=True, metavar="INDEX/COUNT", help="the rank served, e.g. 1/3 (0-based)")
    parser.add_argument("--model", default=LLM_MODEL, choices=sorted(DEMO_RANKED_MODELS.values()), help=f"default {LLM_MODEL}")
    parser.add_argument("--tier", default="open", choices=("open", "trusted"))
    parser.add_argument("--slots", type=int, default=1)
    parser.add_argument("--identity", help="the worker's name across reconnections (default: a random one)")
    args = parser.parse_args(argv)
    index, count = args.rank
    try:
        worker = ranked_demo_worker(args.model, index, count, gateway=args.gateway, token=args.token, tier=args.tier, slots=args.slots, identity=args.identity)
    except ValueError as err:
        parser.error(str(err))
    worker.run()


if __name__ == "__main__":
    main(sys.argv[1:])
